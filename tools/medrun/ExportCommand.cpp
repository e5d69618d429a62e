//===- ExportCommand.cpp - `medrun export`: a run's weights as a PyTorch state_dict -===//
#include "ExportCommand.h"

#include "InferCommand.h"
#include "TrainCommand.h"

#include "medrun/Artifact.h"
#include "medrun/Checkpoint.h"
#include "medrun/Error.h"
#include "medrun/Interop.h"
#include "medrun/Safetensors.h"
#include "medrun/TorchFile.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

namespace medrun {
namespace {

namespace fs = std::filesystem;

bool isState(const std::string &key) {
  return key.rfind("ema.", 0) == 0 || key.rfind("optimizer.", 0) == 0;
}

// The run directory a checkpoints root belongs to (it holds config.json), or "".
std::string runOf(const fs::path &root) {
  fs::path run = root.parent_path();
  return fs::exists(run / "config.json") ? run.string() : "";
}

// SHA-256 of a file's bytes, lowercase hex: what medc records as the artifact's
// source_sha256, so that export can tell whether the model file changed since training.
std::string sha256File(const std::string &path) {
  static const uint32_t K[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
      0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
      0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
      0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
  std::ifstream in(path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof())
    throw Error(str(path, ": cannot read the run's model file"));
  const uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
  data.push_back(static_cast<char>(0x80));
  while (data.size() % 64 != 56)
    data.push_back(0);
  for (int i = 7; i >= 0; --i)
    data.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  std::array<uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  for (size_t block = 0; block < data.size(); block += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      const auto *b = reinterpret_cast<const unsigned char *>(data.data() + block + 4 * i);
      w[i] = uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | uint32_t(b[3]);
    }
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::array<uint32_t, 8> v = h;
    for (int i = 0; i < 64; ++i) {
      uint32_t s1 = rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25);
      uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
      uint32_t t1 = v[7] + s1 + ch + K[i] + w[i];
      uint32_t s0 = rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22);
      uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
      uint32_t t2 = s0 + maj;
      v = {t1 + t2, v[0], v[1], v[2], v[3] + t1, v[4], v[5], v[6]};
    }
    for (int i = 0; i < 8; ++i)
      h[i] += v[i];
  }
  char hex[65];
  for (int i = 0; i < 8; ++i)
    std::snprintf(hex + 8 * i, 9, "%08x", h[i]);
  return std::string(hex, 64);
}

bool isOnnxPath(const std::string &path) {
  const std::string ext = fs::path(path).extension().string();
  return ext == ".onnx" || ext == ".txtpb";
}

bool isTorchPath(const std::string &path) {
  const std::string ext = fs::path(path).extension().string();
  return ext == ".pt" || ext == ".pth";
}

uint32_t crc32Of(const void *data, size_t n, uint32_t crc = 0) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  const auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i)
    crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

