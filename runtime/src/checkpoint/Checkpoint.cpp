//===- Checkpoint.cpp - training checkpoints ------------------------------------------===//
//
// state.json carries its own checksum as its last field: the CRC-32C of every byte before
// the checksum's value (the text up to and including `"state_crc32c": "`), so a flipped
// digit in the training state is caught like a flipped byte in a tensor file.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Checkpoint.h"
#include "medrun/Checksum.h"
#include "medrun/Error.h"
#include "medrun/Interop.h"
#include "medrun/Npy.h" // detail::InputFile, detail::writeFileAtomic
#include "medrun/Safetensors.h"
#include "medrun/TorchFile.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <set>

#include <fcntl.h>
#include <unistd.h>

namespace medrun {

namespace fs = std::filesystem;

namespace {

constexpr const char *kFormat = "medrun-checkpoint";
constexpr int kVersion = 1;
constexpr const char *kStateFile = "state.json";
constexpr const char *kModelFile = "model.safetensors";
constexpr const char *kChecksumMarker = ",\n  \"state_crc32c\": \"";
constexpr const char *kTmpSuffix = ".tmp";
/// A step directory being deleted (see prune); a `.tmp` leftover like an unfinished save.
constexpr const char *kDeletingSuffix = ".deleting.tmp";

std::string join(const std::string &dir, const std::string &name) {
  return (fs::path(dir) / name).string();
}

/// N if `name` is "step_<digits>" exactly, else -1.
int64_t parseStepDirName(const std::string &name) {
  const std::string prefix = "step_";
  if (name.size() <= prefix.size() || name.size() > prefix.size() + 18 ||
      name.compare(0, prefix.size(), prefix) != 0)
    return -1;
  int64_t n = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9')
      return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

std::string readText(const std::string &path) {
  detail::InputFile f(path);
  std::string text(f.size(), '\0');
  f.read(0, text.data(), text.size(), "contents");
  return text;
}

void writeText(const std::string &path, const std::string &text) {
  detail::writeFileAtomic(path, {{text.data(), text.size()}});
}

/// Makes a rename or a new entry in `dir` durable. File systems that cannot fsync a
/// directory (EINVAL) are accepted; any other failure is an error.
void fsyncDir(const std::string &dir) {
  int fd;
  do {
    fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0)
    throw Error(str(dir, ": cannot open the directory to fsync it: ", std::strerror(errno)));
  if (::fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
    int err = errno;
    ::close(fd);
    throw Error(str(dir, ": fsync of the directory failed: ", std::strerror(err)));
  }
  ::close(fd);
}

void renameOrThrow(const std::string &from, const std::string &to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw Error(str("cannot rename ", from, " to ", to, ": ", std::strerror(errno)));
}

std::string utcNow() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// state.json text: the document pretty-printed, with "state_crc32c" appended last.
std::string serializeState(const Json &doc) {
  std::string body = doc.dump(2); // "{\n  ...\n}"
  body.resize(body.size() - 2);   // drop the closing "\n}"
  body += kChecksumMarker;
  return body + hex32(crc32c(body.data(), body.size())) + "\"\n}\n";
}

/// Checks the self-checksum of state.json text and parses it (without "state_crc32c").
Json parseState(const std::string &path, const std::string &text) {
  size_t marker = text.rfind(kChecksumMarker);
  if (marker == std::string::npos)
    throw Error(str(path, ": no \"state_crc32c\" field at the end (truncated, or not written "
                          "by medrun?)"));
  size_t covered = marker + std::strlen(kChecksumMarker);
  std::string stored = text.substr(covered, 8);
  std::string actual = hex32(crc32c(text.data(), covered));
  if (text.compare(covered + 8, std::string::npos, "\"\n}\n") != 0 ||
      stored.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw Error(str(path, ": malformed end after \"state_crc32c\" (truncated?)"));
  if (stored != actual)
    throw Error(str(path, ": corrupted: CRC-32C of the contents is ", actual,
                    ", the file records ", stored));
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    throw Error(str(path, ": not a JSON object"));
  doc.erase("state_crc32c");
  return doc;
}

struct Pointer {
  std::string dir;
  int64_t step = -1;
  Json doc;
};

/// Reads a `latest`/`best` pointer; throws Error naming the file.
Pointer readPointer(const std::string &path) {
  std::string text = readText(path);
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("dir") || !doc["dir"].is_string() ||
      !doc.contains("step") || !doc["step"].is_number_integer()) {
    // What was found, on the message's one line.
    std::string found = text.substr(0, 80);
    for (char &c : found)
      if (static_cast<unsigned char>(c) < 0x20)
        c = ' ';
    found.erase(found.find_last_not_of(' ') + 1);
    throw Error(str(path, ": not a checkpoint pointer (expected {\"dir\": \"step_<N>\", "
                          "\"step\": N}), found: ",
                    found));
  }
  Pointer p;
  p.dir = doc["dir"].get<std::string>();
  p.step = doc["step"].get<int64_t>();
  if (parseStepDirName(p.dir) != p.step)
    throw Error(str(path, ": \"dir\" '", p.dir, "' is not the directory of step ", p.step));
  p.doc = std::move(doc);
  return p;
}

bool isStepDir(const std::string &path) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(path) / kStateFile, ec);
}

/// Removes what a crashed save left: step_<N>.tmp directories and pointer temporaries.
void removeLeftovers(const std::string &root) {
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(root, ec)) {
    std::string name = entry.path().filename().string();
    bool tmpDir = name.size() > std::strlen(kTmpSuffix) && name.rfind("step_", 0) == 0 &&
                  name.compare(name.size() - 4, 4, kTmpSuffix) == 0;
    bool tmpPointer = name.rfind("latest.tmp-", 0) == 0 || name.rfind("best.tmp-", 0) == 0;
    if (tmpDir || tmpPointer) {
      std::error_code rmEc;
      fs::remove_all(entry.path(), rmEc);
    }
  }
}

