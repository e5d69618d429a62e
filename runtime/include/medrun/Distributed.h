//===- Distributed.h - data-parallel jobs: ranks, rendezvous, NCCL, local launch -------===//
//
// One process per GPU (docs/distributed.md). A process learns its place in the job from its
// launcher's environment (torchrun, srun, mpirun, or `medrun ... --gpus N`); rank 0 hands
// NCCL's unique id to the others over TCP; then every rank joins the NCCL communicator.
// libnccl.so.2 is opened with dlopen like the other GPU libraries (MEDRUN_LIBNCCL names
// another file: tests use a stand-in that all-reduces through shared memory).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_DISTRIBUTED_H
#define MEDRUN_DISTRIBUTED_H

#include "medrun/GradientReducer.h"
#include "medrun/Tensor.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace medrun {

/// Where this process stands in a data-parallel job.
struct DistEnv {
  std::string launcher = "no launcher"; ///< torchrun, mpirun, slurm, or "no launcher" (one process)
  int rank = 0, worldSize = 1;
  int localRank = 0;      ///< on this host: the GPU this rank uses
  int localWorldSize = 1; ///< ranks on this host; 0 where the launcher does not say
  std::string masterAddr; ///< rank 0's host (where the rendezvous listens)
  int port = 0;           ///< the rendezvous port on it
  std::string nonce;      ///< the job's identity: processes of two jobs never pair
  double timeout = 300;   ///< seconds the rendezvous and a collective may take
  std::string describe() const; ///< "rank 1 of 4 (local rank 1, torchrun)"
};

/// Reads an environment variable: null when unset.
using EnvLookup = std::function<const char *(const char *)>;

/// The job from the launcher's variables, the first launcher found of:
///  - torchrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
///    nonce TORCHELASTIC_RUN_ID;
///  - Open MPI (mpirun): OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE; MASTER_ADDR
///    and MASTER_PORT from the user (mpirun -x); nonce PMIX_NAMESPACE or
///    OMPI_MCA_ess_base_jobid;
///  - Slurm (srun): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, the first host of
///    SLURM_NODELIST (unless MASTER_ADDR is set), MASTER_PORT or 15000 + SLURM_JOB_ID's last
///    four digits; nonce SLURM_JOB_ID.SLURM_STEP_ID.
/// MEDRUN_JOB_ID (set by --gpus) is the nonce where present. The rendezvous listens on
/// MEDRUN_DIST_PORT, else MASTER_PORT + 1 (torchrun's store holds MASTER_PORT), default
/// 29500 + 1; MASTER_ADDR defaults to 127.0.0.1 where every rank is on one host.
/// MEDRUN_DIST_TIMEOUT sets the timeout (seconds, default 300). Throws Error naming the
/// variable for a missing, malformed or inconsistent value (RANK=4 with WORLD_SIZE=4).
DistEnv distEnvFromEnvironment(const EnvLookup &lookup);
DistEnv distEnvFromEnvironment(); ///< from this process's environment

/// The first host of a Slurm host list in its compressed form: "node[01-04,07],gpu5" and
/// "rack[2-3]-n[08-09]" give "node01" and "rack2-n08". Throws Error quoting a malformed list.
std::string firstSlurmHost(const std::string &nodelist);

/// The GPU a rank uses among the `visible` ones the driver reports: its local rank, or the
/// only visible one where CUDA_VISIBLE_DEVICES (`cudaVisibleDevices`, null when unset) names
/// one device: a launcher that binds a GPU to each rank (srun --gpus-per-task=1). Throws
/// Error when the local rank has no GPU.
int rankDevice(const DistEnv &env, int visible, const char *cudaVisibleDevices);

/// NCCL's unique id: opaque bytes (NCCL_UNIQUE_ID_BYTES).
using UniqueId = std::array<char, 128>;

/// The connections the rendezvous leaves open, rank 0 to each rank and each rank to rank 0.
/// After the id they carry a word when a rank leaves the job (finished, or failed), so
/// a rank whose connection closes without one died: the kernel closes a dead process's
/// sockets, whatever killed it. Rank 0 passes what it learns on to the others, so every
/// rank can say which rank is gone (NCCL's errors rarely do).
/// They also carry heartbeats, sent while lost() is polled, with the number of collectives
/// the sender has entered (progressed()): when a collective times out, hung() names a peer
/// that went silent (a stopped or frozen process) or that lags behind the others (alive,
/// but it has not entered the collective they wait in).
class PeerWatch {
public:
  PeerWatch() = default;
  ~PeerWatch() { leave(std::uncaught_exceptions() > 0); } ///< a rank unwinding an error failed
  PeerWatch(const PeerWatch &) = delete;
  PeerWatch &operator=(const PeerWatch &) = delete;

