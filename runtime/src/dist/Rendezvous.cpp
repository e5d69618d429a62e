//===- Rendezvous.cpp - rank 0 hands NCCL's unique id to the others over TCP ---------===//
//
// The wire format is tiny and fixed. A rank > 0 sends its hello:
//   "MEDRDZV1" | rank u32 | world size u32 | nonce length u32 | nonce bytes
// (integers little-endian) and rank 0 answers, once every rank has said hello:
//   0 | the 128-byte id        or        1 | length u32 | why it was turned away
// Rank 0 listens on every address (IPv6 with IPv4 mapped, else IPv4); the others resolve
// MASTER_ADDR and retry until rank 0 listens or the timeout passes.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Distributed.h"

#include "medrun/Error.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

namespace medrun {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[8] = {'M', 'E', 'D', 'R', 'D', 'Z', 'V', '1'};
constexpr uint32_t kMaxNonce = 4096;

struct Socket {
  int fd = -1;
  Socket() = default;
  explicit Socket(int f) : fd(f) {}
  Socket(Socket &&o) noexcept : fd(o.fd) { o.fd = -1; }
  Socket &operator=(Socket &&o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Socket() {
    if (fd >= 0)
      ::close(fd);
  }
};

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

/// Waits for `events` on fd until the deadline; false on timeout.
bool waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, msLeft(deadline));
    if (r > 0)
      return true;
    if (r == 0)
      return false;
    if (errno != EINTR)
      return false;
  }
}

