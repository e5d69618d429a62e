//===- CudaCodegen.cpp - one CUDA kernel per op of the artifact plan -------------===//
//
// Phase A of the CUDA backend: simple, correct kernels that reproduce the CPU reference
// kernels (runtime/src/cpu) formula for formula, in fp32, with every shape, stride and
// attribute baked in as a constant.
//
//  * Data movement and the direct convolutions run one thread per output element (the
//    convolutions sum their terms in the CPU kernels' order: input channel, then kd, kh,
//    kw). Unary and binary ops, gelu_grad and the group norm maps give each thread one
//    16-byte vector of consecutive elements (`vectorized`): more bytes in flight per
//    thread, 32-bit index math. Only the mapping of elements to threads differs; each
//    element is computed by the same code.
//  * Reductions (norm statistics, weight gradients, reduce, loss sums) run one block per
//    output; each thread sums a fixed strided subset and the block combines the partials
//    in a fixed tree over thread indices. No float atomics: results are the same bits on
//    every run.
//  * Ops that need several passes (norms and their gradients, losses) get several kernels
//    that pass statistics through scratch buffers.
//  * param, reshape and assign need no kernel: the plan binds the parameter's buffer,
//    aliases the reshaped value, and downloads an assigned value after the step.
//
// Identical kernels (same code, same constants) are emitted once and shared by every
// launch that needs them.
//
// A kernel that finds invalid data (a dice_ce target that is no class index, an AdamW step
// below 1) cannot throw; it writes its op's index + 1 into the function's status word
// (scratch 0), which the runtime checks after the step.
//
//===----------------------------------------------------------------------------------===//

#include "med/Target/Cuda.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <vector>

using namespace mlir::med;
namespace json = llvm::json;

namespace {

constexpr int kBlock = 256;            // threads per block
constexpr int64_t kMaxGrid = 2147483647; // gridDim.x limit

// ---- literals --------------------------------------------------------------------------

/// A float literal that rounds to the same float as `v`.
std::string flt(double v) {
  if (std::isnan(v))
    return "__int_as_float(0x7fc00000)";
  if (std::isinf(v))
    return v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(static_cast<float>(v)));
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s + "f";
}

/// A double literal.
std::string dbl(double v) {
  if (std::isnan(v))
    return "__longlong_as_double(0x7ff8000000000000ll)";
  if (std::isinf(v))
    return v > 0 ? "__longlong_as_double(0x7ff0000000000000ll)"
                 : "__longlong_as_double(0xfff0000000000000ll)";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s;
}

std::string num(int64_t v) { return std::to_string(v) + "ll"; }

int64_t product(const std::vector<int64_t> &s, size_t begin = 0) {
  int64_t n = 1;
  for (auto it = s.begin() + std::min(begin, s.size()); it != s.end(); ++it)
    n *= *it;
  return n;
}

/// Smallest power of two >= n, clamped to [32, kBlock].
int blockFor(int64_t n) {
  int b = 32;
  while (b < kBlock && b < n)
    b *= 2;
  return b;
}

/// The C type a value of `dtype` is stored as on the device (empty: unsupported).
std::string ctype(llvm::StringRef dtype) {
  return llvm::StringSwitch<std::string>(dtype)
      .Case("f32", "float")
      .Case("bf16", "bf16")
      .Case("f64", "double")
      .Case("i8", "signed char")
      .Case("i16", "short")
      .Case("i32", "int")
      .Case("i64", "long long")
      .Case("u8", "unsigned char")
      .Case("bool", "unsigned char")
      .Case("f16", "f16")
      .Default("");
}

/// The integer type of a kernel's element indices: `int` where every index fits (32-bit
/// address math, and divisions by constants that are a multiply and a shift), else i64.
struct Index {
  bool narrow = false;
  std::string type() const { return narrow ? "int" : "i64"; }
  std::string lit(int64_t v) const { return narrow ? std::to_string(v) : num(v); }
};
const Index kWide;

/// Code that splits flat index `var` into per-axis indices `<prefix>0..` of `shape`.
std::string decompose(const std::string &var, const std::vector<int64_t> &shape,
                      const std::string &prefix, const Index &ix = kWide) {
  const std::string t = ix.type();
  std::string code = "  " + t + " " + prefix + "t = " + var + ";\n";
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    std::string name = prefix + std::to_string(d);
    if (d == 0) {
      code += "  const " + t + " " + name + " = " + prefix + "t;\n";
    } else {
      code += "  const " + t + " " + name + " = " + prefix + "t % " + ix.lit(shape[d]) + "; " +
              prefix + "t /= " + ix.lit(shape[d]) + ";\n";
    }
  }
  code += "  (void)" + prefix + "t;\n";
  return code;
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> st(shape.size());
  int64_t a = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    st[i] = a;
    a *= shape[i];
  }
  return st;
}

/// Σ idx_d · stride_d as code (zero strides left out).
std::string offsetExpr(const std::string &prefix, const std::vector<int64_t> &strides,
                       size_t firstAxis = 0, const Index &ix = kWide) {
  std::string e;
  for (size_t d = 0; d < strides.size(); ++d) {
    if (strides[d] == 0)
      continue;
    std::string term = prefix + std::to_string(d + firstAxis) +
                       (strides[d] == 1 ? "" : " * " + ix.lit(strides[d]));
    e += (e.empty() ? "" : " + ") + term;
  }
  return e.empty() ? "0" : e;
}

// The helpers every kernel may use. With -default-device, plain functions are device code.
const char *kPrelude = R"(// Generated by medc: the CUDA kernels of one artifact (docs/architecture.md).
typedef long long i64;
typedef unsigned long long u64;

// Combines v over the block in a fixed tree over thread indices (blockDim.x a power of
// two): the same bits on every run. Every thread gets the result.
template <typename T, typename F> T blockReduce(T v, T *sh, F f) {
  const int t = threadIdx.x;
  __syncthreads(); // sh may still be read from a previous call
  sh[t] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s)
      sh[t] = f(sh[t], sh[t + s]);
    __syncthreads();
  }
  return sh[0];
}
struct Add {
  template <typename T> T operator()(T a, T b) const { return a + b; }
};
// torch.maximum / torch.minimum: NaN wins.
float maxNaN(float a, float b) { return a != a ? a : b != b ? b : (a < b ? b : a); }
float minNaN(float a, float b) { return a != a ? a : b != b ? b : (b < a ? b : a); }
// d gelu(v) / dv = Phi(v) + v phi(v).
float geluGradFactor(float v) {
  const float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752440f));
  const float pdf = 0.39894228040143267794f * expf(-0.5f * v * v);
  return cdf + v * pdf;
}
struct Max {
  float operator()(float a, float b) const { return maxNaN(a, b); }
};
struct Min {
  float operator()(float a, float b) const { return minNaN(a, b); }
};
template <typename T> float blockSum(float v, T *sh) { return blockReduce(v, sh, Add()); }
// Records the first failing op (its index + 1) in the function's status word.
void medFail(unsigned *status, unsigned code) { atomicCAS(status, 0u, code); }

// bf16-mixed storage. Kernels compute in float: a bf16 converts to float when read and
// rounds to nearest even when assigned (NaN stays a quiet NaN), as the CPU backend's bf16.
struct bf16 {
  unsigned short bits;
  operator float() const { return __uint_as_float((unsigned)bits << 16); }
  bf16 &operator=(float f) {
    const unsigned u = __float_as_uint(f);
    bits = (u & 0x7fffffffu) > 0x7f800000u ? (unsigned short)((u >> 16) | 0x40u)
                                           : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return *this;
  }
};
// An f32 operand of an op that computes in bf16: read rounded to bf16, as the CPU backend
// converts such operands first.
struct f32r {
  float v;
  operator float() const {
    bf16 b;
    b = v;
    return b;
  }
};
// fp16-mixed storage: IEEE binary16, converted as the CPU backend's f16 (nearest even,
// overflow to inf from 65520 on, subnormals down to 2^-24, NaN kept).
struct f16 {
  unsigned short bits;
  operator float() const {
    const unsigned s = (unsigned)(bits & 0x8000u) << 16, e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
    if (e == 0) { // subnormal: m * 2^-24, exactly
      const float v = (float)m * 5.9604644775390625e-8f;
      return s ? -v : v;
    }
    if (e == 31)
      return __uint_as_float(s | 0x7f800000u | (m << 13));
    return __uint_as_float(s | ((e + 112u) << 23) | (m << 13));
  }
  f16 &operator=(float f) {
    const unsigned u = __float_as_uint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) {
      bits = (unsigned short)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    } else if (a >= 0x477ff000u) {
      bits = (unsigned short)(sign | 0x7c00u);
    } else if (a >= 0x38800000u) { // normal: rebias, drop 13 bits to nearest even
      unsigned r = a - 0x38000000u;
      r += 0xfffu + ((r >> 13) & 1u);
      bits = (unsigned short)(sign | (r >> 13));
    } else { // subnormal: the nearest even multiple of 2^-24
      const float m = fabsf(f) * 16777216.0f, whole = floorf(m), frac = m - whole;
      unsigned n = (unsigned)whole;
      if (frac > 0.5f || (frac == 0.5f && (n & 1u)))
        ++n;
      bits = (unsigned short)(sign | n);
    }
    return *this;
  }
};
// K consecutive elements of one operand, held in registers by a thread of a vectorized
// elementwise kernel and moved with one vector load or store (K * sizeof(T) is 8 or 16
// bytes). Every buffer is 256-byte aligned (the executor's allocations and arena offsets)
// and a thread's first element is a multiple of K, so the address is K * sizeof(T)-aligned.
template <typename T, int K> struct alignas(sizeof(T) * K) Vec {
  T v[K];
  T &operator[](int k) { return v[k]; }
  const T &operator[](int k) const { return v[k]; }
};
template <int K, typename T> Vec<T, K> vload(const T *p) {
  return *reinterpret_cast<const Vec<T, K> *>(p);
}
template <int K, typename T> void vstore(T *p, const Vec<T, K> &v) {
  *reinterpret_cast<Vec<T, K> *>(p) = v;
}
// Parameters kept in f32 on the device, read by bf16/f16 ops (the executor launches these).
extern "C" __global__ void med_f32_to_bf16(const float *x, bf16 *y, i64 n) {
  const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = x[i];
}
extern "C" __global__ void med_f32_to_f16(const float *x, f16 *y, i64 n) {
  const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = x[i];
}

)";

/// The scalar expression of an elementwise op: the f32 result from its operands' f32
/// expressions, in operand order. One definition serves the op's own kernel and every
/// fused kernel it is part of. Empty for ops without one.
std::string scalarExpr(const std::string &kind, const std::vector<std::string> &x) {
  if (x.size() == 1) {
    const std::string &v = x[0];
    if (kind == "gelu")
      return v + " * 0.5f * (1.0f + erff(" + v + " * 0.70710678118654752440f))";
    if (kind == "sigmoid")
      return "1.0f / (1.0f + expf(-" + v + "))";
    if (kind == "neg")
      return "-" + v;
    if (kind == "exp")
      return "expf(" + v + ")";
    if (kind == "log")
      return "logf(" + v + ")";
    if (kind == "sqrt")
      return "sqrtf(" + v + ")";
  } else if (x.size() == 2) {
    const std::string &u = x[0], &v = x[1];
    if (kind == "add")
      return u + " + " + v;
    if (kind == "sub")
      return u + " - " + v;
    if (kind == "mul")
      return u + " * " + v;
    if (kind == "div")
      return u + " / " + v;
    if (kind == "max")
      return "maxNaN(" + u + ", " + v + ")";
    if (kind == "min")
      return "minNaN(" + u + ", " + v + ")";
    if (kind == "gelu_grad") // x, dy
      return v + " * geluGradFactor(" + u + ")";
  }
  return "";
}

/// The operands of an op with a scalar form, in the order its scalar form takes them.
const std::vector<const char *> &scalarOperands(const std::string &kind) {
  static const std::vector<const char *> unary{"input"}, binary{"lhs", "rhs"},
      geluGrad{"input", "grad_output"},
      adamw{"param", "grad", "exp_avg", "exp_avg_sq", "lr", "step"},
      sgd{"param", "grad", "momentum_buffer", "lr"}, none;
  if (kind == "gelu_grad")
    return geluGrad;
  if (kind == "adamw")
    return adamw;
  if (kind == "sgd")
    return sgd;
  if (!scalarExpr(kind, {"v"}).empty())
    return unary;
  if (!scalarExpr(kind, {"u", "v"}).empty())
    return binary;
  return none;
}

/// The scalar statement of an optimizer step on one element: reads `x` (expressions of the
/// operands in scalarOperands order; the learning rate and step may be any float
/// expressions), assigns `y` (the new parameter and state, in result order). It may fail the
/// function through the status word (`status`, `code`), as AdamW does for a step below 1.
/// One definition for the optimizer's own kernel and every fusion it is part of.
std::string optimizerStatement(const std::string &kind, const llvm::json::Object &attrs,
                               const std::vector<std::string> &x,
                               const std::vector<std::string> &y) {
  auto num = [&](const char *name) { return attrs.getNumber(name).value_or(0.0); };
  if (kind == "adamw") {
    const double b1 = num("beta1"), b2 = num("beta2");
    // The scalars in double from lr and step, as the CPU kernel forms them.
    return "  {\n"
           "    const double rate = " + x[4] + ", st = " + x[5] + ";\n"
           "    if (!(st >= 1.0)) { if (i == 0) medFail(status, code); return; }\n"
           "    const float decay = (float)(1.0 - rate * " + dbl(num("weight_decay")) + ");\n"
           "    const float b1 = " + flt(b1) + ", b2 = " + flt(b2) + ";\n"
           "    const float stepSize = (float)(rate / (1.0 - pow(" + dbl(b1) + ", st)));\n"
           "    const float correction2 = (float)sqrt(1.0 - pow(" + dbl(b2) + ", st));\n"
           "    const float gi = " + x[1] + ", mo = " + x[2] + ";\n"
           "    const float mi = mo + (1 - b1) * (gi - mo);\n"
           "    const float vi = b2 * " + x[3] + " + (1 - b2) * gi * gi;\n"
           "    const float denom = sqrtf(vi) / correction2 + " + flt(num("epsilon")) + ";\n"
           "    " + y[0] + " = " + x[0] + " * decay - stepSize * mi / denom;\n"
           "    " + y[1] + " = mi;\n    " + y[2] + " = vi;\n"
           "  }\n";
  }
  if (kind == "sgd") {
    const bool nesterov = attrs.getBoolean("nesterov").value_or(false);
    return "  {\n"
           "    const float r = (float)(double)" + x[3] + ";\n"
           "    const float wd = " + flt(num("weight_decay")) + ", mu = " +
           flt(num("momentum")) + ";\n"
           "    const float pi = " + x[0] + ";\n"
           "    float d = " + x[1] + " + wd * pi;\n"
           "    const float bi = mu * " + x[2] + " + d;\n" +
           (nesterov ? "    d = d + mu * bi;\n" : "    d = bi;\n") +
           "    " + y[0] + " = pi - r * d;\n    " + y[1] + " = bi;\n"
           "  }\n";
  }
  return "";
}

struct ValueType {
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t numel() const { return product(shape); }
};

struct Op {
  size_t index;
  std::string kind, loc;
  bool fp32 = false; // master-weight math: stays in f32 under mixed precision
  std::map<std::string, std::vector<int>> operands;
  std::vector<int> results;
  const json::Object *attrs;
};

/// The module's source: kernels, shared between functions when identical.
class Source {
public:
  std::string text = kPrelude;
  size_t kernels = 0;

  /// Adds (or finds) the kernel with these parameters and body; returns its name.
  std::string kernel(const std::string &base, const std::vector<std::string> &params,
                     const std::string &body, int block, const std::string &globals = "") {
    std::string sig;
    for (const std::string &p : params)
      sig += (sig.empty() ? "" : ", ") + p;
    std::string key = globals + "|" + std::to_string(block) + "|" + sig + "|" + body;
    auto it = byBody.find(key);
    if (it != byBody.end())
      return it->second;
    std::string name = base + "_" + std::to_string(kernels++);
    std::string g = globals;
    size_t at;
    while ((at = g.find("KNAME")) != std::string::npos)
      g.replace(at, 5, name);
    std::string b = body;
    while ((at = b.find("KNAME")) != std::string::npos)
      b.replace(at, 5, name);
    text += g;
    text += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(block) + ") " +
            name + "(" + sig + ") {\n" + b + "}\n\n";
    byBody[key] = name;
    return name;
  }

private:
  std::map<std::string, std::string> byBody;
};

struct CodegenError {
  std::string message;
};

