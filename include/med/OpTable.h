//===- OpTable.h - the facts of each med op, without MLIR ------------------------===//
//
// What the runtime and the tools know of an op: its plan name, its operand groups (arity,
// whether they may hold labels, whether they are read in f32 under mixed precision), its
// attributes and their types, its FLOP rule and whether it is differentiable. The facts are
// written once, in the op's ODS definition (include/med/IR/*.td, the fields of Med_Op), and
// generated into OpTable.inc by tools/med-tblgen/gen_op_table.py; this header is plain C++
// so that the runtime, which does not link MLIR, dispatches on the same table.
//
//===----------------------------------------------------------------------------------===//
#ifndef MED_OPTABLE_H
#define MED_OPTABLE_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace med::ops {

/// Every op of the plan, in ODS order. Dispatch switches over it list every kind (the
/// project builds them with -Werror=switch): an op without a CPU kernel or LibTorch mapping
/// does not build.
enum class OpKind : uint16_t {
#define MED_OP(kind, name) kind,
#include "med/OpTable.inc"
#undef MED_OP
};
constexpr size_t kNumOps = 0
#define MED_OP(kind, name) +1
#include "med/OpTable.inc"
#undef MED_OP
    ;

enum class Arity : uint8_t { One, Optional, Variadic };

struct OperandSpec {
  const char *name;
  Arity arity;
  bool label; ///< may hold labels or keys (integers), not only floats
  bool wide;  ///< read in f32 under mixed precision (statistics, a norm's gamma and beta)
};

enum class AttrType : uint8_t { Int, Float, Bool, String, Ints, Floats, Other };

struct AttrSpec {
  const char *name;
  AttrType type;
  bool optional;                    ///< may be absent from the plan
  std::vector<const char *> values; ///< an enum's spellings (String), else empty
};

/// How an op's arithmetic is counted (medc stats and medrun bench use the same rule).
enum class FlopRule : uint8_t {
  None,           ///< data movement
  PerElement,     ///< perElement × the elements of `operand` (all its values), or of result 0
  Conv,           ///< 2 × multiply-adds of a convolution (+ 1 per output for a bias)
  ConvTranspose,  ///< as Conv, counted over the input
  ConvGradWeight, ///< 2 × multiply-adds of a weight gradient
  Fusion,         ///< its body's
};

struct OpSchema {
  OpKind kind;
  const char *name; ///< the plan's name: the mnemonic
  const char *summary;
  std::vector<OperandSpec> operands;
  std::vector<AttrSpec> attrs;
  int numResults; ///< -1: variadic
  bool differentiable;
  FlopRule flopRule;
  double perElement;
  const char *flopOperand; ///< PerElement: the operand counted ("" = result 0)
  const char *family;      ///< medc stats' grouping ("conv": by the weight's shape)

  const OperandSpec *operand(std::string_view name) const;
  const AttrSpec *attr(std::string_view name) const;
};

/// Every op, indexed by OpKind.
const std::vector<OpSchema> &allOps();
inline const OpSchema &schema(OpKind k) { return allOps()[static_cast<size_t>(k)]; }
/// The op with plan name `name`, or null.
const OpSchema *findOp(std::string_view name);

/// The shapes an op reads and writes, for its FLOP rule.
struct OpShapes {
  /// The shapes of every value of operand group `name` (empty when absent).
  std::function<std::vector<std::vector<int64_t>>(const char *name)> operand;
  std::vector<std::vector<int64_t>> results;
};

struct OpFlops {
  double flops = 0;   ///< all of it, the bias add included
  double macs = 0;    ///< of a convolution: its multiply-adds
  double biasAdd = 0; ///< of a convolution with a bias: one per output element
  std::string problem; ///< why the shapes do not fit the rule ("expected a rank-5 weight, ...")
};

/// The arithmetic of one op by its FLOP rule (Fusion: zero; the caller sums the body).
OpFlops flopsOf(const OpSchema &op, const OpShapes &shapes);

/// A registry of one executor's pieces: whether it has op `k`.
using Provides = std::function<bool(OpKind k)>;

/// "op 'gelu': no CUDA emitter" for each op a registry lacks, by the table: every op needs
/// each registry's piece. Empty when complete.
std::vector<std::string> missingPieces(const std::vector<std::pair<std::string, Provides>> &registries);

} // namespace med::ops

#endif // MED_OPTABLE_H
