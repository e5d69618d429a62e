//===- FuzzHdf5.cpp - the HDF5 volume reader under libFuzzer --------------------------===//
//
// Each input is an HDF5 file read as `medrun volume X.h5` reads it (Hdf5.cpp over libhdf5):
// its first dataset as a volume and as channels, then voxels through the chunk cache
// (FuzzVolume.h). libhdf5 itself is not built with the sanitizers (ASan's interceptors of
// memcpy and malloc still see it) and runs in each reader's child process: its crashes,
// sanitizer reports and hangs there end the child and are the reader's Error, as for any
// malformed file; what the parent does with the child's answers is checked here
// (docs/reliability.md).
//
//===----------------------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "FuzzVolume.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzzVolumeFile(fuzzInputFile(data, size, ".h5"));
  return 0;
}
