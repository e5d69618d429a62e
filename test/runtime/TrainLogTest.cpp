//===- TrainLogTest.cpp - TensorBoard event files, JSONL log, progress display -------===//
//
// The event files are also read by an independent Python reader (check_train_files.py).
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Checksum.h"
#include "medrun/Error.h"
#include "medrun/TrainLog.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>

#include <unistd.h>

using namespace medrun;
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::vector<std::string> lines(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    out.push_back(l);
  return out;
}

void expectError(const std::function<void()> &fn, std::initializer_list<std::string> phrases) {
  try {
    fn();
  } catch (const Error &e) {
    std::string msg = e.what();
    for (const std::string &p : phrases)
      EXPECT_NE(msg.find(p), std::string::npos) << "message lacks \"" << p << "\":\n  " << msg;
    return;
  }
  ADD_FAILURE() << "did not throw; expected an error containing \"" << *phrases.begin() << "\"";
}

class TrainLogTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "medrun-trainlog-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string dir;
};

//===----------------------------------------------------------------------------------===//
// A small event-file reader: checks the framing and both CRCs, decodes the Event fields.
//===----------------------------------------------------------------------------------===//

struct Event {
  double wallTime = 0;
  std::optional<int64_t> step;
  std::string fileVersion;
  std::vector<std::pair<std::string, float>> values;
};

uint64_t varint(const std::string &b, size_t &i) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    if (i >= b.size())
      throw std::runtime_error("varint runs past the end");
    auto c = static_cast<unsigned char>(b[i++]);
    v |= uint64_t(c & 0x7f) << shift;
    if (!(c & 0x80))
      return v;
  }
}

/// Calls fn(field, wireType, payload) for every field; varints/fixed come as raw bytes.
void fields(const std::string &msg,
            const std::function<void(int, int, const std::string &, uint64_t)> &fn) {
  size_t i = 0;
  while (i < msg.size()) {
    uint64_t key = varint(msg, i);
    int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (wire == 0) {
      fn(field, wire, "", varint(msg, i));
    } else if (wire == 1 || wire == 5) {
      size_t n = wire == 1 ? 8 : 4;
      fn(field, wire, msg.substr(i, n), 0);
      i += n;
    } else if (wire == 2) {
      uint64_t n = varint(msg, i);
      fn(field, wire, msg.substr(i, n), 0);
      i += n;
    } else {
      throw std::runtime_error("unexpected wire type");
    }
  }
  if (i != msg.size())
    throw std::runtime_error("message overruns");
}

std::vector<Event> readEvents(const std::string &path) {
  std::string b = readBytes(path);
  std::vector<Event> events;
  size_t i = 0;
  while (i < b.size()) {
    EXPECT_LE(i + 12, b.size()) << "truncated record header";
    uint64_t len;
    uint32_t lenCrc, dataCrc;
    std::memcpy(&len, &b[i], 8);
    std::memcpy(&lenCrc, &b[i + 8], 4);
    EXPECT_EQ(lenCrc, maskedCrc32c(crc32c(&b[i], 8)));
    EXPECT_LE(i + 12 + len + 4, b.size()) << "truncated record";
    std::string data = b.substr(i + 12, len);
    std::memcpy(&dataCrc, &b[i + 12 + len], 4);
    EXPECT_EQ(dataCrc, maskedCrc32c(crc32c(data.data(), data.size())));
    i += 12 + len + 4;
    Event e;
    fields(data, [&](int f, int w, const std::string &p, uint64_t v) {
      if (f == 1 && w == 1)
        std::memcpy(&e.wallTime, p.data(), 8);
      else if (f == 2 && w == 0)
        e.step = static_cast<int64_t>(v);
      else if (f == 3 && w == 2)
        e.fileVersion = p;
      else if (f == 5 && w == 2)
        fields(p, [&](int vf, int vw, const std::string &value, uint64_t) {
          ASSERT_TRUE(vf == 1 && vw == 2);
          std::pair<std::string, float> tv;
          fields(value, [&](int g, int gw, const std::string &q, uint64_t) {
            if (g == 1 && gw == 2)
              tv.first = q;
            else if (g == 2 && gw == 5)
              std::memcpy(&tv.second, q.data(), 4);
            else
              ADD_FAILURE() << "unexpected Value field " << g;
          });
          e.values.push_back(tv);
        });
      else
        ADD_FAILURE() << "unexpected Event field " << f;
    });
    events.push_back(e);
  }
  return events;
}

