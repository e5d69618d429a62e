//===- VolumeCommand.h - `medrun volume`: inspect, slice and convert volume files ---===//
#ifndef MEDRUN_TOOL_VOLUMECOMMAND_H
#define MEDRUN_TOOL_VOLUMECOMMAND_H

#include <cstdint>
#include <string>

namespace medrun {

/// Prints what openVolume reads from `path` (format, shape, type, spacing, chunks,
/// affine; `json` as one JSON object); with `out`, writes the box `box` ("Z,Y,X:D,H,W",
/// "" for all of it) there in any writable format: float32 for float volumes, int64 for
/// integer ones, the spacing and affine (translated to the box) kept. `channel` >= 0:
/// that channel of a C x D x H x W array (openChannel).
int volumeCommand(const std::string &path, const std::string &box, const std::string &out,
                  bool json, int64_t channel = -1);

} // namespace medrun

#endif // MEDRUN_TOOL_VOLUMECOMMAND_H
