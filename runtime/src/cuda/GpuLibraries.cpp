//===- GpuLibraries.cpp - the GPU libraries the CUDA backend opens ----------------===//
#include "medrun/GpuLibraries.h"

#include "Cublaslt.h"
#include "Cudnn.h"
#include "medrun/Cuda.h"
#include "medrun/Distributed.h"

namespace medrun {

std::vector<std::pair<std::string, std::string>> gpuLibraryVersions() {
  std::string why;
  auto line = [&](bool found, const std::string &version) {
    return found ? version + " (loaded at run time)" : "not found (" + why + ")";
  };
  std::vector<std::pair<std::string, std::string>> lines;
  bool driver = cudaAvailable(&why);
  lines.emplace_back("CUDA driver", driver ? "a GPU is present" : "not found (" + why + ")");
  bool dnn = cudnn::available(&why);
  lines.emplace_back("cuDNN", line(dnn, dnn ? cudnn::version() : ""));
  bool lt = cublaslt::available(&why);
  lines.emplace_back("cuBLASLt", line(lt, lt ? cublaslt::version() : ""));
  bool nccl = ncclAvailable(&why);
  lines.emplace_back("NCCL", line(nccl, nccl ? ncclVersion() : ""));
  return lines;
}

} // namespace medrun
