//===- Interop.cpp - MedNeXt v1 state_dicts in and out -------------------------------===//
#include "medrun/Interop.h"

#include "medrun/Checkpoint.h"
#include "medrun/Error.h"
#include "medrun/Safetensors.h"
#include "medrun/TorchFile.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

namespace medrun {
namespace {

// One residual block of MedNeXt v1 (blocks.py): MedNeXtBlock, MedNeXtDownBlock (strided
// depthwise conv, 1x1x1 strided res_conv) or MedNeXtUpBlock (transposed convs).
enum class Kind { Block, Down, Up };

void blockKeys(std::vector<std::pair<std::string, Shape>> &out, const std::string &p, Kind kind,
               int64_t c, int64_t cOut, int64_t exp, int64_t k, bool grn, bool res) {
  const int64_t e = exp * c;
  // The block's own parameters come before its submodules' in a state_dict.
  if (grn) {
    out.push_back({p + "grn_beta", {1, e, 1, 1, 1}});
    out.push_back({p + "grn_gamma", {1, e, 1, 1, 1}});
  }
  // Depthwise: Conv3d weight [C, 1, k, k, k]; ConvTranspose3d [C_in, C_out/groups, ...].
  out.push_back({p + "conv1.weight", {c, 1, k, k, k}});
  out.push_back({p + "conv1.bias", {c}});
  out.push_back({p + "norm.weight", {c}});
  out.push_back({p + "norm.bias", {c}});
  out.push_back({p + "conv2.weight", {e, c, 1, 1, 1}});
  out.push_back({p + "conv2.bias", {e}});
  out.push_back({p + "conv3.weight", {cOut, e, 1, 1, 1}});
  out.push_back({p + "conv3.bias", {cOut}});
  if (kind != Kind::Block && res) {
    out.push_back({p + "res_conv.weight",
                   kind == Kind::Down ? Shape{cOut, c, 1, 1, 1} : Shape{c, cOut, 1, 1, 1}});
    out.push_back({p + "res_conv.bias", {cOut}});
  }
}

std::string list(const std::array<int64_t, 9> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

const Tensor *find(const TensorMap &m, const std::string &key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

bool isState(const std::string &name) {
  for (const CheckpointPart &part : checkpointParts())
    if (*part.prefix && name.rfind(part.prefix, 0) == 0)
      return true;
  return false;
}

} // namespace

std::string MedNeXtV1::python() const {
  std::string kernels = encKernel == decKernel
                            ? str("kernel_size=", encKernel)
                            : str("kernel_size=None, enc_kernel_size=", encKernel,
                                  ", dec_kernel_size=", decKernel);
  return str("MedNeXt(in_channels=", inChannels, ", n_channels=", nChannels,
             ", n_classes=", nClasses, ", exp_r=", list(expR), ", ", kernels,
             ", deep_supervision=", deepSupervision ? "True" : "False",
             ", do_res=True, do_res_up_down=", doResUpDown ? "True" : "False",
             ", block_counts=", list(blockCounts), ", norm_type='group', dim='3d', grn=",
             grn ? "True" : "False", ")");
}

std::string MedNeXtV1::factory() const {
  // create_mednext_v1's variants (create_mednext_v1.py): n_channels 32, residual up/down
  // blocks, no GRN, one kernel size.
  static const std::map<std::string, std::pair<std::array<int64_t, 9>, std::array<int64_t, 9>>>
      variants = {{"S", {{2, 2, 2, 2, 2, 2, 2, 2, 2}, {2, 2, 2, 2, 2, 2, 2, 2, 2}}},
                  {"B", {{2, 3, 4, 4, 4, 4, 4, 3, 2}, {2, 2, 2, 2, 2, 2, 2, 2, 2}}},
                  {"M", {{2, 3, 4, 4, 4, 4, 4, 3, 2}, {3, 4, 4, 4, 4, 4, 4, 4, 3}}},
                  {"L", {{3, 4, 8, 8, 8, 8, 8, 4, 3}, {3, 4, 8, 8, 8, 8, 8, 4, 3}}}};
  if (nChannels != 32 || !doResUpDown || grn || encKernel != decKernel)
    return "";
  for (auto &[id, v] : variants)
    if (v.first == expR && v.second == blockCounts)
      return str("create_mednext_v1(", inChannels, ", ", nClasses, ", '", id,
                 "', kernel_size=", encKernel,
                 ", deep_supervision=", deepSupervision ? "True" : "False", ")");
  return "";
}

std::string MedNeXtV1::json() const {
  return str("{\"in_channels\": ", inChannels, ", \"n_channels\": ", nChannels,
             ", \"n_classes\": ", nClasses, ", \"exp_r\": ", list(expR),
             ", \"kernel_size\": ", encKernel == decKernel ? std::to_string(encKernel) : "null",
             ", \"enc_kernel_size\": ", encKernel, ", \"dec_kernel_size\": ", decKernel,
             ", \"deep_supervision\": ", deepSupervision ? "true" : "false",
             ", \"do_res\": true, \"do_res_up_down\": ", doResUpDown ? "true" : "false",
             ", \"block_counts\": ", list(blockCounts),
             ", \"norm_type\": \"group\", \"dim\": \"3d\", \"grn\": ", grn ? "true" : "false",
             "}");
}

std::vector<std::pair<std::string, Shape>> mednextV1StateDict(const MedNeXtV1 &n) {
  std::vector<std::pair<std::string, Shape>> out;
  const int64_t c = n.nChannels;
  out.push_back({"dummy_tensor", {1}});
  out.push_back({"stem.weight", {c, n.inChannels, 1, 1, 1}});
  out.push_back({"stem.bias", {c}});
  auto stage = [&](const std::string &name, int i, int64_t w, int64_t k) {
    for (int64_t j = 0; j < n.blockCounts[i]; ++j)
      blockKeys(out, str(name, ".", j, "."), Kind::Block, w, w, n.expR[i], k, n.grn, false);
  };
  for (int i = 0; i < 4; ++i) {
    const int64_t w = c << i;
    stage(str("enc_block_", i), i, w, n.encKernel);
    // down_i uses the next stage's expansion ratio; down_0 never has GRN.
    blockKeys(out, str("down_", i, "."), Kind::Down, w, 2 * w, n.expR[i + 1], n.encKernel,
              n.grn && i > 0, n.doResUpDown);
  }
  stage("bottleneck", 4, 16 * c, n.decKernel);
  for (int i = 3, s = 5; i >= 0; --i, ++s) {
    const int64_t w = c << i;
    blockKeys(out, str("up_", i, "."), Kind::Up, 2 * w, w, n.expR[s], n.decKernel, n.grn,
              n.doResUpDown);
    stage(str("dec_block_", i), s, w, n.decKernel);
  }
  // OutBlock: ConvTranspose3d(C, classes, 1), weight [C, classes, 1, 1, 1].
  for (int i = 0; i <= (n.deepSupervision ? 4 : 0); ++i) {
    out.push_back({str("out_", i, ".conv_out.weight"), {c << i, n.nClasses, 1, 1, 1}});
    out.push_back({str("out_", i, ".conv_out.bias"), {n.nClasses}});
  }
  return out;
}

void checkKeys(const std::vector<std::pair<std::string, Shape>> &expected,
               const TensorMap &tensors, const std::string &what) {
  std::vector<std::string> missing, unexpected, shapes;
  std::set<std::string> known;
  for (auto &[key, shape] : expected) {
    known.insert(key);
    const Tensor *t = find(tensors, key);
    if (!t)
      missing.push_back(key);
    else if (t->shape() != shape)
      shapes.push_back(str(key, " (", shapeStr(t->shape()), ", expected ", shapeStr(shape), ")"));
  }
  for (auto &[key, t] : tensors)
    if (!known.count(key))
      unexpected.push_back(str(key, " (", shapeStr(t.shape()), ")"));
  if (missing.empty() && unexpected.empty() && shapes.empty())
    return;
  auto part = [](const char *title, const std::vector<std::string> &keys) {
    if (keys.empty())
      return std::string();
    std::string s = str("; ", keys.size(), " ", title, ": ");
    for (size_t i = 0; i < keys.size() && i < 5; ++i)
      s += (i ? ", " : "") + keys[i];
    return keys.size() > 5 ? s + ", ..." : s;
  };
  throw Error(str(what, part("missing", missing), part("unexpected", unexpected),
                  part("of another shape", shapes)));
}

MedNeXtV1 mednextV1Of(const TensorMap &tensors, const std::string &what) {
  const std::string notV1 = str(what, ": not a MedNeXt v1 state_dict");
  auto dim = [&](const std::string &key, size_t rank, size_t d) -> int64_t {
    const Tensor *t = find(tensors, key);
    if (!t)
      throw Error(str(notV1, " (no '", key, "')"));
    if (t->shape().size() != rank)
      throw Error(str(notV1, " ('", key, "' is ", shapeStr(t->shape()), ", expected rank ",
                      rank, ")"));
    return t->shape()[d];
  };
  MedNeXtV1 n;
  n.nChannels = dim("stem.weight", 5, 0);
  n.inChannels = dim("stem.weight", 5, 1);
  n.nClasses = dim("out_0.conv_out.weight", 5, 1);
  n.encKernel = dim("down_0.conv1.weight", 5, 2);
  n.decKernel = dim("up_3.conv1.weight", 5, 2);
  n.deepSupervision = find(tensors, "out_1.conv_out.weight") != nullptr;
  n.doResUpDown = find(tensors, "down_0.res_conv.weight") != nullptr;
  n.grn = find(tensors, "down_1.grn_beta") != nullptr;
  const char *stages[9] = {"enc_block_0", "enc_block_1", "enc_block_2", "enc_block_3",
                           "bottleneck",  "dec_block_3", "dec_block_2", "dec_block_1",
                           "dec_block_0"};
  const int64_t widths[9] = {1, 2, 4, 8, 16, 8, 4, 2, 1};
  if (n.nChannels <= 0)
    throw Error(str(notV1, " ('stem.weight' has no output channels)"));
  for (int i = 0; i < 9; ++i) {
    int64_t j = 0;
    while (find(tensors, str(stages[i], ".", j, ".conv1.weight")))
      ++j;
    n.blockCounts[i] = j;
    // The expansion ratio: from the stage's first block, else from the resampling block
    // that shares it (down_{i-1} before an encoder stage, up_* before a decoder stage).
    const int64_t w = n.nChannels * widths[i];
    n.expR[i] = j        ? dim(str(stages[i], ".0.conv2.weight"), 5, 0) / w
                : i == 0 ? 1 // no key depends on it
                : i <= 4 ? dim(str("down_", i - 1, ".conv2.weight"), 5, 0) / (w / 2)
                         : dim(str("up_", 8 - i, ".conv2.weight"), 5, 0) / (2 * w);
    n.expR[i] = std::max<int64_t>(n.expR[i], 1);
  }
  std::vector<std::pair<std::string, Shape>> expected = mednextV1StateDict(n);
  if (!find(tensors, "dummy_tensor"))
    expected.erase(expected.begin());
  checkKeys(expected, tensors, str(notV1, " of ", n.python()));
  return n;
}

void eraseDummyTensor(TensorMap &tensors) {
  auto it = tensors.find("dummy_tensor");
  if (it != tensors.end() && it->second.shape() == Shape{1})
    tensors.erase(it);
}

std::vector<const ParameterInfo *> modelParameters(const Artifact &artifact) {
  std::vector<const ParameterInfo *> out;
  for (const ParameterInfo &p : artifact.parameters)
    if (!isState(p.name))
      out.push_back(&p);
  return out;
}

TensorMap readStateDict(const std::string &path, std::string *note) {
  if (std::filesystem::is_directory(path))
    throw Error(str(path, ": a directory; weights come from a file (a run's checkpoint: "
                          "`medrun export ", path, " -o W.safetensors` writes one, or "
                          "`medrun train --resume` continues the run)"));
  if (!std::filesystem::is_regular_file(path))
    throw Error(str(path, ": no such file (expected a state_dict: .safetensors, or a PyTorch "
                          ".pth/.pt file)"));
  TensorMap tensors;
  std::string done;
  if (isTorchFile(path)) {
    tensors = readTorchStateDict(path, &done);
  } else {
    for (auto &[key, t] : readSafetensors(path).tensors)
      tensors.emplace(key, std::move(t));
  }
  // Wrappers prefix every key: DataParallel/DDP `module.`, torch.compile `_orig_mod.`,
  // a LightningModule's `model.` (BANIS: model._orig_mod.<key>).
  for (bool again = true; again && !tensors.empty();) {
    again = false;
    for (const char *prefix : {"module.", "_orig_mod.", "model."}) {
      const std::string p = prefix;
      if (!std::all_of(tensors.begin(), tensors.end(),
                       [&](auto &kv) { return kv.first.rfind(p, 0) == 0; }))
        continue;
      TensorMap stripped;
      for (auto &[key, t] : tensors)
        stripped.emplace(key.substr(p.size()), std::move(t));
      tensors = std::move(stripped);
      done += str(done.empty() ? "" : "; ", "removed the prefix '", p, "' of every key");
      again = true;
    }
  }
  for (auto &[key, t] : tensors) {
    if (!isFloat(t.dtype()))
      throw Error(str(path, ": tensor '", key, "' is ", dtypeName(t.dtype()),
                      ", expected floating point weights"));
    if (t.dtype() != DType::F32)
      t = t.to(DType::F32);
  }
  eraseDummyTensor(tensors);
  if (note)
    *note = done;
  return tensors;
}

namespace {

// Source indices and weights along one axis, as PyTorch's CPU upsampling computes them
// (UpSample.h: area_pixel_compute_scale, area_pixel_compute_source_index,
// guard_index_and_lambda; float arithmetic for float tensors).
struct Axis {
  std::vector<int64_t> i0, i1;
  std::vector<float> w0, w1;
};

Axis linearAxis(int64_t in, int64_t out, bool alignCorners) {
  Axis a;
  const float scale = alignCorners ? (out > 1 ? static_cast<float>(in - 1) / (out - 1) : 0.0f)
                                   : static_cast<float>(in) / out;
  for (int64_t d = 0; d < out; ++d) {
    if (in == out) {
      a.i0.push_back(d);
      a.i1.push_back(d);
      a.w0.push_back(1.0f);
      a.w1.push_back(0.0f);
      continue;
    }
    float real = alignCorners ? scale * d : scale * (d + 0.5f) - 0.5f;
    if (real < 0)
      real = 0;
    const int64_t i = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
    const float lambda = std::min(std::max(real - i, 0.0f), 1.0f);
    a.i0.push_back(i);
    a.i1.push_back(i + (i < in - 1 ? 1 : 0));
    a.w1.push_back(lambda);
    a.w0.push_back(1.0f - lambda);
  }
  return a;
}

} // namespace

Tensor interpolateTrilinear(const Tensor &w, const std::array<int64_t, 3> &size,
                            bool alignCorners) {
  if (w.rank() != 5 || w.dtype() != DType::F32)
    throw Error(str("trilinear interpolation needs a rank-5 f32 tensor, got ",
                    shapeStr(w.shape()), " ", dtypeName(w.dtype())));
  const int64_t planes = w.dim(0) * w.dim(1), D = w.dim(2), H = w.dim(3), W = w.dim(4);
  const Axis ad = linearAxis(D, size[0], alignCorners), ah = linearAxis(H, size[1], alignCorners),
             aw = linearAxis(W, size[2], alignCorners);
  Tensor out(DType::F32, {w.dim(0), w.dim(1), size[0], size[1], size[2]});
  const float *src = w.data<float>();
  float *dst = out.data<float>();
  for (int64_t p = 0; p < planes; ++p) {
    const float *s = src + p * D * H * W;
    for (int64_t z = 0; z < size[0]; ++z)
      for (int64_t y = 0; y < size[1]; ++y)
        for (int64_t x = 0; x < size[2]; ++x) {
          // Nested as PyTorch's Interpolate<3>: depth outermost, t0 * w0 + t1 * w1 per axis.
          auto row = [&](int64_t zi, int64_t yi) {
            const float *r = s + (zi * H + yi) * W;
            return r[aw.i0[x]] * aw.w0[x] + r[aw.i1[x]] * aw.w1[x];
          };
          auto plane = [&](int64_t zi) {
            return row(zi, ah.i0[y]) * ah.w0[y] + row(zi, ah.i1[y]) * ah.w1[y];
          };
          *dst++ = plane(ad.i0[z]) * ad.w0[z] + plane(ad.i1[z]) * ad.w1[z];
        }
  }
  return out;
}

std::vector<std::string> initFromWeights(const Artifact &artifact, TensorMap &params,
                                         const TensorMap &weights, bool upkern,
                                         const std::string &what) {
  std::vector<std::pair<std::string, Shape>> expected;
  for (const ParameterInfo *p : modelParameters(artifact))
    expected.push_back({p->name, p->shape});
  TensorMap given = weights;
  eraseDummyTensor(given);
  std::vector<std::string> resized;
  if (upkern) {
    // upkern_load_weights: a weight of another spatial size (not a bias or a norm) whose
    // channel dimensions agree is interpolated to ours; everything else is taken as it is.
    for (auto &[key, shape] : expected) {
      auto it = given.find(key);
      if (it == given.end() || it->second.shape() == shape || shape.size() != 5 ||
          it->second.rank() != 5 || it->second.dim(0) != shape[0] ||
          it->second.dim(1) != shape[1] || key.find("bias") != std::string::npos ||
          key.find("norm") != std::string::npos)
        continue;
      it->second = interpolateTrilinear(it->second.to(DType::F32), {shape[2], shape[3], shape[4]});
      resized.push_back(key);
    }
  }
  // Kernels of another size where the channels agree: the user may want --upkern.
  bool otherKernel = false;
  for (auto &[key, shape] : expected)
    if (const Tensor *t = find(given, key); t && t->rank() == 5 && shape.size() == 5 &&
                                            t->shape() != shape && t->dim(0) == shape[0] &&
                                            t->dim(1) == shape[1])
      otherKernel = true;
  checkKeys(expected, given,
            str(what, ": the weights do not match the model (", artifact.source, ")",
                otherKernel && !upkern
                    ? " (kernels of another size: --upkern interpolates them)"
                    : ""));
  for (auto &[key, shape] : expected) {
    const ParameterInfo *p = artifact.parameter(key);
    const Tensor &t = given.at(key);
    params[key] = t.dtype() == p->dtype ? t.clone() : t.to(p->dtype);
  }
  // EMA weights start as the loaded weights (they are declared as copies of them).
  for (const ParameterInfo &p : artifact.parameters)
    if (p.init == "copy" && !isState(p.source))
      params[p.name] = params.at(p.source).clone();
  return resized;
}

void initFromFile(const Artifact &artifact, TensorMap &params, const std::string &path,
                  bool upkern, FILE *console) {
  std::string note;
  TensorMap weights = readStateDict(path, &note);
  std::vector<std::string> resized = initFromWeights(artifact, params, weights, upkern, path);
  std::fprintf(console, "initialized %zu model parameters from %s%s%s\n",
               modelParameters(artifact).size(), path.c_str(), note.empty() ? "" : ": ",
               note.c_str());
  if (upkern) {
    std::string first = resized.empty() ? "" : resized.front();
    std::fprintf(console, "upkern: %zu kernels resized by trilinear interpolation%s%s\n",
                 resized.size(), first.empty() ? "" : ", e.g. ", first.c_str());
  }
}

} // namespace medrun
