//===- InputRoles.h - random inputs for a function, by how it uses each argument -----===//
//
// `medcheck` (against LibTorch) and `medrun cuda-check` (the CUDA backend against the CPU
// backend) run a function on random inputs where none are given. What values make a useful
// input depends on how the function uses the argument: a mask is 0/1, Dice targets are class
// indices, what sqrt or log reads is positive, a label transform reads a few object ids, an
// optimizer's learning rate is small. This is the one table of those roles: the rules that
// find an argument's role from its uses (through fusion bodies too) and the values drawn for
// each role.
//
// An argument of an integer type that an op reads must have a role: integers drawn N(0, 1)
// are no labels, class indices or keys, and would check nothing. argumentRoles() says so (an
// Error naming the function, the argument and its use) instead of drawing them.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_INPUTROLES_H
#define MEDRUN_INPUTROLES_H

#include "medrun/Plan.h"
#include "medrun/Tensor.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace medrun {

/// How an argument is used, which decides its random values.
enum class InputRole {
  Real,           ///< any real value: N(0, 1)
  Mask,           ///< a loss mask: 1 with probability 0.7, else 0
  ClassIndex,     ///< dice_ce targets: class indices in [0, classes)
  Target,         ///< BCE targets: U(0, 1) (soft targets: BCE reads any probability)
  PositiveWeight, ///< BCE pos_weight: U(0.5, 2)
  Positive,       ///< what sqrt, log or pow's base reads (directly or through a fusion body's
                  ///< ops): U(0.1, 2.1); N(0, 1) would give NaN on both sides, which agree
  SecondMoment,   ///< AdamW's exp_avg_sq: U(0, 1)
  LearningRate,   ///< an optimizer's lr (or an input named `lr`): 1e-3
  Step,           ///< an optimizer's 1-based step count (or an input named `step`): 1..10
  EmaDecay,       ///< an input named `ema_decay`: 0.99
  Key,            ///< med.random's key: all 64 bits (both Philox key words)
  Label,          ///< object ids of a label transform or of linear_argmax: drawn from `labels`
  Ties,           ///< linear_argmax's input when RoleOptions::labelTies: N(0, 1), no label
};

/// The role's name as the docs and errors spell it ("mask", "class_index", ...).
const char *roleName(InputRole role);

struct ArgumentRole {
  InputRole role = InputRole::Real;
  int64_t classes = 0;         ///< ClassIndex: the C of the logits (the smallest, if several)
  std::vector<int64_t> labels; ///< Label: the values drawn (uniformly)
};

struct RoleOptions {
  /// linear_argmax's input drawn N(0, 1) (role Ties) instead of from its labels: no value is
  /// a label, so every voxel is a tie, which its tie rule must break alike on both sides.
  /// cuda-check compares two backends of ours bit for bit and wants that; medcheck compares
  /// with torch's argmax on real labels.
  bool labelTies = false;
};

/// The role of each argument of `fn`, by the rules of InputRoles.cpp: by the ops that read it
/// (a fusion's inputs by its body's ops), else by the input names medc gives a training step
/// (`lr`, `step`, `ema_decay`, `rng`). An integer argument that an operand which may hold labels
/// reads (the op table's `label`: mirror, a resampling, ...) gets object ids, one that no op
/// reads any values; an integer argument read by an op that gives it no role is an Error.
std::vector<ArgumentRole> argumentRoles(const Function &fn, const RoleOptions &options = {});

/// A tensor of `info`'s type and shape with values of `role`.
Tensor randomInput(const ValueInfo &info, const ArgumentRole &role, std::mt19937_64 &rng);

/// A seed per (seed, function, argument), so that which functions are checked, and in which
/// order, changes no function's inputs.
uint64_t inputSeed(uint64_t seed, const std::string &function, size_t argument);

/// Fills the undefined tensors of `inputs` (one per argument of `fn`; empty: all of them)
/// with randomInput(), each argument from its own inputSeed(); only those need a role.
void randomInputs(const Function &fn, std::vector<Tensor> &inputs, uint64_t seed,
                  const RoleOptions &options = {});

} // namespace medrun

#endif // MEDRUN_INPUTROLES_H