// A state_dict as torch.save writes it (the zip format of PyTorch 1.6 and later): the
// pickle of an OrderedDict of tensors rebuilt by torch._utils._rebuild_tensor_v2 from one
// f32 storage each (archive/data/<i>), which torch.load reads with its default
// (weights_only too: only OrderedDict, FloatStorage and _rebuild_tensor_v2 are named).
void writeTorchStateDict(const std::string &path,
                         const std::vector<std::pair<std::string, Tensor>> &tensors) {
  auto put = [](std::string &b, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i)
      b.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  std::string pkl = "\x80\x02"; // PROTO 2
  auto global = [&](const char *module, const char *name) {
    pkl += str("c", module, "\n", name, "\n");
  };
  auto text = [&](const std::string &s) {
    pkl += 'X'; // BINUNICODE
    put(pkl, s.size(), 4);
    pkl += s;
  };
  auto integer = [&](int64_t v) {
    if (v >= 0 && v < (int64_t(1) << 31)) {
      pkl += 'J'; // BININT
      put(pkl, static_cast<uint64_t>(v), 4);
    } else {
      pkl += '\x8a'; // LONG1, 8 bytes
      pkl += '\x08';
      put(pkl, static_cast<uint64_t>(v), 8);
    }
  };
  global("collections", "OrderedDict");
  pkl += ")R"; // OrderedDict()
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto &[key, t] = tensors[i];
    text(key);
    global("torch._utils", "_rebuild_tensor_v2");
    pkl += '(';
    pkl += '('; // the storage's persistent id
    text("storage");
    global("torch", "FloatStorage");
    text(std::to_string(i));
    text("cpu");
    integer(t.numel());
    pkl += "tQ"; // TUPLE, BINPERSID
    integer(0);  // storage offset
    pkl += '(';
    for (int64_t d : t.shape())
      integer(d);
    pkl += "t(";
    std::vector<int64_t> strides(t.shape().size(), 1);
    for (int d = static_cast<int>(strides.size()) - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * t.shape()[d + 1];
    for (int64_t st : strides)
      integer(st);
    pkl += "t\x89"; // requires_grad False
    global("collections", "OrderedDict");
    pkl += ")Rt"; // backward hooks; the arguments' TUPLE
    pkl += "Rs";  // REDUCE, SETITEM
  }
  pkl += '.';

  const std::string prefix = "archive";
  std::vector<std::pair<std::string, std::pair<const void *, size_t>>> members;
  members.push_back({prefix + "/data.pkl", {pkl.data(), pkl.size()}});
  for (size_t i = 0; i < tensors.size(); ++i)
    members.push_back({str(prefix, "/data/", i), {tensors[i].second.raw(), tensors[i].second.nbytes()}});
  static const std::string version = "3\n";
  members.push_back({prefix + "/version", {version.data(), version.size()}});

  std::string central, file;
  for (auto &[name, bytes] : members) {
    const uint64_t offset = file.size();
    if (bytes.second >= 0xffffffffull || offset + bytes.second >= 0xffffffffull)
      throw Error(str(path, ": the state_dict does not fit a zip without ZIP64 (4 GiB); "
                            "export to .safetensors"));
    const uint32_t crc = crc32Of(bytes.first, bytes.second);
    // Stored members; the extra field pads the data to 64 bytes, as torch.save aligns it.
    const size_t header = 30 + name.size();
    const size_t pad = (64 - (offset + header + 4) % 64) % 64;
    put(file, 0x04034b50, 4);
    put(file, 20, 2);
    put(file, 0, 2);
    put(file, 0, 2);
    put(file, 0, 2);
    put(file, 0x21, 2); // 1980-01-01
    put(file, crc, 4);
    put(file, bytes.second, 4);
    put(file, bytes.second, 4);
    put(file, name.size(), 2);
    put(file, 4 + pad, 2);
    file += name;
    put(file, 0xcafe, 2); // an extra field of padding
    put(file, pad, 2);
    file.append(pad, 'Z');
    file.append(static_cast<const char *>(bytes.first), bytes.second);
    put(central, 0x02014b50, 4);
    put(central, 20, 2);
    put(central, 20, 2);
    put(central, 0, 2);
    put(central, 0, 2);
    put(central, 0, 2);
    put(central, 0x21, 2);
    put(central, crc, 4);
    put(central, bytes.second, 4);
    put(central, bytes.second, 4);
    put(central, name.size(), 2);
    put(central, 0, 2); // extra
    put(central, 0, 2); // comment
    put(central, 0, 2); // disk
    put(central, 0, 2); // internal attributes
    put(central, 0, 4); // external attributes
    put(central, offset, 4);
    central += name;
  }
  const uint64_t centralAt = file.size();
  file += central;
  put(file, 0x06054b50, 4);
  put(file, 0, 2);
  put(file, 0, 2);
  put(file, members.size(), 2);
  put(file, members.size(), 2);
  put(file, central.size(), 4);
  put(file, centralAt, 4);
  put(file, 0, 2);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(file.data(), static_cast<std::streamsize>(file.size()));
  if (!out)
    throw Error(str(path, ": cannot write the state_dict"));
}

} // namespace

