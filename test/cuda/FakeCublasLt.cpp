//===- FakeCublasLt.cpp - a host stand-in for libcublasLt (tests only) -------------===//
//
// Implements the cuBLASLt functions medrun resolves, computing every matrix product for
// real on host memory (the fake driver's device memory): D = alpha·op(A)·op(B) + beta·C with
// column-major layouts, leading dimensions, transposes, strided batches (stride 0 repeats a
// matrix), C not read when beta is 0, and f32/bf16/f16 storage with f32 arithmetic. It is
// strict where the real library is: attribute ids and value sizes, compute type
// CUBLAS_COMPUTE_32F with f32 scale (TF32 is refused), matching shapes, types and batch
// counts, enough workspace for the algorithm, and buffers, leading dimensions and strides
// aligned as the heuristic was told (a misaligned pointer fails). So an emulated run through
// it checks the executor's mapping of convolutions to products numerically.
//
// A product enqueued while the fake driver captures a graph is recorded there as a host
// function (cuLaunchHostFunc), as the real one is captured as kernels.
//
// Test switches: FAKE_CUBLASLT_FAIL=1 makes cublasLtMatmul return
// CUBLAS_STATUS_EXECUTION_FAILED; FAKE_CUBLASLT_DELAY_MS=d0,d1,d2 makes algorithm i take di
// ms more per call (to steer a measured choice); FAKE_CUBLASLT_NO_ALGO=1 makes the heuristic
// find nothing.
//
//===----------------------------------------------------------------------------------===//
#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>

