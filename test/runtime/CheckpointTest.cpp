//===- CheckpointTest.cpp - checkpoints: layout, atomicity, retention, verification ---===//
#include "medrun/Checkpoint.h"
#include "medrun/Checksum.h"
#include "medrun/Error.h"
#include "medrun/Safetensors.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <chrono>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace medrun;
namespace fs = std::filesystem;

namespace {

Tensor randomTensor(DType dt, Shape shape, std::mt19937 &rng) {
  Tensor t(dt, std::move(shape));
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (dt) {
    case DType::F32:
      t.data<float>()[i] = normal(rng);
      break;
    case DType::BF16:
      t.data<bf16>()[i] = bf16(normal(rng));
      break;
    case DType::I64:
      t.data<int64_t>()[i] = static_cast<int64_t>(rng()) - (int64_t(1) << 31);
      break;
    default:
      ADD_FAILURE() << "unused dtype";
    }
  }
  return t;
}

/// A small MedNeXt-like training state: model keys as in MedNeXt v1, their EMA copies and
/// AdamW state, with odd shapes. `extra` > 0 adds a tensor of that many floats named
/// `bigPart` + "big".
TensorMap makeState(uint32_t seed, const std::string &bigPart = "", int64_t extra = 0) {
  std::mt19937 rng(seed);
  const std::vector<std::pair<std::string, Shape>> model = {
      {"stem.weight", {5, 1, 1, 1, 1}},
      {"stem.bias", {5}},
      {"enc_block_0.0.conv1.weight", {5, 1, 3, 3, 3}},
      {"enc_block_0.0.norm.weight", {5}},
      {"enc_block_0.0.conv2.weight", {10, 5, 1, 1, 1}},
      {"enc_block_0.0.grn_gamma", {1, 10, 1, 1, 1}},
      {"down_0.res_conv.weight", {7, 5, 1, 1, 1}},
      {"out_0.conv_out.weight", {5, 3, 1, 1, 1}},
  };
  TensorMap s;
  for (const auto &[name, shape] : model) {
    s[name] = randomTensor(DType::F32, shape, rng);
    s["ema." + name] = randomTensor(DType::F32, shape, rng);
    s["optimizer.exp_avg." + name] = randomTensor(DType::F32, shape, rng);
    s["optimizer.exp_avg_sq." + name] = randomTensor(DType::F32, shape, rng);
  }
  s["dummy_tensor"] = randomTensor(DType::F32, {1}, rng);
  s["enc_block_0.0.frozen_scale"] = randomTensor(DType::BF16, {3}, rng);
  s["optimizer.step"] = randomTensor(DType::I64, {}, rng);
  if (extra > 0)
    s[bigPart + "big"] = randomTensor(DType::F32, {extra}, rng);
  return s;
}

TrainState makeTrainState(int64_t step, std::map<std::string, double> metrics = {}) {
  TrainState s;
  s.step = step;
  s.seed = 0xfedcba9876543210ull; // above INT64_MAX: must stay unsigned
  s.rngOffset = 1000 + static_cast<uint64_t>(step) * 7;
  s.samplerPosition = static_cast<uint64_t>(step) * 2;
  s.schedule = {{"type", "cosine"}, {"lr", 1e-3}, {"total_steps", 5000}};
  s.lossScale = 65536.0;
  s.growthTracker = 17;
  s.recipeHash = "sha256:0123abcd";
  s.metrics = metrics.empty() ? std::map<std::string, double>{{"loss", 0.25 + step}} : metrics;
  s.extra = {{"note", "démo ✓"}, {"list", {1, 2, 3}}};
  return s;
}

