//===- RecipeCheck.h - checking an effective recipe (JSON) ---------------------------===//
//
// `medrun train` takes an effective recipe (the JSON `medc recipe` prints) from a machine
// without the compiler, possibly edited by hand. It is checked as medc checks a YAML recipe
// before any of it is used: the type, range and cross-key rules of RecipeRules.h (the
// table medc applies).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_RECIPECHECK_H
#define MEDRUN_RECIPECHECK_H

#include <nlohmann/json.hpp>

#include <string>

namespace medrun {

/// Throws Error naming `file`, the key and what was expected.
void checkEffectiveRecipe(const nlohmann::json &config, const std::string &file);

/// Reads an effective recipe within the limits of a recipe file (RecipeRules.h: a regular
/// file, its size, its nesting); throws Error naming `file` otherwise or when it is not a
/// JSON object with a train section.
nlohmann::json readEffectiveRecipe(const std::string &file);

} // namespace medrun

#endif // MEDRUN_RECIPECHECK_H
