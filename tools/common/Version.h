//===- Version.h - what `--version` prints in every tool --------------------------===//
//
// medc, med-opt, medrun and medcheck print the same first line (the project version and the
// git commit the tools were built from) and then the libraries each one links or loads.
//
//===----------------------------------------------------------------------------------===//
#ifndef MED_TOOLS_VERSION_H
#define MED_TOOLS_VERSION_H

#include <string>
#include <utility>
#include <vector>

namespace medtool {

/// A library and its version, e.g. {"MLIR", "19.1.7"}; for a library loaded at run time
/// the version found or why it does not load.
using VersionLines = std::vector<std::pair<std::string, std::string>>;

/// "0.1.0"
const char *projectVersion();
/// `git describe --always --dirty` of the source tree at build time, or "unknown".
const char *gitCommit();

/// "<tool> <version> (git <commit>)\n" followed by "  <library>: <version>\n" per line.
std::string versionText(const std::string &tool, const VersionLines &libraries);

} // namespace medtool

#endif // MED_TOOLS_VERSION_H