  /// Watches `fds` (peer rank -> connection; the rendezvous hands them over).
  void start(const DistEnv &env, std::map<int, int> fds);
  /// "" while no peer has left the job abnormally; else which rank and how: "rank 2's
  /// process ended without leaving the job (it crashed or was killed)", "rank 2 failed and
  /// left the job (its own error says why)". Waits up to `waitMs` for news. Rank 0 relays
  /// what it learns here, so it should be called regularly (Communicator::wait does).
  std::string lost(int waitMs = 0);
  /// Tells the peers this rank leaves, normally or `failed`, and closes the connections.
  void leave(bool failed);
  /// This rank entered one more collective (its heartbeats say how many).
  void progressed() { ++entered_; }
  /// Called when a collective did not finish within the timeout: which ranks hang, "" where
  /// none can be named. Rank 0 judges from every rank's heartbeats and tells the others; a
  /// rank > 0 names rank 0 where rank 0 is silent or behind, else waits up to `waitMs` for
  /// rank 0's verdict. "rank 2 hangs (its process went silent: stopped or frozen)".
  std::string hung(int waitMs = 2000);

private:
  void relay(char kind, int subject, bool toSubject = false);
  void beat();
  using Clock = std::chrono::steady_clock;
  struct Heard {
    Clock::time_point at; ///< the last word from that rank
    uint32_t entered = 0; ///< the collectives it had entered then
  };
  DistEnv env_;
  std::map<int, int> peers_;
  std::map<int, Heard> heard_;
  std::string lost_;
  bool verdict_ = false; ///< lost_ is rank 0's word that a rank hangs
  uint32_t entered_ = 0;
  Clock::time_point lastBeat_{};
};

/// The rendezvous over TCP. Rank 0 calls `makeId`, listens on env.port and waits until
/// every other rank has connected and reported its rank, world size and nonce; it checks
/// them (a duplicate rank, an out-of-range rank or another world size ends the job; a
/// connection with another job's nonce is turned away and waiting goes on), then sends the
/// id to all. The other ranks connect to env.masterAddr:env.port (retrying until rank 0
/// listens), report themselves and receive the id. Within env.timeout seconds, else Error:
/// on rank 0 naming the ranks that did not connect, on the others saying rank 0 was not
/// reached or what it answered. A single-rank job returns makeId() at once. With `watch`,
/// the connections stay open and `watch` watches them; else they close.
UniqueId rendezvous(const DistEnv &env, const std::function<UniqueId()> &makeId,
                    PeerWatch *watch = nullptr);

/// True if the NCCL library loads (MEDRUN_LIBNCCL, else libnccl.so.2); else the reason.
bool ncclAvailable(std::string *why = nullptr);
/// "2.28.9" (ncclGetVersion).
std::string ncclVersion();

/// A rank's NCCL communicator. Create it with the rank's CUDA context current (NCCL takes
/// the device from it).
class Communicator {
public:
  /// Rendezvous (rank 0 makes the id with ncclGetUniqueId), then ncclCommInitRank.
  explicit Communicator(const DistEnv &env);
  ~Communicator(); ///< ncclCommDestroy (nothing after abort); the peers hear this rank left
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  int rank() const { return env_.rank; }
  int size() const { return env_.worldSize; }

  /// Enqueues the sum over all ranks of `count` elements (f32 or bf16) at device address
  /// `data`, in place, on `stream` (a CUstream). The collective runs asynchronously: wait()
  /// for it.
  void allReduceSum(void *data, size_t count, DType dtype, void *stream);
  /// "" while the communicator is sound; else which peer left the job (PeerWatch) or the
  /// error NCCL reports asynchronously (a peer that died, a network failure).
  std::string asyncError();
  /// Polls until `finished()` (e.g. the collective's stream is idle), checking asyncError;
  /// an asynchronous error or env.timeout seconds without finishing aborts the
  /// communicator and throws Error naming this rank and the cause (the rank that left,
  /// where the connections of the rendezvous tell).
  void wait(const std::function<bool()> &finished);
  /// ncclCommAbort: ends the communicator at once, also with collectives in flight; the
  /// peers hear that this rank failed.
  void abort();
  /// Aborts for `why` (asyncError's text) and returns the message to stop with: this rank,
  /// and the rank that left where the rendezvous connections tell (within a second).
  std::string abortFor(const std::string &why);
  /// Aborts because `what` ("a training step") did not finish within the timeout and
  /// returns the message to stop with, naming the ranks that hang where the heartbeats
  /// tell (PeerWatch::hung).
  std::string timedOut(const std::string &what);

private:
  [[noreturn]] void fail(const std::string &why);
  DistEnv env_;
  void *comm_ = nullptr;
  PeerWatch watch_;
};

