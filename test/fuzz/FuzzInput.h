//===- FuzzInput.h - libFuzzer input as a file ----------------------------------===//
//
// The readers under test take a path, as the tools call them: each input is written to one
// file per process and read back from there.
//
//===----------------------------------------------------------------------------------===//
#ifndef MED_TEST_FUZZ_FUZZINPUT_H
#define MED_TEST_FUZZ_FUZZINPUT_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

inline const std::string &fuzzInputFile(const uint8_t *data, size_t size,
                                        const char *suffix = ".bin") {
  static const std::string path = [&] {
    const char *dir = std::getenv("TMPDIR");
    return std::string(dir ? dir : "/tmp") + "/med-fuzz-" + std::to_string(getpid()) + suffix;
  }();
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0)
    std::abort();
  return path;
}

#endif // MED_TEST_FUZZ_FUZZINPUT_H