void expectSameTensors(const TensorMap &a, const TensorMap &b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto &[name, t] : a) {
    auto it = b.find(name);
    ASSERT_NE(it, b.end()) << "missing " << name;
    const Tensor &u = it->second;
    EXPECT_EQ(t.dtype(), u.dtype()) << name;
    EXPECT_EQ(t.shape(), u.shape()) << name;
    ASSERT_EQ(t.nbytes(), u.nbytes()) << name;
    EXPECT_EQ(std::memcmp(t.raw(), u.raw(), t.nbytes()), 0) << name << ": contents differ";
  }
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Expects `fn` to throw medrun::Error whose message contains every phrase.
void expectError(const std::function<void()> &fn, std::initializer_list<std::string> phrases) {
  try {
    fn();
  } catch (const Error &e) {
    std::string msg = e.what();
    for (const std::string &p : phrases)
      EXPECT_NE(msg.find(p), std::string::npos) << "message lacks \"" << p << "\":\n  " << msg;
    return;
  } catch (const std::exception &e) {
    ADD_FAILURE() << "threw a non-medrun exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "did not throw; expected an error containing \"" << *phrases.begin() << "\"";
}

/// Rewrites state.json after `edit`, with a valid self-checksum (computed here from the
/// documented rule: CRC-32C of the text up to and including `"state_crc32c": "`).
void rewriteState(const std::string &stepDir, const std::function<void(Json &)> &edit) {
  std::string path = stepDir + "/state.json";
  Json doc = Json::parse(readBytes(path));
  doc.erase("state_crc32c");
  edit(doc);
  std::string text = doc.dump(2);
  text.resize(text.size() - 2);
  text += ",\n  \"state_crc32c\": \"";
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc32c(text.data(), text.size()));
  writeBytes(path, text + hex + "\"\n}\n");
}

class CheckpointTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "medrun-ckpt-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir = tmpl;
    root = dir + "/ckpt";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  /// Entries of the checkpoint root, sorted.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto &e : fs::directory_iterator(root))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  Json pointer(const std::string &name) const { return Json::parse(readBytes(root + "/" + name)); }

  std::string dir, root;
};

} // namespace

//===----------------------------------------------------------------------------------===//
// CRC-32C
//===----------------------------------------------------------------------------------===//