namespace {
constexpr int kSuccess = 0, kInvalidValue = 7, kExecutionFailed = 13, kNotSupported = 15;
constexpr int kR32F = 0, kR16F = 2, kR16BF = 14;
constexpr uint64_t kMagic = 0x6d6564727563ull; // marks an algorithm this library made

int fail(const char *why) {
  std::fprintf(stderr, "fake cuBLASLt: %s\n", why);
  return kInvalidValue;
}
bool env(const char *name, const char *value) {
  const char *v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

struct Desc {
  int compute = 0, scale = 0;
  int32_t transa = 0, transb = 0, pointerMode = 0;
  uint32_t epilogue = 1;
};
struct Layout {
  int type = 0;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1, order = 0;
  int64_t stride = 0;
};
struct Pref {
  uint64_t maxWorkspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};
};
struct Algo {
  uint64_t data[8];
};
struct HeuristicResult {
  Algo algo;
  size_t workspaceSize;
  int state;
  float wavesCount;
  int reserved[4];
};

size_t elementSize(int type) { return type == kR32F ? 4 : 2; }

float load(const void *base, int type, int64_t i) {
  if (type == kR32F)
    return static_cast<const float *>(base)[i];
  uint16_t h = static_cast<const uint16_t *>(base)[i];
  uint32_t bits;
  if (type == kR16BF) {
    bits = uint32_t(h) << 16;
  } else { // binary16
    uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f)
      bits = sign | 0x7f800000u | (man << 13);
    else if (exp != 0)
      bits = sign | ((exp + 112) << 23) | (man << 13);
    else if (man == 0)
      bits = sign;
    else { // subnormal: man · 2^-24
      float f = std::ldexp(static_cast<float>(man), -24);
      std::memcpy(&bits, &f, 4);
      bits |= sign;
    }
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void store(void *base, int type, int64_t i, float f) {
  if (type == kR32F) {
    static_cast<float *>(base)[i] = f;
    return;
  }
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint16_t h;
  if (type == kR16BF) {
    if (std::isnan(f))
      h = 0x7fc0;
    else
      h = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16); // nearest even
  } else {
    uint16_t sign = (bits >> 16) & 0x8000;
    float a = std::fabs(f);
    if (std::isnan(f))
      h = sign | 0x7e00;
    else if (a >= 65520.0f)
      h = sign | 0x7c00;
    else if (a < std::ldexp(1.0f, -14)) // subnormal or zero: a multiple of 2^-24
      h = sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
    else {
      int e;
      float m = std::frexp(a, &e);                                  // a = m·2^e, m in [0.5, 1)
      float scaled = std::nearbyint(std::ldexp(m, 11));            // 11 significant bits
      if (scaled >= 2048.0f)
        scaled /= 2, ++e;
      h = sign | static_cast<uint16_t>(((e + 14) << 10) | (static_cast<int>(scaled) - 1024));
    }
  }
  static_cast<uint16_t *>(base)[i] = h;
}

/// One product to compute, with everything copied (a captured one runs later).
struct Job {
  Desc desc;
  Layout a, b, c, d;
  float alpha = 1, beta = 0;
  const void *pa, *pb, *pc;
  void *pd;
  int algo;
  bool ran = false;
};
std::deque<Job> captured;

void compute(void *arg) {
  Job &j = *static_cast<Job *>(arg);
  j.ran = true;
  const int64_t m = j.d.rows, n = j.d.cols;
  const int64_t k = j.desc.transa ? j.a.rows : j.a.cols;
  for (int32_t s = 0; s < j.d.batch; ++s) {
    const char *A = static_cast<const char *>(j.pa) + s * j.a.stride * elementSize(j.a.type);
    const char *B = static_cast<const char *>(j.pb) + s * j.b.stride * elementSize(j.b.type);
    const char *C = static_cast<const char *>(j.pc) + s * j.c.stride * elementSize(j.c.type);
    char *D = static_cast<char *>(j.pd) + s * j.d.stride * elementSize(j.d.type);
    for (int64_t col = 0; col < n; ++col)
      for (int64_t row = 0; row < m; ++row) {
        float acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          float x = load(A, j.a.type, j.desc.transa ? p + row * j.a.ld : row + p * j.a.ld);
          float y = load(B, j.b.type, j.desc.transb ? col + p * j.b.ld : p + col * j.b.ld);
          acc += x * y;
        }
        float v = j.alpha * acc;
        if (j.beta != 0)
          v += j.beta * load(C, j.c.type, row + col * j.c.ld);
        store(D, j.d.type, row + col * j.d.ld, v);
      }
  }
  // FAKE_CUBLASLT_DELAY_MS=d0,d1,d2: algorithm i sleeps di ms per call.
  if (const char *delays = std::getenv("FAKE_CUBLASLT_DELAY_MS")) {
    const char *p = delays;
    for (int i = 0; i < j.algo && p; ++i)
      if ((p = std::strchr(p, ',')))
        ++p;
    if (p)
      usleep(static_cast<useconds_t>(std::atoi(p)) * 1000);
  }
}

/// Whether op(A)·op(B) + C -> D is a product the real library accepts.
int validate(const Desc &desc, const Layout &a, const Layout &b, const Layout &c, const Layout &d) {
  const uint64_t m = d.rows, n = d.cols;
  const uint64_t am = desc.transa ? a.cols : a.rows, ak = desc.transa ? a.rows : a.cols;
  const uint64_t bk = desc.transb ? b.cols : b.rows, bn = desc.transb ? b.rows : b.cols;
  if (am != m || bn != n || ak != bk || c.rows != m || c.cols != n)
    return fail("the shapes of A, B, C and D do not match");
  if (a.type != b.type || c.type != d.type || (a.type == kR32F && d.type != kR32F))
    return fail("unsupported combination of types");
  if (a.batch != d.batch || b.batch != d.batch || c.batch != d.batch)
    return fail("the batch counts differ");
  if (desc.epilogue != 1 || desc.pointerMode != 0)
    return fail("only the default epilogue and host scalars are emulated");
  return kSuccess;
}

/// Whether a matrix at `p` has the alignment its algorithm was chosen for.
bool aligned(const void *p, const Layout &l, uint64_t align) {
  const uint64_t e = elementSize(l.type);
  return reinterpret_cast<uintptr_t>(p) % align == 0 && (l.ld * e) % align == 0 &&
         (l.batch == 1 || (l.stride * e) % align == 0);
}