/// Captures what a FILE* receives.
struct MemFile {
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = ::open_memstream(&buf, &len);
  ~MemFile() {
    std::fclose(f);
    std::free(buf);
  }
  std::string text() {
    std::fflush(f);
    return std::string(buf, len);
  }
};

} // namespace

//===----------------------------------------------------------------------------------===//
// TensorBoard
//===----------------------------------------------------------------------------------===//

TEST(TfRecord, Framing) {
  const std::string data("\x09\x00\x00\x00\x00\x00\x00\xf0\x3f", 9); // Event{wall_time: 1.0}
  std::string r = detail::tfRecord(data);
  ASSERT_EQ(r.size(), 8 + 4 + data.size() + 4);
  EXPECT_EQ(r.substr(0, 8), std::string("\x09\0\0\0\0\0\0\0", 8)); // u64 little-endian
  uint32_t lenCrc, dataCrc;
  std::memcpy(&lenCrc, &r[8], 4);
  std::memcpy(&dataCrc, &r[12 + data.size()], 4);
  uint32_t c = crc32c(r.data(), 8);
  EXPECT_EQ(lenCrc, ((c >> 15) | (c << 17)) + 0xa282ead8u);
  EXPECT_EQ(r.substr(12, data.size()), data);
  c = crc32c(data.data(), data.size());
  EXPECT_EQ(dataCrc, ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST_F(TrainLogTest, TensorBoardScalars) {
  std::string path;
  double before = static_cast<double>(std::time(nullptr));
  {
    TensorBoardWriter w(dir + "/tb");
    path = w.path();
    w.addScalars(0, {{"train/loss", 0.75}, {"train/lr", 1e-3}});
    w.addScalar("val/dice ✓", 0.8125, 1);
    w.addScalar("big", -2.5e30, int64_t(1) << 40);
    w.addScalar("negative_step", 3.0, -5);
    w.addScalars(7, {{"nan", std::nan("")}, {"inf", INFINITY}, {"zero", -0.0}, {"pi", M_PI}});
  } // the destructor flushes and closes
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  std::regex name(std::string(R"(events\.out\.tfevents\.\d{10}\.)") + host + "\\." +
                  std::to_string(::getpid()) + R"(\.\d+)");
  EXPECT_TRUE(std::regex_match(fs::path(path).filename().string(), name)) << path;

  std::vector<Event> ev = readEvents(path);
  ASSERT_EQ(ev.size(), 6u);
  EXPECT_EQ(ev[0].fileVersion, "brain.Event:2");
  EXPECT_FALSE(ev[0].step.has_value());
  EXPECT_GE(ev[0].wallTime, before - 1);
  EXPECT_LE(ev[0].wallTime, static_cast<double>(std::time(nullptr)) + 1);
  EXPECT_EQ(ev[1].step, 0);
  ASSERT_EQ(ev[1].values.size(), 2u);
  EXPECT_EQ(ev[1].values[0], std::make_pair(std::string("train/loss"), 0.75f));
  EXPECT_EQ(ev[1].values[1], std::make_pair(std::string("train/lr"), 1e-3f));
  EXPECT_EQ(ev[2].values[0].first, "val/dice ✓");
  EXPECT_EQ(ev[3].step, int64_t(1) << 40);
  EXPECT_EQ(ev[3].values[0].second, -2.5e30f);
  EXPECT_EQ(ev[4].step, -5);
  ASSERT_EQ(ev[5].values.size(), 4u);
  EXPECT_TRUE(std::isnan(ev[5].values[0].second));
  EXPECT_EQ(ev[5].values[1].second, INFINITY);
  EXPECT_TRUE(std::signbit(ev[5].values[2].second));
  EXPECT_EQ(ev[5].values[3].second, static_cast<float>(M_PI));
  for (size_t k = 1; k < ev.size(); ++k)
    EXPECT_GE(ev[k].wallTime, ev[0].wallTime);
}

TEST_F(TrainLogTest, TensorBoardFlushing) {
  TensorBoardWriter lazy(dir, /*flushSeconds=*/1e9);
  uint64_t header = fs::file_size(lazy.path());
  EXPECT_GT(header, 0u); // the file_version record is written at once
  lazy.addScalar("loss", 1.0, 1);
  EXPECT_EQ(fs::file_size(lazy.path()), header);
  lazy.flush();
  EXPECT_GT(fs::file_size(lazy.path()), header);
  EXPECT_EQ(readEvents(lazy.path()).size(), 2u);

  TensorBoardWriter eager(dir, /*flushSeconds=*/0);
  EXPECT_NE(eager.path(), lazy.path()); // two writers never share a file
  eager.addScalar("loss", 1.0, 1);
  EXPECT_EQ(readEvents(eager.path()).size(), 2u);
  eager.close();
  expectError([&] { eager.addScalar("loss", 1.0, 2); }, {eager.path(), "closed"});
  expectError([&] { TensorBoardWriter w("/proc/version/x"); }, {"/proc/version/x"});
}

//===----------------------------------------------------------------------------------===//
// JSONL
//===----------------------------------------------------------------------------------===//

TEST_F(TrainLogTest, JsonlLines) {
  const std::string path = dir + "/metrics.jsonl";
  JsonlLog log(path);
  StepRecord r;
  r.step = 1;
  r.loss = 0.5;
  r.lr = 1e-3;
  r.gradNorm = 1.5;
  r.stepTime = 0.25;
  r.samplesPerSecond = 8;
  r.dataWait = 0.0625;
  r.extra = {{"val_dice", 0.75}, {"phase", "train"}, {"bad", std::nan("")}};
  log.write(r);
  // Flushed per line: readable while the log is open.
  EXPECT_EQ(readBytes(path), "{\"step\":1,\"loss\":0.5,\"lr\":0.001,\"grad_norm\":1.5,"
                             "\"step_time\":0.25,\"samples_per_s\":8.0,\"data_wait\":0.0625,"
                             "\"val_dice\":0.75,\"phase\":\"train\",\"bad\":null}\n");
  r.step = 2;
  r.loss = INFINITY;
  r.extra = Json::object();
  log.write(r);
  log.write(Json{{"event", "eval"}, {"step", 2}, {"dice", {0.5, 0.25}}});
  std::vector<std::string> ls = lines(readBytes(path));
  ASSERT_EQ(ls.size(), 3u);
  for (const auto &l : ls)
    EXPECT_TRUE(Json::parse(l).is_object()) << l;
  EXPECT_TRUE(Json::parse(ls[1])["loss"].is_null());
  EXPECT_EQ(Json::parse(ls[2])["dice"][1], 0.25);

  expectError([&] { log.write(Json::array({1})); }, {path, "JSON object"});
  r.extra = {{"lr", 1.0}};
  expectError([&] { log.write(r); }, {path, "'lr'", "repeats a standard field"});
  expectError([&] { JsonlLog bad(dir + "/missing/metrics.jsonl"); },
              {dir + "/missing/metrics.jsonl", "cannot open"});
  JsonlLog full("/dev/full");
  expectError([&] { full.write(Json{{"step", 1}}); }, {"/dev/full", std::strerror(ENOSPC)});
}

TEST_F(TrainLogTest, JsonlResumeCutsWhatFollowsTheCheckpoint) {
  const std::string path = dir + "/metrics.jsonl";
  {
    JsonlLog log(path);
    for (int s = 1; s <= 10; ++s) {
      StepRecord r;
      r.step = s;
      r.loss = 1.0 / s;
      log.write(r);
      if (s == 5)
        log.write(Json{{"event", "eval"}, {"dice", 0.5}}); // no step: kept with its neighbours
    }
  }
  { // a crash in the middle of a line
    std::ofstream out(path, std::ios::app);
    out << "{\"step\":11,\"lo";
  }
  {
    JsonlLog log(path, /*resumeStep=*/7); // 7 steps done: 1..6 kept, 7 logged again
    StepRecord r;
    r.step = 7;
    log.write(r);
  }
  std::vector<std::string> ls = lines(readBytes(path));
  ASSERT_EQ(ls.size(), 8u);
  std::vector<int64_t> steps;
  for (const auto &l : ls) {
    Json j = Json::parse(l);
    steps.push_back(j.contains("step") ? j["step"].get<int64_t>() : -1);
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4, 5, -1, 6, 7}));

  // Resuming past the end only drops the partial line; a new run starts afresh.
  { std::ofstream(path, std::ios::app) << "{\"step\":9,"; }
  { JsonlLog log(path, 100); }
  EXPECT_EQ(lines(readBytes(path)).size(), 8u);
  EXPECT_EQ(readBytes(path).back(), '\n');
  { JsonlLog log(path); }
  EXPECT_EQ(readBytes(path), "");
  { JsonlLog log(dir + "/new.jsonl", 3); } // resuming without a log creates it
  EXPECT_TRUE(fs::exists(dir + "/new.jsonl"));
}