/// A rank's side of data-parallel training (`medrun train` in a job of several ranks): the
/// CUDA backend's GradientReducer over the job's communicator (docs/distributed.md).
///  - Overlap: allReduceSum records an event on the step's stream; the communicator's own
///    stream waits for it and sums the bucket, then records an event that join() makes the
///    step's stream wait for. Backward goes on meanwhile, the host never waits, and in a
///    CUDA graph the same dependencies are captured.
///  - Faults: a watchdog thread polls the communicator (ncclCommGetAsyncError and the
///    rendezvous connections) off the step's critical path and aborts it (ncclCommAbort)
///    when a peer died or failed, or when a step has not ended within env.timeout seconds
///    (a peer hangs); stepEnded() then throws the reason, which names the rank where known
///    (a rank that died, failed, went silent or lags: PeerWatch).
class DataParallel final : public GradientReducer {
public:
  /// Makes the primary context of the rank's GPU (rankDevice) current, then joins the
  /// job's communicator. CudaSession is to use the same GPU (setCudaDevice(device())).
  explicit DataParallel(const DistEnv &env);
  ~DataParallel() override;
  DataParallel(const DataParallel &) = delete;
  DataParallel &operator=(const DataParallel &) = delete;

  const DistEnv &env() const;
  int device() const; ///< the GPU's ordinal
  int worldSize() const override;
  void allReduceSum(void *data, size_t count, DType dtype, void *stream) override;
  void join(void *stream) override;
  void stepStarts() override;
  void stepEnded() override;
  /// An all-reduce of `count` f32 values through device memory, waited for here.
  void sumOverRanks(float *values, size_t count) override;

  /// What the buckets' sums cost the steps run since the last call (timeCommunication on,
  /// CUDA events; the steps launched one by one, CudaSession::setGraphs, as events in a
  /// graph are not read back):
  ///  - allReduceMs: the time the communicator's stream spent in the all-reduces, from each
  ///    one's start (its bucket ready and the previous sum done) to its end;
  ///  - exposedMs: the time the step's stream spent waiting for them: at each join, from
  ///    when the step's stream got there (the work before it done) to the end of the last
  ///    sum it waits for, 0 where that sum had ended first (hidden behind backward).
  struct CommunicationTimes {
    double allReduceMs = 0, exposedMs = 0;
    int64_t allReduces = 0, joins = 0;
  };
  /// Records the events from now on (off: none, the default).
  void timeCommunication(bool on);
  /// Waits for the sums enqueued, reads the events and forgets them.
  CommunicationTimes communicationTimes();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// `medrun ... --gpus N`: runs this executable N times on this host with `args` (the
/// command line without --gpus) and torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE,
/// LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free MASTER_PORT) and a generated
/// MEDRUN_JOB_ID. The ranks form a process group and die with the launcher
/// (PR_SET_PDEATHSIG); SIGINT, SIGTERM, SIGHUP and SIGUSR1 are forwarded to them. When a rank fails
/// the launcher says which, stops the others (SIGTERM, SIGKILL after `graceSeconds`) and
/// returns its status; otherwise the ranks' status (0 when all succeeded).
int launchLocalRanks(int n, const std::vector<std::string> &args, double graceSeconds = 30);

/// `medrun dist-check`: joins the job's communicator on GPU LOCAL_RANK, all-reduces a test
/// buffer of `count` f32 and `count` bf16 elements `iterations` times (pausing `pauseMs`
/// between), compares each result with the exact sum and prints one line per rank. Throws
/// Error naming the rank and the first wrong element, or the communicator's failure.
struct DistCheckOptions {
  size_t count = 1 << 20;
  int iterations = 3;
  int pauseMs = 0;
};
int distCheck(const DistEnv &env, const DistCheckOptions &options);

} // namespace medrun

#endif // MEDRUN_DISTRIBUTED_H
