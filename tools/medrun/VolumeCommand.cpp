//===- VolumeCommand.cpp - `medrun volume` ------------------------------------------===//
#include "VolumeCommand.h"

#include "medrun/Error.h"
#include "medrun/Sizes.h"
#include "medrun/Volume.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>

namespace medrun {
namespace {

Box3 parse3(const std::string &s, const std::string &what) {
  Box3 v{};
  int n = 0;
  size_t pos = 0;
  try {
    for (; n < 3 && pos <= s.size(); ++n) {
      size_t comma = s.find(',', pos);
      std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      size_t used = 0;
      v[n] = std::stoll(part, &used);
      if (used != part.size())
        throw Error("");
      pos = comma == std::string::npos ? s.size() + 1 : comma + 1;
    }
  } catch (...) {
    n = -1;
  }
  if (n != 3 || pos != s.size() + 1)
    throw Error(str("--box: expected Z,Y,X:D,H,W (corner and size), got '", what, "'"));
  return v;
}

} // namespace

int volumeCommand(const std::string &path, const std::string &box, const std::string &out,
                  bool asJson, int64_t channel) {
  // --box selects what -o writes; alone it would be ignored.
  if (!box.empty() && out.empty())
    throw Error(str("--box ", box, ": needs -o OUT (the box is what -o writes)"));
  auto v = channel < 0 ? openVolume(path) : openChannel(path, channel);
  const VolumeInfo &info = v->info();
  if (asJson) {
    nlohmann::json j = {{"path", info.path},
                        {"key", info.key},
                        {"format", info.format},
                        {"shape", info.shape},
                        {"dtype", voxelTypeName(info.type)},
                        {"spacing", info.spacing},
                        {"chunk", info.chunk},
                        {"channels", info.channels},
                        {"affine", info.affine}};
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("{}: {}, {}{}x{}x{} (z, y, x) {}, spacing {} x {} x {}, chunks {}x{}x{}\n",
               info.name(), info.format,
               channel < 0 ? "" : fmt::format("channel {} of {}, ", channel, info.channels),
               info.shape[0], info.shape[1], info.shape[2],
               voxelTypeName(info.type), info.spacing[0], info.spacing[1], info.spacing[2],
               info.chunk[0], info.chunk[1], info.chunk[2]);
    for (int r = 0; r < 3; ++r)
      fmt::print("{} [{:g} {:g} {:g} {:g}]\n", r == 0 ? "affine (x, y, z -> world):" : "                          ",
                 info.affine[r * 4], info.affine[r * 4 + 1], info.affine[r * 4 + 2],
                 info.affine[r * 4 + 3]);
  }
  if (out.empty())
    return 0;
  Box3 lo{0, 0, 0}, size = info.shape;
  if (!box.empty()) {
    size_t colon = box.find(':');
    if (colon == std::string::npos)
      throw Error(str("--box: expected Z,Y,X:D,H,W (corner and size), got '", box, "'"));
    lo = parse3(box.substr(0, colon), box);
    size = parse3(box.substr(colon + 1), box);
    for (int d = 0; d < 3; ++d) {
      int64_t end = 0;
      if (lo[d] < 0 || size[d] < 1 || __builtin_add_overflow(lo[d], size[d], &end) ||
          end > info.shape[d])
        throw Error(str("--box ", box, ": not inside the volume ", info.name(), " of shape ", info.shape[0], "x",
                        info.shape[1], "x", info.shape[2],
                        " (z, y, x): the corner must be >= 0, the size >= 1 and corner + size "
                        "<= the shape on every axis"));
    }
  }
  VolumeData data;
  data.shape = size;
  data.spacing = info.spacing;
  data.affine = info.affine;
  for (int r = 0; r < 3; ++r) // the box's corner (x, y, z) in world coordinates
    data.affine[r * 4 + 3] += info.affine[r * 4 + 0] * lo[2] + info.affine[r * 4 + 1] * lo[1] +
                              info.affine[r * 4 + 2] * lo[0];
  const int64_t n = checkedCount({size[0], size[1], size[2]}, info.name());
  const std::string declared = str(box.empty() ? "the volume of " : "the box of ", size[0], "x",
                                   size[1], "x", size[2], " voxels");
  std::vector<float> f;
  std::vector<int64_t> i;
  if (isIntegerVoxel(info.type)) {
    resizeChecked(i, n, info.name(), declared);
    v->read(lo, size, i.data());
    data.type = VoxelType::I64;
    data.data = i.data();
  } else {
    resizeChecked(f, n, info.name(), declared);
    v->read(lo, size, f.data());
    data.type = VoxelType::F32;
    data.data = f.data();
  }
  writeVolume(out, data);
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

} // namespace medrun