const CheckpointPart *partOfFile(const std::string &file) {
  for (const CheckpointPart &p : checkpointParts())
    if (file == p.file)
      return &p;
  return nullptr;
}

std::string knownFiles() {
  std::string s;
  for (const CheckpointPart &p : checkpointParts())
    s += (s.empty() ? "" : ", ") + std::string(p.file);
  return s;
}

// JSON field readers for state.json: Error "<what>: field 'x' ...".
const Json &field(const Json &j, const char *name, const std::string &what) {
  if (!j.contains(name))
    throw Error(str(what, ": missing field '", name, "'"));
  return j[name];
}
int64_t intField(const Json &j, const char *name, const std::string &what) {
  const Json &v = field(j, name, what);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX))
    throw Error(str(what, ": field '", name, "' must be an integer, found ", v.dump()));
  return v.get<int64_t>();
}
uint64_t uintField(const Json &j, const char *name, const std::string &what) {
  const Json &v = field(j, name, what);
  if (!v.is_number_unsigned())
    throw Error(str(what, ": field '", name, "' must be a non-negative integer, found ", v.dump()));
  return v.get<uint64_t>();
}
double numberField(const Json &j, const char *name, const std::string &what) {
  const Json &v = field(j, name, what);
  if (!v.is_number())
    throw Error(str(what, ": field '", name, "' must be a number, found ", v.dump()));
  return v.get<double>();
}
std::string stringField(const Json &j, const char *name, const std::string &what) {
  const Json &v = field(j, name, what);
  if (!v.is_string())
    throw Error(str(what, ": field '", name, "' must be a string, found ", v.dump()));
  return v.get<std::string>();
}
const Json &objectField(const Json &j, const char *name, const std::string &what) {
  const Json &v = field(j, name, what);
  if (!v.is_object())
    throw Error(str(what, ": field '", name, "' must be an object, found ", v.dump()));
  return v;
}

void updateBest(const std::string &root, const std::string &dirName, const TrainState &state,
                const CheckpointOptions &options) {
  if (options.bestMetric.empty())
    return;
  auto it = state.metrics.find(options.bestMetric);
  if (it == state.metrics.end() || !std::isfinite(it->second))
    return;
  std::string path = join(root, "best");
  if (fs::exists(path)) {
    try {
      Pointer old = readPointer(path);
      bool sameMetric = old.doc.contains("metric") && old.doc["metric"] == options.bestMetric &&
                        old.doc.contains("value") && old.doc["value"].is_number();
      const double was = sameMetric ? old.doc["value"].get<double>() : 0;
      if (sameMetric && old.dir != dirName && isStepDir(join(root, old.dir)) &&
          (options.bestHigher ? was >= it->second : was <= it->second))
        return; // the old best is still better (ties keep the older step)
    } catch (const Error &) {
      // An unreadable pointer is replaced.
    }
  }
  Json doc = {{"dir", dirName}, {"step", state.step}, {"metric", options.bestMetric},
              {"value", it->second}};
  writeText(path, doc.dump() + "\n");
}

