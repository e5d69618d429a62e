//===- FuzzZarr.cpp - the Zarr v2 reader: metadata and chunks under libFuzzer ---------===//
//
// Each input is a Zarr array: its parts, split at "\0ZARR\0", are .zarray, .zattrs and the
// chunk files 0.0.0, 0.0.1, 0.1.0, 0.1.1, 1.0.0, ..., 1.1.1, 0/0/0 and 0.0.0.0 (the first
// chunks of a 3-D grid, the '/' separator, a 4-D array). A part "-", an empty .zattrs and
// the parts after the last one are no file (a missing chunk); other empty parts are empty
// files. The array is written to a directory of its own per process and read as
// `medrun volume DIR.zarr` reads it (FuzzVolume.h): metadata, every codec, byte order,
// fill values, missing chunks.
//
//===----------------------------------------------------------------------------------===//
#include "FuzzVolume.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const fs::path dir = [] {
    const char *tmp = std::getenv("TMPDIR");
    return fs::path(tmp ? tmp : "/tmp") / ("med-fuzz-" + std::to_string(getpid()) + ".zarr");
  }();
  static const char *const names[] = {".zarray", ".zattrs", "0.0.0", "0.0.1", "0.1.0",
                                      "0.1.1",   "1.0.0",   "1.0.1", "1.1.0", "1.1.1",
                                      "0/0/0",   "0.0.0.0"};
  static const char sep[] = "\0ZARR\0";
  const size_t sepLen = sizeof sep - 1;
  fs::remove_all(dir);
  fs::create_directories(dir / "0" / "0");
  const char *p = reinterpret_cast<const char *>(data), *end = p + size;
  for (const char *name : names) {
    const char *next = static_cast<const char *>(memmem(p, end - p, sep, sepLen));
    const char *stop = next ? next : end;
    const bool none = (stop - p == 1 && *p == '-') || (stop == p && name == names[1]);
    if (!none) {
      FILE *f = std::fopen((dir / name).c_str(), "wb");
      if (!f || std::fwrite(p, 1, stop - p, f) != size_t(stop - p) || std::fclose(f) != 0)
        std::abort();
    }
    if (!next)
      break;
    p = next + sepLen;
  }
  fuzzVolumeFile(dir.string());
  return 0;
}
