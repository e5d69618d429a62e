// Data-parallel plumbing (medrun/Distributed.h): ranks from each launcher's variables, the
// rendezvous between processes on localhost (success, a missing rank, another job's
// process, inconsistent ranks), and the communicator over the stand-in NCCL
// (test/cuda/FakeNccl.cpp): sums identical on every rank, a dead peer reported.
#include "medrun/Distributed.h"

#include "ExpectError.h"

#include "gtest/gtest.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>

using namespace medrun;

namespace {

using Vars = std::map<std::string, std::string>;

DistEnv envOf(const Vars &vars) {
  return distEnvFromEnvironment([&](const char *name) -> const char * {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(DistEnv, NoLauncherIsOneRank) {
  DistEnv e = envOf({});
  EXPECT_EQ(e.launcher, "no launcher");
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.worldSize, 1);
  EXPECT_EQ(e.masterAddr, "127.0.0.1");
  EXPECT_EQ(e.port, 29501);
}

TEST(DistEnv, Torchrun) {
  DistEnv e = envOf({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
                     {"MASTER_ADDR", "node07"}, {"MASTER_PORT", "29500"},
                     {"TORCHELASTIC_RUN_ID", "job-a"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.worldSize, 8);
  EXPECT_EQ(e.localRank, 1);
  EXPECT_EQ(e.localWorldSize, 4);
  EXPECT_EQ(e.masterAddr, "node07");
  EXPECT_EQ(e.port, 29501); // torchrun's store holds MASTER_PORT
  EXPECT_EQ(e.nonce, "job-a");
  EXPECT_EQ(e.describe(), "rank 5 of 8 (local rank 1, torchrun)");
}

TEST(DistEnv, PortAndTimeoutOverrides) {
  Vars v = {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"},
            {"MEDRUN_DIST_PORT", "4000"}, {"MASTER_PORT", "29500"}, {"MEDRUN_DIST_TIMEOUT", "2.5"},
            {"MEDRUN_JOB_ID", "mine"}, {"TORCHELASTIC_RUN_ID", "theirs"}};
  DistEnv e = envOf(v);
  EXPECT_EQ(e.port, 4000);
  EXPECT_EQ(e.timeout, 2.5);
  EXPECT_EQ(e.nonce, "mine");
  EXPECT_EQ(e.masterAddr, "127.0.0.1"); // every rank on this host
  v["MEDRUN_DIST_TIMEOUT"] = "soon";
  EXPECT_ERROR(envOf(v), "MEDRUN_DIST_TIMEOUT='soon'");
}

TEST(DistEnv, Slurm) {
  DistEnv e = envOf({{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "2"},
                     {"SLURM_NTASKS_PER_NODE", "4(x2)"}, {"SLURM_NODELIST", "gpu[007-008,010],login1"},
                     {"SLURM_JOB_ID", "1234567"}, {"SLURM_STEP_ID", "0"}});
  EXPECT_EQ(e.launcher, "slurm");
  EXPECT_EQ(e.rank, 6);
  EXPECT_EQ(e.worldSize, 8);
  EXPECT_EQ(e.localRank, 2);
  EXPECT_EQ(e.localWorldSize, 4);
  EXPECT_EQ(e.masterAddr, "gpu007");
  EXPECT_EQ(e.port, 15000 + 4567 + 1); // Lightning's MASTER_PORT convention, + 1
  EXPECT_EQ(e.nonce, "1234567.0");
  // MASTER_ADDR and MASTER_PORT, where given, win.
  e = envOf({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
             {"SLURM_NODELIST", "a[1-2]"}, {"SLURM_JOB_ID", "99"}, {"MASTER_ADDR", "10.0.0.1"},
             {"MASTER_PORT", "20000"}});
  EXPECT_EQ(e.masterAddr, "10.0.0.1");
  EXPECT_EQ(e.port, 20001);
}

TEST(DistEnv, OpenMpi) {
  DistEnv e = envOf({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "3"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                     {"PMIX_NAMESPACE", "prterun-host-1234@1"},
                     // mpirun inside an allocation: the batch step's Slurm variables stay
                     {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "3"}, {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(e.launcher, "mpirun");
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.worldSize, 3);
  EXPECT_EQ(e.masterAddr, "127.0.0.1");
  EXPECT_EQ(e.nonce, "prterun-host-1234@1");
  EXPECT_ERROR(envOf({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
               "MASTER_ADDR is not set", "mpirun -x MASTER_ADDR=HOST");
}

TEST(DistEnv, InconsistentValuesNameTheVariable) {
  Vars ok = {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "h"}};
  EXPECT_NO_THROW(envOf(ok));
  auto with = [&](const char *key, const char *value) {
    Vars v = ok;
    if (value)
      v[key] = value;
    else
      v.erase(key);
    return v;
  };
  EXPECT_ERROR(envOf(with("RANK", "2")), "RANK=2 is not below WORLD_SIZE=2");
  EXPECT_ERROR(envOf(with("RANK", "one")), "RANK='one' is not an integer");
  EXPECT_ERROR(envOf(with("RANK", "-1")), "RANK='-1'");
  EXPECT_ERROR(envOf(with("WORLD_SIZE", "0")), "WORLD_SIZE='0'");
  EXPECT_ERROR(envOf(with("WORLD_SIZE", nullptr)), "WORLD_SIZE is not set, but RANK is");
  EXPECT_ERROR(envOf(with("RANK", nullptr)), "RANK is not set, but WORLD_SIZE is");
  EXPECT_ERROR(envOf(with("LOCAL_RANK", nullptr)), "LOCAL_RANK is not set");
  EXPECT_ERROR(envOf(with("LOCAL_WORLD_SIZE", "1")), "LOCAL_RANK=1 is not below LOCAL_WORLD_SIZE=1");
  EXPECT_ERROR(envOf(with("LOCAL_WORLD_SIZE", "3")), "LOCAL_WORLD_SIZE=3 exceeds WORLD_SIZE=2");
  EXPECT_ERROR(envOf(with("MASTER_PORT", "65535")), "MASTER_PORT='65535'");
  EXPECT_ERROR(envOf(with("MASTER_PORT", "80x")), "MASTER_PORT='80x'");
  EXPECT_ERROR(envOf(with("MASTER_ADDR", nullptr)), "MASTER_ADDR is not set");
  EXPECT_ERROR(envOf({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
                      {"SLURM_NODELIST", "n1"}}),
               "SLURM_PROCID=3 is not below SLURM_NTASKS=2");
  EXPECT_ERROR(envOf({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}}),
               "SLURM_NODELIST is not set");
  EXPECT_ERROR(envOf({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
                      {"SLURM_NODELIST", "n[1-2"}}),
               "SLURM_NODELIST='n[1-2' is not a Slurm host list");
}

TEST(DistEnv, FirstSlurmHost) {
  EXPECT_EQ(firstSlurmHost("node01"), "node01");
  EXPECT_EQ(firstSlurmHost("node[01-04,07]"), "node01");
  EXPECT_EQ(firstSlurmHost("node[07,01-04]"), "node07"); // the list's order, as Slurm's
  EXPECT_EQ(firstSlurmHost("gpu5,node[1-3]"), "gpu5");
  EXPECT_EQ(firstSlurmHost("rack[2-3]-n[08-09],x"), "rack2-n08");
  EXPECT_EQ(firstSlurmHost("a-b.c[10]"), "a-b.c10");
  EXPECT_ERROR(firstSlurmHost(""), "is not a Slurm host list");
  EXPECT_ERROR(firstSlurmHost("n]1"), "']' without '['");
  EXPECT_ERROR(firstSlurmHost("n[x]"), "a bracket without a number");
}

TEST(DistEnv, RankDevice) {
  DistEnv e = envOf({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "h"}});
  EXPECT_EQ(rankDevice(e, 4, nullptr), 1);
  EXPECT_EQ(rankDevice(e, 2, "0,1"), 1);
  EXPECT_EQ(rankDevice(e, 1, "3"), 0); // srun --gpus-per-task=1: each rank sees its own GPU
  EXPECT_ERROR(rankDevice(e, 1, nullptr), "rank 3 of 4 (local rank 1, torchrun) uses GPU 1 (its "
               "local rank), but the driver reports 1 GPU on this host: start at most 1 rank per host");
  EXPECT_ERROR(rankDevice(e, 1, "0,"), "(CUDA_VISIBLE_DEVICES=0,)");
}

// ---- processes on localhost ----

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// A child process running `fn`; its result (or the Error's message, prefixed "error: ")
/// comes back through a pipe.
struct Child {
  pid_t pid = -1;
  int fd = -1;
  std::string result() {
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0)
      out.append(buf, static_cast<size_t>(n));
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return out;
  }
};

Child spawn(const std::function<std::string()> &fn) {
  int p[2];
  EXPECT_EQ(::pipe(p), 0);
  Child c;
  c.pid = ::fork();
  if (c.pid == 0) {
    ::close(p[0]);
    std::string out;
    try {
      out = fn();
    } catch (const std::exception &e) {
      out = std::string("error: ") + e.what();
    }
    (void)!::write(p[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(p[1]);
  c.fd = p[0];
  return c;
}

DistEnv job(int rank, int world, int port, const std::string &nonce = "job", double timeout = 5) {
  DistEnv e;
  e.launcher = "test";
  e.rank = e.localRank = rank;
  e.worldSize = e.localWorldSize = world;
  e.masterAddr = "localhost"; // resolves to ::1 and 127.0.0.1: both must reach rank 0
  e.port = port;
  e.nonce = nonce;
  e.timeout = timeout;
  return e;
}

UniqueId idOf(char c) {
  UniqueId id;
  id.fill(c);
  return id;
}

std::string idText(const UniqueId &id) { return std::string(id.begin(), id.end()); }

TEST(Rendezvous, EveryRankGetsRankZerosId) {
  const int port = freePort(), world = 3;
  std::vector<Child> ranks;
  // The others start first and retry until rank 0 listens.
  for (int r = world - 1; r >= 0; --r) {
    ranks.push_back(spawn([=] {
      if (r == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return idText(rendezvous(job(r, world, port), [] { return idOf('z'); }));
    }));
  }
  for (Child &c : ranks)
    EXPECT_EQ(c.result(), idText(idOf('z')));
}

TEST(Rendezvous, MissingRankTimesOutNamingIt) {
  const int port = freePort();
  Child rank1 = spawn([=] { return idText(rendezvous(job(1, 4, port, "job", 1), [] { return idOf('x'); })); });
  Child rank3 = spawn([=] { return idText(rendezvous(job(3, 4, port, "job", 1), [] { return idOf('x'); })); });
  auto start = std::chrono::steady_clock::now();
  EXPECT_ERROR(rendezvous(job(0, 4, port, "job", 0.5), [] { return idOf('x'); }),
               "rendezvous timed out after 0.5 s: rank 2 of 4 did not connect to rank 0 at localhost:");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 3);
  EXPECT_NE(rank1.result().find("rank 0 ended the rendezvous"), std::string::npos);
  rank3.result();
}

TEST(Rendezvous, RankZeroMissing) {
  const int port = freePort();
  EXPECT_ERROR(rendezvous(job(1, 2, port, "job", 0.4), [] { return idOf('x'); }),
               "rank 1 could not reach rank 0's rendezvous at localhost:", "within 0.4 s");
}

TEST(Rendezvous, AnotherJobsProcessIsTurnedAway) {
  // The stranger is turned away; rank 0 goes on waiting and pairs with its own rank 1.
  const int port = freePort();
  Child zero = spawn([=] { return idText(rendezvous(job(0, 2, port, "job", 3), [] { return idOf('q'); })); });
  Child stranger = spawn([=] { return idText(rendezvous(job(1, 2, port, "old-job", 3), [] { return idOf('x'); })); });
  EXPECT_NE(stranger.result().find("job nonce 'old-job'"), std::string::npos);
  EXPECT_EQ(idText(rendezvous(job(1, 2, port, "job", 3), [] { return idOf('x'); })), idText(idOf('q')));
  EXPECT_EQ(zero.result(), idText(idOf('q')));
}

TEST(Rendezvous, DuplicateRankOrWrongWorldSizeEndsTheJob) {
  int port = freePort();
  Child a = spawn([=] { return idText(rendezvous(job(1, 3, port), [] { return idOf('x'); })); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Child b = spawn([=] { return idText(rendezvous(job(1, 3, port), [] { return idOf('x'); })); });
  EXPECT_ERROR(rendezvous(job(0, 3, port), [] { return idOf('x'); }),
               "rank 1 connected twice: two processes have rank 1");
  std::string ra = a.result(), rb = b.result();
  EXPECT_NE((ra + rb).find("turned this process away: rank 1 connected twice"), std::string::npos) << ra << rb;

  port = freePort();
  Child c = spawn([=] { return idText(rendezvous(job(1, 3, port), [] { return idOf('x'); })); });
  EXPECT_ERROR(rendezvous(job(0, 2, port), [] { return idOf('x'); }),
               "rank 1 reports world size 3, rank 0 has 2");
  c.result();
}

TEST(PeerWatch, NamesTheRankThatDiedNotTheOneThatLeft) {
  const int port = freePort(), world = 4;
  auto rank = [&](int r) {
    return spawn([=]() -> std::string {
      PeerWatch watch;
      rendezvous(job(r, world, port), [] { return idOf('w'); }, &watch);
      if (r == 1) {
        watch.leave(false); // finished: no news for the others
        return "left";
      }
      if (r == 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(600));
        ::raise(SIGKILL);
      }
      std::string before = watch.lost(r == 0 ? 300 : 0); // rank 1 has left, rank 2 lives
      return "before '" + before + "' after '" + watch.lost(5000) + "'";
    });
  };
  std::vector<Child> ranks;
  for (int r = 0; r < world; ++r)
    ranks.push_back(rank(r));
  const std::string died = "rank 2's process ended without leaving the job (it crashed or was killed)";
  EXPECT_EQ(ranks[0].result(), "before '' after '" + died + "'");
  EXPECT_EQ(ranks[1].result(), "left");
  ranks[2].result();
  EXPECT_EQ(ranks[3].result(), "before '' after '" + died + "'"); // relayed by rank 0
}

TEST(PeerWatch, AFailedRankIsNamed) {
  const int port = freePort();
  Child one = spawn([=]() -> std::string {
    try {
      PeerWatch watch;
      rendezvous(job(1, 2, port), [] { return idOf('w'); }, &watch);
      throw Error("this rank's own trouble"); // the watch goes while unwinding: it failed
    } catch (const Error &) {
    }
    return "";
  });
  PeerWatch watch;
  rendezvous(job(0, 2, port), [] { return idOf('w'); }, &watch);
  EXPECT_EQ(watch.lost(5000), "rank 1 failed and left the job (its own error says why)");
  one.result();
}

/// A rank of a job whose heartbeats hung() judges, after `entered` collectives: it polls
/// its watch (sending heartbeats) for 1.2 s, a "silent" rank stops polling after 0.1 s;
/// then the ranks that judge say whom they name.
std::string hangRank(int r, int world, int port, uint32_t entered, bool silent, bool judge) {
  PeerWatch watch;
  rendezvous(job(r, world, port, "job", 1), [] { return idOf('h'); }, &watch);
  for (uint32_t i = 0; i < entered; ++i)
    watch.progressed();
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(silent ? 100 : 1200);
  while (std::chrono::steady_clock::now() < until)
    watch.lost(20);
  if (silent) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));
    return "silent";
  }
  std::string named = judge ? watch.hung(2000) : watch.lost(2500);
  watch.leave(false);
  return named;
}

TEST(PeerWatch, NamesTheRanksThatHang) {
  // Rank 1 lags (alive, one collective behind), rank 2 goes silent.
  int port = freePort();
  std::vector<Child> ranks;
  for (int r = 0; r < 4; ++r)
    ranks.push_back(spawn([=] { return hangRank(r, 4, port, r == 1 ? 6 : 7, r == 2, r != 1); }));
  const std::string lags = "rank 1 hangs (its process is alive but lags: it has not entered the "
                           "collective the others wait in)",
                    silent = "rank 2 hangs (its process went silent: stopped or frozen)";
  EXPECT_EQ(ranks[0].result(), lags + "; " + silent);
  EXPECT_EQ(ranks[1].result(), lags); // rank 0's verdict reaches the rank that lags
  EXPECT_EQ(ranks[2].result(), "silent");
  EXPECT_EQ(ranks[3].result(), lags); // the first word of rank 0's verdict

  // Control: every rank alive and level, nobody is named (rank 1 waits for rank 0's word).
  port = freePort();
  ranks.clear();
  for (int r = 0; r < 3; ++r)
    ranks.push_back(spawn([=] { return hangRank(r, 3, port, 7, false, true); }));
  for (Child &c : ranks)
    EXPECT_EQ(c.result(), "");

  // Rank 0 silent: the others name it themselves.
  port = freePort();
  ranks.clear();
  for (int r = 0; r < 2; ++r)
    ranks.push_back(spawn([=] { return hangRank(r, 2, port, 7, r == 0, true); }));
  EXPECT_EQ(ranks[0].result(), "silent");
  EXPECT_EQ(ranks[1].result(), "rank 0 hangs (its process went silent: stopped or frozen)");
}

// ---- the communicator over the stand-in NCCL ----

struct FakeNccl : ::testing::Test {
  void SetUp() override {
    ::setenv("MEDRUN_LIBNCCL", FAKE_LIBNCCL, 1);
    ::setenv("FAKE_NCCL_TIMEOUT_MS", "3000", 1);
    ::setenv("FAKE_NCCL_SLOT_BYTES", "4096", 1); // several pieces per all-reduce
  }
};

/// Rank r's buffer: values whose sum depends on the order of adding (not exact in f32).
std::vector<float> valuesOf(int rank, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = std::ldexp(1.0f + 0.001f * static_cast<float>((i * 31 + rank * 17) % 1000),
                      static_cast<int>((i + rank * 5) % 40) - 20) * ((i + rank) % 3 ? 1.f : -1.f);
  return v;
}

std::string sumsOf(const DistEnv &env, size_t n) {
  Communicator comm(env);
  std::vector<float> f = valuesOf(env.rank, n);
  std::vector<bf16> b(n);
  for (size_t i = 0; i < n; ++i)
    b[i] = bf16(f[i]);
  comm.allReduceSum(f.data(), n, DType::F32, nullptr); // device memory is host memory here
  comm.allReduceSum(b.data(), n, DType::BF16, nullptr);
  comm.wait([] { return true; });
  return std::string(reinterpret_cast<char *>(f.data()), n * 4) +
         std::string(reinterpret_cast<char *>(b.data()), n * 2);
}

TEST_F(FakeNccl, RanksGetBitIdenticalSumsInRankOrder) {
  ASSERT_TRUE(ncclAvailable()) << FAKE_LIBNCCL;
  EXPECT_EQ(ncclVersion(), "2.28.9");
  const size_t n = 5000; // 20000 bytes of f32: five pieces of 4096 bytes
  for (int world : {2, 3}) {
    const int port = freePort();
    std::vector<Child> ranks;
    for (int r = 0; r < world; ++r)
      ranks.push_back(spawn([=] { return sumsOf(job(r, world, port), n); }));
    std::vector<std::string> sums;
    for (Child &c : ranks)
      sums.push_back(c.result());
    // The sum in rank order, as the stand-in promises; bf16 rounded once from f32.
    std::vector<std::vector<float>> values;
    for (int r = 0; r < world; ++r)
      values.push_back(valuesOf(r, n));
    std::vector<float> expect = values[0];
    std::vector<bf16> expectB(n);
    for (size_t i = 0; i < n; ++i) {
      float s = bf16(values[0][i]);
      for (int r = 1; r < world; ++r) {
        expect[i] += values[r][i];
        s += static_cast<float>(bf16(values[r][i]));
      }
      expectB[i] = bf16(s);
    }
    if (world == 3) { // the check can fail: another order of adding gives other sums
      int differ = 0;
      for (size_t i = 0; i < n; ++i)
        differ += (values[2][i] + values[1][i]) + values[0][i] != expect[i];
      EXPECT_GT(differ, 100);
    }
    std::string want = std::string(reinterpret_cast<char *>(expect.data()), n * 4) +
                       std::string(reinterpret_cast<char *>(expectB.data()), n * 2);
    for (int r = 0; r < world; ++r)
      EXPECT_TRUE(sums[r] == want) << "rank " << r << " of " << world << ": "
                                   << sums[r].substr(0, 200);
  }
}

TEST_F(FakeNccl, AKilledPeerIsReportedWithinTheTimeout) {
  const int port = freePort(), world = 3;
  std::vector<Child> ranks;
  for (int r = 0; r < world; ++r)
    ranks.push_back(spawn([=]() -> std::string {
      Communicator comm(job(r, world, port));
      std::vector<float> f(100, 1.0f);
      for (int step = 0;; ++step) {
        if (r == 1 && step == 3)
          ::raise(SIGKILL); // dies between two collectives
        comm.allReduceSum(f.data(), f.size(), DType::F32, nullptr);
        comm.wait([] { return true; });
        std::fill(f.begin(), f.end(), 1.0f);
      }
    }));
  auto start = std::chrono::steady_clock::now();
  for (int r : {0, 2}) {
    std::string out = ranks[r].result();
    // Named by the connections of the rendezvous (rank 2 hears it from rank 0).
    EXPECT_NE(out.find(str("rank ", r, " of 3 (local rank ", r, ", test): rank 1's process ended "
                           "without leaving the job (it crashed or was killed); communicator aborted")),
              std::string::npos)
        << out;
  }
  ranks[1].result();
  // Seen at once (the peer's process is gone), well before FAKE_NCCL_TIMEOUT_MS.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.5);
}

TEST_F(FakeNccl, AHungPeerTimesOut) {
  ::setenv("FAKE_NCCL_TIMEOUT_MS", "300", 1);
  const int port = freePort();
  Child hung = spawn([=] {
    Communicator comm(job(1, 2, port));
    std::this_thread::sleep_for(std::chrono::seconds(2)); // never joins the collective
    return std::string("done");
  });
  std::string out = spawn([=] { return sumsOf(job(0, 2, port), 10); }).result();
  EXPECT_NE(out.find("rank 0 of 2 (local rank 0, test): NCCL reports an error"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1 did not arrive for an all-reduce within 300 ms"), std::string::npos) << out;
  ::kill(hung.pid, SIGKILL);
  hung.result();
}

} // namespace
