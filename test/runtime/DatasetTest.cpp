//===- DatasetTest.cpp - training data from volume files ------------------------===//
//
// The file source is checked against the in-memory source: synthetic volumes written to
// files (NumPy, HDF5, Zarr, NIfTI) give bit-identical batches (image, affinities, masks,
// segmentation at every scale) for the same seed, so box reads, the long-range margin,
// relabelling and padding agree with targets computed on whole volumes. Splits, the chunk
// cache's bound, and bad datasets (one error naming the file, the key, what was expected).
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Data.h"
#include "medrun/Dataset.h"
#include "medrun/Error.h"
#include "medrun/Volume.h"

#include "gtest/gtest.h"
#include "ExpectError.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace medrun;
namespace fs = std::filesystem;

namespace {

std::string tempDir(const std::string &name) {
  fs::path d = fs::temp_directory_path() / ("medrun-dataset-" + name + "-" +
                                            std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

VolumeData volumeOf(const Tensor &t, VoxelType type) {
  VolumeData v;
  v.shape = {t.dim(1), t.dim(2), t.dim(3)};
  v.type = type;
  v.data = t.raw();
  return v;
}

/// Writes each synthetic volume's image (f32) and labels (i32) as `IMAGE`/`LABEL` paths
/// (with %d for the index) and returns the dataset spec listing them.
DatasetSpec writeDataset(const std::vector<Volume> &vols, const std::string &image,
                         const std::string &label) {
  DatasetSpec spec;
  spec.source = "files";
  spec.normalization = "none";
  spec.valFraction = 0;
  for (size_t i = 0; i < vols.size(); ++i) {
    char a[512], b[512];
    std::snprintf(a, sizeof a, image.c_str(), int(i));
    std::snprintf(b, sizeof b, label.c_str(), int(i));
    writeVolume(a, volumeOf(vols[i].image, VoxelType::F32));
    writeVolume(b, volumeOf(vols[i].labels, VoxelType::I32));
    spec.images.push_back(a);
    spec.labels.push_back(b);
  }
  return spec;
}

bool sameBatch(const Batch &a, const Batch &b) {
  if (a.tensors.size() != b.tensors.size())
    return false;
  for (auto &[name, t] : a.tensors) {
    const Tensor &u = b.tensors.at(name);
    if (t.shape() != u.shape() || std::memcmp(t.raw(), u.raw(), t.nbytes()) != 0) {
      size_t k = 0;
      if (t.shape() == u.shape())
        while (k < t.nbytes() && static_cast<const char *>(t.raw())[k] ==
                                     static_cast<const char *>(u.raw())[k])
          ++k;
      ADD_FAILURE() << "tensor " << name << " differs at step " << a.step << ", byte " << k
                    << " of " << shapeStr(t.shape());
      return false;
    }
  }
  for (size_t j = 0; j < a.samples.size(); ++j)
    if (a.samples[j].corner != b.samples[j].corner || a.samples[j].volume != b.samples[j].volume)
      return false;
  return true;
}

SyntheticSpec small() {
  SyntheticSpec s;
  s.shape = {21, 17, 19}; // fewer foreground voxels than the sampled locations (10000)
  s.volumes = 2;
  s.seed = 3;
  return s;
}

} // namespace

TEST(Dataset, FilesGiveTheBatchesOfTheVolumesInMemory) {
  // Instances only: foreground is any nonzero id (the synthetic classes are not in files).
  auto vols = std::make_shared<std::vector<Volume>>(*makeSyntheticDataset(small()));
  for (Volume &v : *vols)
    v.segmentation = Tensor();
  const std::string dir = tempDir("same");
  for (auto [image, label] : {std::pair<std::string, std::string>{"/img%d.npy", "/lab%d.npy"},
                              {"/v%d.h5/raw", "/v%d.h5/labels"},
                              {"/v%d.zarr/img", "/v%d.zarr/seg"},
                              {"/img%d.nii.gz", "/lab%d.nii"}}) {
    SCOPED_TRACE(image);
    DatasetSpec spec = writeDataset(*vols, dir + image, dir + label);
    LoaderSpec ls;
    ls.batch = 3;
    ls.patch = {12, 16, 8}; // a patch near the trailing edge needs the margin
    ls.tensors = {"image", "affinity", "affinity_mask"}; // labels: relabelled per patch
    ls.workers = 2;
    ls.seed = 11;
    DatasetSplit split = splitDataset(spec);
    ASSERT_EQ(split.train.size(), 2u);
    DataLoader files(openDataset(spec, split), ls);
    DataLoader memory(vols, ls);
    for (int s = 0; s < 12; ++s) {
      const Batch &a = files.next(), &b = memory.next();
      ASSERT_TRUE(sameBatch(a, b)) << "step " << s;
      files.release();
      memory.release();
    }
  }
  fs::remove_all(dir);
}

TEST(Dataset, ClassLabelsGiveTheSegmentationBatches) {
  auto vols = makeSyntheticDataset(small());
  const std::string dir = tempDir("classes");
  DatasetSpec spec;
  spec.source = "files";
  spec.normalization = "none";
  spec.valFraction = 0;
  spec.classes = true;
  for (size_t i = 0; i < vols->size(); ++i) {
    std::string a = dir + "/img" + std::to_string(i) + ".npy";
    std::string b = dir + "/seg" + std::to_string(i) + ".nii.gz";
    writeVolume(a, volumeOf((*vols)[i].image, VoxelType::F32));
    writeVolume(b, volumeOf((*vols)[i].segmentation, VoxelType::U8));
    spec.images.push_back(a);
    spec.labels.push_back(b);
  }
  LoaderSpec ls;
  ls.batch = 3;
  ls.patch = {8, 16, 8};
  ls.tensors = {"image", "segmentation", "segmentation/2"};
  ls.seed = 5;
  DataLoader files(openDataset(spec, splitDataset(spec)), ls);
  DataLoader memory(vols, ls);
  for (int s = 0; s < 12; ++s) {
    ASSERT_TRUE(sameBatch(files.next(), memory.next())) << "step " << s;
    files.release();
    memory.release();
  }
  fs::remove_all(dir);
}

TEST(Dataset, SplitsByFractionAndByNnunetFolds) {
  DatasetSpec spec;
  spec.source = "files";
  spec.labelKey = "seg";
  for (int i = 0; i < 10; ++i)
    spec.images.push_back("/data/v" + std::to_string(i) + ".zarr");
  spec.valFraction = 0.3;
  spec.seed = 1;
  DatasetSplit a = splitDataset(spec);
  EXPECT_EQ(a.train.size(), 7u);
  EXPECT_EQ(a.validation.size(), 3u);
  EXPECT_EQ(a.train[0].label, a.train[0].name + "/seg");
  DatasetSplit b = splitDataset(spec);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(a.validation[i].name, b.validation[i].name); // seeded: the same split
  spec.seed = 2;
  DatasetSplit c = splitDataset(spec);
  bool differs = false;
  for (size_t i = 0; i < 3; ++i)
    differs |= a.validation[i].name != c.validation[i].name;
  EXPECT_TRUE(differs) << "another seed, another split";

  const std::string dir = tempDir("splits");
  {
    std::ofstream f(dir + "/splits_final.json");
    f << R"([{"train": ["/data/v0.zarr", "/data/v1.zarr"], "val": ["/data/v2.zarr"]},
             {"train": ["/data/v2.zarr"], "val": ["/data/v9.zarr"]}])";
  }
  spec.splits = dir + "/splits_final.json";
  spec.fold = 1;
  DatasetSplit d = splitDataset(spec);
  ASSERT_EQ(d.train.size(), 1u);
  EXPECT_EQ(d.train[0].name, "/data/v2.zarr");
  EXPECT_EQ(d.validation[0].name, "/data/v9.zarr");
  spec.fold = 2;
  EXPECT_ERROR(splitDataset(spec), "data.fold: fold 2 does not exist", "splits_final.json", "0..1");
  {
    std::ofstream f(dir + "/splits_final.json");
    f << R"([{"train": ["/data/v0.zarr", "nope"], "val": []}])";
  }
  spec.fold = 0;
  EXPECT_ERROR(splitDataset(spec), "splits_final.json", "case 'nope'");
  fs::remove_all(dir);
}