//===----------------------------------------------------------------------------------===//
// Progress
//===----------------------------------------------------------------------------------===//

TEST(Progress, FormatInterval) {
  EXPECT_EQ(Progress::formatInterval(0), "00:00");
  EXPECT_EQ(Progress::formatInterval(59.9), "00:59");
  EXPECT_EQ(Progress::formatInterval(61), "01:01");
  EXPECT_EQ(Progress::formatInterval(3600), "1:00:00");
  EXPECT_EQ(Progress::formatInterval(3723), "1:02:03");
  EXPECT_EQ(Progress::formatInterval(100 * 3600 + 5), "100:00:05");
  EXPECT_EQ(Progress::formatInterval(-3), "00:00");
}

TEST(Progress, LinesEveryNSteps) {
  MemFile out;
  double t = 0;
  Progress::Options o;
  o.total = 1000;
  o.mode = Progress::Mode::Lines;
  o.every = 100;
  o.clock = [&] { return t; };
  {
    Progress p(out.f, o);
    EXPECT_FALSE(p.isBar());
    for (int k = 1; k <= 1000; ++k) {
      t = k * 0.25; // 4 steps/s
      p.update(k, {{"loss", 1.0 / k}, {"lr", 1e-3}});
    }
    p.finish();
    p.finish(); // once
  }
  std::vector<std::string> ls = lines(out.text());
  ASSERT_EQ(ls.size(), 12u);
  EXPECT_EQ(ls[0], "train: step 1/1000 (0%), 00:00 elapsed, 04:09 left, 4.00it/s, loss=1, lr=0.001");
  EXPECT_EQ(ls[1],
            "train: step 100/1000 (10%), 00:25 elapsed, 03:45 left, 4.00it/s, loss=0.01, lr=0.001");
  EXPECT_EQ(ls[10],
            "train: step 1000/1000 (100%), 04:10 elapsed, 00:00 left, 4.00it/s, loss=0.001, lr=0.001");
  EXPECT_EQ(ls[11], "train: done at step 1000/1000, 1000 steps in 04:10 (4.00it/s), loss=0.001, "
                    "lr=0.001");
}

