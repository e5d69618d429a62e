//===- CudaCompile.cpp - NVRTC: CUDA C++ to sm_90 cubin and PTX, no GPU needed ----===//
//
// Compiled with MED_HAVE_NVRTC when CMake found the CUDA toolkit; otherwise compileCuda
// reports that this medc cannot generate CUDA code. The kernels need no headers (the
// generated prelude is self-contained), so no include path is passed.
//
//===----------------------------------------------------------------------------------===//

#include "med/Target/Cuda.h"

#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <sstream>

#ifdef MED_HAVE_NVRTC
#include <nvrtc.h>
#endif

using namespace mlir::med;

#ifdef MED_HAVE_NVRTC

bool mlir::med::haveNvrtc() { return true; }

namespace {
/// The source with line numbers, for compile errors.
std::string numbered(const std::string &source) {
  std::ostringstream out;
  std::istringstream in(source);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    out << llvm::formatv("{0,6}  ", n).str() << line << "\n";
  return out.str();
}
} // namespace

llvm::Expected<CudaBinary> mlir::med::compileCuda(const std::string &source, int arch,
                                                  bool fmad) {
  auto start = std::chrono::steady_clock::now();
  CudaBinary bin;
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  bin.version = std::to_string(major) + "." + std::to_string(minor);

  nvrtcProgram prog;
  if (nvrtcResult r = nvrtcCreateProgram(&prog, source.c_str(), "medc_kernels.cu", 0, nullptr,
                                         nullptr);
      r != NVRTC_SUCCESS)
    return llvm::createStringError(std::string("NVRTC: cannot create the program: ") +
                                   nvrtcGetErrorString(r));
  std::string archOpt = "--gpu-architecture=sm_" + std::to_string(arch);
  const char *options[] = {archOpt.c_str(), "-default-device", "--std=c++17",
                           fmad ? "--fmad=true" : "--fmad=false"};
  nvrtcResult r = nvrtcCompileProgram(prog, 4, options);
  size_t logSize = 0;
  nvrtcGetProgramLogSize(prog, &logSize);
  bin.log.resize(logSize);
  if (logSize)
    nvrtcGetProgramLog(prog, bin.log.data());
  while (!bin.log.empty() && (bin.log.back() == '\0' || bin.log.back() == '\n'))
    bin.log.pop_back();
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    return llvm::createStringError(
        llvm::formatv("NVRTC {0} failed to compile the generated CUDA source for sm_{1} ({2}).\n"
                      "--- source ---\n{3}--- NVRTC log ---\n{4}",
                      bin.version, arch, nvrtcGetErrorString(r), numbered(source), bin.log)
            .str());
  }
  size_t size = 0;
  nvrtcGetCUBINSize(prog, &size);
  bin.cubin.resize(size);
  if (size)
    nvrtcGetCUBIN(prog, bin.cubin.data());
  // A program compiled for sm_XX still holds the compute_XX PTX it went through.
  size = 0;
  nvrtcGetPTXSize(prog, &size);
  bin.ptx.resize(size);
  if (size)
    nvrtcGetPTX(prog, bin.ptx.data());
  while (!bin.ptx.empty() && bin.ptx.back() == '\0')
    bin.ptx.pop_back();
  nvrtcDestroyProgram(&prog);
  if (bin.cubin.empty())
    return llvm::createStringError("NVRTC produced no cubin");
  bin.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return bin;
}

#else

bool mlir::med::haveNvrtc() { return false; }

llvm::Expected<CudaBinary> mlir::med::compileCuda(const std::string &, int) {
  return llvm::createStringError(
      "this medc was built without the CUDA toolkit (NVRTC), so it cannot generate CUDA "
      "kernels; reconfigure with the toolkit installed (CUDAToolkit_ROOT=/usr/local/cuda) or "
      "compile with --target cpu");
}

#endif
