//===- Hdf5ProcessTest.cpp - the HDF5 reader's processes and their failures -----------===//
//
// The HDF5 reader runs libhdf5 in a child process per reader, forked by the zygote
// (runtime/src/io/Hdf5.cpp). These tests make the child fail on each kind of request
// (MEDRUN_HDF5_TEST_FAULT: a crash, an abort, an exit, a hang, an answer one byte short or
// long) and check that the parent says so, naming the file and the request, instead of
// returning what it has (the negative control: the same read without a fault returns the
// volume's values), that every later request of that reader fails too, and that no child
// outlives its reader. The zygote's cases: killed, it is started again at the next open
// and its children end with it; failing when asked for a child, the open is an Error
// naming it; every reader gets its own child's socket; the zygote and the children keep
// no descriptor of the parent's but stderr.
//
//===----------------------------------------------------------------------------------===//
#include "ExpectError.h"

#include "medrun/Volume.h"

#include "gtest/gtest.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <sys/socket.h>
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

/// The live (or unreaped) children of process `pid` (of every thread of it), where /proc
/// says ("self": this process).
std::optional<std::set<int>> children(const std::string &pid = "self") {
  std::error_code ec;
  fs::directory_iterator tasks("/proc/" + pid + "/task", ec);
  if (ec || !fs::exists("/proc/thread-self/children"))
    return std::nullopt;
  std::set<int> pids;
  for (const auto &task : tasks) {
    std::ifstream in(task.path() / "children");
    for (int child; in >> child;)
      pids.insert(child);
  }
  return pids;
}
std::set<int> children(int pid) { return children(std::to_string(pid)).value_or(std::set<int>()); }

std::string comm(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

/// This process's running zygote (its child named so), or -1.
int zygotePid() {
  for (int pid : children().value_or(std::set<int>()))
    if (comm(pid) == "hdf5-zygote" && running(pid))
      return pid;
  return -1;
}

/// The children of this process's zygote (one per open reader).
std::set<int> readerChildren() {
  const int zygote = zygotePid();
  return zygote > 0 ? children(zygote) : std::set<int>();
}

/// Waits up to `ms` for process `pid` to end (or become a zombie).
bool endsWithin(int pid, int ms) {
  for (int waited = 0; running(pid); waited += 10) {
    if (waited >= ms)
      return false;
    ::usleep(10000);
  }
  return true;
}

/// Waits up to `ms` for this process's zygote to have no child left, running or not yet
/// reaped (a closed reader's child is killed at once and reaped by the zygote as it ends:
/// the reader does not wait for its exit). True if none is left.
bool readerChildrenGoneWithin(int ms) {
  for (int waited = 0; !readerChildren().empty(); waited += 5) {
    if (waited >= ms)
      return false;
    ::usleep(5000);
  }
  return true;
}

/// Process `pid`'s descriptors and what they are ("/dev/null", "socket:[123]", ...).
std::map<int, std::string> descriptors(const std::string &pid) {
  std::map<int, std::string> fds;
  for (const auto &e : fs::directory_iterator("/proc/" + pid + "/fd")) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(e.path(), ec);
    if (!ec)
      fds[std::stoi(e.path().filename().string())] = target.string();
  }
  return fds;
}

/// What is wrong with the descriptors of a process of the reader's, which keeps /dev/null
/// as 0 and 1, stderr as 2 (`stderr`: ours) and one socket as 3, and nothing else but the
/// file `reads` it opened itself ("": all right).
std::string strayDescriptors(const std::map<int, std::string> &fds, const std::string &stderr_,
                             const std::string &reads = "") {
  std::string wrong;
  for (const auto &[fd, what] : fds) {
    const bool ok = fd <= 1   ? what == "/dev/null"
                    : fd == 2 ? what == stderr_
                    : fd == 3 ? what.rfind("socket:", 0) == 0
                              : !reads.empty() && what == reads;
    if (!ok)
      wrong += " " + std::to_string(fd) + " -> " + what;
  }
  if (fds.size() < 4)
    wrong += " (" + std::to_string(fds.size()) + " descriptors, expected 4)";
  return wrong;
}