TEST(Crc32c, KnownValues) {
  // RFC 3720 (iSCSI) appendix B.4 and the usual check value.
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, 0);
  for (int i = 0; i < 32; ++i)
    up[i] = static_cast<char>(i);
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(detail::crc32cPortable("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  EXPECT_EQ(maskedCrc32c(0), 0xa282ead8u);
  EXPECT_EQ(maskedCrc32c(0x00008000u), 0xa282ead9u); // rotation by 15: bit 15 -> bit 0
}

TEST(Crc32c, TablesAndInstructionAgreeAndContinue) {
  std::mt19937 rng(7);
  std::string buf(5000, '\0');
  for (char &c : buf)
    c = static_cast<char>(rng());
  for (size_t off : {0, 1, 3, 7})
    for (size_t len : {0, 1, 7, 8, 9, 63, 1001, 4993}) {
      const char *p = buf.data() + off;
      uint32_t whole = crc32c(p, len);
      EXPECT_EQ(whole, detail::crc32cPortable(p, len)) << off << "+" << len;
      size_t cut = len / 3;
      EXPECT_EQ(crc32c(p + cut, len - cut, crc32c(p, cut)), whole);
    }
}

//===----------------------------------------------------------------------------------===//
// Splitting into files
//===----------------------------------------------------------------------------------===//

TEST(CheckpointFiles, SplitAndMerge) {
  TensorMap state = makeState(1);
  auto files = splitCheckpointTensors(state);
  ASSERT_EQ(files.size(), 3u);
  const TensorMap &model = files.at("model.safetensors"), &ema = files.at("ema.safetensors"),
                  &opt = files.at("optimizer.safetensors");
  EXPECT_EQ(model.size(), 10u);
  EXPECT_TRUE(model.count("stem.weight") && model.count("dummy_tensor") &&
              model.count("enc_block_0.0.frozen_scale"));
  EXPECT_EQ(ema.size(), 8u);
  EXPECT_TRUE(ema.count("stem.weight") && ema.count("out_0.conv_out.weight")); // stripped
  EXPECT_EQ(opt.size(), 17u);
  EXPECT_TRUE(opt.count("optimizer.exp_avg.stem.weight") && opt.count("optimizer.step"));
  EXPECT_EQ(ema.at("stem.weight").raw(), state.at("ema.stem.weight").raw()); // shared, no copy
  expectSameTensors(mergeCheckpointTensors(files), state);

  // Without EMA or optimizer state, only the model file.
  auto only = splitCheckpointTensors({{"stem.weight", state.at("stem.weight")}});
  EXPECT_EQ(only.size(), 1u);
  EXPECT_TRUE(only.count("model.safetensors"));
}

TEST(CheckpointFiles, MergeRejectsMisplacedKeys) {
  Tensor t(DType::F32, {2});
  expectError([&] { mergeCheckpointTensors({{"model.safetensors", {{"ema.stem.weight", t}}}}); },
              {"model.safetensors", "ema.stem.weight", "belongs in ema.safetensors"});
  expectError([&] { mergeCheckpointTensors({{"optimizer.safetensors", {{"stem.weight", t}}}}); },
              {"optimizer.safetensors", "'stem.weight'", "belongs in model.safetensors"});
  expectError([&] { mergeCheckpointTensors({{"extra.safetensors", {{"a", t}}}}); },
              {"extra.safetensors", "not one of"});
  expectError([&] { splitCheckpointTensors({{"ema.", t}}); }, {"'ema.'", "only the prefix"});
}

//===----------------------------------------------------------------------------------===//
// Saving and loading
//===----------------------------------------------------------------------------------===//

TEST_F(CheckpointTest, RoundTrip) {
  TensorMap state = makeState(2);
  TrainState ts = makeTrainState(1234, {{"loss", 0.125}, {"val_loss", std::nan("")}});
  std::string stepDir = saveCheckpoint(root, ts, state);
  EXPECT_EQ(stepDir, root + "/step_00001234");
  EXPECT_EQ(listing(), (std::vector<std::string>{"latest", "step_00001234"}));
  std::vector<std::string> files;
  for (const auto &e : fs::directory_iterator(stepDir))
    files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"ema.safetensors", "model.safetensors",
                                             "optimizer.safetensors", "state.json"}));
  EXPECT_EQ(pointer("latest"), (Json{{"dir", "step_00001234"}, {"step", 1234}}));

  // The files hold the documented names, readable by the plain safetensors reader.
  SafetensorsFile ema = readSafetensors(stepDir + "/ema.safetensors");
  ASSERT_NE(ema.find("enc_block_0.0.conv1.weight"), nullptr);
  EXPECT_EQ(ema.find("enc_block_0.0.conv1.weight")->shape(), (Shape{5, 1, 3, 3, 3}));
  EXPECT_EQ(ema.metadata.at("format"), "pt");
  SafetensorsFile model = readSafetensors(stepDir + "/model.safetensors");
  EXPECT_EQ(model.tensors.size(), 10u);

  // state.json: the documented fields and a size + CRC-32C per file.
  Json doc = Json::parse(readBytes(stepDir + "/state.json"));
  EXPECT_EQ(doc["format"], "medrun-checkpoint");
  EXPECT_EQ(doc["version"], 1);
  EXPECT_EQ(doc["step"], 1234);
  EXPECT_EQ(doc["seed"].get<uint64_t>(), 0xfedcba9876543210ull);
  EXPECT_TRUE(doc["metrics"]["val_loss"].is_null());
  for (const char *f : {"model.safetensors", "ema.safetensors", "optimizer.safetensors"}) {
    std::string bytes = readBytes(stepDir + "/" + f);
    EXPECT_EQ(doc["files"][f]["size"].get<uint64_t>(), bytes.size()) << f;
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", crc32c(bytes.data(), bytes.size()));
    EXPECT_EQ(doc["files"][f]["crc32c"], hex) << f;
  }

  for (const std::string &path : {root, stepDir, root + "/latest", stepDir + "/state.json"}) {
    SCOPED_TRACE(path);
    Checkpoint c = loadCheckpoint(path);
    EXPECT_EQ(c.dir, stepDir);
    expectSameTensors(c.tensors, state);
    EXPECT_EQ(c.state.step, 1234);
    EXPECT_EQ(c.state.seed, ts.seed);
    EXPECT_EQ(c.state.rngOffset, ts.rngOffset);
    EXPECT_EQ(c.state.samplerPosition, ts.samplerPosition);
    EXPECT_EQ(c.state.schedule, ts.schedule);
    EXPECT_EQ(c.state.lossScale, 65536.0);
    EXPECT_EQ(c.state.growthTracker, 17);
    EXPECT_EQ(c.state.recipeHash, ts.recipeHash);
    EXPECT_EQ(c.state.metrics.at("loss"), 0.125);
    EXPECT_TRUE(std::isnan(c.state.metrics.at("val_loss")));
    EXPECT_EQ(c.state.extra, ts.extra);
    EXPECT_EQ(c.json["files"].size(), 3u);
  }
}

