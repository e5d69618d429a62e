//===- InferCommand.cpp - `medrun infer` --------------------------------------------===//
#include "InferCommand.h"

#include "CommandArgs.h"

#include "medrun/Artifact.h"
#include "medrun/Checkpoint.h"
#include "medrun/Cuda.h"
#include "medrun/Dataset.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/Npy.h"
#include "medrun/Safetensors.h"
#include "medrun/SlidingWindow.h"
#include "medrun/TorchFile.h"
#include "medrun/TrainLog.h"
#include "medrun/Volume.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <type_traits>

namespace medrun {
namespace {

namespace fs = std::filesystem;

bool isState(const std::string &key) {
  return key.rfind("ema.", 0) == 0 || key.rfind("optimizer.", 0) == 0;
}

} // namespace

TensorMap loadWeights(const Artifact &a, const Function &fn, const std::string &path,
                      std::string &weights) {
  if (path.empty())
    throw Error("medrun infer needs the trained weights: --params CHECKPOINT (a run's "
                "checkpoints/best, a step directory) or a safetensors file");
  if (!weights.empty() && weights != "model" && weights != "ema")
    throw Error(str("--weights: expected model or ema, got '", weights, "'"));
  TensorMap params = loadTensors(path);
  std::set<std::string> read;
  for (const OpInfo &op : fn.ops)
    if (op.kind == "param" && !isState(op.strAttr("name")))
      read.insert(op.strAttr("name"));
  if (weights.empty()) {
    weights = "ema";
    for (const std::string &key : read)
      if (!params.count("ema." + key))
        weights = "model";
  }
  if (weights == "ema")
    for (const std::string &key : read) {
      auto ema = params.find("ema." + key);
      if (ema == params.end())
        throw Error(str(path, ": --weights ema: no EMA weight 'ema.", key, "' for the parameter '",
                        key, "' (was the run trained with ema?)"));
      params[key] = ema->second;
    }
  for (auto it = params.begin(); it != params.end();)
    it = isState(it->first) ? params.erase(it) : std::next(it);
  try {
    checkParameters(a, params, &fn);
  } catch (const Error &e) {
    throw Error(str(path, ": ", e.what()));
  }
  return params;
}

namespace {

/// The activation the recipe's loss implies: sigmoid for bce_with_logits, softmax for
/// dice_ce (the artifact's `loss` option, "type=... ...").
std::string defaultActivation(const Artifact &a) {
  auto it = a.options.find("loss");
  const std::string loss = it == a.options.end() ? "" : it->second;
  if (loss.find("type=bce") != std::string::npos)
    return "sigmoid";
  if (loss.find("type=dice_ce") != std::string::npos)
    return "softmax";
  throw Error(str(a.path, ": the artifact names no loss (compiled without --recipe?); choose "
                  "--activation sigmoid, softmax or none"));
}

} // namespace

std::optional<DataContract> findContract(const std::string &path, std::string &from) {
  std::string dir;
  try {
    dir = resolveCheckpoint(path);
  } catch (const Error &) {
    // A weights file: `medrun export` puts the run's contract into its metadata.
    if (!fs::is_regular_file(path) || isTorchFile(path))
      return std::nullopt;
    const SafetensorsFile f = readSafetensors(path);
    auto it = f.metadata.find(kContractMetadataKey);
    if (it == f.metadata.end())
      return std::nullopt;
    nlohmann::json j = nlohmann::json::parse(it->second, nullptr, false);
    from = str(path, " (metadata ", kContractMetadataKey, ")");
    if (j.is_discarded())
      throw Error(str(from, ": malformed JSON (the run's data contract)"));
    return DataContract::fromJson(j, from);
  }
  const fs::path state = fs::path(dir) / "state.json";
  std::ifstream in(state);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_object() && j.contains("extra") && j["extra"].is_object() &&
      j["extra"].contains("data")) {
    from = state.string() + " (extra.data)";
    return DataContract::fromJson(j["extra"]["data"], from);
  }
  // A step directory of a run: RUN/checkpoints/step_N.
  const fs::path run = fs::path(dir).parent_path().parent_path() / "data.json";
  if (fs::exists(run)) {
    std::ifstream rin(run);
    nlohmann::json r = nlohmann::json::parse(rin, nullptr, false);
    if (r.is_discarded())
      throw Error(str(run.string(), ": malformed JSON (the run's data contract)"));
    from = run.string();
    return DataContract::fromJson(r, from);
  }
  return std::nullopt;
}

