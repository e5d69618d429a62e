//===- SegmentCommand.cpp - `medrun segment` -----------------------------------------===//
//
// Affinities in (any volume format, channels first), labels out. The offsets come from
// --offsets, or from the run that trained the network (its config.json: the recipe's
// loss.affinities.offsets, or BANIS's first C when the recipe has none, which is what
// training used then); with neither the command stops and asks, never guessing.
// Block-wise, the intermediate ids go to scratch files and an HDF5/Zarr output is written
// block by block, so the volume need not fit in memory.
//
//===----------------------------------------------------------------------------------===//
#include "SegmentCommand.h"

#include "medrun/Error.h"
#include "medrun/Parallel.h"
#include "medrun/Segmentation.h"
#include "medrun/TrainLog.h"
#include "medrun/Volume.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <unordered_set>

#include <unistd.h>

namespace medrun {
namespace fs = std::filesystem;

Command segmentCommandEntry() {
  return {
      "segment",
      "medrun segment AFFS -o SEG [--method M] [--threshold T[,T...]] [--offsets O | --run DIR]\n"
      "               [--params FILE] [--seed-threshold S] [--low L] [--min-seed-size N]\n"
      "               [--stride Z,Y,X]\n"
      "               [--block B [--scratch DIR]] [--dtype uint64|uint32] [--threads N]\n"
      "               [--progress P]",
      "Segments predicted affinities (`medrun infer` of an affinity recipe: C x D x H x W,\n"
      "channel k at voxel v the affinity of v and v + offset k, 1 = same object) into\n"
      "instances. watershed: seeded watershed on the short-range channels (seeds: the\n"
      "components of edges >= the seed threshold; then Kruskal flooding, trees joining\n"
      "unless they hold different seeds; voxels with no edge above --low are 0).\n"
      "mean-agglomeration (default): the watershed's fragments merged by waterz's rule, the\n"
      "pair of highest mean boundary affinity first, while it is above the threshold (waterz's\n"
      "threshold t is 1 - t here). mutex: the mutex watershed over all offsets (short range\n"
      "attractive, the others repulsive with weight 1 - affinity). Labels are numbered by\n"
      "first voxel (C order), the same for any thread count. --block segments block by block\n"
      "and stitches the blocks by the same rules (docs/training.md says where that can\n"
      "differ from the whole volume). AFFS and SEG are volumes as `medrun volume` names them\n"
      "(FILE.h5/KEY, DIR.zarr/KEY, .npy, .nii[.gz]). --params FILE (or --run DIR with\n"
      "DIR/segmentation_params.json) segments with the parameters `medrun eval --tune`\n"
      "chose on a validation volume: method, threshold, watershed settings and block.",
      {{"o", "SEG",
        "where the labels go; with several thresholds it must contain {t}, replaced by\n"
        "each threshold"},
       {"method", "M", "watershed, mean-agglomeration (default) or mutex"},
       {"threshold", "T[,T...]",
        "mean-agglomeration: merge while the highest mean affinity is above T (default\n"
        "0.5); several: one run, one output each"},
       {"offsets", "O",
        "the channels' offsets along z, y, x: \"1,0,0;0,1,0;0,0,1;...\" or\n"
        "[[1,0,0],[0,1,0],...] (BANIS: +1 and +10 per axis)"},
       {"run", "DIR",
        "the training run: offsets from DIR/config.json (loss.affinities.offsets, or\n"
        "BANIS's first C channels when the recipe has none), and the parameters of\n"
        "DIR/segmentation_params.json when eval --tune --run DIR recorded them"},
       {"params", "FILE",
        "the segmentation parameters `medrun eval --tune --save-params FILE` chose on a\n"
        "validation volume (flags that set them as well are refused)"},
       {"seed-threshold", "S", "watershed seeds: edges >= S (default 0.9)"},
       {"low", "L", "edges <= L never join (default 0.0001, waterz's)"},
       {"min-seed-size", "N", "seeds of fewer voxels are not seeds (default 2)"},
       {"stride", "Z,Y,X",
        "mutex: repulsive edges only at voxels on this grid (default 1,1,1: all)"},
       {"block", "B",
        "block size, N or Z,Y,X voxels (default: the whole volume when its affinities\n"
        "take at most 2 GiB, else 256)"},
       {"scratch", "DIR",
        "block-wise: where the blocks' intermediate ids go, one file per block\n"
        "(default: the system's temporary directory); removed at the end"},
       {"dtype", "T",
        "uint64 (default; int64 in .npy files) or uint32 (an error if the labels do\n"
        "not fit)"},
       {"threads", "N", "CPU threads (default: all cores, or MEDRUN_THREADS)"},
       {"progress", "P", "auto (a bar on a terminal, plain lines otherwise), bar or lines"}},
      false};
}

namespace {

Box3 parseBox(const std::string &text, const char *what, int64_t least) {
  Box3 v{};
  std::vector<int64_t> parts;
  size_t pos = 0;
  try {
    while (pos <= text.size()) {
      size_t comma = text.find(',', pos);
      if (comma == std::string::npos)
        comma = text.size();
      const std::string one = text.substr(pos, comma - pos);
      size_t used = 0;
      parts.push_back(std::stoll(one, &used));
      if (used != one.size())
        parts.clear(), pos = text.size() + 2;
      pos = comma + 1;
    }
  } catch (...) {
    parts.clear();
  }
  if (parts.size() == 1)
    parts.assign(3, parts[0]);
  bool ok = parts.size() == 3;
  for (int64_t p : parts)
    ok = ok && p >= least;
  if (!ok)
    throw Error(str("--", what, ": expected N or Z,Y,X (integers >= ", least, "), got '", text,
                    "'"));
  for (int a = 0; a < 3; ++a)
    v[a] = parts[a];
  return v;
}

double parseNumber(const std::string &text, const char *what) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v))
      return v;
  } catch (...) {
  }
  throw Error(str("--", what, ": expected a number, got '", text, "'"));
}