TEST_F(CheckpointTest, ModelOnlyAndReplacingAStep) {
  TensorMap first = {{"stem.weight", makeState(3).at("stem.weight")}};
  saveCheckpoint(root, makeTrainState(5), first);
  Checkpoint c = loadCheckpoint(root);
  expectSameTensors(c.tensors, first);
  EXPECT_EQ(c.json["files"].size(), 1u);
  EXPECT_FALSE(fs::exists(c.dir + "/ema.safetensors"));

  // Saving the same step again replaces it, leaving nothing behind.
  TensorMap second = makeState(4);
  saveCheckpoint(root, makeTrainState(5), second);
  expectSameTensors(loadCheckpoint(root).tensors, second);
  EXPECT_EQ(listing(), (std::vector<std::string>{"latest", "step_00000005"}));
}

TEST_F(CheckpointTest, WriterSavesInTheBackgroundInOrder) {
  CheckpointWriter writer(root, CheckpointOptions{});
  EXPECT_EQ(writer.poll(), "");
  EXPECT_EQ(writer.wait(), ""); // nothing started
  TensorMap a = makeState(1), b = makeState(2);
  writer.save(makeTrainState(2), a);
  writer.save(makeTrainState(4), b); // waits for step 2 first
  std::string last = writer.wait();
  EXPECT_EQ(fs::path(last).filename(), "step_00000004");
  EXPECT_EQ(writer.poll(), "");
  EXPECT_EQ(listing(), (std::vector<std::string>{"latest", "step_00000002", "step_00000004"}));
  expectSameTensors(loadCheckpoint(root + "/step_00000002").tensors, a);
  expectSameTensors(loadCheckpoint(root).tensors, b);

  // A finished save is reported by poll() once.
  writer.save(makeTrainState(6), b);
  std::string polled;
  for (int i = 0; i < 2000 && polled.empty(); ++i) {
    polled = writer.poll();
    if (polled.empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(fs::path(polled).filename(), "step_00000006");
  EXPECT_EQ(writer.wait(), "");
}

TEST_F(CheckpointTest, WriterReportsAFailedSave) {
  writeBytes(dir + "/file", "not a directory");
  CheckpointWriter writer(dir + "/file/ckpt", CheckpointOptions{});
  writer.save(makeTrainState(3), makeState(1)); // returns: the error comes with wait()
  expectError([&] { writer.wait(); }, {"file/ckpt", "cannot create the checkpoint directory"});
  EXPECT_EQ(writer.wait(), ""); // reported once
  // ... or with the next save, which does not start.
  writer.save(makeTrainState(4), makeState(1));
  expectError([&] { writer.save(makeTrainState(5), makeState(1)); }, {"file/ckpt"});
  EXPECT_EQ(writer.wait(), "");
}

TEST_F(CheckpointTest, KeepLastAndBest) {
  CheckpointOptions opt;
  opt.keepLast = 2;
  opt.bestMetric = "val_loss";
  // step -> val_loss (absent: not evaluated at that step)
  const std::vector<std::pair<int64_t, double>> runs = {
      {100, 0.9}, {200, 0.5}, {300, 0.7}, {400, NAN}, {500, 0.6}, {600, 0.5}};
  for (const auto &[step, val] : runs) {
    std::map<std::string, double> m = {{"loss", 1.0 / step}};
    if (step != 400)
      m["val_loss"] = val;
    saveCheckpoint(root, makeTrainState(step, m), makeState(step), opt);
  }
  // Newest two plus the best (200; 600 ties and keeps the older).
  EXPECT_EQ(listing(), (std::vector<std::string>{"best", "latest", "step_00000200",
                                                 "step_00000500", "step_00000600"}));
  EXPECT_EQ(pointer("best"), (Json{{"dir", "step_00000200"},
                                   {"step", 200},
                                   {"metric", "val_loss"},
                                   {"value", 0.5}}));
  EXPECT_EQ(loadCheckpoint(root + "/best").state.step, 200);
  expectSameTensors(loadCheckpoint(root + "/best").tensors, makeState(200));
  EXPECT_EQ(loadCheckpoint(root).state.step, 600);

  // A new best: the old best goes once it is neither best nor among the newest two.
  saveCheckpoint(root, makeTrainState(700, {{"val_loss", 0.25}}), makeState(700), opt);
  EXPECT_EQ(listing(), (std::vector<std::string>{"best", "latest", "step_00000600",
                                                 "step_00000700"}));
  EXPECT_EQ(pointer("best")["step"], 700);

  // keepLast <= 0 keeps everything; no bestMetric leaves `best` alone.
  CheckpointOptions all;
  all.keepLast = 0;
  saveCheckpoint(root, makeTrainState(800, {{"val_loss", 0.01}}), makeState(800), all);
  saveCheckpoint(root, makeTrainState(900), makeState(900), all);
  EXPECT_EQ(listCheckpoints(root).size(), 4u);
  EXPECT_EQ(pointer("best")["step"], 700);
}


// A validation Dice: higher is better, ties keep the older step, and a pointer of another
// metric (the training loss of steps before validation) is replaced.
TEST_F(CheckpointTest, BestHigherIsBetter) {
  CheckpointOptions byLoss;
  byLoss.keepLast = 1;
  byLoss.bestMetric = "loss";
  saveCheckpoint(root, makeTrainState(10, {{"loss", 0.1}}), makeState(10), byLoss);
  EXPECT_EQ(pointer("best")["metric"], "loss");
  CheckpointOptions opt;
  opt.keepLast = 1;
  opt.bestMetric = "val_dice";
  opt.bestHigher = true;
  const std::vector<std::pair<int64_t, double>> runs = {
      {20, 0.3}, {30, 0.6}, {40, 0.4}, {50, 0.6}, {60, NAN}};
  for (const auto &[step, dice] : runs)
    saveCheckpoint(root, makeTrainState(step, {{"loss", 1.0 / step}, {"val_dice", dice}}),
                   makeState(step), opt);
  EXPECT_EQ(pointer("best"), (Json{{"dir", "step_00000030"},
                                   {"step", 30},
                                   {"metric", "val_dice"},
                                   {"value", 0.6}}));
  EXPECT_EQ(listing(), (std::vector<std::string>{"best", "latest", "step_00000030",
                                                 "step_00000060"}));
  saveCheckpoint(root, makeTrainState(70, {{"val_dice", 0.61}}), makeState(70), opt);
  EXPECT_EQ(pointer("best")["step"], 70);
}
TEST_F(CheckpointTest, LatestPointerAndFallbacks) {
  for (int64_t step : {10, 20, 30})
    saveCheckpoint(root, makeTrainState(step), makeState(static_cast<uint32_t>(step)));
  EXPECT_EQ(pointer("latest")["step"], 30);
  // A run resumed from step 10 saves step 15: `latest` follows the run, not the number.
  saveCheckpoint(root, makeTrainState(15), makeState(15));
  EXPECT_EQ(loadCheckpoint(root).state.step, 15);
  expectSameTensors(loadCheckpoint(root).tensors, makeState(15));
  EXPECT_EQ(loadCheckpoint(root + "/step_00000030").state.step, 30);

  // Missing, dangling or unreadable pointer: the highest step.
  fs::remove(root + "/latest");
  EXPECT_EQ(loadCheckpoint(root).state.step, 30);
  writeBytes(root + "/latest", "{\"dir\": \"step_00000099\", \"step\": 99}\n");
  EXPECT_EQ(loadCheckpoint(root).state.step, 30);
  writeBytes(root + "/latest", "garbage");
  EXPECT_EQ(loadCheckpoint(root).state.step, 30);
  // ... but a pointer named explicitly must be valid.
  expectError([&] { loadCheckpoint(root + "/latest"); }, {"latest", "not a checkpoint pointer"});
  writeBytes(root + "/best", "{\"dir\": \"step_00000099\", \"step\": 99}\n");
  expectError([&] { loadCheckpoint(root + "/best"); }, {"best", "step_00000099", "deleted?"});
  writeBytes(root + "/best", "{\"dir\": \"../step_00000010\", \"step\": 10}\n");
  expectError([&] { loadCheckpoint(root + "/best"); }, {"best", "is not the directory of step"});
}

// Resolving a root reports what it passes over; a step directory without state.json is
// never kept as a checkpoint and goes at the next save.
TEST_F(CheckpointTest, PassedOverCheckpointsAreReported) {
  for (int64_t step : {1, 2, 3})
    saveCheckpoint(root, makeTrainState(step), makeState(static_cast<uint32_t>(step)));
  std::vector<SkippedCheckpoint> skipped;
  EXPECT_EQ(resolveCheckpoint(root, &skipped), root + "/step_00000003");
  EXPECT_TRUE(skipped.empty()); // the control: nothing passed over, nothing said

  fs::remove(root + "/step_00000003/state.json");
  EXPECT_EQ(resolveCheckpoint(root, &skipped), root + "/step_00000002");
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].path, root + "/step_00000003");
  EXPECT_NE(skipped[0].reason.find("'latest' points to it"), std::string::npos);

  writeBytes(root + "/latest", "garbage\n");
  EXPECT_EQ(resolveCheckpoint(root, &skipped), root + "/step_00000002");
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_EQ(skipped[0].path, root + "/latest");
  EXPECT_NE(skipped[0].reason.find("found: garbage"), std::string::npos);
  EXPECT_EQ(skipped[0].reason.find('\n'), std::string::npos); // one line
  EXPECT_EQ(skipped[1].path, root + "/step_00000003");
  EXPECT_NE(skipped[1].reason.find("without state.json"), std::string::npos);

  // keepLast 1: the incomplete step 3 is not counted among the kept; it goes with step 1
  // and 2, through step_<N>.deleting.tmp, which no listing shows afterwards.
  CheckpointOptions one;
  one.keepLast = 1;
  saveCheckpoint(root, makeTrainState(4), makeState(4), one);
  EXPECT_EQ(listing(), (std::vector<std::string>{"latest", "step_00000004"}));
  expectSameTensors(loadCheckpoint(root).tensors, makeState(4));
}