/// Sends all bytes; false when the peer is gone or the deadline passed.
bool sendAll(int fd, const void *data, size_t n, Clock::time_point deadline) {
  const char *p = static_cast<const char *>(data);
  while (n) {
    if (!waitFor(fd, POLLOUT, deadline))
      return false;
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

enum class Read { Ok, Closed, TimedOut };

Read recvAll(int fd, void *data, size_t n, Clock::time_point deadline) {
  char *p = static_cast<char *>(data);
  while (n) {
    if (!waitFor(fd, POLLIN, deadline))
      return Read::TimedOut;
    ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (r <= 0)
      return Read::Closed;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return Read::Ok;
}

void put32(std::string &out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out += static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t get32(const unsigned char *b) {
  return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}

std::string quoted(const std::string &nonce) { return nonce.empty() ? "(none)" : "'" + nonce + "'"; }

void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

Socket listenOn(int port) {
  auto tryFamily = [&](int family) -> Socket {
    Socket s(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (s.fd < 0)
      return s;
    int one = 1, zero = 0;
    ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int r;
    if (family == AF_INET6) {
      ::setsockopt(s.fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_any;
      a.sin6_port = htons(static_cast<uint16_t>(port));
      r = ::bind(s.fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      a.sin_port = htons(static_cast<uint16_t>(port));
      r = ::bind(s.fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
    }
    if (r != 0 || ::listen(s.fd, 128) != 0)
      return Socket();
    return s;
  };
  Socket s = tryFamily(AF_INET6);
  if (s.fd < 0) {
    s = tryFamily(AF_INET);
    if (s.fd < 0)
      throw Error(str("rank 0 cannot listen on port ", port, " for the rendezvous: ",
                      std::strerror(errno),
                      errno == EADDRINUSE ? " (another job or program uses it: set MASTER_PORT "
                                            "or MEDRUN_DIST_PORT to a free port)"
                                          : ""));
  }
  setNonBlocking(s.fd);
  return s;
}

/// Connects to host:port once, within the deadline; fills `why` on failure.
Socket connectOnce(const std::string &host, int port, Clock::time_point deadline, std::string &why) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string service = std::to_string(port);
  if (int r = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); r != 0) {
    why = str("cannot resolve '", host, "': ", ::gai_strerror(r));
    return Socket();
  }
  Socket result;
  for (addrinfo *a = res; a && result.fd < 0; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (s.fd < 0)
      continue;
    setNonBlocking(s.fd);
    int r = ::connect(s.fd, a->ai_addr, a->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      // At most a second per attempt: a host that drops packets is tried again.
      auto until = std::min(deadline, Clock::now() + std::chrono::seconds(1));
      if (!waitFor(s.fd, POLLOUT, until)) {
        why = "no answer";
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      r = err ? -1 : 0;
      errno = err;
    }
    if (r == 0)
      result = std::move(s);
    else
      why = std::strerror(errno);
  }
  ::freeaddrinfo(res);
  return result;
}

UniqueId serve(const DistEnv &env, const std::function<UniqueId()> &makeId, PeerWatch *watch) {
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(env.timeout));
  Socket listener = listenOn(env.port);
  UniqueId id = makeId();
  std::map<int, Socket> ranks; // rank -> its connection
  std::vector<std::string> turnedAway;
  auto reject = [&](Socket &s, const std::string &why) {
    std::string msg(1, '\1');
    put32(msg, static_cast<uint32_t>(why.size()));
    msg += why;
    sendAll(s.fd, msg.data(), msg.size(), std::min(deadline, Clock::now() + std::chrono::seconds(1)));
  };
  // A fatal inconsistency: the ranks connected so far hear it too, then rank 0 throws.
  auto fail = [&](Socket &s, const std::string &why) -> Error {
    reject(s, why);
    for (auto &[r, c] : ranks)
      reject(c, why);
    return Error(str("rendezvous at ", env.masterAddr, ":", env.port, ": ", why));
  };
  while (static_cast<int>(ranks.size()) < env.worldSize - 1) {
    if (!waitFor(listener.fd, POLLIN, deadline)) {
      std::string missing;
      int count = 0;
      for (int r = 1; r < env.worldSize; ++r)
        if (!ranks.count(r) && count++ < 16)
          missing += str(missing.empty() ? "" : ", ", r);
      if (count > 16)
        missing += str(" and ", count - 16, " more");
      std::string extra;
      if (!turnedAway.empty())
        extra = str("; turned away ", turnedAway.size(), " connection(s) of another job: ", turnedAway[0]);
      throw Error(str("rendezvous timed out after ", env.timeout, " s: rank", count > 1 ? "s " : " ",
                      missing, " of ", env.worldSize, " did not connect to rank 0 at ",
                      env.masterAddr, ":", env.port, extra));
    }
    Socket s(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (s.fd < 0)
      continue;
    // A rank sends its hello as soon as it connects; a stranger gets a few seconds.
    auto helloBy = std::min(deadline, Clock::now() + std::chrono::seconds(5));
    unsigned char head[20];
    if (recvAll(s.fd, head, sizeof head, helloBy) != Read::Ok ||
        std::memcmp(head, kMagic, sizeof kMagic) != 0)
      continue; // not a medrun rank: ignored
    int rank = static_cast<int>(get32(head + 8)), world = static_cast<int>(get32(head + 12));
    uint32_t nonceBytes = get32(head + 16);
    std::string nonce(std::min(nonceBytes, kMaxNonce), '\0');
    if (nonceBytes > kMaxNonce || recvAll(s.fd, nonce.data(), nonce.size(), helloBy) != Read::Ok)
      continue;
    if (nonce != env.nonce) {
      std::string why = str("job nonce ", quoted(nonce), " of the connecting process (rank ", rank,
                            ") differs from rank 0's ", quoted(env.nonce),
                            ": it belongs to another job");
      reject(s, why);
      turnedAway.push_back(why);
      continue;
    }
    if (world != env.worldSize)
      throw fail(s, str("rank ", rank, " reports world size ", world, ", rank 0 has ", env.worldSize));
    if (rank <= 0 || rank >= env.worldSize)
      throw fail(s, str("a process reports rank ", rank, ", outside 1..", env.worldSize - 1,
                        rank == 0 ? " (two processes have rank 0)" : ""));
    if (ranks.count(rank))
      throw fail(s, str("rank ", rank, " connected twice: two processes have rank ", rank));
    ranks.emplace(rank, std::move(s));
  }
  std::string msg(1, '\0');
  msg.append(id.data(), id.size());
  for (auto &[r, c] : ranks)
    if (!sendAll(c.fd, msg.data(), msg.size(), deadline))
      throw Error(str("rendezvous: rank ", r, " hung up before receiving the id"));
  if (watch) {
    std::map<int, int> fds;
    for (auto &[r, c] : ranks) {
      fds[r] = c.fd;
      c.fd = -1;
    }
    watch->start(env, std::move(fds));
  }
  return id;
}

UniqueId join(const DistEnv &env, PeerWatch *watch) {
  auto start = Clock::now();
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(env.timeout));
  std::string where = str(env.masterAddr, ":", env.port), why = "not tried";
  Socket s;
  for (int attempt = 0; s.fd < 0; ++attempt) {
    s = connectOnce(env.masterAddr, env.port, deadline, why);
    if (s.fd >= 0)
      break;
    if (msLeft(deadline) == 0)
      throw Error(str("rank ", env.rank, " could not reach rank 0's rendezvous at ", where,
                      " within ", env.timeout, " s (", why,
                      "): is rank 0 running, and are MASTER_ADDR and MASTER_PORT the same for all ranks?"));
    // Rank 0 may not listen yet: retry, more slowly as time passes.
    int pause = std::min(50 * (attempt + 1), 500);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(pause, msLeft(deadline))));
  }
  int one = 1;
  ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::string hello(kMagic, sizeof kMagic);
  put32(hello, static_cast<uint32_t>(env.rank));
  put32(hello, static_cast<uint32_t>(env.worldSize));
  put32(hello, static_cast<uint32_t>(env.nonce.size()));
  hello += env.nonce;
  if (!sendAll(s.fd, hello.data(), hello.size(), deadline))
    throw Error(str("rank ", env.rank, ": rank 0's rendezvous at ", where, " hung up"));
  // Rank 0 answers or gives up within its own timeout, which began before this connection:
  // wait that long (and a little more) from now, so its verdict is the one reported.
  deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(env.timeout + 1));
  unsigned char status = 0;
  Read r = recvAll(s.fd, &status, 1, deadline);
  if (r == Read::TimedOut)
    throw Error(str("rank ", env.rank, ": rendezvous timed out after ", env.timeout,
                    " s waiting for rank 0 at ", where, " to send the id (other ranks missing?)"));
  if (r == Read::Closed)
    throw Error(str("rank ", env.rank, ": rank 0 ended the rendezvous at ", where,
                    " without sending the id (see rank 0's error)"));
  if (status == 1) {
    unsigned char len[4];
    std::string why;
    if (recvAll(s.fd, len, 4, deadline) == Read::Ok) {
      why.resize(std::min(get32(len), 65536u));
      if (recvAll(s.fd, why.data(), why.size(), deadline) != Read::Ok)
        why.clear();
    }
    throw Error(str("rank ", env.rank, ": rank 0 at ", where, " turned this process away: ", why));
  }
  UniqueId id;
  if (status != 0 || recvAll(s.fd, id.data(), id.size(), deadline) != Read::Ok)
    throw Error(str("rank ", env.rank, ": rank 0 at ", where, " sent no valid id"));
  if (watch) {
    watch->start(env, {{0, s.fd}});
    s.fd = -1;
  }
  return id;
}

} // namespace

UniqueId rendezvous(const DistEnv &env, const std::function<UniqueId()> &makeId, PeerWatch *watch) {
  if (env.worldSize == 1)
    return makeId();
  return env.rank == 0 ? serve(env, makeId, watch) : join(env, watch);
}

// After the id, a connection carries 5-byte words: a kind and a number, mostly the rank a
// word is about.
//   'B' that rank finished and left;  'F' it failed and left;  'K' it died (from rank 0);
//   'P' a heartbeat: the sender has entered that many collectives;
//   'H' that rank hangs, silent;  'L' it hangs, alive but behind (both from rank 0).
namespace {
std::string hangText(char kind, int subject) {
  return kind == 'H' ? str("rank ", subject, " hangs (its process went silent: stopped or frozen)")
                     : str("rank ", subject, " hangs (its process is alive but lags: it has not "
                                             "entered the collective the others wait in)");
}
} // namespace

void PeerWatch::start(const DistEnv &env, std::map<int, int> fds) {
  leave(false);
  env_ = env;
  peers_ = std::move(fds);
  lost_.clear();
  verdict_ = false;
  heard_.clear();
  entered_ = 0;
  lastBeat_ = {};
  for (auto &[r, fd] : peers_) {
    setNonBlocking(fd);
    int one = 1; // a word goes out at once, not held back behind the last one's ack
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    heard_[r] = {Clock::now(), 0};
  }
}

void PeerWatch::relay(char kind, int subject, bool toSubject) {
  std::string word(1, kind);
  put32(word, static_cast<uint32_t>(subject));
  auto by = Clock::now() + std::chrono::milliseconds(200);
  for (auto &[r, fd] : peers_)
    if (r != subject || toSubject)
      sendAll(fd, word.data(), word.size(), by);
}

void PeerWatch::beat() {
  // A tenth of the timeout apart (at most a second): a peer is judged silent after half.
  auto every = std::chrono::duration<double>(std::clamp(env_.timeout / 10, 0.05, 1.0));
  auto now = Clock::now();
  if (now - lastBeat_ < every)
    return;
  lastBeat_ = now;
  std::string word(1, 'P');
  put32(word, entered_);
  for (auto &[r, fd] : peers_)
    sendAll(fd, word.data(), word.size(), now + std::chrono::milliseconds(200));
}

std::string PeerWatch::lost(int waitMs) {
  auto deadline = Clock::now() + std::chrono::milliseconds(waitMs);
  if (lost_.empty())
    beat();
  while (lost_.empty() && !peers_.empty()) {
    std::vector<pollfd> fds;
    std::vector<int> ranks;
    for (auto &[r, fd] : peers_) {
      fds.push_back({fd, POLLIN, 0});
      ranks.push_back(r);
    }
    int ready = ::poll(fds.data(), fds.size(), msLeft(deadline));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0)
      break;
    for (size_t i = 0; i < fds.size() && lost_.empty(); ++i) {
      if (!fds[i].revents)
        continue;
      int peer = ranks[i];
      unsigned char word[5];
      char kind = 'K';
      int subject = peer;
      if (recvAll(fds[i].fd, word, sizeof word, Clock::now() + std::chrono::milliseconds(200)) == Read::Ok) {
        kind = static_cast<char>(word[0]);
        subject = static_cast<int>(get32(word + 1));
        heard_[peer].at = Clock::now();
      }
      if (kind == 'P') {
        heard_[peer].entered = static_cast<uint32_t>(subject);
        continue;
      }
      if (kind == 'B' && subject == peer) { // left normally: no longer watched
        ::close(fds[i].fd);
        peers_.erase(peer);
        continue;
      }
      if (kind == 'H' || kind == 'L') { // rank 0's verdict
        lost_ = hangText(kind, subject);
        verdict_ = true;
        continue;
      }
      if (kind != 'F' && kind != 'B')
        kind = 'K';
      lost_ = kind == 'F' ? str("rank ", subject, " failed and left the job (its own error says why)")
                          : str("rank ", subject, "'s process ended without leaving the job (it "
                                "crashed or was killed)");
      if (env_.rank == 0)
        relay(kind == 'F' ? 'F' : 'K', subject);
    }
  }
  return lost_;
}

std::string PeerWatch::hung(int waitMs) {
  lost(0); // the latest heartbeats
  if (!lost_.empty())
    return verdict_ ? lost_ : "";
  const auto now = Clock::now();
  auto silent = [&](int r) {
    return std::chrono::duration<double>(now - heard_[r].at).count() > env_.timeout / 2;
  };
  std::vector<std::pair<int, char>> hangs;
  if (env_.rank == 0) {
    uint32_t most = entered_;
    for (auto &[r, fd] : peers_)
      if (!silent(r))
        most = std::max(most, heard_[r].entered);
    if (entered_ < most)
      hangs.push_back({0, 'L'});
    for (auto &[r, fd] : peers_) {
      if (silent(r))
        hangs.push_back({r, 'H'});
      else if (heard_[r].entered < most)
        hangs.push_back({r, 'L'});
    }
    for (auto [r, kind] : hangs)
      relay(kind, r, /*toSubject=*/true); // a lagging rank that is alive hears it too
  } else if (peers_.count(0)) {
    if (silent(0))
      hangs.push_back({0, 'H'});
    else if (heard_[0].entered < entered_)
      hangs.push_back({0, 'L'});
    else // rank 0 sees every rank: wait for its word
      return lost(waitMs), verdict_ ? lost_ : "";
  }
  std::string text;
  for (auto [r, kind] : hangs)
    text += (text.empty() ? "" : "; ") + hangText(kind, r);
  return text;
}

void PeerWatch::leave(bool failed) {
  if (!peers_.empty())
    relay(failed ? 'F' : 'B', env_.rank);
  for (auto &[r, fd] : peers_) {
    // Heartbeats not read yet would make close() reset the connection, which drops the
    // words still on their way to the peer: read them first.
    char sink[256];
    while (::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
    ::close(fd);
  }
  peers_.clear();
}

} // namespace medrun