/// Deletes the step directories that are neither among the newest `keepLast` nor pointed
/// to by `latest` or `best`. Returns the failures (the save itself has succeeded).
/// Each is first renamed to step_<N>.deleting.tmp (atomic), the root fsync'ed, and only
/// then its files removed: a kill at any moment leaves either the whole step or a `.tmp`
/// leftover that loading ignores and the next save removes, never a step directory that
/// has lost some of its files.
std::string prune(const std::string &root, const CheckpointOptions &options) {
  if (options.keepLast <= 0)
    return "";
  auto steps = listCheckpoints(root);
  // The newest complete steps are kept; a step directory without state.json (left by a
  // medrun that deleted in place) is never a checkpoint and goes.
  std::set<std::string> keep;
  int complete = 0;
  for (auto it = steps.rbegin(); it != steps.rend() && complete < options.keepLast; ++it)
    if (isStepDir(it->second)) {
      keep.insert(it->second);
      ++complete;
    }
  for (const char *pointer : {"latest", "best"}) {
    std::string path = join(root, pointer);
    if (!fs::exists(path))
      continue;
    try {
      keep.insert(join(root, readPointer(path).dir));
    } catch (const Error &) {
    }
  }
  std::string failures;
  auto fail = [&](const std::string &what) { failures += (failures.empty() ? "" : "; ") + what; };
  std::vector<std::string> retired;
  for (const auto &[step, dir] : steps) {
    if (keep.count(dir))
      continue;
    const std::string gone = dir + kDeletingSuffix;
    if (::rename(dir.c_str(), gone.c_str()) != 0)
      fail(str(dir, ": cannot rename it to ", gone, ": ", std::strerror(errno)));
    else
      retired.push_back(gone);
  }
  if (retired.empty())
    return failures;
  try {
    fsyncDir(root);
  } catch (const Error &e) {
    fail(e.what());
  }
  for (const std::string &gone : retired) {
    std::error_code ec;
    fs::remove_all(gone, ec);
    if (ec)
      fail(str(gone, ": ", ec.message()));
  }
  return failures;
}

} // namespace

//===----------------------------------------------------------------------------------===//
// Files of a checkpoint
//===----------------------------------------------------------------------------------===//

const std::vector<CheckpointPart> &checkpointParts() {
  static const std::vector<CheckpointPart> parts = {
      {kModelFile, "", false},
      {"ema.safetensors", "ema.", true},
      {"optimizer.safetensors", "optimizer.", false},
  };
  return parts;
}

namespace {
/// The part a state name belongs to: the one with the longest matching prefix.
const CheckpointPart &partOfName(const std::string &name) {
  const CheckpointPart *best = nullptr;
  for (const CheckpointPart &p : checkpointParts())
    if (name.rfind(p.prefix, 0) == 0 && (!best || std::strlen(p.prefix) > std::strlen(best->prefix)))
      best = &p;
  return *best; // the empty prefix always matches
}
} // namespace

std::map<std::string, TensorMap> splitCheckpointTensors(const TensorMap &state) {
  std::map<std::string, TensorMap> files;
  for (const auto &[name, t] : state) {
    const CheckpointPart &p = partOfName(name);
    std::string key = p.stripPrefix ? name.substr(std::strlen(p.prefix)) : name;
    if (name.size() == std::strlen(p.prefix) && *p.prefix)
      throw Error(str("checkpoint tensor '", name, "': the name is only the prefix of ", p.file));
    files[p.file][key] = t;
  }
  return files;
}

TensorMap mergeCheckpointTensors(const std::map<std::string, TensorMap> &files) {
  TensorMap state;
  for (const auto &[file, tensors] : files) {
    const CheckpointPart *p = partOfFile(file);
    if (!p)
      throw Error(str("checkpoint file '", file, "' is not one of ", knownFiles()));
    for (const auto &[key, t] : tensors) {
      std::string name = p->stripPrefix ? p->prefix + key : key;
      if (key.empty() || &partOfName(name) != p)
        throw Error(str(file, ": tensor '", key, "' does not belong in this file (its name '",
                        name, "' belongs in ", partOfName(name).file, ")"));
      if (!state.emplace(name, t).second)
        throw Error(str(file, ": tensor '", key, "' clashes with '", name,
                        "' from another file"));
    }
  }
  return state;
}