TEST_F(CheckpointTest, LeftoversOfACrashAreIgnoredThenRemoved) {
  saveCheckpoint(root, makeTrainState(1), makeState(1));
  // A crash while saving step 2 (half-written files) and while writing a pointer.
  fs::create_directory(root + "/step_00000002.tmp");
  writeBytes(root + "/step_00000002.tmp/model.safetensors", "partial");
  writeBytes(root + "/step_00000002.tmp/model.safetensors.tmp-abcdef", "partial");
  writeBytes(root + "/latest.tmp-Xy12zz", "{\"dir\": \"step_00000002\"");
  fs::create_directory(root + "/step_00000003.replaced.tmp");
  fs::create_directory(root + "/step_00000000.deleting.tmp"); // a deletion that was killed
  fs::create_directory(root + "/unrelated");
  EXPECT_EQ(listCheckpoints(root).size(), 1u);
  EXPECT_EQ(loadCheckpoint(root).state.step, 1);
  fs::remove(root + "/latest"); // the scan ignores them too
  EXPECT_EQ(loadCheckpoint(root).state.step, 1);

  saveCheckpoint(root, makeTrainState(2), makeState(2));
  EXPECT_EQ(listing(), (std::vector<std::string>{"latest", "step_00000001", "step_00000002",
                                                 "unrelated"}));
  expectSameTensors(loadCheckpoint(root).tensors, makeState(2));
}

