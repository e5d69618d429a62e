//===- Nccl.cpp - NCCL through dlopen: the communicator of a data-parallel job -------===//
//
// libnccl.so.2 is opened at run time (MEDRUN_LIBNCCL names another file: tests load the
// stand-in of test/cuda/FakeNccl.cpp), so medrun neither links it nor needs nccl.h; the few
// types the calls take are declared here as nccl.h declares them.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Distributed.h"

#include "../cuda/SharedLibrary.h"
#include "medrun/Error.h"

#include <chrono>
#include <mutex>
#include <thread>

// As nccl.h declares it, at global scope: the function types medrun calls through must be
// those the library defines (UBSan's -fsanitize=function checks it against the stand-in).
typedef struct {
  char internal[128];
} ncclUniqueId;

namespace medrun {
namespace {

using ncclResult = int;
using ncclComm = void *;
constexpr int kNcclSum = 0, kNcclFloat32 = 7, kNcclBfloat16 = 9;

struct Library {
  SharedLibrary lib;
  ncclResult (*getVersion)(int *) = nullptr;
  ncclResult (*getUniqueId)(ncclUniqueId *) = nullptr;
  ncclResult (*commInitRank)(ncclComm *, int, ncclUniqueId, int) = nullptr;
  ncclResult (*allReduce)(const void *, void *, size_t, int, int, ncclComm, void *) = nullptr;
  ncclResult (*commGetAsyncError)(ncclComm, ncclResult *) = nullptr;
  ncclResult (*commAbort)(ncclComm) = nullptr;
  ncclResult (*commDestroy)(ncclComm) = nullptr;
  const char *(*getErrorString)(ncclResult) = nullptr;
  const char *(*getLastError)(ncclComm) = nullptr; ///< optional (NCCL 2.13+)
};

const Library &library() {
  static Library l;
  static std::once_flag once;
  std::call_once(once, [] {
    l.lib.open("MEDRUN_LIBNCCL", "libnccl.so.2"); // tests: a missing library, a stand-in
    if (!l.lib.handle)
      return;
    l.lib.require(l.getVersion, {"ncclGetVersion"});
    l.lib.require(l.getUniqueId, {"ncclGetUniqueId"});
    l.lib.require(l.commInitRank, {"ncclCommInitRank"});
    l.lib.require(l.allReduce, {"ncclAllReduce"});
    l.lib.require(l.commGetAsyncError, {"ncclCommGetAsyncError"});
    l.lib.require(l.commAbort, {"ncclCommAbort"});
    l.lib.require(l.commDestroy, {"ncclCommDestroy"});
    l.lib.require(l.getErrorString, {"ncclGetErrorString"});
    l.lib.find(l.getLastError, {"ncclGetLastError"});
    int v = 0;
    if (l.lib.error.empty() && (l.getVersion(&v) != 0 || v < 21800))
      l.lib.error = str(l.lib.name, " is NCCL ", v, "; medrun needs NCCL 2.18 or later");
  });
  return l;
}

const Library &loaded() {
  const Library &l = library();
  if (!l.lib.error.empty())
    throw Error(str("NCCL is not usable: ", l.lib.error,
                    " (data-parallel jobs need libnccl.so.2 on the library path; MEDRUN_LIBNCCL "
                    "names another file)"));
  return l;
}

std::string describe(ncclResult r, ncclComm comm) {
  const Library &l = library();
  std::string s = str(l.getErrorString(r), " (", r, ")");
  if (l.getLastError) // NCCL ignores the communicator: the thread's last error
    if (const char *last = l.getLastError(comm); last && *last)
      s += str(": ", last);
  return s;
}

} // namespace

bool ncclAvailable(std::string *why) {
  const Library &l = library();
  if (why)
    *why = l.lib.error;
  return l.lib.error.empty();
}

std::string ncclVersion() {
  int v = 0;
  loaded().getVersion(&v);
  // NCCL_VERSION(X,Y,Z): X*10000 + Y*100 + Z since 2.9.
  return str(v / 10000, ".", v / 100 % 100, ".", v % 100);
}

Communicator::Communicator(const DistEnv &env) : env_(env) {
  const Library &l = loaded();
  UniqueId id = rendezvous(env, [&] {
    ncclUniqueId raw;
    if (ncclResult r = l.getUniqueId(&raw); r != 0)
      throw Error(str("rank 0: ncclGetUniqueId failed: ", describe(r, nullptr)));
    UniqueId out;
    std::copy(raw.internal, raw.internal + sizeof raw.internal, out.begin());
    return out;
  }, &watch_);
  ncclUniqueId raw;
  std::copy(id.begin(), id.end(), raw.internal);
  if (ncclResult r = l.commInitRank(&comm_, env.worldSize, raw, env.rank); r != 0)
    throw Error(str(env.describe(), ": ncclCommInitRank failed: ", describe(r, nullptr)));
}

Communicator::~Communicator() {
  if (comm_)
    library().commDestroy(comm_);
  watch_.leave(std::uncaught_exceptions() > 0); // a rank unwinding an error failed
}

void Communicator::allReduceSum(void *data, size_t count, DType dtype, void *stream) {
  if (!comm_)
    throw Error(str("rank ", env_.rank, ": the communicator was aborted"));
  if (dtype != DType::F32 && dtype != DType::BF16)
    throw Error(str("all-reduce of ", dtypeName(dtype), " elements: only f32 and bf16 are summed"));
  int type = dtype == DType::F32 ? kNcclFloat32 : kNcclBfloat16;
  watch_.progressed();
  if (ncclResult r = library().allReduce(data, data, count, type, kNcclSum, comm_, stream); r != 0) {
    // After an asynchronous error NCCL may refuse further calls: that error is the cause.
    if (std::string async = asyncError(); !async.empty())
      fail(async);
    std::string why = describe(r, comm_);
    abort();
    throw Error(str(env_.describe(), ": ncclAllReduce of ", count, " ", dtypeName(dtype),
                    " elements failed: ", why));
  }
}

std::string Communicator::abortFor(const std::string &why) {
  // NCCL's own error rarely says which rank is gone; the connections of the rendezvous do,
  // within moments (rank 0 passes it on).
  std::string who = watch_.lost(1000);
  abort();
  if (!who.empty())
    return str(env_.describe(), ": ", who, "; communicator aborted");
  return str(env_.describe(), ": NCCL reports an error (a peer rank died or the network "
                              "failed): ", why, "; communicator aborted");
}

void Communicator::fail(const std::string &why) { throw Error(abortFor(why)); }

std::string Communicator::asyncError() {
  if (std::string who = watch_.lost(); !who.empty())
    return who;
  if (!comm_)
    return "the communicator was aborted";
  ncclResult async = 0;
  if (ncclResult r = library().commGetAsyncError(comm_, &async); r != 0)
    return str("ncclCommGetAsyncError failed: ", describe(r, comm_));
  return async == 0 ? "" : describe(async, comm_);
}

void Communicator::wait(const std::function<bool()> &finished) {
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  for (auto pause = std::chrono::microseconds(20);; pause = std::min(pause * 2, std::chrono::microseconds(2000))) {
    // The error first: a collective that failed may still look finished.
    if (std::string why = asyncError(); !why.empty())
      fail(why);
    if (finished())
      return;
    if (std::chrono::duration<double>(Clock::now() - start).count() > env_.timeout)
      throw Error(timedOut("a collective"));
    std::this_thread::sleep_for(pause);
  }
}

std::string Communicator::timedOut(const std::string &what) {
  std::string who = watch_.hung();
  abort();
  return str(env_.describe(), ": ", what, " did not finish within ", env_.timeout, " s",
             who.empty() ? " (a peer rank hangs or died; MEDRUN_DIST_TIMEOUT sets the limit)"
                         : ": " + who,
             "; communicator aborted");
}

void Communicator::abort() {
  if (comm_)
    library().commAbort(comm_);
  comm_ = nullptr;
  watch_.leave(true);
}

} // namespace medrun