TEST(Progress, LinesEveryNSecondsAfterResume) {
  MemFile out;
  double t = 100;
  Progress::Options o;
  o.total = 2000;
  o.initial = 1000;
  o.desc = "fit";
  o.mode = Progress::Mode::Lines;
  o.everySeconds = 30;
  o.clock = [&] { return t; };
  Progress p(out.f, o);
  for (int k = 1001; k <= 1300; ++k) {
    t = 100 + (k - 1000) * 0.5; // 2 steps/s
    p.update(k);
  }
  p.message("eval: dice=0.5");
  p.finish({{"loss", 0.125}});
  std::vector<std::string> ls = lines(out.text());
  // First update, then every 30 s (60 steps), then the message and the summary.
  ASSERT_EQ(ls.size(), 7u);
  EXPECT_EQ(ls[0], "fit: step 1001/2000 (50%), 00:00 elapsed, 08:19 left, 2.00it/s");
  EXPECT_EQ(ls[1], "fit: step 1061/2000 (53%), 00:30 elapsed, 07:49 left, 2.00it/s");
  EXPECT_EQ(ls[4], "fit: step 1241/2000 (62%), 02:00 elapsed, 06:19 left, 2.00it/s");
  EXPECT_EQ(ls[5], "eval: dice=0.5");
  EXPECT_EQ(ls[6], "fit: done at step 1300/2000, 300 steps in 02:30 (2.00it/s), loss=0.125");
}