int exportCommand(const ExportOptions &o) {
  if (o.out.empty())
    throw Error("`medrun export` needs -o FILE.safetensors (where the state_dict goes)");
  if (!o.weights.empty() && o.weights != "ema" && o.weights != "model")
    throw Error(str("--weights: expected ema or model, got '", o.weights, "'"));
  if (!o.which.empty() && o.which != "last" && o.which != "best")
    throw Error(str("--which: expected last or best, got '", o.which, "'"));
  const fs::path in = o.input;
  if (!fs::exists(in))
    throw Error(str(o.input, ": no such run, checkpoint or file"));

  // 1. The tensors: a checkpoint (verified: sizes and CRC-32C) or a file.
  std::string source, run;
  std::optional<Checkpoint> ckpt;
  TensorMap tensors;
  std::string note;
  const std::string name = in.filename().string();
  if (fs::is_directory(in) || name == "latest" || name == "best") {
    fs::path root; // a checkpoints root, where --which chooses
    if (fs::is_directory(in / "checkpoints"))
      root = in / "checkpoints";
    else if (fs::is_directory(in) && !fs::exists(in / "state.json"))
      root = in;
    std::string step;
    if (root.empty()) {
      if (!o.which.empty())
        throw Error(str("--which: ", o.input, " is one checkpoint already (--which chooses in a "
                        "run or checkpoints directory)"));
      step = resolveCheckpoint(o.input);
    } else if (o.which == "best") {
      if (!fs::exists(root / "best"))
        throw Error(str(o.input, ": no best checkpoint (", (root / "best").string(),
                        " is missing); --which last exports the latest one"));
      step = resolveCheckpoint((root / "best").string());
    } else {
      step = resolveCheckpoint(root.string());
    }
    ckpt = loadCheckpoint(step);
    tensors = ckpt->tensors;
    source = str(ckpt->dir, " (step ", ckpt->state.step, ")");
    run = runOf(fs::path(ckpt->dir).parent_path());
  } else {
    tensors = isTorchFile(o.input) ? readStateDict(o.input, &note) : loadTensors(o.input);
    eraseDummyTensor(tensors);
    source = o.input;
  }

  // 2. The weights: EMA by default where there are EMA weights.
  bool hasEma = false;
  for (auto &[key, t] : tensors)
    hasEma = hasEma || key.rfind("ema.", 0) == 0;
  const std::string weights = o.weights.empty() ? (hasEma ? "ema" : "model") : o.weights;
  if (weights == "ema" && !hasEma)
    throw Error(str(source, ": no EMA weights (ema.<key>: a recipe without an ema section saves none); "
                            "--weights model exports the trained weights"));
  TensorMap chosen;
  // Tensors without an EMA copy: right only for state the EMA does not average (a BatchNorm's
  // running statistics), which the compiled recipe (step 3) must say is not trained.
  std::vector<std::string> unaveraged;
  auto noEma = [&](const std::string &key) {
    return Error(str(source, ": --weights ema: no EMA weight 'ema.", key, "' for '", key, "'"));
  };
  for (auto &[key, t] : tensors) {
    if (isState(key))
      continue;
    if (weights == "model") {
      chosen[key] = t;
      continue;
    }
    auto ema = tensors.find("ema." + key);
    if (ema == tensors.end()) {
      unaveraged.push_back(key);
      chosen[key] = t;
      continue;
    }
    chosen[key] = ema->second;
  }
  for (auto &[key, t] : chosen)
    if (!isFloat(t.dtype()))
      throw Error(str(source, ": tensor '", key, "' is ", dtypeName(t.dtype()),
                      ", expected floating point weights"));

  // 3. The model the run trained (its compiled recipe: config.json's compile hash in the
  //    recipe cache, or --artifact), then MedNeXt v1's own structure.
  std::string artifactPath = o.artifact, checkedRun;
  std::string hash;
  std::vector<std::string> imported; // the state_dict keys of an imported network, in order
  std::string importedFrom;          // its ONNX file
  std::string trainedFrom;           // the directory the run was trained from, if known
  if (!run.empty()) {
    std::ifstream cfg(fs::path(run) / "config.json");
    nlohmann::json config = nlohmann::json::parse(cfg, nullptr, /*allow_exceptions=*/false);
    if (config.is_object())
      hash = config.value("compile_hash", "");
    // The directory the run was trained from, where the recipe's relative paths (and so the
    // artifact's source) start: the run directory less train.out, when that is relative.
    if (config.is_object() && config.contains("train") && config["train"].is_object() &&
        config["train"].value("out", "") != "") {
      const fs::path out = fs::path(config["train"].value("out", "")).lexically_normal();
      fs::path dir = fs::weakly_canonical(fs::absolute(run));
      if (out.is_relative()) {
        fs::path tail;
        for (auto it = out.begin(); it != out.end(); ++it)
          if (!it->empty() && *it != ".")
            tail /= *it;
        std::vector<fs::path> parts(tail.begin(), tail.end());
        bool matches = !parts.empty();
        for (auto p = parts.rbegin(); matches && p != parts.rend(); ++p) {
          matches = dir.filename() == *p;
          dir = dir.parent_path();
        }
        if (matches)
          trainedFrom = dir.string();
      }
    }
    if (ckpt && !hash.empty() && !ckpt->state.recipeHash.empty() && ckpt->state.recipeHash != hash)
      std::fprintf(stderr,
                   "medrun: warning: %s was written by another compiled recipe (%s) than %s/config.json "
                   "records (%s)\n",
                   ckpt->dir.c_str(), ckpt->state.recipeHash.c_str(), run.c_str(), hash.c_str());
  }
  if (artifactPath.empty() && !hash.empty())
    for (const char *suffix : {".medc", ".cuda.medc"})
      if (fs::path p = fs::path(recipeCacheDir()) / (hash + suffix); fs::exists(p)) {
        artifactPath = p.string();
        break;
      }
  if (artifactPath.empty() && !unaveraged.empty())
    throw noEma(unaveraged.front());
  if (!artifactPath.empty()) {
    Artifact a = Artifact::load(artifactPath);
    for (const std::string &key : unaveraged)
      if (const ParameterInfo *p = a.parameter(key); !p || p->trainable)
        throw noEma(key);
    std::vector<std::pair<std::string, Shape>> expected;
    for (const ParameterInfo *p : modelParameters(a))
      expected.push_back({p->name, p->shape});
    auto recipe = a.options.find("recipe");
    checkKeys(expected, chosen,
              str(source, ": the weights do not match the model of ", artifactPath, " (",
                  recipe != a.options.end() && !recipe->second.empty() ? recipe->second : a.source,
                  ")"));
    checkedRun = str("the run's model (", artifactPath, ")");
    // An imported network: its state_dict is the ONNX file's initializers, which the
    // compiled recipe declares. The PyTorch network the weights go back into is the one
    // exported to that file, so it must still be the file the run trained.
    if (isOnnxPath(a.source)) {
      // A relative source is relative to where the run was trained (or to here).
      std::string model = a.source;
      if (fs::path(a.source).is_relative()) {
        std::vector<std::string> tried;
        if (!trainedFrom.empty())
          tried.push_back((fs::path(trainedFrom) / a.source).lexically_normal().string());
        tried.push_back(fs::absolute(a.source).lexically_normal().string());
        model = tried.front();
        for (const std::string &t : tried)
          if (fs::exists(t)) {
            model = t;
            break;
          }
      }
      if (!fs::exists(model))
        throw Error(str(source, ": the run's model file ", model,
                        model == a.source ? "" : str(" (", a.source, " as compiled)"),
                        " is missing (", artifactPath, " was compiled from it); the state_dict "
                        "is for the PyTorch network exported to it"));
      if (const std::string now = sha256File(model); now != a.sourceSha256)
        throw Error(str(source, ": the run's model file ", model,
                        " changed since the run was trained (sha256 ", now, ", compiled from ",
                        a.sourceSha256, " in ", artifactPath,
                        "): the state_dict would not be that of the network exported to it"));
      for (auto &[key, shape] : expected)
        imported.push_back(key);
      importedFrom = model;
    }
  }
  std::optional<MedNeXtV1> net;
  if (imported.empty()) {
    try {
      net = mednextV1Of(chosen, source);
    } catch (const Error &e) {
      if (artifactPath.empty())
        throw Error(str(e.what(), "; a run of an imported (ONNX) network is exported with its "
                                  "compiled recipe: --artifact A, or the run's cache"));
      throw;
    }
  }

  // 4. The state_dict, f32: in PyTorch's order for MedNeXt v1, the import's for an imported
  //    network (load_state_dict does not mind the order).
  std::vector<std::pair<std::string, Tensor>> out;
  int64_t elements = 0;
  std::vector<std::pair<std::string, Shape>> keys;
  if (net)
    keys = mednextV1StateDict(*net);
  else
    for (const std::string &key : imported)
      keys.push_back({key, chosen.at(key).shape()});
  for (auto &[key, shape] : keys) {
    Tensor t;
    if (net && key == "dummy_tensor") {
      t = Tensor(DType::F32, {1});
      t.data<float>()[0] = 1.0f; // as MedNeXt v1 initializes it
    } else {
      const Tensor &w = chosen.at(key);
      t = w.dtype() == DType::F32 ? w : w.to(DType::F32);
      elements += t.numel();
    }
    out.emplace_back(key, t);
  }
  std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"weights", weights}, {"source", source}};
  if (net)
    metadata["mednext_v1"] = net->json();
  else
    metadata["onnx_model"] = importedFrom;
  // 5. The run's data contract travels with the weights (their metadata, and OUT's stem +
  //    .data.json beside them), so that infer and predict from the export normalise as the run
  //    did. Weights of a run need it: a checkpoint without one is refused.
  std::string contractFrom;
  std::optional<DataContract> contract = findContract(ckpt ? ckpt->dir : o.input, contractFrom);
  if (!contract && ckpt)
    throw Error(str(source, ": no data contract (", run.empty() ? "no run directory" : run + "/data.json",
                    " is missing and the checkpoint's state.json has no extra.data): without it the "
                    "export's users cannot normalise inputs as the run did; export a checkpoint of "
                    "a run that records its data (any run of this medrun)"));
  std::string contractPath;
  if (contract) {
    const std::string text = contract->toJson().dump();
    metadata[kContractMetadataKey] = text;
    contractPath = (fs::path(o.out).parent_path() / (fs::path(o.out).stem().string() + ".data.json"))
                       .string();
  }
  if (isTorchPath(o.out))
    writeTorchStateDict(o.out, out); // no metadata there: the contract is beside it
  else
    writeSafetensors(o.out, out, metadata);
  if (contract) {
    std::ofstream beside(contractPath);
    beside << contract->toJson().dump(2) << "\n";
    if (!beside)
      throw Error(str(contractPath, ": cannot write the run's data contract beside the weights"));
  }

  std::printf("%s: %s weights%s\n", source.c_str(), weights == "ema" ? "EMA" : "model",
              weights == "ema" ? " (--weights model for the trained weights)"
              : hasEma         ? " (--weights ema for the EMA weights)"
                               : "");
  if (!note.empty())
    std::printf("%s: %s\n", o.input.c_str(), note.c_str());
  if (net) {
    std::printf("checked against MedNeXt v1's state_dict%s\n",
                !checkedRun.empty() ? (" and " + checkedRun).c_str()
                : run.empty()       ? ""
                                    : " (the run's compiled recipe is not in the cache: --artifact "
                                      "A compares with it too)");
    std::printf("wrote %s: %zu tensors (%lld elements) and dummy_tensor\n", o.out.c_str(),
                out.size() - 1, static_cast<long long>(elements));
    std::string factory = net->factory();
    std::printf("PyTorch (MIC-DKFZ MedNeXt v1): model = %s\n", net->python().c_str());
    if (!factory.empty())
      std::printf("  (the same network: %s)\n", factory.c_str());
  } else {
    std::printf("checked against %s (imported from %s, unchanged since training)\n",
                checkedRun.c_str(), importedFrom.c_str());
    std::printf("wrote %s: %zu tensors (%lld elements), the ONNX initializers' names\n",
                o.out.c_str(), out.size(), static_cast<long long>(elements));
    std::printf("PyTorch: the network exported to %s\n", importedFrom.c_str());
  }
  if (isTorchPath(o.out))
    std::printf("  model.load_state_dict(torch.load('%s'), strict=True)\n", o.out.c_str());
  else
    std::printf("  model.load_state_dict(safetensors.torch.load_file('%s'), strict=True)\n",
                o.out.c_str());
  if (contract && isTorchPath(o.out))
    std::printf("data contract (from %s): %s (a PyTorch file has no metadata; the .safetensors "
                "export carries it too)\n",
                contractFrom.c_str(), contractPath.c_str());
  else if (contract)
    std::printf("data contract (from %s): in its metadata (%s) and %s; infer and predict apply it\n",
                contractFrom.c_str(), kContractMetadataKey, contractPath.c_str());
  else
    std::printf("no data contract (%s is a weights file without one): infer needs --normalization\n",
                o.input.c_str());
  return 0;
}

} // namespace medrun
