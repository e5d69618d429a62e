//===- Preprocess.cpp - nnU-Net's preprocessing into a chunked cache ------------------===//
#include "medrun/Preprocess.h"

#include "medrun/Dataset.h"
#include "medrun/Error.h"
#include "medrun/Parallel.h"
#include "medrun/Resample.h"
#include "medrun/TrainLog.h"
#include "medrun/Volume.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>

namespace medrun {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

/// x (shape s, C order) with its axes permuted: axis i of the result is axis perm[i] of x.
template <typename T>
std::vector<T> transpose(const std::vector<T> &x, const Shape3 &s, const std::array<int, 3> &perm,
                         Shape3 &out) {
  for (int i = 0; i < 3; ++i)
    out[i] = s[perm[i]];
  if (perm == std::array<int, 3>{0, 1, 2})
    return x;
  std::vector<T> r(x.size());
  const int64_t stride[3] = {s[1] * s[2], s[2], 1};
  for (int64_t i = 0, v = 0; i < out[0]; ++i)
    for (int64_t j = 0; j < out[1]; ++j)
      for (int64_t k = 0; k < out[2]; ++k, ++v)
        r[v] = x[i * stride[perm[0]] + j * stride[perm[1]] + k * stride[perm[2]]];
  return r;
}

template <typename T>
std::vector<T> cropBox(const std::vector<T> &x, const Shape3 &s, const Shape3 &lo,
                       const Shape3 &n) {
  std::vector<T> r(static_cast<size_t>(n[0] * n[1] * n[2]));
  for (int64_t i = 0, v = 0; i < n[0]; ++i)
    for (int64_t j = 0; j < n[1]; ++j)
      for (int64_t k = 0; k < n[2]; ++k, ++v)
        r[v] = x[((lo[0] + i) * s[1] + lo[1] + j) * s[2] + lo[2] + k];
  return r;
}

std::string stamp(const std::string &path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  const auto time = fs::last_write_time(path, ec).time_since_epoch().count();
  return str(path, ":", size, ":", time);
}

} // namespace

void fillHoles(std::vector<uint8_t> &mask, const Shape3 &s) {
  // The background reachable from the border through 6-connected background voxels stays;
  // every other background voxel is a hole.
  std::vector<uint8_t> outside(mask.size(), 0);
  std::vector<int64_t> stack;
  auto push = [&](int64_t v) {
    if (!mask[v] && !outside[v]) {
      outside[v] = 1;
      stack.push_back(v);
    }
  };
  for (int64_t z = 0; z < s[0]; ++z)
    for (int64_t y = 0; y < s[1]; ++y)
      for (int64_t x = 0; x < s[2]; ++x)
        if (z == 0 || y == 0 || x == 0 || z == s[0] - 1 || y == s[1] - 1 || x == s[2] - 1)
          push((z * s[1] + y) * s[2] + x);
  while (!stack.empty()) {
    const int64_t v = stack.back();
    stack.pop_back();
    const int64_t z = v / (s[1] * s[2]), y = v / s[2] % s[1], x = v % s[2];
    if (z > 0)
      push(v - s[1] * s[2]);
    if (z + 1 < s[0])
      push(v + s[1] * s[2]);
    if (y > 0)
      push(v - s[2]);
    if (y + 1 < s[1])
      push(v + s[2]);
    if (x > 0)
      push(v - 1);
    if (x + 1 < s[2])
      push(v + 1);
  }
  for (size_t v = 0; v < mask.size(); ++v)
    mask[v] = !outside[v];
}

