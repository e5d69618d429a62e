//===- Planning.cpp - nnU-Net's dataset fingerprint and 3d_fullres plan --------------===//
#include "medrun/Planning.h"

#include "medrun/Dataset.h"
#include "medrun/Error.h"
#include "medrun/Parallel.h"
#include "medrun/TrainLog.h"
#include "medrun/Volume.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>

namespace medrun {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

/// NumPy's linear percentile of sorted values.
double percentile(const std::vector<double> &sorted, double q) {
  const double pos = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t k = static_cast<size_t>(std::floor(pos));
  const double f = pos - static_cast<double>(k);
  return k + 1 < sorted.size() ? sorted[k] + (sorted[k + 1] - sorted[k]) * f : sorted[k];
}

/// np.percentile(values, q) (copies and sorts).
double percentileOf(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return percentile(values, q);
}

/// Python's round(): halves to even.
double roundHalfEven(double v) { return std::nearbyint(v); }

struct CaseFingerprint {
  std::array<double, 3> spacing{};
  std::array<int64_t, 3> shapeAfterCrop{};
  double relativeSize = 1;
  std::vector<std::vector<float>> foreground; ///< per channel
};

std::string scheme(const std::string &channelName) {
  std::string n = channelName;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "ct")
    return "CTNormalization";
  if (n == "nonorm")
    return "NoNormalization";
  if (n == "zscore")
    return "ZScoreNormalization";
  if (n == "rescale_to_0_1")
    return "RescaleTo01Normalization";
  if (n == "rgb_to_0_1")
    return "RGBTo01Normalization";
  return "ZScoreNormalization";
}

/// PlainConvUNet's compute_conv_feature_map_size (2 convs per stage, encoder and decoder;
/// the last segmentation layer; no deep supervision), as the planner instantiates it.
double featureMapSize(const std::array<int64_t, 3> &patch, const Topology &t,
                      const std::vector<int64_t> &features, int64_t classes) {
  const size_t n = t.strides.size();
  auto prod = [](const std::array<int64_t, 3> &s) {
    return static_cast<double>(s[0]) * static_cast<double>(s[1]) * static_cast<double>(s[2]);
  };
  double total = 0;
  std::array<int64_t, 3> size = patch;
  std::vector<std::array<int64_t, 3>> sizes;
  for (size_t s = 0; s < n; ++s) {
    for (int a = 0; a < 3; ++a)
      size[a] /= t.strides[s][a];
    total += 2.0 * static_cast<double>(features[s]) * prod(size);
    sizes.push_back(size);
  }
  for (size_t s = 0; s + 1 < n; ++s) {
    const std::array<int64_t, 3> &skip = sizes[n - 2 - s];
    const double f = static_cast<double>(features[n - 2 - s]);
    total += 2.0 * f * prod(skip) + f * prod(skip);
    if (s == n - 2)
      total += static_cast<double>(classes) * prod(skip);
  }
  return total;
}

} // namespace