TEST(Dataset, BadDatasetsNameTheFileAndWhatWasExpected) {
  const std::string dir = tempDir("bad");
  std::vector<float> img(4 * 5 * 6, 1.0f);
  std::vector<int32_t> lab(4 * 5 * 6, 0), lab2(4 * 5 * 7, 1);
  lab[7] = 3;
  VolumeData vi{{4, 5, 6}, VoxelType::F32, img.data()};
  VolumeData vl{{4, 5, 6}, VoxelType::I32, lab.data()};
  writeVolume(dir + "/a.h5/raw", vi);
  writeVolume(dir + "/a.h5/labels", vl);
  VolumeData wide{{4, 5, 7}, VoxelType::I32, lab2.data()};
  writeVolume(dir + "/a.h5/wide", wide);
  VolumeData coarse = vl;
  coarse.spacing = {2, 1, 1};
  writeVolume(dir + "/a.h5/coarse", coarse);
  std::vector<int32_t> zeros(4 * 5 * 6, 0);
  writeVolume(dir + "/a.h5/empty", VolumeData{{4, 5, 6}, VoxelType::I32, zeros.data()});
  writeVolume(dir + "/a.h5/float_labels", vi);

  DatasetSpec spec;
  spec.source = "files";
  spec.valFraction = 0;
  spec.images = {dir + "/a.h5"};
  spec.imageKey = "raw";
  auto open = [&](const std::string &key) {
    DatasetSpec s = spec;
    s.labelKey = key;
    openDataset(s, splitDataset(s));
  };
  open("labels"); // the good one
  EXPECT_ERROR(open("clefts"), "a.h5", "no dataset 'clefts'", "labels, raw");
  EXPECT_ERROR(open("wide"), "a.h5/raw", "4x5x6", "a.h5/wide", "4x5x7", "expected one shape");
  EXPECT_ERROR(open("coarse"), "a.h5/raw", "a.h5/coarse", "spacing", "expected the same spacing");
  EXPECT_ERROR(open("empty"), "a.h5/empty", "the label volume is empty");
  EXPECT_ERROR(open("float_labels"), "a.h5/float_labels", "float32", "expected an integer type");
  DatasetSpec classes = spec;
  classes.labelKey = "labels";
  classes.classes = true;
  lab[8] = 300;
  writeVolume(dir + "/a.h5/labels", vl);
  EXPECT_ERROR(openDataset(classes, splitDataset(classes)), "a.h5/labels", "label value 300",
               "expected a class index");
  DatasetSpec none;
  none.source = "files";
  EXPECT_ERROR(splitDataset(none), "data.images");
  DatasetSpec noLabels = spec;
  EXPECT_ERROR(splitDataset(noLabels), "data.labels", "data.label_key");
  DatasetSpec nn;
  nn.source = "nnunet";
  nn.path = dir;
  EXPECT_ERROR(splitDataset(nn), "dataset.json", "no such file");
  {
    std::ofstream f(dir + "/dataset.json");
    f << R"({"channel_names": {"0": "T1", "2": "T2"}, "labels": {"background": 0, "a": 1}})";
  }
  EXPECT_ERROR(splitDataset(nn), "dataset.json", "channel_names has no \"1\"", "0..1");
  {
    std::ofstream f(dir + "/dataset.json");
    f << R"({"channel_names": {"0": "MR"}, "labels": {"background": 0, "whole": [1, 2]}})";
  }
  EXPECT_ERROR(splitDataset(nn), "dataset.json", "labels.whole is a region", "integer labels");
  fs::remove_all(dir);
}