PreprocessPlan readPreprocessPlan(const std::string &plansPath) {
  PreprocessPlan p;
  p.path = plansPath;
  p.plans = readJsonFile(plansPath);
  const json &plans = p.plans;
  if (!plans.contains("configurations") || !plans["configurations"].contains("3d_fullres"))
    throw Error(str(plansPath, ": no configurations.3d_fullres (expected nnUNetPlans.json)"));
  const json &c = plans["configurations"]["3d_fullres"];
  try {
    for (int a = 0; a < 3; ++a) {
      p.forward[a] = plans.at("transpose_forward").at(a).get<int>();
      p.target[a] = c.at("spacing").at(a).get<double>();
    }
    for (const json &s : c.at("normalization_schemes"))
      p.schemes.push_back(s.get<std::string>());
    for (const json &m : c.at("use_mask_for_norm"))
      p.useMask.push_back(m.get<bool>());
  } catch (const json::exception &e) {
    throw Error(str(plansPath, ": 3d_fullres lacks or misspells a key (", e.what(), ")"));
  }
  std::array<int, 3> sorted = p.forward;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != std::array<int, 3>{0, 1, 2} || p.useMask.size() != p.schemes.size())
    throw Error(str(plansPath, ": transpose_forward must permute 0, 1, 2 and use_mask_for_norm "
                               "have one entry per normalization scheme"));
  for (int a = 0; a < 3; ++a)
    if (!(p.target[a] > 0))
      throw Error(str(plansPath, ": 3d_fullres.spacing must be positive"));
  p.props = plans.value("foreground_intensity_properties_per_channel", json::object());
  if (!p.props.is_object())
    throw Error(str(plansPath, ": foreground_intensity_properties_per_channel: expected an "
                    "object {\"0\": {...}}"));
  return p;
}

