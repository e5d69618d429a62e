//===- FuzzRecipe.cpp - medc's recipe parser under libFuzzer --------------------===//
//
// A recipe either parses or gives an llvm::Error; the model file it names need not exist.
//
//===----------------------------------------------------------------------------------===//
#include "FuzzInput.h"

#include "../../tools/medc/Recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::Expected<medc::Recipe> r = medc::readRecipe(fuzzInputFile(data, size, ".yaml"), {});
  if (!r)
    llvm::consumeError(r.takeError());
  return 0;
}
