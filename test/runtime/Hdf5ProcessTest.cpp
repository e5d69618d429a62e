//===- Hdf5ProcessTest.cpp - the HDF5 reader's child process and its failures ---------===//
//
// The HDF5 reader runs libhdf5 in a child process (runtime/src/io/Hdf5.cpp). These tests
// make the child fail on each kind of request (MEDRUN_HDF5_TEST_FAULT: a crash, an abort,
// an exit, a hang, an answer one byte short or long) and check that the parent says so,
// naming the file and the request, instead of returning what it has (the negative
// control: the same read without a fault returns the volume's values), that every later
// request of that reader fails too, and that no child outlives its reader.
//
//===----------------------------------------------------------------------------------===//
#include "ExpectError.h"

#include "medrun/Volume.h"

#include "gtest/gtest.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace medrun {
namespace {

namespace fs = std::filesystem;

/// Sets an environment variable for a scope.
struct ScopedEnv {
  ScopedEnv(const char *name, const char *value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  const char *name_;
};

/// Whether process `pid` still runs (a zombie nobody reaps counts as ended).
bool running(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line))
    return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

/// The live (or unreaped) children of this thread, where /proc says.
std::optional<std::set<int>> children() {
  std::ifstream in("/proc/thread-self/children");
  if (!in)
    return std::nullopt;
  std::set<int> pids;
  for (int pid; in >> pid;)
    pids.insert(pid);
  return pids;
}

class Hdf5Process : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("medrun-hdf5-process-" + std::to_string(::getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    values_.resize(4 * 5 * 6);
    std::iota(values_.begin(), values_.end(), 1);
    VolumeData v;
    v.shape = {4, 5, 6};
    v.type = VoxelType::U16;
    v.data = values_.data();
    try {
      auto w = createVolume(dir_ + "/a.h5/x", v, {2, 2, 3});
      w->write({0, 0, 0}, v.shape, v.data);
      w->finish();
    } catch (const Error &e) {
      if (std::string(e.what()).find("without HDF5") != std::string::npos)
        GTEST_SKIP() << e.what();
      throw;
    }
    before_ = children();
  }
  void TearDown() override {
    // No child outlives its reader (killed and reaped: not even a zombie).
    if (before_) {
      std::optional<std::set<int>> after = children();
      ASSERT_TRUE(after);
      EXPECT_EQ(after->size(), before_->size()) << "a child of a reader left behind";
    }
    fs::remove_all(dir_);
  }

  /// Reads the whole volume; the values are what was written.
  void readsBack(const VolumeReader &r) {
    std::vector<float> got(values_.size(), -1);
    r.read({0, 0, 0}, {4, 5, 6}, got.data());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], values_[i]) << "voxel " << i;
  }

  std::string dir_;
  std::vector<uint16_t> values_;
  std::optional<std::set<int>> before_;
};

TEST_F(Hdf5Process, ReadsInAChildProcess) {
  auto r = openVolume(dir_ + "/a.h5/x");
  if (before_) {
    auto during = children();
    ASSERT_TRUE(during);
    EXPECT_EQ(during->size(), before_->size() + 1) << "one child per open reader";
  }
  EXPECT_EQ(r->info().shape, (Box3{4, 5, 6}));
  EXPECT_EQ(r->info().chunk, (Box3{2, 2, 3}));
  readsBack(*r);
  // The first dataset, without a key (the listing request).
  readsBack(*openVolume(dir_ + "/a.h5"));
}

TEST_F(Hdf5Process, ConcurrentReadsOfOneReader) {
  // Data workers decode chunks of one reader at once: one request in flight per child
  // (without the reader's mutex, answers interleave and the reader fails).
  auto r = openVolume(dir_ + "/a.h5/x");
  r->setCache(std::make_shared<ChunkCache>(1)); // every read decodes its chunks again
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        std::vector<float> got(values_.size());
        try {
          r->read({0, 0, 0}, {4, 5, 6}, got.data());
        } catch (const Error &) {
          ++wrong;
          return;
        }
        if (got != std::vector<float>(values_.begin(), values_.end()))
          ++wrong;
      }
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(wrong, 0);
}

