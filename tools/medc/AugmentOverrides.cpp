//===- AugmentOverrides.cpp - a recipe's values for an augmentation pipeline -----===//
//
// scripts/gen_augment.py marks each tunable value of a pipeline file with its parameter's
// name: `med.param = "NAME"` on the bernoulli `med.random` of a probability, and on each
// `med.constant` holding a part of a number or range, with `med.param_part` naming the part.
// The parts a name has give its kind:
//
//   p                                      a probability in [0, 1] (`probability`)
//   value                                  a number >= 0
//   width, lo                              a range [lo, hi], lo <= hi: U(lo, hi) drawn as
//                                          u·(hi − lo) + lo (width = hi − lo)
//   low.width, low.lo, high.width, high.lo BGContrast's split range [lo, hi], lo <= hi: the
//                                          two ranges it mixes, U(lo, 1) and U(1, hi) for
//                                          lo < 1, else U(lo, hi) both
//
// A recipe's `augment.overrides` sets them by name when medc links the pipeline; the values
// are those `gen_augment.py --set NAME=VALUE` writes (double arithmetic, then rounded to the
// constant's type), so both give the same module (docs/augment.md).
//
//===----------------------------------------------------------------------------------===//
#include "Recipe.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

using namespace mlir;

namespace medc {
namespace {

struct Site {
  Operation *op;
  std::string part;
};

// The sites of each name, in program order.
std::map<std::string, std::vector<Site>> collectSites(ModuleOp pipeline) {
  std::map<std::string, std::vector<Site>> sites;
  pipeline.walk([&](Operation *op) {
    auto name = op->getAttrOfType<StringAttr>("med.param");
    if (!name)
      return;
    auto part = op->getAttrOfType<StringAttr>("med.param_part");
    sites[name.str()].push_back({op, part ? part.str() : std::string("p")});
  });
  return sites;
}

llvm::Error failure(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

// The kind a name's parts make, checking that each part sits on an op that can hold it.
llvm::Expected<std::string> kindOf(const std::string &name, const std::vector<Site> &sites,
                                   llvm::StringRef file) {
  std::set<std::string> parts;
  for (const Site &s : sites) {
    llvm::StringRef op = s.op->getName().getStringRef();
    bool ok = s.part == "p" ? op == "med.random"
                            : op == "med.constant" && s.op->getNumResults() == 1 &&
                                  llvm::isa<FloatType>(getElementTypeOrSelf(s.op->getResult(0)));
    if (!ok)
      return failure(file + ": parameter '" + name + "': its part '" + s.part +
                     "' is marked on '" + op +
                     "' (a probability on med.random, other parts on a float med.constant; "
                     "regenerate the file with scripts/gen_augment.py)");
    parts.insert(s.part);
  }
  using Parts = std::set<std::string>;
  if (parts == Parts{"p"})
    return std::string("p");
  if (parts == Parts{"value"})
    return std::string("value");
  if (parts == Parts{"width", "lo"})
    return std::string("range");
  if (parts == Parts{"low.width", "low.lo", "high.width", "high.lo"})
    return std::string("split");
  return failure(file + ": parameter '" + name + "' has the parts " +
                 llvm::join(parts.begin(), parts.end(), ", ") +
                 ", which make no kind (p; value; width, lo; low.width, low.lo, high.width, "
                 "high.lo)");
}

std::string number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

std::string shown(const std::vector<double> &values) {
  if (values.size() == 1)
    return number(values[0]);
  std::vector<std::string> parts;
  for (double v : values)
    parts.push_back(number(v));
  return "[" + llvm::join(parts, ", ") + "]";
}

// The constant's value `v`: the double rounded to the element type, as the parser rounds
// the literal gen_augment.py writes.
void setConstant(Operation *op, double v) {
  auto type = llvm::cast<ShapedType>(op->getResult(0).getType());
  llvm::APFloat f(v);
  bool losesInfo;
  f.convert(llvm::cast<FloatType>(type.getElementType()).getFloatSemantics(),
            llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  op->setAttr("value", DenseElementsAttr::get(type, llvm::ArrayRef<llvm::APFloat>(f)));
}

} // namespace

llvm::Error applyAugmentOverrides(ModuleOp pipeline, const std::vector<AugmentOverride> &overrides,
                                  llvm::StringRef recipeFile, llvm::StringRef pipelineFile) {
  if (overrides.empty())
    return llvm::Error::success();
  std::map<std::string, std::vector<Site>> sites = collectSites(pipeline);
  std::vector<std::string> names;
  for (auto &entry : sites)
    names.push_back(entry.first);
  for (const AugmentOverride &o : overrides) {
    std::string key = "augment.overrides." + o.name;
    auto found = sites.find(o.name);
    if (found == sites.end())
      return failure(recipeFile + ": " + key + ": unknown parameter of the pipeline " +
                     pipelineFile + " (its parameters: " +
                     (names.empty() ? std::string("none; regenerate it with scripts/gen_augment.py")
                                    : llvm::join(names, ", ")) +
                     ")");
    llvm::Expected<std::string> kind = kindOf(o.name, found->second, pipelineFile);
    if (!kind)
      return kind.takeError();
    const std::vector<double> &v = o.values;
    auto wrong = [&](const llvm::Twine &expected) {
      return failure(recipeFile + ": " + key + ": expected " + expected + ", got " + shown(v));
    };
    for (double x : v)
      if (!std::isfinite(x))
        return wrong("finite numbers");
    if (*kind == "p" || *kind == "value") {
      const char *what = *kind == "p" ? "a probability in [0, 1]" : "a number >= 0";
      if (v.size() != 1)
        return wrong(llvm::Twine(what) + " (one number, not a list)");
      if (*kind == "p" ? !(v[0] >= 0 && v[0] <= 1) : !(v[0] >= 0))
        return wrong(what);
      for (const Site &s : found->second) {
        if (*kind == "p")
          s.op->setAttr("probability",
                        FloatAttr::get(Float64Type::get(s.op->getContext()), v[0]));
        else
          setConstant(s.op, v[0]);
      }
      continue;
    }
    const char *what = *kind == "range" ? "a range [lo, hi]" : "a split range [lo, hi]";
    if (v.size() != 2)
      return wrong(llvm::Twine(what) + " (two numbers)");
    if (v[0] > v[1])
      return wrong(llvm::Twine(what) + " with lo <= hi");
    double lo = v[0], hi = v[1];
    // The parts' values, as gen_augment.py computes them (uniform_param, split_parts).
    std::map<std::string, double> values;
    if (*kind == "range") {
      values = {{"width", hi - lo}, {"lo", lo}};
    } else if (lo < 1.0) {
      values = {{"low.width", 1.0 - lo}, {"low.lo", lo}, {"high.width", hi - 1.0}, {"high.lo", 1.0}};
    } else {
      values = {{"low.width", hi - lo}, {"low.lo", lo}, {"high.width", hi - lo}, {"high.lo", lo}};
    }
    for (const Site &s : found->second)
      setConstant(s.op, values.at(s.part));
  }
  return llvm::Error::success();
}

} // namespace medc
