//===- FuzzNifti.cpp - NIfTI-1/-2 volumes (.nii, .nii.gz) under libFuzzer -----------===//
//
// The path `medrun volume X.nii[.gz]` takes (Nifti.cpp over nifticlib), as a volume and as
// channels. An input that starts with gzip's magic is read as a .nii.gz as it is (corrupt
// and truncated streams); any other input is read as a .nii, then gzip-compressed and read
// again as a .nii.gz, so the compressed path sees the same headers.
//
//===----------------------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "FuzzVolume.h"

#include <zlib.h>

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &nii = fuzzInputFile(data, size, ".nii");
  const std::string gz = nii + ".gz";
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    FILE *f = std::fopen(gz.c_str(), "wb");
    if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0)
      std::abort();
    fuzzVolumeFile(gz);
    return 0;
  }
  fuzzVolumeFile(nii);
  gzFile z = gzopen(gz.c_str(), "wb1");
  if (!z || (size && gzwrite(z, data, static_cast<unsigned>(size)) != static_cast<int>(size)) ||
      gzclose(z) != Z_OK)
    std::abort();
  fuzzVolumeFile(gz);
  return 0;
}
