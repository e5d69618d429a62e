//===- Codegen.h - the CUDA code generator's shared building blocks ------------------===//
//
// Internal to lib/Target/Cuda. FunctionGen generates the kernels and the launch plan of one
// function of the artifact plan: the plan access and the kernel building blocks are defined
// in KernelBuilder.cpp, the run over a function, mixed precision and the dispatch in
// Codegen.cpp, and each op family's emitters in a file of its own (Conv.cpp, Stencil.cpp,
// Norm.cpp, Elementwise.cpp, DataMovement.cpp, Reduce.cpp, Loss.cpp, Optimizer.cpp,
// Random.cpp, Intensity.cpp, Labels.cpp, Spatial.cpp; a fusion template in
// Fusion/<Template>.cpp). A family registers its emitters in a table keyed by op kind, which
// `lower` looks the op up in.
//
// The plan is read with the runtime's reader (medrun/Plan.h): a function is a
// medrun::Function, an op a medrun::OpInfo with its accessors, which throw medrun::Error on
// a malformed op; FunctionGen::run turns that into the llvm::Error naming the op, so no
// exception crosses an LLVM frame.
//
//===------------------------------------------------------------------------------===//

#ifndef MED_TARGET_CUDA_CODEGEN_H
#define MED_TARGET_CUDA_CODEGEN_H

#include "med/Target/Cuda.h"
#include "medrun/Error.h"
#include "medrun/LaunchContract.h"
#include "medrun/Plan.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mlir::med::cuda {

namespace json = llvm::json;
using DType = medrun::DType;
/// An op of the plan (its operand groups, results and attributes, with their accessors).
using Op = medrun::OpInfo;

constexpr int kBlock = 256;            // threads per block
constexpr int64_t kMaxGrid = 2147483647; // gridDim.x limit

/// The helpers every kernel may use: prelude.cuh, embedded at build time. With
/// -default-device, plain functions are device code.
extern const char kPrelude[];
/// A file of the kernel library (kernels/*.cuh: the tile library, the templates' kernels),
/// embedded at build time; an unknown name is an internal error (thrown).
const char *kernelLibrary(const std::string &file);

// ---- literals and index code (KernelBuilder.cpp) ---------------------------------------

/// A float literal that rounds to the same float as `v`.
std::string flt(double v);
/// A double literal.
std::string dbl(double v);
std::string num(int64_t v);
int64_t product(const std::vector<int64_t> &s, size_t begin = 0);
/// Smallest power of two >= n, clamped to [32, kBlock].
int blockFor(int64_t n);
/// The C type a value of `dtype` is stored as on the device (empty: unsupported).
std::string ctype(DType dtype);

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
                      const std::string &prefix, const Index &ix = kWide);
std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape);
/// Σ idx_d · stride_d as code (zero strides left out).
std::string offsetExpr(const std::string &prefix, const std::vector<int64_t> &strides,
                       size_t firstAxis = 0, const Index &ix = kWide);

// ---- scalar forms (Elementwise.cpp, Optimizer.cpp) -------------------------------------

/// The scalar expression of an elementwise op: the f32 result from its operands' f32
/// expressions, in operand order. One definition serves the op's own kernel and every
/// fused kernel it is part of. Empty for ops without one. `op` gives the attributes of
/// the ops whose formula has some (leaky_relu's slope); without it they have none.
std::string scalarExpr(const std::string &kind, const std::vector<std::string> &x,
                       const Op *op = nullptr);

/// The operands of an op with a scalar form, in the order its scalar form takes them.
const std::vector<const char *> &scalarOperands(const std::string &kind);

/// The scalar statement of optimizer step `op` on one element: reads `x` (expressions of the
/// operands in scalarOperands order; the learning rate and step may be any float
/// expressions), assigns `y` (the new parameter and state, in result order). It may fail the
/// function through the status word (`status`, `code`), as AdamW does for a step below 1.
/// One definition for the optimizer's own kernel and every fusion it is part of.
std::string optimizerStatement(const std::string &kind, const Op &op,
                               const std::vector<std::string> &x,
                               const std::vector<std::string> &y);