namespace {

/// How channel `c` is normalised: as --normalization says, else as the run's contract says;
/// with neither, an Error that names what is missing (never a guess).
ChannelNormalization channelNormalization(const InferOptions &o,
                                          const std::optional<DataContract> &contract,
                                          const std::string &from, size_t c) {
  if (contract && !contract->preprocessed.empty() && o.normalization.empty())
    throw Error(str(from,
                    ": the run trained on a preprocessed cache (cropped, normalised and "
                    "resampled by ",
                    contract->preprocessed,
                    "), which infer cannot do to a raw "
                    "volume: give it the case's preprocessed volumes (CACHE/CASE.zarr/data_XXXX) "
                    "with --normalization none"));
  if (!o.normalization.empty()) {
    const std::string &n = o.normalization;
    if (n == "ct")
      throw Error("--normalization ct: CT normalisation needs the training data's intensity "
                  "statistics, which only a run's checkpoint holds: give --params a run's "
                  "checkpoint and leave --normalization out");
    if (n != "none" && n != "divide255" && n != "zscore")
      throw Error(str("--normalization: expected none, divide255 or zscore, got '", n,
                      "' (without it, the run's own normalisation is applied)"));
    ChannelNormalization norm;
    norm.scheme = n;
    if (contract && contract->channels[c].scheme != n)
      std::fprintf(stderr,
                   "medrun: warning: --normalization %s replaces the normalisation the model "
                   "was trained with, %s (%s): the prediction will differ from validation's\n",
                   n.c_str(), contract->channels[c].describe().c_str(), from.c_str());
    return norm;
  }
  if (!contract)
    throw Error(str(o.params,
                    ": holds no data contract (the normalisation the model was "
                    "trained with, which a run's checkpoint keeps in state.json, extra.data): "
                    "infer with a run's checkpoint (RUN/checkpoints/best), or name the "
                    "normalisation with --normalization none, divide255 or zscore"));
  return contract->channels[c];
}

} // namespace

