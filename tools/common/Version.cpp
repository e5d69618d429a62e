//===- Version.cpp - what `--version` prints in every tool ------------------------===//
#include "Version.h"

#include "GitCommit.h" // generated at build time (GitCommit.cmake)

const char *medtool::projectVersion() { return MED_VERSION; }

const char *medtool::gitCommit() { return MED_GIT_COMMIT; }

std::string medtool::versionText(const std::string &tool, const VersionLines &libraries) {
  std::string text = tool + " " + projectVersion() + " (git " + gitCommit() + ")\n";
  for (const auto &[name, version] : libraries)
    text += "  " + name + ": " + version + "\n";
  return text;
}