TEST(Progress, BarRedrawnInPlace) {
  MemFile out;
  double t = 0;
  Progress::Options o;
  o.total = 1000;
  o.mode = Progress::Mode::Bar;
  o.width = 79; // leaves 20 cells for the bar below
  o.ascii = true;
  o.minRedrawSeconds = 1.0;
  o.clock = [&] { return t; };
  {
    Progress p(out.f, o);
    EXPECT_TRUE(p.isBar());
    for (int k = 1; k <= 250; ++k) {
      t = k * 0.25;
      p.update(k, {{"loss", 1.0 / k}});
    }
    std::string s = out.text();
    // Redrawn at most once a second: steps 1, 5, 9, ..., 249.
    EXPECT_EQ(std::count(s.begin(), s.end(), '\r'), 63);
    EXPECT_EQ(s.find('\n'), std::string::npos);
    p.update(250, {{"loss", 0.004}});
    t = 62.5 + 1;
    p.update(250, {{"loss", 0.004}});
    s = out.text();
    const std::string last =
        "\rtrain:  25%|#####               | 250/1000 [01:03<03:07, 4.00it/s, loss=0.004]\x1b[K";
    EXPECT_EQ(s.substr(s.size() - last.size()), last);
    p.message("a warning");
    s = out.text();
    EXPECT_EQ(s.substr(s.size() - last.size() - 14), "\ra warning\x1b[K\n" + last);
  } // destroyed unfinished: ends the line
  EXPECT_EQ(out.text().back(), '\n');
}

TEST(Progress, BarShapes) {
  auto render = [](int64_t total, int64_t n, int width, bool ascii) {
    MemFile out;
    double t = 0;
    Progress::Options o;
    o.total = total;
    o.mode = Progress::Mode::Bar;
    o.width = width;
    o.ascii = ascii;
    o.clock = [&] { return t; };
    Progress p(out.f, o);
    t = 10;
    p.update(n);
    p.finish();
    return out.text();
  };
  // 33% of 10 cells: 3 full, a 2/8 partial cell, 6 blank.
  std::string s = render(100, 33, 10 + 1 + 12 + 32, false);
  EXPECT_NE(s.find("\rtrain:  33%|███▎      | 33/100 [00:10<00:20, 3.30it/s]\x1b[K"),
            std::string::npos)
      << s;
  // ASCII partial cells are digits (tqdm's ascii bar).
  s = render(100, 37, 10 + 1 + 12 + 32, true);
  EXPECT_NE(s.find("|###7      |"), std::string::npos) << s;
  // Complete: the last draw is full, then a newline and the summary.
  s = render(100, 100, 10 + 1 + 12 + 34, true);
  EXPECT_NE(s.find("|##########| 100/100 [00:10<00:00, 10.00it/s]\x1b[K\n"
                   "train: done at step 100/100, 100 steps in 00:10 (10.00it/s)\n"),
            std::string::npos)
      << s;
  // Unknown total: tqdm's counter form.
  s = render(0, 42, 80, true);
  EXPECT_NE(s.find("\rtrain: 42it [00:10, 4.20it/s]\x1b[K"), std::string::npos) << s;
  // Too narrow for a bar: the text, cut to the width.
  s = render(100, 50, 30, true);
  EXPECT_NE(s.find("\rtrain:  50% 50/100 [00:10<00:\x1b[K"), std::string::npos) << s;
  // Slower than a step per second: seconds per step.
  s = render(100, 2, 80, true);
  EXPECT_NE(s.find("5.00s/it"), std::string::npos) << s;
}

TEST(Progress, AutoModeOnAPipeIsLines) {
  FILE *f = std::tmpfile();
  Progress::Options o;
  o.total = 10;
  Progress p(f, o);
  EXPECT_FALSE(p.isBar());
  std::fclose(f);
}
