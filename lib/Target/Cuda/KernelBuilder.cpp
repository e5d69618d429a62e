//===- KernelBuilder.cpp - literals, kernel dedup and the kernel building blocks -----===//
//
// The mappings of elements to threads every op family builds on: one thread per element
// (`elementwise`), one 16-byte vector per thread (`vectorized`), one block per output
// (`perBlock`), and split sums; how operands are read; and the plan access of FunctionGen.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

#include "llvm/Support/xxhash.h"

namespace mlir::med::cuda {

// The prelude, read from prelude.cuh at build time (lib/Target/CMakeLists.txt).
const char kPrelude[] =
#include "CudaPrelude.inc"
    ;

namespace {
// The kernel library, read from kernels/*.cuh at build time (lib/Target/CMakeLists.txt).
const struct LibraryFile {
  const char *name, *text;
} kLibraryFiles[] = {
#include "CudaKernels.inc"
};
} // namespace

const char *kernelLibrary(const std::string &file) {
  for (const auto &f : kLibraryFiles)
    if (file == f.name)
      return f.text;
  throw CodegenError{"internal: no kernel library file " + file};
}

namespace {
/// Appends `code` (one kernel: its globals and definition) to a translation unit, leaving out
/// each library file the unit already holds. The emitters put the library text in every
/// kernel's globals; each file has an include guard, so a second copy is preprocessed to
/// nothing: leaving it out changes no definition, only NVRTC's lexing (and the artifact's
/// source sections, by about a megabyte for BANIS+).
void appendKernel(std::string &unit, std::vector<bool> &holds, std::string code) {
  holds.resize(std::size(kLibraryFiles));
  for (size_t i = 0; i < std::size(kLibraryFiles); ++i) {
    const llvm::StringRef text = kLibraryFiles[i].text;
    const size_t at = code.find(text.data(), 0, text.size());
    if (at == std::string::npos)
      continue;
    if (holds[i])
      code.erase(at, text.size());
    holds[i] = true;
  }
  unit += code;
}
} // namespace

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

int64_t product(const std::vector<int64_t> &s, size_t begin) {
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
std::string ctype(DType dtype) {
  switch (dtype) {
  case DType::F32: return "float";
  case DType::BF16: return "bf16";
  case DType::F64: return "double";
  case DType::I8: return "signed char";
  case DType::I16: return "short";
  case DType::I32: return "int";
  case DType::I64: return "long long";
  case DType::U8: return "unsigned char";
  case DType::Bool: return "unsigned char";
  case DType::F16: return "f16";
  }
  return "";
}

/// Code that splits flat index `var` into per-axis indices `<prefix>0..` of `shape`.
std::string decompose(const std::string &var, const std::vector<int64_t> &shape,
                      const std::string &prefix, const Index &ix) {
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
                       size_t firstAxis, const Index &ix) {
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

std::string Source::kernel(const std::string &base, const std::vector<std::string> &params,
                           const std::string &body, int block, const std::string &globals,
                           int minBlocks, bool sm90a) {
  std::string sig;
  for (const std::string &p : params)
    sig += (sig.empty() ? "" : ", ") + p;
  const std::string bounds =
      std::to_string(block) + (minBlocks ? ", " + std::to_string(minBlocks) : "");
  std::string key = globals + "|" + bounds + "|" + sig + "|" + body + (sm90a ? "|sm_90a" : "");
  auto it = byBody.find(key);
  if (it != byBody.end())
    return it->second;
  // The name hashes the code, not the order of emission. A 32-bit suffix clashes about
  // once in 10^4 artifacts of 1000 kernels; the later kernel then takes the full 64 bits.
  const uint64_t hash = llvm::xxh3_64bits(base + "|" + key);
  std::string name = base + "_" + llvm::utohexstr(hash & 0xffffffffu, /*LowerCase=*/true, 8);
  if (names.count(name))
    name = base + "_" + llvm::utohexstr(hash, /*LowerCase=*/true, 16);
  for (int n = 1; names.count(name); ++n)
    name = base + "_" + llvm::utohexstr(hash, true, 16) + "_" + std::to_string(n);
  names.insert(name);
  std::string g = globals;
  size_t at;
  while ((at = g.find("KNAME")) != std::string::npos)
    g.replace(at, 5, name);
  std::string b = body;
  while ((at = b.find("KNAME")) != std::string::npos)
    b.replace(at, 5, name);
  list.push_back({g + "extern \"C\" __global__ void __launch_bounds__(" + bounds + ") " + name + "(" + sig + ") {\n" + b + "}\n\n",
                  hash, sm90a});
  byBody[key] = name;
  return name;
}

std::string Source::text() const {
  std::string text = std::string(kPrelude) + "\n"; // a blank line before the kernels
  std::vector<bool> holds;
  for (const Kernel &k : list)
    appendKernel(text, holds, k.code);
  return text;
}

std::vector<std::string> Source::modules(size_t count, std::vector<std::string> *archs) const {
  std::vector<std::string> out(std::max<size_t>(count, 1), std::string(kPrelude) + "\n");
  std::vector<bool> used(out.size());
  std::vector<std::vector<bool>> holds(out.size() + 1); // the last: the sm_90a module
  std::string sm90a;
  for (const Kernel &k : list) {
    if (k.sm90a) {
      appendKernel(sm90a, holds.back(), k.code);
      continue;
    }
    appendKernel(out[k.hash % out.size()], holds[k.hash % out.size()], k.code);
    used[k.hash % out.size()] = true;
  }
  // A module without kernels of its own is left out (the first is kept when none has any:
  // the prelude's kernels need a module that every GPU loads).
  const bool none = std::find(used.begin(), used.end(), true) == used.end();
  std::vector<std::string> kept;
  for (size_t m = 0; m < out.size(); ++m)
    if (used[m] || (m == 0 && none))
      kept.push_back(std::move(out[m]));
  archs->assign(kept.size(), "");
  if (!sm90a.empty()) {
    kept.push_back(std::string(kPrelude) + "\n" + sm90a);
    archs->push_back("90a");
  }
  return kept;
}

// ---- FunctionGen: building blocks --------------------------------------------------

std::vector<std::string> FunctionGen::typed(const std::vector<std::string> &params,
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
    if (type(args[i]).dtype == DType::BF16 || type(args[i]).dtype == DType::F16)
      out[i].replace(at, 5, medrun::dtypeName(type(args[i]).dtype));
    else if (roundOnRead.count(args[i]) && out[i].rfind("const ", 0) == 0)
      out[i].replace(at, 5, "f32r");
  }
  return out;
}

void FunctionGen::launch(const Op &op, const std::string &kernel, int64_t grid, int block,
                         const std::vector<int> &args, int64_t shared) {
  if (grid <= 0)
    return;
  if (grid > kMaxGrid)
    error("needs " + std::to_string(grid) + " blocks, more than a grid holds");
  json::Array a;
  for (int id : args)
    a.push_back(id);
  json::Object step{{"kind", "launch"},
                    {"op", static_cast<int64_t>(indexOf(op))},
                    {"kernel", kernel},
                    {"grid", json::Array{grid, 1, 1}},
                    {"block", json::Array{block, 1, 1}},
                    {"shared", shared},
                    {"args", std::move(a)}};
  if (std::find(args.begin(), args.end(), status()) != args.end())
    step["scalars"] = json::Array{static_cast<int64_t>(indexOf(op) + 1)}; // `code` (typed())
  steps.push_back(std::move(step));
  ++launches;
  // The contract: this op's signature and these very numbers, so that the runtime checks
  // the step against what the kernel was generated for (medrun/LaunchContract.h).
  medrun::LaunchContract c;
  c.op = op.kind;
  c.signature = medrun::opSignature(fn, op);
  c.grid = {static_cast<uint32_t>(grid), 1, 1};
  c.block = {static_cast<uint32_t>(block), 1, 1};
  c.shared = static_cast<uint32_t>(shared);
  for (int id : args) {
    std::string role = medrun::launchRole(fn, op, id, opScratchBase, scratchBytes);
    if (role.empty())
      error("kernel '" + kernel + "' is passed buffer " + std::to_string(id) +
            ", which is neither an operand, a result nor a scratch buffer of the op");
    c.args.push_back(std::move(role));
  }
  addContract(kernel, std::move(c));
}

void FunctionGen::addContract(const std::string &kernel, medrun::LaunchContract c) {
  std::vector<medrun::LaunchContract> &list = contracts[kernel];
  auto at = std::find(list.begin(), list.end(), c);
  size_t index = static_cast<size_t>(at - list.begin());
  if (at == list.end())
    list.push_back(std::move(c));
  lastContract = {kernel, index};
}

void FunctionGen::variant(const std::string &kernel) {
  json::Object *last = steps.empty() ? nullptr : steps.back().getAsObject();
  if (!last)
    error("a kernel variant without a launch");
  json::Array *variants = last->getArray("variants");
  if (!variants) {
    (*last)["variants"] = json::Array{};
    variants = last->getArray("variants");
  }
  variants->push_back(kernel);
  if (!lastContract.first.empty()) // a variant is launched exactly as its kernel
    addContract(kernel, contracts[lastContract.first][lastContract.second]);
}

void FunctionGen::elementwise(const Op &op, const std::string &base, const std::vector<std::string> &params,
                              const std::vector<int> &args, int64_t n, const std::string &body,
                              const std::string &globals) {
  std::string b = "  const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= " +
                  num(n) + ") return;\n" + body;
  launch(op, src.kernel(base, typed(params, args), b, kBlock, globals),
         (n + kBlock - 1) / kBlock, kBlock, args);
}

void FunctionGen::vectorized(const Op &op, const std::string &base, const std::vector<std::string> &params,
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

void FunctionGen::perBlock(const Op &op, const std::string &base, const std::vector<std::string> &params,
                           const std::vector<int> &args, int64_t outs, int block, const std::string &body,
                           const std::string &globals) {
  std::string b = "  const i64 o = blockIdx.x;\n  const int t = threadIdx.x;\n" + body;
  launch(op, src.kernel(base, typed(params, args), b, block, globals), outs, block, args);
}

void FunctionGen::sumParts(const Op &op, const std::string &base, const std::string &outName,
                           int result, int partsBuf, int64_t offset, int64_t count,
                           int64_t parts) {
  const int block = blockFor(parts);
  const std::string row = offset ? "(" + num(offset) + " + o)" : "o";
  perBlock(op, base, {out(outName), in("parts")}, {result, partsBuf}, count, block,
           "  __shared__ float sh[" + std::to_string(block) + "];\n"
           "  float acc = 0.0f;\n"
           "  for (i64 r = t; r < " + num(parts) + "; r += " + std::to_string(block) + ")\n"
           "    acc += parts[" + row + " * " + num(parts) + " + r];\n"
           "  acc = blockSum(acc, sh);\n"
           "  if (t == 0) " + outName + "[o] = acc;\n");
}

FunctionGen::NCS FunctionGen::ncs(int id) const {
  const auto &s = shape(id);
  if (s.size() < 2)
    error("expected an N×C×… input");
  return {s[0], s[1], product(s, 2)};
}

std::vector<int64_t> FunctionGen::broadcastStrides(const std::vector<int64_t> &s,
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

std::string FunctionGen::read(OperandReads &r, int id, const std::string &name) const {
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

FunctionGen::BroadcastRun FunctionGen::broadcastRun(const std::vector<int64_t> &st, const std::vector<int64_t> &to) {
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

std::string FunctionGen::elemType(int id) const {
  std::string t = ctype(type(id).dtype);
  if (t.empty())
    error(std::string("unsupported element type ") + medrun::dtypeName(type(id).dtype));
  return t;
}

// ---- split sums ----------------------------------------------------------------------

std::pair<int64_t, int64_t> FunctionGen::splitParts(int64_t outs, int64_t count) {
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

int64_t FunctionGen::splitSum(const Op &op, const std::string &kernelBase, const SplitSum &s,
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

  // The main loop is reduce.cuh's splitSumTerms over the shape struct; the kernel keeps the
  // per-accumulator code: the output's first term, the accumulators, the row and term
  // functors, the combination and the finish.
  const std::string shape = "struct KNAME_shape {\n  typedef " + ct + " Col;\n" +
                            "  static constexpr i64 parts = " + num(parts) + ", len = " +
                            num(len) + ", count = " + num(s.count) + ", cols = " + num(s.cols) +
                            ";\n  static constexpr int unroll = " + U + ", block = " + B +
                            ";\n};\n";
  std::string body = shared + "  const i64 out = o / " + num(parts) + ", part = o % " +
                     num(parts) + ";\n" + s.base;
  for (const SplitAcc &a : s.accs)
    body += "  " + a.type + " a_" + a.name + "[" + U + "];\n  for (int u = 0; u < " + U +
            "; ++u) a_" + a.name + "[u] = " + a.init + ";\n";
  body += "  splitSumTerms<KNAME_shape>(t, part, ob, [&](const i64 q) {\n" + s.row +
          "    return ro;\n  }, [&](const i64 e, const int u) {\n    do { // continue: the "
          "next term\n" + s.term + "    } while (0);\n  });\n";
  for (const SplitAcc &a : s.accs)
    body += "  const " + a.wide + " " + a.name + " = foldAccumulators(a_" + a.name + ", " +
            shName(a.wide) + ", " + a.fn + ");\n";
  const std::string globals = kernelLibrary("reduce.cuh") + shape;

  std::vector<std::string> ps = params;
  std::vector<int> as = args;
  if (parts == 1) {
    ps.insert(ps.begin(), outParams.begin(), outParams.end());
    as.insert(as.begin(), outArgs.begin(), outArgs.end());
    perBlock(op, kernelBase, ps, as, s.outs, block, body + "  if (t == 0) {\n" + finish + "  }\n",
             globals);
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
           body + "  if (t == 0) {\n" + store + "  }\n", globals);
  const int block2 = blockFor(parts);
  std::string combine;
  for (const std::string &w : wides)
    combine += "  __shared__ " + w + " " + shName(w) + "[" + std::to_string(block2) + "];\n";
  for (const SplitAcc &a : s.accs)
    combine += "  const " + a.wide + " " + a.name + " = combineParts<" + num(parts) + ", " +
               std::to_string(block2) + ">(o, t, p_" + a.name + ", (" + a.wide + ")" + a.init +
               ", " + shName(a.wide) + ", " + a.fn + ");\n";
  perBlock(op, kernelBase + "_combine", cp, ca, s.outs, block2,
           combine + "  if (t == 0) {\n" + finish + "  }\n", kernelLibrary("reduce.cuh"));
  return parts;
}

bool FunctionGen::splitReduce(const Op &op, int x, const std::vector<int64_t> &axes,
                              const std::vector<Reduction> &rs) {
  const auto &xs = shape(x);
  std::vector<bool> reduced(xs.size(), false);
  for (int64_t a : axes)
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
  if (groups.empty() || !groups.back().reduced || rs.empty())
    return false;
  std::vector<int64_t> keptSize, keptStride, rowSize, rowStride;
  for (size_t i = 0; i + 1 < groups.size(); ++i) {
    (groups[i].reduced ? rowSize : keptSize).push_back(groups[i].size);
    (groups[i].reduced ? rowStride : keptStride).push_back(groups[i].stride);
  }
  // Rows whose length is a multiple of a 16-byte vector are read a vector per term (the
  // strides above the rows are multiples of the row, so every vector is aligned): a term
  // then adds its elements in order.
  const std::string t = elemType(x);
  const int64_t lanes = lanesFor({x});
  const int64_t vec = groups.back().size % lanes == 0 ? lanes : 1;
  for (auto *strides : {&keptStride, &rowStride})
    for (int64_t &st : *strides)
      st /= vec;
  SplitSum s;
  s.outs = product(keptSize);
  s.cols = groups.back().size / vec;
  s.count = s.cols * product(rowSize);
  s.base = decompose("out", keptSize, "k") + "  const i64 ob = " + offsetExpr("k", keptStride) +
           ";\n";
  s.row = decompose("q", rowSize, "r") + "    const i64 ro = " + offsetExpr("r", rowStride) +
          ";\n";
  // Several reductions of one input (a `reduce` fusion) keep an accumulator each and read
  // every term once; each accumulator adds its terms in the order a lone one would.
  const bool one = rs.size() == 1;
  const std::string v = vec > 1 ? "(float)xv[k]" : "x[e]";
  std::string terms, finish;
  std::vector<std::string> outParams;
  std::vector<int> outArgs;
  for (size_t j = 0; j < rs.size(); ++j) {
    const std::string &kind = rs[j].kind, id = one ? "" : std::to_string(j);
    const std::string acc = "acc" + id, a = "a_" + acc + "[u]", y = "y" + id;
    if (kind != "sum" && kind != "mean" && kind != "max" && kind != "min")
      error("unknown reduction kind '" + kind + "'");
    terms += kind == "max"   ? a + " = maxNaN(" + a + ", " + v + ");"
             : kind == "min" ? a + " = minNaN(" + a + ", " + v + ");"
                             : a + " += " + v + ";";
    terms += one ? "\n" : " ";
    const std::string init = kind == "max" ? flt(-INFINITY) : kind == "min" ? flt(INFINITY) : "0.0f";
    s.accs.push_back({acc, "float", "float", init,
                      kind == "max" ? "Max()" : kind == "min" ? "Min()" : "Add()"});
    finish += kind == "mean" ? "    " + y + "[o] = " + acc + " / (float)" + num(s.count * vec) + ";\n"
                             : "    " + y + "[o] = " + acc + ";\n";
    outParams.push_back(out(y));
    outArgs.push_back(rs[j].y);
  }
  if (!one)
    terms = "{ " + terms + "}\n";
  s.term = vec > 1 ? "        const Vec<" + t + ", " + std::to_string(vec) + "> xv = vload<" + std::to_string(vec) +
                         ">(x + e * " + num(vec) + ");\n"
                         "        #pragma unroll\n"
                         "        for (int k = 0; k < " + std::to_string(vec) + "; ++k) " + terms
                   : "        " + terms;
  splitSum(op, one ? "reduce_" + rs[0].kind : "reduce_fused", s, {in("x")}, {x}, outParams,
           outArgs, finish);
  return true;
}

} // namespace mlir::med::cuda