TEST_F(Hdf5Process, ChildDeathDuringAReadIsAnError) {
  const std::string file = dir_ + "/a.h5";
  for (const char *fault : {"segv:read", "abort:read", "exit:read"}) {
    SCOPED_TRACE(fault);
    ScopedEnv env("MEDRUN_HDF5_TEST_FAULT", fault);
    auto r = openVolume(file + "/x");
    const char *how = fault[0] == 's' ? "libhdf5 crashed (signal 11"
                      : fault[0] == 'a' ? "libhdf5 crashed (signal 6"
                                        : "libhdf5's process exited with status 3";
    std::vector<float> got(2 * 2 * 3, -1);
    EXPECT_ERROR(r->read({0, 0, 0}, {2, 2, 3}, got.data()), file.c_str(), how,
                 "while reading dataset 'x' box [0:2, 0:2, 0:3]",
                 "the file is probably malformed");
    // Every later request fails as well (never zeros or stale voxels).
    EXPECT_ERROR(r->read({2, 2, 3}, {2, 2, 3}, got.data()), how);
    for (float g : got)
      EXPECT_EQ(g, -1);
  }
}

TEST_F(Hdf5Process, ChildDeathWhileOpeningIsAnError) {
  const std::string file = dir_ + "/a.h5";
  {
    ScopedEnv env("MEDRUN_HDF5_TEST_FAULT", "exit:open");
    EXPECT_ERROR(openVolume(file + "/x"), file.c_str(), "exited with status 3",
                 "while opening the file");
  }
  {
    ScopedEnv env("MEDRUN_HDF5_TEST_FAULT", "abort:list");
    EXPECT_ERROR(openVolume(file), "crashed (signal 6", "while listing datasets");
  }
  {
    ScopedEnv env("MEDRUN_HDF5_TEST_FAULT", "segv:dataset");
    EXPECT_ERROR(openChannel(file + "/x", 0), "crashed (signal 11",
                 "while reading the metadata of dataset 'x'");
  }
}

