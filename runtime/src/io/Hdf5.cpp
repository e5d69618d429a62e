//===- Hdf5.cpp - HDF5 volumes (CREMI, PyTorch Connectomics) through libhdf5 ---------===//
//
// A dataset is read by hyperslabs of its own chunks (HDF5 decodes them, filters
// included); a contiguous dataset by slabs. `resolution` (z, y, x; CREMI: nm) gives the
// spacing and `offset` (z, y, x, world units) the translation. Without a key the first
// dataset in name order is read, as PyTorch Connectomics' readh5 does.
//
// Reading runs libhdf5 in a child process. libhdf5 (Debian's 1.10, not ours) parses the
// file's internal structures without checking them: on hostile files it reads past its
// buffers, crashes or loops for ever (docs/reliability.md), and nothing can validate those
// structures before it parses them. So the reader never reads a file through libhdf5
// itself (it only initializes the library, once, before forking the zygote):
//
// - The zygote: one single-threaded process per process, forked (no exec: medrun's and
//   the fuzzer's code stay one binary) at the first reader's open, and again at the open
//   after it ended; it forks the readers' children, so that the reading process (a
//   training run, the fuzzer: large, threaded, sanitized) is forked once, not per reader.
//   The fork happens under hdf5Lock(), which the writer's libhdf5 calls also hold, so no
//   other thread of ours is inside libhdf5 then (its global lock would stay taken in the
//   copy). The zygote resets the signal handlers it inherited (a crash is then death by
//   that signal, never a handler of the parent's: libFuzzer's would report a finding;
//   ASan's death callback is cleared), ignores the terminal's and a scheduler's signals
//   (the parent decides when it ends), writes no core file, keeps only its socket
//   (SOCK_SEQPACKET) and stderr, and never opens a file with libhdf5: it only sets up once
//   what each child would set up again (see "Cost" below). It dies with the parent:
//   PR_SET_PDEATHSIG when forked by the main thread (the signal follows the forking
//   *thread*, and readers are also opened by parallelFor's short-lived workers), else at
//   EOF on its socket, or within a second once the parent is gone. The parent reaps it; a
//   fork of the parent starts a zygote of its own.
// - One child per open reader, forked by the zygote on request (_Fork: the zygote has one
//   thread, so no fork handlers are needed, and the sanitizers' are skipped). The zygote
//   passes the parent its end of the child's socketpair (SCM_RIGHTS), and kills the child
//   when the parent asks: at a reader's failure it reaps it and answers its wait status
//   (the error says how the child ended); at a reader's normal end it answers at once and
//   reaps the child as it ends (the reader does not wait for its exit). The child
//   inherits the zygote's set-up, dies with the zygote
//   (PR_SET_PDEATHSIG, reliable as the zygote has one thread), keeps only its socket and
//   stderr, opens the file itself and answers requests until EOF. It leaves only by _exit
//   (no atexit handler, no H5close: files the parent had open through Hdf5Writer at the
//   zygote's fork are in the library state it inherited, and must not be flushed or
//   closed by it).
// - The parent sends "list datasets", "dataset metadata" and "read box" requests (one per
//   chunk decoded) and waits for each with poll() and a deadline (MEDRUN_HDF5_TIMEOUT
//   seconds, default 120). On a timeout, EOF, an error or an answer of the wrong size it
//   has the zygote kill and reap the child, and the request fails with an Error naming the
//   file, what was asked and how the child ended ("libhdf5 crashed (signal 11, ...) while reading
//   dataset 'raw' box [0:64, 0:64, 0:64]; the file is probably malformed"); every later
//   request of that reader fails with the same message. The destructor ends it (without
//   waiting for its exit). A
//   zygote that does not answer in time, answers wrongly or is gone is killed and reaped
//   (its children die with it; their readers fail naming it); an open that finds it so
//   starts a new one, and a new one that fails is an Error naming the file.
// - Every answer is untrusted (the child parses a hostile file and may be corrupted by
//   it): fixed-size answers must have their size, lengths are bounded, counts checked,
//   and a box's voxels must be exactly the bytes asked for. All the checks of what the file
//   declares (medrun/Sizes.h) run in the parent, on the values the child reports.
// - decode() is called by several data workers: one request is in flight per child (a
//   mutex per reader); different readers, i.e. different children, decode in parallel.
// - No fallback to reading in-process: a failed fork or socketpair is an Error.
// - Three measures keep libhdf5 from reading past a chunk (which in an ordinary build
//   gives garbage voxels, no crash): unfiltered chunks are read without libhdf5's chunk
//   cache (childDataset), a chunk whose filters keep its size must be stored with exactly
//   a chunk's bytes, and the child decodes gzip with a filter of its own that refuses a
//   chunk decoding to another size (checkedInflate).
// - A test hook, MEDRUN_HDF5_TEST_FAULT=ACTION:REQUEST (ACTION segv, abort, hang, exit,
//   short or long; REQUEST open, list, dataset, read, or start: the zygote when asked to
//   start the child), makes the child (or the zygote) fail so
//   (test/runtime/Hdf5ProcessTest.cpp, test/medrun/reliability-hdf5.test).
//
// Cost. Under ASan (fuzz-hdf5) a child's life was mostly first-time work that every child
// repeated: creating its file access property list, initializing libhdf5's filter package
// and registering the checked gzip filter (a third of its CPU), binding libhdf5's symbols
// lazily, filling libhdf5's free lists through the sanitizer's allocator (page faults). The
// zygote now does that once, before its first child: it makes the children's property
// list and registers the filter (childFileAccess), and runs libhdf5's reading path once on
// an HDF5 file of its own making held in memory (warmUpImage, warmUp: written by libhdf5's
// core driver, read back from that image; no file of the parent's or the filesystem's is
// opened), so children start with libhdf5 initialized and bound. A reader's normal end
// no longer waits for its child's exit (several milliseconds of unmapping under ASan).
// fuzz-hdf5 also forks the zygote at its initialization, while small (each child's fork
// copies the zygote's page tables). docs/reliability.md has the measurements.
//
// The writer (Hdf5Writer) stays in-process: it writes files of our own. An existing file it
// adds a dataset to (an output path may name anyone's file) is first opened and walked by a
// reader's child (probeExisting), so that one that crashes or hangs libhdf5 there is an
// Error before this process parses it.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Sizes.h"
#include "medrun/Volume.h"

#ifdef MEDRUN_HAVE_HDF5

#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#ifdef MEDRUN_HAVE_ZLIB
#include <zlib.h>
#endif

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

