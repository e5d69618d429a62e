//===- Plan.h - the functions of a plan as the runtime and the codegen see them ------===//
//
// The op-level plan of an artifact (docs/artifact.md): its functions and fusion bodies, read
// from the plan's JSON with their checks (value ids in range, each value defined once and
// before use, a fusion's body matching its inputs and results). One reader serves medrun
// (Artifact::load) and medc's CUDA code generator, which reads the plan medc has just
// written; this part of the runtime depends on nothing else of it.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_PLAN_H
#define MEDRUN_PLAN_H

#include "med/OpTable.h"
#include "medrun/Tensor.h"

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace medrun {

using AttrValue =
    std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>>;

/// Type of one SSA value of a function.
struct ValueInfo {
  DType dtype = DType::F32;
  Shape shape;
  /// How the value is stored: its dtype, or under mixed precision the type medc's
  /// med-assign-storage decided (bf16 or f16 for activations, f32 for the rest).
  DType storage = DType::F32;
  int64_t numel() const { return numElements(shape); }
};

struct Function;

/// One med op. Operands are named groups of value ids (ODS operand names: "input",
/// "weight", "bias", ...); an absent optional operand is an empty group. Every attribute is
/// present, defaults included.
struct OpInfo {
  std::string kind; ///< op name without the dialect prefix: "conv3d", "group_norm", ...
  std::vector<std::pair<std::string, std::vector<int>>> operands;
  std::vector<int> results;
  std::map<std::string, AttrValue> attrs;
  std::string location; ///< "file:line:col" of the op in the source program
  /// Master-weight math of a training step (medc's `med.fp32`): computed and kept in f32
  /// even when the activations are stored in bf16 or f16.
  bool fp32 = false;
  /// An instance norm (medc's `med.instance_norm` on a group_norm, or on the ops a pass made
  /// of one): computed as any group norm; medcheck's autocast reference gives its result
  /// the input's type, as PyTorch's autocast does for `instance_norm`.
  bool instanceNorm = false;
  /// A `fusion` op's body (Artifact::fusions), which computes its results from its inputs.
  std::shared_ptr<const Function> body;
  /// The op's entry in the op table (never null once read: an unknown op is refused).
  const med::ops::OpSchema *schema = nullptr;
  med::ops::OpKind op() const { return schema->kind; }

  const std::vector<int> &operand(const std::string &name) const;
  /// The value of a group that must hold exactly one value.
  int single(const std::string &name) const;
  /// The value of an optional operand, if present.
  std::optional<int> optional(const std::string &name) const;

  int64_t intAttr(const std::string &name) const;
  double floatAttr(const std::string &name) const;
  bool boolAttr(const std::string &name) const;
  const std::string &strAttr(const std::string &name) const;
  /// Lists are returned by value: JSON does not tell an empty or integral list of numbers
  /// from a list of integers, so both accessors accept either.
  std::vector<int64_t> intsAttr(const std::string &name) const;
  std::vector<double> floatsAttr(const std::string &name) const;

  /// "'med.conv3d' at file:line:col", for messages.
  std::string describe() const;
};

/// One step of a function's CUDA launch plan (docs/artifact.md, "cuda_plan").
struct CudaStep {
  enum class Kind { Launch, Param, Alias, Assign, Place, AllReduce };
  Kind kind = Kind::Launch;
  int op = -1;                      ///< index of the op in Function::ops it belongs to
  std::string kernel;               ///< Launch: the kernel's name in the module
  /// Launch: other kernels computing the same results from the same arguments, grid and
  /// block (sm_90a variants); the runtime may run one of them instead (plan v9).
  std::vector<std::string> variants;
  std::array<uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  uint32_t shared = 0;              ///< Launch: dynamic shared memory in bytes
  std::vector<int> args;            ///< Launch: buffer ids, one device pointer each;
                                    ///< AllReduce: the values of the bucket (plan v7)
  std::vector<uint32_t> scalars;    ///< Launch: 32-bit unsigned arguments after the pointers
  std::string name;                 ///< Param / Assign: the parameter
  int value = -1;                   ///< Param, Alias: the value defined; Assign: the value assigned
  int from = -1;                    ///< Alias: the value whose buffer `value` shares;
                                    ///< Place: the value whose buffer holds `value`
  size_t offset = 0;                ///< Place: where `value` starts in it, in bytes
  /// Assign: the value's producer may write it straight into the resident tensor `name`
  /// (it reads that tensor at the same element first, and nothing reads it after).
  bool inPlace = false;
};

/// A kernel's launch contract (plan v11, `cuda_plan.kernels`; medrun/LaunchContract.h):
/// the op it was generated for and how it must be launched.
struct LaunchContract {
  std::string op;        ///< the kind of the op the kernel was generated for ("conv3d")
  std::string signature; ///< opSignature of that op (16 hex digits)
  std::array<uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  uint32_t shared = 0;
  /// One role per pointer argument: "operand <group> <i>", "result <i>", "status", or
  /// "scratch <j> <bytes>" (the op's j-th scratch buffer, of that size).
  std::vector<std::string> args;

  bool operator==(const LaunchContract &o) const {
    return op == o.op && signature == o.signature && grid == o.grid && block == o.block &&
           shared == o.shared && args == o.args;
  }
};

/// A function's CUDA plan. Buffer ids below Function::values.size() are values; id
/// values.size() + k is scratch buffer k (scratch[0] is the 4-byte status word kernels set
/// to op index + 1 when they find invalid data).
struct CudaPlan {
  std::vector<int64_t> scratch; ///< bytes of each scratch buffer
  std::vector<CudaStep> steps;  ///< in execution order
  /// medc's memory plan (plan v8): the arena's size and each buffer's offset in it (-1: the
  /// buffer takes no arena bytes as planned: resident state, an alias, a placed value).
  int64_t arenaBytes = 0;
  std::vector<int64_t> offsets;
  /// Each launched kernel's contracts (plan v11): every launch step of the kernel (and of a
  /// kernel it lists as a variant) must match one of them.
  std::map<std::string, std::vector<LaunchContract>> kernels;
};

struct Function {
  std::string name;
  std::vector<ValueInfo> values; ///< indexed by value id
  std::vector<int> inputs;       ///< value ids of the arguments
  std::vector<std::string> inputNames; ///< "image", "target", "lr", ... ("arg<i>" if unnamed)
  std::vector<int> outputs;      ///< value ids returned
  std::vector<std::string> outputNames; ///< "out0", ..., "grad.<parameter>", "grad.arg0"
  std::vector<OpInfo> ops;       ///< in execution order
  /// The precision a training step was compiled for: "fp32", "bf16-mixed" or "fp16-mixed"
  /// ("" when the artifact records none: not a training step). precisionOf() in
  /// Executor.h maps it to the CPU backend's precision.
  std::string precision;
  double initLossScale = 0; ///< fp16-mixed: the loss_scale input of the first step
  std::string fusionTemplate; ///< a fusion body: the template that runs it ("elementwise", "mlp", ...)
  /// A fusion body: the roles its template's matcher found (plan v10), each role's op by
  /// index into `ops` ("expand" → 0, ...; docs/artifact.md).
  std::map<std::string, int> roles;
  std::optional<CudaPlan> cuda;  ///< present in artifacts compiled with --target cuda

  /// A fusion body's op in role `name`, or nullptr where the body has no such role.
  const OpInfo *role(const std::string &name) const;
};

/// The functions of a plan and the fusion bodies they refer to.
struct Plan {
  std::vector<std::shared_ptr<const Function>> fusions; ///< each body once (plan v4)
  std::vector<Function> functions;
};

/// Reads the fusion bodies and functions of a plan document (`json`: JSON text, the whole
/// document or an object with its "fusions" and "functions"); throws Error naming `file`, the
/// function, the op and what was expected.
Plan readPlan(const std::string &json, const std::string &file);

/// Reads one function's `cuda_plan` object (JSON text) for `fn`, its memory plan optional
/// (medc's code generator reads the steps it wrote to place the buffers).
CudaPlan readCudaPlan(const std::string &json, const Function &fn, const std::string &file);

} // namespace medrun

#endif // MEDRUN_PLAN_H