TEST_F(CheckpointTest, CorruptedOrTruncatedFilesAreRejected) {
  const std::string stepDir = saveCheckpoint(root, makeTrainState(42), makeState(42));
  const std::vector<std::string> files = {"model.safetensors", "ema.safetensors",
                                          "optimizer.safetensors", "state.json"};
  std::map<std::string, std::string> original;
  for (const auto &f : files)
    original[f] = readBytes(stepDir + "/" + f);
  auto restore = [&] {
    for (const auto &[f, bytes] : original)
      writeBytes(stepDir + "/" + f, bytes);
    ASSERT_NO_THROW(loadCheckpoint(root));
  };

  std::mt19937 rng(42);
  for (const auto &f : files) {
    SCOPED_TRACE(f);
    const std::string &bytes = original[f];
    const bool isState = f == "state.json";
    // One flipped bit anywhere: header, data, last byte.
    std::vector<size_t> positions = {0, 9, bytes.size() / 2, bytes.size() - 1};
    for (int k = 0; k < 6; ++k)
      positions.push_back(rng() % bytes.size());
    for (size_t pos : positions) {
      SCOPED_TRACE(pos);
      std::string bad = bytes;
      bad[pos] ^= static_cast<char>(1 << (rng() % 8));
      writeBytes(stepDir + "/" + f, bad);
      try {
        loadCheckpoint(root);
        ADD_FAILURE() << "a flipped byte was not detected";
      } catch (const Error &e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find(stepDir + "/" + f), std::string::npos) << msg;
        if (!isState) {
          EXPECT_NE(msg.find("corrupted: CRC-32C is"), std::string::npos) << msg;
        }
      }
      restore();
    }
    // Truncated: to nothing, to half, by one byte.
    for (size_t keep : {size_t(0), bytes.size() / 2, bytes.size() - 1}) {
      SCOPED_TRACE(keep);
      writeBytes(stepDir + "/" + f, bytes.substr(0, keep));
      if (isState)
        expectError([&] { loadCheckpoint(stepDir); }, {stepDir + "/state.json"});
      else
        expectError([&] { loadCheckpoint(stepDir); },
                    {stepDir + "/" + f, str("size is ", keep, " bytes, state.json records ",
                                            bytes.size(), " (truncated)")});
      restore();
    }
    // Missing.
    fs::remove(stepDir + "/" + f);
    expectError([&] { loadCheckpoint(stepDir); }, {stepDir});
    restore();
  }
  // Appended garbage is caught by the size.
  writeBytes(stepDir + "/ema.safetensors", original["ema.safetensors"] + "x");
  expectError([&] { verifyCheckpoint(stepDir); }, {"ema.safetensors", "(the file was changed)"});
}

