//===- RecipeRules.h - the value rules of a training recipe, for medc and medrun ---===//
//
// One table of every recipe key the training loop reads: its type, its range (inside f32
// where the step uses it in f32) and the rules between keys. `medc recipe` and
// `medc compile --recipe` check a YAML recipe with it (tools/medc/Recipe.cpp); `medrun
// train` checks an effective recipe (JSON) with it too, since a machine without the
// compiler trains one (RecipeCheck.h). Plain C++ with no dependencies and no exceptions
// (src/recipe/RecipeRules.cpp, the library MedRecipeRules): both halves link it, so what
// `medc recipe` accepts `medrun train` accepts.
//
// Also the limits on a recipe file itself (size, nesting, string length), which both
// readers apply before parsing or while they parse.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_RECIPERULES_H
#define MEDRUN_RECIPERULES_H

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace medrun::recipe {

/// A recipe value as either reader holds it (medc: llvm::json, medrun: nlohmann::json).
struct Value {
  enum Kind { Missing, Int, Real, Bool, String, List, Other } kind = Missing;
  int64_t i = 0;  ///< Int
  double d = 0;   ///< Int and Real (an Int's value as a double too)
  bool b = false; ///< Bool
  std::string s;  ///< String; for Other, how the reader prints it (cut short)
  std::vector<Value> list;
};

/// What a reader gives the rules: the value of a key, Missing when absent. `section` is ""
/// for a top-level key (clip_grad_norm).
class Source {
public:
  virtual ~Source() = default;
  virtual Value get(const char *section, const char *key) const = 0;
};

enum class Type {
  Word,  ///< a string
  Int,   ///< an integer in [lo, hi]
  Real,  ///< a finite number in the range
  Bool,
  Size3, ///< three integers, each in [lo, hi]
  Reals, ///< a list of finite numbers, each in the range (count elements if count > 0)
  Words, ///< a list of strings
  Fold,  ///< an integer >= 0 or "all"
};

/// One key. Reals: lo <= v (lo < v if loOpen), v <= hi (v < hi if hiOpen); with `f32`
/// the value is also one f32 holds (|v| <= FLT_MAX, and a nonzero |v| >= FLT_MIN, the
/// smallest normal: below it the step's f32 arithmetic loses it). Ints: lo <= v <= hi.
/// `names`: the words a Word may be (nullptr: any).
struct Rule {
  const char *section; ///< "" for a top-level value
  const char *key;
  Type type;
  bool required; ///< in an effective recipe (medc fills it in)
  double lo, hi;
  bool loOpen, hiOpen;
  bool f32;
  int count;                 ///< Reals: the number of elements (0: any)
  const char *const *names;  ///< Word: the valid words, nullptr-terminated
};

/// The table, in the order the keys are checked.
const std::vector<Rule> &rules();

/// "KEY" or "SECTION.KEY".
std::string keyName(const Rule &rule);
/// The rule in words: "an integer in 1..256", "a number > 0 that f32 holds (at most
/// 3.4028235e+38)", "one of adamw, sgd".
std::string describe(const Rule &rule);
/// A value as the messages print it: 1e+300, [0.9, 1], "cosin".
std::string show(const Value &v);

/// Checks every rule of the table and the rules between keys; the first broken one as
/// "KEY: expected RULE, got VALUE" (a type) or "KEY must be RULE, got VALUE" (a range),
/// or "" when the recipe keeps them all. Both readers prefix the file. With
/// `requireAll`, a missing required key is broken too (medrun: an effective recipe has
/// them all; medc compiles recipes without optimizer.lr, which `medc recipe` requires).
std::string check(const Source &recipe, bool requireAll = true);

/// The names a Word may be, as lists (for medc's suggestions).
inline constexpr const char *kLossTypes[] = {"bce_with_logits", "dice_ce", nullptr};
inline constexpr const char *kOptimizerTypes[] = {"adamw", "sgd", nullptr};
inline constexpr const char *kScheduleTypes[] = {"constant", "cosine", "poly", "linear", nullptr};
/// data.source: the embedded volumes, volume files listed in the recipe, an nnU-Net raw
/// dataset folder (Dataset.h).
inline constexpr const char *kDataSources[] = {"synthetic", "files", "nnunet", nullptr};
inline constexpr const char *kNormalizations[] = {"auto", "none", "divide255", "zscore", "ct",
                                                  nullptr};
inline constexpr const char *kNanPolicies[] = {"stop", "skip", nullptr};
inline constexpr const char *kDevices[] = {"cpu", "cuda", "auto", nullptr};
inline constexpr const char *kPrecisions[] = {"fp32", "bf16-mixed", "fp16-mixed", nullptr};

/// The data loader's and the synthetic volumes' limits (DataLoader.cpp, SyntheticData.cpp
/// check their specs against the same numbers).
inline constexpr int64_t kMaxBatch = 4096, kMaxPatch = 1024, kMaxWorkers = 256,
                         kMaxPrefetch = 1024, kMaxVolumeSize = 2048, kMaxVolumes = 1000000;

/// data.batch x the patch's voxels: at most 2^40. The plan addresses every tensor with
/// 64-bit offsets; a batch past this (its activations exceed 2^50 bytes) cannot be planned
/// and its sizes would overflow.
inline constexpr int64_t kMaxBatchVoxels = int64_t(1) << 40;

/// A recipe file: a regular file of at most this many bytes (16 MiB: lists of a dataset's
/// volume files fit; a recipe is a few KB), values nested at most kMaxDepth deep (sections,
/// lists of lists: a recipe needs 5), strings (keys, words, paths) at most kMaxString bytes.
inline constexpr uint64_t kMaxFileBytes = uint64_t(16) << 20;
inline constexpr int kMaxDepth = 16;
inline constexpr size_t kMaxString = 4096;

/// Whether `path` may be read as a recipe: "" if so, else why not ("not a regular file
/// (a directory)", "48 MiB, over the 16 MiB limit of a recipe"). Follows links.
std::string checkFile(const std::string &path);

} // namespace medrun::recipe

#endif // MEDRUN_RECIPERULES_H
