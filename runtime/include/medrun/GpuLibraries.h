//===- GpuLibraries.h - the GPU libraries the CUDA backend opens -------------------===//
#ifndef MEDRUN_GPULIBRARIES_H
#define MEDRUN_GPULIBRARIES_H

#include <string>
#include <utility>
#include <vector>

namespace medrun {

/// The libraries the CUDA backend opens at run time (dlopen, never linked): the CUDA driver,
/// cuDNN, cuBLASLt and NCCL, each with its version or why it does not load (for --version).
std::vector<std::pair<std::string, std::string>> gpuLibraryVersions();

} // namespace medrun

#endif // MEDRUN_GPULIBRARIES_H