// The sanitizers' runtime, where linked (scripts/fuzz.sh): the child clears the death
// callback libFuzzer sets, which would record the input as a finding of the fuzz run.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace medrun::io {
namespace {

/// An HDF5 handle closed with its own close function.
class Handle {
public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle &&o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle &operator=(Handle &&o) noexcept {
    std::swap(id_, o.id_);
    std::swap(close_, o.close_);
    return *this;
  }
  ~Handle() {
    if (id_ >= 0 && close_)
      close_(id_);
  }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  /// Gives up the handle without closing it (the caller closes it and checks the result).
  hid_t release() { return std::exchange(id_, -1); }

private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

/// Held by every libhdf5 call of this process (the writer) and by the fork of a reader's
/// child, so the child never inherits libhdf5 in the middle of a call. Never destroyed (a
/// thread may still write at exit).
std::recursive_mutex &hdf5Lock() {
  static auto *lock = new std::recursive_mutex;
  return *lock;
}

/// HDF5 prints its error stack by default; the reader reports errors itself. Its exit
/// handler closes files left open again, and libhdf5 1.10 crashes there on a file whose
/// close failed (a write on a full disk): writers flush and close their files themselves.
void quiet() {
  static std::once_flag once;
  std::call_once(once, [] {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  });
}

hid_t nativeType(VoxelType t) {
  switch (t) {
  case VoxelType::U8: return H5T_NATIVE_UINT8;
  case VoxelType::I8: return H5T_NATIVE_INT8;
  case VoxelType::U16: return H5T_NATIVE_UINT16;
  case VoxelType::I16: return H5T_NATIVE_INT16;
  case VoxelType::U32: return H5T_NATIVE_UINT32;
  case VoxelType::I32: return H5T_NATIVE_INT32;
  case VoxelType::U64: return H5T_NATIVE_UINT64;
  case VoxelType::I64: return H5T_NATIVE_INT64;
  case VoxelType::F32: return H5T_NATIVE_FLOAT;
  case VoxelType::F64: return H5T_NATIVE_DOUBLE;
  }
  return -1;
}

bool isPartial(const std::string &name) {
  const std::string suffix = kPartialSuffix;
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// True if every component of `key` exists (H5Lexists needs the parents to exist).
bool exists(hid_t file, const std::string &key) {
  size_t pos = 0;
  for (;;) {
    size_t slash = key.find('/', pos);
    std::string prefix = key.substr(0, slash);
    if (!prefix.empty() && H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0)
      return false;
    if (slash == std::string::npos)
      return true;
    pos = slash + 1;
  }
}

// ---- the protocol between a reader and its child -------------------------------------

enum Op : uint32_t { kOpen, kList, kDataset, kRead, kOps };

/// What the child answers: kOk with the answer's bytes, else no bytes. A read answers
/// kBadStored when its chunk is stored with other than the bytes the parent expects
/// (ReplyHead::detail: its stored bytes), kBadChunk when a gzip chunk decodes to another
/// size than a chunk's (detail: the bytes it decoded to, or the chunk's and one more where
/// it went on).
enum Status : uint32_t { kOk, kFailed, kNoMemory, kBadStored, kBadChunk };

struct RequestHead {
  uint32_t op = 0;
  uint32_t bytes = 0; ///< the request's own bytes that follow
};
struct ReplyHead {
  uint32_t status = 0;
  uint32_t pad = 0;
  uint64_t bytes = 0;
  uint64_t detail = 0;
};

constexpr int kMaxRank = 32;        ///< HDF5's own limit (H5S_MAX_RANK)
constexpr int kMaxFilters = 32;     ///< H5Z_MAX_NFILTERS
constexpr int kMaxAttribute = 16;   ///< values of `resolution` / `offset` taken
constexpr uint64_t kMaxListBytes = uint64_t(64) << 20;
constexpr uint32_t kMaxRequestBytes = 1 << 16;
/// The child's exit status when it could not set itself up (signals, descriptors).
constexpr int kExitSetup = 71;

/// A numeric attribute of up to kMaxAttribute values (n = 0: absent or not numeric).
struct AttributeFacts {
  int32_t n = 0;
  int32_t pad = 0;
  double v[kMaxAttribute] = {};
};

/// What libhdf5 says about a dataset; the parent checks every field.
struct DatasetFacts {
  int32_t exists = 0;    ///< every component of the key exists
  int32_t isDataset = 0; ///< and it opens as a dataset
  int32_t typeClass = -1;
  int32_t typeSigned = 0;
  uint64_t typeSize = 0;
  int32_t rank = -1; ///< -1: the dataspace could not be read
  int32_t layout = -1;
  hsize_t dims[kMaxRank] = {}, maxdims[kMaxRank] = {};
  int32_t externalCount = 0;
  int32_t chunkRank = -1; ///< H5Pget_chunk's answer (chunked layouts)
  uint64_t storageSize = 0; ///< contiguous and compact layouts without external files
  hsize_t chunk[kMaxRank] = {};
  int32_t nfilters = 0;
  int32_t pad = 0;
  struct Filter {
    int32_t id = 0;
    int32_t available = 0;
    char name[64] = {};
  } filters[kMaxFilters];
  AttributeFacts resolution, offset;
};

/// A box of the dataset, in the file's axes, read as voxels of `type`.
struct ReadRequest {
  uint32_t type = 0; ///< VoxelType
  uint32_t rank = 0;
  hsize_t start[kMaxRank] = {}, count[kMaxRank] = {};
  /// Chunked layouts: the chunk read (its first element), and the bytes it must be stored
  /// with unless never written (H5Dget_chunk_storage_size: a lookup in the chunk index;
  /// H5Dget_chunk_info_by_coord walks the whole index each time); 0: not checked.
  hsize_t chunk[kMaxRank] = {};
  uint64_t storedBytes = 0;
  hsize_t box[3] = {}; ///< the box's D, H, W: the memory's shape (libhdf5 copies a box
                       ///< into a buffer of the same shape fast, into a flat one slowly)
};

/// MEDRUN_HDF5_TEST_FAULT: the child fails so on one kind of request, or the zygote when
/// asked to start the child (op kStart; tests only).
constexpr uint32_t kStart = kOps, kNoFault = kOps + 1;
struct Fault {
  enum Action : uint32_t { None, Segv, Abort, Hang, Exit, Short, Long } action = None;
  uint32_t op = kNoFault;
};

const char *const kFaultNames[] = {"", "segv", "abort", "hang", "exit", "short", "long"};
const char *const kFaultOps[kOps + 1] = {"open", "list", "dataset", "read", "start"};

Fault faultFromEnvironment() {
  Fault f;
  const char *env = std::getenv("MEDRUN_HDF5_TEST_FAULT");
  if (!env || !*env)
    return f;
  const std::string s = env;
  const size_t colon = s.find(':');
  for (uint32_t a = 1; a <= Fault::Long; ++a)
    if (s.compare(0, colon, kFaultNames[a]) == 0)
      f.action = static_cast<Fault::Action>(a);
  for (uint32_t o = 0; colon != std::string::npos && o <= kStart; ++o)
    if (s.compare(colon + 1, std::string::npos, kFaultOps[o]) == 0)
      f.op = o;
  if (f.action == Fault::None || f.op > kStart)
    throw Error(str("MEDRUN_HDF5_TEST_FAULT: expected ACTION:REQUEST (ACTION segv, abort, hang, "
                    "exit, short or long; REQUEST open, list, dataset, read or start), got '",
                    s, "'"));
  return f;
}

double timeoutFromEnvironment() {
  const char *env = std::getenv("MEDRUN_HDF5_TIMEOUT");
  if (!env || !*env)
    return 120;
  char *end = nullptr;
  const double t = std::strtod(env, &end);
  if (*end != '\0' || !(t > 0) || !std::isfinite(t) || t > 1e6)
    throw Error(str("MEDRUN_HDF5_TIMEOUT: expected the seconds libhdf5 may take for one request "
                    "(a number > 0, at most 1e6), got '", env, "'"));
  return t;
}

// ---- the child -------------------------------------------------------------------------

/// Reads n bytes; the parent gone (EOF) or an error ends the child.
void childRead(int fd, void *buf, size_t n) {
  char *p = static_cast<char *>(buf);
  while (n > 0) {
    const ssize_t got = ::read(fd, p, n);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      ::_exit(0);
    p += got, n -= static_cast<size_t>(got);
  }
}

/// Sends an answer; the fault hook's `short` and `long` misstate its size by one byte.
void childReply(int fd, Status status, const void *data, uint64_t bytes, const Fault &fault,
                uint32_t op, uint64_t detail = 0) {
  ReplyHead head;
  head.status = status;
  head.detail = detail;
  head.bytes = status == kOk ? bytes : 0;
  const char extra = 0;
  if (fault.op == op && fault.action == Fault::Short && head.bytes > 0)
    --head.bytes;
  if (fault.op == op && fault.action == Fault::Long)
    ++head.bytes;
  // The head and the answer in one message: the parent wakes once.
  iovec parts[3] = {{&head, sizeof head},
                    {const_cast<void *>(data),
                     static_cast<size_t>(std::min<uint64_t>(head.bytes, bytes))},
                    {const_cast<char *>(&extra), head.bytes > bytes ? size_t(1) : size_t(0)}};
  msghdr message = {};
  message.msg_iov = parts;
  message.msg_iovlen = 3;
  size_t left = parts[0].iov_len + parts[1].iov_len + parts[2].iov_len;
  while (left > 0) {
    const ssize_t put = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR)
      continue;
    if (put <= 0)
      ::_exit(0);
    left -= static_cast<size_t>(put);
    for (size_t n = static_cast<size_t>(put); n > 0;) { // skip what was sent
      const size_t step = std::min(n, message.msg_iov->iov_len);
      message.msg_iov->iov_base = static_cast<char *>(message.msg_iov->iov_base) + step;
      message.msg_iov->iov_len -= step;
      n -= step;
      if (message.msg_iov->iov_len == 0 && message.msg_iovlen > 1)
        ++message.msg_iov, --message.msg_iovlen;
    }
  }
}

void childFault(const Fault &fault, uint32_t op) {
  if (fault.op != op)
    return;
  switch (fault.action) {
  case Fault::Segv: ::raise(SIGSEGV); break;
  case Fault::Abort: ::abort();
  case Fault::Hang:
    for (;;)
      ::pause();
  case Fault::Exit: ::_exit(3);
  default: break;
  }
}

#ifdef MEDRUN_HAVE_ZLIB
/// The bytes a gzip chunk of the dataset being read decodes to (0: not known), and what
/// the last one that did not decoded to.
uint64_t inflateExpected = 0;
uint64_t inflateGot = 0;

/// The child's deflate filter (replacing libhdf5's, H5Z_FILTER_DEFLATE): libhdf5 1.10's
/// decodes whatever the stream holds and then copies a whole chunk out of it, reading past
/// a short one (docs/reliability.md). This one decodes as it does (zlib, the same stream),
/// refusing a chunk that decodes to another size than the chunk's where that is known.
/// Buffers are libhdf5's (H5allocate_memory), as its filter interface requires.
size_t checkedInflate(unsigned flags, size_t, const unsigned[], size_t nbytes, size_t *bufSize,
                      void **buf) {
  if (!(flags & H5Z_FLAG_REVERSE) || nbytes > UINT32_MAX)
    return 0; // the child never writes
  const uint64_t limit = 2 * kMaxDecodedChunkBytes;
  size_t capacity = inflateExpected ? inflateExpected + 1 : std::max<size_t>(*bufSize, 64);
  void *out = H5allocate_memory(capacity, false);
  if (!out)
    return 0;
  z_stream z = {};
  z.next_in = static_cast<Bytef *>(*buf);
  z.avail_in = static_cast<uInt>(nbytes);
  z.next_out = static_cast<Bytef *>(out);
  z.avail_out = static_cast<uInt>(capacity);
  if (inflateInit(&z) != Z_OK) {
    H5free_memory(out);
    return 0;
  }
  int status;
  while ((status = inflate(&z, Z_SYNC_FLUSH)) == Z_OK && z.avail_out == 0) {
    if (inflateExpected || capacity >= limit)
      break; // more than the chunk's bytes (or than any chunk's)
    void *grown = H5resize_memory(out, capacity * 2);
    if (!grown)
      break;
    out = grown;
    z.next_out = static_cast<Bytef *>(out) + capacity;
    z.avail_out = static_cast<uInt>(capacity);
    capacity *= 2;
  }
  const uint64_t got = z.total_out;
  inflateEnd(&z);
  if (status != Z_STREAM_END || (inflateExpected && got != inflateExpected)) {
    if (status == Z_STREAM_END || (inflateExpected && got > inflateExpected))
      inflateGot = got;
    H5free_memory(out);
    return 0;
  }
  H5free_memory(*buf);
  *buf = out;
  *bufSize = capacity;
  return got;
}

/// What a dataset's gzip filter must decode to: the chunk's bytes, grown by the filters
/// applied before it when writing (fletcher32: 4, shuffle: 0); 0 where another filter
/// comes first or gzip is applied twice.
uint64_t gzipDecodes(const DatasetFacts &f) {
  if (f.layout != H5D_CHUNKED || f.chunkRank != f.rank || f.rank < 1)
    return 0;
  uint64_t bytes = f.typeSize, expected = 0;
  for (int a = 0; a < f.rank; ++a)
    if (__builtin_mul_overflow(bytes, f.chunk[a], &bytes) || bytes > kMaxDecodedChunkBytes)
      return 0;
  for (int i = 0; i < f.nfilters; ++i) {
    const int id = f.filters[i].id;
    if (id == H5Z_FILTER_DEFLATE) {
      if (expected)
        return 0;
      expected = bytes;
    } else if (id == H5Z_FILTER_FLETCHER32) {
      bytes += 4;
    } else if (id != H5Z_FILTER_SHUFFLE) {
      bytes = 0; // the sizes after this are not known
      if (!expected)
        return 0;
    }
  }
  return expected;
}
#endif

herr_t collectDataset(hid_t, const char *name, const H5O_info_t *info, void *out) {
  // Datasets still being written (Hdf5Writer's temporary names) are not offered.
  auto *names = static_cast<std::vector<std::string> *>(out);
  if (names->size() >= (1 << 20))
    return 1; // enough (the parent bounds the answer)
  if (info->type == H5O_TYPE_DATASET && std::strcmp(name, ".") != 0 && !isPartial(name))
    names->push_back(name);
  return 0;
}

AttributeFacts childAttribute(hid_t obj, const char *name) {
  AttributeFacts a;
  if (H5Aexists(obj, name) <= 0)
    return a;
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  Handle space(H5Aget_space(attr.get()), H5Sclose);
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_INTEGER && cls != H5T_FLOAT)
    return a;
  hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 1 || n > kMaxAttribute)
    return a;
  if (H5Aread(attr.get(), H5T_NATIVE_DOUBLE, a.v) < 0)
    return a;
  a.n = static_cast<int32_t>(n);
  return a;
}