TEST_F(CheckpointTest, StateJsonIsValidated) {
  const std::string stepDir = saveCheckpoint(root, makeTrainState(7), makeState(7));
  const std::string original = readBytes(stepDir + "/state.json");
  auto expectStateError = [&](const std::function<void(Json &)> &edit,
                              std::initializer_list<std::string> phrases) {
    rewriteState(stepDir, edit);
    expectError([&] { loadCheckpoint(stepDir); }, phrases);
    writeBytes(stepDir + "/state.json", original);
  };
  // The checksum rule itself: rewriting without changes loads.
  rewriteState(stepDir, [](Json &) {});
  EXPECT_EQ(readBytes(stepDir + "/state.json"), original);

  expectStateError([](Json &d) { d["version"] = 2; }, {"state.json", "format version 2"});
  expectStateError([](Json &d) { d["format"] = "other"; }, {"state.json", "'format'"});
  expectStateError([](Json &d) { d["step"] = 8; },
                   {"records step 8, but the directory is step_00000007"});
  expectStateError([](Json &d) { d["files"]["../../etc/passwd"] = d["files"]["model.safetensors"]; },
                   {"files.../../etc/passwd", "not a checkpoint file"});
  expectStateError([](Json &d) { d["files"].erase("model.safetensors"); },
                   {"does not list model.safetensors"});
  expectStateError([](Json &d) { d["files"]["ema.safetensors"]["size"] = "12"; },
                   {"files.ema.safetensors", "'size' must be a non-negative integer"});
  expectStateError([](Json &d) { d["seed"] = -1; }, {"'seed' must be a non-negative integer"});
  expectStateError([](Json &d) { d["metrics"]["loss"] = "low"; }, {"metric 'loss'"});
  expectStateError([](Json &d) { d.erase("recipe_hash"); }, {"missing field 'recipe_hash'"});

  // A step directory copied under another name still loads (no step in the name).
  fs::copy(stepDir, dir + "/mine", fs::copy_options::recursive);
  EXPECT_EQ(loadCheckpoint(dir + "/mine").state.step, 7);
}

