//===- RecipeRules.h - the value rules of a training recipe, for medc and medrun ---===//
//
// The ranges and names a recipe's values must respect. `medc recipe` and
// `medc compile --recipe` check a YAML recipe with them (tools/medc/Recipe.cpp); `medrun
// train` checks an effective recipe (JSON) with them too, since a machine without the
// compiler trains one (RecipeCheck.h). Plain data with no dependencies: the compiler
// includes this header without linking the runtime.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_RECIPERULES_H
#define MEDRUN_RECIPERULES_H

#include <cstdint>
#include <limits>

namespace medrun::recipe {

/// A number's range: lo <= v (lo < v if loOpen), v <= hi (v < hi if hiOpen). A list key
/// (optimizer.betas) applies it to each element. `rule` says it in words for messages
/// ("KEY must be RULE", "KEY must each be RULE").
struct Range {
  const char *section; ///< "" for a top-level value (clip_grad_norm)
  const char *key;
  double lo, hi;
  bool loOpen, hiOpen;
  const char *rule;
};

inline constexpr double kInf = std::numeric_limits<double>::infinity();

inline constexpr Range kRanges[] = {
    {"ema", "decay", 0, 1, false, false, "in [0, 1]"},
    {"optimizer", "betas", 0, 1, false, true, "in [0, 1)"},
    {"optimizer", "eps", 0, kInf, true, true, "> 0"},
    {"optimizer", "weight_decay", 0, kInf, false, true, ">= 0"},
    {"optimizer", "momentum", 0, 1, false, true, "in [0, 1)"},
    {"optimizer", "lr", 0, kInf, true, true, "> 0"},
    {"", "clip_grad_norm", 0, kInf, true, true, "> 0"},
    {"loss", "max_pos_weight", 0, kInf, true, true, "> 0"},
    {"loss", "weights", 0, kInf, false, true, ">= 0"},
    {"data", "foreground", 0, 1, false, false, "in [0, 1]"},
    {"data", "val_fraction", 0, 1, false, true, "in [0, 1)"},
    {"schedule", "warmup_start_factor", 0, 1, false, false, "in [0, 1]"},
    {"schedule", "min_lr", 0, kInf, false, true, ">= 0"},
    {"schedule", "power", 0, kInf, true, true, "> 0"},
    {"validation", "overlap", 0, 1, false, true, "in [0, 1)"},
};

inline bool inRange(const Range &r, double v) {
  return (r.loOpen ? v > r.lo : v >= r.lo) && (r.hiOpen ? v < r.hi : v <= r.hi);
}

inline constexpr const char *kLossTypes[] = {"bce_with_logits", "dice_ce"};
inline constexpr const char *kOptimizerTypes[] = {"adamw", "sgd"};
inline constexpr const char *kScheduleTypes[] = {"constant", "cosine", "poly", "linear"};
/// data.source: the embedded volumes, volume files listed in the recipe, an nnU-Net raw
/// dataset folder (Dataset.h).
inline constexpr const char *kDataSources[] = {"synthetic", "files", "nnunet"};
inline constexpr const char *kNormalizations[] = {"auto", "none", "divide255", "zscore", "ct"};

/// data.batch x the patch's voxels: at most 2^40. The plan addresses every tensor with
/// 64-bit offsets; a batch past this (its activations exceed 2^50 bytes) cannot be planned
/// and its sizes would overflow.
inline constexpr int64_t kMaxBatchVoxels = int64_t(1) << 40;

} // namespace medrun::recipe

#endif // MEDRUN_RECIPERULES_H
