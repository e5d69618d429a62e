//===- CudaCompile.cpp - NVRTC: CUDA C++ to sm_90 cubin and PTX, no GPU needed ----===//
//
// Compiled with MED_HAVE_NVRTC when CMake found the CUDA toolkit; otherwise compileCuda
// reports that this medc cannot generate CUDA code. The kernels need no headers (the
// generated prelude is self-contained), so no include path is passed. The modules of one
// artifact compile on threads of their own: NVRTC time is most of `medc compile --target
// cuda`, and NVRTC programs share nothing.
//
//===----------------------------------------------------------------------------------===//

#include "med/Target/Cuda.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <sstream>
#include <thread>

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

// ---- the on-disk cubin cache -----------------------------------------------------------
//
// One file per (source, options, NVRTC version), named by the SHA-256 of the three: a
// header line, the sizes, the cubin, the PTX and the SHA-256 of both, so a truncated or
// altered entry is recompiled rather than used. Written to a temporary file and renamed.

constexpr llvm::StringLiteral kCacheMagic = "medc-cubin-cache 1\n";

/// The cache directory: $MEDC_CACHE_DIR, else $XDG_CACHE_HOME/medc/cubin, else
/// ~/.cache/medc/cubin; empty (no cache) when MEDC_CUBIN_CACHE=off or no home is known.
std::string cacheDir() {
  if (auto off = llvm::sys::Process::GetEnv("MEDC_CUBIN_CACHE"); off && *off == "off")
    return "";
  if (auto dir = llvm::sys::Process::GetEnv("MEDC_CACHE_DIR"); dir && !dir->empty())
    return *dir;
  llvm::SmallString<256> path;
  if (auto xdg = llvm::sys::Process::GetEnv("XDG_CACHE_HOME"); xdg && !xdg->empty())
    path = *xdg;
  else if (llvm::sys::path::home_directory(path))
    llvm::sys::path::append(path, ".cache");
  else
    return "";
  llvm::sys::path::append(path, "medc", "cubin");
  return std::string(path);
}

std::string sha256(llvm::StringRef bytes) {
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(bytes)), /*LowerCase=*/true);
}

std::string entryPath(const std::string &dir, const std::string &key) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, key + ".bin");
  return std::string(path);
}

/// The cached binary for `key`, if a complete, intact entry exists.
std::optional<CudaBinary> lookup(const std::string &dir, const std::string &key) {
  auto file = llvm::MemoryBuffer::getFile(entryPath(dir, key));
  if (!file)
    return std::nullopt;
  llvm::StringRef data = (*file)->getBuffer();
  if (!data.consume_front(kCacheMagic))
    return std::nullopt;
  auto [sizes, rest] = data.split('\n');
  auto [cubinSize, ptxSize] = sizes.split(' ');
  size_t nc = 0, np = 0;
  if (cubinSize.getAsInteger(10, nc) || ptxSize.getAsInteger(10, np) || nc == 0 ||
      rest.size() != nc + np + 64)
    return std::nullopt;
  CudaBinary bin;
  bin.cubin = rest.substr(0, nc).str();
  bin.ptx = rest.substr(nc, np).str();
  if (sha256(bin.cubin + bin.ptx) != rest.substr(nc + np) ||
      llvm::StringRef(bin.cubin).take_front(4) != "\x7f" "ELF")
    return std::nullopt;
  bin.cached = true;
  return bin;
}

/// Stores `bin` under `key`; a cache that cannot be written is skipped silently (the
/// artifact does not depend on it).
void store(const std::string &dir, const std::string &key, const CudaBinary &bin) {
  if (llvm::sys::fs::create_directories(dir))
    return;
  llvm::SmallString<256> tmp;
  int fd = -1;
  if (llvm::sys::fs::createUniqueFile(entryPath(dir, key) + ".tmp-%%%%%%", fd, tmp))
    return;
  {
    llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
    out << kCacheMagic << bin.cubin.size() << ' ' << bin.ptx.size() << '\n' << bin.cubin
        << bin.ptx << sha256(bin.cubin + bin.ptx);
    if (out.has_error()) {
      out.clear_error();
      llvm::sys::fs::remove(tmp);
      return;
    }
  }
  if (llvm::sys::fs::rename(tmp, entryPath(dir, key)))
    llvm::sys::fs::remove(tmp);
}
} // namespace