template <typename T> int set(T &field, const void *buf, size_t size) {
  if (size != sizeof(T))
    return fail("attribute value of the wrong size");
  std::memcpy(&field, buf, sizeof(T));
  return kSuccess;
}
int handle;
} // namespace

extern "C" {
size_t cublasLtGetVersion() { return 130002; }
const char *cublasLtGetStatusName(int s) {
  switch (s) {
  case kSuccess: return "CUBLAS_STATUS_SUCCESS";
  case kInvalidValue: return "CUBLAS_STATUS_INVALID_VALUE";
  case kExecutionFailed: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case kNotSupported: return "CUBLAS_STATUS_NOT_SUPPORTED";
  default: return "CUBLAS_STATUS_(fake)";
  }
}
int cublasLtCreate(void **h) {
  *h = &handle;
  return kSuccess;
}
int cublasLtDestroy(void *) { return kSuccess; }

int cublasLtMatmulDescCreate(void **d, int compute, int scale) {
  if (compute != 68 || scale != kR32F) {
    std::fprintf(stderr, "fake cuBLASLt: compute type %d, scale type %d not emulated\n", compute,
                 scale);
    return kNotSupported;
  }
  Desc *desc = new Desc();
  desc->compute = compute;
  desc->scale = scale;
  *d = desc;
  return kSuccess;
}
int cublasLtMatmulDescDestroy(void *d) {
  delete static_cast<Desc *>(d);
  return kSuccess;
}
int cublasLtMatmulDescSetAttribute(void *d, int attr, const void *buf, size_t size) {
  Desc &desc = *static_cast<Desc *>(d);
  int r;
  switch (attr) {
  case 2: return set(desc.pointerMode, buf, size);
  case 3: r = set(desc.transa, buf, size); break;
  case 4: r = set(desc.transb, buf, size); break;
  case 7: return set(desc.epilogue, buf, size);
  default: return fail("matmul descriptor attribute not emulated");
  }
  if (r == kSuccess && ((attr == 3 ? desc.transa : desc.transb) & ~1))
    return fail("only CUBLAS_OP_N and CUBLAS_OP_T are emulated");
  return r;
}

int cublasLtMatrixLayoutCreate(void **l, int type, uint64_t rows, uint64_t cols, int64_t ld) {
  if (type != kR32F && type != kR16F && type != kR16BF)
    return fail("data type not emulated");
  if (ld < static_cast<int64_t>(rows) || rows == 0 || cols == 0)
    return fail("a column-major layout needs ld >= rows > 0");
  *l = new Layout{type, rows, cols, ld, 1, 0, 0};
  return kSuccess;
}
int cublasLtMatrixLayoutDestroy(void *l) {
  delete static_cast<Layout *>(l);
  return kSuccess;
}
int cublasLtMatrixLayoutSetAttribute(void *l, int attr, const void *buf, size_t size) {
  Layout &layout = *static_cast<Layout *>(l);
  switch (attr) {
  case 1: {
    int r = set(layout.order, buf, size);
    return r == kSuccess && layout.order != 0 ? fail("only CUBLASLT_ORDER_COL is emulated") : r;
  }
  case 5: {
    int r = set(layout.batch, buf, size);
    return r == kSuccess && layout.batch < 1 ? fail("batch count below 1") : r;
  }
  case 6: return set(layout.stride, buf, size);
  default: return fail("matrix layout attribute not emulated");
  }
}

int cublasLtMatmulPreferenceCreate(void **p) {
  *p = new Pref();
  return kSuccess;
}
int cublasLtMatmulPreferenceDestroy(void *p) {
  delete static_cast<Pref *>(p);
  return kSuccess;
}
int cublasLtMatmulPreferenceSetAttribute(void *p, int attr, const void *buf, size_t size) {
  Pref &pref = *static_cast<Pref *>(p);
  if (attr == 1)
    return set(pref.maxWorkspace, buf, size);
  if (attr >= 5 && attr <= 8) {
    uint32_t &a = pref.align[attr - 5];
    int r = set(a, buf, size);
    return r == kSuccess && (a == 0 || (a & (a - 1))) ? fail("alignment not a power of two") : r;
  }
  return fail("preference attribute not emulated");
}

// Three algorithms; algorithm i needs i KiB of workspace.
int cublasLtMatmulAlgoGetHeuristic(void *, void *d, void *a, void *b, void *c, void *dd, void *p,
                                   int requested, HeuristicResult *results, int *count) {
  const Desc &desc = *static_cast<Desc *>(d);
  if (int r = validate(desc, *static_cast<Layout *>(a), *static_cast<Layout *>(b),
                       *static_cast<Layout *>(c), *static_cast<Layout *>(dd)))
    return r;
  if (requested < 1)
    return fail("requestedAlgoCount below 1");
  *count = 0;
  if (env("FAKE_CUBLASLT_NO_ALGO", "1"))
    return kNotSupported;
  const Pref &pref = *static_cast<Pref *>(p);
  for (int i = 0; i < 3 && *count < requested; ++i) {
    if (i * 1024u > pref.maxWorkspace)
      continue;
    HeuristicResult &r = results[(*count)++];
    std::memset(&r, 0, sizeof r);
    r.algo.data[0] = kMagic;
    r.algo.data[1] = i;
    for (int k = 0; k < 4; ++k)
      r.algo.data[2 + k] = pref.align[k];
    r.workspaceSize = i * 1024u;
    r.wavesCount = 1.0f;
  }
  return kSuccess;
}

int cublasLtMatmul(void *, void *d, const void *alpha, const void *A, void *a, const void *B,
                   void *b, const void *beta, const void *C, void *c, void *D, void *dd,
                   const Algo *algo, void *workspace, size_t workspaceSize, void *stream) {
  if (env("FAKE_CUBLASLT_FAIL", "1"))
    return kExecutionFailed;
  Job j;
  j.desc = *static_cast<Desc *>(d);
  j.a = *static_cast<Layout *>(a);
  j.b = *static_cast<Layout *>(b);
  j.c = *static_cast<Layout *>(c);
  j.d = *static_cast<Layout *>(dd);
  if (int r = validate(j.desc, j.a, j.b, j.c, j.d))
    return r;
  if (!algo || algo->data[0] != kMagic)
    return fail("not an algorithm of the heuristic");
  j.algo = static_cast<int>(algo->data[1]);
  if (workspaceSize < j.algo * 1024u || (j.algo && !workspace))
    return fail("less workspace than the algorithm needs");
  const void *ptrs[4] = {A, B, C, D};
  const Layout *layouts[4] = {&j.a, &j.b, &j.c, &j.d};
  for (int k = 0; k < 4; ++k)
    if (!aligned(ptrs[k], *layouts[k], algo->data[2 + k]))
      return fail("a matrix is less aligned than the heuristic was told");
  j.alpha = *static_cast<const float *>(alpha);
  j.beta = *static_cast<const float *>(beta);
  j.pa = A, j.pb = B, j.pc = C, j.pd = D;
  // Through the fake driver, so that a captured graph replays the product.
  static auto launch = [] {
    const char *path = std::getenv("MEDRUN_LIBCUDA");
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    return lib ? reinterpret_cast<int (*)(void *, void (*)(void *), void *)>(
                     dlsym(lib, "cuLaunchHostFunc"))
               : nullptr;
  }();
  if (!launch) {
    compute(&j);
    return kSuccess;
  }
  captured.push_back(j);
  const int r = launch(stream, compute, &captured.back());
  if (captured.back().ran) // run at once: not captured
    captured.pop_back();
  return r ? kExecutionFailed : kSuccess;
}
}