/// The kernels of an artifact, shared between functions when identical. A kernel is named
/// by its kind and a hash of its code (`gelu_3f0c1a2b`), so adding or changing one kernel
/// renames no other: the modules the others land in stay the same text.
class Source {
public:
  /// Adds (or finds) the kernel with these parameters and body; returns its name.
  /// `minBlocks`: blocks per SM the compiler must leave registers for (0: no bound).
  /// `sm90a`: the kernel uses sm_90a's instructions (wgmma): it goes to a module of its
  /// own, compiled for sm_90a, which the runtime loads on such GPUs only.
  std::string kernel(const std::string &base, const std::vector<std::string> &params,
                     const std::string &body, int block, const std::string &globals = "",
                     int minBlocks = 0, bool sm90a = false);

  size_t kernels() const { return list.size(); }
  /// The prelude, a blank line, then every kernel: one translation unit.
  std::string text() const;
  /// The kernels split into `count` modules, each the prelude and its kernels (in the
  /// order they were added). A kernel's module is its hash modulo `count`; the sm_90a
  /// kernels, if any, form one more module, the last, whose arch is "90a" ("" the others').
  std::vector<std::string> modules(size_t count, std::vector<std::string> *archs) const;

private:
  struct Kernel {
    std::string code; ///< globals and definition
    uint64_t hash;
    bool sm90a;
  };
  std::vector<Kernel> list;
  std::map<std::string, std::string> byBody; ///< dedup key -> name
  std::set<std::string> names;
};

/// Which stencil kernels medc emits (MEDC_STENCIL, read once), so that each can be measured
/// on one GPU: `rows`, the default, streams the shift-sums and the weight gradient along H
/// where a thread's sums fit its registers (k3; k5 takes parity's kernels) and runs the
/// strided transposed depthwise convolutions as parity classes; `parity`, the tiled
/// shift-sums and staged weight gradient with the parity classes (2.1% slower at k3 on an
/// H100: docs/perf.md, 2026-12-07); `registers`, parity with register-tiled shift-sums and
/// 16-byte dy staging (slower at k3: 2026-12-06); `tiles`, the kernels before all of them.
enum class StencilKernels { Tiles, Parity, Registers, Rows };
StencilKernels stencilKernels();

struct CodegenError {
  std::string message;
};

/// An operand of the mlp_grad weight-gradient products: an activation [N][rows][S] or a
/// slab's scratch [tile][rows][64] (`scratchTiles`), with `ones`: a row of ones after its
/// rows (a bias gradient as one more column).
struct MlpOperand {
  std::string name;
  int id;
  int64_t rows;
  bool scratchTiles;
  bool ones;
};

class FunctionGen;
/// The emitter of an op kind: appends the op's kernels and launch steps.
using Emitter = void (*)(FunctionGen &, const Op &);
using OpKind = ::med::ops::OpKind;
using Emitters = std::map<OpKind, Emitter>;
/// A fusion template: emits a `fusion` op whose plan body names it.
using FusionTemplate = void (*)(FunctionGen &, const Op &, const medrun::Function &body);
using FusionTemplates = std::map<std::string, FusionTemplate>;