/// Whether descriptor `fd` of this process is closed on exec (/proc/self/fdinfo).
bool closeOnExec(int fd) {
  std::ifstream in("/proc/self/fdinfo/" + std::to_string(fd));
  std::string key;
  for (std::string value; in >> key >> value;)
    if (key == "flags:")
      return std::stoul(value, nullptr, 8) & O_CLOEXEC;
  return false;
}

/// This process's socket descriptors.
std::set<int> sockets() {
  std::set<int> fds;
  for (const auto &[fd, what] : descriptors("self"))
    if (what.rfind("socket:", 0) == 0)
      fds.insert(fd);
  return fds;
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
    // No child outlives its reader (killed at once, and reaped by the zygote as it ends: not
    // even a zombie after a second), and no process of ours is left but the zygote.
    if (before_) {
      readerChildrenGoneWithin(1000);
      std::optional<std::set<int>> after = children();
      ASSERT_TRUE(after);
      const int zygote = zygotePid();
      for (int pid : *after)
        EXPECT_TRUE(before_->count(pid) || pid == zygote)
            << "process " << pid << " (" << comm(pid) << ") left behind";
      if (zygote > 0) {
        EXPECT_EQ(children(zygote).size(), 0u) << "a child of a reader left behind";
      }
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
    const int zygote = zygotePid();
    ASSERT_GT(zygote, 0) << "no zygote among this process's children";
    const std::set<int> readers = children(zygote);
    EXPECT_EQ(readers.size(), 1u) << "one child per open reader";
    for (int pid : readers)
      EXPECT_EQ(comm(pid), "hdf5-reader");
    auto second = openVolume(dir_ + "/a.h5/x");
    EXPECT_EQ(children(zygote).size(), 2u) << "one child per open reader";
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
  // parallelFor's workers do: the zygote it forks must outlive that thread), sends it a read
  // the child hangs on (an idle child ends at EOF anyway), and dies; the zygote and the
  // child must end too: the zygote at once (PR_SET_PDEATHSIG where the main thread forked
  // it, else EOF on its socket, or within a second), the child with it (PR_SET_PDEATHSIG).
  // The process is a fork of this one: it inherits this process's zygote (started here
  // first) and must start its own.
  readsBack(*openVolume(dir_ + "/a.h5/x"));
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
      // The zygote, the reader's child, whether the read still ran.
      int answer[3] = {-1, -1, 0};
      std::unique_ptr<VolumeReader> r;
      std::atomic<bool> returned{false};
      auto open = [&] { r = openVolume(dir_ + "/a.h5/x"); };
      try {
        if (worker)
          std::thread(open).join();
        else
          open();
        answer[0] = zygotePid();
        const std::set<int> readers = readerChildren();
        if (readers.size() == 1)
          answer[1] = *readers.begin();
        std::thread([&] {
          std::vector<float> got(values_.size());
          try {
            r->read({0, 0, 0}, {4, 5, 6}, got.data());
          } catch (...) {
          }
          returned = true;
        }).detach();
        ::usleep(300000);
        answer[2] = !returned;
      } catch (...) {
      }
      if (::write(fds[1], answer, sizeof answer) != sizeof answer)
        ::_exit(2);
      ::_exit(0); // the reader still open, its child busy
    }
    ::close(fds[1]);
    int answer[3] = {-1, -1, 0};
    EXPECT_EQ(::read(fds[0], answer, sizeof answer), ssize_t(sizeof answer));
    ::close(fds[0]);
    int status = 0;
    EXPECT_EQ(::waitpid(helper, &status, 0), helper);
    ASSERT_GT(answer[0], 0) << "the process has no zygote of its own";
    ASSERT_GT(answer[1], 0) << "the zygote has not one child";
    EXPECT_NE(answer[0], zygotePid()) << "the process used this one's zygote";
    EXPECT_EQ(answer[2], 1) << "the read did not reach a live child";
    const auto t0 = std::chrono::steady_clock::now();
    for (int pid : {answer[0], answer[1]}) {
      const bool ended = endsWithin(pid, 3000);
      EXPECT_TRUE(ended) << (pid == answer[0] ? "the zygote " : "the reader's child ") << pid
                         << " outlived its parent";
      if (!ended)
        ::kill(pid, SIGKILL);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(worker ? 2000 : 500));
  }
}