namespace {
/// NVRTC's version, "13.0".
std::string nvrtcVersionString() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

/// One translation unit, named `file` in NVRTC's messages; `what` says which in an error.
llvm::Expected<CudaBinary> compileOne(const std::string &source, const std::string &arch,
                                      bool fmad,
                                      const std::string &version, const std::string &file,
                                      const std::string &what) {
  auto start = std::chrono::steady_clock::now();
  const std::string dir = cacheDir();
  const std::string key =
      sha256(source + '\0' + arch + (fmad ? " fmad" : " nofmad") + '\0' + version);
  if (!dir.empty())
    if (std::optional<CudaBinary> hit = lookup(dir, key)) {
      hit->version = version;
      hit->seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return *hit;
    }
  CudaBinary bin;
  bin.version = version;

  nvrtcProgram prog;
  if (nvrtcResult r = nvrtcCreateProgram(&prog, source.c_str(), file.c_str(), 0, nullptr,
                                         nullptr);
      r != NVRTC_SUCCESS)
    return llvm::createStringError(std::string("NVRTC: cannot create the program: ") +
                                   nvrtcGetErrorString(r));
  std::string archOpt = "--gpu-architecture=sm_" + arch;
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
        llvm::formatv("NVRTC {0} failed to compile the generated CUDA source{1} for sm_{2} ({3}).\n"
                      "--- source ---\n{4}--- NVRTC log ---\n{5}",
                      bin.version, what, arch, nvrtcGetErrorString(r), numbered(source), bin.log)
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
  if (!dir.empty())
    store(dir, key, bin);
  bin.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return bin;
}
} // namespace

llvm::Expected<CudaBinary> mlir::med::compileCuda(const std::string &source, int arch,
                                                  bool fmad) {
  return compileOne(source, std::to_string(arch), fmad, nvrtcVersionString(), "medc_kernels.cu",
                    "");
}

llvm::Expected<std::vector<CudaBinary>>
mlir::med::compileCudaModules(const std::vector<std::string> &sources,
                              const std::vector<std::string> &archs, bool fmad,
                              unsigned threads) {
  if (archs.size() != sources.size())
    return llvm::createStringError("compileCudaModules: one architecture per module");
  const std::string version = nvrtcVersionString();
  std::vector<std::optional<llvm::Expected<CudaBinary>>> results(sources.size());
  // NVRTC programs are independent: each worker takes the next module not yet taken.
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t m = next++; m < sources.size(); m = next++)
      results[m].emplace(compileOne(
          sources[m], archs[m], fmad, version, "medc_module_" + std::to_string(m) + ".cu",
          sources.size() == 1 ? std::string()
                              : llvm::formatv(" (module {0} of {1})", m, sources.size()).str()));
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::min<size_t>(std::max(threads, 1u), sources.size()); ++t)
    pool.emplace_back(work);
  work();
  for (std::thread &t : pool)
    t.join();
  // The first failing module in module order is reported (the same one on every run); the
  // others' errors are dropped.
  std::vector<CudaBinary> out;
  llvm::Error first = llvm::Error::success();
  for (auto &r : results) {
    if (!*r) {
      if (first)
        llvm::consumeError(r->takeError());
      else
        first = r->takeError();
      continue;
    }
    out.push_back(std::move(**r));
  }
  if (first)
    return std::move(first);
  return out;
}

#else

bool mlir::med::haveNvrtc() { return false; }

namespace {
llvm::Error noNvrtc() {
  return llvm::createStringError(
      "this medc was built without the CUDA toolkit (NVRTC), so it cannot generate CUDA "
      "kernels; reconfigure with the toolkit installed (CUDAToolkit_ROOT=/usr/local/cuda) or "
      "compile with --target cpu");
}
} // namespace

llvm::Expected<CudaBinary> mlir::med::compileCuda(const std::string &, int, bool) {
  return noNvrtc();
}

llvm::Expected<std::vector<CudaBinary>>
mlir::med::compileCudaModules(const std::vector<std::string> &, const std::vector<std::string> &,
                              bool, unsigned) {
  return noNvrtc();
}

#endif