/// Generates the kernels and the launch plan of one function.
class FunctionGen {
public:
  FunctionGen(Source &src, const json::Object &fn, const json::Array *fusions)
      : src(src), fn(fn), fusions(fusions) {}

  llvm::Expected<json::Object> run() {
    const json::Array *vals = fn.getArray("values");
    const json::Array *ops = fn.getArray("ops");
    if (!vals || !ops)
      return llvm::createStringError("malformed plan: a function has no values or ops");
    for (const json::Value &v : *vals) {
      ValueType t;
      const json::Object *o = v.getAsObject();
      if (auto d = o->getString("dtype"))
        t.dtype = d->str();
      if (const json::Array *s = o->getArray("shape"))
        for (const json::Value &e : *s)
          t.shape.push_back(*e.getAsInteger());
      values.push_back(std::move(t));
    }
    scratchBytes.push_back(4); // scratch 0: the status word
    std::vector<Op> parsed;
    for (size_t i = 0; i < ops->size(); ++i) {
      const json::Object *o = (*ops)[i].getAsObject();
      Op op;
      op.index = i;
      op.kind = o->getString("op").value_or("").str();
      op.loc = o->getString("loc").value_or("").str();
      if (const json::Object *g = o->getObject("operands"))
        for (auto &[name, ids] : *g) {
          std::vector<int> list;
          for (const json::Value &id : *ids.getAsArray())
            list.push_back(static_cast<int>(*id.getAsInteger()));
          op.operands[name.str()] = list;
        }
      for (const json::Value &id : *o->getArray("results"))
        op.results.push_back(static_cast<int>(*id.getAsInteger()));
      static const json::Object empty;
      op.attrs = o->getObject("attrs") ? o->getObject("attrs") : &empty;
      op.fp32 = o->getBoolean("fp32").value_or(false);
      parsed.push_back(std::move(op));
    }
    const std::string precision = fn.getString("precision").value_or("").str();
    if (precision == "bf16-mixed" || precision == "fp16-mixed")
      storeActivationsIn(parsed, precision == "bf16-mixed" ? "bf16" : "f16");
    for (const Op &op : parsed) {
      roundOnRead.clear();
      if (mixedType == "bf16" && isActivation(op))
        for (auto &[name, ids] : op.operands)
          if (!readsWide(op, name))
            for (int id : ids)
              if (type(id).dtype == "f32")
                roundOnRead.insert(id);
      try {
        lower(op);
      } catch (const CodegenError &e) {
        return llvm::createStringError(
            llvm::formatv("'med.{0}'{1}: CUDA code generation: {2}", op.kind,
                          op.loc.empty() ? "" : " at " + op.loc, e.message)
                .str());
      }
    }
    json::Array scratch;
    for (int64_t b : scratchBytes)
      scratch.push_back(b);
    json::Object plan{{"scratch", std::move(scratch)}, {"steps", std::move(steps)}};
    json::Array mixedValues;
    for (size_t id = 0; id < values.size(); ++id)
      if (!mixedType.empty() && values[id].dtype == mixedType)
        mixedValues.push_back(static_cast<int64_t>(id));
    if (!mixedValues.empty())
      plan[mixedType] = std::move(mixedValues);
    return plan;
  }

  size_t launches = 0;

private:
  Source &src;
  const json::Object &fn;
  const json::Array *fusions; ///< the plan's fusion bodies (may be null: none)
  std::vector<ValueType> values;
  std::vector<int64_t> scratchBytes;
  json::Array steps;
  std::string mixedType;     // "bf16" or "f16": the storage of activations (mixed precision)
  std::set<int> roundOnRead; // f32 operands of the op being lowered that it reads as bf16
  std::set<int> normAffine;  // values used only as a norm's gamma or beta (kept in f32)

  static bool isNorm(const std::string &kind) {
    for (const char *k : {"group_norm", "channel_layer_norm", "grn"})
      if (kind == k || kind == std::string(k) + "_grad")
        return true;
    return false;
  }
  /// Operands an op reads in f32 under bf16-mixed, as the CPU backend: saved statistics,
  /// and a norm's gamma and beta (torch autocast computes the norms in f32).
  static bool readsWide(const Op &op, const std::string &name) {
    return name == "mean" || name == "rstd" ||
           (isNorm(op.kind) && (name == "gamma" || name == "beta"));
  }

  /// Under mixed precision, does `op` compute in the activations' type (the CPU backend's
  /// rule): it is not marked fp32 and has a float result that is not a scalar. A parameter
  /// used only as a norm's gamma or beta stays f32.
  bool isActivation(const Op &op) const {
    if (op.fp32 || (op.kind == "param" && normAffine.count(op.results.at(0))))
      return false;
    for (int id : op.results)
      if ((type(id).dtype == "f32" || type(id).dtype == mixedType) && !type(id).shape.empty())
        return true;
    return false;
  }

  /// Mixed precision: the values the CPU backend stores in bf16 (bf16-mixed) or rounds to
  /// binary16 (fp16-mixed) are stored in `dtype` here: float arguments that are not
  /// scalars, and the float results of ops that compute in that type, but for the norms'
  /// other results (group_norm's saved statistics, the gradients of gamma and beta). A
  /// reshape keeps its input's type (it aliases the buffer). Under bf16-mixed an op also
  /// reads its f32 operands rounded to bf16 (roundOnRead), as the CPU backend converts them,
  /// except those of readsWide; under fp16-mixed the CPU backend reads them as they are.
  void storeActivationsIn(const std::vector<Op> &ops, const std::string &dtype) {
    mixedType = dtype;
    // Values used only as a norm's gamma or beta.
    std::map<int, int> uses, affineUses;
    for (const Op &op : ops)
      for (auto &[name, ids] : op.operands)
        for (int id : ids) {
          ++uses[id];
          affineUses[id] += isNorm(op.kind) && (name == "gamma" || name == "beta");
        }
    if (const json::Array *out = fn.getArray("outputs"))
      for (const json::Value &v : *out)
        ++uses[static_cast<int>(*v.getAsInteger())];
    for (auto &[id, n] : uses)
      if (affineUses[id] == n)
        normAffine.insert(id);
    if (const json::Array *in = fn.getArray("inputs"))
      for (const json::Value &v : *in) {
        ValueType &t = values.at(*v.getAsInteger());
        if (t.dtype == "f32" && !t.shape.empty())
          t.dtype = dtype;
      }
    for (const Op &op : ops) {
      if (op.kind == "reshape") {
        values.at(result(op)).dtype = type(one(op, "input")).dtype;
        continue;
      }
      if (!isActivation(op))
        continue;
      for (size_t i = 0; i < op.results.size(); ++i)
        if (values.at(op.results[i]).dtype == "f32" && !(isNorm(op.kind) && i > 0))
          values[op.results[i]].dtype = dtype;
    }
  }

  /// The kernel parameters with each float buffer typed as its value is stored (`bf16`),
  /// or read (`f32r`, an f32 operand of an op computing in bf16).
  std::vector<std::string> typed(const std::vector<std::string> &params,
                                 const std::vector<int> &args) const {
    std::vector<std::string> out = params;
    if (std::find(args.begin(), args.end(), status()) != args.end())
      out.push_back("const unsigned code"); // passed by launch(): kernels stay op-independent
    for (size_t i = 0; i < out.size() && i < args.size(); ++i) {
      if (args[i] < 0 || static_cast<size_t>(args[i]) >= values.size())
        continue; // scratch
      size_t at = out[i].find("float*");
      if (at == std::string::npos)
        continue;
      if (type(args[i]).dtype == "bf16" || type(args[i]).dtype == "f16")
        out[i].replace(at, 5, type(args[i]).dtype);
      else if (roundOnRead.count(args[i]) && out[i].rfind("const ", 0) == 0)
        out[i].replace(at, 5, "f32r");
    }
    return out;
  }

  [[noreturn]] static void error(const std::string &msg) { throw CodegenError{msg}; }

  // ---- plan access ---------------------------------------------------------------------
  int one(const Op &op, const std::string &name) const {
    auto it = op.operands.find(name);
    if (it == op.operands.end() || it->second.size() != 1)
      error("operand '" + name + "' needs exactly one value");
    return it->second.front();
  }
  std::optional<int> opt(const Op &op, const std::string &name) const {
    auto it = op.operands.find(name);
    if (it == op.operands.end() || it->second.empty())
      return std::nullopt;
    return it->second.front();
  }
  const std::vector<int> &group(const Op &op, const std::string &name) const {
    auto it = op.operands.find(name);
    if (it == op.operands.end())
      error("the plan has no operand '" + name + "'");
    return it->second;
  }
  int result(const Op &op, size_t i = 0) const {
    if (i >= op.results.size())
      error("the plan gives " + std::to_string(op.results.size()) + " results");
    return op.results[i];
  }
  const json::Value &attr(const Op &op, const std::string &name) const {
    const json::Value *v = op.attrs->get(name);
    if (!v)
      error("the plan has no attribute '" + name + "'");
    return *v;
  }
  int64_t intAttr(const Op &op, const std::string &name) const {
    if (auto i = attr(op, name).getAsInteger())
      return *i;
    error("attribute '" + name + "' is not an integer");
  }
  double floatAttr(const Op &op, const std::string &name) const {
    if (auto d = attr(op, name).getAsNumber())
      return *d;
    error("attribute '" + name + "' is not a number");
  }
  bool boolAttr(const Op &op, const std::string &name) const {
    if (auto b = attr(op, name).getAsBoolean())
      return *b;
    error("attribute '" + name + "' is not a boolean");
  }
  std::string strAttr(const Op &op, const std::string &name) const {
    if (auto s = attr(op, name).getAsString())
      return s->str();
    error("attribute '" + name + "' is not a string");
  }
  std::vector<int64_t> intsAttr(const Op &op, const std::string &name) const {
    std::vector<int64_t> out;
    const json::Array *a = attr(op, name).getAsArray();
    if (!a)
      error("attribute '" + name + "' is not a list");
    for (const json::Value &v : *a) {
      auto i = v.getAsInteger();
      if (!i)
        error("attribute '" + name + "' is not a list of integers");
      out.push_back(*i);
    }
    return out;
  }
  std::vector<double> floatsAttr(const Op &op, const std::string &name) const {
    std::vector<double> out;
    const json::Array *a = attr(op, name).getAsArray();
    if (!a)
      error("attribute '" + name + "' is not a list");
    for (const json::Value &v : *a)
      out.push_back(v.getAsNumber().value_or(NAN));
    return out;
  }
  std::array<int64_t, 3> triple(const Op &op, const std::string &name) const {
    std::vector<int64_t> v = intsAttr(op, name);
    if (v.size() != 3)
      error("'" + name + "' needs 3 entries");
    return {v[0], v[1], v[2]};
  }

  const ValueType &type(int id) const { return values.at(id); }
  const std::vector<int64_t> &shape(int id) const { return values.at(id).shape; }
  void requireFloat(int id, const std::string &what) const {
    if (type(id).dtype != "f32" && type(id).dtype != "bf16" && type(id).dtype != "f16")
      error(what + " has element type " + type(id).dtype +
            "; the CUDA backend stores floats as f32, bf16 or f16 only");
  }

  // ---- building blocks -----------------------------------------------------------------
  int scratch(int64_t bytes) {
    scratchBytes.push_back(std::max<int64_t>(bytes, 4));
    return static_cast<int>(values.size() + scratchBytes.size() - 1);
  }
  int status() const { return static_cast<int>(values.size()); }
  /// The status code of a failing op: a kernel argument (op index + 1), not a constant, so
  /// that kernels of different ops with equal bodies are one kernel.
  static std::string code(const Op &) { return "code"; }

  void launch(const Op &op, const std::string &kernel, int64_t grid, int block,
              const std::vector<int> &args) {
    if (grid <= 0)
      return;
    if (grid > kMaxGrid)
      error("needs " + std::to_string(grid) + " blocks, more than a grid holds");
    json::Array a;
    for (int id : args)
      a.push_back(id);
    json::Object step{{"kind", "launch"},
                      {"op", static_cast<int64_t>(op.index)},
                      {"kernel", kernel},
                      {"grid", json::Array{grid, 1, 1}},
                      {"block", json::Array{block, 1, 1}},
                      {"shared", 0},
                      {"args", std::move(a)}};
    if (std::find(args.begin(), args.end(), status()) != args.end())
      step["scalars"] = json::Array{static_cast<int64_t>(op.index + 1)}; // `code` (typed())
    steps.push_back(std::move(step));
    ++launches;
  }

  /// One thread per element of [0, n): `body` sees `i`.
  void elementwise(const Op &op, const std::string &base, const std::vector<std::string> &params,
                   const std::vector<int> &args, int64_t n, const std::string &body,
                   const std::string &globals = "") {
    std::string b = "  const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= " +
                    num(n) + ") return;\n" + body;
    launch(op, src.kernel(base, typed(params, args), b, kBlock, globals),
           (n + kBlock - 1) / kBlock, kBlock, args);
  }

  /// Elements per thread of a vectorized kernel moving `ids`: one 16-byte vector of the
  /// widest (8 of bf16 or f16, 4 of f32).
  int lanesFor(const std::vector<int> &ids) const {
    for (int id : ids)
      if (type(id).dtype != "bf16" && type(id).dtype != "f16")
        return 4;
    return 8;
  }
  /// The index type for a kernel whose indices stay below `bound` (with room for the
  /// rounding up of the last block).
  static Index indexFor(int64_t bound) {
    return Index{bound <= int64_t{2147483647} - 16 * kBlock};
  }

  /// An operand a vectorized kernel moves as vectors: parameter `name`, the thread's
  /// elements starting at `at` (code seeing i0; a multiple of the lanes).
  struct Moved {
    std::string name, at = "i0";
  };

  /// K consecutive elements of [0, n) per thread, K = `lanes`: each of `loads` is read into
  /// registers NAME_v with one vector load, `body` computes element i = i0 + k from lane k
  /// (NAME_v[k]) and sets lane k of each of `stores`, which go back with one vector store
  /// each. `perThread` runs once per thread, first (it sees i0). Where n is no multiple of
  /// K, the last thread moves its elements one by one. The mapping of elements to threads
  /// is all that differs from `elementwise`: each element is computed by the same code.
  void vectorized(const Op &op, const std::string &base, const std::vector<std::string> &params,
                  const std::vector<int> &args, int64_t n, int lanes, const Index &ix,
                  const std::vector<Moved> &loads, const std::vector<std::string> &stores,
                  const std::string &perThread, const std::string &body) {
    if (n <= 0)
      return;
    const std::vector<std::string> ps = typed(params, args);
    auto elemType = [&](const std::string &name) {
      for (const std::string &p : ps)
        if (llvm::StringRef(p).ends_with(" " + name)) {
          llvm::StringRef t = llvm::StringRef(p).split('*').first.trim();
          t.consume_front("const ");
          return t.str();
        }
      error("no kernel parameter '" + name + "'");
    };
    const std::string I = ix.type(), K = std::to_string(lanes), N = ix.lit(n);
    std::string b = ix.narrow
                        ? "  const int i0 = (int)(blockIdx.x * " + std::to_string(kBlock) +
                              "u + threadIdx.x) * " + K + ";\n"
                        : "  const i64 i0 = ((i64)blockIdx.x * " + std::to_string(kBlock) +
                              " + threadIdx.x) * " + K + ";\n";
    b += "  if (i0 >= " + N + ") return;\n" + perThread;
    std::vector<std::string> vecs;
    for (const Moved &m : loads)
      vecs.push_back(m.name);
    vecs.insert(vecs.end(), stores.begin(), stores.end());
    for (const std::string &v : vecs)
      b += "  Vec<" + elemType(v) + ", " + K + "> " + v + "_v;\n";
    // The body once, as a lambda: whole vectors, and the remainder of the last thread.
    b += "  const auto element = [&](int k) {\n";
    if (usesIdentifier(body, "i"))
      b += "    const " + I + " i = i0 + k;\n";
    for (llvm::StringRef line : llvm::split(llvm::StringRef(body).rtrim('\n'), '\n'))
      b += "  " + line.str() + "\n";
    b += "  };\n";
    std::string whole;
    for (const Moved &m : loads)
      whole += "  " + m.name + "_v = vload<" + K + ">(" + m.name + " + " + m.at + ");\n";
    whole += "#pragma unroll\n  for (int k = 0; k < " + K + "; ++k)\n    element(k);\n";
    for (const std::string &s : stores)
      whole += "  vstore(" + s + " + i0, " + s + "_v);\n";
    if (n % lanes == 0) {
      b += whole;
    } else {
      auto indent = [](const std::string &code) {
        std::string out;
        for (llvm::StringRef line : llvm::split(llvm::StringRef(code).rtrim('\n'), '\n'))
          out += (line.starts_with("#") ? "" : "  ") + line.str() + "\n";
        return out;
      };
      b += "  if (i0 + " + K + " <= " + N + ") {\n" + indent(whole) +
           "  } else { // the last thread: " + N + " is no multiple of " + K + "\n"
           // Unrolled (constant lanes): registers, not local memory, for the vectors.
           "#pragma unroll\n"
           "    for (int k = 0; k < " + K + "; ++k) {\n"
           "      if (i0 + k >= " + N + ") break;\n";
      for (const Moved &m : loads)
        b += "      " + m.name + "_v[k] = " + m.name + "[" + m.at + " + k];\n";
      b += "      element(k);\n";
      for (const std::string &s : stores)
        b += "      " + s + "[i0 + k] = " + s + "_v[k];\n";
      b += "    }\n  }\n";
    }
    const int64_t threads = (n + lanes - 1) / lanes;
    launch(op, src.kernel(base, ps, b, kBlock), (threads + kBlock - 1) / kBlock, kBlock, args);
  }