DatasetFacts childDataset(hid_t file, const std::string &key, Handle &dset) {
  DatasetFacts f;
  dset = Handle();
  f.exists = exists(file, key);
  if (!f.exists)
    return f;
  dset = Handle(H5Dopen2(file, key.c_str(), H5P_DEFAULT), H5Dclose);
  {
    // An unfiltered chunked dataset is read without libhdf5's chunk cache (the reader's
    // ChunkCache keeps decoded chunks): its chunks are then read from the file straight,
    // as the layout's chunk size, where through the cache libhdf5 1.10 allocates the size
    // the chunk's index entry states and copies a whole chunk out of that (a heap over-read
    // on a malformed entry). Filtered chunks keep the cache, which spares a fresh decode
    // buffer (page faults) per chunk.
    Handle dcpl(dset.valid() ? H5Dget_create_plist(dset.get()) : -1, H5Pclose);
    if (dcpl.valid() && H5Pget_layout(dcpl.get()) == H5D_CHUNKED &&
        H5Pget_nfilters(dcpl.get()) == 0) {
      Handle dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
      if (!dapl.valid() || H5Pset_chunk_cache(dapl.get(), 1, 0, H5D_CHUNK_CACHE_W0_DEFAULT) < 0)
        ::_exit(kExitSetup);
      dcpl = Handle();
      dset = Handle(); // closed first: an open dataset's second open shares its cache
      dset = Handle(H5Dopen2(file, key.c_str(), dapl.get()), H5Dclose);
    }
  }
  f.isDataset = dset.valid();
  if (!f.isDataset)
    return f;
  Handle type(H5Dget_type(dset.get()), H5Tclose);
  f.typeClass = H5Tget_class(type.get());
  f.typeSize = H5Tget_size(type.get());
  f.typeSigned = f.typeClass == H5T_INTEGER && H5Tget_sign(type.get()) == H5T_SGN_2;
  Handle space(H5Dget_space(dset.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank >= 0 && rank <= kMaxRank &&
      H5Sget_simple_extent_dims(space.get(), f.dims, f.maxdims) >= 0)
    f.rank = rank;
  Handle dcpl(H5Dget_create_plist(dset.get()), H5Pclose);
  f.layout = H5Pget_layout(dcpl.get());
  f.externalCount = H5Pget_external_count(dcpl.get());
  if ((f.layout == H5D_CONTIGUOUS || f.layout == H5D_COMPACT) && f.externalCount <= 0)
    f.storageSize = H5Dget_storage_size(dset.get());
  f.nfilters = std::clamp(H5Pget_nfilters(dcpl.get()), 0, kMaxFilters);
  for (int i = 0; i < f.nfilters; ++i) {
    unsigned flags = 0, config = 0;
    size_t nelem = 0;
    DatasetFacts::Filter &x = f.filters[i];
    x.id = H5Pget_filter2(dcpl.get(), i, &flags, &nelem, nullptr, sizeof x.name, x.name, &config);
    x.available = H5Zfilter_avail(x.id) > 0;
  }
  if (f.layout == H5D_CHUNKED && f.rank >= 0)
    f.chunkRank = H5Pget_chunk(dcpl.get(), f.rank, f.chunk);
  f.resolution = childAttribute(dset.get(), "resolution");
  f.offset = childAttribute(dset.get(), "offset");
  return f;
}

/// A small HDF5 file of the zygote's own making (a chunked gzip dataset with an attribute,
/// as the writers make them), as bytes: libhdf5 writes it in memory (the core driver).
/// Made before the checked gzip filter replaces libhdf5's (which then writes no more).
/// Empty if libhdf5 could not make it.
std::vector<char> warmUpImage() {
  Handle mem(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!mem.valid() || H5Pset_fapl_core(mem.get(), 1 << 16, false) < 0)
    return {};
  // No file of this name can exist (libhdf5 first tries to open one by the name given, to
  // find a file it has open already; the core driver would read it into memory).
  Handle file(H5Fcreate("/dev/null/hdf5-zygote-warm-up.h5", H5F_ACC_TRUNC, H5P_DEFAULT,
                        mem.get()),
              H5Fclose);
  const hsize_t dims[3] = {8, 8, 8}, chunk[3] = {4, 4, 4}, three = 3;
  Handle space(H5Screate_simple(3, dims, nullptr), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (!file.valid() || !space.valid() || !dcpl.valid() || H5Pset_chunk(dcpl.get(), 3, chunk) < 0 ||
      H5Pset_deflate(dcpl.get(), 1) < 0)
    return {};
  Handle dset(H5Dcreate2(file.get(), "x", H5T_NATIVE_UINT16, space.get(), H5P_DEFAULT,
                         dcpl.get(), H5P_DEFAULT),
              H5Dclose);
  uint16_t values[8 * 8 * 8];
  for (size_t i = 0; i < 8 * 8 * 8; ++i)
    values[i] = static_cast<uint16_t>(i);
  const double spacing[3] = {1, 1, 1};
  Handle aspace(H5Screate_simple(1, &three, nullptr), H5Sclose);
  Handle attr(dset.valid() ? H5Acreate2(dset.get(), "resolution", H5T_NATIVE_DOUBLE,
                                        aspace.get(), H5P_DEFAULT, H5P_DEFAULT)
                           : -1,
              H5Aclose);
  if (!attr.valid() || H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, spacing) < 0 ||
      H5Dwrite(dset.get(), H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) < 0 ||
      H5Fflush(file.get(), H5F_SCOPE_LOCAL) < 0)
    return {};
  const ssize_t bytes = H5Fget_file_image(file.get(), nullptr, 0);
  std::vector<char> image(bytes > 0 && bytes < (1 << 20) ? static_cast<size_t>(bytes) : 0);
  if (image.empty() || H5Fget_file_image(file.get(), image.data(), image.size()) != bytes)
    return {};
  return image;
}

/// Reads `image` once as a child reads a file (opened from memory with the core driver,
/// listed, its dataset's metadata taken, a chunk decoded through the checked gzip filter)
/// and closes it: every child then starts with libhdf5's packages initialized, its symbols
/// bound and its free lists holding blocks, work each child otherwise did again (a fifth
/// of its page faults under ASan). Best effort: a step that fails ends the warm-up, never
/// the zygote.
void warmUp(const std::vector<char> &image) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.valid() || H5Pset_fapl_core(fapl.get(), 1 << 16, false) < 0 ||
      H5Pset_file_image(fapl.get(), const_cast<char *>(image.data()), image.size()) < 0 ||
      H5Pset_file_locking(fapl.get(), false, true) < 0)
    return;
  // A name no file can have (the core driver makes sure none exists before it opens an image).
  Handle file(H5Fopen("/dev/null/hdf5-zygote-warm-up.h5", H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  std::vector<std::string> names;
  if (!file.valid() ||
      H5Ovisit(file.get(), H5_INDEX_NAME, H5_ITER_INC, collectDataset, &names) < 0 ||
      names.size() != 1)
    return;
  Handle dset;
  const DatasetFacts f = childDataset(file.get(), names[0], dset);
#ifdef MEDRUN_HAVE_ZLIB
  inflateExpected = gzipDecodes(f);
#endif
  hsize_t start[3] = {0, 0, 0}, count[3] = {4, 4, 4}, stored = 0;
  uint16_t chunk[4 * 4 * 4];
  Handle fspace(f.isDataset ? H5Dget_space(dset.get()) : -1, H5Sclose);
  Handle mspace(H5Screate_simple(3, count, nullptr), H5Sclose);
  if (fspace.valid() && mspace.valid() &&
      H5Dget_chunk_storage_size(dset.get(), start, &stored) >= 0 &&
      H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr) >= 0)
    H5Dread(dset.get(), H5T_NATIVE_UINT16, mspace.get(), fspace.get(), H5P_DEFAULT, chunk);
#ifdef MEDRUN_HAVE_ZLIB
  inflateExpected = 0;
#endif
}

/// The process name the zygote and its children show (ps, /proc/PID/comm).
constexpr const char *kZygoteName = "hdf5-zygote";
constexpr const char *kChildName = "hdf5-reader";

/// Keeps descriptor `keep` as 3, stderr, and /dev/null as stdin and stdout; closes every
/// other one (the parent's files, sockets, locks, pipes whose readers wait for EOF).
bool keepOnly(int keep) {
  bool ok = keep == 3 || ::dup2(keep, 3) == 3;
  const int null = ::open("/dev/null", O_RDWR);
  ok = ok && null >= 0 && ::dup2(null, 0) == 0 && ::dup2(null, 1) == 1;
  if (::close_range(4, ~0U, 0) != 0) {
    struct rlimit files = {};
    ok = ok && ::getrlimit(RLIMIT_NOFILE, &files) == 0;
    for (rlim_t fd = 4; ok && fd < std::min<rlim_t>(files.rlim_cur, 1 << 20); ++fd)
      ::close(static_cast<int>(fd)); // EBADF for most: nothing to check
  }
  return ok;
}

/// What every child opens its file with, set up once by the zygote before it starts any
/// (it was each child's first work, a third of its CPU under ASan: the property list's
/// creation, libhdf5's filter package initialized and the checked gzip filter registered,
/// symbols bound). No file is opened here. -1 if it could not be set up.
hid_t childFileAccess() {
  // Files the parent writes: libhdf5 shares a file between opens of it, so one the parent
  // has open for writing (its descriptor closed here) would be shared with the state the
  // child inherited; while that state holds files, the stdio driver (which libhdf5 never
  // matches with sec2's files) opens it afresh. The child takes no file lock: in-process,
  // a reader and a writer of one file shared it, and a writer must still open a file its
  // process reads (`infer --image x.h5/raw -o x.h5/pred`).
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.valid() || H5Pset_file_locking(fapl.get(), false, true) < 0)
    return -1;
  if (H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE) > 0 && H5Pset_fapl_stdio(fapl.get()) < 0)
    return -1;
#ifdef MEDRUN_HAVE_ZLIB
  // The checked gzip filter replaces libhdf5's. H5Zregister refuses to replace a filter of
  // libhdf5's own; H5Z_register, the library's internal registration behind it (exported
  // by libhdf5 1.10 to 1.14), replaces an entry of its table. Where it is not found, gzip
  // chunks are decoded by libhdf5's filter, contained by the child process only.
  using RegisterFilter = herr_t (*)(const H5Z_class2_t *);
  static const H5Z_class2_t gzip = {H5Z_CLASS_T_VERS, H5Z_FILTER_DEFLATE, 1, 1,
                                    "deflate (medrun: decoded sizes checked)", nullptr, nullptr,
                                    checkedInflate};
  if (auto reg = reinterpret_cast<RegisterFilter>(::dlsym(RTLD_DEFAULT, "H5Z_register")))
    if (reg(&gzip) < 0)
      return -1;
#endif
  return fapl.release();
}

