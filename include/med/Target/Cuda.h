//===- Cuda.h - CUDA kernels and launch plans for the artifact ------------------===//
//
// The CUDA backend's compile-time half (docs/architecture.md, "CUDA backend"):
//
//  * generateCuda reads the op-level plan of every function of an artifact document and
//    emits one CUDA C++ kernel per op (shapes baked in as constants; fp32), plus a launch
//    plan per function ("cuda_plan": kernel launches, parameter bindings, aliases and
//    deferred assigns) that it adds to the document.
//  * compileCuda compiles that source with NVRTC into an sm_90 cubin and PTX, with no GPU;
//    compileCudaModules compiles the kernels split into independent modules in parallel.
//
// The plan and the source work on the JSON document alone, the same contract the runtime
// reads (docs/artifact.md), read by the runtime's own plan reader (medrun/Plan.h), so the
// runtime never needs to know an op's MLIR form.
//
//===----------------------------------------------------------------------------------===//
#ifndef MED_TARGET_CUDA_H
#define MED_TARGET_CUDA_H

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <string>
#include <vector>

namespace mlir::med {

struct CudaProgram {
  std::string source;  ///< one translation unit holding every kernel (medc --emit cuda)
  /// The same kernels as independent translation units, each the prelude and its share of
  /// the kernels; a kernel's module depends on its code alone (a hash), so an edit changes
  /// only the modules of the kernels it touches.
  std::vector<std::string> modules;
  /// Per module: the architecture it must be compiled for, "" for the one asked (--cuda-arch)
  /// or "90a" (the wgmma variants' module, the last).
  std::vector<std::string> moduleArchs;
  size_t kernels = 0;  ///< distinct kernels in the source (identical ones are shared)
  size_t launches = 0; ///< kernel launches over all functions' plans
};

/// Emits the kernels of every function of `doc` (an artifact document, docs/artifact.md)
/// and adds its launch plan to each function as "cuda_plan". Fails naming the op when one
/// has no CUDA lowering (an unsupported op or element type). The kernels are split into at
/// most `modules` modules (fewer when some would hold no kernel). `wgmma`: also the
/// templates' sm_90a variants, in a module of their own (CudaProgram::moduleArchs).
/// `smCount`: the SMs of the target GPU (grids that fill it). `mlpPipeline`: tiles in flight
/// in the mlp templates' resident kernels (1: one at a time).
llvm::Expected<CudaProgram> generateCuda(llvm::json::Object &doc, size_t modules = 1,
                                         int64_t scratchBytes = int64_t{512} << 20,
                                         int64_t mlpResidentBytes = int64_t{48} << 10,
                                         int64_t mlpResidentBlocks = 0, bool wgmma = false,
                                         int64_t smCount = 132, int64_t mlpPipeline = 2);

struct CudaBinary {
  std::string cubin;   ///< sm_<arch> machine code
  std::string ptx;     ///< compute_<arch> PTX (the fallback the driver JIT-compiles)
  std::string log;     ///< NVRTC's log (warnings)
  std::string version; ///< NVRTC version, "13.0"
  double seconds = 0;  ///< compile time
  bool cached = false; ///< taken from the on-disk cubin cache (compileCuda)
};

/// True if medc was built with NVRTC (the CUDA toolkit was found at configure time).
bool haveNvrtc();

/// Whether the CUDA code generator has an emitter for the plan op `kind` (the op table's
/// completeness test).
bool haveCudaEmitter(llvm::StringRef kind);

/// Compiles `source` with NVRTC for `arch` (e.g. 90: --gpu-architecture=sm_90,
/// -default-device, --std=c++17). On a compile error, the error's message holds the
/// numbered source and NVRTC's log.
/// `fmad`: let NVRTC contract a*b+c into fused multiply-adds (its default); without it every
/// product and sum rounds as on the CPU.
/// Results are cached on disk by the SHA-256 of source, options and NVRTC version
/// ($MEDC_CACHE_DIR, else $XDG_CACHE_HOME/medc/cubin or ~/.cache/medc/cubin;
/// MEDC_CUBIN_CACHE=off turns it off); an entry that fails its checksum is recompiled.
llvm::Expected<CudaBinary> compileCuda(const std::string &source, int arch, bool fmad = true);

/// Compiles each module as compileCuda does (each cached on its own), module m for
/// sm_<archs[m]> ("90", "90a"), up to `threads` at a time (NVRTC programs are
/// independent). Binaries in module order; on errors, the first failing module's.
llvm::Expected<std::vector<CudaBinary>>
compileCudaModules(const std::vector<std::string> &sources, const std::vector<std::string> &archs,
                   bool fmad, unsigned threads);

} // namespace mlir::med

#endif // MED_TARGET_CUDA_H
