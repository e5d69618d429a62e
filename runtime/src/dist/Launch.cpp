//===- Launch.cpp - `--gpus N`: N local ranks of this executable, started and reaped ----===//
//
// The launcher sets what torchrun would set, so a rank cannot tell the two apart. It waits
// with every signal it cares about blocked and taken by sigtimedwait (no handlers, no
// races with waitpid). The ranks share one process group, so stopping the job reaches what
// they started too; each dies with the launcher (PR_SET_PDEATHSIG), so even a launcher
// killed with SIGKILL leaves no orphans.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Distributed.h"

#include "medrun/Error.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>

namespace medrun {
namespace {

/// A port p with p and p + 1 free: MASTER_PORT and the rendezvous's port above it.
int freePortPair() {
  auto bindable = [](int port, int *bound) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
    if (ok && bound) {
      socklen_t len = sizeof a;
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
      *bound = ntohs(a.sin_port);
    }
    if (fd >= 0)
      ::close(fd);
    return ok;
  };
  for (int attempt = 0; attempt < 64; ++attempt) {
    int p = 0;
    if (bindable(0, &p) && p < 65535 && bindable(p + 1, nullptr))
      return p;
  }
  throw Error("--gpus: found no two adjacent free TCP ports for the rendezvous");
}

std::string jobId() {
  std::random_device rd;
  std::mt19937_64 g((uint64_t(rd()) << 32) ^ rd() ^ uint64_t(getpid()) ^ uint64_t(std::time(nullptr)));
  char buf[40];
  std::snprintf(buf, sizeof buf, "medrun-%d-%016llx", static_cast<int>(getpid()),
                static_cast<unsigned long long>(g()));
  return buf;
}

std::string statusText(int status) {
  if (WIFEXITED(status))
    return str("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return str("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  return "stopped";
}

int exitCode(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

} // namespace

int launchLocalRanks(int n, const std::vector<std::string> &args, double graceSeconds) {
  if (n < 1 || n > 256)
    throw Error(str("--gpus: expected 1 to 256 ranks, got ", n));
  DistEnv outer = distEnvFromEnvironment();
  if (outer.worldSize > 1)
    throw Error(str("--gpus starts the ranks itself, but this process already is ", outer.describe(),
                    ": leave out --gpus under a launcher"));
  char exe[4096];
  ssize_t len = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0)
    throw Error("--gpus: cannot find this executable (/proc/self/exe)");
  exe[len] = '\0';
  const int port = freePortPair();
  const std::string job = jobId();

  // Ranks are reaped here, so SIGCHLD must not be ignored. (SIGINT, SIGHUP ignored by
  // whoever started the launcher, as nohup and a shell's `&` do, stay ignored: not forwarded.)
  ::signal(SIGCHLD, SIG_DFL);
  sigset_t handled, previous;
  sigemptyset(&handled);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1})
    sigaddset(&handled, s);
  sigprocmask(SIG_BLOCK, &handled, &previous);
  const pid_t launcher = getpid();

  std::vector<pid_t> pids(n, 0);
  std::vector<int> status(n, 0);
  pid_t group = 0;
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      if (group)
        ::kill(-group, SIGKILL);
      throw Error(str("--gpus: fork failed: ", std::strerror(errno)));
    }
    if (pid == 0) {
      ::setpgid(0, group);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher) // the launcher died before prctl
        ::_exit(1);
      sigprocmask(SIG_SETMASK, &previous, nullptr);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("MEDRUN_JOB_ID", job.c_str(), 1);
      std::vector<char *> argv;
      argv.push_back(exe);
      for (const std::string &a : args)
        argv.push_back(const_cast<char *>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(exe, argv.data());
      std::fprintf(stderr, "medrun: rank %d: cannot run %s: %s\n", r, exe, std::strerror(errno));
      ::_exit(127);
    }
    if (!group)
      group = pid;
    ::setpgid(pid, group); // also here: the group exists before the launcher signals it
    pids[r] = pid;
  }
  std::string started = str("medrun: started ", n, " rank", n == 1 ? "" : "s", " (pids");
  for (pid_t p : pids)
    started += str(" ", p);
  started += str("; job ", job, ", rendezvous 127.0.0.1:", port + 1, ")\n");
  std::fputs(started.c_str(), stderr); // one write: the ranks share the terminal

  using Clock = std::chrono::steady_clock;
  int failed = -1, forwarded = 0, running = n;
  bool stopping = false;
  Clock::time_point killAt{};
  while (running) {
    // Reap every rank that ended. Where several failed at once, the cause is more likely
    // one killed by a signal than those that exited when they lost it as a peer.
    int st = 0, cause = -1;
    pid_t pid;
    while (running && (pid = ::waitpid(-1, &st, WNOHANG)) > 0) {
      for (int r = 0; r < n; ++r) {
        if (pids[r] != pid)
          continue;
        status[r] = st;
        --running;
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (!ok && (cause < 0 || (WIFSIGNALED(st) && !WIFSIGNALED(status[cause]))))
          cause = r;
      }
    }
    if (cause >= 0 && failed < 0 && !forwarded) {
      failed = cause;
      std::fputs(str("medrun: rank ", cause, " (pid ", pids[cause], ") ", statusText(status[cause]),
                     running ? "; stopping the other ranks\n" : "\n").c_str(), stderr);
    }
    // After a forwarded signal the ranks end on their own (a training rank saves first).
    if (cause >= 0 && !stopping && running && !forwarded) {
      stopping = true;
      ::kill(-group, SIGTERM);
      ::kill(-group, SIGCONT); // a stopped rank (one that hangs) wakes to end
      killAt = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(graceSeconds));
    }
    if (!running)
      break;
    if (stopping && Clock::now() >= killAt)
      ::kill(-group, SIGKILL);
    timespec wait{0, 200 * 1000 * 1000};
    siginfo_t info;
    int sig = ::sigtimedwait(&handled, &info, &wait);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGUSR1) {
      forwarded = sig;
      ::kill(-group, sig);
    }
  }
  ::kill(-group, SIGKILL); // what the ranks started and left behind
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  if (failed >= 0)
    return exitCode(status[failed]);
  for (int r = 0; r < n; ++r)
    if (exitCode(status[r]))
      return exitCode(status[r]); // after a forwarded signal: the ranks' own status
  return 0;
}

} // namespace medrun
