//===- FuzzSafetensors.cpp - the safetensors reader under libFuzzer -------------===//
#include "FuzzInput.h"

#include "medrun/Error.h"
#include "medrun/Safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    medrun::SafetensorsFile f = medrun::readSafetensors(fuzzInputFile(data, size, ".safetensors"));
  } catch (const medrun::Error &) {
  }
  return 0;
}
