//===- FuzzHdf5.cpp - the HDF5 volume reader under libFuzzer --------------------------===//
//
// Each input is an HDF5 file read as `medrun volume X.h5` reads it (Hdf5.cpp over libhdf5):
// its first dataset as a volume and as channels, then voxels through the chunk cache
// (FuzzVolume.h). libhdf5 itself is not built with the sanitizers: what it does wrong on a
// hostile file shows only when it crashes or our checks see its answers
// (docs/reliability.md).
//
//===----------------------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "FuzzVolume.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzzVolumeFile(fuzzInputFile(data, size, ".h5"));
  return 0;
}