PreprocessedCase preprocessCase(const std::string &name, const std::vector<std::string> &imagePaths,
                                const std::string &labelPath, const PreprocessPlan &plan) {
  const size_t channels = plan.schemes.size();
  const std::array<int, 3> &forward = plan.forward;
  const std::array<double, 3> &target = plan.target;
  const std::vector<std::string> &schemes = plan.schemes;
  const std::vector<bool> &useMask = plan.useMask;
  const json &props = plan.props;
  const std::string &plansPath = plan.path;
  if (imagePaths.size() != channels)
    throw Error(str("case ", name, ": ", imagePaths.size(), " channel file(s) for the plan's ",
                    channels, " channel(s)"));
  PreprocessedCase out;
  // The labels' geometry is the case's (at inference, the first channel's).
  std::unique_ptr<VolumeReader> label = openVolume(labelPath.empty() ? imagePaths[0] : labelPath);
  const VolumeInfo li = label->info();
  out.original = li;
  const Shape3 raw = li.shape;
  const int64_t n = raw[0] * raw[1] * raw[2];
  std::vector<int64_t> seg(static_cast<size_t>(n), 0);
  if (!labelPath.empty())
    label->read({0, 0, 0}, raw, seg.data());
  std::vector<std::vector<float>> img(channels);
  for (size_t ch = 0; ch < channels; ++ch) {
    auto r = openVolume(imagePaths[ch]);
    const VolumeInfo &ii = r->info();
    if (ii.shape != raw)
      throw Error(str("case ", name, ": ", imagePaths[ch], " is ", ii.shape[0], "x", ii.shape[1],
                      "x", ii.shape[2], " but its labels ", labelPath, " are ", raw[0], "x", raw[1],
                      "x", raw[2], " (expected one shape)"));
    for (int a = 0; a < 3; ++a)
      if (std::abs(ii.spacing[a] - li.spacing[a]) > 1e-3 * std::max(ii.spacing[a], li.spacing[a]))
        throw Error(str("case ", name, ": ", imagePaths[ch], " has spacing ", ii.spacing[0], " x ",
                        ii.spacing[1], " x ", ii.spacing[2], " but its labels ", li.spacing[0],
                        " x ", li.spacing[1], " x ", li.spacing[2],
                        " (expected the same geometry)"));
    if (std::string g = geometryMismatch(ii, li); !g.empty())
      throw Error(str("case ", name, ": its labels ", labelPath, " are not where ", imagePaths[ch],
                      " is: ", g, " (expected the same origin and direction)"));
    img[ch].resize(static_cast<size_t>(n));
    r->read({0, 0, 0}, raw, img[ch].data());
  }
  // Transpose (data and spacing).
  Shape3 s{};
  std::array<double, 3> spacing{};
  for (int a = 0; a < 3; ++a)
    spacing[a] = li.spacing[forward[a]];
  for (auto &x : img)
    x = transpose(x, raw, forward, s);
  seg = transpose(seg, raw, forward, s);
  // Crop to the non-zero box; label 0 outside the filled mask becomes -1.
  std::vector<uint8_t> mask(static_cast<size_t>(n), 0);
  for (int64_t v = 0; v < n; ++v)
    for (size_t ch = 0; ch < channels && !mask[v]; ++ch)
      mask[v] = img[ch][v] != 0;
  fillHoles(mask, s);
  Shape3 lo{s[0], s[1], s[2]}, hi{-1, -1, -1};
  for (int64_t z = 0, v = 0; z < s[0]; ++z)
    for (int64_t y = 0; y < s[1]; ++y)
      for (int64_t x = 0; x < s[2]; ++x, ++v)
        if (mask[v]) {
          const int64_t at[3] = {z, y, x};
          for (int a = 0; a < 3; ++a) {
            lo[a] = std::min(lo[a], at[a]);
            hi[a] = std::max(hi[a], at[a]);
          }
        }
  if (hi[0] < 0)
    lo = {0, 0, 0}, hi = {s[0] - 1, s[1] - 1, s[2] - 1};
  const Shape3 cs = {hi[0] - lo[0] + 1, hi[1] - lo[1] + 1, hi[2] - lo[2] + 1};
  for (auto &x : img)
    x = cropBox(x, s, lo, cs);
  seg = cropBox(seg, s, lo, cs);
  const std::vector<uint8_t> cmask = cropBox(mask, s, lo, cs);
  for (size_t v = 0; v < seg.size(); ++v)
    if (seg[v] == 0 && !cmask[v])
      seg[v] = -1;
  // Normalise, before resampling, in float32 as nnU-Net does.
  for (size_t ch = 0; ch < channels; ++ch) {
    std::vector<float> &x = img[ch];
    const std::string &scheme = schemes[ch];
    if (scheme == "CTNormalization") {
      const json &p = props.value(std::to_string(ch), json());
      if (!p.is_object() || !p.contains("mean") || !p.contains("std") ||
          !p.contains("percentile_00_5") || !p.contains("percentile_99_5"))
        throw Error(str(plansPath, ": CTNormalization of channel ", ch,
                        " needs "
                        "foreground_intensity_properties_per_channel.",
                        ch, " (mean, std, percentile_00_5, percentile_99_5)"));
      for (const char *key : {"mean", "std", "percentile_00_5", "percentile_99_5"})
        if (!p[key].is_number())
          throw Error(str(plansPath, ": foreground_intensity_properties_per_channel.", ch, ".",
                          key, ": expected a number"));
      const float mean = p["mean"].get<float>(), sd = p["std"].get<float>();
      const float l = p["percentile_00_5"].get<float>(), h = p["percentile_99_5"].get<float>();
      for (float &v : x)
        v = (std::clamp(v, l, h) - mean) / std::max(sd, 1e-8f);
    } else if (scheme == "ZScoreNormalization") {
      double sum = 0, sq = 0;
      int64_t count = 0;
      for (size_t v = 0; v < x.size(); ++v)
        if (!useMask[ch] || seg[v] >= 0) {
          sum += x[v];
          ++count;
        }
      const double mean = count ? sum / double(count) : 0;
      for (size_t v = 0; v < x.size(); ++v)
        if (!useMask[ch] || seg[v] >= 0)
          sq += (x[v] - mean) * (x[v] - mean);
      const double sd = count ? std::sqrt(sq / double(count)) : 0;
      for (size_t v = 0; v < x.size(); ++v)
        x[v] = !useMask[ch] || seg[v] >= 0 ? static_cast<float>((x[v] - mean) / std::max(sd, 1e-8))
                                           : 0.0f;
    } else if (scheme == "RescaleTo01Normalization") {
      const auto [mn, mx] = std::minmax_element(x.begin(), x.end());
      const float low = *mn, high = *mx - low;
      for (float &v : x)
        v = (v - low) / std::max(high, 1e-8f);
    } else if (scheme == "RGBTo01Normalization") {
      for (float &v : x)
        v = v / 255.0f;
    } else if (scheme != "NoNormalization") {
      throw Error(str(plansPath, ": normalization_schemes[", ch, "] = ", scheme,
                      ": expected CTNormalization, ZScoreNormalization, NoNormalization, "
                      "RescaleTo01Normalization or RGBTo01Normalization"));
    }
  }
  // Resample to the target spacing.
  Shape3 ns{};
  for (int a = 0; a < 3; ++a)
    ns[a] = static_cast<int64_t>(std::nearbyint(spacing[a] / target[a] * double(cs[a])));
  const int axis = separateAxis(spacing, target);
  out.shapeBefore = s;
  out.lo = lo;
  out.hi = hi;
  out.cropShape = cs;
  out.shape = ns;
  out.spacing = spacing;
  out.axis = axis;
  for (size_t ch = 0; ch < channels; ++ch) {
    std::vector<double> x(img[ch].begin(), img[ch].end());
    std::vector<double> r = resampleImage(x, cs, ns, 3, axis);
    out.data.emplace_back(r.begin(), r.end());
  }
  out.seg = resampleSegmentation(seg, cs, ns, axis);
  return out;
}