  /// Does `code` use the identifier `id` (a whole token)?
  static bool usesIdentifier(const std::string &code, const std::string &id) {
    auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (size_t at = code.find(id); at != std::string::npos; at = code.find(id, at + 1))
      if ((at == 0 || !ident(code[at - 1])) &&
          (at + id.size() == code.size() || !ident(code[at + id.size()])))
        return true;
    return false;
  }

  /// One block of `block` threads per output o of [0, outs): `body` sees `o` and `t`.
  void perBlock(const Op &op, const std::string &base, const std::vector<std::string> &params,
                const std::vector<int> &args, int64_t outs, int block, const std::string &body) {
    std::string b = "  const i64 o = blockIdx.x;\n  const int t = threadIdx.x;\n" + body;
    launch(op, src.kernel(base, typed(params, args), b, block), outs, block, args);
  }

  static std::string in(const std::string &name, const std::string &t = "float") {
    return "const " + t + "* __restrict__ " + name;
  }
  static std::string out(const std::string &name, const std::string &t = "float") {
    return t + "* __restrict__ " + name;
  }

  // ---- dispatch ------------------------------------------------------------------------
  void lower(const Op &op) {
    const std::string &k = op.kind;
    if (k == "param") {
      steps.push_back(json::Object{{"kind", "param"},
                                   {"op", static_cast<int64_t>(op.index)},
                                   {"name", strAttr(op, "name")},
                                   {"value", result(op)}});
    } else if (k == "assign") {
      steps.push_back(json::Object{{"kind", "assign"},
                                   {"op", static_cast<int64_t>(op.index)},
                                   {"name", strAttr(op, "name")},
                                   {"value", one(op, "value")}});
    } else if (k == "reshape") {
      int x = one(op, "input"), y = result(op);
      if (type(x).numel() != type(y).numel() || type(x).dtype != type(y).dtype)
        error("reshape changes the number of elements or the element type");
      steps.push_back(json::Object{{"kind", "alias"},
                                   {"op", static_cast<int64_t>(op.index)},
                                   {"from", x},
                                   {"value", y}});
    } else if (k == "constant") {
      constant(op);
    } else if (k == "conv3d") {
      conv(op, false);
    } else if (k == "conv3d_transpose") {
      conv(op, true);
    } else if (k == "conv3d_grad_weight") {
      convGradWeight(op);
    } else if (k == "group_norm") {
      groupNorm(op);
    } else if (k == "channel_layer_norm") {
      channelLayerNorm(op);
    } else if (k == "grn") {
      grn(op);
    } else if (k == "gelu" || k == "sigmoid" || k == "neg" || k == "exp" || k == "log" ||
               k == "sqrt") {
      unary(op);
    } else if (k == "add" || k == "sub" || k == "mul" || k == "div" || k == "max" || k == "min") {
      binary(op);
    } else if (k == "pad") {
      pad(op);
    } else if (k == "slice") {
      slice(op);
    } else if (k == "concat") {
      concat(op);
    } else if (k == "broadcast") {
      broadcast(op);
    } else if (k == "reduce") {
      reduce(op);
    } else if (k == "bce_with_logits" || k == "bce_with_logits_grad") {
      bce(op, k == "bce_with_logits_grad");
    } else if (k == "dice_ce" || k == "dice_ce_grad") {
      diceCE(op, k == "dice_ce_grad");
    } else if (k == "group_norm_grad") {
      groupNormGrad(op);
    } else if (k == "channel_layer_norm_grad") {
      channelLayerNormGrad(op);
    } else if (k == "grn_grad") {
      grnGrad(op);
    } else if (k == "fusion") {
      fusion(op);
    } else if (k == "gelu_grad") {
      geluGrad(op);
    } else if (k == "extremum_grad") {
      extremumGrad(op);
    } else if (k == "reduce_extremum_grad") {
      reduceExtremumGrad(op);
    } else if (k == "slice_grad") {
      sliceGrad(op);
    } else if (k == "any_non_finite") {
      anyNonFinite(op);
    } else if (k == "select") {
      select(op);
    } else if (k == "update_loss_scale") {
      updateLossScale(op);
    } else if (k == "adamw") {
      adamw(op);
    } else if (k == "sgd") {
      sgd(op);
    } else {
      error("no CUDA kernel for this op");
    }
  }

  // ---- ops -----------------------------------------------------------------------------
  void constant(const Op &op) {
    int y = result(op);
    requireFloat(y, "the constant");
    std::vector<double> v = floatsAttr(op, "value");
    int64_t n = type(y).numel();
    if (static_cast<int64_t>(v.size()) != n && v.size() != 1)
      error("constant has " + std::to_string(v.size()) + " values for " + std::to_string(n) +
            " elements");
    if (v.size() == 1) {
      elementwise(op, "constant", {out("y")}, {y}, n, "  y[i] = " + flt(v[0]) + ";\n");
      return;
    }
    std::string data = "__device__ const float KNAME_data[" + std::to_string(n) + "] = {";
    for (size_t i = 0; i < v.size(); ++i)
      data += (i ? ", " : "") + flt(v[i]);
    data += "};\n";
    elementwise(op, "constant", {out("y")}, {y}, n, "  y[i] = KNAME_data[i];\n", data);
  }

  void conv(const Op &op, bool transposed) {
    int x = one(op, "input"), w = one(op, "weight"), y = result(op);
    std::optional<int> b = opt(op, "bias");
    requireFloat(x, "the input");
    requireFloat(w, "the weight");
    requireFloat(y, "the result");
    if (b)
      requireFloat(*b, "the bias");
    const auto &xs = shape(x), &ws = shape(w), &ys = shape(y);
    if (xs.size() != 5 || ws.size() != 5 || ys.size() != 5)
      error("expected rank-5 input, weight and result");
    auto s = triple(op, "stride"), p = triple(op, "padding"), d = triple(op, "dilation");
    int64_t groups = intAttr(op, "groups");
    if (groups < 1 || xs[1] % groups || ys[1] % groups)
      error("channels do not split into " + std::to_string(groups) + " groups");
    for (int a = 0; a < 3; ++a)
      if (s[a] < 1 || d[a] < 1)
        error("stride and dilation must be positive");
    const int64_t cin = xs[1], cout = ys[1], cinG = cin / groups, coutG = cout / groups;
    const int64_t D = xs[2], H = xs[3], W = xs[4];
    const int64_t kD = ws[2], kH = ws[3], kW = ws[4], kVol = kD * kH * kW;
    std::string body = decompose("i", ys, "o");
    body += "  const i64 gr = o1 / " + num(coutG) + ";\n";
    if (transposed)
      body += "  const i64 col = o1 % " + num(coutG) + ";\n";
    body += "  float acc = 0.0f;\n"
            "  for (i64 cl = 0; cl < " + num(cinG) + "; ++cl) {\n"
            "    const i64 ci = gr * " + num(cinG) + " + cl;\n"
            "    const auto* xc = x + (o0 * " + num(cin) + " + ci) * " + num(D * H * W) + ";\n";
    if (!transposed) {
      body += "    const auto* wc = w + (o1 * " + num(cinG) + " + cl) * " + num(kVol) + ";\n"
              "    for (i64 kd = 0; kd < " + num(kD) + "; ++kd) {\n"
              "      const i64 id = o2 * " + num(s[0]) + " - " + num(p[0]) + " + kd * " + num(d[0]) + ";\n"
              "      if (id < 0 || id >= " + num(D) + ") continue;\n"
              "      for (i64 kh = 0; kh < " + num(kH) + "; ++kh) {\n"
              "        const i64 ih = o3 * " + num(s[1]) + " - " + num(p[1]) + " + kh * " + num(d[1]) + ";\n"
              "        if (ih < 0 || ih >= " + num(H) + ") continue;\n"
              "        for (i64 kw = 0; kw < " + num(kW) + "; ++kw) {\n"
              "          const i64 iw = o4 * " + num(s[2]) + " - " + num(p[2]) + " + kw * " + num(d[2]) + ";\n"
              "          if (iw < 0 || iw >= " + num(W) + ") continue;\n"
              "          acc += wc[(kd * " + num(kH) + " + kh) * " + num(kW) + " + kw] * xc[(id * " + num(H) + " + ih) * " + num(W) + " + iw];\n"
              "        }\n      }\n    }\n  }\n";
    } else {
      body += "    const auto* wc = w + (ci * " + num(coutG) + " + col) * " + num(kVol) + ";\n"
              "    for (i64 kd = 0; kd < " + num(kD) + "; ++kd) {\n"
              "      const i64 td = o2 + " + num(p[0]) + " - kd * " + num(d[0]) + ";\n"
              "      if (td < 0 || td % " + num(s[0]) + " != 0 || td / " + num(s[0]) + " >= " + num(D) + ") continue;\n"
              "      const i64 id = td / " + num(s[0]) + ";\n"
              "      for (i64 kh = 0; kh < " + num(kH) + "; ++kh) {\n"
              "        const i64 th = o3 + " + num(p[1]) + " - kh * " + num(d[1]) + ";\n"
              "        if (th < 0 || th % " + num(s[1]) + " != 0 || th / " + num(s[1]) + " >= " + num(H) + ") continue;\n"
              "        const i64 ih = th / " + num(s[1]) + ";\n"
              "        for (i64 kw = 0; kw < " + num(kW) + "; ++kw) {\n"
              "          const i64 tw = o4 + " + num(p[2]) + " - kw * " + num(d[2]) + ";\n"
              "          if (tw < 0 || tw % " + num(s[2]) + " != 0 || tw / " + num(s[2]) + " >= " + num(W) + ") continue;\n"
              "          const i64 iw = tw / " + num(s[2]) + ";\n"
              "          acc += wc[(kd * " + num(kH) + " + kh) * " + num(kW) + " + kw] * xc[(id * " + num(H) + " + ih) * " + num(W) + " + iw];\n"
              "        }\n      }\n    }\n  }\n";
    }
    body += b ? "  y[i] = acc + bias[o1];\n" : "  y[i] = acc;\n";
    std::vector<std::string> params{out("y"), in("x"), in("w")};
    std::vector<int> args{y, x, w};
    if (b) {
      params.push_back(in("bias"));
      args.push_back(*b);
    }
    elementwise(op, transposed ? "conv3d_transpose" : "conv3d", params, args, type(y).numel(),
                body);
  }

  void convGradWeight(const Op &op) {
    int x = one(op, "input"), dy = one(op, "grad_output"), dw = result(op);
    requireFloat(x, "the input");
    requireFloat(dy, "the output gradient");
    requireFloat(dw, "the result");
    const auto &xs = shape(x), &gs = shape(dy), &ws = shape(dw);
    if (xs.size() != 5 || gs.size() != 5 || ws.size() != 5)
      error("expected rank-5 input, output gradient and weight");
    auto s = triple(op, "stride"), p = triple(op, "padding"), d = triple(op, "dilation");
    int64_t groups = intAttr(op, "groups");
    const int64_t cin = xs[1], cout = gs[1];
    if (groups < 1 || cin % groups || cout % groups || ws[0] != cout || ws[1] != cin / groups ||
        gs[0] != xs[0])
      error("input, output gradient and weight do not match for " + std::to_string(groups) +
            " groups");
    const int64_t cinG = cin / groups, coutG = cout / groups;
    const int64_t D = xs[2], H = xs[3], W = xs[4], OD = gs[2], OH = gs[3], OW = gs[4];
    const int64_t terms = xs[0] * OD * OH * OW;
    const int block = blockFor(terms);
    // One block per weight; threads stride over the (n, od, oh, ow) terms.
    std::string body = decompose("o", ws, "w");
    body += "  const i64 ci = (w0 / " + num(coutG) + ") * " + num(cinG) + " + w1;\n"
            "  __shared__ float sh[" + std::to_string(block) + "];\n"
            "  float acc = 0.0f;\n"
            "  for (i64 r = t; r < " + num(terms) + "; r += " + std::to_string(block) + ") {\n" +
            decompose("r", {xs[0], OD, OH, OW}, "q") +
            "    const i64 id = q1 * " + num(s[0]) + " - " + num(p[0]) + " + w2 * " + num(d[0]) + ";\n"
            "    const i64 ih = q2 * " + num(s[1]) + " - " + num(p[1]) + " + w3 * " + num(d[1]) + ";\n"
            "    const i64 iw = q3 * " + num(s[2]) + " - " + num(p[2]) + " + w4 * " + num(d[2]) + ";\n"
            "    if (id < 0 || id >= " + num(D) + " || ih < 0 || ih >= " + num(H) + " || iw < 0 || iw >= " + num(W) + ") continue;\n"
            "    acc += dy[((q0 * " + num(cout) + " + w0) * " + num(OD) + " + q1) * " + num(OH * OW) + " + q2 * " + num(OW) + " + q3]"
            " * x[((q0 * " + num(cin) + " + ci) * " + num(D) + " + id) * " + num(H * W) + " + ih * " + num(W) + " + iw];\n"
            "  }\n"
            "  acc = blockSum(acc, sh);\n"
            "  if (t == 0) dw[o] = acc;\n";
    perBlock(op, "conv3d_grad_weight", {out("dw"), in("x"), in("dy")}, {dw, x, dy},
             type(dw).numel(), block, body);
  }

  /// N, C and trailing size S of an N×C×… value.
  struct NCS {
    int64_t n, c, s;
  };
  NCS ncs(int id) const {
    const auto &s = shape(id);
    if (s.size() < 2)
      error("expected an N×C×… input");
    return {s[0], s[1], product(s, 2)};
  }

  /// Kernel writing mean and rstd (interleaved) of `segs` contiguous runs of `len` values,
  /// as the CPU kernel's corrected two-pass groupStatistics.
  void segmentStats(const Op &op, int x, int64_t segs, int64_t len, double eps, int stats) {
    const int block = blockFor(len);
    std::string body =
        "  __shared__ float sh[" + std::to_string(block) + "];\n"
        "  const auto* p = x + o * " + num(len) + ";\n"
        "  float s = 0.0f;\n"
        "  for (i64 j = t; j < " + num(len) + "; j += " + std::to_string(block) + ") s += p[j];\n"
        "  const float mean = blockSum(s, sh) / (float)" + num(len) + ";\n"
        "  float d1 = 0.0f, d2 = 0.0f;\n"
        "  for (i64 j = t; j < " + num(len) + "; j += " + std::to_string(block) + ") {\n"
        "    const float d = p[j] - mean;\n    d1 += d;\n    d2 += d * d;\n  }\n"
        "  d1 = blockSum(d1, sh);\n  d2 = blockSum(d2, sh);\n"
        "  if (t == 0) {\n"
        "    const float m = (float)" + num(len) + ";\n"
        "    const float var = fmaxf(0.0f, (d2 - d1 * d1 / m) / m);\n"
        "    stats[2 * o] = mean + d1 / m;\n"
        "    stats[2 * o + 1] = 1.0f / sqrtf(var + " + flt(eps) + ");\n"
        "  }\n";
    perBlock(op, "norm_stats", {out("stats"), in("x")}, {stats, x}, segs, block, body);
  }

  /// The per-element prologue of the group-norm passes: the (n, c) row of element `i` (of
  /// a thread's first element `i0` where the planes are whole vectors), its channel `c` and
  /// its (n, group) segment `seg`.
  static std::string groupOf(const Index &ix, bool perThread, const NCS &d, int64_t groups,
                             int64_t cg) {
    const std::string I = ix.type();
    return "  const " + I + " row = " + (perThread ? "i0" : "i") + " / " + ix.lit(d.s) + ";\n"
           "  const " + I + " c = row % " + ix.lit(d.c) + ";\n"
           "  const " + I + " seg = (row / " + ix.lit(d.c) + ") * " + ix.lit(groups) +
           " + c / " + ix.lit(cg) + ";\n";
  }

