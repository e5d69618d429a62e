//===- FuzzNpyVolume.cpp - .npy files as volumes under libFuzzer --------------------===//
//
// The path `medrun volume X.npy` takes: NpyVolume.cpp's reader (the header is readNpy's,
// the data read by slabs of planes in place), as a volume and as channels.
//
//===----------------------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "FuzzVolume.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzzVolumeFile(fuzzInputFile(data, size, ".npy"));
  return 0;
}