TEST_F(CheckpointTest, BadRequests) {
  expectError([&] { saveCheckpoint(root, makeTrainState(-1), makeState(1)); }, {"step -1"});
  expectError([&] { saveCheckpoint(root, makeTrainState(1), {{"ema.a", Tensor(DType::F32, {1})}}); },
              {"no model parameters"});
  expectError([&] { loadCheckpoint(dir + "/nothing"); }, {dir + "/nothing", "does not exist"});
  fs::create_directory(root);
  expectError([&] { loadCheckpoint(root); }, {root, "no checkpoint here"});
  EXPECT_TRUE(listCheckpoints(dir + "/nothing").empty());
  EXPECT_EQ(checkpointDirName(7), "step_00000007");
  EXPECT_EQ(checkpointDirName(123456789), "step_123456789");
}

//===----------------------------------------------------------------------------------===//
// Disk full: a real EFBIG from RLIMIT_FSIZE in a child process
//===----------------------------------------------------------------------------------===//

namespace {
/// Runs saveCheckpoint in a child whose files may not grow past `limit` bytes (writes fail
/// with EFBIG, SIGXFSZ ignored). Returns the error message ("" if it saved).
std::string saveWithFileSizeLimit(const std::string &root, const TrainState &state,
                                  const TensorMap &tensors, rlim_t limit) {
  int fds[2];
  if (::pipe(fds) != 0)
    return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {limit, limit};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    std::string msg;
    try {
      saveCheckpoint(root, state, tensors);
    } catch (const std::exception &e) {
      msg = e.what();
    }
    ssize_t ignored = ::write(fds[1], msg.data(), msg.size());
    (void)ignored;
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    msg.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child crashed";
  return msg;
}
} // namespace

TEST_F(CheckpointTest, DiskFullKeepsThePreviousCheckpoint) {
  TensorMap small = makeState(1);
  saveCheckpoint(root, makeTrainState(1), small);
  const std::vector<std::string> before = listing();
  const std::string latest = readBytes(root + "/latest");

  // Each file of the state is well under 64 KiB; one part gets 200 KB more.
  struct Case {
    const char *part;
    const char *file;
    int64_t step;
  };
  for (const Case &c : {Case{"", "model.safetensors", 2}, Case{"optimizer.", "optimizer.safetensors", 2},
                        Case{"ema.", "ema.safetensors", 1}}) { // the last replaces step 1
    SCOPED_TRACE(c.file);
    std::string msg = saveWithFileSizeLimit(root, makeTrainState(c.step),
                                            makeState(9, c.part, 50000), 64 * 1024);
    EXPECT_NE(msg.find(str("checkpoint of step ", c.step, " not saved")), std::string::npos) << msg;
    EXPECT_NE(msg.find(str(checkpointDirName(c.step), ".tmp/", c.file)), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::strerror(EFBIG)), std::string::npos) << msg;
    EXPECT_EQ(listing(), before); // no step_<N>.tmp left, pointers untouched
    EXPECT_EQ(readBytes(root + "/latest"), latest);
    Checkpoint ck = loadCheckpoint(root);
    EXPECT_EQ(ck.state.step, 1);
    expectSameTensors(ck.tensors, small);
  }
  // The same save without the limit succeeds.
  EXPECT_EQ(saveWithFileSizeLimit(root, makeTrainState(2), makeState(9, "", 50000), RLIM_INFINITY),
            "");
  EXPECT_EQ(loadCheckpoint(root).state.step, 2);
}