/// Generates the kernels and the launch plan of one function.
class FunctionGen {
public:
  FunctionGen(Source &src, const medrun::Function &fn) : src(src), fn(fn) {}
  /// The most scratch a template's slabs may take at once (the mlp_grad backward).
  int64_t scratchLimit = int64_t{512} << 20;
  /// The most shared memory the mlp templates' kernels may take to keep all the weights of a
  /// block MLP there for the whole kernel (above it they stage them per tile).
  int64_t mlpResidentLimit = int64_t{48} << 10;
  /// Tests only: the grid of those kernels (0: the counts per SM measured best on the
  /// H200, times smCount), so that a small test gives each block several tiles.
  int64_t mlpResidentBlocks = 0;
  /// Tiles in flight in those kernels' copy pipeline (cp.async; fewer where the buffers do not
  /// fit beside the weights); 1: the kernels that take one tile at a time.
  int64_t mlpPipeline = 2;
  /// The streaming multiprocessors of the GPU the kernels are compiled for (the H100 SXM's
  /// and the H200's: 132); grids that fill the GPU follow from it.
  int64_t smCount = 132;
  /// Also emit sm_90a variants (wgmma) of the templates that have one, beside their mma.sync
  /// kernels: the launch step lists them, and the runtime picks one by measurement.
  bool wgmma = false;

  /// The function's CUDA plan: scratch sizes, launch steps, the values stored in bf16/f16.
  llvm::Expected<json::Object> run();

  size_t launches = 0;

  /// Each op family adds its emitters, keyed by op kind; each template file its template.
  static void registerConv(Emitters &e);
  static void registerStencil(Emitters &e);
  static void registerNorm(Emitters &e);
  static void registerElementwise(Emitters &e);
  static void registerDataMovement(Emitters &e);
  static void registerReduce(Emitters &e);
  static void registerLoss(Emitters &e);
  static void registerOptimizer(Emitters &e);
  static void registerRandom(Emitters &e);
  static void registerIntensity(Emitters &e);
  static void registerLabels(Emitters &e);
  static void registerSpatial(Emitters &e);
  static void registerFusion(Emitters &e); // a `fusion` op: its template (Codegen.cpp)
  static void registerElementwiseFusion(FusionTemplates &t);
  static void registerMlpFusion(FusionTemplates &t);
  static void registerStencilFusion(FusionTemplates &t);
  static void registerResampleFusion(FusionTemplates &t);
  static void registerReduceFusion(FusionTemplates &t);

private:
  Source &src;
  const medrun::Function &fn;
  /// The function's values, each with the type it is stored as on the device (its
  /// `storage`: med-assign-storage makes f32 activations bf16 or f16 under mixed precision).
  std::vector<medrun::ValueInfo> values;
  std::vector<int64_t> scratchBytes;
  /// The first scratch buffer the op being lowered allocates: its launch contracts name
  /// the op's scratch buffers from there (medrun/LaunchContract.h).
  size_t opScratchBase = 1;
  /// Each kernel's launch contracts, in the order first launched (cuda_plan.kernels).
  std::map<std::string, std::vector<medrun::LaunchContract>> contracts;
  std::pair<std::string, size_t> lastContract; ///< the last launch's kernel and contract
  void addContract(const std::string &kernel, medrun::LaunchContract c);
  json::Array steps;
  std::optional<DType> mixedType; // bf16 or f16: the storage of activations (mixed precision)
  std::set<int> roundOnRead; // f32 operands of the op being lowered that it reads as bf16
  std::map<int, int64_t> producers; // value id -> the op that defines it
  std::set<int> placed;      // values a pack placed in its result (med.pack)
  /// Values a fusion writes straight into the resident state tensor its assign names
  /// (the update reads that tensor at the same element first, and nothing reads it after):
  /// their assign steps say `in_place`, and the fusion's kernel writes nothing once the
  /// status word reports a failed op, so that a failed step changes no state.
  std::map<int, std::string> inPlace;
  void findInPlaceUpdates(const std::vector<Op> &ops);

  /// Operands an op reads in f32 under bf16-mixed, as the CPU backend: saved statistics,
  /// and a norm's gamma and beta (torch autocast computes the norms in f32). The op table
  /// says which (ODS `wideOperands`).
  static bool readsWide(const Op &op, const std::string &name) {
    const ::med::ops::OperandSpec *o = op.schema->operand(name);
    return o && o->wide;
  }