TEST_F(Hdf5Process, TheZygoteKilledIsStartedAgain) {
  if (!before_)
    GTEST_SKIP() << "no /proc/thread-self/children";
  const std::string file = dir_ + "/a.h5";
  auto r = openVolume(file + "/x");
  const int zygote = zygotePid();
  ASSERT_GT(zygote, 0);
  const std::set<int> readers = children(zygote);
  ASSERT_EQ(readers.size(), 1u);
  const int child = *readers.begin();
  readsBack(*r); // the control: before the kill, the reader reads
  ASSERT_TRUE(running(child));
  ASSERT_EQ(::kill(zygote, SIGKILL), 0);
  // Its child ends with it (PR_SET_PDEATHSIG; without, it would wait on its socket, whose
  // other end this process holds).
  EXPECT_TRUE(endsWithin(child, 500)) << "the reader's child outlived the zygote";
  // That reader fails, naming the zygote (not the file's doing), and so does every later read.
  r->setCache(std::make_shared<ChunkCache>(1));
  std::vector<float> got(2 * 2 * 3, -1);
  EXPECT_ERROR(r->read({0, 0, 0}, {2, 2, 3}, got.data()), file.c_str(),
               "libhdf5's process ended while reading dataset 'x'",
               "the HDF5 zygote process that started it (pid", "was killed by signal 9 (Killed)");
  EXPECT_ERROR(r->read({2, 2, 3}, {2, 2, 3}, got.data()), "HDF5 zygote process");
  for (float g : got)
    EXPECT_EQ(g, -1);
  // The next open starts a new zygote, and the dead one is reaped (not even a zombie).
  auto again = openVolume(file + "/x");
  readsBack(*again);
  const int restarted = zygotePid();
  EXPECT_GT(restarted, 0);
  EXPECT_NE(restarted, zygote);
  EXPECT_FALSE(children()->count(zygote)) << "the killed zygote was not reaped";
  EXPECT_EQ(children(restarted).size(), 1u);
}

TEST_F(Hdf5Process, TheZygoteFailingIsAnError) {
  const std::string file = dir_ + "/a.h5";
  readsBack(*openVolume(file + "/x")); // a zygote running before
  {
    // It crashes when asked for a child, and so does the one started again.
    ScopedEnv env("MEDRUN_HDF5_TEST_FAULT", "segv:start");
    EXPECT_ERROR(openVolume(file + "/x"), file.c_str(),
                 "cannot start the process that reads it with libhdf5: the HDF5 zygote process",
                 "crashed (signal 11", "while starting it",
                 "(started again: the previous one (pid");
  }
  {
    ScopedEnv env("MEDRUN_HDF5_TEST_FAULT", "exit:start");
    EXPECT_ERROR(openVolume(file + "/x"), "the HDF5 zygote process (pid", "exited with status 3");
  }
  {
    ScopedEnv timeout("MEDRUN_HDF5_TIMEOUT", "0.3");
    ScopedEnv env("MEDRUN_HDF5_TEST_FAULT", "hang:start");
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_ERROR(openVolume(file + "/x"), "the HDF5 zygote process (pid",
                 "did not answer within 0.3 s", "MEDRUN_HDF5_TIMEOUT");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  }
  for (const char *fault : {"short:start", "long:start"}) {
    ScopedEnv env("MEDRUN_HDF5_TEST_FAULT", fault);
    EXPECT_ERROR(openVolume(file + "/x"), "the HDF5 zygote process (pid",
                 fault[0] == 's' ? "answered wrongly (15 bytes, expected 16"
                                 : "answered wrongly (17 bytes, expected 16");
  }
  // The control: without a fault, the next open starts it again and reads.
  readsBack(*openVolume(file + "/x"));
}

