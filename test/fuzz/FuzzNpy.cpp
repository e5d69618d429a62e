//===- FuzzNpy.cpp - the .npy reader under libFuzzer ----------------------------===//
#include "FuzzInput.h"

#include "medrun/Error.h"
#include "medrun/Npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    medrun::Tensor t = medrun::readNpy(fuzzInputFile(data, size, ".npy"));
  } catch (const medrun::Error &) {
  }
  return 0;
}
