//===- Version.cpp - what `--version` prints in every tool ------------------------===//
#include "Version.h"

#include "GitCommit.h" // generated at build time (GitCommit.cmake)

const char *med::projectVersion() { return MED_VERSION; }

const char *med::gitCommit() { return MED_GIT_COMMIT; }

std::string med::versionText(const std::string &tool, const VersionLines &libraries) {
  std::string text = tool + " " + projectVersion() + " (git " + gitCommit() + ")\n";
  for (const auto &[name, version] : libraries)
    text += "  " + name + ": " + version + "\n";
  return text;
}
