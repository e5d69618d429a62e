//===- FuzzVolume.h - a volume reader's whole path on one fuzz input -----------------===//
//
// What `medrun volume PATH -o OUT` does with a file: open it as a 3-D volume and as channels
// (openChannel, the last one), then read its voxels through the chunk cache, as float and as
// int64. A volume too large to read whole in a fuzz run (its size is bounded by the file,
// or by the deflate ratio for gzip) is read at two corners.
//
//===----------------------------------------------------------------------------------===//
#ifndef MED_TEST_FUZZ_FUZZVOLUME_H
#define MED_TEST_FUZZ_FUZZVOLUME_H

#include "medrun/Error.h"
#include "medrun/Volume.h"

#include <algorithm>
#include <vector>

inline void fuzzReadVolume(const medrun::VolumeReader &v) {
  const medrun::Box3 shape = v.info().shape;
  const int64_t voxels = shape[0] * shape[1] * shape[2]; // checked by the reader
  medrun::Box3 box = shape;
  if (voxels > (int64_t(1) << 16))
    for (int d = 0; d < 3; ++d)
      box[d] = std::min<int64_t>(shape[d], 3);
  std::vector<float> f(static_cast<size_t>(box[0] * box[1] * box[2]));
  std::vector<int64_t> i(f.size());
  v.read({0, 0, 0}, box, f.data());
  v.read({shape[0] - box[0], shape[1] - box[1], shape[2] - box[2]}, box, i.data());
}

/// Opens `path` as a volume and as its last channel, reading each; a reader's Error is
/// the expected answer to a bad file.
inline void fuzzVolumeFile(const std::string &path) {
  try {
    fuzzReadVolume(*medrun::openVolume(path));
  } catch (const medrun::Error &) {
  }
  try {
    auto c = medrun::openChannel(path, 0);
    if (c->info().channels > 1)
      c = medrun::openChannel(path, c->info().channels - 1);
    fuzzReadVolume(*c);
  } catch (const medrun::Error &) {
  }
}

#endif // MED_TEST_FUZZ_FUZZVOLUME_H