//===----------------------------------------------------------------------------------===//
// Training state
//===----------------------------------------------------------------------------------===//

Json toJson(const TrainState &s) {
  Json metrics = Json::object();
  for (const auto &[k, v] : s.metrics)
    metrics[k] = std::isfinite(v) ? Json(v) : Json(nullptr);
  return Json{{"step", s.step},
              {"seed", s.seed},
              {"rng_offset", s.rngOffset},
              {"sampler_position", s.samplerPosition},
              {"schedule", s.schedule},
              {"loss_scale", s.lossScale},
              {"growth_tracker", s.growthTracker},
              {"recipe_hash", s.recipeHash},
              {"metrics", std::move(metrics)},
              {"extra", s.extra}};
}

TrainState trainStateFromJson(const Json &j, const std::string &what) {
  if (!j.is_object())
    throw Error(str(what, ": the training state must be a JSON object"));
  TrainState s;
  s.step = intField(j, "step", what);
  if (s.step < 0)
    throw Error(str(what, ": field 'step' must be >= 0, found ", s.step));
  s.seed = uintField(j, "seed", what);
  s.rngOffset = uintField(j, "rng_offset", what);
  s.samplerPosition = uintField(j, "sampler_position", what);
  s.schedule = objectField(j, "schedule", what);
  s.lossScale = numberField(j, "loss_scale", what);
  s.growthTracker = intField(j, "growth_tracker", what);
  s.recipeHash = stringField(j, "recipe_hash", what);
  for (const auto &[k, v] : objectField(j, "metrics", what).items()) {
    if (!v.is_number() && !v.is_null())
      throw Error(str(what, ": metric '", k, "' must be a number or null, found ", v.dump()));
    s.metrics[k] = v.is_null() ? std::nan("") : v.get<double>();
  }
  s.extra = objectField(j, "extra", what);
  return s;
}

//===----------------------------------------------------------------------------------===//
// Saving
//===----------------------------------------------------------------------------------===//

std::string checkpointDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

std::vector<std::pair<int64_t, std::string>> listCheckpoints(const std::string &root) {
  std::vector<std::pair<int64_t, std::string>> steps;
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(root, ec)) {
    int64_t step = parseStepDirName(entry.path().filename().string());
    std::error_code dirEc;
    if (step >= 0 && entry.is_directory(dirEc))
      steps.emplace_back(step, entry.path().string());
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string saveCheckpoint(const std::string &root, const TrainState &state,
                           const TensorMap &tensors, const CheckpointOptions &options) {
  if (state.step < 0)
    throw Error(str("cannot save a checkpoint of step ", state.step, ": the step must be >= 0"));
  std::map<std::string, TensorMap> files = splitCheckpointTensors(tensors);
  if (!files.count(kModelFile))
    throw Error(str("cannot save a checkpoint of step ", state.step, ": no model parameters"));

  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec)
    throw Error(str(root, ": cannot create the checkpoint directory: ", ec.message()));
  removeLeftovers(root);

  const std::string name = checkpointDirName(state.step);
  const std::string dest = join(root, name), tmp = dest + kTmpSuffix;
  std::string replaced = dest + ".replaced" + kTmpSuffix;
  try {
    if (!fs::create_directory(tmp, ec) || ec)
      throw Error(str(tmp, ": cannot create the directory: ",
                      ec ? ec.message() : "it already exists"));
    Json list = Json::object();
    for (const CheckpointPart &part : checkpointParts()) {
      auto it = files.find(part.file);
      if (it == files.end())
        continue;
      std::string path = join(tmp, part.file);
      std::vector<std::pair<std::string, Tensor>> ordered(it->second.begin(), it->second.end());
      writeSafetensors(path, ordered); // fsyncs the file
      FileChecksum sum = checksumFile(path);
      list[part.file] = {{"size", sum.size}, {"crc32c", hex32(sum.crc32c)},
                         {"tensors", ordered.size()}};
    }
    Json doc = {{"format", kFormat}, {"version", kVersion}};
    const Json fields = toJson(state);
    for (const auto &[k, v] : fields.items()) {
      doc[k] = v;
      if (k == "step")
        doc["saved_at"] = utcNow();
    }
    doc["files"] = std::move(list);
    writeText(join(tmp, kStateFile), serializeState(doc));
    fsyncDir(tmp);
    bool replacing = fs::exists(dest);
    // A step saved again is exchanged with the new one atomically where the file system
    // can (the old one is then step_<N>.tmp, removed below), so no moment lacks the step;
    // elsewhere it is moved aside first.
    if (replacing &&
        ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dest.c_str(), RENAME_EXCHANGE) == 0) {
      replaced = tmp;
    } else {
      if (replacing)
        renameOrThrow(dest, replaced);
      if (::rename(tmp.c_str(), dest.c_str()) != 0) {
        int err = errno;
        if (replacing)
          (void)::rename(replaced.c_str(), dest.c_str());
        throw Error(str("cannot rename ", tmp, " to ", dest, ": ", std::strerror(err)));
      }
    }
    fsyncDir(root);
  } catch (const Error &e) {
    fs::remove_all(tmp, ec);
    throw Error(str("checkpoint of step ", state.step, " not saved (earlier checkpoints are "
                    "untouched): ", e.what()));
  }
  fs::remove_all(replaced, ec);

  try {
    writeText(join(root, "latest"), Json{{"dir", name}, {"step", state.step}}.dump() + "\n");
    updateBest(root, name, state, options);
  } catch (const Error &e) {
    throw Error(str("checkpoint ", dest, " was saved, but a pointer was not updated: ",
                    e.what()));
  }
  std::string failures = prune(root, options);
  if (!failures.empty())
    throw Error(str("checkpoint ", dest, " was saved, but older checkpoints could not be "
                    "deleted: ", failures));
  return dest;
}

