//===- FuzzTorch.cpp - the PyTorch file reader under libFuzzer ------------------===//
//
// readTorchStateDict parses untrusted files (a zip container and a pickle it interprets as
// data): whatever the bytes, it returns a state_dict or throws medrun::Error.
//
//===----------------------------------------------------------------------------------===//
#include "FuzzInput.h"

#include "medrun/Error.h"
#include "medrun/TorchFile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    const std::string &path = fuzzInputFile(data, size, ".pth");
    if (medrun::isTorchFile(path))
      medrun::TensorMap t = medrun::readTorchStateDict(path);
  } catch (const medrun::Error &) {
  }
  return 0;
}
