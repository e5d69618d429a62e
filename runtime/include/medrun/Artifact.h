//===- Artifact.h - the compiled program as the runtime sees it -----------------===//
//
// The artifact is the one contract between medc and medrun (docs/artifact.md): a
// manifest, the parameter table and an op-level plan per function (medrun/Plan.h). This
// header is its in-memory form; Artifact::load reads and validates a file.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_ARTIFACT_H
#define MEDRUN_ARTIFACT_H

#include "medrun/Plan.h"
#include "medrun/Tensor.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace medrun {

struct ParameterInfo {
  std::string name; ///< PyTorch state_dict key
  DType dtype = DType::F32;
  Shape shape;
  std::string init;   ///< "zeros", "ones", "uniform", "constant" or "copy"
  int64_t fanIn = 0;   ///< for "uniform"
  float value = 0;     ///< for "constant"
  std::string source; ///< for "copy": the parameter whose initial value this starts as
  bool trainable = true; ///< false for optimizer/EMA state and frozen parameters
};

/// A `med.flat_buffer`: f32 state tensors laid out in one buffer (format version 5).
struct FlatBuffer {
  struct Member {
    std::string name; ///< a parameter of the table
    int64_t offset = 0; ///< its first element in the buffer
    Shape shape;        ///< the parameter's
  };
  std::string name;
  int64_t size = 0;      ///< elements (f32)
  int64_t alignment = 1; ///< every offset is a multiple of it
  std::vector<Member> members; ///< in ascending offsets
};

/// The members of `flat`, taken from `tensors` by name, laid out in one 1-D tensor of `dtype`
/// (zeros between them). Throws Error naming a missing member.
Tensor gatherFlat(const FlatBuffer &flat, const TensorMap &tensors, DType dtype);
/// Each member of `flat` cut out of `value` (1-D, laid out as `flat`) into `out`, by name.
void scatterFlat(const FlatBuffer &flat, const Tensor &value, TensorMap &out);

/// One independently compiled module of kernels: the sections' contents.
struct CudaModule {
  std::string source, cubin, ptx; ///< ptx empty when left out (--cuda-ptx=false)
  /// "" (the artifact's arch) or "sm_90a": a module of variants that only GPUs of exactly
  /// that architecture load; the others run the kernels the variants stand beside.
  std::string arch;
};

/// The CUDA part of an artifact compiled with `medc compile --target cuda`.
struct CudaInfo {
  std::string arch;   ///< "sm_90"
  std::string nvrtc;  ///< NVRTC version that compiled the kernels
  int64_t kernels = 0, launches = 0;
  std::vector<CudaModule> modules;
  /// The module whose source defines each kernel (the prelude's kernels, which every
  /// module has: the first).
  std::map<std::string, size_t> kernelModule;
};

struct Artifact {
  static constexpr uint32_t kFormatVersion = 11;
  /// Version 4 added fusion bodies, version 5 flat buffers, version 6 storage types,
  /// version 7 the data-parallel `all_reduce` op and CUDA step, version 8 medc's memory
  /// plan (`cuda_plan.memory`), version 9 sm_90a modules and launch variants, version 10
  /// the roles of fusion bodies (which the code generators read instead of matching
  /// again), version 11 the kernels' launch contracts (`cuda_plan.kernels`, which the plan
  /// verifier checks every launch against); older plans are read no more (recompile them).
  static constexpr uint32_t kOldestFormatVersion = 11;

  std::string path; ///< where it was loaded from (for messages)
  uint32_t version = kFormatVersion;
  std::string compiler;                      ///< e.g. "medc 0.1.0"
  std::string source;                        ///< the compiled file
  std::string sourceSha256;                  ///< hex digest of its contents
  std::map<std::string, std::string> options; ///< compile options
  std::vector<ParameterInfo> parameters;
  std::vector<Function> functions;
  std::vector<FlatBuffer> flatBuffers;
  /// Fusion bodies (plan v4), each once; `fusion` ops point at theirs (OpInfo::body).
  std::vector<std::shared_ptr<const Function>> fusions;
  std::map<std::string, std::string> sections; ///< binary sections by name (version 3)
  std::optional<CudaInfo> cuda;                ///< with --target cuda

  /// Reads and validates an artifact file; throws Error naming the file and the problem
  /// (missing, truncated, corrupted, another format version, malformed plan).
  static Artifact load(const std::string &path);

  /// The function `name`; throws Error listing the functions there are.
  const Function &function(const std::string &name) const;
  /// The parameter `name`, or nullptr.
  const ParameterInfo *parameter(const std::string &name) const;
  /// The flat buffer `name`, or nullptr.
  const FlatBuffer *flatBuffer(const std::string &name) const;
};

/// Artifact container framing, shared with medc (docs/artifact.md):
///   magic "MEDCART\0" | u32 version | u32 reserved | u64 json size | json |
///   (version 3) u64 section count | per section: u64 name size, name, u64 size, bytes |
///   u32 crc32
/// All integers little-endian; the CRC-32 (IEEE) covers every byte before it.
constexpr char kArtifactMagic[8] = {'M', 'E', 'D', 'C', 'A', 'R', 'T', '\0'};
uint32_t crc32(const void *data, size_t size, uint32_t crc = 0);

} // namespace medrun

#endif // MEDRUN_ARTIFACT_H