TEST(Dataset, TheChunkCacheStaysWithinItsBound) {
  const std::string dir = tempDir("cache");
  std::vector<float> img(64 * 64 * 64);
  for (size_t i = 0; i < img.size(); ++i)
    img[i] = static_cast<float>(i % 251);
  writeVolume(dir + "/v.zarr", VolumeData{{64, 64, 64}, VoxelType::F32, img.data()});
  auto v = openVolume(dir + "/v.zarr"); // 64^3 chunks of 1 MiB... written as 64^3: one chunk
  auto cache = std::make_shared<ChunkCache>(size_t(3) << 20);
  v->setCache(cache);
  std::vector<float> box(8 * 8 * 8);
  for (int k = 0; k < 10; ++k)
    v->read({k, k, k}, {8, 8, 8}, box.data());
  EXPECT_EQ(cache->decodes(), 1u) << "a cached chunk is decoded once";
  EXPECT_LE(cache->held(), cache->capacity());
  for (int64_t z = 0; z < 8; ++z)
    EXPECT_EQ(box[z * 64], img[((9 + z) * 64 + 9) * 64 + 9]);
  // Many chunks through a small cache: never more than the bound held.
  auto h5 = dir + "/v.h5/x";
  writeVolume(h5, VolumeData{{64, 64, 64}, VoxelType::F32, img.data()});
  auto w = openVolume(h5); // 16^3 chunks of 16 KiB... written with 64^3 chunks
  auto tiny = std::make_shared<ChunkCache>(size_t(1) << 20);
  w->setCache(tiny);
  std::vector<float> all(64 * 64 * 64);
  w->read({0, 0, 0}, {64, 64, 64}, all.data());
  EXPECT_EQ(all, img);
  EXPECT_LE(tiny->held(), size_t(1) << 20);
  fs::remove_all(dir);
}

