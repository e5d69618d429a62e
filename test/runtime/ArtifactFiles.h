//===- ArtifactFiles.h - artifact files for the runtime tests -------------------===//
#ifndef MEDRUN_TEST_ARTIFACTFILES_H
#define MEDRUN_TEST_ARTIFACTFILES_H

#include "medrun/Artifact.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include <unistd.h>

namespace medrun::test {

template <typename T> void appendLE(std::string &out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i)
    out.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
}

/// The artifact container (docs/artifact.md) around a JSON document.
inline std::string container(const std::string &json,
                             uint32_t version = Artifact::kFormatVersion) {
  std::string bytes(kArtifactMagic, 8);
  appendLE<uint32_t>(bytes, version);
  appendLE<uint32_t>(bytes, 0);
  appendLE<uint64_t>(bytes, json.size());
  bytes += json;
  if (version >= 3) // no binary sections
    appendLE<uint64_t>(bytes, 0);
  appendLE<uint32_t>(bytes, crc32(bytes.data(), bytes.size()));
  return bytes;
}

/// The files writeTemp made, removed when the test process ends.
struct TempFiles {
  std::set<std::string> paths;
  ~TempFiles() {
    for (const std::string &p : paths)
      std::remove(p.c_str());
  }
};

/// Writes `bytes` to a file of the temporary directory named `name`, prefixed with the
/// process id: ctest runs each test case as its own process, in parallel. The file goes
/// when the process ends.
inline std::string writeTemp(const std::string &name, const std::string &bytes) {
  static TempFiles files;
  std::string path = ::testing::TempDir() + std::to_string(getpid()) + "-" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  files.paths.insert(path);
  return path;
}

} // namespace medrun::test

#endif // MEDRUN_TEST_ARTIFACTFILES_H