/// The offsets the run's recipe trained with: loss.affinities.offsets of its effective
/// recipe (medc writes it for every affinity recipe); a run from before that key trained on
/// BANIS's first C channels.
Offsets runOffsets(const std::string &dir, int64_t channels) {
  const fs::path path = fs::path(dir) / "config.json";
  std::ifstream in(path);
  if (!in)
    throw Error(str("--run ", dir, ": no ", path.string(), " (the effective recipe a run writes)"));
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(in);
  } catch (const std::exception &e) {
    throw Error(str(path.string(), ": not JSON (", e.what(), ")"));
  }
  const nlohmann::json *offsets = nullptr;
  if (config.contains("loss") && config["loss"].is_object() && config["loss"].contains("affinities") &&
      config["loss"]["affinities"].is_object() && config["loss"]["affinities"].contains("offsets"))
    offsets = &config["loss"]["affinities"]["offsets"];
  if (offsets)
    return parseOffsets(offsets->dump(), path.string() + ": loss.affinities.offsets");
  // A recipe without the key trained on BANIS's first C channels (the data loader's
  // affinity targets); anything else is not an affinity run.
  const std::string loss = config.contains("loss") && config["loss"].contains("type")
                               ? config["loss"]["type"].get<std::string>()
                               : std::string();
  if (loss != "bce_with_logits" || channels > 6)
    throw Error(str(path.string(), ": no loss.affinities.offsets and not a BANIS affinity run (",
                    channels, " channels, loss '", loss, "'); give --offsets"));
  // BANIS's long range is the recipe's augment.context (10 by default), as medc sets it.
  int64_t context = 10;
  if (config.contains("augment") && config["augment"].is_object() &&
      config["augment"].contains("context") && config["augment"]["context"].is_number_integer())
    context = config["augment"]["context"].get<int64_t>();
  Offsets all = banisOffsets(context);
  return Offsets(all.begin(), all.begin() + channels);
}