// nnU-Net's folds: sklearn's KFold(5, shuffle=True, random_state=12345), values from
// sklearn 1.2 (the folds.test check compares whole splits_final.json files with NumPy).
TEST(Dataset, KFoldIsSklearnsWithNnunetsSeed) {
  const std::vector<std::pair<size_t, std::vector<std::vector<size_t>>>> cases = {
      {5, {{0}, {4}, {3}, {1}, {2}}},
      {7, {{3, 6}, {0, 4}, {1}, {5}, {2}}},
      {13, {{0, 7, 9}, {3, 6, 10}, {8, 11, 12}, {1, 4}, {2, 5}}},
      {40,
       {{2, 3, 5, 19, 21, 25, 28, 32},
        {0, 4, 8, 12, 15, 30, 33, 35},
        {6, 7, 10, 13, 17, 20, 24, 26},
        {9, 11, 16, 18, 22, 23, 27, 31},
        {1, 14, 29, 34, 36, 37, 38, 39}}}};
  for (const auto &[n, folds] : cases) {
    const auto splits = kfoldSplits(n, 5, 12345);
    ASSERT_EQ(splits.size(), 5u);
    for (size_t f = 0; f < 5; ++f) {
      EXPECT_EQ(splits[f].second, folds[f]) << "n " << n << " fold " << f;
      std::vector<size_t> all = splits[f].first;
      all.insert(all.end(), splits[f].second.begin(), splits[f].second.end());
      std::sort(all.begin(), all.end());
      ASSERT_EQ(all.size(), n);
      for (size_t i = 0; i < n; ++i)
        EXPECT_EQ(all[i], i);
      EXPECT_TRUE(std::is_sorted(splits[f].first.begin(), splits[f].first.end()));
    }
  }
  // Another seed gives other folds (the seed is used).
  EXPECT_NE(kfoldSplits(13, 5, 12346)[0].second, cases[2].second[0]);
  EXPECT_ERROR(kfoldSplits(4, 5, 12345), "a 5-fold split of 4 cases: expected at least 5 cases");
}
