//===- FuzzSkeleton.cpp - the skeleton reader and run-length scores under libFuzzer ----===//
//
// Each input is read as a skeleton file (docs/skeletons.md) for a 4x5x6 volume of unit
// spacing (so a file's own spacing applies), and the skeletons it accepts are scored
// against a fixed segmentation of a few ids, background included: ERL, NERL and the
// node VOI/ARAND.
//
//===----------------------------------------------------------------------------------===//
#include "FuzzInput.h"

#include "medrun/Error.h"
#include "medrun/Skeleton.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const medrun::Box3 shape{4, 5, 6};
  static const std::vector<int64_t> segmentation = [&] {
    std::vector<int64_t> s(static_cast<size_t>(shape[0] * shape[1] * shape[2]));
    for (size_t v = 0; v < s.size(); ++v)
      s[v] = static_cast<int64_t>(v * 7 / 13 % 4); // ids 0..3 in runs
    return s;
  }();
  try {
    const medrun::Skeletons s =
        medrun::readSkeletons(fuzzInputFile(data, size, ".json"), shape, {1, 1, 1}, "fuzz");
    const std::vector<int64_t> ids = medrun::nodeSegments(s, segmentation.data(), shape);
    medrun::runLengthScores(s, ids);
  } catch (const medrun::Error &) {
  }
  return 0;
}