Topology poolAndConvProps(const std::array<double, 3> &spacing, const std::array<double, 3> &patch,
                          int64_t minFeatureMap) {
  Topology t;
  std::array<double, 3> sp = spacing, size = patch;
  std::array<int64_t, 3> kernel{1, 1, 1};
  t.strides.push_back({1, 1, 1});
  while (true) {
    std::vector<int> valid;
    for (int a = 0; a < 3; ++a)
      if (size[a] >= 2.0 * static_cast<double>(minFeatureMap))
        valid.push_back(a);
    if (valid.empty())
      break;
    std::vector<double> spacingsOfAxes;
    for (int a : valid)
      spacingsOfAxes.push_back(sp[a]);
    const double minValid = *std::min_element(spacingsOfAxes.begin(), spacingsOfAxes.end());
    std::vector<int> pool;
    for (int a : valid)
      if (sp[a] / minValid < 2)
        pool.push_back(a);
    if (pool.size() == 1 && !(size[pool[0]] >= 3.0 * static_cast<double>(minFeatureMap)))
      break;
    if (pool.empty())
      break;
    // As nnU-Net writes it: the axis d's kernel turns 3 by spacings_of_axes[d], the
    // spacings of the axes still large enough (not of axis d when an axis dropped out).
    const double minAll = *std::min_element(sp.begin(), sp.end());
    for (int d = 0; d < 3; ++d) {
      if (kernel[d] == 3)
        continue;
      if (static_cast<size_t>(d) >= spacingsOfAxes.size())
        throw Error(str("planning: nnU-Net's get_pool_and_conv_props fails for the patch ",
                        patch[0], "x", patch[1], "x", patch[2], " at spacing ", spacing[0], "x",
                        spacing[1], "x", spacing[2],
                        " (an axis below 8 voxels before every kernel is 3): give the plan "
                        "by hand or a dataset with larger images"));
      if (spacingsOfAxes[d] / minAll < 2)
        kernel[d] = 3;
    }
    std::array<int64_t, 3> stride{1, 1, 1};
    for (int a : pool) {
      stride[a] = 2;
      ++t.pools[a];
      sp[a] *= 2;
      size[a] = std::ceil(size[a] / 2);
    }
    t.strides.push_back(stride);
    t.kernels.push_back(kernel);
  }
  for (int a = 0; a < 3; ++a) {
    t.divisibleBy[a] = int64_t(1) << t.pools[a];
    const double m = static_cast<double>(t.divisibleBy[a]);
    double padded = patch[a] + m - std::fmod(patch[a], m);
    if (std::fmod(patch[a], m) == 0)
      padded -= m;
    t.patch[a] = static_cast<int64_t>(padded);
  }
  t.kernels.push_back({3, 3, 3});
  return t;
}

