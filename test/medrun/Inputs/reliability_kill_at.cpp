// An LD_PRELOAD library that SIGKILLs its process at a chosen file-system call, so that a
// test can stop `medrun train` at every point of a sequence of renames and deletions.
//
// KILL_FROM=S   counting starts at the first rename/unlink/rmdir/remove whose path (or, for
//               a rename, either path) contains S; every such call from then on is a point
// KILL_AT=K     the process kills itself just before point K (1-based) would run
// KILL_TRACE=1  each point is printed on stderr as it passes ("point K: call path")
//
// Paths relative to a directory descriptor (unlinkat, renameat) are resolved through
// /proc/self/fd, as libstdc++'s remove_all deletes a directory's entries by descriptor.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

std::atomic<bool> counting{false};
std::atomic<int> points{0};

std::string resolve(int dirfd, const char *path) {
  if (!path)
    return "";
  if (path[0] == '/' || dirfd == AT_FDCWD)
    return path;
  char link[64], dir[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
  ssize_t n = ::readlink(link, dir, sizeof dir - 1);
  if (n <= 0)
    return path;
  return std::string(dir, static_cast<size_t>(n)) + "/" + path;
}

void point(const char *call, const std::string &a, const std::string &b = "") {
  const char *from = std::getenv("KILL_FROM");
  if (!from || !*from)
    return;
  if (!counting.load() && a.find(from) == std::string::npos && b.find(from) == std::string::npos)
    return;
  counting = true;
  const int k = ++points;
  const char *at = std::getenv("KILL_AT");
  if (at && std::atoi(at) == k) {
    std::fprintf(stderr, "kill_at: SIGKILL before point %d: %s %s\n", k, call, a.c_str());
    ::raise(SIGKILL);
  }
  if (std::getenv("KILL_TRACE"))
    std::fprintf(stderr, "point %d: %s %s%s%s\n", k, call, a.c_str(), b.empty() ? "" : " -> ",
                 b.c_str());
}

template <typename F> F real(const char *name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

} // namespace

extern "C" {

int rename(const char *from, const char *to) {
  point("rename", resolve(AT_FDCWD, from), resolve(AT_FDCWD, to));
  return real<int (*)(const char *, const char *)>("rename")(from, to);
}

int renameat(int fromfd, const char *from, int tofd, const char *to) {
  point("renameat", resolve(fromfd, from), resolve(tofd, to));
  return real<int (*)(int, const char *, int, const char *)>("renameat")(fromfd, from, tofd, to);
}

int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned flags) {
  point("renameat2", resolve(fromfd, from), resolve(tofd, to));
  return real<int (*)(int, const char *, int, const char *, unsigned)>("renameat2")(
      fromfd, from, tofd, to, flags);
}

int unlink(const char *path) {
  point("unlink", resolve(AT_FDCWD, path));
  return real<int (*)(const char *)>("unlink")(path);
}

int unlinkat(int dirfd, const char *path, int flags) {
  point("unlinkat", resolve(dirfd, path));
  return real<int (*)(int, const char *, int)>("unlinkat")(dirfd, path, flags);
}

int rmdir(const char *path) {
  point("rmdir", resolve(AT_FDCWD, path));
  return real<int (*)(const char *)>("rmdir")(path);
}

int remove(const char *path) {
  point("remove", resolve(AT_FDCWD, path));
  return real<int (*)(const char *)>("remove")(path);
}

} // extern "C"