TEST_F(Hdf5Process, EachReaderGetsItsOwnChildsSocket) {
  // Readers of two files with other values, opened and read at once on four threads: a
  // socket passed to the wrong reader reads the other file's values (the control).
  std::vector<uint16_t> other(values_.size());
  std::iota(other.begin(), other.end(), 1000);
  VolumeData v;
  v.shape = {4, 5, 6};
  v.type = VoxelType::U16;
  v.data = other.data();
  writeVolume(dir_ + "/b.h5/x", v);
  readsBack(*openVolume(dir_ + "/a.h5/x")); // the zygote started before counting sockets
  if (before_)
    ASSERT_TRUE(readerChildrenGoneWithin(1000)) << "the closed reader's child was not reaped";
  const std::set<int> before = sockets();
  std::vector<std::unique_ptr<VolumeReader>> readers(8);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = t; i < 8; i += 4) {
        const bool b = i % 2;
        try {
          readers[i] = openVolume(dir_ + (b ? "/b.h5/x" : "/a.h5/x"));
          std::vector<float> got(values_.size());
          readers[i]->read({0, 0, 0}, {4, 5, 6}, got.data());
          for (size_t k = 0; k < got.size(); ++k)
            if (got[k] != (b ? other[k] : values_[k]))
              ++wrong;
        } catch (const Error &) {
          ++wrong;
        }
      }
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(readerChildren().size(), 8u);
  // One socket more per open reader, each closed on exec; none left once they are closed.
  std::set<int> passed;
  for (int fd : sockets())
    if (!before.count(fd))
      passed.insert(fd);
  EXPECT_EQ(passed.size(), 8u);
  for (int fd : passed)
    EXPECT_TRUE(closeOnExec(fd)) << "descriptor " << fd << " is not closed on exec";
  int plain[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, plain), 0);
  EXPECT_FALSE(closeOnExec(plain[0])) << "the check sees no difference"; // its control
  ::close(plain[0]);
  ::close(plain[1]);
  readers.clear();
  EXPECT_EQ(sockets(), before) << "a passed socket left open";
}

TEST_F(Hdf5Process, NoDescriptorOfTheParentInItsProcesses) {
  if (!before_)
    GTEST_SKIP() << "no /proc/thread-self/children";
  // Descriptors that are not closed on exec (a pipe, a file), open when the zygote is
  // forked (the one running ended first) and when it forks the child: neither keeps them
  // (the child holds the file it reads, which it opened itself).
  int pipe[2];
  ASSERT_EQ(::pipe(pipe), 0);
  const std::string other = dir_ + "/other";
  std::ofstream(other) << "a file of the parent's";
  const int file = ::open(other.c_str(), O_RDONLY);
  ASSERT_GE(file, 0);
  if (const int running = zygotePid(); running > 0) {
    ::kill(running, SIGKILL);
    ASSERT_TRUE(endsWithin(running, 1000));
  }
  auto r = openVolume(dir_ + "/a.h5/x");
  readsBack(*r);
  const std::map<int, std::string> self = descriptors("self");
  const std::string stderr_ = self.count(2) ? self.at(2) : "";
  const int zygote = zygotePid();
  ASSERT_GT(zygote, 0);
  const std::set<int> readers = children(zygote);
  ASSERT_EQ(readers.size(), 1u);
  EXPECT_EQ(strayDescriptors(descriptors(std::to_string(zygote)), stderr_), "") << "the zygote";
  EXPECT_EQ(strayDescriptors(descriptors(std::to_string(*readers.begin())), stderr_,
                             fs::canonical(dir_ + "/a.h5").string()),
            "")
      << "the reader's child";
  // The control: the same check on this process sees the pipe and the file.
  const std::string here = strayDescriptors(self, stderr_);
  EXPECT_NE(here.find(" " + std::to_string(pipe[0]) + " -> pipe:"), std::string::npos) << here;
  EXPECT_NE(here.find(" " + std::to_string(file) + " -> " + fs::canonical(other).string()),
            std::string::npos)
      << here;
  ::close(pipe[0]);
  ::close(pipe[1]);
  ::close(file);
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