int inferCommand(const InferOptions &o) {
  Artifact a = Artifact::load(o.artifact);
  const Function &fn = a.function("infer");
  if (fn.inputs.size() != 1 || fn.outputs.size() < 1)
    throw Error(str(a.path, ": function 'infer' should take one image and return the prediction"));
  const Shape &in = fn.values[fn.inputs[0]].shape;
  if (in.size() != 5)
    throw Error(str(a.path, ": 'infer' takes ", shapeStr(in), ", expected [batch, C, D, H, W]"));
  std::string activation = o.activation.empty() ? defaultActivation(a) : o.activation;
  {
    Tensor probe(DType::F32, {1, 1});
    applyActivation(probe, activation); // rejects a bad name before any work
  }
  if (o.device != "cpu" && o.device != "cuda")
    throw Error(str("--device: expected cpu or cuda, got '", o.device, "'"));
  if (o.out.empty())
    throw Error("medrun infer: give the output with -o (OUT.nii.gz, OUT.h5/KEY, OUT.zarr/KEY, .npy)");
  if (o.images.size() != static_cast<size_t>(in[1]))
    throw Error(str(a.path, ": the network takes ", in[1], " input channel(s); got ",
                    o.images.size(), " --image volume(s) (one per channel)"));
  std::string weights = o.weights;
  TensorMap params = loadWeights(a, fn, o.params, weights);
  std::string from;
  const std::optional<DataContract> contract = findContract(o.params, from);
  if (contract && contract->channels.size() != static_cast<size_t>(in[1]))
    throw Error(str(from, ": the run's data contract lists ", contract->channels.size(),
                    " input channel(s), but ", a.path, "'s network takes ", in[1]));
  const int64_t outChannels =
      fn.values[fn.outputs[0]].shape.size() == 5 ? fn.values[fn.outputs[0]].shape[1] : -1;
  if (contract && contract->source == "nnunet" && activation == "softmax" && outChannels > 0 &&
      static_cast<int64_t>(contract->labels.size()) != outChannels)
    throw Error(str(from, ": the run's data contract lists ", contract->labels.size(),
                    " classes, but ", a.path, "'s network predicts ", outChannels,
                    " (an artifact of another recipe?)"));

  // The image: one channel per volume, all of one shape, normalised as in training.
  std::vector<std::unique_ptr<VolumeReader>> readers;
  for (const std::string &path : o.images) {
    readers.push_back(openVolume(path));
    readers.back()->assumeSpacing(o.spacing, "--spacing");
    if (readers.back()->info().shape != readers.front()->info().shape) {
      const Box3 &s = readers.back()->info().shape, &f = readers.front()->info().shape;
      throw Error(str(path, ": shape ", s[0], "x", s[1], "x", s[2], " differs from ",
                      o.images.front(), "'s ", f[0], "x", f[1], "x", f[2]));
    }
  }
  const VolumeInfo &info = readers.front()->info();
  const Box3 shape = info.shape;
  const int64_t voxels = shape[0] * shape[1] * shape[2];
  const bool chunked = isChunkedVolumePath(o.out);
  // The host memory the blocks may take; the input's chunk cache takes an eighth of it.
  const double memoryMb = o.memoryMb > 0 ? o.memoryMb : 2048;
  auto cache = std::make_shared<ChunkCache>(static_cast<size_t>(memoryMb / 8 * 1048576));
  for (auto &r : readers)
    r->setCache(cache);
  std::vector<ChannelNormalization> norms;
  for (size_t c = 0; c < readers.size(); ++c) {
    ChannelNormalization norm = channelNormalization(o, contract, from, c);
    if (norm.scheme == "zscore") {
      // The volume's own mean and std, summed slab by slab in voxel order (as
      // useVolumeStatistics sums a whole volume): the input is never read whole.
      // Slabs of whole planes, or of rows where a plane is larger than 64 MiB.
      const int64_t slabVoxels = std::max<int64_t>(shape[2], (int64_t(64) << 20) / 4);
      const int64_t plane = shape[1] * shape[2];
      const int64_t depth = std::clamp<int64_t>(slabVoxels / plane, 1, shape[0]);
      const int64_t rows = depth > 1 ? shape[1] : std::clamp<int64_t>(slabVoxels / shape[2], 1, shape[1]);
      std::vector<float> slab(static_cast<size_t>(depth * rows * shape[2]));
      double sum = 0, sq = 0;
      for (int64_t z = 0; z < shape[0]; z += depth)
        for (int64_t y = 0; y < shape[1]; y += rows) {
          const Box3 size{std::min(depth, shape[0] - z), std::min(rows, shape[1] - y), shape[2]};
          readers[c]->read({z, y, 0}, size, slab.data());
          for (int64_t i = 0; i < size[0] * size[1] * size[2]; ++i) {
            sum += slab[i];
            sq += static_cast<double>(slab[i]) * slab[i];
          }
        }
      norm.mean = sum / static_cast<double>(voxels);
      norm.std = std::sqrt(std::max(0.0, sq / static_cast<double>(voxels) - norm.mean * norm.mean));
    }
    std::fprintf(stderr, "infer: channel %zu%s: normalization %s%s\n", c,
                 norm.name.empty() ? "" : str(" (", norm.name, ")").c_str(),
                 norm.scheme == "zscore" ? "zscore (the volume's own mean and std)"
                                         : norm.describe().c_str(),
                 o.normalization.empty() ? str(", from ", from).c_str() : ", from --normalization");
    norms.push_back(norm);
  }
  if (contract && contract->spacing) {
    // Inference does not resample: an input of another spacing is not what training saw.
    const std::array<double, 3> &t = *contract->spacing;
    if (info.spacingFrom.empty())
      std::fprintf(stderr,
                   "medrun: note: %s states no spacing; the training cases had %g x %g x %g "
                   "(z, y, x; %s): give --spacing if the input's differs\n",
                   info.name().c_str(), t[0], t[1], t[2], from.c_str());
    else
      for (int k = 0; k < 3; ++k)
        if (std::abs(info.spacing[k] - t[k]) > 0.05 * t[k]) {
          std::fprintf(stderr,
                       "medrun: warning: %s has spacing %g x %g x %g (z, y, x; %s), the "
                       "training cases %g x %g x %g (%s); infer does not resample: resample "
                       "the image to the training spacing first\n",
                       info.name().c_str(), info.spacing[0], info.spacing[1], info.spacing[2],
                       info.spacingFrom.c_str(), t[0], t[1], t[2], from.c_str());
          break;
        }
  }

  SlidingWindowOptions sw;
  sw.window = {in[2], in[3], in[4]};
  sw.batch = in[0];
  sw.overlap = o.overlap;
  sw.mirror = o.mirror;
  if (outChannels < 1)
    throw Error(str(a.path, ": 'infer' returns ", shapeStr(fn.values[fn.outputs[0]].shape),
                    ", expected [batch, C, D, H, W]"));

  // The blocks: the whole volume for an output written whole (.npy, NIfTI) unless --block
  // asks; else --block, or the largest block of whole chunks that fits the memory.
  Box3 chunk;
  for (int a = 0; a < 3; ++a) {
    if (o.chunk[a] < 1)
      throw Error(str("--chunk: expected positive sizes, got ", o.chunk[0], ",", o.chunk[1], ",",
                      o.chunk[2]));
    chunk[a] = std::min(o.chunk[a], shape[a]);
  }
  const bool blockGiven = o.block[0] > 0;
  Box3 block = shape;
  if (blockGiven) {
    for (int a = 0; a < 3; ++a) {
      block[a] = std::min(o.block[a], shape[a]);
      if (chunked && block[a] % chunk[a] != 0 && block[a] != shape[a])
        throw Error(str("--block ", o.block[0], ",", o.block[1], ",", o.block[2],
                        ": not whole output chunks of ", chunk[0], "x", chunk[1], "x", chunk[2],
                        " (--chunk) along axis ", a, ": each chunk must come from one block"));
    }
  } else if (chunked || o.memoryMb > 0) {
    const double budget = memoryMb * 1048576;
    auto bytes = [&](const Box3 &b) {
      return slidingWindowBlockBytes(shape, in[1], outChannels, b, sw);
    };
    // Round the volume up to whole chunks, then take a chunk off the longest axis until the
    // block fits.
    for (int a = 0; a < 3; ++a)
      block[a] = (shape[a] + chunk[a] - 1) / chunk[a] * chunk[a];
    while (static_cast<double>(bytes(block)) > budget) {
      int longest = -1;
      for (int a = 0; a < 3; ++a)
        if (block[a] > chunk[a] && (longest < 0 || block[a] > block[longest]))
          longest = a;
      if (longest < 0)
        throw Error(str("--memory ", memoryMb, " (MiB): one block of one output chunk (", chunk[0], "x",
                        chunk[1], "x", chunk[2], ") and its halo needs ",
                        (bytes(block) + (1 << 20) - 1) >> 20, " MiB: raise --memory or make --chunk smaller"));
      block[longest] -= chunk[longest];
    }
    for (int a = 0; a < 3; ++a)
      block[a] = std::min(block[a], shape[a]);
  }
  struct Block {
    Box3 lo, size;
  };
  std::vector<Block> blocks;
  for (int64_t z = 0; z < shape[0]; z += block[0])
    for (int64_t y = 0; y < shape[1]; y += block[1])
      for (int64_t x = 0; x < shape[2]; x += block[2])
        blocks.push_back({{z, y, x},
                          {std::min(block[0], shape[0] - z), std::min(block[1], shape[1] - y),
                           std::min(block[2], shape[2] - x)}});

  std::unique_ptr<CudaSession> session;
  if (o.device == "cuda") {
    session = std::make_unique<CudaSession>(a);
    session->setState(params); // the weights stay on the GPU for every batch
  }
  WindowPredictor predict = [&](const Tensor &batch) {
    std::vector<Tensor> out =
        session ? session->run(fn, {batch}, params) : runCpu(a, fn, {batch}, params);
    return out[0];
  };
  InputReader read = [&](const Box3 &lo, const Box3 &size, float *dst) {
    const int64_t n = size[0] * size[1] * size[2];
    for (size_t c = 0; c < readers.size(); ++c) {
      readers[c]->read(lo, size, dst + c * n);
      norms[c].apply(dst + c * n, n);
    }
  };

  VolumeData header;
  header.shape = shape;
  header.channels = outChannels;
  header.type = VoxelType::F32;
  header.spacing = info.spacing;
  header.affine = info.affine;

  // Resuming: the blocks a run with the same settings already wrote (chunked outputs).
  const std::string progressFile = chunked ? inferProgressPath(o.out) : "";
  nlohmann::json settings;
  std::set<size_t> done;
  if (chunked) {
    uint32_t weightsCrc = 0;
    for (const auto &[name, t] : params) {
      weightsCrc = crc32(name.data(), name.size(), weightsCrc);
      weightsCrc = crc32(t.raw(), t.nbytes(), weightsCrc);
    }
    std::ifstream art(o.artifact, std::ios::binary);
    std::string artBytes((std::istreambuf_iterator<char>(art)), {});
    nlohmann::json norm = nlohmann::json::array(), images = nlohmann::json::array();
    for (const ChannelNormalization &n : norms)
      norm.push_back({n.scheme, n.mean, n.std, n.lo, n.hi});
    for (const auto &r : readers)
      images.push_back(fs::absolute(r->info().path).string() + (r->info().key.empty() ? "" : "/" + r->info().key));
    settings = {{"artifact_crc32", crc32(artBytes.data(), artBytes.size())},
                {"weights_crc32", weightsCrc},
                {"images", images},
                {"shape", shape},
                {"normalization", norm},
                {"activation", activation},
                {"overlap", o.overlap},
                {"mirror", o.mirror},
                {"block", block},
                {"chunk", chunk},
                {"channels", outChannels}};
    // As the file holds them (infinities as null, numbers as printed).
    settings = nlohmann::json::parse(settings.dump());
    if (fs::exists(progressFile)) {
      std::ifstream pin(progressFile);
      nlohmann::json prior = nlohmann::json::parse(pin, nullptr, false);
      if (!prior.is_discarded() && prior.is_object() &&
          prior.value("settings", nlohmann::json()) == settings &&
          prior.value("done", nlohmann::json()).is_array()) {
        // Ranges [first, last] of block indices (raster order).
        for (const nlohmann::json &r : prior["done"])
          if (r.is_array() && r.size() == 2 && r[0].is_number_unsigned() &&
              r[1].is_number_unsigned() && r[0].get<size_t>() <= r[1].get<size_t>() &&
              r[1].get<size_t>() < blocks.size())
            for (size_t b = r[0].get<size_t>(); b <= r[1].get<size_t>(); ++b)
              done.insert(b);
      } else {
        std::fprintf(stderr,
                     "infer: %s records no run with these settings (artifact, weights, image, "
                     "normalization, activation, overlap, mirror, block, chunks), or is not "
                     "readable: predicting %s again from the start\n",
                     progressFile.c_str(), o.out.c_str());
      }
    }
  }
  std::unique_ptr<VolumeWriter> writer;
  if (chunked) {
    try {
      writer = createVolume(o.out, header, chunk, !done.empty());
    } catch (const Error &e) {
      if (done.empty())
        throw;
      std::fprintf(stderr, "infer: %s: cannot continue it (%s): predicting it again\n",
                   o.out.c_str(), e.what());
      done.clear();
      writer = createVolume(o.out, header, chunk, false);
    }
  }
  auto saveProgress = [&] {
    // The blocks done as ranges: blocks finish in order, so the file stays small.
    nlohmann::json ranges = nlohmann::json::array();
    for (size_t b : done)
      if (!ranges.empty() && ranges.back()[1].get<size_t>() + 1 == b)
        ranges.back()[1] = b;
      else
        ranges.push_back({b, b});
    nlohmann::json j = {{"format", "medrun infer progress 1"},
                        {"output", o.out},
                        {"blocks", blocks.size()},
                        {"done_blocks", done.size()},
                        {"settings", settings},
                        {"done", ranges}};
    const std::string text = j.dump(1) + "\n";
    detail::writeFileAtomic(progressFile, {{text.data(), text.size()}});
  };
  if (chunked && done.empty())
    saveProgress(); // a fresh run: nothing of an older one counts

  std::vector<int64_t> batches(blocks.size());
  int64_t total = 0, initial = 0, todoVoxels = 0;
  for (size_t b = 0; b < blocks.size(); ++b) {
    batches[b] = slidingWindowBlockBatches(shape, blocks[b].lo, blocks[b].size, sw);
    total += batches[b];
    if (done.count(b))
      initial += batches[b];
    else
      todoVoxels += blocks[b].size[0] * blocks[b].size[1] * blocks[b].size[2];
  }
  std::fprintf(stderr, "infer %s: %lldx%lldx%lld, windows %lldx%lldx%lld (batch %lld, overlap "
               "%g%s), %s weights, %lld batches on %s\n",
               info.name().c_str(), (long long)shape[0], (long long)shape[1],
               (long long)shape[2], (long long)in[2], (long long)in[3], (long long)in[4],
               (long long)in[0], o.overlap, o.mirror ? ", mirrored 8 ways" : "", weights.c_str(),
               (long long)total, session ? session->deviceName().c_str() : "the CPU");
  if (blocks.size() > 1 || chunked)
    std::fprintf(stderr,
                 "infer: %zu block(s) of %lldx%lldx%lld (--memory %g MiB: %.3g MiB "
                 "each), output chunks %lldx%lldx%lld%s\n",
                 blocks.size(), (long long)block[0], (long long)block[1], (long long)block[2],
                 memoryMb,
                 slidingWindowBlockBytes(shape, in[1], outChannels, block, sw) / 1048576.0,
                 (long long)chunk[0], (long long)chunk[1], (long long)chunk[2],
                 done.empty() ? "" : str("; ", done.size(), " already written (", progressFile,
                                         "), skipped").c_str());
  Progress::Options po;
  po.total = total;
  po.initial = initial;
  po.desc = "infer";
  po.mode = o.progress == 1 ? Progress::Mode::Bar
            : o.progress == 2 ? Progress::Mode::Lines
                              : Progress::Mode::Auto;
  po.every = std::max<int64_t>(1, total / 10);
  Progress bar(stderr, po);
  const auto start = std::chrono::steady_clock::now();
  int64_t voxelsDone = 0, batchesDone = initial;
  // Output voxels per second, counting a block's voxels in step with its batches.
  auto rate = [&](int64_t step) -> std::vector<std::pair<std::string, double>> {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double share = total > initial ? double(step - initial) / double(total - initial) : 1;
    return {{"Mvox/s", s > 0 ? share * double(todoVoxels) / s / 1e6 : 0.0}};
  };

  Tensor whole; // outputs written whole: the blocks assembled
  if (!chunked)
    whole = Tensor(DType::F32, {outChannels, shape[0], shape[1], shape[2]});
  for (size_t b = 0; b < blocks.size(); ++b) {
    if (done.count(b))
      continue;
    const Block &blk = blocks[b];
    const int64_t base = batchesDone;
    Tensor t = slidingWindowBlock(shape, in[1], blk.lo, blk.size, sw, read, predict,
                                  [&](int64_t k, int64_t) { bar.update(base + k, rate(base + k)); });
    batchesDone += batches[b];
    applyActivation(t, activation);
    if (t.dim(0) != outChannels)
      throw Error(str(a.path, ": 'infer' returned ", t.dim(0), " channels, its signature says ",
                      outChannels));
    const int64_t n = blk.size[0] * blk.size[1] * blk.size[2];
    voxelsDone += n;
    if (chunked) {
      writer->write(blk.lo, blk.size, t.raw());
      writer->flush();
      done.insert(b);
      saveProgress();
    } else {
      for (int64_t c = 0; c < outChannels; ++c)
        for (int64_t z = 0; z < blk.size[0]; ++z)
          for (int64_t y = 0; y < blk.size[1]; ++y)
            std::memcpy(whole.data<float>() +
                            ((c * shape[0] + blk.lo[0] + z) * shape[1] + blk.lo[1] + y) * shape[2] +
                            blk.lo[2],
                        t.data<float>() + ((c * blk.size[0] + z) * blk.size[1] + y) * blk.size[2],
                        blk.size[2] * sizeof(float));
    }
    bar.update(batchesDone, rate(batchesDone));
  }
  bar.finish(rate(total));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!chunked) {
    header.data = whole.raw();
    writeVolume(o.out, header);
  } else {
    writer->finish(); // the array moves to its name only now, complete
    writer.reset();   // closes the file
  }
  std::fprintf(stderr, "wrote %s: %lld channels (%s) x %lldx%lldx%lld float32; %lld voxels "
               "predicted in %.1f s (%.3g voxels/s)\n",
               o.out.c_str(), (long long)outChannels, activation.c_str(), (long long)shape[0],
               (long long)shape[1], (long long)shape[2], (long long)voxelsDone, seconds,
               seconds > 0 ? voxelsDone / seconds : 0.0);
  return 0;
}

