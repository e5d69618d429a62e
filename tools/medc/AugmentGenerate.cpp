//===- AugmentGenerate.cpp - pipelines generated for a recipe's batch and patch ----===//
//
// `augment: {pipeline: nnunet}` (or `banis`) in a recipe: medc runs scripts/gen_augment.py
// for the batch and patch it compiles (nnU-Net's initial patch, its dummy-2D rule and the
// deep-supervision sizes follow from the patch), so a recipe at any patch and batch gets its
// pipeline without a file per size. One generator writes both these and the checked-in
// models/augment_*.mlir; the compile hash holds the generator's text and the request, so a
// changed generator recompiles a cached recipe (medc.cpp, compileHash).
//
//===----------------------------------------------------------------------------------===//
#include "Recipe.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <cstdlib>
#include <optional>

using namespace llvm;

namespace medc {

bool isGeneratedPipeline(StringRef name) { return is_contained(kGeneratedPipelines, name); }

std::string augmentGenerator() {
  if (const char *env = std::getenv("MEDC_AUGMENT_GENERATOR"); env && *env)
    return env;
  return MEDC_AUGMENT_GENERATOR;
}

std::vector<std::string> augmentGeneratorArgs(const AugmentRequest &r) {
  std::vector<std::string> args = {r.pipeline, "--batch", std::to_string(r.batch), "--patch",
                                   join(map_range(r.patch, [](int64_t d) { return std::to_string(d); }), ",")};
  if (r.pipeline == "nnunet") {
    args.insert(args.end(), {"--channels", std::to_string(r.channels), "--classes",
                             std::to_string(r.classes), "--levels", std::to_string(r.levels)});
    return args;
  }
  const int64_t c = r.context;
  const std::vector<std::array<int64_t, 3>> six = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1},
                                                   {c, 0, 0}, {0, c, 0}, {0, 0, c}};
  if (r.pipeline == "banis" && (r.offsets.empty() || r.offsets == six)) {
    args.insert(args.end(), {"--context", std::to_string(c)}); // BANIS's six
    return args;
  }
  std::string offsets; // one argument: a leading '-' is no option
  for (const auto &o : r.offsets)
    offsets += (offsets.empty() ? "" : ";") + std::to_string(o[0]) + "," + std::to_string(o[1]) +
               "," + std::to_string(o[2]);
  args.push_back("--offsets=" + offsets);
  return args;
}

Expected<std::string> generateAugmentPipeline(const AugmentRequest &request, StringRef recipeFile) {
  const std::string script = augmentGenerator();
  auto fail = [&](const Twine &msg) {
    return createStringError(inconvertibleErrorCode(),
                             recipeFile + ": augment.pipeline " + request.pipeline + ": " + msg);
  };
  if (!sys::fs::is_regular_file(script))
    return fail("its generator '" + script +
                "' is missing (set MEDC_AUGMENT_GENERATOR to scripts/gen_augment.py, or give "
                "a pipeline file)");
  SmallString<128> out, err;
  if (std::error_code ec = sys::fs::createTemporaryFile("medc-augment", "mlir", out))
    return fail("cannot create a temporary file: " + ec.message());
  if (std::error_code ec = sys::fs::createTemporaryFile("medc-augment", "err", err)) {
    sys::fs::remove(out);
    return fail("cannot create a temporary file: " + ec.message());
  }
  std::vector<std::string> args = {MEDC_PYTHON, script};
  for (std::string &a : augmentGeneratorArgs(request))
    args.push_back(std::move(a));
  args.insert(args.end(), {"-o", out.str().str()});
  std::vector<StringRef> argv(args.begin(), args.end());
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(err), StringRef(err)};
  std::string why;
  int rc = sys::ExecuteAndWait(MEDC_PYTHON, argv, std::nullopt, redirects, 0, 0, &why);
  auto text = MemoryBuffer::getFile(out);
  auto message = MemoryBuffer::getFile(err);
  sys::fs::remove(out);
  sys::fs::remove(err);
  if (rc != 0 || !text) {
    std::string said = message ? StringRef((*message)->getBuffer()).trim().str() : "";
    return fail("'" + join(args.begin() + 1, args.end() - 2, " ") + "' failed" +
                (said.empty() ? (why.empty() ? "" : ": " + why) : ":\n" + said));
  }
  return (*text)->getBuffer().str();
}

} // namespace medc
