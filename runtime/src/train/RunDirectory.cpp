//===- RunDirectory.cpp - the output directory of a training run ------------------===//
#include "TrainRun.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace medrun::training {
namespace {

namespace fs = std::filesystem;

// What under `root` looks like a checkpoint but is not one: step_<N>.tmp directories (saves
// that did not finish) and step directories without state.json (left by a medrun that
// deleted old steps in place).
std::string unfinishedSaves(const std::string &root) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(root, ec)) {
    std::string name = entry.path().filename().string();
    const bool tmp = name.rfind("step_", 0) == 0 && entry.path().extension() == ".tmp" &&
                     name.find('.') == name.size() - 4; // not .deleting.tmp, .replaced.tmp
    const bool noState =
        !tmp && name.rfind("step_", 0) == 0 && entry.is_directory(ec) &&
        name.find_first_not_of("0123456789", 5) == std::string::npos &&
        !fs::exists(entry.path() / "state.json", ec);
    if (tmp || noState)
      found.push_back(name + (tmp ? ": a save that did not finish" : ": no state.json"));
  }
  std::sort(found.begin(), found.end());
  std::string names;
  for (const std::string &f : found)
    names += (names.empty() ? "" : ", ") + f;
  return names;
}

// Whether `root` holds a step directory with its state.json.
bool hasCheckpoint(const std::string &root) {
  std::error_code ec;
  for (const auto &[step, dir] : listCheckpoints(root))
    if (fs::exists(fs::path(dir) / "state.json", ec))
      return true;
  return false;
}

} // namespace

RunLock::RunLock(const std::string &dir) {
  const std::string path = (fs::path(dir) / "medrun.lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0)
    throw Error(str(path, ": cannot open the run's lock file: ", std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char buf[512] = {};
    ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string holder(buf, n > 0 ? static_cast<size_t>(n) : 0);
    while (!holder.empty() && holder.back() == '\n')
      holder.pop_back();
    ::close(fd_);
    if (err != EWOULDBLOCK)
      throw Error(str(path, ": cannot lock the run directory: ", std::strerror(err)));
    throw Error(str(dir, " is in use by another run (", holder.empty() ? "holder unknown" : holder,
                    "; lock ", path, "): wait for it to end, or train elsewhere with --out DIR"));
  }
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  char when[32] = "?";
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  if (::gmtime_r(&now, &utc))
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::string who = str("medrun train, pid ", ::getpid(), " on ", host, ", started ", when, "\n");
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, who.data(), who.size(), 0) < 0) {
    // The lock holds without the note; a second run then says "holder unknown".
  }
}

RunLock::~RunLock() { ::close(fd_); } // not unlinked: another run may have opened it already

RunDirectory::RunDirectory(const nlohmann::json &config, const TrainOptions &options, bool lead,
                           FILE *console)
    : checkpoints_((fs::path(options.out) / "checkpoints").string()), resume_(options.resume) {
  if (lead) {
    fs::create_directories(options.out);
    lock_.emplace(options.out);
  }
  // --resume-or-start: the run's latest checkpoint if it has one, else a fresh run.
  if (resume_ && resume_->empty() && !hasCheckpoint(checkpoints_)) {
    if (!options.resumeOrStart) {
      std::string unfinished = unfinishedSaves(checkpoints_);
      throw Error(str("--resume: ", checkpoints_, " holds no complete checkpoint",
                      unfinished.empty() ? "" : str(" (only ", unfinished, ")"),
                      "; --resume-or-start starts the run from step 0 when there is none"));
    }
    std::fprintf(console, "no checkpoint in %s: starting at step 0\n", checkpoints_.c_str());
    resume_.reset();
  }
  if (!resume_ && hasCheckpoint(checkpoints_)) {
    if (!options.overwrite)
      throw Error(str(options.out, " already holds checkpoints of a run: --resume continues it, "
                                   "--overwrite starts it over, --out DIR trains elsewhere"));
    if (lead)
      for (const char *old : {"checkpoints", "tensorboard", "metrics.jsonl", "progress.png"})
        fs::remove_all(fs::path(options.out) / old);
  }
  if (lead) {
    std::ofstream cfg(fs::path(options.out) / "config.json");
    cfg << config.dump(2) << "\n";
    if (!cfg)
      throw Error(str(options.out, "/config.json: cannot write the effective recipe"));
  }
}

} // namespace medrun::training