/// The child's life: open `path` with `fapl` (childFileAccess), answer requests until the
/// parent closes the socket. Forked by the zygote (single-threaded), whose signal
/// dispositions, mask, limits and libhdf5 set-up it keeps; it dies with the zygote
/// (PR_SET_PDEATHSIG). Never returns.
[[noreturn]] void childMain(int sock, const char *path, pid_t zygote, hid_t fapl,
                            const Fault &fault) {
  bool ok = ::prctl(PR_SET_PDEATHSIG, SIGKILL) == 0;
  if (::getppid() != zygote) // the zygote died before prctl
    ::_exit(0);
  ::prctl(PR_SET_NAME, kChildName);
  // The socket as 3, stderr kept (sanitizer reports), stdin and stdout on /dev/null; the
  // zygote's own socket closed.
  ok = ok && keepOnly(sock);
  if (!ok)
    ::_exit(kExitSetup);
  sock = 3;

  childFault(fault, kOpen);
  Handle file(H5Fopen(path, H5F_ACC_RDONLY, fapl), H5Fclose);
  childReply(sock, file.valid() ? kOk : kFailed, nullptr, 0, fault, kOpen);
  if (!file.valid())
    ::_exit(0);

  Handle dset;
  std::vector<char> buffer;
  for (;;) {
    RequestHead head;
    childRead(sock, &head, sizeof head);
    if (head.op >= kOps || head.bytes > kMaxRequestBytes)
      ::_exit(kExitSetup);
    std::vector<char> request(head.bytes);
    childRead(sock, request.data(), request.size());
    childFault(fault, head.op);
    switch (head.op) {
    case kList: {
      std::vector<std::string> names;
      H5Ovisit(file.get(), H5_INDEX_NAME, H5_ITER_INC, collectDataset, &names);
      std::string out;
      for (const std::string &n : names) {
        const uint32_t len = static_cast<uint32_t>(n.size());
        out.append(reinterpret_cast<const char *>(&len), sizeof len);
        out += n;
        if (out.size() > kMaxListBytes / 2)
          break;
      }
      childReply(sock, kOk, out.data(), out.size(), fault, head.op);
      break;
    }
    case kDataset: {
      const DatasetFacts f =
          childDataset(file.get(), std::string(request.begin(), request.end()), dset);
#ifdef MEDRUN_HAVE_ZLIB
      inflateExpected = gzipDecodes(f);
#endif
      childReply(sock, kOk, &f, sizeof f, fault, head.op);
      break;
    }
    case kRead: {
      ReadRequest r;
      Status s = kFailed;
      uint64_t bytes = 0, detail = 0;
      hsize_t stored = 0;
      if (dset.valid() && request.size() == sizeof r)
        std::memcpy(&r, request.data(), sizeof r);
      if (dset.valid() && request.size() == sizeof r && r.rank <= kMaxRank) {
        const VoxelType type = static_cast<VoxelType>(r.type);
        bytes = voxelSize(type);
        for (uint32_t a = 0; a < r.rank && a < kMaxRank; ++a)
          bytes *= r.count[a]; // the parent asks for one chunk (at most 1 GiB)
        if (buffer.size() < bytes && bytes <= kMaxDecodedChunkBytes) {
          buffer.clear();
          buffer.shrink_to_fit();
          try {
            buffer.resize(bytes);
          } catch (...) {
          }
        }
        if (r.storedBytes && H5Dget_chunk_storage_size(dset.get(), r.chunk, &stored) >= 0 &&
            stored != 0 && stored != r.storedBytes) {
          s = kBadStored; // libhdf5 would copy a whole chunk out of it
          detail = stored;
        } else if (buffer.size() < bytes) {
          s = kNoMemory;
        } else {
          Handle fspace(H5Dget_space(dset.get()), H5Sclose);
          Handle mspace(H5Screate_simple(3, r.box, nullptr), H5Sclose);
#ifdef MEDRUN_HAVE_ZLIB
          inflateGot = UINT64_MAX;
#endif
          if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, r.start, nullptr, r.count,
                                  nullptr) >= 0 &&
              H5Dread(dset.get(), nativeType(type), mspace.get(), fspace.get(), H5P_DEFAULT,
                      buffer.data()) >= 0)
            s = kOk;
#ifdef MEDRUN_HAVE_ZLIB
          if (s != kOk && inflateGot != UINT64_MAX) {
            s = kBadChunk;
            detail = inflateGot;
          }
#endif
        }
      }
      childReply(sock, s, buffer.data(), bytes, fault, head.op, detail);
      break;
    }
    default: ::_exit(kExitSetup);
    }
  }
}

// ---- the zygote --------------------------------------------------------------------------
//
// One single-threaded process per process that reads HDF5, forked from it once (at its
// first reader's open) and asked to fork each reader's child: a fork of the large,
// threaded, sanitized process per reader was slow (and each child held the parent's pages
// as they were at its fork for its whole life). The zygote sends the parent its end of the
// child's socket (SCM_RIGHTS), and ends and reaps the child when the parent asks.

/// kZygoteEnd kills a child and answers its wait status once reaped (a failed reader: its
/// error says how the child ended); kZygoteRelease kills it and answers at once, reaping it
/// afterwards (a reader's normal end: the parent does not wait for the child's exit, which
/// under ASan is several milliseconds of unmapping).
enum ZygoteOp : uint32_t { kZygoteStart, kZygoteEnd, kZygoteRelease };
constexpr size_t kMaxPathBytes = 1 << 14;

/// A request to the zygote, in one message of a SOCK_SEQPACKET socket.
struct ZygoteRequest {
  uint32_t op = 0;
  int32_t pid = 0;          ///< kZygoteEnd, kZygoteRelease: the child to end
  uint32_t faultAction = 0; ///< kZygoteStart: the test fault (Fault), for the child or,
  uint32_t faultOp = 0;     ///< with op kStart, for the zygote itself
};                          ///< kZygoteStart: the file's path follows (no NUL)

/// The zygote's answer, in one message: kZygoteStart passes the parent's end of the
/// child's socket with it.
struct ZygoteReply {
  int32_t pid = -1;   ///< kZygoteStart: the child; -1: not started, then
  int32_t error = 0;  ///< the errno of the socketpair or fork that failed
  int32_t known = 0;  ///< kZygoteEnd, kZygoteRelease: 1 if the pid was a child of the
  int32_t status = 0; ///< zygote's, and then (kZygoteEnd) its wait status
};

/// The zygote's life: set up once what every child inherits (signals, limits,
/// descriptors), then start and end children for the parent until it closes the socket
/// or dies. Never returns.
[[noreturn]] void zygoteMain(int control, pid_t parent, bool forkedByMainThread) {
  // Signals: a crash kills the zygote or a child with its signal (no inherited handler: the
  // parent's, libFuzzer's or the sanitizers'); the terminal's and a scheduler's signals are
  // for the parent, which ends them itself. No core files.
  if (__sanitizer_set_death_callback)
    __sanitizer_set_death_callback(nullptr);
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  struct sigaction ign = dfl;
  ign.sa_handler = SIG_IGN;
  bool ok = true;
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS, SIGXCPU, SIGXFSZ,
                SIGCHLD, SIGALRM})
    ok = ok && ::sigaction(s, &dfl, nullptr) == 0;
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE})
    ok = ok && ::sigaction(s, &ign, nullptr) == 0;
  sigset_t none;
  sigemptyset(&none);
  ok = ok && ::pthread_sigmask(SIG_SETMASK, &none, nullptr) == 0;
  const struct rlimit noCore = {0, 0};
  ok = ok && ::setrlimit(RLIMIT_CORE, &noCore) == 0;
  // Ends with the parent: at once where its main thread forked (the signal follows the
  // forking *thread*, and readers are also opened by parallelFor's short-lived workers),
  // else at EOF on its socket or, where a fork of the parent holds the socket's other end,
  // within a second (the poll below).
  if (forkedByMainThread)
    ok = ok && ::prctl(PR_SET_PDEATHSIG, SIGKILL) == 0;
  if (::getppid() != parent) // the parent died before prctl
    ::_exit(0);
  ::prctl(PR_SET_NAME, kZygoteName);
  ok = ok && keepOnly(control);
  if (!ok)
    ::_exit(kExitSetup);
  control = 3;
  // What every child would otherwise set up for itself: the file access, and libhdf5's
  // reading path run once on a file of the zygote's own (no file of the parent's is opened).
  // libhdf5 prints no error (the parent reports them): quiet() ran in the parent, but a
  // thread-safe libhdf5 keeps that setting per thread, and the zygote's one thread is the
  // one that forked it (a data worker's, say).
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const std::vector<char> image = warmUpImage();
  const hid_t fapl = childFileAccess();
  if (fapl < 0)
    ::_exit(kExitSetup);
  if (!image.empty())
    warmUp(image);

  const pid_t self = ::getpid();
  std::vector<pid_t> children; // started and not yet ended
  std::vector<pid_t> ending;   // released: killed, not yet reaped
  std::vector<char> message(sizeof(ZygoteRequest) + kMaxPathBytes);
  for (;;) {
    pollfd pfd = {control, POLLIN, 0};
    // Released children are reaped as they end (checked every 2 ms while there are any).
    for (size_t i = 0; i < ending.size();) {
      const pid_t r = ::waitpid(ending[i], nullptr, WNOHANG);
      if (r == ending[i] || (r < 0 && errno == ECHILD))
        ending.erase(ending.begin() + static_cast<std::ptrdiff_t>(i));
      else
        ++i;
    }
    const int ready = ::poll(&pfd, 1, ending.empty() ? 1000 : 2);
    if (::getppid() != parent)
      ::_exit(0); // its children die with it (PR_SET_PDEATHSIG)
    if (ready <= 0)
      continue;
    const ssize_t n = ::recv(control, message.data(), message.size(), MSG_TRUNC);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      ::_exit(0); // the parent closed its end, or is gone
    ZygoteRequest request;
    if (static_cast<size_t>(n) < sizeof request || static_cast<size_t>(n) > message.size())
      ::_exit(kExitSetup);
    std::memcpy(&request, message.data(), sizeof request);
    ZygoteReply reply;
    int passed = -1;
    size_t replyBytes = sizeof reply;
    if (request.op == kZygoteStart) {
      Fault fault;
      if (request.faultAction > Fault::Long || request.faultOp > kNoFault)
        ::_exit(kExitSetup);
      fault.action = static_cast<Fault::Action>(request.faultAction);
      fault.op = request.faultOp;
      childFault(fault, kStart); // the zygote crashes, hangs or exits (tests)
      if (fault.op == kStart && fault.action == Fault::Short)
        --replyBytes;
      if (fault.op == kStart && fault.action == Fault::Long)
        ++replyBytes;
      const std::string path(message.data() + sizeof request, n - sizeof request);
      int fds[2] = {-1, -1};
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        reply.error = errno;
      } else {
        // _Fork: no fork handlers (the sanitizers' lock and walk their whole state in
        // them); this process has one thread, in none of those locks.
        const pid_t pid = ::_Fork();
        if (pid == 0)
          childMain(fds[1], path.c_str(), self, fapl, fault);
        reply.error = pid < 0 ? errno : 0;
        ::close(fds[1]);
        if (pid > 0) {
          reply.pid = pid;
          passed = fds[0];
          children.push_back(pid);
        } else {
          ::close(fds[0]);
        }
      }
    } else if (request.op == kZygoteEnd || request.op == kZygoteRelease) {
      // Only a child of its own (a pid the parent got from an earlier zygote may be reused).
      auto it = std::find(children.begin(), children.end(), request.pid);
      if (it != children.end() && request.pid > 0 && request.op == kZygoteRelease) {
        children.erase(it);
        ::kill(request.pid, SIGKILL);
        ending.push_back(request.pid);
        reply.known = 1;
      } else if (it != children.end() && request.pid > 0) {
        children.erase(it);
        ::kill(request.pid, SIGKILL); // one that died already keeps the status it died with
        int status = 0;
        pid_t r;
        while ((r = ::waitpid(request.pid, &status, 0)) < 0 && errno == EINTR) {
        }
        reply.known = r == request.pid;
        reply.status = status;
      }
    } else {
      ::_exit(kExitSetup);
    }
    char out[sizeof reply + 1] = {};
    std::memcpy(out, &reply, sizeof reply);
    iovec part = {out, replyBytes};
    msghdr m = {};
    m.msg_iov = &part;
    m.msg_iovlen = 1;
    alignas(cmsghdr) char control_[CMSG_SPACE(sizeof(int))] = {};
    if (passed >= 0) {
      m.msg_control = control_;
      m.msg_controllen = sizeof control_;
      cmsghdr *c = CMSG_FIRSTHDR(&m);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &passed, sizeof passed);
    }
    ssize_t put;
    while ((put = ::sendmsg(control, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    if (passed >= 0)
      ::close(passed);
    if (put < 0)
      ::_exit(0); // the parent is gone
  }
}

/// This process's link to its zygote. A fork of this process (without exec) inherits it
/// and starts a zygote of its own.
struct Zygote {
  std::mutex mutex;         ///< one request at a time (readers open on several threads)
  pid_t pid = -1;           ///< -1: none (started by the next reader's open)
  int fd = -1;              ///< our end of its socket (SOCK_SEQPACKET, close-on-exec)
  pid_t owner = -1;         ///< the process that forked it
  uint64_t generation = 0;  ///< zygotes started: a child is ended by its own zygote only
};

Zygote &zygote() {
  static auto *z = new Zygote; // never destroyed: readers may close at exit
  return *z;
}

/// A reader's child, started by the zygote.
struct ZygoteChild {
  pid_t pid = -1;
  int fd = -1; ///< our end of its socket (close-on-exec)
  uint64_t generation = 0;
};

/// Describes a wait status ("crashed (signal 11, Segmentation fault)").
std::string endedHow(int status) {
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) // ours, the OOM killer's, a user's
    return "was killed by signal 9 (Killed)";
  if (WIFSIGNALED(status))
    return str("crashed (signal ", WTERMSIG(status), ", ", strsignal(WTERMSIG(status)), ")");
  if (WIFEXITED(status) && WEXITSTATUS(status) == kExitSetup)
    return "could not set itself up (signals, descriptors)";
  if (WIFEXITED(status))
    return str("exited with status ", WEXITSTATUS(status));
  return "ended";
}