  /// Under mixed precision, does `op` compute in the activations' type: is one of its
  /// results stored in it (med-assign-storage's decision, as the CPU backend reads it)?
  /// Under bf16-mixed such an op also reads its f32 operands rounded to bf16 (roundOnRead),
  /// as the CPU backend converts them, except those of readsWide; under fp16-mixed the CPU
  /// backend reads them as they are.
  bool computesLow(const Op &op) const {
    // A fusion of master-weight math (or augmentation) computes in f32 even where a result
    // leaves it in the 16-bit type (med-assign-storage).
    return mixedType && !op.fp32 && std::any_of(op.results.begin(), op.results.end(), [&](int id) {
             return type(id).dtype == *mixedType;
           });
  }

  /// The kernel parameters with each float buffer typed as its value is stored (`bf16`),
  /// or read (`f32r`, an f32 operand of an op computing in bf16).
  std::vector<std::string> typed(const std::vector<std::string> &params,
                                 const std::vector<int> &args) const;

  [[noreturn]] static void error(const std::string &msg) { throw CodegenError{msg}; }

  // ---- plan access ---------------------------------------------------------------------
  /// The index of `op` in the function (its steps name it; a failing kernel reports it + 1).
  size_t indexOf(const Op &op) const {
    if (fn.ops.empty() || &op < fn.ops.data() || &op >= fn.ops.data() + fn.ops.size())
      error("the op is not one of the function's");
    return static_cast<size_t>(&op - fn.ops.data());
  }
  int result(const Op &op, size_t i = 0) const {
    if (i >= op.results.size())
      error("the plan gives " + std::to_string(op.results.size()) + " results");
    return op.results[i];
  }
  std::array<int64_t, 3> triple(const Op &op, const std::string &name) const {
    std::vector<int64_t> v = op.intsAttr(name);
    if (v.size() != 3)
      error("'" + name + "' needs 3 entries");
    return {v[0], v[1], v[2]};
  }