  void groupNorm(const Op &op) {
    int x = one(op, "input"), g = one(op, "gamma"), b = one(op, "beta"), y = result(op);
    for (int id : {x, g, b, y})
      requireFloat(id, "an operand");
    NCS d = ncs(x);
    int64_t groups = intAttr(op, "groups");
    if (groups < 1 || d.c % groups)
      error("channels do not split into groups");
    const int64_t cg = d.c / groups, segs = d.n * groups;
    if (type(x).numel() == 0)
      return;
    int stats = scratch(segs * 2 * 4);
    segmentStats(op, x, segs, cg * d.s, floatAttr(op, "epsilon"), stats);
    const int64_t n = type(y).numel();
    const int lanes = lanesFor({y, x});
    const Index ix = indexFor(std::max(n, 2 * segs));
    // A thread's elements share their channel where the planes are whole vectors.
    const bool perThread = d.s % lanes == 0;
    std::string channel = groupOf(ix, perThread, d, groups, cg) +
        "  const float mu = stats[2 * seg], scale = stats[2 * seg + 1] * gamma[c];\n";
    std::string body = "  y_v[k] = (x_v[k] - mu) * scale + beta[c];\n";
    vectorized(op, "group_norm", {out("y"), in("x"), in("stats"), in("gamma"), in("beta")},
               {y, x, stats, g, b}, n, lanes, ix, {{"x"}}, {"y"}, perThread ? channel : "",
               perThread ? body : channel + body);
    if (op.results.size() == 3) { // save_statistics: mean and rstd for group_norm_grad
      int mean = result(op, 1), rstd = result(op, 2);
      requireFloat(mean, "the saved mean");
      requireFloat(rstd, "the saved rstd");
      elementwise(op, "group_norm_save", {out("mean"), out("rstd"), in("stats")},
                  {mean, rstd, stats}, segs,
                  "  mean[i] = stats[2 * i];\n  rstd[i] = stats[2 * i + 1];\n");
    }
  }

  void channelLayerNorm(const Op &op) {
    int x = one(op, "input"), g = one(op, "gamma"), b = one(op, "beta"), y = result(op);
    for (int id : {x, g, b, y})
      requireFloat(id, "an operand");
    NCS d = ncs(x);
    // One thread per (n, position); channels summed in increasing order, as the CPU.
    std::string body =
        "  const i64 n = i / " + num(d.s) + ", s = i % " + num(d.s) + ";\n"
        "  const auto* xp = x + n * " + num(d.c * d.s) + " + s;\n"
        "  auto* yp = y + n * " + num(d.c * d.s) + " + s;\n"
        "  float mean = 0.0f, sd = 0.0f;\n"
        "  for (i64 c = 0; c < " + num(d.c) + "; ++c) mean += xp[c * " + num(d.s) + "];\n"
        "  mean /= (float)" + num(d.c) + ";\n"
        "  for (i64 c = 0; c < " + num(d.c) + "; ++c) {\n"
        "    const float v = xp[c * " + num(d.s) + "] - mean;\n    sd += v * v;\n  }\n"
        "  sd = sqrtf(sd / (float)" + num(d.c) + " + " + flt(floatAttr(op, "epsilon")) + ");\n"
        "  for (i64 c = 0; c < " + num(d.c) + "; ++c)\n"
        "    yp[c * " + num(d.s) + "] = (xp[c * " + num(d.s) + "] - mean) / sd * gamma[c] + beta[c];\n";
    elementwise(op, "channel_layer_norm", {out("y"), in("x"), in("gamma"), in("beta")},
                {y, x, g, b}, d.n * d.s, body);
  }

  /// Per row of `len` values: Σ x² (into out[row * stride + 0]) and, with dy, Σ dy and
  /// Σ dy·x (into + 1, + 2).
  void rowSums(const Op &op, int x, std::optional<int> dy, int64_t rows, int64_t len, int outBuf) {
    const int block = blockFor(len);
    const int64_t stride = dy ? 3 : 1;
    std::string body =
        "  __shared__ float sh[" + std::to_string(block) + "];\n"
        "  const auto* p = x + o * " + num(len) + ";\n";
    if (dy)
      body += "  const auto* g = dy + o * " + num(len) + ";\n";
    body += "  float s2 = 0.0f, sg = 0.0f, sgx = 0.0f;\n"
            "  for (i64 j = t; j < " + num(len) + "; j += " + std::to_string(block) + ") {\n"
            "    const float v = p[j];\n    s2 += v * v;\n";
    if (dy)
      body += "    sg += g[j];\n    sgx += g[j] * v;\n";
    body += "  }\n  s2 = blockSum(s2, sh);\n";
    if (dy)
      body += "  sg = blockSum(sg, sh);\n  sgx = blockSum(sgx, sh);\n";
    body += "  if (t == 0) {\n    sums[o * " + num(stride) + "] = s2;\n";
    if (dy)
      body += "    sums[o * 3 + 1] = sg;\n    sums[o * 3 + 2] = sgx;\n";
    body += "  }\n  (void)sg; (void)sgx;\n";
    std::vector<std::string> params{out("sums"), in("x")};
    std::vector<int> args{outBuf, x};
    if (dy) {
      params.push_back(in("dy"));
      args.push_back(*dy);
    }
    perBlock(op, dy ? "grn_grad_sums" : "grn_sums", params, args, rows, block, body);
  }

  void grn(const Op &op) {
    int x = one(op, "input"), g = one(op, "gamma"), b = one(op, "beta"), y = result(op);
    for (int id : {x, g, b, y})
      requireFloat(id, "an operand");
    NCS d = ncs(x);
    if (type(x).numel() == 0)
      return;
    int sums = scratch(d.n * d.c * 4), nx = scratch(d.n * d.c * 4);
    rowSums(op, x, std::nullopt, d.n * d.c, d.s, sums);
    // N_c = G_c / (mean_c G + eps), per sample, channels in order.
    std::string norm =
        "  for (i64 n = t; n < " + num(d.n) + "; n += blockDim.x) {\n"
        "    float s = 0.0f;\n"
        "    for (i64 c = 0; c < " + num(d.c) + "; ++c) s += sqrtf(sums[n * " + num(d.c) + " + c]);\n"
        "    const float denom = s / (float)" + num(d.c) + " + " + flt(floatAttr(op, "epsilon")) + ";\n"
        "    for (i64 c = 0; c < " + num(d.c) + "; ++c) nx[n * " + num(d.c) + " + c] = sqrtf(sums[n * " + num(d.c) + " + c]) / denom;\n"
        "  }\n";
    perBlock(op, "grn_norm", {out("nx"), in("sums")}, {nx, sums}, 1, kBlock, norm);
    std::string body =
        "  const i64 row = i / " + num(d.s) + ", c = row % " + num(d.c) + ";\n"
        "  const float v = x[i];\n"
        "  y[i] = gamma[c] * (v * nx[row]) + beta[c] + v;\n";
    elementwise(op, "grn", {out("y"), in("x"), in("nx"), in("gamma"), in("beta")},
                {y, x, nx, g, b}, type(y).numel(), body);
  }

  void unary(const Op &op) {
    int x = one(op, "input"), y = result(op);
    requireFloat(x, "the input");
    requireFloat(y, "the result");
    if (type(x).numel() != type(y).numel())
      error("result and input sizes differ");
    const int64_t n = type(y).numel();
    vectorized(op, op.kind, {out("y"), in("x")}, {y, x}, n, lanesFor({y, x}), indexFor(n),
               {{"x"}}, {"y"}, "",
               "  const float v = x_v[k];\n  y_v[k] = " + scalarExpr(op.kind, {"v"}) + ";\n");
  }

