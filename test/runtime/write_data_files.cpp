//===- write_data_files.cpp - helper for the NumPy check of the data side -------===//
//
//   write-data-files DIR   writes, as .npy files, two synthetic volumes
//                          (vol<i>_{image,labels,affinity,affinity_mask,segmentation}.npy)
//                          and the loader's batches of steps 0..3
//                          (step<s>_<tensor>.npy, '/' in a name written as '_', and
//                          step<s>_samples.npy: i64 [B, 6] = volume, corner z, y, x,
//                          forced, class), plus DIR/config.txt with the settings.
//
// check_data_files.py recomputes the targets and the patches from the volumes with NumPy.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Data.h"
#include "medrun/Error.h"
#include "medrun/Npy.h"

#include <fstream>
#include <iostream>

using namespace medrun;

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: write-data-files DIR\n";
    return 2;
  }
  try {
    const std::string dir = argv[1];
    SyntheticSpec data;
    data.shape = {23, 30, 17};
    data.volumes = 2;
    data.seed = 5;
    auto volumes = makeSyntheticDataset(data);
    for (size_t i = 0; i < volumes->size(); ++i) {
      const Volume &v = (*volumes)[i];
      const std::string p = dir + "/vol" + std::to_string(i) + "_";
      writeNpy(p + "image.npy", v.image);
      writeNpy(p + "labels.npy", v.labels);
      writeNpy(p + "affinity.npy", v.affinity);
      writeNpy(p + "affinity_mask.npy", v.affinityMask);
      writeNpy(p + "segmentation.npy", v.segmentation);
    }
    LoaderSpec spec;
    spec.batch = 3;
    spec.patch = {16, 32, 8}; // axis 1 is larger than the volume: padding
    spec.tensors = {"image",        "labels",         "affinity",      "affinity_mask",
                    "segmentation", "segmentation/2", "segmentation/4"};
    spec.affinityChannels = 4;
    spec.foreground = 0.5;
    spec.seed = 9;
    spec.workers = 2;
    std::ofstream(dir + "/config.txt")
        << "batch " << spec.batch << "\nforeground " << spec.foreground << "\npatch "
        << spec.patch[0] << " " << spec.patch[1] << " " << spec.patch[2]
        << "\naffinity_channels " << spec.affinityChannels << "\nsteps 4\n";
    DataLoader loader(volumes, spec);
    for (int s = 0; s < 4; ++s) {
      const Batch &b = loader.next();
      const std::string p = dir + "/step" + std::to_string(s) + "_";
      for (const auto &[name, t] : b.tensors) {
        std::string file = name;
        for (char &c : file)
          c = c == '/' ? '_' : c;
        writeNpy(p + file + ".npy", t);
      }
      Tensor samples(DType::I64, {spec.batch, 6});
      for (int64_t j = 0; j < spec.batch; ++j) {
        const PatchInfo &info = b.samples[j];
        int64_t row[6] = {info.volume, info.corner[0], info.corner[1], info.corner[2],
                          info.forced, info.cls};
        for (int k = 0; k < 6; ++k)
          samples.data<int64_t>()[j * 6 + k] = row[k];
      }
      writeNpy(p + "samples.npy", samples);
      loader.release(b);
    }
  } catch (const Error &e) {
    std::cerr << "write-data-files: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
