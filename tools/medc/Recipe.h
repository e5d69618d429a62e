//===- Recipe.h - training recipes (configs/*.yaml) as medc sees them -----------===//
//
// A recipe names the model file, the batch and patch, the loss, the optimizer, clipping,
// EMA and precision. medc turns these into the options of med-add-loss and med-train-step;
// the sections the runtime owns (schedule, train, ...) are checked for typos only.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDC_RECIPE_H
#define MEDC_RECIPE_H

#include "llvm/Support/Error.h"

#include <array>
#include <string>

namespace medc {

struct Recipe {
  std::string model;   ///< model file, resolved relative to the recipe's folder
  std::string network; ///< network function ("" = the model file's only public function)
  int64_t batch = 2;
  std::array<int64_t, 3> patch = {128, 128, 128};
  std::string lossOptions;  ///< med-add-loss options
  std::string trainOptions; ///< med-train-step options
};

/// Reads a recipe. Errors name the file, the key (with the nearest valid key for a typo)
/// and what was expected.
llvm::Expected<Recipe> readRecipe(const std::string &path);

} // namespace medc

#endif // MEDC_RECIPE_H