PreprocessSummary preprocessDataset(const PreprocessOptions &o) {
  const fs::path dir(o.dataset);
  const std::string meta = (dir / "dataset.json").string();
  if (!fs::exists(meta))
    throw Error(str(meta, ": no such file (expected an nnU-Net raw dataset folder)"));
  const json d = readJsonFile(meta);
  const std::string plansPath = o.plans.empty() ? (dir / "nnUNetPlans.json").string() : o.plans;
  if (!fs::exists(plansPath))
    throw Error(str(plansPath, ": no such file (make it with `medrun plan ", o.dataset,
                    "`, or give nnU-Net's with --plans)"));
  const PreprocessPlan plan = readPreprocessPlan(plansPath);
  const json &plans = plan.plans;
  const json &c = plans["configurations"]["3d_fullres"];
  const json &props = plan.props;
  const std::vector<std::string> &schemes = plan.schemes;
  if (!d.contains("channel_names") || d["channel_names"].size() != schemes.size())
    throw Error(str(plansPath, ": ", schemes.size(), " normalization_schemes for the ",
                    d.value("channel_names", json::object()).size(), " channels of ", meta,
                    " (expected one per channel)"));
  const size_t channels = schemes.size();
  const std::string ending = d.value("file_ending", ".nii.gz");
  std::vector<std::string> cases;
  for (const auto &e : fs::directory_iterator(dir / "labelsTr")) {
    const std::string n = e.path().filename().string();
    if (n.size() > ending.size() &&
        n.compare(n.size() - ending.size(), ending.size(), ending) == 0 && n[0] != '.')
      cases.push_back(n.substr(0, n.size() - ending.size()));
  }
  std::sort(cases.begin(), cases.end());
  if (cases.empty())
    throw Error(str((dir / "labelsTr").string(), ": no label files ending in ", ending));

  fs::create_directories(o.out);
  // dataset.json beside the cases, as nnU-Net copies it: training reads the cache as a dataset.
  fs::copy_file(meta, fs::path(o.out) / "dataset.json", fs::copy_options::overwrite_existing);
  const std::string manifestPath = (fs::path(o.out) / "preprocess.json").string();
  json old;
  if (fs::exists(manifestPath)) {
    std::ifstream in(manifestPath);
    old = json::parse(in, nullptr, false);
  }
  const std::string planKey = json({{"transpose_forward", plans["transpose_forward"]},
                                    {"3d_fullres", c},
                                    {"intensities", props}})
                                  .dump();
  std::vector<std::string> stamps(cases.size());
  PreprocessSummary summary;
  summary.cases = static_cast<int64_t>(cases.size());
  std::vector<std::exception_ptr> errors(cases.size());
  Progress::Options po;
  po.total = summary.cases;
  po.desc = "preprocess";
  po.mode = o.progressMode == 1   ? Progress::Mode::Bar
            : o.progressMode == 2 ? Progress::Mode::Lines
                                  : Progress::Mode::Auto;
  Progress bar(o.progress, po);
  std::mutex lock;
  int64_t finished = 0;
  parallelFor(summary.cases, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      try {
        const std::string &name = cases[i];
        const std::string labelPath = (dir / "labelsTr" / (name + ending)).string();
        std::vector<std::string> imagePaths;
        for (size_t ch = 0; ch < channels; ++ch) {
          char suffix[32];
          std::snprintf(suffix, sizeof suffix, "_%04zu", ch);
          imagePaths.push_back((dir / "imagesTr" / (name + suffix + ending)).string());
          if (!fs::exists(imagePaths.back()))
            throw Error(str("case ", name, ": channel ", ch, " is missing: ", imagePaths.back(),
                            " (dataset.json lists ", channels, " channel(s))"));
        }
        std::string st = planKey + "|" + stamp(labelPath);
        for (const std::string &p : imagePaths)
          st += "|" + stamp(p);
        stamps[i] = st;
        const fs::path zarr = fs::path(o.out) / (name + ".zarr");
        // The manifest is untrusted: anything but the same stamp means "do it again".
        const json *known = old.is_object() && old.contains("cases") && old["cases"].is_object() &&
                                    old["cases"].contains(name)
                                ? &old["cases"][name]
                                : nullptr;
        bool reuse = known && known->is_string() && known->get<std::string>() == st &&
                     fs::exists(zarr / "seg" / ".zarray") &&
                     fs::exists(fs::path(o.out) / (name + ".json"));
        if (!reuse) {
          const PreprocessedCase pc = preprocessCase(name, imagePaths, labelPath, plan);
          const Shape3 &ns = pc.shape, &s = pc.shapeBefore, &lo = pc.lo, &hi = pc.hi,
                       &cs = pc.cropShape;
          const std::array<double, 3> &spacing = pc.spacing;
          const int axis = pc.axis;
          const VolumeInfo &li = pc.original;
          fs::create_directories(zarr);
          for (size_t ch = 0; ch < channels; ++ch) {
            const std::vector<float> &f = pc.data[ch];
            VolumeData vd;
            vd.shape = ns;
            vd.type = VoxelType::F32;
            vd.data = f.data();
            vd.spacing = plan.target;
            char key[32];
            std::snprintf(key, sizeof key, "data_%04zu", ch);
            writeVolume((zarr / key).string(), vd);
          }
          const std::vector<int64_t> &rs = pc.seg;
          const int64_t top = rs.empty() ? 0 : *std::max_element(rs.begin(), rs.end());
          VolumeData sd;
          sd.shape = ns;
          sd.spacing = plan.target;
          std::vector<int8_t> s8;
          std::vector<int16_t> s16;
          if (top <= 127) {
            s8.assign(rs.begin(), rs.end());
            sd.type = VoxelType::I8;
            sd.data = s8.data();
          } else {
            s16.assign(rs.begin(), rs.end());
            sd.type = VoxelType::I16;
            sd.data = s16.data();
          }
          writeVolume((zarr / "seg").string(), sd);
          ojson properties = {{"spacing", spacing},
                              {"shape_before_cropping", s},
                              {"bbox_used_for_cropping",
                               {{lo[0], hi[0] + 1}, {lo[1], hi[1] + 1}, {lo[2], hi[2] + 1}}},
                              {"shape_after_cropping_and_before_resampling", cs},
                              {"shape_after_resampling", ns},
                              {"separate_z_axis", axis >= 0 ? ojson(axis) : ojson(nullptr)},
                              {"sitk_stuff", {{"spacing", li.spacing}, {"affine", li.affine}}}};
          std::ofstream pf(fs::path(o.out) / (name + ".json"));
          pf << properties.dump(4);
          if (!pf)
            throw Error(str((fs::path(o.out) / (name + ".json")).string(), ": cannot write"));
        }
        std::lock_guard<std::mutex> hold(lock);
        (reuse ? summary.reused : summary.done) += 1;
        bar.update(++finished);
      } catch (...) {
        errors[i] = std::current_exception();
      }
  });
  for (auto &e : errors)
    if (e)
      std::rethrow_exception(e);
  bar.finish();
  json manifest = {{"plans", fs::absolute(plansPath).lexically_normal().string()},
                   {"cases", json::object()}};
  for (size_t i = 0; i < cases.size(); ++i)
    manifest["cases"][cases[i]] = stamps[i];
  const std::string tmp = manifestPath + ".tmp";
  {
    std::ofstream mf(tmp);
    mf << manifest.dump(2);
    if (!mf)
      throw Error(str(tmp, ": cannot write"));
  }
  fs::rename(tmp, manifestPath);
  return summary;
}

} // namespace medrun
