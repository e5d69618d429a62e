//===- Recipe.h - training recipes (configs/*.yaml) ------------------------------===//
//
// A recipe names the model file, the batch and patch, the loss, the optimizer, clipping,
// EMA and precision, and the settings of the training loop (data, train, checkpoint,
// logging, schedule). medc owns the whole schema: it turns the compile-time sections into
// the options of med-add-loss and med-train-step, checks every other key, fills in the
// defaults, and prints the effective recipe as JSON for `medrun train` (`medc recipe`).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDC_RECIPE_H
#define MEDC_RECIPE_H

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <array>
#include <string>
#include <vector>

namespace medc {

struct Recipe {
  std::string model;   ///< model file, resolved relative to the recipe's folder
  std::string network; ///< network function ("" = the model file's only public function)
  int64_t batch = 2;
  std::array<int64_t, 3> patch = {128, 128, 128};
  /// `augment.pipeline`: the augmentation pipeline's file (resolved; "" = none), and
  /// `augment.function`, its function that train_step runs first.
  std::string augment, augmentFunction;
  std::string lossOptions;  ///< med-add-loss options
  std::string trainOptions; ///< med-train-step options
  /// `recompute_mlp`: run med-form-mlp-fusions (the block MLP fused, its expansion
  /// recomputed in the backward: less memory, slower today).
  bool recomputeMlp = false;
  /// `memory_budget_gib`: the planned peak med-recompute must reach (0: no budget).
  double memoryBudgetGib = 0;
  /// Every section with the defaults filled in; numbers, booleans and words typed.
  llvm::json::Object effective;
};

/// Reads a recipe and applies `overrides` ("section.key=value"; a list as [a,b,c] or
/// a,b,c). Errors name the file or the override, the key (with the nearest valid key for a
/// typo) and what was expected.
llvm::Expected<Recipe> readRecipe(const std::string &path,
                                  const std::vector<std::string> &overrides = {});

} // namespace medc

#endif // MEDC_RECIPE_H