ojson datasetFingerprint(const PlanOptions &o) {
  const fs::path dir(o.dataset);
  const std::string meta = (dir / "dataset.json").string();
  if (!fs::exists(meta))
    throw Error(str(meta, ": no such file (expected an nnU-Net raw dataset folder)"));
  json d = readJsonFile(meta);
  if (!d.is_object() || !d.contains("channel_names") || !d["channel_names"].is_object() ||
      d["channel_names"].empty())
    throw Error(str(meta, ": expected channel_names {\"0\": \"CT\", ...} (nnU-Net v2 format)"));
  const size_t channels = d["channel_names"].size();
  for (size_t c = 0; c < channels; ++c)
    if (!d["channel_names"].contains(std::to_string(c)))
      throw Error(
          str(meta, ": channel_names has no \"", c, "\" (expected keys 0..", channels - 1, ")"));
  const std::string ending = d.value("file_ending", ".nii.gz");
  const fs::path labelsDir = dir / "labelsTr", imagesDir = dir / "imagesTr";
  if (!fs::is_directory(labelsDir) || !fs::is_directory(imagesDir))
    throw Error(
        str(o.dataset, ": expected the folders imagesTr/ and labelsTr/ (nnU-Net raw layout)"));
  std::vector<std::string> cases;
  for (const auto &e : fs::directory_iterator(labelsDir)) {
    const std::string n = e.path().filename().string();
    if (n.size() > ending.size() &&
        n.compare(n.size() - ending.size(), ending.size(), ending) == 0 && n[0] != '.')
      cases.push_back(n.substr(0, n.size() - ending.size()));
  }
  std::sort(cases.begin(), cases.end());
  if (cases.empty())
    throw Error(str(labelsDir.string(), ": no label files ending in ", ending));

  std::vector<CaseFingerprint> fp(cases.size());
  std::vector<std::exception_ptr> errors(cases.size());
  // nnU-Net takes at most 1e8 foreground intensities over the dataset: per case 1e8 / N.
  const size_t perCase = static_cast<size_t>(1e8 / static_cast<double>(cases.size()));
  Progress::Options po;
  po.total = static_cast<int64_t>(cases.size());
  po.desc = "fingerprint";
  po.mode = o.progressMode == 1   ? Progress::Mode::Bar
            : o.progressMode == 2 ? Progress::Mode::Lines
                                  : Progress::Mode::Auto;
  Progress bar(o.progress, po);
  std::mutex barLock;
  int64_t done = 0;
  parallelFor(static_cast<int64_t>(cases.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      try {
        const std::string &name = cases[i];
        const std::string labelPath = (labelsDir / (name + ending)).string();
        auto label = openVolume(labelPath);
        const VolumeInfo &li = label->info();
        const Box3 shape = li.shape;
        const int64_t n = shape[0] * shape[1] * shape[2];
        std::vector<std::vector<float>> img(channels);
        for (size_t c = 0; c < channels; ++c) {
          char suffix[32];
          std::snprintf(suffix, sizeof suffix, "_%04zu", c);
          const std::string path = (imagesDir / (name + suffix + ending)).string();
          if (!fs::exists(path))
            throw Error(str("case ", name, ": channel ", c, " (",
                            d["channel_names"][std::to_string(c)].dump(), ") is missing: ", path,
                            " (dataset.json lists ", channels, " channel(s))"));
          auto r = openVolume(path);
          const VolumeInfo &ii = r->info();
          if (ii.shape != shape)
            throw Error(str("case ", name, ": ", path, " is ", ii.shape[0], "x", ii.shape[1], "x",
                            ii.shape[2], " but its labels ", labelPath, " are ", shape[0], "x",
                            shape[1], "x", shape[2], " (expected one shape)"));
          for (int a = 0; a < 3; ++a)
            if (std::abs(ii.spacing[a] - li.spacing[a]) >
                1e-3 * std::max(ii.spacing[a], li.spacing[a]))
              throw Error(str("case ", name, ": ", path, " has spacing ", ii.spacing[0], " x ",
                              ii.spacing[1], " x ", ii.spacing[2], " but its labels ",
                              li.spacing[0], " x ", li.spacing[1], " x ", li.spacing[2],
                              " (expected the same geometry)"));
          if (std::string g = geometryMismatch(ii, li); !g.empty())
            throw Error(str("case ", name, ": its labels ", labelPath, " are not where ", path,
                            " is: ", g, " (expected the same origin and direction)"));
          img[c].resize(static_cast<size_t>(n));
          r->read({0, 0, 0}, shape, img[c].data());
        }
        std::vector<int64_t> seg(static_cast<size_t>(n));
        label->read({0, 0, 0}, shape, seg.data());
        // The box of the non-zero voxels of any channel (the whole image if none).
        std::array<int64_t, 3> lo{shape[0], shape[1], shape[2]}, hi{-1, -1, -1};
        for (int64_t z = 0, v = 0; z < shape[0]; ++z)
          for (int64_t y = 0; y < shape[1]; ++y)
            for (int64_t x = 0; x < shape[2]; ++x, ++v) {
              bool nz = false;
              for (size_t c = 0; c < channels && !nz; ++c)
                nz = img[c][v] != 0;
              if (!nz)
                continue;
              const int64_t at[3] = {z, y, x};
              for (int a = 0; a < 3; ++a) {
                lo[a] = std::min(lo[a], at[a]);
                hi[a] = std::max(hi[a], at[a]);
              }
            }
        if (hi[0] < 0)
          lo = {0, 0, 0}, hi = {shape[0] - 1, shape[1] - 1, shape[2] - 1};
        CaseFingerprint &f = fp[i];
        f.spacing = li.spacing;
        for (int a = 0; a < 3; ++a)
          f.shapeAfterCrop[a] = hi[a] - lo[a] + 1;
        f.relativeSize =
            static_cast<double>(f.shapeAfterCrop[0] * f.shapeAfterCrop[1] * f.shapeAfterCrop[2]) /
            static_cast<double>(n);
        f.foreground.resize(channels);
        std::vector<int64_t> fg;
        for (int64_t z = lo[0]; z <= hi[0]; ++z)
          for (int64_t y = lo[1]; y <= hi[1]; ++y)
            for (int64_t x = lo[2]; x <= hi[2]; ++x) {
              const int64_t v = (z * shape[1] + y) * shape[2] + x;
              if (seg[v] > 0)
                fg.push_back(v);
            }
        // Every foreground voxel, or an even subset of 1e8 / N of them in a very large case.
        const size_t step = fg.size() > perCase ? (fg.size() + perCase - 1) / perCase : 1;
        for (size_t c = 0; c < channels; ++c)
          for (size_t k = 0; k < fg.size(); k += step)
            f.foreground[c].push_back(img[c][fg[k]]);
        std::lock_guard<std::mutex> hold(barLock);
        bar.update(++done);
      } catch (...) {
        errors[i] = std::current_exception();
      }
  });
  for (auto &e : errors)
    if (e)
      std::rethrow_exception(e);
  bar.finish();

  ojson out;
  ojson props = ojson::object();
  for (size_t c = 0; c < channels; ++c) {
    std::vector<double> all;
    for (const CaseFingerprint &f : fp)
      all.insert(all.end(), f.foreground[c].begin(), f.foreground[c].end());
    if (all.empty())
      throw Error(str(labelsDir.string(), ": no case has a foreground voxel (label > 0): the "
                                          "intensity statistics are undefined"));
    std::sort(all.begin(), all.end());
    double sum = 0;
    for (double v : all)
      sum += v;
    const double mean = sum / static_cast<double>(all.size());
    double sq = 0;
    for (double v : all)
      sq += (v - mean) * (v - mean);
    props[std::to_string(c)] = {{"max", all.back()},
                                {"mean", mean},
                                {"median", percentile(all, 50)},
                                {"min", all.front()},
                                {"percentile_00_5", percentile(all, 0.5)},
                                {"percentile_99_5", percentile(all, 99.5)},
                                {"std", std::sqrt(sq / static_cast<double>(all.size()))}};
  }
  out["foreground_intensity_properties_per_channel"] = props;
  std::vector<double> rel;
  for (const CaseFingerprint &f : fp)
    rel.push_back(f.relativeSize);
  out["median_relative_size_after_cropping"] = percentileOf(rel, 50);
  out["shapes_after_crop"] = ojson::array();
  out["spacings"] = ojson::array();
  for (const CaseFingerprint &f : fp) {
    out["shapes_after_crop"].push_back(f.shapeAfterCrop);
    out["spacings"].push_back(f.spacing);
  }
  return out;
}

