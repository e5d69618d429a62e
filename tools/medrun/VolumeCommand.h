//===- VolumeCommand.h - `medrun volume`: inspect, slice and convert volume files ---===//
#ifndef MEDRUN_TOOL_VOLUMECOMMAND_H
#define MEDRUN_TOOL_VOLUMECOMMAND_H

#include <string>

namespace medrun {

/// Prints what openVolume reads from `path` (format, shape, type, spacing, chunks,
/// affine; `json` as one JSON object); with `out`, writes the box `box` ("Z,Y,X:D,H,W",
/// "" for all of it) there in any writable format: float32 for float volumes, int64 for
/// integer ones, the spacing and affine (translated to the box) kept.
int volumeCommand(const std::string &path, const std::string &box, const std::string &out,
                  bool json);

} // namespace medrun

#endif // MEDRUN_TOOL_VOLUMECOMMAND_H