/// Kills and reaps the zygote (its children die with it). How it ended: `why` where it
/// was ended for a reason of ours, else its wait status.
std::string zygoteStop(Zygote &z, const std::string &why) {
  ::close(z.fd);
  ::kill(z.pid, SIGKILL);
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(z.pid, &status, 0)) < 0 && errno == EINTR) {
  }
  const std::string how =
      str("(pid ", z.pid, ") ", !why.empty() ? why : r == z.pid ? endedHow(status) : "ended");
  z.pid = -1;
  z.fd = -1;
  return how;
}

/// Forks the zygote: under hdf5Lock() (no thread of ours inside libhdf5, whose global lock
/// would stay taken in the copy) and with libhdf5 initialized, once for every child.
void zygoteFork(Zygote &z, const std::string &path) {
  int fds[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    throw Error(str(path, ": cannot start the HDF5 zygote process (socketpair: ",
                    std::strerror(errno), ")"));
  const pid_t parent = ::getpid();
  const bool mainThread = ::gettid() == parent;
  pid_t pid;
  int forkErrno;
  {
    std::lock_guard<std::recursive_mutex> lock(hdf5Lock());
    quiet();
    pid = ::fork();
    forkErrno = errno;
    if (pid == 0) {
      ::close(fds[0]);
      zygoteMain(fds[1], parent, mainThread);
    }
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    throw Error(str(path, ": cannot start the HDF5 zygote process (fork: ",
                    std::strerror(forkErrno), ")"));
  }
  z.pid = pid;
  z.fd = fds[0];
  z.owner = parent;
  ++z.generation;
}

/// Sends one request and waits for the answer and the descriptor passed with it (-1:
/// none). False if the zygote failed: `why` says how, or is empty where it is gone.
bool zygoteCall(Zygote &z, const ZygoteRequest &request, const std::string &path,
                double timeout, ZygoteReply &reply, int &passed, std::string &why) {
  passed = -1;
  iovec parts[2] = {{const_cast<ZygoteRequest *>(&request), sizeof request},
                    {const_cast<char *>(path.data()), path.size()}};
  msghdr out = {};
  out.msg_iov = parts;
  out.msg_iovlen = 2;
  ssize_t put;
  while ((put = ::sendmsg(z.fd, &out, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (put != static_cast<ssize_t>(sizeof request + path.size()))
    return false; // EPIPE, ECONNRESET: gone
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout));
  for (;;) {
    ZygoteReply r;
    char extra = 0;
    iovec in[2] = {{&r, sizeof r}, {&extra, 1}};
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
    msghdr m = {};
    m.msg_iov = in;
    m.msg_iovlen = 2;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(z.fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        why = str("did not answer within ", timeout, " s (MEDRUN_HDF5_TIMEOUT sets the limit)");
        return false;
      }
      pollfd pfd = {z.fd, POLLIN, 0};
      ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30)));
      continue;
    }
    if (n <= 0)
      return false; // EOF: gone
    std::vector<int> fds;
    for (cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
          fds.push_back(fd);
        }
    if (n != sizeof r || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || fds.size() > 1) {
      for (int fd : fds)
        ::close(fd);
      why = str("answered wrongly (", n, " bytes, expected ", sizeof r, "; ", fds.size(),
                " descriptors)");
      return false;
    }
    reply = r;
    passed = fds.empty() ? -1 : fds[0];
    return true;
  }
}

/// Has the zygote start a child reading `path` (forking the zygote first where there is
/// none, and again once where the one there was has ended since). Error naming `path`.
ZygoteChild zygoteStart(const std::string &path, const Fault &fault, double timeout) {
  if (path.size() > kMaxPathBytes)
    throw Error(str(path.substr(0, 64), "...: a path longer than ", kMaxPathBytes, " bytes"));
  Zygote &z = zygote();
  std::lock_guard<std::mutex> lock(z.mutex);
  if (z.owner != ::getpid()) { // inherited by a fork: its parent's, not ours to use or reap
    if (z.fd >= 0)
      ::close(z.fd);
    z.pid = -1;
    z.fd = -1;
  }
  std::string previous; // how a zygote that had ended since its last request ended
  for (;;) {
    const bool fresh = z.pid < 0;
    if (fresh)
      zygoteFork(z, path);
    ZygoteRequest request;
    request.op = kZygoteStart;
    request.faultAction = fault.action;
    request.faultOp = fault.op;
    ZygoteReply reply;
    int fd = -1;
    std::string why;
    if (zygoteCall(z, request, path, timeout, reply, fd, why)) {
      if (reply.pid > 0 && fd >= 0 && reply.error == 0)
        return {reply.pid, fd, z.generation};
      if (reply.pid == -1 && fd < 0 && reply.error > 0)
        throw Error(str(path, ": cannot start the process that reads it with libhdf5 (fork in "
                              "the HDF5 zygote process: ", std::strerror(reply.error), ")"));
      if (fd >= 0)
        ::close(fd);
      why = str("answered wrongly (child ", reply.pid, ", error ", reply.error, ", ",
                fd >= 0 ? "with" : "without", " a descriptor)");
    }
    const std::string how = zygoteStop(z, why);
    if (!fresh) { // ended since its last request (killed, out of memory): started again
      previous = how;
      continue;
    }
    throw Error(str(path, ": cannot start the process that reads it with libhdf5: the HDF5 "
                          "zygote process ", how, " while starting it",
                    previous.empty() ? std::string()
                                     : str(" (started again: the previous one ", previous, ")")));
  }
}

/// Has the zygote kill and reap `child`: its wait status, or -1 with `gone` saying why it
/// is not known (its zygote ended, or failed now and was ended). Without `wait`, the zygote
/// answers once it has killed the child and reaps it later (the status is then 0).
int zygoteEnd(const ZygoteChild &child, double timeout, std::string &gone, bool wait) {
  Zygote &z = zygote();
  std::lock_guard<std::mutex> lock(z.mutex);
  if (z.owner != ::getpid() || z.pid < 0 || z.generation != child.generation) {
    gone = "it ended with the HDF5 zygote process that started it";
    return -1;
  }
  ZygoteRequest request;
  request.op = wait ? kZygoteEnd : kZygoteRelease;
  request.pid = child.pid;
  ZygoteReply reply;
  int fd = -1;
  std::string why;
  const bool answered = zygoteCall(z, request, std::string(), timeout, reply, fd, why);
  if (answered && fd < 0 && reply.known == 1)
    return reply.status;
  if (fd >= 0)
    ::close(fd);
  if (answered)
    why = fd >= 0 ? "answered wrongly (a descriptor with the answer)" : "did not know the child";
  gone = str("the HDF5 zygote process that started it ", zygoteStop(z, why));
  return -1;
}

// ---- the parent's side -----------------------------------------------------------------

/// A child reading one HDF5 file. Not thread-safe: the reader serializes its requests.
class Hdf5Process {
public:
  explicit Hdf5Process(const std::string &path) : path_(path) {
    timeout_ = timeoutFromEnvironment();
    const ZygoteChild child = zygoteStart(path_, faultFromEnvironment(), timeout_);
    pid_ = child.pid;
    fd_ = child.fd;
    generation_ = child.generation;
    // The child's first answer: whether libhdf5 opens the file.
    if (call(kOpen, nullptr, 0, "opening the file", 0).status != kOk) {
      end(); // the destructor does not run for a constructor that throws
      throw Error(str(path_, ": cannot open as an HDF5 file"));
    }
  }

  ~Hdf5Process() { end(); }

  struct Reply {
    uint32_t status = kOk;
    uint64_t detail = 0;
    std::vector<char> data;
  };