ojson planExperiment(const json &fingerprint, const json &d, const std::string &datasetName,
                     double gpuMemoryGb) {
  std::vector<std::array<double, 3>> spacings, shapes;
  for (const json &s : fingerprint.at("spacings"))
    spacings.push_back({s.at(0).get<double>(), s.at(1).get<double>(), s.at(2).get<double>()});
  for (const json &s : fingerprint.at("shapes_after_crop"))
    shapes.push_back({s.at(0).get<double>(), s.at(1).get<double>(), s.at(2).get<double>()});
  auto axisPercentile = [](const std::vector<std::array<double, 3>> &v, int a, double q) {
    std::vector<double> col;
    for (const auto &x : v)
      col.push_back(x[a]);
    return percentileOf(col, q);
  };
  // Target spacing: the median; a much coarser axis with few voxels: its 10th percentile.
  std::array<double, 3> target, targetSize;
  for (int a = 0; a < 3; ++a) {
    target[a] = axisPercentile(spacings, a, 50);
    targetSize[a] = axisPercentile(shapes, a, 50);
  }
  const int worst =
      static_cast<int>(std::max_element(target.begin(), target.end()) - target.begin());
  double maxOther = 0, minOtherSize = INFINITY;
  for (int a = 0; a < 3; ++a)
    if (a != worst) {
      maxOther = std::max(maxOther, target[a]);
      minOtherSize = std::min(minOtherSize, targetSize[a]);
    }
  if (target[worst] > 3 * maxOther && targetSize[worst] * 3 < minOtherSize) {
    double t = axisPercentile(spacings, worst, 10);
    if (t < maxOther)
      t = std::max(maxOther, t) + 1e-5;
    target[worst] = t;
  }
  const int maxAxis =
      static_cast<int>(std::max_element(target.begin(), target.end()) - target.begin());
  std::array<int, 3> forward{maxAxis, 0, 0}, backward{};
  for (int a = 0, k = 1; a < 3; ++a)
    if (a != maxAxis)
      forward[k++] = a;
  for (int a = 0; a < 3; ++a)
    backward[forward[a]] = a;
  // The median shape after resampling, transposed.
  std::vector<std::array<double, 3>> newShapes;
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::array<double, 3> s;
    for (int a = 0; a < 3; ++a)
      s[a] = roundHalfEven(spacings[i][a] / target[a] * shapes[i][a]);
    newShapes.push_back(s);
  }
  std::array<double, 3> median, spacingT, medianT;
  for (int a = 0; a < 3; ++a)
    median[a] = axisPercentile(newShapes, a, 50);
  for (int a = 0; a < 3; ++a) {
    spacingT[a] = target[forward[a]];
    medianT[a] = median[forward[a]];
  }
  const int64_t numTraining = d.value("numTraining", static_cast<int64_t>(shapes.size()));
  const double approxVoxels =
      medianT[0] * medianT[1] * medianT[2] * static_cast<double>(numTraining);

  // The patch: 256^3 voxels in the spacing's aspect, clipped to the median shape.
  std::array<double, 3> inv, patch;
  for (int a = 0; a < 3; ++a)
    inv[a] = 1 / spacingT[a];
  const double scale = std::cbrt(256.0 * 256.0 * 256.0 / (inv[0] * inv[1] * inv[2]));
  for (int a = 0; a < 3; ++a)
    patch[a] = std::min(roundHalfEven(inv[a] * scale), medianT[a]);
  Topology topo = poolAndConvProps(spacingT, patch);
  const int64_t classes = static_cast<int64_t>(d.at("labels").size()); // as nnU-Net counts them
  auto features = [](size_t stages) {
    std::vector<int64_t> f;
    for (size_t i = 0; i < stages; ++i)
      f.push_back(std::min<int64_t>(320, int64_t(32) << std::min<size_t>(i, 20)));
    return f;
  };
  std::array<int64_t, 3> patchSize = topo.patch;
  double estimate = featureMapSize(patchSize, topo, features(topo.strides.size()), classes);
  const double reference = 560e6 * (gpuMemoryGb / 8.0);
  const double refBatch = 2;
  while (estimate / refBatch * 2 > reference) {
    // Shrink the axis largest relative to the median shape (the last of equals).
    int axis = 0;
    for (int a = 1; a < 3; ++a)
      if (patchSize[a] / medianT[a] >= patchSize[axis] / medianT[axis])
        axis = a;
    std::array<double, 3> tmp{double(patchSize[0]), double(patchSize[1]), double(patchSize[2])};
    tmp[axis] -= static_cast<double>(topo.divisibleBy[axis]);
    const Topology shrunk = poolAndConvProps(spacingT, tmp);
    std::array<double, 3> next = {double(patchSize[0]), double(patchSize[1]), double(patchSize[2])};
    next[axis] -= static_cast<double>(shrunk.divisibleBy[axis]);
    if (next[axis] < 1)
      throw Error(str("planning: no patch fits the GPU memory target of ", gpuMemoryGb,
                      " GB (raise --gpu-memory)"));
    topo = poolAndConvProps(spacingT, next);
    patchSize = topo.patch;
    estimate = featureMapSize(patchSize, topo, features(topo.strides.size()), classes);
  }
  const double patchVoxels = static_cast<double>(patchSize[0]) * static_cast<double>(patchSize[1]) *
                             static_cast<double>(patchSize[2]);
  int64_t batch = static_cast<int64_t>(roundHalfEven(reference / estimate * refBatch));
  const int64_t cap = static_cast<int64_t>(roundHalfEven(approxVoxels * 0.05 / patchVoxels));
  batch = std::max<int64_t>(std::min(batch, cap), 2);

  // Normalisation per channel and the non-zero mask.
  const json &names = d.contains("channel_names") ? d["channel_names"] : d.at("modality");
  std::vector<std::string> schemes;
  std::vector<bool> mask;
  const bool useMask = fingerprint.at("median_relative_size_after_cropping").get<double>() < 0.75 ||
                       d.value("use_mask_for_norm", false);
  for (size_t c = 0; c < names.size(); ++c) {
    const json &n = names.at(std::to_string(c));
    schemes.push_back(scheme(n.is_string() ? n.get<std::string>() : ""));
    mask.push_back(useMask && schemes.back() == "ZScoreNormalization");
  }
  const size_t stages = topo.strides.size();
  ojson arch = {
      {"network_class_name", "dynamic_network_architectures.architectures.unet.PlainConvUNet"},
      {"arch_kwargs",
       {{"n_stages", stages},
        {"features_per_stage", features(stages)},
        {"conv_op", "torch.nn.modules.conv.Conv3d"},
        {"kernel_sizes", topo.kernels},
        {"strides", topo.strides},
        {"n_conv_per_stage", std::vector<int64_t>(stages, 2)},
        {"n_conv_per_stage_decoder", std::vector<int64_t>(stages - 1, 2)},
        {"conv_bias", true},
        {"norm_op", "torch.nn.modules.instancenorm.InstanceNorm3d"},
        {"norm_op_kwargs", {{"eps", 1e-5}, {"affine", true}}},
        {"dropout_op", nullptr},
        {"dropout_op_kwargs", nullptr},
        {"nonlin", "torch.nn.LeakyReLU"},
        {"nonlin_kwargs", {{"inplace", true}}}}},
      {"_kw_requires_import", {"conv_op", "norm_op", "dropout_op", "nonlin"}}};
  auto resampling = [](bool seg, int order) {
    return ojson{{"is_seg", seg}, {"order", order}, {"order_z", 0}, {"force_separate_z", nullptr}};
  };
  ojson config = {{"data_identifier", "nnUNetPlans_3d_fullres"},
                  {"preprocessor_name", "DefaultPreprocessor"},
                  {"batch_size", batch},
                  {"patch_size", patchSize},
                  {"median_image_size_in_voxels", medianT},
                  {"spacing", spacingT},
                  {"normalization_schemes", schemes},
                  {"use_mask_for_norm", mask},
                  {"resampling_fn_data", "resample_data_or_seg_to_shape"},
                  {"resampling_fn_seg", "resample_data_or_seg_to_shape"},
                  {"resampling_fn_data_kwargs", resampling(false, 3)},
                  {"resampling_fn_seg_kwargs", resampling(true, 1)},
                  {"resampling_fn_probabilities", "resample_data_or_seg_to_shape"},
                  {"resampling_fn_probabilities_kwargs", resampling(false, 1)},
                  {"architecture", arch},
                  {"batch_dice", false}};
  std::array<double, 3> medianSpacing, medianShape;
  for (int a = 0; a < 3; ++a) {
    medianSpacing[a] = axisPercentile(spacings, forward[a], 50);
    medianShape[a] = roundHalfEven(axisPercentile(shapes, forward[a], 50));
  }
  ojson plans = {{"dataset_name", datasetName},
                 {"plans_name", "nnUNetPlans"},
                 {"original_median_spacing_after_transp", medianSpacing},
                 {"original_median_shape_after_transp",
                  std::array<int64_t, 3>{int64_t(medianShape[0]), int64_t(medianShape[1]),
                                         int64_t(medianShape[2])}},
                 {"image_reader_writer", "SimpleITKIO"},
                 {"transpose_forward", forward},
                 {"transpose_backward", backward},
                 {"configurations", {{"3d_fullres", config}}},
                 {"experiment_planner_used", "ExperimentPlanner"},
                 {"label_manager", "LabelManager"},
                 {"foreground_intensity_properties_per_channel",
                  fingerprint.at("foreground_intensity_properties_per_channel")}};
  return plans;
}

} // namespace medrun