//===----------------------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------------------===//

std::string resolveCheckpoint(const std::string &path, std::vector<SkippedCheckpoint> *skipped) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st))
    throw Error(str(path, ": no such checkpoint (the path does not exist)"));
  if (fs::is_regular_file(st)) {
    fs::path p(path);
    if (p.filename() == kStateFile)
      return p.parent_path().string();
    Pointer ptr = readPointer(path);
    std::string dir = (p.parent_path() / ptr.dir).string();
    if (!isStepDir(dir))
      throw Error(str(path, ": points to ", dir, ", which is not a checkpoint (deleted?)"));
    return dir;
  }
  if (!fs::is_directory(st))
    throw Error(str(path, ": not a checkpoint directory or pointer file"));
  if (isStepDir(path))
    return path;
  // A root: its `latest` pointer if that is usable, else the highest complete step. What
  // is passed over on the way is reported, so that a fallback is never silent.
  std::vector<SkippedCheckpoint> passed;
  auto pass = [&](const std::string &what, const std::string &why) {
    for (const SkippedCheckpoint &s : passed)
      if (s.path == what)
        return;
    passed.push_back({what, why});
  };
  auto found = [&](const std::string &dir) {
    if (skipped)
      *skipped = std::move(passed);
    return dir;
  };
  const char *incomplete = "a step directory without state.json (a save or a deletion that "
                           "did not finish)";
  std::string latest = join(path, "latest");
  if (fs::exists(latest)) {
    try {
      std::string dir = join(path, readPointer(latest).dir);
      if (isStepDir(dir))
        return found(dir);
      pass(dir, fs::exists(dir) ? str("'latest' points to it, but it is ", incomplete)
                                : std::string("'latest' points to it, but it does not exist"));
    } catch (const Error &e) {
      pass(latest, str("unreadable pointer: ", e.what()));
    }
  }
  auto steps = listCheckpoints(path);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (isStepDir(it->second))
      return found(it->second);
    pass(it->second, incomplete);
  }
  throw Error(str(path, ": no checkpoint here (no state.json, no usable 'latest' pointer, no "
                        "step_<N> directory)"));
}