  /// Sends one request and waits for its answer: at most `maxBytes` bytes into
  /// Reply::data, or with `into`, exactly `maxBytes` bytes there (a kOk answer of another
  /// size is refused). Error naming the file and `what` if the child dies, does not
  /// answer in time or answers something malformed (it is killed then).
  Reply call(Op op, const void *request, size_t bytes, const std::string &what,
             uint64_t maxBytes, void *into = nullptr) {
    if (!failure_.empty())
      throw Error(failure_);
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout_));
    if (op != kOpen) {
      RequestHead head{op, static_cast<uint32_t>(bytes)};
      send(&head, sizeof head, what);
      send(request, bytes, what);
    }
    ReplyHead head;
    receive(&head, sizeof head, deadline, what);
    Reply reply;
    reply.status = head.status;
    reply.detail = head.detail;
    if (head.status > kBadChunk || (head.status != kOk && head.bytes != 0))
      fail(what, str("its answer is malformed (status ", head.status, ", ", head.bytes, " bytes)"));
    if (head.status != kOk)
      return reply;
    if (into ? head.bytes != maxBytes : head.bytes > maxBytes)
      fail(what, str("it answered ", head.bytes, " bytes, expected ",
                     into ? "" : "at most ", maxBytes));
    if (!into) {
      reply.data.resize(head.bytes);
      into = reply.data.data();
    }
    receive(into, head.bytes, deadline, what);
    return reply;
  }

  /// Reports an answer that is not what the request can get back, and ends the child.
  [[noreturn]] void malformed(const std::string &what, const std::string &why) { fail(what, why); }

private:
  using Clock = std::chrono::steady_clock;

  void send(const void *data, size_t n, const std::string &what) {
    const char *p = static_cast<const char *>(data);
    while (n > 0) {
      const ssize_t put = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (put < 0 && errno == EINTR)
        continue;
      if (put <= 0)
        fail(what, ""); // EPIPE / ECONNRESET: the child is gone
      p += put, n -= static_cast<size_t>(put);
    }
  }

  void receive(void *data, uint64_t n, Clock::time_point deadline, const std::string &what) {
    char *p = static_cast<char *>(data);
    while (n > 0) {
      // What has arrived is taken without waiting; poll() only when nothing has.
      const ssize_t got = ::recv(fd_, p, static_cast<size_t>(std::min<uint64_t>(n, 1 << 30)),
                                 MSG_DONTWAIT);
      if (got > 0) {
        p += got, n -= static_cast<uint64_t>(got);
        continue;
      }
      if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        fail(what, ""); // EOF, ECONNRESET: the child is gone
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0)
        timedOut(what);
      pollfd pfd = {fd_, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30))) < 0 &&
          errno != EINTR)
        fail(what, str("poll: ", std::strerror(errno)));
    }
  }

  [[noreturn]] void timedOut(const std::string &what) {
    end();
    failure_ = str(path_, ": libhdf5 did not answer within ", timeout_, " s while ", what,
                   " (MEDRUN_HDF5_TIMEOUT sets the limit); the file is probably malformed");
    throw Error(failure_);
  }

  /// Ends the child and throws an Error saying how it ended while doing `what`; `why`:
  /// what was wrong with its answer ("" when it just went away).
  [[noreturn]] void fail(const std::string &what, const std::string &why) {
    std::string gone;
    const int status = end(&gone);
    std::string how;
    if (!why.empty())
      how = str("libhdf5's process answered wrongly (", why, ")");
    else if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == kExitSetup)
      throw Error(failure_ = str(path_, ": the process that reads it with libhdf5 could not set "
                                        "itself up (descriptors, file access) while ",
                                 what));
    else if (status < 0 && !gone.empty()) // not the file's doing
      throw Error(failure_ = str(path_, ": libhdf5's process ended while ", what, " (", gone, ")"));
    else if (status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL)
      how = str("libhdf5 ", endedHow(status));
    else
      how = str("libhdf5's process ", status >= 0 ? endedHow(status) : "ended");
    failure_ = str(path_, ": ", how, " while ", what, "; the file is probably malformed");
    throw Error(failure_);
  }

  /// Has the zygote kill and reap the child; its wait status, or -1 (`gone`: why not known).
  int end(std::string *gone = nullptr) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
    if (pid_ <= 0)
      return -1;
    std::string why;
    // How the child ended is asked only where an error will say it.
    const int status = zygoteEnd({pid_, -1, generation_}, timeout_, why, gone != nullptr);
    pid_ = -1;
    if (gone)
      *gone = why;
    return status;
  }

  std::string path_;
  pid_t pid_ = -1;             ///< the child, a child of the zygote's
  int fd_ = -1;                ///< our end of its socket
  uint64_t generation_ = 0;    ///< the zygote that started it
  double timeout_ = 120;
  std::string failure_; ///< why the child ended early: every later request fails so
};

std::string boxString(const Box3 &lo, const Box3 &size) {
  return str("[", lo[0], ":", lo[0] + size[0], ", ", lo[1], ":", lo[1] + size[1], ", ", lo[2],
             ":", lo[2] + size[2], "]");
}