  const medrun::ValueInfo &type(int id) const { return values.at(id); }
  const std::vector<int64_t> &shape(int id) const { return values.at(id).shape; }
  void requireFloat(int id, const std::string &what) const {
    const DType t = type(id).dtype;
    if (t != DType::F32 && t != DType::BF16 && t != DType::F16)
      error(what + " has element type " + medrun::dtypeName(type(id).dtype) +
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

  /// `shared`: the launch's dynamic shared memory in bytes (the kernel's MED_DYNAMIC_SHARED).
  void launch(const Op &op, const std::string &kernel, int64_t grid, int block,
              const std::vector<int> &args, int64_t shared = 0);
  /// Names `kernel` as a variant of the last launch step's kernel: the same parameters, grid
  /// and block, the same results, another way of computing them (docs/artifact.md).
  void variant(const std::string &kernel);

  /// One thread per element of [0, n): `body` sees `i`.
  void elementwise(const Op &op, const std::string &base, const std::vector<std::string> &params,
                   const std::vector<int> &args, int64_t n, const std::string &body,
                   const std::string &globals = "");

  /// Elements per thread of a vectorized kernel moving `ids`: one 16-byte vector of the
  /// widest (8 of bf16 or f16, 4 of f32).
  int lanesFor(const std::vector<int> &ids) const {
    for (int id : ids)
      if (type(id).dtype != DType::BF16 && type(id).dtype != DType::F16)
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
                  const std::string &perThread, const std::string &body);

  /// Does `code` use the identifier `id` (a whole token)?
  static bool usesIdentifier(const std::string &code, const std::string &id) {
    auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (size_t at = code.find(id); at != std::string::npos; at = code.find(id, at + 1))
      if ((at == 0 || !ident(code[at - 1])) &&
          (at + id.size() == code.size() || !ident(code[at + id.size()])))
        return true;
    return false;
  }

  /// One block of `block` threads per output o of [0, outs): `body` sees `o` and `t`;
  /// `globals` as Source::kernel takes them (a template library, a shape struct).
  void perBlock(const Op &op, const std::string &base, const std::vector<std::string> &params,
                const std::vector<int> &args, int64_t outs, int block, const std::string &body,
                const std::string &globals = "");
  /// One block per output o of [0, count): `outName`[o] = the sum of the `parts` partial
  /// sums parts[(offset + o) * parts + r], in a fixed tree (the same bits on every run).
  void sumParts(const Op &op, const std::string &base, const std::string &outName, int result,
                int partsBuf, int64_t offset, int64_t count, int64_t parts);
  static std::string in(const std::string &name, const std::string &t = "float") {
    return "const " + t + "* __restrict__ " + name;
  }
  static std::string out(const std::string &name, const std::string &t = "float") {
    return t + "* __restrict__ " + name;
  }

  // ---- operands ------------------------------------------------------------------------
  /// N, C and trailing size S of an N×C×… value.
  struct NCS {
    int64_t n, c, s;
  };
  NCS ncs(int id) const;
  /// Strides of an operand of shape `s` broadcast (NumPy rules) to `to`.
  std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &s,
                                        const std::vector<int64_t> &to) const;

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
  std::string read(OperandReads &r, int id, const std::string &name) const;

  /// Of a broadcast operand with strides `st` (broadcastStrides) into `to`: how many
  /// consecutive result elements share an element of it (`shared`: the trailing axes it is
  /// broadcast along), and over how many consecutive result elements it is consecutive
  /// too (`consecutive`: the trailing axes it is not broadcast along). Axes of size 1 count
  /// for both.
  struct BroadcastRun {
    int64_t shared = 1, consecutive = 1;
  };
  static BroadcastRun broadcastRun(const std::vector<int64_t> &st, const std::vector<int64_t> &to);
  std::string elemType(int id) const;

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
  static std::pair<int64_t, int64_t> splitParts(int64_t outs, int64_t count);
  /// Emits a split sum: `params`/`args` are what the terms read, `outParams`/`outArgs` what
  /// `finish` writes; `finish` runs in thread 0 once per output `o`, with each accumulator's
  /// total as `<name>`. Returns the number of parts.
  int64_t splitSum(const Op &op, const std::string &kernelBase, const SplitSum &s,
                   const std::vector<std::string> &params, const std::vector<int> &args,
                   const std::vector<std::string> &outParams, const std::vector<int> &outArgs,
                   const std::string &finish);
  /// A reduce whose innermost axes (after dropping axes of size 1 and merging neighbours)
  /// are reduced: each output's terms are rows of contiguous elements, a split sum.
  /// Returns false for other reduces (the innermost axis kept).
  /// One reduction of a split reduce: its kind (sum, mean, max, min) and result.
  struct Reduction {
    std::string kind;
    int y;
  };
  /// Each of `rs` reduces `x` over `axes` in the one pass (a `reduce` fusion's siblings).
  bool splitReduce(const Op &op, int x, const std::vector<int64_t> &axes,
                   const std::vector<Reduction> &rs);

  // ---- dispatch (Codegen.cpp) ------------------------------------------------------------
  /// Appends the op's steps: the emitter its kind is registered under.
  void lower(const Op &op);
  /// A `fusion` op: the template its plan body names.
  void fusion(const Op &op);

  // ---- Conv.cpp --------------------------------------------------------------------------
  void conv(const Op &op);
  void convGradWeight(const Op &op);
  void depthwiseGradWeight(const Op &op, int x, int dy, int dw, const std::array<int64_t, 3> &s,
                           const std::array<int64_t, 3> &p, const std::array<int64_t, 3> &d);

  // ---- Spatial.cpp -----------------------------------------------------------------------
  /// How a med.spatial_transform samples (kernels/resample.cuh), shared with the `resample`
  /// template.
  struct Sampling {
    std::string mode, border;
    double value;
    std::vector<int64_t> labels, xs, ys; // the labels; input and output shapes
    bool labelsInt;
    Index ix;
    /// The type of a stored sample: i32 labels stay int, anything else is a float.
    std::string valueType() const { return labelsInt ? "int" : "float"; }
    /// The type of a sample as resample.cuh's sampleChannel returns it (linear: float).
    std::string sampleType() const { return mode == "linear" ? "float" : valueType(); }
    /// The shape struct `name` of a kernel of resample.cuh: the sampling, and the threads'
    /// box `box` (N, C, D, H, W) at `low` in the output; `extra`: more members.
    std::string shape(const std::string &name, const std::vector<int64_t> &box,
                      const std::vector<int64_t> &low, const std::string &extra = "") const;
  };
  /// The sampling of transform `op` with input `x`, matrices `m` and output shape `ys`, its
  /// indices narrow where every index below `bound` fits.
  Sampling sampling(const Op &op, int x, int m, const std::vector<int64_t> &ys,
                    int64_t bound) const;
  void spatialTransform(const Op &op);

  // ---- Stencil.cpp -----------------------------------------------------------------------
  /// What shiftSumTile emitted: nothing (the shape needs the generic kernels), the tile
  /// kernel, or the tile kernel with the statistics' chunk partials in its epilogue.
  enum class TileEmitted { None, Plain, WithStatistics };
  /// The stencil template of a shift-sum x ⊛ w (+ b) → y, launched for `op`; with `parts`
  /// (≥ 0) and tiles that are chunks of group-norm statistics (medrun/NormStats.h), the
  /// kernel also writes each tile's (pivot, dev, M2) into parts.
  TileEmitted shiftSumTile(const Op &op, bool mirrored, int x, int w, std::optional<int> b, int y,
                           int parts, std::optional<int> addend = std::nullopt);
  void stencilFusion(const Op &op, const medrun::Function &body);
  /// The function's value of body value `id` of fusion `op` (one of its inputs or results).
  int fusionValue(const Op &op, const medrun::Function &body, int id);
  /// The `stencil_grad` fusion: a shift-sum's weight gradient and its bias gradient.
  void stencilGradFusion(const Op &op, const medrun::Function &body);
  void shiftSum(const Op &op);
  void shiftSumGradWeight(const Op &op);
  /// The weight gradient of x and dy into dw, and with `db` the bias gradient Σ dy too.
  void shiftSumGradWeight(const Op &op, int x, int dy, int dw, std::optional<int> db);
  /// The streamed shift-sum (MEDC_STENCIL=rows) of x ⊛ w (+ b) → y, with `parts` (≥ 0) the
  /// group-norm statistics of each chunk too (a block per band of chunks); None where the
  /// shape needs the tiled kernel. And the streamed weight gradient; false likewise.
  void launchShiftSum(const Op &op, const std::string &name, const std::string &call,
                      const std::string &tile, int64_t threads, int64_t blocks, int x, int w,
                      std::optional<int> b, int y, int parts,
                      std::optional<int> addend = std::nullopt);
  /// With `addend` (no statistics) the kernel stores x ⊛ w (+ b) + addend.
  TileEmitted shiftSumStreamed(const Op &op, bool mirrored, int x, int w, std::optional<int> b,
                               int y, int parts, std::optional<int> addend = std::nullopt);
  bool shiftSumGradWeightRows(const Op &op, int x, int dy, int dw, std::optional<int> db);
  /// A depthwise conv3d_transpose with a stride and no dilation as its stride's parity
  /// classes, each a dense stencil (kernels/depthwise.cuh); false: the shape needs conv().
  bool transposedParity(const Op &op);

  // ---- Labels.cpp ------------------------------------------------------------------------
  /// The type labels of value `id` are compared in (float or i64), and `value` as a literal
  /// of it.
  std::pair<std::string, std::string> labelCompare(int id, int64_t value) const;
  void affinities(const Op &op);
  void removeLabel(const Op &op);
  void labelRegions(const Op &op);
  void downsampleNearest(const Op &op);

  // ---- Norm.cpp --------------------------------------------------------------------------
  void groupStats(const Op &op, int x, int64_t groups, double eps, int mean, int rstd);
  void mergeStats(const Op &op, int parts, int64_t segs, int64_t cg,
                  const std::vector<int64_t> &xs, double eps, int mean, int rstd);
  void groupNormStats(const Op &op);
  void groupNormApply(const Op &op);
  void normalizeGroups(const Op &op, int x, int mean, int rstd, int g, int b, int y,
                       int64_t groups);
  static std::string groupOf(const Index &ix, bool perThread, const NCS &d, int64_t groups,
                             int64_t cg);
  void groupNorm(const Op &op);
  void batchNorm(const Op &op);
  void channelLayerNorm(const Op &op);
  void rowSums(const Op &op, int x, std::optional<int> dy, int64_t rows, int64_t len, int outBuf);
  void grn(const Op &op);
  /// The operands of every norm gradient: input, gamma and output gradient in; dx, dgamma
  /// and dbeta out; all f32.
  struct NormGradArgs {
    int x, g, dy, dx, dg, db;
    NCS d;
  };
  NormGradArgs normGradArgs(const Op &op) const;
  bool zeroIfEmpty(const Op &op, const NormGradArgs &a);
  void groupNormGrad(const Op &op);
  void channelLayerNormGrad(const Op &op);
  void grnGrad(const Op &op);

  // ---- Elementwise.cpp, Fusion/Elementwise.cpp ------------------------------------------
  void constant(const Op &op);
  void unary(const Op &op);
  void binary(const Op &op);
  void geluGrad(const Op &op);
  void broadcastMap(const Op &op);
  void softmax(const Op &op);
  /// med.resize (adjoint false) and med.resize_grad (true), Spatial.cpp.
  void avgPool(const Op &op, bool grad);
  void maxPool(const Op &op, bool grad);
  void resize(const Op &op, bool adjoint);
  void extremumGrad(const Op &op);
  void elementwiseFusion(const Op &op, const medrun::Function &body);
  void resampleFusion(const Op &op, const medrun::Function &body);
  /// The statement of med.random `op` of result shape `shape` drawing element `element`
  /// (an index, or an expression of one in parentheses, row-major in that shape) with key
  /// `key` into `y`: the element's
  /// counter is (stream, sample, its index in the sample). One definition for the random
  /// op's own kernel and every fused kernel that draws it.
  std::string randomDraw(const Op &op, const std::vector<int64_t> &shape, const std::string &key,
                         const std::string &element, const std::string &y);
  /// The statement of med.dropout `op` of shape `shape` setting `y` (a float) from `x` (an
  /// f32 expression) at element `element` (as randomDraw's) with key `key`: one definition
  /// for the dropout's own kernel and every fused kernel that applies it.
  std::string dropoutApply(const Op &op, const std::vector<int64_t> &shape,
                           const std::string &key, const std::string &element,
                           const std::string &x, const std::string &y);
  void dropout(const Op &op);
  void reduceFusion(const Op &op, const medrun::Function &body);
  // ---- Fusion/Mlp.cpp ----------------------------------------------------------------------
  void mlpFusion(const Op &op, const medrun::Function &body);
  void mlpGradFusion(const Op &op, const medrun::Function &body);
  /// 16-bit copies of weight `w` (rows × cols, f32 as read) in scratch, zero-padded to
  /// multiples of 16: `plain` row-major, `transposed` its transpose (each only if not null).
  void mlpWeights(const Op &op, int w, int64_t rows, int64_t cols, const std::string &t,
                  int *plain, int *transposed);
  void mlpCheck(int x, int y) const;
  /// The backward in one kernel where it fits (false: nothing emitted); `functor` and
  /// `members`: the kernel's body functor (kernels/mlp.cuh).
  void launchMlpGrad(const Op &op, const std::string &name, const std::string &call,
                     int64_t threads, int64_t perSm, int64_t parts, int64_t shared,
                     std::optional<int> dx, int dw1, int dw2, std::optional<int> db1,
                     const std::string &functor, const std::vector<std::string> &members,
                     std::vector<std::string> params, std::vector<int> args);
  bool mlpGradChunks(const Op &op, int x, int dy, std::optional<int> dx, int dw1, int dw2,
                     std::optional<int> db1, const std::string &functor,
                     const std::vector<std::string> &members, std::vector<std::string> params,
                     std::vector<int> args);
  bool mlpGradResident(const Op &op, int x, int dy, std::optional<int> dx, int dw1, int dw2,
                       std::optional<int> db1, const std::string &functor,
                       const std::vector<std::string> &members, std::vector<std::string> params,
                       std::vector<int> args);
  /// Partial sums over a slab's tiles of out[m][n] = Σ_k A[m][k]·B[n][k] (k: voxels) into
  /// `parts` at parts partBase.. (Fusion/Mlp.cpp).
  void mlpGemm(const Op &op, const MlpOperand &A, const MlpOperand &B, int64_t M, int64_t Nc,
               int64_t S, int64_t first, int64_t count, int64_t partBase, int64_t perSlab,
               int64_t parts, int partsBuf, const std::string &outIndex, const std::string &t);

  // ---- DataMovement.cpp ------------------------------------------------------------------
  void param(const Op &op);
  void assign(const Op &op);
  void reshape(const Op &op);
  void pack(const Op &op);
  void allReduce(const Op &op);
  void pad(const Op &op);
  void slice(const Op &op);
  void concat(const Op &op);
  void transpose(const Op &op);
  void broadcast(const Op &op);
  void sliceGrad(const Op &op);

  // ---- Reduce.cpp ------------------------------------------------------------------------
  /// The sizes and strides of the kept and the reduced axes of a `reduce`-style op's input.
  struct ReduceAxes {
    std::vector<int64_t> keptSize, keptStride, redSize, redStride;
  };
  ReduceAxes reduceAxes(const std::vector<int64_t> &axes, const std::vector<int64_t> &xs) const;
  /// The shape struct `name` of a kernel of kernels/reduce.cuh reducing over `ax`.
  static std::string reduceShape(const std::string &name, const ReduceAxes &ax);
  void reduce(const Op &op);
  /// A `kind` reduction of x over `axes` into y (med.reduce's kernels for the values of op).
  void reduce(const Op &op, int x, int y, const std::string &kind,
              const std::vector<int64_t> &axes);
  void reduceExtremumGrad(const Op &op);

  // ---- Loss.cpp --------------------------------------------------------------------------
  NCS lossLayout(int id) const;
  void bce(const Op &op, bool grad);
  std::string readClass(int target, int64_t classes) const;
  static std::string softmaxHead(int64_t C, int64_t S);
  int diceSums(const Op &op, int x, int tgt, const NCS &L);
  void diceCE(const Op &op, bool grad);

  // ---- Random.cpp ------------------------------------------------------------------------
  void random(const Op &op);

  // ---- Intensity.cpp ---------------------------------------------------------------------
  void gaussianBlur(const Op &op);
  void simulateLowResolution(const Op &op);
  void mirror(const Op &op);
  void shiftSlices(const Op &op);
  void affineMatrix(const Op &op);
  void orientationMatrix(const Op &op);

  // ---- Optimizer.cpp ---------------------------------------------------------------------
  void anyNonFinite(const Op &op);
  void sumSquares(const Op &op);
  void select(const Op &op);
  void updateLossScale(const Op &op);
  void adamw(const Op &op);
  void sgd(const Op &op);
};

} // namespace mlir::med::cuda

#endif // MED_TARGET_CUDA_CODEGEN_H