/// Raw ids block by block in a scratch directory, one file per block (the driver reads
/// and writes whole blocks only); removed at the end.
class BlockFiles : public LabelStore {
public:
  explicit BlockFiles(const std::string &parent) {
    const fs::path base = parent.empty() ? fs::temp_directory_path() : fs::path(parent);
    dir_ = base / fmt::format("medrun-segment-{}-{}", static_cast<long>(::getpid()),
                              static_cast<long>(std::chrono::steady_clock::now().time_since_epoch().count()));
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec)
      throw Error(str("--scratch: cannot create ", dir_.string(), " (", ec.message(), ")"));
  }
  ~BlockFiles() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void write(const Box3 &lo, const Box3 &size, const uint64_t *labels) override {
    const fs::path f = file(lo);
    std::ofstream o(f, std::ios::binary | std::ios::trunc);
    o.write(reinterpret_cast<const char *>(labels),
            static_cast<std::streamsize>(size[0] * size[1] * size[2] * 8));
    if (!o)
      throw Error(str(f.string(), ": cannot write a block of labels (scratch space full?)"));
  }
  void read(const Box3 &lo, const Box3 &size, uint64_t *labels) const override {
    const fs::path f = file(lo);
    std::ifstream in(f, std::ios::binary);
    const std::streamsize bytes = static_cast<std::streamsize>(size[0] * size[1] * size[2] * 8);
    in.read(reinterpret_cast<char *>(labels), bytes);
    if (!in || in.gcount() != bytes || in.peek() != std::ifstream::traits_type::eof())
      throw Error(str(f.string(), ": not the block of labels written there"));
  }

private:
  fs::path file(const Box3 &lo) const {
    return dir_ / fmt::format("{}_{}_{}.u64", lo[0], lo[1], lo[2]);
  }
  fs::path dir_;
};

/// The parameters `medrun eval --tune` records (EvalCommand.cpp's paramsJson, format
/// "medrun-segmentation-params"), as far as medrun segment applies them.
struct Recorded {
  std::string file;
  SegmentMethod method = SegmentMethod::MeanAgglomeration;
  double threshold = 0;
  float seedThreshold = SegmentParams().seedThreshold, low = SegmentParams().low;
  int64_t minSeedSize = SegmentParams().minSeedSize;
  bool whole = true; ///< block null: the whole volume, as eval segmented it
  Box3 block{};
  std::string chosenOn; ///< the validation volume, for messages
};

/// A value of the record as a message shows it: nested values are described, not
/// serialized (the serializer recurses once per level), long ones cut.
std::string shown(const nlohmann::json &v) {
  if (v.is_structured())
    for (const nlohmann::json &e : v)
      if (e.is_structured())
        return str("(", v.type_name(), " of ", e.type_name(), "s)");
  std::string text = v.dump();
  return text.size() > 200 ? text.substr(0, 200) + "..." : text;
}