class Hdf5Reader : public VolumeReader {
public:
  Hdf5Reader(const std::string &container, const std::string &requested, int64_t channel)
      : channel_(channel) {
    info_.path = container;
    info_.format = "hdf5";
    process_ = std::make_unique<Hdf5Process>(container);
    std::string key = requested;
    std::vector<std::string> all;
    bool listed = false;
    auto list = [&] {
      if (!listed)
        all = datasets();
      listed = true;
    };
    if (key.empty()) {
      list();
      if (all.empty())
        throw Error(str(container, ": the HDF5 file holds no dataset"));
      key = all.front();
    }
    info_.key = key;
    const DatasetFacts f = facts(key);
    if (!f.exists) {
      list();
      std::string names;
      for (const std::string &d : all)
        names += (names.empty() ? "" : ", ") + d;
      throw Error(str(container, ": no dataset '", key, "' (the file holds ",
                      names.empty() ? std::string("no dataset") : names, ")"));
    }
    if (!f.isDataset)
      throw Error(str(info_.name(), ": not a dataset (a group?)"));

    const H5T_class_t cls = static_cast<H5T_class_t>(f.typeClass);
    const uint64_t bytes = f.typeSize;
    if (cls == H5T_INTEGER) {
      const VoxelType s[] = {VoxelType::I8, VoxelType::I16, VoxelType::I32, VoxelType::I64};
      const VoxelType u[] = {VoxelType::U8, VoxelType::U16, VoxelType::U32, VoxelType::U64};
      int k = bytes == 1 ? 0 : bytes == 2 ? 1 : bytes == 4 ? 2 : bytes == 8 ? 3 : -1;
      if (k < 0)
        throw Error(str(info_.name(), ": unsupported integer size ", bytes, " bytes"));
      info_.type = f.typeSigned ? s[k] : u[k];
    } else if (cls == H5T_FLOAT && (bytes == 4 || bytes == 8)) {
      info_.type = bytes == 4 ? VoxelType::F32 : VoxelType::F64;
    } else {
      throw Error(str(info_.name(), ": unsupported element type (HDF5 class ", int(cls), ", ",
                      bytes, " bytes; expected integers of 1, 2, 4, 8 bytes or float32/64)"));
    }

    if (f.rank < 0)
      throw Error(str(info_.name(), ": cannot read the dataspace"));
    const int rank = f.rank;
    const hsize_t *dims = f.dims, *maxdims = f.maxdims;
    for (int a = 0; a < rank; ++a)
      full_.push_back(dims[a] > hsize_t(INT64_MAX) ? -1 : static_cast<int64_t>(dims[a]));
    // Declared sizes are untrusted (medrun/Sizes.h): a product that wraps would divide by
    // zero or size a buffer too small below.
    const int64_t elements = checkedCount(full_, info_.name(), 1, kMaxArrayElements);
    // Which axes of the file are the volume's (the others have size 1, or are channels).
    const ArrayAxes axes = arrayAxes(full_, info_.name(), channel);
    info_.shape = axes.shape;
    info_.channels = axes.channels;
    first_ = axes.first;
    channelAxis_ = axes.channelAxis;

    const H5D_layout_t layout = static_cast<H5D_layout_t>(f.layout);
    if (layout == H5D_CONTIGUOUS || layout == H5D_COMPACT) {
      // Unfiltered: the bytes declared must be in the file (or in its external files). A
      // dataset created but never written reads as its fill value: refused as well, it is
      // no data.
      std::error_code ec;
      const uint64_t fileBytes = std::filesystem::file_size(container, ec);
      if (!ec && f.externalCount <= 0) {
        checkedBytes(elements, bytes, fileBytes, info_.name(),
                     str("the file's ", fileBytes, " bytes (a truncated file, or a dataset "
                         "never written?)"));
        if (f.storageSize < static_cast<uint64_t>(elements) * bytes)
          throw Error(str(info_.name(), ": declares ", shapeString(full_), " of ", bytes,
                          " bytes but only ", f.storageSize,
                          " bytes are stored (a dataset never written, or a damaged file)"));
      }
    }
    for (int i = 0; i < f.nfilters; ++i) {
      const DatasetFacts::Filter &x = f.filters[i];
      if (!x.available)
        throw Error(str(info_.name(), ": compressed with HDF5 filter ", x.id,
                        x.name[0] ? str(" (", x.name, ")") : std::string(),
                        ", which this libhdf5 cannot decode (gzip, shuffle, fletcher32, szip "
                        "and scaleoffset are built in; others need an HDF5 filter plugin)"));
      filters_.push_back(x.id);
    }
    if (layout == H5D_CHUNKED) {
      if (f.chunkRank != rank)
        throw Error(str(info_.name(), ": cannot read the chunk dimensions"));
      const hsize_t *chunk = f.chunk;
      // HDF5's own rule, which libhdf5 1.10 does not check when reading: along an axis that
      // cannot grow a chunk is no larger than the dataset (a file edited to break it made
      // libhdf5 read past a decoded chunk, docs/reliability.md).
      for (int a = 0; a < rank; ++a)
        if (chunk[a] > dims[a] && maxdims[a] == dims[a])
          throw Error(str(info_.name(), ": chunk dimension ", a, " is ", chunk[a],
                          ", larger than the dataset's ", dims[a],
                          " along an axis that cannot grow (a malformed file)"));
      for (int a = 0; a < rank; ++a) {
        if (chunk[a] < 1)
          throw Error(str(info_.name(), ": a chunk dimension of ", chunk[a],
                          " (every one must be at least 1)"));
        fileChunk_.push_back(chunk[a]);
      }
      for (int a = 0; a < 3; ++a) {
        const hsize_t c = chunk[first_ + a];
        info_.chunk[a] = c > hsize_t(info_.shape[a]) ? info_.shape[a] : static_cast<int64_t>(c);
      }
      // What one stored chunk holds decoded (each is stored whole, also at the edges; 0 if
      // that overflows: the read's own limits refuse such chunks), and where its filters
      // keep that size (none, shuffle; fletcher32 adds 4), the bytes it must be stored as:
      // libhdf5 1.10 copies a whole chunk out of whatever a short one decodes to (a heap
      // over-read in H5VM_memcpyvv, docs/reliability.md). A compressed chunk's decoded size
      // is known only once decoded (the child's gzip filter checks it; a chunk an optional
      // compressor was skipped for is stored as it is). libhdf5 checks that a chunk lies in
      // the file.
      chunkBytes_ = bytes;
      for (int a = 0; a < rank && chunkBytes_; ++a)
        if (__builtin_mul_overflow(chunkBytes_, chunk[a], &chunkBytes_))
          chunkBytes_ = 0;
      storedBytes_ = chunkBytes_;
      for (int32_t id : filters_)
        storedBytes_ = id == H5Z_FILTER_SHUFFLE      ? storedBytes_
                       : id == H5Z_FILTER_FLETCHER32 ? storedBytes_ + (storedBytes_ ? 4 : 0)
                                                     : 0;
    } else {
      // Contiguous: slabs of whole planes, about 4 MiB each.
      const int64_t plane = info_.shape[1] * info_.shape[2] * static_cast<int64_t>(bytes);
      info_.chunk = {std::clamp<int64_t>((int64_t(4) << 20) / plane, 1, info_.shape[0]),
                     info_.shape[1], info_.shape[2]};
    }
    // What one decode fills (the cache holds it whole).
    checkedBytes(info_.chunk[0] * info_.chunk[1] * info_.chunk[2], bytes, kMaxDecodedChunkBytes,
                 str(info_.name(), ": a chunk of ", info_.chunk[0], "x", info_.chunk[1], "x",
                     info_.chunk[2]),
                 "the 1 GiB limit on a decoded chunk");
    // Spacing and origin (z, y, x), as CREMI writes them.
    std::vector<double> res(f.resolution.v, f.resolution.v + f.resolution.n);
    if (res.size() == full_.size() && full_.size() > 3)
      res.erase(res.begin(), res.begin() + first_);
    if (res.size() >= 3 && res[0] > 0 && res[1] > 0 && res[2] > 0) {
      for (int a = 0; a < 3; ++a)
        info_.spacing[a] = res[a];
      info_.spacingFrom = "the resolution attribute";
    }
    const std::vector<double> off(f.offset.v, f.offset.v + f.offset.n);
    for (int a = 0; a < 3; ++a) {
      info_.affine[a * 4 + a] = info_.spacing[2 - a]; // x, y, z rows
      if (off.size() == 3)
        info_.affine[a * 4 + 3] = off[2 - a];
    }
  }

protected:
  void decode(const Box3 &lo, const Box3 &size, void *dst) const override {
    std::lock_guard<std::mutex> lock(mutex_); // one request in flight per child
    ReadRequest r;
    r.type = static_cast<uint32_t>(info_.type);
    r.rank = static_cast<uint32_t>(full_.size());
    for (size_t a = 0; a < full_.size(); ++a)
      r.count[a] = 1;
    for (int a = 0; a < 3; ++a) {
      r.start[first_ + a] = static_cast<hsize_t>(lo[a]);
      r.count[first_ + a] = r.box[a] = static_cast<hsize_t>(size[a]);
    }
    if (channelAxis_ >= 0)
      r.start[channelAxis_] = static_cast<hsize_t>(channel_);
    if (!fileChunk_.empty()) {
      for (uint32_t a = 0; a < r.rank; ++a)
        r.chunk[a] = r.start[a] / fileChunk_[a] * fileChunk_[a];
      r.storedBytes = storedBytes_;
    }
    const std::string what =
        str("reading dataset '", info_.key, "' box ", boxString(lo, size),
            channelAxis_ >= 0 ? str(" of channel ", channel_) : std::string());
    const uint64_t bytes =
        static_cast<uint64_t>(size[0] * size[1] * size[2]) * voxelSize(info_.type);
    const Hdf5Process::Reply reply = process_->call(kRead, &r, sizeof r, what, bytes, dst);
    if (reply.status == kOk)
      return;
    if (reply.status == kNoMemory)
      throw Error(str(info_.name(), ": cannot allocate ", byteString(bytes), " for the box at ",
                      lo[0], ",", lo[1], ",", lo[2], " in the process reading it (out of memory)"));
    const std::string chunk = str(info_.name(), ": the chunk at ", offsetString(r.chunk));
    const std::string holds =
        str(shapeString(std::vector<int64_t>(fileChunk_.begin(), fileChunk_.end())), " ",
            voxelTypeName(info_.type));
    if (reply.status == kBadStored)
      throw Error(str(chunk, " is stored as ", reply.detail, " bytes, expected ", storedBytes_,
                      " (", holds, ", filters: ", filterNames(), "; a malformed file: libhdf5 "
                      "would read past the stored chunk)"));
    if (reply.status == kBadChunk && reply.detail > chunkBytes_)
      throw Error(str(chunk, " decodes (gzip) to more than the ", chunkBytes_,
                      " bytes of a chunk of ", holds, " (a malformed file)"));
    if (reply.status == kBadChunk)
      throw Error(str(chunk, " decodes (gzip) to ", reply.detail, " bytes, where a chunk of ",
                      holds, " holds ", chunkBytes_, " (a malformed file: libhdf5 would read past the "
                      "decoded chunk)"));
    if (reply.status != kOk)
      throw Error(str(info_.name(), ": cannot read the box at ", lo[0], ",", lo[1], ",", lo[2],
                      " (a corrupt or truncated file?)"));
  }

private:
  std::vector<std::string> datasets() {
    Hdf5Process::Reply reply = process_->call(kList, nullptr, 0, "listing datasets", kMaxListBytes);
    std::vector<std::string> names;
    size_t pos = 0;
    const std::vector<char> &d = reply.data;
    while (pos < d.size()) {
      uint32_t len = 0;
      if (d.size() - pos < sizeof len)
        process_->malformed("listing datasets", "a name's length cut short");
      std::memcpy(&len, d.data() + pos, sizeof len);
      pos += sizeof len;
      if (len > d.size() - pos)
        process_->malformed("listing datasets",
                            str("a name of ", len, " bytes past the answer's end"));
      names.emplace_back(d.data() + pos, len);
      pos += len;
    }
    return names;
  }

  DatasetFacts facts(const std::string &key) {
    const std::string what = str("reading the metadata of dataset '", key, "'");
    if (key.size() > kMaxRequestBytes)
      throw Error(str(info_.path, ": the dataset name '", key.substr(0, 64), "...' is longer than ",
                      kMaxRequestBytes, " bytes"));
    Hdf5Process::Reply reply =
        process_->call(kDataset, key.data(), key.size(), what, sizeof(DatasetFacts));
    DatasetFacts f;
    if (reply.status != kOk || reply.data.size() != sizeof f)
      process_->malformed(what, str(reply.data.size(), " bytes of metadata, expected ", sizeof f));
    std::memcpy(&f, reply.data.data(), sizeof f);
    // The child's memory may have been corrupted by the file: every field in its range.
    auto flag = [](int32_t v) { return v == 0 || v == 1; };
    bool ok = flag(f.exists) && flag(f.isDataset) && flag(f.typeSigned) && f.rank >= -1 &&
              f.rank <= kMaxRank && f.nfilters >= 0 && f.nfilters <= kMaxFilters &&
              f.resolution.n >= 0 && f.resolution.n <= kMaxAttribute && f.offset.n >= 0 &&
              f.offset.n <= kMaxAttribute;
    for (int i = 0; ok && i < f.nfilters; ++i)
      ok = flag(f.filters[i].available);
    if (!ok)
      process_->malformed(what, "metadata out of range");
    for (int i = 0; i < f.nfilters; ++i)
      f.filters[i].name[sizeof f.filters[i].name - 1] = '\0';
    return f;
  }

  std::string offsetString(const hsize_t *offset) const {
    std::string s = "(";
    for (size_t a = 0; a < full_.size(); ++a)
      s += str(a ? ", " : "", offset[a]);
    return s + ")";
  }
  std::string filterNames() const {
    std::string s;
    for (int32_t id : filters_)
      s += str(s.empty() ? "" : ", ", id == H5Z_FILTER_SHUFFLE ? "shuffle" : "fletcher32");
    return s.empty() ? "none" : s;
  }

  std::unique_ptr<Hdf5Process> process_;
  mutable std::mutex mutex_;
  std::vector<int64_t> full_; ///< the dataset's shape as stored
  size_t first_ = 0;          ///< index of the volume's first axis in full_
  int64_t channel_ = -1, channelAxis_ = -1; ///< the channel read, and its axis in full_
  std::vector<hsize_t> fileChunk_;  ///< the stored chunk (chunked layouts), in full_'s axes
  uint64_t chunkBytes_ = 0;         ///< its bytes decoded
  uint64_t storedBytes_ = 0;        ///< its bytes stored where known (0: not known)
  std::vector<int32_t> filters_;    ///< the filter pipeline's ids, in order
};

} // namespace

std::unique_ptr<VolumeReader> openHdf5(const std::string &container, const std::string &key,
                                       int64_t channel) {
  return std::make_unique<Hdf5Reader>(container, key, channel);
}

namespace {

class Hdf5Writer : public VolumeWriter {
public:
  Hdf5Writer(const std::string &container, const std::string &key, const VolumeData &v,
             const Box3 &chunk, bool reopen)
      : name_(container + "/" + key), key_(key), temp_(key + kPartialSuffix), shape_(v.shape),
        channels_(v.channels), type_(v.type) {
    // Before the lock: a reader's open takes the zygote's mutex, then hdf5Lock().
    probeExisting(reopen && !std::filesystem::exists(container) ? container + kPartialSuffix
                                                                : container);
    // Every libhdf5 call of this process holds hdf5Lock() (a reader's fork must not find
    // libhdf5 in the middle of one); the handles close under it also when this throws.
    std::lock_guard<std::recursive_mutex> lock(hdf5Lock());
    try {
      create(container, v, chunk, reopen);
    } catch (...) {
      dset_ = Handle();
      file_ = Handle();
      throw;
    }
  }

