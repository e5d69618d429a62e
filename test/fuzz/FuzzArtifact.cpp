//===- FuzzArtifact.cpp - the artifact reader and plan verifier under libFuzzer --===//
//
// Any input either loads or throws medrun::Error; anything else (a signal, a sanitizer
// report, another exception such as std::bad_alloc) is a finding. Inputs with a wrong
// checksum stop at the CRC, so the checksum is recomputed unless the input's first byte is 0:
// the fuzzer then reaches the JSON plan and the verifier behind it.
//
//===----------------------------------------------------------------------------------===//
#include "FuzzInput.h"

#include "medrun/Artifact.h"
#include "medrun/Error.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  if (bytes.size() >= 4 && bytes[0] != 0) {
    uint32_t crc = medrun::crc32(bytes.data(), bytes.size() - 4);
    for (int i = 0; i < 4; ++i)
      bytes[bytes.size() - 4 + i] = static_cast<char>(crc >> (8 * i));
  }
  const std::string &path =
      fuzzInputFile(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(), ".medc");
  try {
    medrun::Artifact a = medrun::Artifact::load(path);
  } catch (const medrun::Error &) {
  }
  return 0;
}