TEST_F(Hdf5Process, HangIsATimeout) {
  const std::string file = dir_ + "/a.h5";
  ScopedEnv timeout("MEDRUN_HDF5_TIMEOUT", "0.3");
  for (const char *fault : {"hang:read", "hang:list"}) {
    SCOPED_TRACE(fault);
    ScopedEnv env("MEDRUN_HDF5_TEST_FAULT", fault);
    const auto t0 = std::chrono::steady_clock::now();
    if (fault[5] == 'r') {
      auto r = openVolume(file + "/x");
      std::vector<float> got(2 * 2 * 3);
      EXPECT_ERROR(r->read({0, 0, 0}, {2, 2, 3}, got.data()),
                   "libhdf5 did not answer within 0.3 s while reading dataset 'x' box",
                   "MEDRUN_HDF5_TIMEOUT");
    } else {
      EXPECT_ERROR(openVolume(file), "did not answer within 0.3 s while listing datasets");
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  }
  ScopedEnv bad("MEDRUN_HDF5_TIMEOUT", "soon");
  EXPECT_ERROR(openVolume(file + "/x"), "MEDRUN_HDF5_TIMEOUT", "'soon'");
}

TEST_F(Hdf5Process, AnswersOfTheWrongSizeAreRefused) {
  const std::string file = dir_ + "/a.h5";
  std::vector<float> got(2 * 2 * 3, -1);
  {
    // One chunk of 2x2x3 uint16 is 24 bytes.
    ScopedEnv env("MEDRUN_HDF5_TEST_FAULT", "short:read");
    auto r = openVolume(file + "/x");
    EXPECT_ERROR(r->read({0, 0, 0}, {2, 2, 3}, got.data()), file.c_str(),
                 "answered wrongly (it answered 23 bytes, expected 24)",
                 "while reading dataset 'x' box [0:2, 0:2, 0:3]");
  }
  {
    ScopedEnv env("MEDRUN_HDF5_TEST_FAULT", "long:read");
    auto r = openVolume(file + "/x");
    EXPECT_ERROR(r->read({0, 0, 0}, {2, 2, 3}, got.data()), "it answered 25 bytes, expected 24");
  }
  {
    ScopedEnv env("MEDRUN_HDF5_TEST_FAULT", "short:dataset");
    EXPECT_ERROR(openVolume(file + "/x"), "bytes of metadata, expected",
                 "while reading the metadata of dataset 'x'");
  }
  {
    ScopedEnv env("MEDRUN_HDF5_TEST_FAULT", "long:open");
    EXPECT_ERROR(openVolume(file + "/x"), "it answered 1 bytes, expected at most 0",
                 "while opening the file");
  }
  for (float g : got)
    EXPECT_EQ(g, -1);
  ScopedEnv bad("MEDRUN_HDF5_TEST_FAULT", "segv");
  EXPECT_ERROR(openVolume(file + "/x"), "MEDRUN_HDF5_TEST_FAULT", "ACTION:REQUEST");
}

TEST_F(Hdf5Process, TheChildEndsWithItsParent) {
  if (!before_)
    GTEST_SKIP() << "no /proc/thread-self/children";
  // A process opens a reader, on its main thread or on a thread that then ends (as
  // parallelFor's workers do: the child must outlive that thread), sends it a read the
  // child hangs on (an idle child ends at EOF anyway), and dies; the child must end too:
  // at once by PR_SET_PDEATHSIG (main thread), else within a second by its watchdog.
  for (bool worker : {false, true}) {
    SCOPED_TRACE(worker ? "opened by a thread that ended" : "opened by the main thread");
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t helper = ::fork();
    ASSERT_GE(helper, 0);
    if (helper == 0) {
      ::close(fds[0]);
      ::setenv("MEDRUN_HDF5_TEST_FAULT", "hang:read", 1);
      ::setenv("MEDRUN_HDF5_TIMEOUT", "60", 1);
      int answer[2] = {-1, 0}; // the reader's child; whether it still ran the read
      std::unique_ptr<VolumeReader> r;
      std::atomic<bool> returned{false};
      auto open = [&] {
        r = openVolume(dir_ + "/a.h5/x");
        std::ifstream in("/proc/thread-self/children");
        in >> answer[0];
      };
      try {
        if (worker)
          std::thread(open).join();
        else
          open();
        std::thread([&] {
          std::vector<float> got(values_.size());
          try {
            r->read({0, 0, 0}, {4, 5, 6}, got.data());
          } catch (...) {
          }
          returned = true;
        }).detach();
        ::usleep(300000);
        answer[1] = !returned;
      } catch (...) {
      }
      if (::write(fds[1], answer, sizeof answer) != sizeof answer)
        ::_exit(2);
      ::_exit(0); // the reader still open, its child busy
    }
    ::close(fds[1]);
    int answer[2] = {-1, 0};
    EXPECT_EQ(::read(fds[0], answer, sizeof answer), ssize_t(sizeof answer));
    ::close(fds[0]);
    int status = 0;
    EXPECT_EQ(::waitpid(helper, &status, 0), helper);
    ASSERT_GT(answer[0], 0);
    EXPECT_EQ(answer[1], 1) << "the read did not reach a live child";
    const auto t0 = std::chrono::steady_clock::now();
    bool ended = false;
    for (int i = 0; i < 60 && !ended; ++i) {
      ended = !running(answer[0]);
      if (!ended)
        ::usleep(50000);
    }
    EXPECT_TRUE(ended) << "the reader's child " << answer[0] << " outlived its parent";
    if (!ended)
      ::kill(answer[0], SIGKILL);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(worker ? 2000 : 500));
  }
}

TEST_F(Hdf5Process, ReadersAndAWriterOfOneFile) {
  // A reader open while this process writes another dataset of its file (infer --image
  // x.h5/raw -o x.h5/pred): the writer can open the file, the reader still reads.
  const std::string file = dir_ + "/a.h5";
  auto before = openVolume(file + "/x");
  VolumeData v;
  v.shape = {4, 5, 6};
  v.type = VoxelType::U16;
  v.data = values_.data();
  auto w = createVolume(file + "/y", v, {4, 5, 6});
  // And a reader opened while the writer holds the file open.
  auto during = openVolume(file + "/x");
  w->write({0, 0, 0}, v.shape, v.data);
  readsBack(*before);
  readsBack(*during);
  w->finish();
  w.reset();
  readsBack(*openVolume(file + "/y"));
  readsBack(*before);
}

} // namespace
} // namespace medrun