  /// An existing file that this process has not open is parsed by libhdf5 in this process
  /// when the writer opens it (a file given as output may be anyone's): a reader's child
  /// opens it first and walks its objects (the listing request), so that a file on which
  /// libhdf5 crashes, hangs or fails there is an Error naming it here, before this process
  /// parses it (libhdf5 then parses more of it, for the datasets it adds: the child covers
  /// the open and the object headers, where its findings were). A file libhdf5 has open in
  /// this process already (a second dataset written to it, a file being read) is shared
  /// with that open by libhdf5, not parsed again, and may be mid-write on disk: not probed.
  static void probeExisting(const std::string &path) {
    struct stat file = {};
    if (::stat(path.c_str(), &file) != 0)
      return; // a new file
    {
      std::lock_guard<std::recursive_mutex> lock(hdf5Lock());
      quiet();
      const ssize_t open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE);
      std::vector<hid_t> ids(open > 0 ? static_cast<size_t>(open) : 0);
      if (!ids.empty())
        ids.resize(std::max<ssize_t>(
            0, H5Fget_obj_ids(H5F_OBJ_ALL, H5F_OBJ_FILE, ids.size(), ids.data())));
      for (hid_t id : ids) {
        char name[4096];
        struct stat other = {};
        const ssize_t n = H5Fget_name(id, name, sizeof name);
        if (n > 0 && static_cast<size_t>(n) < sizeof name && ::stat(name, &other) == 0 &&
            other.st_dev == file.st_dev && other.st_ino == file.st_ino)
          return;
      }
    }
    Hdf5Process child(path);
    child.call(kList, nullptr, 0, "listing datasets (before writing to it)", kMaxListBytes);
  }

  /// The constructor's work, under its lock.
  void create(const std::string &container, const VolumeData &v, const Box3 &chunk, bool reopen) {
    quiet();
    for (int a = 0; a < 3; ++a)
      chunk_[a] = std::min(chunk[a], v.shape[a]);
    // A new file is written whole under a temporary name (container.partial), renamed by
    // finish(): a failed write (a full disk can leave an HDF5 file unreadable) or a killed
    // one leaves no file of that name.
    const std::string fileTemp = container + kPartialSuffix;
    if (std::filesystem::exists(container)) {
      file_ = Handle(H5Fopen(container.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    } else if (reopen && std::filesystem::exists(fileTemp)) {
      file_ = Handle(H5Fopen(fileTemp.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
      container_ = container, fileTemp_ = fileTemp;
    } else if (!reopen) {
      file_ = Handle(H5Fcreate(fileTemp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
      container_ = container, fileTemp_ = fileTemp;
    }
    if (!file_.valid())
      throw Error(str(container, reopen ? ": cannot open the HDF5 file to add blocks to"
                                        : ": cannot open or create the HDF5 file for writing",
                      std::filesystem::exists(container)
                          ? " (not an HDF5 file, or one left unreadable by a run killed while "
                            "writing it: delete it)"
                          : ""));
    const int rank = v.channels > 1 ? 4 : 3, lead = rank - 3;
    hsize_t dims[4] = {static_cast<hsize_t>(v.channels), 1, 1, 1}, chunks[4] = {1, 1, 1, 1};
    for (int a = 0; a < 3; ++a) {
      dims[lead + a] = static_cast<hsize_t>(v.shape[a]);
      chunks[lead + a] = static_cast<hsize_t>(chunk_[a]);
    }
    if (reopen) {
      // The unfinished dataset, or else a finished one to add boxes to.
      finished_ = !exists(file_.get(), temp_);
      const std::string &at = finished_ ? key_ : temp_;
      if (exists(file_.get(), at))
        dset_ = Handle(H5Dopen2(file_.get(), at.c_str(), H5P_DEFAULT), H5Dclose);
      bool same = dset_.valid();
      if (same) {
        Handle space(H5Dget_space(dset_.get()), H5Sclose);
        Handle dcpl(H5Dget_create_plist(dset_.get()), H5Pclose);
        Handle type(H5Dget_type(dset_.get()), H5Tclose);
        hsize_t have[4] = {}, haveChunk[4] = {};
        same = H5Sget_simple_extent_ndims(space.get()) == rank &&
               H5Pget_layout(dcpl.get()) == H5D_CHUNKED &&
               H5Tequal(type.get(), nativeType(v.type)) > 0;
        if (same) {
          H5Sget_simple_extent_dims(space.get(), have, nullptr);
          H5Pget_chunk(dcpl.get(), rank, haveChunk);
          for (int a = 0; a < rank; ++a)
            same = same && have[a] == dims[a] && haveChunk[a] == chunks[a];
        }
      }
      if (!same)
        throw Error(str(name_, ": no dataset of the shape, chunks and type to continue (",
                        v.channels, " x ", v.shape[0], "x", v.shape[1], "x", v.shape[2], " ",
                        voxelTypeName(v.type), ", chunks ", chunk_[0], "x", chunk_[1], "x",
                        chunk_[2], ")"));
      return;
    }
    // Written under the temporary name; finish() moves it to `key`.
    if (exists(file_.get(), temp_) && H5Ldelete(file_.get(), temp_.c_str(), H5P_DEFAULT) < 0)
      throw Error(str(name_, ": cannot remove the unfinished dataset ", temp_));
    Handle space(H5Screate_simple(rank, dims, nullptr), H5Sclose);
    Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl.get(), 1);
    Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl.get(), rank, chunks);
    H5Pset_deflate(dcpl.get(), 4);
    dset_ = Handle(H5Dcreate2(file_.get(), temp_.c_str(), nativeType(v.type), space.get(),
                              lcpl.get(), dcpl.get(), H5P_DEFAULT),
                   H5Dclose);
    if (!dset_.valid())
      throw Error(str(name_, ": cannot create the dataset"));
    hsize_t three = 3;
    Handle aspace(H5Screate_simple(1, &three, nullptr), H5Sclose);
    Handle attr(H5Acreate2(dset_.get(), "resolution", H5T_NATIVE_DOUBLE, aspace.get(),
                           H5P_DEFAULT, H5P_DEFAULT),
                H5Aclose);
    if (!attr.valid() || H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, v.spacing.data()) < 0)
      throw Error(str(name_, ": cannot write the resolution attribute"));
  }

  void write(const Box3 &lo, const Box3 &size, const void *data) override {
    std::lock_guard<std::recursive_mutex> lock(hdf5Lock());
    for (int a = 0; a < 3; ++a)
      if (lo[a] < 0 || size[a] < 1 || lo[a] + size[a] > shape_[a])
        throw Error(str(name_, ": the box at ", lo[0], ",", lo[1], ",", lo[2], " of ", size[0],
                        "x", size[1], "x", size[2], " is not inside the dataset"));
    const int rank = channels_ > 1 ? 4 : 3, lead = rank - 3;
    hsize_t start[4] = {0, 0, 0, 0}, count[4] = {static_cast<hsize_t>(channels_), 1, 1, 1};
    for (int a = 0; a < 3; ++a) {
      start[lead + a] = static_cast<hsize_t>(lo[a]);
      count[lead + a] = static_cast<hsize_t>(size[a]);
    }
    Handle fspace(H5Dget_space(dset_.get()), H5Sclose);
    Handle mspace(H5Screate_simple(rank, count, nullptr), H5Sclose);
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr) < 0 ||
        H5Dwrite(dset_.get(), nativeType(type_), mspace.get(), fspace.get(), H5P_DEFAULT, data) < 0)
      throw Error(str(name_, ": cannot write the box at ", lo[0], ",", lo[1], ",", lo[2]));
  }

  void flush() override {
    std::lock_guard<std::recursive_mutex> lock(hdf5Lock());
    if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0)
      throw Error(str(name_, ": cannot flush the file"));
  }

  void finish() override {
    std::lock_guard<std::recursive_mutex> lock(hdf5Lock());
    flush(); // every box on disk before the name says the dataset is complete
    if (finished_)
      return;
    if (exists(file_.get(), key_) && H5Ldelete(file_.get(), key_.c_str(), H5P_DEFAULT) < 0)
      throw Error(str(name_, ": cannot replace the existing dataset"));
    Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl.get(), 1);
    if (H5Lmove(file_.get(), temp_.c_str(), file_.get(), key_.c_str(), lcpl.get(), H5P_DEFAULT) < 0)
      throw Error(str(name_, ": cannot move the finished dataset from ", temp_, " into place"));
    finished_ = true;
    flush();
    if (!fileTemp_.empty()) {
      dset_ = Handle();
      if (H5Fclose(file_.release()) < 0)
        throw Error(str(name_, ": cannot close ", fileTemp_));
      std::error_code ec;
      std::filesystem::rename(fileTemp_, container_, ec);
      if (ec)
        throw Error(str(name_, ": cannot move ", fileTemp_, " into place: ", ec.message()));
      fileTemp_.clear();
    }
  }

  /// After a failed whole write: the unfinished dataset is removed (best effort; space in
  /// the file is not given back), or the whole new file.
  void discard() {
    std::lock_guard<std::recursive_mutex> lock(hdf5Lock());
    if (finished_ || !file_.valid())
      return;
    if (!fileTemp_.empty()) {
      dset_ = Handle();
      file_ = Handle();
      std::error_code ec;
      std::filesystem::remove(fileTemp_, ec);
    } else if (exists(file_.get(), temp_)) {
      H5Ldelete(file_.get(), temp_.c_str(), H5P_DEFAULT);
    }
  }

  ~Hdf5Writer() override {
    std::lock_guard<std::recursive_mutex> lock(hdf5Lock());
    dset_ = Handle();
    if (file_.valid())
      H5Fflush(file_.get(), H5F_SCOPE_GLOBAL);
    file_ = Handle();
  }

private:
  std::string name_, key_, temp_; ///< temp_: where the dataset is until finish()
  /// A new file: its name, and the temporary one it is written under until finish().
  std::string container_, fileTemp_;
  Box3 shape_;
  int64_t channels_;
  VoxelType type_;
  Handle file_, dset_;
  bool finished_ = false; ///< dset_ is at key_ (moved there, or reopened there)
};

} // namespace

std::unique_ptr<VolumeWriter> createHdf5(const std::string &container, const std::string &key,
                                         const VolumeData &v, const Box3 &chunk, bool reopen) {
  return std::make_unique<Hdf5Writer>(container, key, v, chunk, reopen);
}

void writeHdf5(const std::string &container, const std::string &key, const VolumeData &v) {
  Hdf5Writer writer(container, key, v, {64, 64, 64}, false);
  try {
    writer.write({0, 0, 0}, v.shape, v.data);
    writer.finish();
  } catch (...) {
    writer.discard();
    throw;
  }
}

} // namespace medrun::io

#else // no libhdf5 at build time

namespace medrun::io {
std::unique_ptr<VolumeReader> openHdf5(const std::string &container, const std::string &,
                                       int64_t) {
  throw Error(str(container, ": medrun was built without HDF5 (install libhdf5-dev and rebuild)"));
}
void writeHdf5(const std::string &container, const std::string &, const VolumeData &) {
  throw Error(str(container, ": medrun was built without HDF5 (install libhdf5-dev and rebuild)"));
}
std::unique_ptr<VolumeWriter> createHdf5(const std::string &container, const std::string &,
                                         const VolumeData &, const Box3 &, bool) {
  throw Error(str(container, ": medrun was built without HDF5 (install libhdf5-dev and rebuild)"));
}
} // namespace medrun::io

#endif
