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
#include <optional>
#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace medc {

/// One of `augment.overrides`: a tunable parameter of the pipeline (its `med.param` name)
/// and its value, one number or a range [lo, hi] (tools/medc/AugmentOverrides.h).
struct AugmentOverride {
  std::string name;
  std::vector<double> values;
};

struct Recipe {
  std::string model;   ///< model file, resolved relative to the recipe's folder
  std::string network; ///< network function ("" = the model file's only public function)
  /// `model.dropout`: every dropout layer's rate, 0 for none (med::applyDropoutRate); unset:
  /// the rates the model holds.
  std::optional<double> dropout;
  int64_t batch = 2;
  std::array<int64_t, 3> patch = {128, 128, 128};
  /// `augment.pipeline`: the augmentation pipeline's file (resolved; "" = none or
  /// generated), and `augment.function`, its function that train_step runs first.
  std::string augment, augmentFunction;
  /// `augment.pipeline: nnunet` or `banis`: the pipeline scripts/gen_augment.py writes for
  /// the compiled batch and patch ("" = a file or none); medc runs the generator when it
  /// links the pipeline.
  std::string augmentGenerated;
  /// The generator's sizes: `augment.channels`, `classes`, `levels` (nnunet; 0 = the
  /// network's input channels, output channels and number of outputs) and `context`
  /// (banis; 0 = 10, BANIS's long-range affinity offset).
  int64_t augmentChannels = 0, augmentClasses = 0, augmentLevels = 0, augmentContext = 0;
  /// `loss.affinities.offsets` of an affinity loss (bce_with_logits): one (D, H, W) offset
  /// per affinity channel, the affinity at v pairing v with v + offset (med.affinities);
  /// default BANIS's six, 1 and augment.context (10) along each axis. Empty for other losses.
  std::vector<std::array<int64_t, 3>> affinityOffsets;
  /// Whether the recipe (or --set) gives them: then the network's output channels must be
  /// one per offset, and the targets are made on the device (with no augmentation, by the
  /// generated `affinities` pipeline: the label path alone).
  bool affinityOffsetsGiven = false;
  /// `augment.overrides`, by name: medc sets the pipeline's marked values from them when it
  /// links the pipeline (names and kinds are checked there, against the file).
  std::vector<AugmentOverride> augmentOverrides;
  /// The overrides as canonical text (name=value,... a line each; "" for none), for the
  /// compile hash.
  std::string augmentOverridesKey;
  std::string lossOptions;  ///< med-add-loss options
  std::string trainOptions; ///< med-train-step options
  /// `recompute_mlp`: run med-form-mlp-fusions (the block MLP fused, its expansion
  /// recomputed in the backward: less memory, slower today).
  bool recomputeMlp = false;
  /// `memory_budget_gib`: the planned peak med-recompute must reach (0: no budget).
  double memoryBudgetGib = 0;
  /// `recompute_above_gib`: without a budget, med-recompute recomputes only a step planned
  /// above this (0: always).
  double recomputeAboveGib = 16;
  /// Every section with the defaults filled in; numbers, booleans and words typed.
  llvm::json::Object effective;
};

/// Reads a recipe and applies `overrides` ("section.key=value"; a list as [a,b,c] or
/// a,b,c). Errors name the file or the override, the key (with the nearest valid key for a
/// typo) and what was expected.
llvm::Expected<Recipe> readRecipe(const std::string &path,
                                  const std::vector<std::string> &overrides = {});

/// The pipelines scripts/gen_augment.py writes for a recipe (`augment.pipeline: NAME`).
inline constexpr const char *kGeneratedPipelines[] = {"nnunet", "banis", "affinities"};
bool isGeneratedPipeline(llvm::StringRef name);

/// The generator of those pipelines: $MEDC_AUGMENT_GENERATOR, else the source tree's
/// scripts/gen_augment.py (this medc's build), run by the build's Python.
std::string augmentGenerator();

/// What the generator needs for one pipeline: its name, the batch and patch, and the sizes
/// of Recipe (resolved: none 0).
struct AugmentRequest {
  std::string pipeline;
  int64_t batch = 0;
  std::array<int64_t, 3> patch{};
  int64_t channels = 0, classes = 0, levels = 0, context = 0;
  /// banis and affinities: the affinities' offsets (Recipe::affinityOffsets).
  std::vector<std::array<int64_t, 3>> offsets;
};

/// The generator's arguments for `request` (after the script's path).
std::vector<std::string> augmentGeneratorArgs(const AugmentRequest &request);

/// Runs the generator and returns the pipeline's text; an error names the recipe, the
/// generator and its message.
llvm::Expected<std::string> generateAugmentPipeline(const AugmentRequest &request,
                                                    llvm::StringRef recipeFile);

/// Sets the values of an augmentation pipeline's tunable parameters (marked by
/// scripts/gen_augment.py: `med.param`, `med.param_part`) from `overrides`
/// (tools/medc/AugmentOverrides.cpp). An unknown name is an error that lists the pipeline's
/// names; a value of the wrong kind, a probability outside [0, 1], a negative number or a
/// range with lo > hi is an error naming the recipe, the key (augment.overrides.NAME) and
/// what was expected.
llvm::Error applyAugmentOverrides(mlir::ModuleOp pipeline,
                                  const std::vector<AugmentOverride> &overrides,
                                  llvm::StringRef recipeFile, llvm::StringRef pipelineFile);

} // namespace medc

#endif // MEDC_RECIPE_H