namespace {

/// "N" or "A,B,C" as three numbers, each checked by `ok`.
template <typename T>
std::array<T, 3> parseThree(const std::string &text, const char *option, const char *what) {
  std::vector<T> v;
  size_t pos = 0;
  bool bad = text.empty();
  while (!bad && pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string part = text.substr(pos, comma - pos);
    try {
      size_t used = 0;
      const double d = std::stod(part, &used);
      bad = used != part.size() || !(d > 0) || !std::isfinite(d) ||
            (std::is_integral_v<T> && d != std::floor(d));
      v.push_back(static_cast<T>(d));
    } catch (const std::exception &) {
      bad = true;
    }
    pos = comma + 1;
  }
  if (bad || (v.size() != 1 && v.size() != 3))
    throw Error(str("--", option, ": expected ", what, ", got '", text, "'"));
  if (v.size() == 1)
    v = {v[0], v[0], v[0]};
  return {v[0], v[1], v[2]};
}

} // namespace

void parseInferBlockOptions(const Args &args, InferOptions &o) {
  if (args.has("spacing"))
    o.spacing = parseThree<double>(args.get("spacing"), "spacing",
                                   "the voxel size Z,Y,X (three positive numbers)");
  if (args.has("block"))
    o.block = parseThree<int64_t>(args.get("block"), "block", "N or D,H,W (positive integers)");
  if (args.has("chunk"))
    o.chunk = parseThree<int64_t>(args.get("chunk"), "chunk", "N or D,H,W (positive integers)");
  if (args.has("memory")) {
    const std::string m = args.get("memory");
    size_t used = 0;
    double v = -1;
    try {
      v = std::stod(m, &used);
    } catch (const std::exception &) {
    }
    if (used != m.size() || !(v > 0) || !std::isfinite(v))
      throw Error(str("--memory: expected MiB, a positive number, got '", m, "'"));
    o.memoryMb = v;
  }
}

std::string inferProgressPath(const std::string &out) {
  auto [container, key] = splitVolumePath(out);
  while (!container.empty() && container.back() == '/')
    container.pop_back();
  std::string name = key;
  std::replace(name.begin(), name.end(), '/', '.');
  return container + (name.empty() ? "" : "." + name) + ".progress.json";
}

} // namespace medrun