  /// Strides of an operand of shape `s` broadcast (NumPy rules) to `to`.
  std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &s,
                                        const std::vector<int64_t> &to) const {
    if (s.size() > to.size())
      error("an operand has more axes than the result");
    std::vector<int64_t> st(to.size(), 0);
    size_t off = to.size() - s.size();
    int64_t acc = 1;
    for (int64_t i = static_cast<int64_t>(to.size()) - 1; i >= static_cast<int64_t>(off); --i) {
      int64_t d = s[i - off];
      if (d != to[i] && d != 1)
        error("an operand does not broadcast to the result");
      st[i] = d == 1 ? 0 : acc;
      acc *= d;
    }
    return st;
  }

  void binary(const Op &op) {
    int a = one(op, "lhs"), b = one(op, "rhs"), y = result(op);
    for (int id : {a, b, y})
      requireFloat(id, "an operand");
    const auto &ys = shape(y);
    const int64_t n = type(y).numel();
    const int lanes = lanesFor({y, a, b});
    const Index ix = indexFor(n);
    OperandReads r{ys, lanes, ix};
    const std::string u = read(r, a, "a"), v = read(r, b, "b");
    r.perElement += "  const float u = " + u + ", v = " + v + ";\n  y_v[k] = " +
                    scalarExpr(op.kind, {"u", "v"}) + ";\n";
    vectorized(op, op.kind, {out("y"), in("a"), in("b")}, {y, a, b}, n, lanes, ix, r.loads, {"y"},
               r.perThread, r.perElement);
  }

  /// How a vectorized kernel over `space` reads its operands (read()).
  struct OperandReads {
    const std::vector<int64_t> &space;
    int lanes;
    Index ix;
    std::vector<Moved> loads;
    std::string perThread, perElement;
    bool threadDecomposed = false, decomposed = false; // i0 into q*, i into o*
  };

  /// The expression of element k of operand `id` (kernel parameter `name`) in a vectorized
  /// kernel over r.space: an operand of that shape moves as vectors; a broadcast one is read
  /// once per thread where the thread's elements share its element, as vectors where they
  /// are consecutive in it, else element by element.
  std::string read(OperandReads &r, int id, const std::string &name) const {
    const std::vector<int64_t> &ys = r.space;
    if (shape(id) == ys) {
      r.loads.push_back({name});
      return name + "_v[k]";
    }
    const std::vector<int64_t> st = broadcastStrides(shape(id), ys);
    const BroadcastRun run = broadcastRun(st, ys);
    if (run.shared % r.lanes == 0 || run.consecutive % r.lanes == 0) {
      const std::string at = offsetExpr("q", st, 0, r.ix);
      if (!r.threadDecomposed && at != "0")
        r.perThread += decompose("i0", ys, "q", r.ix);
      r.threadDecomposed = r.threadDecomposed || at != "0";
      if (run.shared % r.lanes == 0) {
        r.perThread += "  const float " + name + "_s = " + name + "[" + at + "];\n";
        return name + "_s";
      }
      r.loads.push_back({name, at});
      return name + "_v[k]";
    }
    if (!r.decomposed)
      r.perElement += decompose("i", ys, "o", r.ix);
    r.decomposed = true;
    return name + "[" + offsetExpr("o", st, 0, r.ix) + "]";
  }

  /// An `elementwise` fusion: one vectorized kernel over the results' shape computing the
  /// body's scalar expressions in f32 registers; inputs read as read() reads them, each
  /// result stored once in its storage type.
  void fusion(const Op &op) {
    const json::Object *body = nullptr;
    if (std::optional<int64_t> index = attr(op, "body").getAsInteger())
      if (fusions && *index >= 0 && static_cast<size_t>(*index) < fusions->size())
        body = (*fusions)[*index].getAsObject();
    if (!body)
      error("the fusion's body is missing from the plan");
    if (body->getString("template").value_or("") != "elementwise")
      error("no CUDA template '" + body->getString("template").value_or("").str() + "'");
    const std::vector<int> &inputs = op.operands.at("inputs");
    const json::Array &bodyInputs = *body->getArray("inputs"), &bodyOutputs = *body->getArray("outputs");
    if (bodyInputs.size() != inputs.size() || bodyOutputs.size() != op.results.size())
      error("the fusion's inputs or results do not match its body");
    for (int id : inputs)
      requireFloat(id, "an input");
    for (int id : op.results)
      requireFloat(id, "a result");
    const std::vector<int64_t> &ys = shape(op.results.at(0));
    for (int id : op.results)
      if (shape(id) != ys)
        error("results of different shapes");
    // Expressions of the body's values: inputs as read, then one register per op result.
    std::vector<int> ids = op.results;
    ids.insert(ids.end(), inputs.begin(), inputs.end());
    const int64_t n = product(ys);
    const int lanes = lanesFor(ids);
    const Index ix = indexFor(n);
    OperandReads r{ys, lanes, ix};
    std::map<int64_t, std::string> expr;
    std::vector<std::string> params;
    for (size_t j = 0; j < op.results.size(); ++j)
      params.push_back(out("y" + std::to_string(j)));
    for (size_t j = 0; j < inputs.size(); ++j) {
      params.push_back(in("x" + std::to_string(j)));
      expr[*bodyInputs[j].getAsInteger()] = read(r, inputs[j], "x" + std::to_string(j));
    }
    bool usesStatus = false;
    static const json::Object noAttrs;
    for (const json::Value &v : *body->getArray("ops")) {
      const json::Object &o = *v.getAsObject();
      const std::string kind = o.getString("op").value_or("").str();
      const json::Object *operands = o.getObject("operands");
      std::vector<std::string> xs;
      for (const char *name : scalarOperands(kind)) {
        const json::Array *g = operands ? operands->getArray(name) : nullptr;
        if (!g || g->size() != 1)
          error("'med." + kind + "' in a fusion body: operand '" + name + "' needs one value");
        xs.push_back(expr.at(*(*g)[0].getAsInteger()));
      }
      std::vector<std::string> ys;
      for (const json::Value &id : *o.getArray("results")) {
        ys.push_back("t" + std::to_string(*id.getAsInteger()));
        expr[*id.getAsInteger()] = ys.back();
      }
      const json::Object *attrs = o.getObject("attrs");
      const std::string statement = optimizerStatement(kind, attrs ? *attrs : noAttrs, xs, ys);
      if (!statement.empty()) {
        r.perElement += "  float " + llvm::join(ys, ", ") + ";\n" + statement;
        usesStatus = usesStatus || usesIdentifier(statement, "status");
        continue;
      }
      const std::string e = ys.size() == 1 ? scalarExpr(kind, xs) : "";
      if (e.empty())
        error("'med." + kind + "' in a fusion body has no scalar form");
      r.perElement += "  const float " + ys[0] + " = " + e + ";\n";
    }
    if (usesStatus) { // after the results and inputs: the vectors index params by name
      params.push_back(out("status", "unsigned"));
      ids.push_back(status());
    }
    std::vector<std::string> stores;
    for (size_t j = 0; j < op.results.size(); ++j) {
      stores.push_back("y" + std::to_string(j));
      r.perElement += "  y" + std::to_string(j) + "_v[k] = " +
                      expr.at(*bodyOutputs[j].getAsInteger()) + ";\n";
    }
    vectorized(op, "fusion", params, ids, n, lanes, ix, r.loads, stores, r.perThread,
               r.perElement);
  }

  /// Of a broadcast operand with strides `st` (broadcastStrides) into `to`: how many
  /// consecutive result elements share an element of it (`shared`: the trailing axes it is
  /// broadcast along), and over how many consecutive result elements it is consecutive
  /// too (`consecutive`: the trailing axes it is not broadcast along). Axes of size 1 count
  /// for both.
  struct BroadcastRun {
    int64_t shared = 1, consecutive = 1;
  };
  static BroadcastRun broadcastRun(const std::vector<int64_t> &st, const std::vector<int64_t> &to) {
    BroadcastRun r;
    bool sharing = true, following = true;
    for (int64_t d = static_cast<int64_t>(to.size()) - 1; d >= 0; --d) {
      if (to[d] == 1)
        continue;
      sharing = sharing && st[d] == 0;
      following = following && st[d] == r.consecutive;
      if (sharing)
        r.shared *= to[d];
      if (following)
        r.consecutive *= to[d];
    }
    if (sharing) // broadcast along every axis: one element for all
      r.shared = 0;
    return r;
  }

  std::string elemType(int id) const {
    std::string t = ctype(type(id).dtype);
    if (t.empty())
      error("unsupported element type " + type(id).dtype);
    return t;
  }

  void pad(const Op &op) {
    int x = one(op, "input"), y = result(op);
    std::string t = elemType(x);
    const auto &xs = shape(x), &ys = shape(y);
    std::vector<int64_t> low = intsAttr(op, "low"), high = intsAttr(op, "high");
    if (low.size() != xs.size() || high.size() != xs.size() || ys.size() != xs.size())
      error("need one low and one high entry per axis");
    double value = floatAttr(op, "value");
    std::string fill = type(x).dtype == "f32" || type(x).dtype == "bf16" || type(x).dtype == "f16"
                           ? flt(value)
                       : type(x).dtype == "f64" ? dbl(value)
                                                : "(" + t + ")" + dbl(value);
    std::string body = decompose("i", ys, "o");
    std::string inside, off;
    std::vector<int64_t> st = contiguousStrides(xs);
    for (size_t d = 0; d < xs.size(); ++d) {
      std::string idx = "(o" + std::to_string(d) + " - " + num(low[d]) + ")";
      inside += (inside.empty() ? "" : " && ") + idx + " >= 0 && " + idx + " < " + num(xs[d]);
      off += (off.empty() ? "" : " + ") + idx + " * " + num(st[d]);
    }
    if (inside.empty())
      inside = "true", off = "0";
    body += "  y[i] = (" + inside + ") ? x[" + off + "] : " + fill + ";\n";
    elementwise(op, "pad", {out("y", t), in("x", t)}, {y, x}, type(y).numel(), body);
  }

  void slice(const Op &op) {
    int x = one(op, "input"), y = result(op);
    std::string t = elemType(x);
    const auto &xs = shape(x), &ys = shape(y);
    std::vector<int64_t> offs = intsAttr(op, "offsets"), strides = intsAttr(op, "strides");
    if (strides.empty())
      strides.assign(xs.size(), 1);
    if (offs.size() != xs.size() || strides.size() != xs.size() || ys.size() != xs.size())
      error("need one offset and stride per axis");
    for (size_t d = 0; d < xs.size(); ++d)
      if (ys[d] > 0 && (offs[d] < 0 || strides[d] < 1 || offs[d] + (ys[d] - 1) * strides[d] >= xs[d]))
        error("the box does not lie inside the input");
    std::vector<int64_t> st = contiguousStrides(xs);
    std::string body = decompose("i", ys, "o"), off;
    for (size_t d = 0; d < xs.size(); ++d)
      off += (off.empty() ? "" : " + ") + std::string("(") + num(offs[d]) + " + o" +
             std::to_string(d) + " * " + num(strides[d]) + ") * " + num(st[d]);
    body += "  y[i] = x[" + (off.empty() ? std::string("0") : off) + "];\n";
    elementwise(op, "slice", {out("y", t), in("x", t)}, {y, x}, type(y).numel(), body);
  }

  void concat(const Op &op) {
    const std::vector<int> &ins = group(op, "inputs");
    int y = result(op);
    std::string t = elemType(y);
    const auto &ys = shape(y);
    int64_t axis = intAttr(op, "axis"), r = static_cast<int64_t>(ys.size());
    if (axis < 0)
      axis += r;
    if (axis < 0 || axis >= r)
      error("axis out of range");
    const int64_t inner = product(ys, axis + 1), ax = ys[axis];
    std::string body = "  const i64 inner = i % " + num(inner) + ", q = i / " + num(inner) +
                       ";\n  const i64 a = q % " + num(ax) + ", outer = q / " + num(ax) + ";\n";
    std::vector<std::string> params{out("y", t)};
    std::vector<int> args{y};
    int64_t start = 0;
    for (size_t k = 0; k < ins.size(); ++k) {
      if (elemType(ins[k]) != t || shape(ins[k]).size() != ys.size())
        error("inputs and result differ in element type or rank");
      int64_t len = shape(ins[k])[axis];
      std::string name = "x" + std::to_string(k);
      params.push_back(in(name, t));
      args.push_back(ins[k]);
      body += "  " + std::string(k ? "else " : "") + "if (a < " + num(start + len) + ") y[i] = " +
              name + "[(outer * " + num(len) + " + (a - " + num(start) + ")) * " + num(inner) +
              " + inner];\n";
      start += len;
    }
    if (start != ax)
      error("inputs do not add up to the result along the axis");
    elementwise(op, "concat", params, args, type(y).numel(), body);
  }

  void broadcast(const Op &op) {
    int x = one(op, "input"), y = result(op);
    std::string t = elemType(x);
    const auto &ys = shape(y);
    std::string body = decompose("i", ys, "o");
    body += "  y[i] = x[" + offsetExpr("o", broadcastStrides(shape(x), ys)) + "];\n";
    elementwise(op, "broadcast", {out("y", t), in("x", t)}, {y, x}, type(y).numel(), body);
  }

  /// The sizes and strides of the kept and the reduced axes of a `reduce`-style op's input.
  struct ReduceAxes {
    std::vector<int64_t> keptSize, keptStride, redSize, redStride;
  };
  ReduceAxes reduceAxes(const Op &op, const std::vector<int64_t> &xs) const {
    const int64_t r = static_cast<int64_t>(xs.size());
    std::vector<bool> reduced(r, false);
    for (int64_t a : intsAttr(op, "axes")) {
      int64_t axis = a < 0 ? a + r : a;
      if (axis < 0 || axis >= r)
        error("axis out of range");
      reduced[axis] = true;
    }
    ReduceAxes out;
    std::vector<int64_t> st = contiguousStrides(xs);
    for (int64_t i = 0; i < r; ++i) {
      (reduced[i] ? out.redSize : out.keptSize).push_back(xs[i]);
      (reduced[i] ? out.redStride : out.keptStride).push_back(st[i]);
    }
    return out;
  }

  // ---- split sums ----------------------------------------------------------------------
  //
  // A sum (or max/min) of many terms per output, with few outputs (bias gradients, loss
  // sums), runs near memory bandwidth only if (1) enough blocks share it, (2) the inner loop
  // walks contiguous memory without per-element index arithmetic and (3) every thread keeps
  // several loads in flight. Each output's terms (row q, column i: term q·cols + i) are cut
  // into `parts` contiguous ranges of `len` terms, one block each; a thread walks a range
  // row by row with `kUnroll` independent accumulators, the block combines them in a fixed
  // tree, and a second kernel (only when parts > 1) combines the parts of each output in a
  // fixed tree. The order of every sum depends on the shapes only: the same bits on every run.

  static constexpr int kUnroll = 8;            // independent accumulators per thread
  static constexpr int64_t kSplitBlocks = 4096; // blocks to aim for over all outputs
  static constexpr int64_t kMinPart = 4096;     // fewest terms a part is worth

  /// An accumulator of a split sum: per thread `type a_<name>[kUnroll]` (the term code
  /// updates `a_<name>[u]`), over the block and the parts `wide <name>`, combined with the
  /// functor `fn` (Add(), Max(), Min()).
  struct SplitAcc {
    std::string name, type, wide, init, fn;
  };
  struct SplitSum {
    int64_t outs = 1, count = 1, cols = 1; // outputs, terms per output, terms per row
    std::string base;  // code defining `const i64 ob`, the element of term 0 of output `out`
    std::string row;   // code defining `const i64 ro`, the offset of row `q` from ob
    std::string term;  // code for the term at element `e` (u: the accumulator to update)
    std::vector<SplitAcc> accs;
    int unroll = kUnroll; // accumulators per thread (fewer where a term has many)
  };

  /// Parts per output and terms per part of a split sum: about kSplitBlocks blocks in all,
  /// each part at least kMinPart terms and a multiple of one unrolled sweep of the block.
  static std::pair<int64_t, int64_t> splitParts(int64_t outs, int64_t count) {
    int64_t parts = 1;
    if (outs < kSplitBlocks && count >= 2 * kMinPart)
      parts = std::min((count + kMinPart - 1) / kMinPart, (kSplitBlocks + outs - 1) / outs);
    if (parts <= 1)
      return {1, count};
    const int64_t sweep = kUnroll * kBlock;
    int64_t len = (count + parts - 1) / parts;
    len = (len + sweep - 1) / sweep * sweep;
    return {(count + len - 1) / len, len};
  }

  /// Emits a split sum: `params`/`args` are what the terms read, `outParams`/`outArgs` what
  /// `finish` writes; `finish` runs in thread 0 once per output `o`, with each accumulator's
  /// total as `<name>`. Returns the number of parts.
  int64_t splitSum(const Op &op, const std::string &kernelBase, const SplitSum &s,
                   const std::vector<std::string> &params, const std::vector<int> &args,
                   const std::vector<std::string> &outParams, const std::vector<int> &outArgs,
                   const std::string &finish) {
    const auto [parts, len] = splitParts(s.outs, s.count);
    const int block = blockFor((std::min(len, s.count) + 3) / 4);
    const std::string B = std::to_string(block), U = std::to_string(s.unroll);
    // 32-bit column arithmetic where a row allows it.
    const std::string ct = s.cols + int64_t(s.unroll) * block < 2147483647 ? "int" : "i64";
    std::set<std::string> wides;
    for (const SplitAcc &a : s.accs)
      wides.insert(a.wide);
    auto shName = [](const std::string &w) { return "sh_" + std::string(w == "float" ? "f" : w); };
    std::string shared;
    for (const std::string &w : wides)
      shared += "  __shared__ " + w + " " + shName(w) + "[" + B + "];\n";

    std::string body = shared + "  const i64 out = o / " + num(parts) + ", part = o % " +
                       num(parts) + ";\n" + s.base;
    for (const SplitAcc &a : s.accs)
      body += "  " + a.type + " a_" + a.name + "[" + U + "];\n  for (int u = 0; u < " + U +
              "; ++u) a_" + a.name + "[u] = " + a.init + ";\n";
    body += "  i64 j = part * " + num(len) + ";\n"
            "  const i64 jEnd = j + " + num(len) + " < " + num(s.count) + " ? j + " + num(len) +
            " : " + num(s.count) + ";\n"
            "  while (j < jEnd) { // the part's piece of row q: columns [c0, cEnd)\n"
            "    const i64 q = j / " + num(s.cols) + ";\n"
            "    const " + ct + " c0 = (" + ct + ")(j - q * " + num(s.cols) + ");\n"
            "    const " + ct + " cEnd = (" + ct + ")(jEnd - q * " + num(s.cols) + " < " +
            num(s.cols) + " ? jEnd - q * " + num(s.cols) + " : " + num(s.cols) + ");\n" +
            s.row +
            "    const i64 rb = ob + ro;\n"
            "    for (" + ct + " c = c0 + t; c < cEnd; c += " + std::to_string(s.unroll * block) +
            ") {\n"
            "#pragma unroll\n"
            "      for (int u = 0; u < " + U + "; ++u) { // independent loads in flight\n"
            "        if (c + u * " + B + " >= cEnd) break;\n"
            "        const i64 e = rb + c + u * " + B + ";\n" + s.term +
            "      }\n    }\n"
            "    j = q * " + num(s.cols) + " + cEnd;\n  }\n";
    for (const SplitAcc &a : s.accs)
      body += "  for (int u = 1; u < " + U + "; ++u) a_" + a.name + "[0] = " + a.fn + "(a_" +
              a.name + "[0], a_" + a.name + "[u]);\n"
              "  const " + a.wide + " " + a.name + " = blockReduce((" + a.wide + ")a_" + a.name +
              "[0], " + shName(a.wide) + ", " + a.fn + ");\n";

    std::vector<std::string> ps = params;
    std::vector<int> as = args;
    if (parts == 1) {
      ps.insert(ps.begin(), outParams.begin(), outParams.end());
      as.insert(as.begin(), outArgs.begin(), outArgs.end());
      perBlock(op, kernelBase, ps, as, s.outs, block, body + "  if (t == 0) {\n" + finish + "  }\n");
      return 1;
    }
    // Partials: one value per (output, part) and accumulator.
    std::vector<std::string> pp, cp = outParams;
    std::vector<int> pa, ca = outArgs;
    std::string store;
    for (const SplitAcc &a : s.accs) {
      int id = scratch(s.outs * parts * (a.wide == "float" ? 4 : 8));
      pp.push_back(out("p_" + a.name, a.wide));
      pa.push_back(id);
      cp.push_back(in("p_" + a.name, a.wide));
      ca.push_back(id);
      store += "    p_" + a.name + "[o] = " + a.name + ";\n";
    }
    ps.insert(ps.begin(), pp.begin(), pp.end());
    as.insert(as.begin(), pa.begin(), pa.end());
    perBlock(op, kernelBase + "_parts", ps, as, s.outs * parts, block,
             body + "  if (t == 0) {\n" + store + "  }\n");
    const int block2 = blockFor(parts);
    std::string combine;
    for (const std::string &w : wides)
      combine += "  __shared__ " + w + " " + shName(w) + "[" + std::to_string(block2) + "];\n";
    for (const SplitAcc &a : s.accs)
      combine += "  " + a.wide + " " + a.name + " = " + a.init + ";\n"
                 "  for (i64 k = t; k < " + num(parts) + "; k += " + std::to_string(block2) +
                 ") " + a.name + " = " + a.fn + "(" + a.name + ", p_" + a.name + "[o * " +
                 num(parts) + " + k]);\n"
                 "  " + a.name + " = blockReduce(" + a.name + ", " + shName(a.wide) + ", " +
                 a.fn + ");\n";
    perBlock(op, kernelBase + "_combine", cp, ca, s.outs, block2,
             combine + "  if (t == 0) {\n" + finish + "  }\n");
    return parts;
  }

  /// A reduce whose innermost axes (after dropping axes of size 1 and merging neighbours)
  /// are reduced: each output's terms are rows of contiguous elements, a split sum.
  /// Returns false for other reduces (the innermost axis kept).
  bool splitReduce(const Op &op, int x, int y, const std::string &kind, const std::string &init,
                   const std::string &fn) {
    const auto &xs = shape(x);
    std::vector<bool> reduced(xs.size(), false);
    for (int64_t a : intsAttr(op, "axes"))
      reduced[a < 0 ? a + static_cast<int64_t>(xs.size()) : a] = true;
    const std::vector<int64_t> st = contiguousStrides(xs);
    struct Group {
      int64_t size, stride;
      bool reduced;
    };
    std::vector<Group> groups;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (xs[i] == 1)
        continue;
      if (!groups.empty() && groups.back().reduced == reduced[i]) {
        groups.back().size *= xs[i];
        groups.back().stride = st[i];
      } else {
        groups.push_back({xs[i], st[i], static_cast<bool>(reduced[i])});
      }
    }
    if (groups.empty() || !groups.back().reduced)
      return false;
    std::vector<int64_t> keptSize, keptStride, rowSize, rowStride;
    for (size_t i = 0; i + 1 < groups.size(); ++i) {
      (groups[i].reduced ? rowSize : keptSize).push_back(groups[i].size);
      (groups[i].reduced ? rowStride : keptStride).push_back(groups[i].stride);
    }
    SplitSum s;
    s.outs = product(keptSize);
    s.cols = groups.back().size;
    s.count = s.cols * product(rowSize);
    s.base = decompose("out", keptSize, "k") + "  const i64 ob = " + offsetExpr("k", keptStride) +
             ";\n";
    s.row = decompose("q", rowSize, "r") + "    const i64 ro = " + offsetExpr("r", rowStride) +
            ";\n";
    const std::string v = "x[e]";
    s.term = kind == "max"   ? "        a_acc[u] = maxNaN(a_acc[u], " + v + ");\n"
             : kind == "min" ? "        a_acc[u] = minNaN(a_acc[u], " + v + ");\n"
                             : "        a_acc[u] += " + v + ";\n";
    s.accs.push_back({"acc", "float", "float", init, fn});
    const std::string finish = kind == "mean"
                                   ? "    y[o] = acc / (float)" + num(s.count) + ";\n"
                                   : "    y[o] = acc;\n";
    splitSum(op, "reduce_" + kind, s, {in("x")}, {x}, {out("y")}, {y}, finish);
    return true;
  }

  void reduce(const Op &op) {
    int x = one(op, "input"), y = result(op);
    requireFloat(x, "the input");
    requireFloat(y, "the result");
    const auto &xs = shape(x);
    std::string kind = strAttr(op, "kind");
    const ReduceAxes ax = reduceAxes(op, xs);
    const auto &keptSize = ax.keptSize, &keptStride = ax.keptStride, &redSize = ax.redSize,
               &redStride = ax.redStride;
    const int64_t outs = product(keptSize), count = product(redSize);
    if (type(y).numel() != outs)
      error("the result does not match the input reduced over the axes");
    if (outs == 0)
      return;
    if (count == 0) { // torch: sum 0, mean NaN; max/min: NaN
      elementwise(op, "reduce_empty", {out("y")}, {y}, outs,
                  "  y[i] = " + flt(kind == "sum" ? 0.0 : NAN) + ";\n");
      return;
    }
    const int block = blockFor(count);
    std::string init = kind == "max" ? flt(-INFINITY) : kind == "min" ? flt(INFINITY) : "0.0f";
    std::string comb = kind == "max" ? "maxNaN(acc, v)" : kind == "min" ? "minNaN(acc, v)" : "acc + v";
    std::string fn = kind == "max" ? "Max()" : kind == "min" ? "Min()" : "Add()";
    if (kind != "sum" && kind != "mean" && kind != "max" && kind != "min")
      error("unknown reduction kind '" + kind + "'");
    if (splitReduce(op, x, y, kind, init, fn))
      return;
    // Few outputs over many terms (bias gradients: a channel over N·D·H·W voxels) would leave
    // most of the GPU idle with one block per output: each output's terms are then split in
    // `parts` fixed chunks, one block each, whose partials a second kernel combines in a
    // fixed tree. Either way the order of the sum is fixed: the same bits on every run.
    const int64_t parts = outs < 512 && count >= (1 << 16)
                              ? std::min<int64_t>(count / 8192, std::max<int64_t>(1, 2048 / outs))
                              : 1;
    const int64_t chunk = (count + parts - 1) / parts;
    std::string body = "  __shared__ float sh[" + std::to_string(block) + "];\n";
    if (parts > 1)
      body += "  const i64 part = o % " + num(parts) + ";\n"
              "  const i64 q = o / " + num(parts) + ";\n" + decompose("q", keptSize, "k") +
              "  const i64 begin = part * " + num(chunk) + ";\n"
              "  const i64 end = begin + " + num(chunk) + " < " + num(count) + " ? begin + " +
              num(chunk) + " : " + num(count) + ";\n";
    else
      body += decompose("o", keptSize, "k") + "  const i64 begin = 0, end = " + num(count) + ";\n";
    body += "  const auto* base = x + " + offsetExpr("k", keptStride) + ";\n"
            "  float acc = " + init + ";\n"
            "  for (i64 j = begin + t; j < end; j += " + std::to_string(block) + ") {\n" +
            decompose("j", redSize, "r") +
            "    const float v = base[" + offsetExpr("r", redStride) + "];\n"
            "    acc = " + comb + ";\n  }\n"
            "  acc = blockReduce(acc, sh, " + fn + ");\n";
    std::string finish = kind == "mean" ? "  if (t == 0) y[o] = acc / (float)" + num(count) + ";\n"
                                        : "  if (t == 0) y[o] = acc;\n";
    if (parts == 1) {
      perBlock(op, "reduce_" + kind, {out("y"), in("x")}, {y, x}, outs, block, body + finish);
      return;
    }
    int partial = scratch(outs * parts * 4);
    perBlock(op, "reduce_" + kind + "_parts", {out("p"), in("x")}, {partial, x}, outs * parts,
             block, body + "  if (t == 0) p[o] = acc;\n");
    const int block2 = blockFor(parts);
    std::string combine = "  __shared__ float sh[" + std::to_string(block2) + "];\n"
                          "  float acc = " + init + ";\n"
                          "  for (i64 j = t; j < " + num(parts) + "; j += " + std::to_string(block2) +
                          ") {\n    const float v = p[o * " + num(parts) + " + j];\n"
                          "    acc = " + comb + ";\n  }\n"
                          "  acc = blockReduce(acc, sh, " + fn + ");\n";
    perBlock(op, "reduce_" + kind + "_combine", {out("y"), in("p")}, {y, partial}, outs, block2,
             combine + finish);
  }

  // ---- losses --------------------------------------------------------------------------

  /// N, C, S as the CPU loss kernels see a value (rank 0: 1×1×1, rank 1: 1×1×S).
  NCS lossLayout(int id) const {
    const auto &s = shape(id);
    if (s.empty())
      return {1, 1, 1};
    if (s.size() == 1)
      return {1, 1, s[0]};
    return {s[0], s[1], product(s, 2)};
  }

  void bce(const Op &op, bool grad) {
    int x = one(op, "logits"), tg = one(op, "target"), y = result(op);
    std::optional<int> mask = opt(op, "mask"), posw = opt(op, "pos_weight");
    for (int id : {x, tg, y})
      requireFloat(id, "an operand");
    if (mask)
      requireFloat(*mask, "the mask");
    if (posw)
      requireFloat(*posw, "pos_weight");
    const NCS L = lossLayout(x);
    const int64_t n = type(x).numel();
    if (type(tg).numel() != n || (mask && type(*mask).numel() != n))
      error("target/mask shapes do not match the logits");
    std::string red = strAttr(op, "reduction");
    if (red != "mean" && red != "sum" && red != "none" && red != "per_channel")
      error("unknown loss reduction '" + red + "'");
    const bool autoPw = boolAttr(op, "auto_pos_weight");
    const double maxPw = floatAttr(op, "max_pos_weight");
    if (posw && !autoPw && type(*posw).numel() != L.c && type(*posw).numel() != 1)
      error("pos_weight needs one value per channel or one value");
    // Per-channel sums: split sums whose rows are the channel's spatial extent per sample.
    auto channelSum = [&]() {
      SplitSum s;
      s.outs = L.c;
      s.count = L.n * L.s;
      s.cols = L.s;
      s.base = "  const i64 ob = out * " + num(L.s) + ";\n";
      s.row = "    const i64 ro = q * " + num(L.c * L.s) + ";\n";
      return s;
    };
    const std::string counted = mask ? "(m[e] != 0.0f)" : "true";

    // Positive weights: a scratch of C values, or read from the operand, or 1.
    int pw = -1;
    if (autoPw) {
      pw = scratch(L.c * 4);
      SplitSum s = channelSum();
      s.term = "        if (!" + counted + ") continue;\n"
               "        const float v = tg[e];\n"
               "        a_ps[u] += v;\n        a_ng[u] += 1.0f - v;\n";
      s.accs = {{"ps", "float", "float", "0.0f", "Add()"}, {"ng", "float", "float", "0.0f", "Add()"}};
      std::vector<std::string> params{in("tg")};
      std::vector<int> args{tg};
      if (mask) {
        params.push_back(in("m"));
        args.push_back(*mask);
      }
      splitSum(op, "bce_pos_weight", s, params, args, {out("pw")}, {pw},
               "    pw[o] = ps == 0.0f ? " + flt(maxPw) + " : fminf(ng / ps, " + flt(maxPw) + ");\n");
    }
    auto pwExpr = [&](const std::string &c) -> std::string {
      if (autoPw)
        return "pw[" + c + "]";
      if (posw)
        return type(*posw).numel() == 1 ? "pwv[0]" : "pwv[" + c + "]";
      return "1.0f";
    };
    auto pwParams = [&](std::vector<std::string> &params, std::vector<int> &args) {
      if (autoPw) {
        params.push_back(in("pw"));
        args.push_back(pw);
      } else if (posw) {
        params.push_back(in("pwv"));
        args.push_back(*posw);
      }
      if (mask) {
        params.push_back(in("m"));
        args.push_back(*mask);
      }
    };
    const std::string lossAt =
        "    const float xv = x[e], yv = tg[e];\n"
        "    const float sp = log1pf(expf(-fabsf(xv))) + fmaxf(-xv, 0.0f);\n"
        "    const float l = (1.0f - yv) * xv + (1.0f + (pc - 1.0f) * yv) * sp;\n";

    if (!grad) {
      if (red == "none") {
        std::string body = "  const i64 e = i;\n  const i64 c = (i / " + num(L.s) + ") % " +
                           num(L.c) + ";\n  const float pc = " + pwExpr("c") + ";\n" + lossAt +
                           "  y[i] = " + counted + " ? l : 0.0f;\n";
        std::vector<std::string> params{out("y"), in("x"), in("tg")};
        std::vector<int> args{y, x, tg};
        pwParams(params, args);
        elementwise(op, "bce_none", params, args, n, body);
        return;
      }
      // Per channel: Σ loss and the count of counted elements.
      int sums = scratch(L.c * 4), counts = scratch(L.c * 8);
      SplitSum s = channelSum();
      s.base += "  const float pc = " + pwExpr("out") + ";\n";
      s.term = "        if (!" + counted + ") continue;\n" + lossAt +
               "        a_s[u] += l;\n        ++a_cnt[u];\n";
      s.accs = {{"s", "float", "float", "0.0f", "Add()"}, {"cnt", "unsigned", "u64", "0", "Add()"}};
      std::vector<std::string> params{in("x"), in("tg")};
      std::vector<int> args{x, tg};
      pwParams(params, args);
      splitSum(op, "bce_sums", s, params, args, {out("sums"), out("counts", "u64")},
               {sums, counts}, "    sums[o] = s;\n    counts[o] = cnt;\n");
      // The scalar, in double as the CPU kernel forms it.
      std::string fin;
      if (red == "per_channel")
        fin = "  double total = 0.0;\n"
              "  for (i64 c = 0; c < " + num(L.c) + "; ++c)\n"
              "    total += counts[c] ? (double)sums[c] / (double)counts[c] : 0.0;\n"
              "  y[0] = (float)total;\n";
      else
        fin = "  float s = 0.0f;\n  u64 cnt = 0;\n"
              "  for (i64 c = 0; c < " + num(L.c) + "; ++c) { s += sums[c]; cnt += counts[c]; }\n" +
              (red == "sum" ? "  y[0] = (float)(double)s;\n"
                            : "  y[0] = (float)(cnt ? (double)s / (double)cnt : 0.0);\n");
      perBlock(op, "bce_" + red, {out("y"), in("sums"), in("counts", "u64")}, {y, sums, counts},
               1, 32, "  if (t != 0) return;\n" + fin);
      return;
    }

    // Gradient: σ(x)·(1 + (p − 1)·y) − p·y, scaled per channel.
    int dl = one(op, "grad_loss");
    requireFloat(dl, "the upstream gradient");
    const bool none = red == "none";
    if (none ? type(dl).numel() != n : type(dl).numel() != 1)
      error("the upstream gradient does not match the reduction");
    int counts = -1;
    if (mask && (red == "mean" || red == "per_channel")) {
      counts = scratch(L.c * 8);
      SplitSum s = channelSum();
      s.term = "        a_cnt[u] += m[e] != 0.0f;\n";
      s.accs = {{"cnt", "unsigned", "u64", "0", "Add()"}};
      splitSum(op, "bce_counts", s, {in("m")}, {*mask}, {out("counts", "u64")}, {counts},
               "    counts[o] = cnt;\n");
    }
    std::string body = "  const i64 e = i;\n  const i64 c = (i / " + num(L.s) + ") % " + num(L.c) +
                       ";\n  const float pc = " + pwExpr("c") + ";\n";
    if (none) {
      body += "  const float sc = 1.0f, up = dl[i];\n";
    } else {
      body += "  const double g = dl[0];\n  const float up = 1.0f;\n";
      if (red == "sum") {
        body += "  const float sc = (float)g;\n";
      } else {
        std::string cntC = counts >= 0 ? "(i64)counts[c]" : num(L.n * L.s);
        if (red == "per_channel") {
          body += "  const i64 cn = " + cntC + ";\n";
        } else if (counts >= 0) {
          body += "  i64 cn = 0;\n  for (i64 k = 0; k < " + num(L.c) +
                  "; ++k) cn += (i64)counts[k];\n";
        } else {
          body += "  const i64 cn = " + num(L.n * L.c * L.s) + ";\n";
        }
        body += "  const float sc = cn > 0 ? (float)(g / (double)cn) : 0.0f;\n";
      }
    }
    body += "  const float xv = x[e], yv = tg[e];\n"
            "  float sig;\n"
            "  if (xv >= 0.0f) sig = 1.0f / (1.0f + expf(-xv));\n"
            "  else { const float ex = expf(xv); sig = ex / (1.0f + ex); }\n"
            "  const float gr = sig * (1.0f + (pc - 1.0f) * yv) - pc * yv;\n"
            "  y[i] = " + counted + " ? gr * (sc * up) : 0.0f;\n";
    std::vector<std::string> params{out("y"), in("x"), in("tg"), in("dl")};
    std::vector<int> args{y, x, tg, dl};
    pwParams(params, args);
    if (counts >= 0) {
      params.push_back(in("counts", "u64"));
      args.push_back(counts);
    }
    elementwise(op, "bce_grad", params, args, n, body);
  }

  /// Code reading the class of voxel e of a dice target as `cls` (−1: not a class).
  std::string readClass(int target, int64_t classes) const {
    std::string d = type(target).dtype;
    if (ctype(d).empty() || d == "bf16" || d == "f16")
      error("dice_ce targets of element type " + d + " are not supported on CUDA");
    return "    const double tv = (double)tgt[e];\n"
           "    const i64 cls = (tv >= 0.0 && tv < " + dbl(static_cast<double>(classes)) +
           ") ? (i64)tv : -1;\n";
  }

  /// Softmax of the C logits at voxel (n, s): mx, se as the CPU kernel computes them.
  static std::string softmaxHead(int64_t C, int64_t S) {
    return "    const auto* xb = x + n * " + num(C * S) + " + s;\n"
           "    float mx = xb[0];\n"
           "    for (i64 c = 1; c < " + num(C) + "; ++c) { const float v = xb[c * " + num(S) +
           "]; mx = v > mx || v != v ? v : mx; }\n"
           "    float se = 0.0f;\n"
           "    for (i64 c = 0; c < " + num(C) + "; ++c) se += expf(xb[c * " + num(S) + "] - mx);\n";
  }

  /// Per level: a scratch of [N][1 + 3C] sums (ce, tp[C], sp[C], sy[C]). Up to 16 classes,
  /// a split sum per sample whose threads compute each voxel's softmax once for every class;
  /// beyond, one block per (n, c), the block of c = 0 also summing the cross-entropy.
  int diceSums(const Op &op, int x, int tgt, const NCS &L) {
    const int64_t C = L.c, S = L.s, stride = 1 + 3 * C;
    int sums = scratch(L.n * stride * 4);
    std::string tt = ctype(type(tgt).dtype);
    if (C <= 16) {
      SplitSum s;
      s.outs = L.n;
      s.count = s.cols = S;
      s.unroll = C <= 4 ? 2 : 1; // the C logits of a voxel are loads in flight already
      s.base = "  const i64 n = out, ob = n * " + num(S) + ";\n";
      s.row = "    const i64 ro = 0;\n";
      s.term = "        const i64 s = e - ob;\n" + readClass(tgt, C) +
               "        if (cls < 0) { medFail(status, " + code(op) + "); continue; }\n" +
               softmaxHead(C, S) +
               "        a_ce[u] += logf(se) - (xb[cls * " + num(S) + "] - mx);\n";
      std::string finish = "    auto* q = sums + o * " + num(stride) + ";\n    q[0] = ce;\n";
      s.accs.push_back({"ce", "float", "float", "0.0f", "Add()"});
      for (int64_t k = 0; k < C; ++k) {
        const std::string K = std::to_string(k);
        s.term += "        {\n          const float sm = expf(xb[" + num(k * S) + "] - mx) / se;\n"
                  "          a_sp" + K + "[u] += sm;\n"
                  "          if (cls == " + K + ") { a_tp" + K + "[u] += sm; a_sy" + K +
                  "[u] += 1.0f; }\n        }\n";
        for (const char *name : {"tp", "sp", "sy"})
          s.accs.push_back({name + K, "float", "float", "0.0f", "Add()"});
        finish += "    q[" + num(1 + k) + "] = tp" + K + ";\n    q[" + num(1 + C + k) + "] = sp" + K +
                  ";\n    q[" + num(1 + 2 * C + k) + "] = sy" + K + ";\n";
      }
      splitSum(op, "dice_sums", s, {out("status", "unsigned"), in("x"), in("tgt", tt)},
               {status(), x, tgt}, {out("sums")}, {sums}, finish);
      return sums;
    }
    const int block = blockFor(S);
    std::string body =
        "  __shared__ float sh[" + std::to_string(block) + "];\n"
        "  const i64 n = o / " + num(C) + ", c0 = o % " + num(C) + ";\n"
        "  float ce = 0.0f, tp = 0.0f, sp = 0.0f, sy = 0.0f;\n"
        "  for (i64 s = t; s < " + num(S) + "; s += " + std::to_string(block) + ") {\n"
        "    const i64 e = n * " + num(S) + " + s;\n" + readClass(tgt, C) +
        "    if (cls < 0) { if (c0 == 0) medFail(status, " + code(op) + "); continue; }\n" +
        softmaxHead(C, S) +
        "    const float sm = expf(xb[c0 * " + num(S) + "] - mx) / se;\n"
        "    sp += sm;\n"
        "    if (cls == c0) { tp += sm; sy += 1.0f; }\n"
        "    if (c0 == 0) ce += logf(se) - (xb[cls * " + num(S) + "] - mx);\n"
        "  }\n"
        "  ce = blockSum(ce, sh);\n  tp = blockSum(tp, sh);\n"
        "  sp = blockSum(sp, sh);\n  sy = blockSum(sy, sh);\n"
        "  if (t == 0) {\n"
        "    auto* q = sums + n * " + num(stride) + ";\n"
        "    if (c0 == 0) q[0] = ce;\n"
        "    q[1 + c0] = tp;\n    q[1 + " + num(C) + " + c0] = sp;\n    q[1 + " + num(2 * C) + " + c0] = sy;\n"
        "  }\n";
    perBlock(op, "dice_sums", {out("sums"), out("status", "unsigned"), in("x"), in("tgt", tt)},
             {sums, status(), x, tgt}, L.n * C, block, body);
    return sums;
  }

  void diceCE(const Op &op, bool grad) {
    const std::vector<int> &logits = group(op, "logits"), &targets = group(op, "targets");
    std::vector<double> weights = floatsAttr(op, "weights");
    if (logits.size() != targets.size() || logits.size() != weights.size())
      error("needs as many logits, targets and weights");
    const double smooth = floatAttr(op, "smooth"), ceW = floatAttr(op, "ce_weight"),
                 diceW = floatAttr(op, "dice_weight");
    const bool batchDice = boolAttr(op, "batch_dice"), bg = boolAttr(op, "include_background");
    const int64_t c0 = bg ? 0 : 1;
    std::vector<NCS> layouts;
    std::vector<int> sums;
    for (size_t l = 0; l < logits.size(); ++l) {
      requireFloat(logits[l], "the logits");
      NCS L = lossLayout(logits[l]);
      if (shape(logits[l]).size() < 2 || type(targets[l]).numel() != L.n * L.s)
        error("level " + std::to_string(l) + ": logits and target do not match");
      layouts.push_back(L);
      sums.push_back(type(logits[l]).numel() ? diceSums(op, logits[l], targets[l], L) : -1);
    }
    if (!grad) {
      int y = result(op);
      requireFloat(y, "the result");
      // The scalar, level by level, in the CPU kernel's arithmetic (float sums, double
      // means).
      std::string fin = "  if (t != 0) return;\n  double total = 0.0;\n";
      std::vector<std::string> params{out("y")};
      std::vector<int> args{y};
      for (size_t l = 0; l < logits.size(); ++l) {
        const NCS &L = layouts[l];
        const int64_t C = L.c, stride = 1 + 3 * C;
        std::string q = "s" + std::to_string(l);
        params.push_back(in(q));
        args.push_back(sums[l] >= 0 ? sums[l] : status()); // unread when empty
        fin += "  {\n    const auto* q = " + q + ";\n"
               "    float ce = 0.0f;\n"
               "    for (i64 n = 0; n < " + num(L.n) + "; ++n) ce += q[n * " + num(stride) + "];\n"
               "    const double ceMean = (double)ce / (double)" + num(L.n * L.s) + ";\n"
               "    double diceSum = 0.0;\n    i64 kept = 0;\n";
        std::string dc = "(double)((2.0f * tpv + " + flt(smooth) + ") / fmaxf(spv + syv + " +
                         flt(smooth) + ", 1e-8f))";
        if (batchDice)
          fin += "    for (i64 c = " + num(c0) + "; c < " + num(C) + "; ++c) {\n"
                 "      float tpv = 0.0f, spv = 0.0f, syv = 0.0f;\n"
                 "      for (i64 n = 0; n < " + num(L.n) + "; ++n) {\n"
                 "        tpv += q[n * " + num(stride) + " + 1 + c];\n"
                 "        spv += q[n * " + num(stride) + " + 1 + " + num(C) + " + c];\n"
                 "        syv += q[n * " + num(stride) + " + 1 + " + num(2 * C) + " + c];\n"
                 "      }\n      diceSum += " + dc + ";\n      ++kept;\n    }\n";
        else
          fin += "    for (i64 n = 0; n < " + num(L.n) + "; ++n)\n"
                 "      for (i64 c = " + num(c0) + "; c < " + num(C) + "; ++c) {\n"
                 "        const float tpv = q[n * " + num(stride) + " + 1 + c];\n"
                 "        const float spv = q[n * " + num(stride) + " + 1 + " + num(C) + " + c];\n"
                 "        const float syv = q[n * " + num(stride) + " + 1 + " + num(2 * C) + " + c];\n"
                 "        diceSum += " + dc + ";\n        ++kept;\n      }\n";
        fin += "    const double dice = kept ? diceSum / (double)kept : " + dbl(NAN) + ";\n"
               "    total += " + dbl(weights[l]) + " * (" + dbl(ceW) + " * ceMean - " + dbl(diceW) +
               " * dice);\n  }\n";
      }
      fin += "  y[0] = (float)total;\n";
      perBlock(op, "dice_ce", params, args, 1, 32, fin);
      return;
    }

    int dl = one(op, "grad_loss");
    requireFloat(dl, "the upstream gradient");
    if (type(dl).numel() != 1)
      error("the upstream gradient must be a scalar");
    for (size_t l = 0; l < logits.size(); ++l) {
      const NCS &L = layouts[l];
      const int64_t C = L.c, S = L.s, stride = 1 + 3 * C;
      int x = logits[l], tgt = targets[l], dx = result(op, l);
      requireFloat(dx, "the result");
      if (type(x).numel() == 0)
        continue;
      const int64_t kept = std::max<int64_t>(0, C - c0) * (batchDice ? 1 : L.n);
      // α, β per (n, c) and the CE coefficient (at [2·N·C]).
      int coef = scratch((2 * L.n * C + 1) * 4);
      std::string body =
          "  if (t != 0) return;\n"
          "  const auto* q = sums;\n"
          "  const double w = " + dbl(weights[l]) + " * (double)dl[0];\n"
          "  auto* al = coef;\n  auto* be = coef + " + num(L.n * C) + ";\n"
          "  for (i64 k = 0; k < " + num(2 * L.n * C) + "; ++k) coef[k] = 0.0f;\n";
      if (kept > 0) {
        body +=
            "  const double f = w * " + dbl(diceW) + " / (double)" + num(kept) + ";\n"
            "  for (i64 c = " + num(c0) + "; c < " + num(C) + "; ++c)\n"
            "    for (i64 n = 0; n < " + num(L.n) + "; ++n) {\n"
            "      float tpv = 0.0f, spv = 0.0f, syv = 0.0f;\n";
        if (batchDice)
          body += "      for (i64 m = 0; m < " + num(L.n) + "; ++m) {\n"
                  "        tpv += q[m * " + num(stride) + " + 1 + c];\n"
                  "        spv += q[m * " + num(stride) + " + 1 + " + num(C) + " + c];\n"
                  "        syv += q[m * " + num(stride) + " + 1 + " + num(2 * C) + " + c];\n"
                  "      }\n";
        else
          body += "      tpv = q[n * " + num(stride) + " + 1 + c];\n"
                  "      spv = q[n * " + num(stride) + " + 1 + " + num(C) + " + c];\n"
                  "      syv = q[n * " + num(stride) + " + 1 + " + num(2 * C) + " + c];\n";
        body += "      const float raw = spv + syv + " + flt(smooth) + ";\n"
                "      const double den = (double)fmaxf(raw, 1e-8f);\n"
                "      const double num = (double)(2.0f * tpv + " + flt(smooth) + ");\n"
                "      al[n * " + num(C) + " + c] = (float)(-f * 2.0 / den);\n"
                "      be[n * " + num(C) + " + c] = raw >= 1e-8f ? (float)(f * num / (den * den)) : 0.0f;\n"
                "    }\n";
      }
      body += "  coef[" + num(2 * L.n * C) + "] = (float)(w * " + dbl(ceW) + " / (double)" +
              num(L.n * S) + ");\n";
      perBlock(op, "dice_ce_grad_coef", {out("coef"), in("sums"), in("dl")}, {coef, sums[l], dl},
               1, 32, body);
      // One thread per voxel (n, s): the softmax, then every class's gradient.
      std::string tt = ctype(type(tgt).dtype);
      std::string g =
          "  const i64 n = i / " + num(S) + ", s = i % " + num(S) + ";\n"
          "  const i64 e = i;\n" + readClass(tgt, C) +
          "  auto* db = dx + n * " + num(C * S) + " + s;\n"
          "  if (cls < 0) {\n    medFail(status, " + code(op) + ");\n"
          "    for (i64 c = 0; c < " + num(C) + "; ++c) db[c * " + num(S) + "] = 0.0f;\n    return;\n  }\n" +
          softmaxHead(C, S) +
          "  float pr[" + std::to_string(C) + "];\n"
          "  for (i64 c = 0; c < " + num(C) + "; ++c) pr[c] = expf(xb[c * " + num(S) + "] - mx);\n"
          "  for (i64 c = 0; c < " + num(C) + "; ++c) pr[c] /= se;\n"
          "  const auto* al = coef + n * " + num(C) + ";\n"
          "  const auto* be = coef + " + num(L.n * C) + " + n * " + num(C) + ";\n"
          "  const float ceCoef = coef[" + num(2 * L.n * C) + "];\n"
          "  float sg = al[cls] * pr[cls];\n"
          "  for (i64 c = 0; c < " + num(C) + "; ++c) sg += be[c] * pr[c];\n"
          "  for (i64 c = 0; c < " + num(C) + "; ++c) {\n"
          "    const bool hit = cls == c;\n"
          "    const float gc = (hit ? al[c] : 0.0f) + be[c];\n"
          "    db[c * " + num(S) + "] = pr[c] * (gc - sg) + ceCoef * (hit ? pr[c] - 1.0f : pr[c]);\n"
          "  }\n";
      elementwise(op, "dice_ce_grad",
                  {out("dx"), out("status", "unsigned"), in("x"), in("tgt", tt), in("coef")},
                  {dx, status(), x, tgt, coef}, L.n * S, g);
    }
  }

  // ---- gradients of max/min and strided slices ------------------------------------------

  /// torch.maximum/minimum backward: the winner takes the gradient, a tie gives each half,
  /// a NaN operand passes it to both (no comparison holds).
  void extremumGrad(const Op &op) {
    int a = one(op, "lhs"), b = one(op, "rhs"), dy = one(op, "grad_output");
    int da = result(op, 0), db = result(op, 1);
    for (int id : {a, b, dy, da, db})
      requireFloat(id, "an operand");
    const auto &ys = shape(dy);
    if (shape(da) != ys || shape(db) != ys)
      error("the gradients must have the output gradient's shape");
    const bool isMax = strAttr(op, "kind") == "max";
    std::string body, ia = "i", ib = "i";
    if (shape(a) != ys || shape(b) != ys) {
      body += decompose("i", ys, "o");
      ia = offsetExpr("o", broadcastStrides(shape(a), ys));
      ib = offsetExpr("o", broadcastStrides(shape(b), ys));
    }
    body += "  const float u = a[" + ia + "], v = b[" + ib + "], g = dy[i];\n"
            "  const float shared = u == v ? g / 2.0f : g;\n";
    body += isMax ? "  da[i] = u < v ? 0.0f : shared;\n  db[i] = u > v ? 0.0f : shared;\n"
                  : "  da[i] = u > v ? 0.0f : shared;\n  db[i] = u < v ? 0.0f : shared;\n";
    elementwise(op, isMax ? "max_grad" : "min_grad",
                {out("da"), out("db"), in("a"), in("b"), in("dy")}, {da, db, a, b, dy},
                type(dy).numel(), body);
  }

  /// torch.amax/amin backward: the gradient shared evenly among the elements equal to the
  /// extremum. One block per output: count the ties, then write every element.
  void reduceExtremumGrad(const Op &op) {
    int x = one(op, "input"), m = one(op, "extremum"), dy = one(op, "grad_output");
    int dx = result(op);
    for (int id : {x, m, dy, dx})
      requireFloat(id, "an operand");
    const auto &xs = shape(x);
    const ReduceAxes ax = reduceAxes(op, xs);
    const auto &keptSize = ax.keptSize, &keptStride = ax.keptStride, &redSize = ax.redSize,
               &redStride = ax.redStride;
    const int64_t outs = product(keptSize), count = product(redSize);
    if (type(m).numel() != outs || type(dy).numel() != outs || shape(dx) != xs)
      error("extremum, output gradient and result do not fit the input");
    if (type(x).numel() == 0)
      return;
    const int block = blockFor(count);
    std::string body = "  __shared__ float sh[" + std::to_string(block) + "];\n";
    body += decompose("o", keptSize, "k");
    body += "  const i64 base = " + offsetExpr("k", keptStride) + ";\n"
            "  const float mx = m[o];\n"
            "  float ties = 0.0f;\n"
            "  for (i64 j = t; j < " + num(count) + "; j += " + std::to_string(block) + ") {\n" +
            decompose("j", redSize, "r") +
            "    ties += x[base + " + offsetExpr("r", redStride) + "] == mx ? 1.0f : 0.0f;\n  }\n"
            "  ties = blockSum(ties, sh);\n"
            "  const float share = dy[o] / ties;\n"
            "  for (i64 j = t; j < " + num(count) + "; j += " + std::to_string(block) + ") {\n" +
            decompose("j", redSize, "r") +
            "    const i64 i = base + " + offsetExpr("r", redStride) + ";\n"
            "    dx[i] = share * (x[i] == mx ? 1.0f : 0.0f);\n  }\n";
    perBlock(op, "reduce_extremum_grad", {out("dx"), in("x"), in("m"), in("dy")},
             {dx, x, m, dy}, outs, block, body);
  }

  /// The strided slice's gradient: zeros, and the gradient where the slice read.
  void sliceGrad(const Op &op) {
    int dy = one(op, "grad_output"), dx = result(op);
    std::string t = elemType(dx);
    const auto &gs = shape(dy), &xs = shape(dx);
    std::vector<int64_t> offs = intsAttr(op, "offsets"), strides = intsAttr(op, "strides");
    if (offs.size() != xs.size() || strides.size() != xs.size() || gs.size() != xs.size())
      error("need one offset and stride per axis");
    std::vector<int64_t> gst = contiguousStrides(gs);
    std::string body = decompose("i", xs, "o"), hit, off;
    for (size_t d = 0; d < xs.size(); ++d) {
      std::string q = "(o" + std::to_string(d) + " - " + num(offs[d]) + ")";
      hit += (hit.empty() ? "" : " && ") + q + " >= 0 && " + q + " % " + num(strides[d]) +
             " == 0 && " + q + " / " + num(strides[d]) + " < " + num(gs[d]);
      off += (off.empty() ? "" : " + ") + q + " / " + num(strides[d]) + " * " + num(gst[d]);
    }
    if (hit.empty())
      hit = "true", off = "0";
    body += "  y[i] = (" + hit + ") ? x[" + off + "] : " +
            (t == "bf16" || t == "f16" ? "0.0f" : "(" + t + ")0") +
            ";\n";
    elementwise(op, "slice_grad", {out("y", t), in("x", t)}, {dx, dy}, type(dx).numel(), body);
  }

  // ---- loss scaling ----------------------------------------------------------------------

  /// 1 if any element of any input is ±inf or NaN, else 0. Each input's kernel raises a
  /// flag word (every writer writes the same 1: deterministic); the last turns it into f32.
  void anyNonFinite(const Op &op) {
    int y = result(op);
    requireFloat(y, "the result");
    int flag = scratch(4);
    elementwise(op, "flag_clear", {out("flag", "unsigned")}, {flag}, 1, "  flag[0] = 0u;\n");
    for (int x : group(op, "inputs")) {
      requireFloat(x, "an input");
      elementwise(op, "flag_non_finite", {out("flag", "unsigned"), in("x")}, {flag, x},
                  type(x).numel(), "  if (!isfinite(x[i])) flag[0] = 1u;\n");
    }
    elementwise(op, "flag_to_float", {out("y"), in("flag", "unsigned")}, {y, flag}, 1,
                "  y[0] = flag[0] ? 1.0f : 0.0f;\n");
  }

  /// A whole operand chosen by a scalar condition (NaN counts as true, as != 0).
  void select(const Op &op) {
    int c = one(op, "cond"), a = one(op, "on_true"), b = one(op, "on_false"), y = result(op);
    requireFloat(c, "the condition");
    std::string t = elemType(y);
    if (elemType(a) != t || elemType(b) != t || type(a).numel() != type(y).numel() ||
        type(b).numel() != type(y).numel())
      error("operands and result differ in type or size");
    elementwise(op, "select", {out("y", t), in("c"), in("a", t), in("b", t)}, {y, c, a, b},
                type(y).numel(), "  y[i] = c[0] != 0.0f ? a[i] : b[i];\n");
  }

  /// torch's GradScaler update (_amp_update_scale): float state, double factors.
  void updateLossScale(const Op &op) {
    int s = one(op, "scale"), n = one(op, "growth_tracker"), f = one(op, "found_inf");
    int ns = result(op, 0), nn = result(op, 1);
    for (int id : {s, n, f, ns, nn})
      requireFloat(id, "an operand");
    std::string body =
        "  float sc = s[0];\n  double tr = n[0];\n"
        "  if (f[0] != 0.0f) {\n    sc = (float)(sc * " + dbl(floatAttr(op, "backoff_factor")) +
        ");\n    tr = 0.0;\n"
        "  } else if (tr + 1.0 == " + dbl(static_cast<double>(intAttr(op, "growth_interval"))) +
        ") {\n    const float grown = (float)(sc * " + dbl(floatAttr(op, "growth_factor")) + ");\n"
        "    if (isfinite(grown)) sc = grown;\n    tr = 0.0;\n"
        "  } else {\n    tr = tr + 1.0;\n  }\n"
        "  ns[0] = sc;\n  nn[0] = (float)tr;\n";
    elementwise(op, "update_loss_scale",
                {out("ns"), out("nn"), in("s"), in("n"), in("f")}, {ns, nn, s, n, f}, 1, body);
  }

  // ---- norm gradients ------------------------------------------------------------------
  /// The operands of every norm gradient: input, gamma and output gradient in; dx, dgamma
  /// and dbeta out; all f32.
  struct NormGradArgs {
    int x, g, dy, dx, dg, db;
    NCS d;
  };
  NormGradArgs normGradArgs(const Op &op) const {
    NormGradArgs a{one(op, "input"),  one(op, "gamma"), one(op, "grad_output"),
                   result(op, 0),     result(op, 1),    result(op, 2), {}};
    for (int id : {a.x, a.g, a.dy, a.dx, a.dg, a.db})
      requireFloat(id, "an operand");
    a.d = ncs(a.x);
    return a;
  }
  /// An empty input: dgamma and dbeta are zero and nothing else runs.
  bool zeroIfEmpty(const Op &op, const NormGradArgs &a) {
    if (type(a.x).numel() != 0)
      return false;
    elementwise(op, "zero2", {out("a"), out("b")}, {a.dg, a.db}, a.d.c,
                "  a[i] = 0.0f;\n  b[i] = 0.0f;\n");
    return true;
  }

  void groupNormGrad(const Op &op) {
    const NormGradArgs a = normGradArgs(op);
    const int x = a.x, g = a.g, dy = a.dy, dx = a.dx, dg = a.dg, db = a.db;
    const NCS d = a.d;
    int mean = one(op, "mean"), rstd = one(op, "rstd");
    requireFloat(mean, "the saved mean");
    requireFloat(rstd, "the saved rstd");
    int64_t groups = intAttr(op, "groups");
    if (groups < 1 || d.c % groups)
      error("channels do not split into groups");
    const int64_t cg = d.c / groups, segs = d.n * groups, m = cg * d.s, rows = d.n * d.c;
    if (zeroIfEmpty(op, a))
      return;
    if (type(mean).numel() != segs || type(rstd).numel() != segs)
      error("mean and rstd need one entry per sample and group");
    // The statistics the forward kernel normalized with (group_norm with save_statistics).
    int rs = scratch(rows * 2 * 4), mg = scratch(segs * 2 * 4);
    // Per (n, c): Σ dy and Σ dy·(x − μ).
    const int block = blockFor(d.s);
    std::string sums =
        "  __shared__ float sh[" + std::to_string(block) + "];\n"
        "  const i64 seg = o / " + num(cg) + ";\n"
        "  const float mu = mean[seg];\n"
        "  const auto* p = x + o * " + num(d.s) + ";\n"
        "  const auto* q = dy + o * " + num(d.s) + ";\n"
        "  float a = 0.0f, b = 0.0f;\n"
        "  for (i64 j = t; j < " + num(d.s) + "; j += " + std::to_string(block) + ") {\n"
        "    const float gv = q[j];\n    a += gv;\n    b += gv * (p[j] - mu);\n  }\n"
        "  a = blockSum(a, sh);\n  b = blockSum(b, sh);\n"
        "  if (t == 0) { rs[2 * o] = a; rs[2 * o + 1] = b; }\n";
    perBlock(op, "group_norm_grad_rows", {out("rs"), in("x"), in("dy"), in("mean")},
             {rs, x, dy, mean}, rows, block, sums);
    // Per (n, group): mean(g), mean(g·x̂); per channel: dγ, dβ.
    std::string mix =
        "  for (i64 seg = t; seg < " + num(segs) + "; seg += blockDim.x) {\n"
        "    float a = 0.0f, b = 0.0f;\n"
        "    for (i64 j = 0; j < " + num(cg) + "; ++j) {\n"
        "      const i64 row = seg * " + num(cg) + " + j;\n"
        "      const float gm = gamma[row % " + num(d.c) + "];\n"
        "      a += gm * rs[2 * row];\n      b += gm * rs[2 * row + 1];\n    }\n"
        "    mg[2 * seg] = a / (float)" + num(m) + ";\n"
        "    mg[2 * seg + 1] = b * rstd[seg] / (float)" + num(m) + ";\n  }\n"
        "  for (i64 c = t; c < " + num(d.c) + "; c += blockDim.x) {\n"
        "    float a = 0.0f, b = 0.0f;\n"
        "    for (i64 n = 0; n < " + num(d.n) + "; ++n) {\n"
        "      a += rs[2 * (n * " + num(d.c) + " + c) + 1] * rstd[n * " + num(groups) + " + c / " + num(cg) + "];\n"
        "      b += rs[2 * (n * " + num(d.c) + " + c)];\n    }\n"
        "    dg[c] = a;\n    db[c] = b;\n  }\n";
    perBlock(op, "group_norm_grad_mix",
             {out("mg"), out("dg"), out("db"), in("rs"), in("rstd"), in("gamma")},
             {mg, dg, db, rs, rstd, g}, 1, kBlock, mix);
    const int64_t n = type(x).numel();
    const int lanes = lanesFor({dx, x, dy});
    const Index ix = indexFor(std::max(n, 2 * segs));
    // A thread's elements share their channel where the planes are whole vectors.
    const bool perThread = d.s % lanes == 0;
    std::string channel = groupOf(ix, perThread, d, groups, cg) +
        "  const float mu = mean[seg], r = rstd[seg];\n";
    std::string body =
        "  const float xh = (x_v[k] - mu) * r;\n"
        "  dx_v[k] = r * (gamma[c] * dy_v[k] - mg[2 * seg] - xh * mg[2 * seg + 1]);\n";
    vectorized(op, "group_norm_grad",
               {out("dx"), in("x"), in("dy"), in("gamma"), in("mean"), in("rstd"), in("mg")},
               {dx, x, dy, g, mean, rstd, mg}, n, lanes, ix, {{"x"}, {"dy"}}, {"dx"},
               perThread ? channel : "", perThread ? body : channel + body);
  }

  void channelLayerNormGrad(const Op &op) {
    const NormGradArgs a = normGradArgs(op);
    const int x = a.x, g = a.g, dy = a.dy, dx = a.dx, dg = a.dg, db = a.db;
    const NCS d = a.d;
    if (zeroIfEmpty(op, a))
      return;
    const std::string C = num(d.c), S = num(d.s);
    int st = scratch(d.n * d.s * 2 * 4);
    // One thread per (n, position): statistics as the forward kernel, then dx.
    std::string body =
        "  const i64 n = i / " + S + ", s = i % " + S + ";\n"
        "  const auto* xp = x + n * " + num(d.c * d.s) + " + s;\n"
        "  const auto* gp = dy + n * " + num(d.c * d.s) + " + s;\n"
        "  auto* dp = dx + n * " + num(d.c * d.s) + " + s;\n"
        "  float mean = 0.0f, sd = 0.0f;\n"
        "  for (i64 c = 0; c < " + C + "; ++c) mean += xp[c * " + S + "];\n"
        "  mean /= (float)" + C + ";\n"
        "  for (i64 c = 0; c < " + C + "; ++c) { const float v = xp[c * " + S + "] - mean; sd += v * v; }\n"
        "  sd = sqrtf(sd / (float)" + C + " + " + flt(floatAttr(op, "epsilon")) + ");\n"
        "  float a = 0.0f, bx = 0.0f;\n"
        "  for (i64 c = 0; c < " + C + "; ++c) {\n"
        "    const float xh = (xp[c * " + S + "] - mean) / sd;\n"
        "    const float gv = gp[c * " + S + "] * gamma[c];\n"
        "    a += gv;\n    bx += gv * xh;\n  }\n"
        "  a /= (float)" + C + ";\n  bx /= (float)" + C + ";\n"
        "  for (i64 c = 0; c < " + C + "; ++c) {\n"
        "    const float xh = (xp[c * " + S + "] - mean) / sd;\n"
        "    dp[c * " + S + "] = (gp[c * " + S + "] * gamma[c] - a - xh * bx) / sd;\n  }\n"
        "  st[2 * i] = mean;\n  st[2 * i + 1] = sd;\n";
    elementwise(op, "channel_layer_norm_grad",
                {out("dx"), out("st"), in("x"), in("dy"), in("gamma")}, {dx, st, x, dy, g},
                d.n * d.s, body);
    const int64_t terms = d.n * d.s;
    const int block = blockFor(terms);
    std::string red =
        "  __shared__ float sh[" + std::to_string(block) + "];\n"
        "  float a = 0.0f, b = 0.0f;\n"
        "  for (i64 j = t; j < " + num(terms) + "; j += " + std::to_string(block) + ") {\n"
        "    const i64 n = j / " + S + ", s = j % " + S + ";\n"
        "    const i64 e = (n * " + C + " + o) * " + S + " + s;\n"
        "    const float xh = (x[e] - st[2 * j]) / st[2 * j + 1];\n"
        "    a += dy[e] * xh;\n    b += dy[e];\n  }\n"
        "  a = blockSum(a, sh);\n  b = blockSum(b, sh);\n"
        "  if (t == 0) { dg[o] = a; db[o] = b; }\n";
    perBlock(op, "channel_layer_norm_grad_params",
             {out("dg"), out("db"), in("x"), in("dy"), in("st")}, {dg, db, x, dy, st}, d.c, block,
             red);
  }

  void grnGrad(const Op &op) {
    const NormGradArgs a = normGradArgs(op);
    const int x = a.x, g = a.g, dy = a.dy, dx = a.dx, dg = a.dg, db = a.db;
    const NCS d = a.d;
    if (zeroIfEmpty(op, a))
      return;
    const int64_t rows = d.n * d.c;
    const std::string C = num(d.c);
    int sums = scratch(rows * 3 * 4), nc = scratch(rows * 2 * 4);
    rowSums(op, x, dy, rows, d.s, sums);
    // Per sample: N_c and the coefficient of x in dx; then dγ, dβ per channel.
    std::string mix =
        "  for (i64 n = t; n < " + num(d.n) + "; n += blockDim.x) {\n"
        "    float s = 0.0f;\n"
        "    for (i64 c = 0; c < " + C + "; ++c) s += sqrtf(sums[3 * (n * " + C + " + c)]);\n"
        "    const float D = s / (float)" + C + " + " + flt(floatAttr(op, "epsilon")) + ";\n"
        "    float s2 = 0.0f;\n"
        "    for (i64 c = 0; c < " + C + "; ++c) {\n"
        "      const i64 r = n * " + C + " + c;\n"
        "      s2 += gamma[c] * sums[3 * r + 2] * sqrtf(sums[3 * r]);\n    }\n"
        "    const float shared = s2 / ((float)" + C + " * D * D);\n"
        "    for (i64 c = 0; c < " + C + "; ++c) {\n"
        "      const i64 r = n * " + C + " + c;\n"
        "      const float gx = sqrtf(sums[3 * r]);\n"
        "      const float dG = gamma[c] * sums[3 * r + 2] / D - shared;\n"
        "      nc[2 * r] = gx / D;\n"
        "      nc[2 * r + 1] = gx > 0.0f ? dG / gx : 0.0f;\n    }\n  }\n"
        "  __syncthreads();\n"
        "  for (i64 c = t; c < " + C + "; c += blockDim.x) {\n"
        "    float a = 0.0f, b = 0.0f;\n"
        "    for (i64 n = 0; n < " + num(d.n) + "; ++n) {\n"
        "      const i64 r = n * " + C + " + c;\n"
        "      a += sums[3 * r + 2] * nc[2 * r];\n      b += sums[3 * r + 1];\n    }\n"
        "    dg[c] = a;\n    db[c] = b;\n  }\n";
    perBlock(op, "grn_grad_mix", {out("nc"), out("dg"), out("db"), in("sums"), in("gamma")},
             {nc, dg, db, sums, g}, 1, kBlock, mix);
    std::string body =
        "  const i64 row = i / " + num(d.s) + ", c = row % " + C + ";\n"
        "  const float scale = 1.0f + gamma[c] * nc[2 * row];\n"
        "  dx[i] = dy[i] * scale + nc[2 * row + 1] * x[i];\n";
    elementwise(op, "grn_grad", {out("dx"), in("x"), in("dy"), in("gamma"), in("nc")},
                {dx, x, dy, g, nc}, type(x).numel(), body);
  }

  void geluGrad(const Op &op) {
    int x = one(op, "input"), dy = one(op, "grad_output"), dx = result(op);
    for (int id : {x, dy, dx})
      requireFloat(id, "an operand");
    std::string body = "  dx_v[k] = " + scalarExpr("gelu_grad", {"x_v[k]", "dy_v[k]"}) + ";\n";
    const int64_t n = type(x).numel();
    vectorized(op, "gelu_grad", {out("dx"), in("x"), in("dy")}, {dx, x, dy}, n,
               lanesFor({dx, x, dy}), indexFor(n), {{"x"}, {"dy"}}, {"dx"}, "", body);
  }

  // ---- optimizers ----------------------------------------------------------------------
  void adamw(const Op &op) {
    int p = one(op, "param"), g = one(op, "grad"), m = one(op, "exp_avg"),
        v = one(op, "exp_avg_sq"), lr = one(op, "lr"), step = one(op, "step");
    int np = result(op, 0), nm = result(op, 1), nv = result(op, 2);
    for (int id : {p, g, m, v, lr, step, np, nm, nv})
      requireFloat(id, "an operand");
    elementwise(op, "adamw",
                {out("np"), out("nm"), out("nv"), out("status", "unsigned"), in("p"), in("g"),
                 in("m"), in("v"), in("lr"), in("step")},
                {np, nm, nv, status(), p, g, m, v, lr, step}, type(p).numel(),
                optimizerStatement("adamw", *op.attrs,
                                   {"p[i]", "g[i]", "m[i]", "v[i]", "lr[0]", "step[0]"},
                                   {"np[i]", "nm[i]", "nv[i]"}));
  }

  void sgd(const Op &op) {
    int p = one(op, "param"), g = one(op, "grad"), b = one(op, "momentum_buffer"),
        lr = one(op, "lr");
    int np = result(op, 0), nb = result(op, 1);
    for (int id : {p, g, b, lr, np, nb})
      requireFloat(id, "an operand");
    elementwise(op, "sgd", {out("np"), out("nb"), in("p"), in("g"), in("b"), in("lr")},
                {np, nb, p, g, b, lr}, type(p).numel(),
                optimizerStatement("sgd", *op.attrs, {"p[i]", "g[i]", "b[i]", "lr[0]"},
                                   {"np[i]", "nb[i]"}));
  }
};

} // namespace

llvm::Expected<CudaProgram> mlir::med::generateCuda(json::Object &doc) {
  json::Array *functions = doc.getArray("functions");
  if (!functions)
    return llvm::createStringError("malformed plan: no functions");
  Source src;
  CudaProgram program;
  for (json::Value &f : *functions) {
    json::Object *fn = f.getAsObject();
    FunctionGen gen(src, *fn, doc.getArray("fusions"));
    llvm::Expected<json::Object> plan = gen.run();
    if (!plan)
      return llvm::createStringError(llvm::formatv("function '{0}': {1}",
                                                   fn->getString("name").value_or(""),
                                                   llvm::toString(plan.takeError()))
                                         .str());
    (*fn)["cuda_plan"] = std::move(*plan);
    program.launches += gen.launches;
  }
  program.source = std::move(src.text);
  program.kernels = src.kernels;
  return program;
}