Recorded readRecorded(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    throw Error(str(path, ": cannot read the segmentation parameters (written by medrun eval "
                          "--tune on a validation volume)"));
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw Error(str(path, ": malformed JSON (expected the segmentation parameters that "
                          "medrun eval --tune writes)"));
  if (!j.contains("format") || j["format"] != "medrun-segmentation-params")
    throw Error(str(path, ": not segmentation parameters (expected \"format\": "
                          "\"medrun-segmentation-params\", as medrun eval --tune writes)"));
  Recorded r;
  r.file = path;
  auto need = [&](const char *key) -> const nlohmann::json & {
    if (!j.contains(key))
      throw Error(str(path, ": no key ", key));
    return j[key];
  };
  const nlohmann::json &method = need("method");
  const nlohmann::json &t = need("threshold");
  if (!t.is_number() || !std::isfinite(t.get<double>()))
    throw Error(str(path, ": threshold = ", shown(t), ": expected a number"));
  r.threshold = t.get<double>();
  // BANIS's connected components are eval's alone; segment would have to guess.
  if (method != "mean-agglomeration")
    throw Error(str(path, ": method = ", shown(method),
                    ": medrun segment applies mean-agglomeration records (tune with medrun eval "
                    "--method mean-agglomeration); BANIS's components at threshold ",
                    fmt::format("{:g}", r.threshold), " are medrun eval's"));
  if (need("thresholds_on") != "probabilities")
    throw Error(str(path, ": thresholds_on = ", shown(j["thresholds_on"]),
                    ": medrun segment takes probabilities (infer with the sigmoid)"));
  const nlohmann::json &m = need("min_size");
  if (!m.is_number_integer() || m.get<int64_t>() != 0)
    throw Error(str(path, ": min_size = ", shown(m),
                    ": medrun segment removes no small objects (tune without --min-size)"));
  if (j.contains("watershed")) {
    const nlohmann::json &w = j["watershed"];
    auto num = [&](const char *key) {
      if (!w.is_object() || !w.contains(key) || !w[key].is_number())
        throw Error(str(path, ": watershed.", key, ": expected a number"));
      return w[key].get<double>();
    };
    r.seedThreshold = static_cast<float>(num("seed_threshold"));
    r.low = static_cast<float>(num("low"));
    const double seeds = num("min_seed_size");
    if (!(seeds >= 1) || seeds != std::floor(seeds))
      throw Error(str(path, ": watershed.min_seed_size = ", shown(w["min_seed_size"]),
                      ": expected an integer >= 1"));
    r.minSeedSize = static_cast<int64_t>(seeds);
  }
  if (j.contains("block") && !j["block"].is_null()) {
    const nlohmann::json &b = j["block"];
    if (!b.is_array() || b.size() != 3)
      throw Error(str(path, ": block = ", shown(b), ": expected [z, y, x] or null"));
    for (int k = 0; k < 3; ++k) {
      if (!b[k].is_number_integer() || b[k].get<int64_t>() < 1)
        throw Error(str(path, ": block = ", shown(b), ": expected 3 sizes >= 1"));
      r.block[k] = b[k].get<int64_t>();
    }
    r.whole = false;
  }
  if (j.contains("chosen_on") && j["chosen_on"].is_object() &&
      j["chosen_on"].contains("prediction") && j["chosen_on"]["prediction"].is_string())
    r.chosenOn = j["chosen_on"]["prediction"].get<std::string>();
  return r;
}

std::string withThreshold(const std::string &out, double t) {
  const size_t at = out.find("{t}");
  return at == std::string::npos ? out : out.substr(0, at) + fmt::format("{:g}", t) + out.substr(at + 3);
}

} // namespace

