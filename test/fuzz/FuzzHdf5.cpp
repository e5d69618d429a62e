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
// The reader's zygote process is forked at the first open, and each child's fork copies the
// zygote's page tables: LLVMFuzzerInitialize opens a reader of an empty file (an Error) so
// that the zygote is forked while this process is small, before libFuzzer has read the
// corpus, installed its malloc hooks or set its death callback (a zygote forked at the
// first input held 38 MB of anonymous memory, this one 15 MB).
//
//===----------------------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "FuzzVolume.h"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  const uint8_t none = 0;
  fuzzVolumeFile(fuzzInputFile(&none, 0, ".h5"));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzzVolumeFile(fuzzInputFile(data, size, ".h5"));
  return 0;
}