Json verifyCheckpoint(const std::string &stepDir) {
  const std::string statePath = join(stepDir, kStateFile);
  if (!fs::exists(statePath))
    throw Error(str(stepDir, ": not a checkpoint directory: ", kStateFile, " is missing"));
  Json doc = parseState(statePath, readText(statePath));
  if (!doc.contains("format") || doc["format"] != kFormat)
    throw Error(str(statePath, ": field 'format' must be \"", kFormat, "\""));
  if (intField(doc, "version", statePath) != kVersion)
    throw Error(str(statePath, ": format version ", doc["version"].dump(),
                    " is not supported (this medrun reads version ", kVersion, ")"));
  int64_t step = intField(doc, "step", statePath);
  int64_t named = parseStepDirName(fs::path(stepDir).filename().string());
  if (named >= 0 && named != step)
    throw Error(str(statePath, ": records step ", step, ", but the directory is ",
                    fs::path(stepDir).filename().string()));

  const Json &list = objectField(doc, "files", statePath);
  if (!list.contains(kModelFile))
    throw Error(str(statePath, ": 'files' does not list ", kModelFile));
  for (const auto &[file, entry] : list.items()) {
    const std::string what = str(statePath, ": files.", file);
    if (!partOfFile(file))
      throw Error(str(what, ": not a checkpoint file (expected one of ", knownFiles(), ")"));
    uint64_t size = uintField(entry, "size", what);
    std::string crc = stringField(entry, "crc32c", what);
    const std::string path = join(stepDir, file);
    std::error_code ec;
    uint64_t found = fs::file_size(path, ec);
    if (ec)
      throw Error(str(path, ": listed in ", kStateFile, " but cannot be read: ", ec.message()));
    if (found != size)
      throw Error(str(path, ": size is ", found, " bytes, ", kStateFile, " records ", size,
                      found < size ? " (truncated)" : " (the file was changed)"));
    FileChecksum sum = checksumFile(path);
    if (sum.size != size)
      throw Error(str(path, ": changed while it was verified"));
    if (hex32(sum.crc32c) != crc)
      throw Error(str(path, ": corrupted: CRC-32C is ", hex32(sum.crc32c), ", ", kStateFile,
                      " records ", crc));
  }
  return doc;
}

Checkpoint loadCheckpoint(const std::string &path) {
  Checkpoint c;
  c.dir = resolveCheckpoint(path);
  c.json = verifyCheckpoint(c.dir);
  std::map<std::string, TensorMap> files;
  for (const auto &[file, entry] : c.json["files"].items()) {
    SafetensorsFile st = readSafetensors(join(c.dir, file));
    TensorMap &m = files[file];
    for (auto &[key, t] : st.tensors)
      m.emplace(key, std::move(t));
  }
  c.tensors = mergeCheckpointTensors(files);
  c.state = trainStateFromJson(c.json, join(c.dir, kStateFile));
  return c;
}

TensorMap loadTensors(const std::string &path) {
  const std::string name = std::filesystem::path(path).filename().string();
  if (std::filesystem::is_directory(path) || name == "latest" || name == "best")
    return loadCheckpoint(path).tensors;
  TensorMap tensors;
  if (isTorchFile(path)) {
    tensors = readTorchStateDict(path);
  } else {
    for (auto &[key, t] : readSafetensors(path).tensors)
      tensors.emplace(key, std::move(t));
  }
  // MedNeXt v1's dummy_tensor (in exported files and PyTorch state_dicts) serves only its
  // gradient checkpointing; no model of ours has it.
  eraseDummyTensor(tensors);
  return tensors;
}

//===----------------------------------------------------------------------------------===//
// Saving in the background
//===----------------------------------------------------------------------------------===//

CheckpointWriter::~CheckpointWriter() {
  if (worker_.joinable())
    worker_.join();
}

void CheckpointWriter::save(TrainState state, TensorMap tensors) {
  wait();
  finished_ = false;
  worker_ = std::thread([this, state = std::move(state), tensors = std::move(tensors)] {
    try {
      saved_ = saveCheckpoint(root_, state, tensors, options_);
    } catch (...) {
      error_ = std::current_exception();
    }
    finished_ = true;
  });
}

std::string CheckpointWriter::poll() {
  return finished_ ? wait() : std::string();
}

std::string CheckpointWriter::wait() {
  if (!worker_.joinable())
    return "";
  worker_.join();
  finished_ = false;
  std::string saved = std::move(saved_);
  saved_.clear();
  if (std::exception_ptr e = std::exchange(error_, nullptr))
    std::rethrow_exception(e);
  return saved;
}

} // namespace medrun