int segmentCommand(const Args &args) {
  setThreads(args);
  const std::string affsPath = args.artifact, out = args.get("o");
  if (out.empty())
    throw Error("segment: -o SEG is required (where the labels go)");
  // Recorded parameters: --params FILE, or the run's record beside its config.json.
  std::optional<Recorded> rec;
  {
    std::string file = args.get("params");
    if (args.has("params") && file.empty())
      throw Error("--params: expected FILE (medrun eval --tune --save-params FILE)");
    if (args.has("run")) {
      const fs::path runFile = fs::path(args.get("run")) / "segmentation_params.json";
      if (fs::exists(runFile)) {
        if (!file.empty())
          throw Error(str("--params ", file, " and --run ", args.get("run"),
                          " both record segmentation parameters (", runFile.string(),
                          "): give one of them"));
        file = runFile.string();
      }
    }
    if (!file.empty()) {
      rec = readRecorded(file);
      const std::string chosen =
          str(" (chosen on ", rec->chosenOn.empty() ? std::string("a validation volume") : rec->chosenOn,
              "; the volume segmented with them is never re-tuned)");
      if (args.has("method") &&
          parseSegmentMethod(args.get("method"), "--method") != rec->method)
        throw Error(str("--method ", args.get("method"), ": ", file, " records the method ",
                        segmentMethodName(rec->method)));
      if (args.has("threshold"))
        throw Error(str("--threshold: ", file, " records the threshold ",
                        fmt::format("{:g}", rec->threshold), chosen));
      for (const char *key : {"seed-threshold", "low", "min-seed-size"})
        if (args.has(key))
          throw Error(str("--", key, ": ", file, " records the watershed's settings", chosen));
      if (args.has("block"))
        throw Error(str("--block: ", file, " records the block (",
                        rec->whole ? std::string("the whole volume")
                                   : fmt::format("{}x{}x{}", rec->block[0], rec->block[1],
                                                 rec->block[2]),
                        "): stitched blocks can give other fragments"));
    }
  }
  SegmentParams params;
  params.method = rec ? rec->method
                      : parseSegmentMethod(args.get("method", "mean-agglomeration"), "--method");
  std::vector<double> thresholds;
  if (rec) {
    thresholds.push_back(rec->threshold);
    params.seedThreshold = rec->seedThreshold;
    params.low = rec->low;
    params.minSeedSize = rec->minSeedSize;
  }
  if (args.has("threshold")) {
    const std::string text = args.get("threshold");
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t comma = text.find(',', pos);
      if (comma == std::string::npos)
        comma = text.size();
      thresholds.push_back(parseNumber(text.substr(pos, comma - pos), "threshold"));
      pos = comma + 1;
    }
    if (params.method != SegmentMethod::MeanAgglomeration)
      throw Error(str("--threshold: only mean-agglomeration has a threshold (--method ",
                      segmentMethodName(params.method), ")"));
  }
  if (thresholds.empty())
    thresholds.push_back(params.threshold);
  params.threshold = thresholds[0];
  if (thresholds.size() > 1 && out.find("{t}") == std::string::npos)
    throw Error(str("-o ", out, ": ", thresholds.size(),
                    " thresholds need {t} in the output name (one output per threshold)"));
  if (args.has("seed-threshold"))
    params.seedThreshold = static_cast<float>(parseNumber(args.get("seed-threshold"), "seed-threshold"));
  if (args.has("low"))
    params.low = static_cast<float>(parseNumber(args.get("low"), "low"));
  params.minSeedSize = parseCount(args, "min-seed-size", params.minSeedSize, 1);
  if (args.has("stride"))
    params.repulsiveStride = parseBox(args.get("stride"), "stride", 1);
  const std::string dtype = args.get("dtype", "uint64");
  if (dtype != "uint64" && dtype != "uint32")
    throw Error(str("--dtype: expected uint64 or uint32, got '", dtype, "'"));

  // The affinities: one reader per channel, sharing a bounded chunk cache.
  auto first = openChannel(affsPath, 0);
  const VolumeInfo info = first->info();
  const int64_t K = info.channels;
  const Box3 shape = info.shape;
  Offsets offsets;
  std::string offsetsFrom;
  if (args.has("offsets") && args.has("run"))
    throw Error("segment: --offsets and --run both give the offsets; give one");
  if (args.has("offsets")) {
    offsets = parseOffsets(args.get("offsets"), "--offsets");
    offsetsFrom = "--offsets";
  } else if (args.has("run")) {
    offsets = runOffsets(args.get("run"), K);
    offsetsFrom = (fs::path(args.get("run")) / "config.json").string();
  } else {
    throw Error(str("segment: ", info.name(), " has ", K,
                    " affinity channels but no offsets were given: --offsets (e.g. BANIS's "
                    "\"1,0,0;0,1,0;0,0,1;10,0,0;0,10,0;0,0,10\") or --run DIR (the training run)"));
  }
  checkOffsets(offsets, K, params.method != SegmentMethod::Mutex,
               str(offsetsFrom, " for ", info.name()));
  auto cache = std::make_shared<ChunkCache>(size_t(512) << 20);
  std::vector<std::unique_ptr<VolumeReader>> readers;
  readers.push_back(std::move(first));
  for (int64_t k = 1; k < K; ++k)
    readers.push_back(openChannel(affsPath, k));
  for (auto &r : readers)
    r->setCache(cache);
  const int64_t voxels = shape[0] * shape[1] * shape[2];
  Box3 block = shape;
  if (rec)
    block = rec->whole ? shape : rec->block;
  else if (args.has("block"))
    block = parseBox(args.get("block"), "block", 1);
  else if (static_cast<double>(voxels) * K * 4 > 2.0 * (1 << 30))
    block = {256, 256, 256};
  for (int a = 0; a < 3; ++a)
    block[a] = std::min(block[a], shape[a]);
  const bool whole = block == shape;

  const int mode = parseProgress(args);
  std::unique_ptr<Progress> bar;
  std::string stage;
  params.progress = [&](const char *name, int64_t done, int64_t total) {
    if (total <= 1) // a step of one unit: the summary line says when all is done
      return;
    if (stage != name) {
      if (bar)
        bar->finish();
      stage = name;
      Progress::Options po;
      po.total = total;
      po.desc = std::string("segment ") + name;
      po.mode = mode == 1 ? Progress::Mode::Bar : mode == 2 ? Progress::Mode::Lines : Progress::Mode::Auto;
      po.every = 1;
      bar = std::make_unique<Progress>(stderr, po);
    }
    bar->update(done);
  };
  fmt::print(stderr, "segment {}: {}x{}x{}, {} channels, offsets {} (from {}), {}, {}\n",
             info.name(), shape[0], shape[1], shape[2], K, formatOffsets(offsets), offsetsFrom,
             segmentMethodName(params.method),
             whole ? std::string("whole volume")
                   : fmt::format("blocks of {}x{}x{}", block[0], block[1], block[2]));
  if (rec)
    fmt::print(stderr, "segment: the parameters of {}: threshold {:g}, seeds >= {:g} of {} "
                       "voxels or more, low {:g}\n",
               rec->file, rec->threshold, rec->seedThreshold, rec->minSeedSize, rec->low);
  const auto start = std::chrono::steady_clock::now();

  AffinityReader read = [&](const Box3 &lo, const Box3 &size, float *dst) {
    const int64_t n = size[0] * size[1] * size[2];
    parallelFor(K, 1, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k)
        readers[k]->read(lo, size, dst + k * n);
    });
    // The rules read affinities as probabilities (the mutex watershed's repulsion is 1 - a,
    // --low and the thresholds are probabilities): logits are refused, not misread. A
    // little slack for the rounding of blended predictions.
    for (int64_t i = 0; i < K * n; ++i)
      if (!(dst[i] >= -0.01f && dst[i] <= 1.01f)) {
        const int64_t v = i % n;
        throw Error(str(info.name(), ": affinity ", dst[i], " in channel ", i / n,
                        " at (z, y, x) = (", lo[0] + v / (size[1] * size[2]), ", ",
                        lo[1] + v / size[2] % size[1], ", ", lo[2] + v % size[2],
                        ") is not in [0, 1]: segment takes probabilities (`medrun infer`'s "
                        "sigmoid), not logits"));
      }
  };
  // Block-wise, the raw ids live in one scratch file per block (bounded memory: a block of
  // affinities and labels at a time); whole, in memory.
  std::unique_ptr<LabelStore> raw;
  if (whole)
    raw = std::make_unique<MemoryLabels>(shape);
  else
    raw = std::make_unique<BlockFiles>(args.get("scratch"));
  BlockwiseResult result =
      segmentBlockwise(read, shape, block, offsets, params, *raw,
                       params.method == SegmentMethod::MeanAgglomeration ? thresholds
                                                                         : std::vector<double>{});
  if (bar)
    bar->finish();
  bar.reset();

  // Each threshold's labels: the raw ids mapped to the final labels. Block-wise into HDF5 or
  // Zarr, block by block (chunks dividing the block); otherwise assembled and written whole.
  for (size_t i = 0; i < result.maps.size(); ++i) {
    const std::vector<uint64_t> &map = result.maps[i];
    uint64_t top = 0;
    for (uint64_t m : map)
      top = std::max(top, m);
    const std::string path = withThreshold(out, thresholds[i]);
    VolumeData data;
    data.shape = shape;
    data.spacing = info.spacing;
    data.affine = info.affine;
    if (dtype == "uint32") {
      if (top > UINT32_MAX)
        throw Error(str("--dtype uint32: ", top, " objects do not fit; use uint64"));
      data.type = VoxelType::U32;
    } else {
      // NumPy files are written signed (medrun's .npy writer has no uint64); ids are far
      // below 2^63.
      data.type = path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0
                      ? VoxelType::I64
                      : VoxelType::U64;
    }
    // One block's labels, in the output's type, into `dst` (bytes).
    auto labelsOf = [&](const Box3 &lo, const Box3 &size, std::vector<uint64_t> &ids,
                        std::vector<uint8_t> &dst) {
      const int64_t n = size[0] * size[1] * size[2];
      ids.resize(static_cast<size_t>(n));
      raw->read(lo, size, ids.data());
      dst.resize(static_cast<size_t>(n) * voxelSize(data.type));
      parallelFor(n, int64_t(1) << 16, [&](int64_t b, int64_t e) {
        for (int64_t v = b; v < e; ++v) {
          const uint64_t id = map[ids[v]];
          if (data.type == VoxelType::U32)
            reinterpret_cast<uint32_t *>(dst.data())[v] = static_cast<uint32_t>(id);
          else
            reinterpret_cast<uint64_t *>(dst.data())[v] = id;
        }
      });
    };
    std::vector<uint64_t> ids;
    std::vector<uint8_t> bytes;
    if (!whole && isChunkedVolumePath(path)) {
      Box3 chunk{};
      for (int a = 0; a < 3; ++a) {
        chunk[a] = block[a];
        for (int64_t c = std::min<int64_t>(block[a], 128); c >= 1; --c)
          if (block[a] % c == 0) {
            chunk[a] = c;
            break;
          }
      }
      auto writer = createVolume(path, data, chunk);
      for (int64_t z = 0; z < shape[0]; z += block[0])
        for (int64_t y = 0; y < shape[1]; y += block[1])
          for (int64_t x = 0; x < shape[2]; x += block[2]) {
            const Box3 lo{z, y, x};
            const Box3 size{std::min(block[0], shape[0] - z), std::min(block[1], shape[1] - y),
                            std::min(block[2], shape[2] - x)};
            labelsOf(lo, size, ids, bytes);
            writer->write(lo, size, bytes.data());
          }
      writer->finish(); // the volume moves to its name only now, complete
    } else {
      std::vector<uint8_t> all(static_cast<size_t>(voxels) * voxelSize(data.type));
      const size_t width = voxelSize(data.type);
      for (int64_t z = 0; z < shape[0]; z += block[0])
        for (int64_t y = 0; y < shape[1]; y += block[1])
          for (int64_t x = 0; x < shape[2]; x += block[2]) {
            const Box3 size{std::min(block[0], shape[0] - z), std::min(block[1], shape[1] - y),
                            std::min(block[2], shape[2] - x)};
            labelsOf({z, y, x}, size, ids, bytes);
            for (int64_t bz = 0; bz < size[0]; ++bz)
              for (int64_t by = 0; by < size[1]; ++by)
                std::copy(bytes.begin() + ((bz * size[1] + by) * size[2]) * width,
                          bytes.begin() + ((bz * size[1] + by + 1) * size[2]) * width,
                          all.begin() + (((z + bz) * shape[1] + y + by) * shape[2] + x) * width);
          }
      data.data = all.data();
      writeVolume(path, data);
    }
    fmt::print("{}: {} objects{} -> {}\n", segmentMethodName(params.method), top,
               params.method == SegmentMethod::MeanAgglomeration
                   ? fmt::format(" at threshold {:g}", thresholds[i])
                   : std::string(),
               path);
  }
  fmt::print(stderr, "segment: done in {:.2f} s\n",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

} // namespace medrun
