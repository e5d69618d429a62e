//===- Artifact.h - the compiled program as the runtime sees it -----------------===//
//
// The artifact is the one contract between medc and medrun (docs/artifact.md): a
// manifest, the parameter table and an op-level plan per function. This header is its
// in-memory form; Artifact::load reads and validates a file.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_ARTIFACT_H
#define MEDRUN_ARTIFACT_H

#include "medrun/Tensor.h"

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace medrun {

using AttrValue =
    std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>>;

/// Type of one SSA value of a function.
struct ValueInfo {
  DType dtype = DType::F32;
  Shape shape;
  /// How the value is stored: its dtype, or under mixed precision the type medc's
  /// med-assign-storage decided (bf16 or f16 for activations, f32 for the rest).
  DType storage = DType::F32;
};

struct Function;

/// One med op. Operands are named groups of value ids (ODS operand names: "input",
/// "weight", "bias", ...); an absent optional operand is an empty group. Every attribute is
/// present, defaults included.
struct OpInfo {
  std::string kind; ///< op name without the dialect prefix: "conv3d", "group_norm", ...
  std::vector<std::pair<std::string, std::vector<int>>> operands;
  std::vector<int> results;
  std::map<std::string, AttrValue> attrs;
  std::string location; ///< "file:line:col" of the op in the source program
  /// Master-weight math of a training step (medc's `med.fp32`): computed and kept in f32
  /// even when the activations are stored in bf16 or f16.
  bool fp32 = false;
  /// A `fusion` op's body (Artifact::fusions), which computes its results from its inputs.
  std::shared_ptr<const Function> body;

  const std::vector<int> &operand(const std::string &name) const;
  /// The value of a group that must hold exactly one value.
  int single(const std::string &name) const;
  /// The value of an optional operand, if present.
  std::optional<int> optional(const std::string &name) const;

  int64_t intAttr(const std::string &name) const;
  double floatAttr(const std::string &name) const;
  bool boolAttr(const std::string &name) const;
  const std::string &strAttr(const std::string &name) const;
  /// Lists are returned by value: JSON does not tell an empty or integral list of numbers
  /// from a list of integers, so both accessors accept either.
  std::vector<int64_t> intsAttr(const std::string &name) const;
  std::vector<double> floatsAttr(const std::string &name) const;

  /// "'med.conv3d' at file:line:col", for messages.
  std::string describe() const;
};

/// One step of a function's CUDA launch plan (docs/artifact.md, "cuda_plan").
struct CudaStep {
  enum class Kind { Launch, Param, Alias, Assign, Place };
  Kind kind = Kind::Launch;
  int op = -1;                      ///< index of the op in Function::ops it belongs to
  std::string kernel;               ///< Launch: the kernel's name in the module
  std::array<uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  uint32_t shared = 0;              ///< Launch: dynamic shared memory in bytes
  std::vector<int> args;            ///< Launch: buffer ids, one device pointer each
  std::vector<uint32_t> scalars;    ///< Launch: 32-bit unsigned arguments after the pointers
  std::string name;                 ///< Param / Assign: the parameter
  int value = -1;                   ///< Param, Alias: the value defined; Assign: the value assigned
  int from = -1;                    ///< Alias: the value whose buffer `value` shares;
                                    ///< Place: the value whose buffer holds `value`
  size_t offset = 0;                ///< Place: where `value` starts in it, in bytes
  /// Assign: the value's producer may write it straight into the resident tensor `name`
  /// (it reads that tensor at the same element first, and nothing reads it after).
  bool inPlace = false;
};

/// A function's CUDA plan. Buffer ids below Function::values.size() are values; id
/// values.size() + k is scratch buffer k (scratch[0] is the 4-byte status word kernels set
/// to op index + 1 when they find invalid data).
struct CudaPlan {
  std::vector<int64_t> scratch; ///< bytes of each scratch buffer
  std::vector<CudaStep> steps;  ///< in execution order
};

struct Function {
  std::string name;
  std::vector<ValueInfo> values; ///< indexed by value id
  std::vector<int> inputs;       ///< value ids of the arguments
  std::vector<std::string> inputNames; ///< "image", "target", "lr", ... ("arg<i>" if unnamed)
  std::vector<int> outputs;      ///< value ids returned
  std::vector<std::string> outputNames; ///< "out0", ..., "grad.<parameter>", "grad.arg0"
  std::vector<OpInfo> ops;       ///< in execution order
  /// The precision a training step was compiled for: "fp32", "bf16-mixed" or "fp16-mixed"
  /// ("" when the artifact records none: not a training step). precisionOf() in
  /// Executor.h maps it to the CPU backend's precision.
  std::string precision;
  double initLossScale = 0; ///< fp16-mixed: the loss_scale input of the first step
  std::string fusionTemplate; ///< a fusion body: the template that runs it ("elementwise")
  std::optional<CudaPlan> cuda;  ///< present in artifacts compiled with --target cuda
};

struct ParameterInfo {
  std::string name; ///< PyTorch state_dict key
  DType dtype = DType::F32;
  Shape shape;
  std::string init;   ///< "zeros", "ones", "uniform" or "copy"
  int64_t fanIn = 0;   ///< for "uniform"
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
  static constexpr uint32_t kFormatVersion = 6;
  /// Version 4 added fusion bodies, version 5 flat buffers, version 6 storage types; older
  /// plans are read no more
  /// (recompile them).
  static constexpr uint32_t kOldestFormatVersion = 6;

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
