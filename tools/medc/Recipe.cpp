//===- Recipe.cpp - training recipes (configs/*.yaml) as medc sees them ---------===//
#include "Recipe.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <map>
#include <vector>

using namespace llvm;

namespace medc {
namespace {

// A recipe as plain data: scalars, lists of scalars and one level of sections.
struct Node {
  std::string scalar;
  std::vector<std::string> list;
  std::map<std::string, Node> section;
  enum Kind { Scalar, List, Section } kind = Scalar;
};

struct Reader {
  std::string path;

  Error fail(const Twine &msg) const {
    return createStringError(inconvertibleErrorCode(), path + ": " + msg);
  }

  Expected<Node> convert(yaml::Node *n, StringRef where) {
    Node out;
    if (auto *s = dyn_cast_or_null<yaml::ScalarNode>(n)) {
      SmallString<32> storage;
      out.scalar = s->getValue(storage).str();
      return out;
    }
    if (auto *seq = dyn_cast_or_null<yaml::SequenceNode>(n)) {
      out.kind = Node::List;
      for (yaml::Node &e : *seq) {
        auto *s = dyn_cast<yaml::ScalarNode>(&e);
        if (!s)
          return fail(where + ": lists hold numbers or words only");
        SmallString<32> storage;
        out.list.push_back(s->getValue(storage).str());
      }
      return out;
    }
    if (auto *map = dyn_cast_or_null<yaml::MappingNode>(n)) {
      out.kind = Node::Section;
      for (yaml::KeyValueNode &kv : *map) {
        auto *key = dyn_cast_or_null<yaml::ScalarNode>(kv.getKey());
        if (!key)
          return fail(where + ": keys must be words");
        SmallString<32> storage;
        std::string name = key->getValue(storage).str();
        std::string inner = (where.empty() ? "" : where.str() + ".") + name;
        Expected<Node> value = convert(kv.getValue(), inner);
        if (!value)
          return value.takeError();
        if (!out.section.emplace(name, std::move(*value)).second)
          return fail("key '" + inner + "' appears twice");
      }
      return out;
    }
    return fail(where + ": empty value");
  }

  // Rejects keys outside `valid`, suggesting the nearest one.
  Error checkKeys(const Node &section, StringRef where, ArrayRef<StringRef> valid) {
    for (auto &[key, value] : section.section) {
      if (llvm::is_contained(valid, key))
        continue;
      StringRef best;
      unsigned bestDistance = ~0u;
      for (StringRef v : valid) {
        unsigned d = StringRef(key).edit_distance(v);
        if (d < bestDistance)
          best = v, bestDistance = d;
      }
      for (StringRef v : valid) { // a shared stem ("reduce" for "reduction") is close too
        size_t common = 0;
        while (common < key.size() && common < v.size() && key[common] == v[common])
          ++common;
        if (common >= 5)
          best = v, bestDistance = 0;
      }
      std::string hint = bestDistance <= std::max<size_t>(2, key.size() / 3)
                             ? " (did you mean '" + best.str() + "'?)"
                             : " (valid: " + join(valid, ", ") + ")";
      return fail("unknown key '" + (where.empty() ? "" : where.str() + ".") + key + "'" + hint);
    }
    return Error::success();
  }

  Expected<int64_t> integer(const Node &n, StringRef where, int64_t min) {
    int64_t v;
    if (n.kind != Node::Scalar || StringRef(n.scalar).getAsInteger(10, v) || v < min)
      return fail(where + ": expected an integer >= " + Twine(min) + ", got '" + n.scalar + "'");
    return v;
  }

  Error number(const Node &n, StringRef where) {
    double v;
    if (n.kind != Node::Scalar || StringRef(n.scalar).getAsDouble(v))
      return fail(where + ": expected a number, got '" + n.scalar + "'");
    return Error::success();
  }
};

// "weight_decay" -> "weight-decay", the spelling of pass options.
std::string optionName(StringRef key) {
  std::string s = key.str();
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

} // namespace

Expected<Recipe> readRecipe(const std::string &path) {
  Reader r{path};
  auto buffer = MemoryBuffer::getFile(path);
  if (!buffer)
    return r.fail("cannot read the recipe: " + buffer.getError().message());
  SourceMgr sm;
  std::string diagnostics;
  sm.setDiagHandler(
      [](const SMDiagnostic &d, void *context) {
        raw_string_ostream(*static_cast<std::string *>(context)) << d.getLineNo() << ":"
                                                                 << d.getColumnNo() << ": "
                                                                 << d.getMessage();
      },
      &diagnostics);
  yaml::Stream stream((*buffer)->getBuffer(), sm);
  yaml::document_iterator doc = stream.begin();
  if (doc == stream.end() || !doc->getRoot())
    return r.fail("empty recipe");
  Expected<Node> root = r.convert(doc->getRoot(), "");
  if (!diagnostics.empty())
    return r.fail("malformed YAML at " + diagnostics);
  if (!root)
    return root.takeError();
  if (root->kind != Node::Section)
    return r.fail("a recipe is a mapping of sections (model, data, loss, optimizer, ...)");

  static const StringRef kTop[] = {"model", "data",      "loss",  "optimizer", "clip_grad_norm",
                                   "ema",   "precision", "schedule", "train",  "checkpoint",
                                   "logging"};
  if (Error e = r.checkKeys(*root, "", kTop))
    return std::move(e);

  Recipe recipe;
  auto &top = root->section;
  // model: FILE, or {file: FILE, network: NAME}
  auto model = top.find("model");
  if (model == top.end())
    return r.fail("missing 'model' (the model file, e.g. model: ../models/mednext_l.mlir)");
  std::string modelFile;
  if (model->second.kind == Node::Scalar) {
    modelFile = model->second.scalar;
  } else {
    if (Error e = r.checkKeys(model->second, "model", {"file", "network"}))
      return std::move(e);
    auto file = model->second.section.find("file");
    if (file == model->second.section.end())
      return r.fail("missing 'model.file'");
    modelFile = file->second.scalar;
    if (auto net = model->second.section.find("network"); net != model->second.section.end())
      recipe.network = net->second.scalar;
  }
  SmallString<256> resolved(sys::path::parent_path(path));
  sys::path::append(resolved, modelFile);
  recipe.model = sys::path::is_absolute(modelFile) ? modelFile : std::string(resolved);

  if (auto data = top.find("data"); data != top.end()) {
    // Data keys other than batch and patch belong to the runtime's loader.
    if (auto b = data->second.section.find("batch"); b != data->second.section.end()) {
      Expected<int64_t> v = r.integer(b->second, "data.batch", 1);
      if (!v)
        return v.takeError();
      recipe.batch = *v;
    }
    if (auto p = data->second.section.find("patch"); p != data->second.section.end()) {
      if (p->second.kind != Node::List || p->second.list.size() != 3)
        return r.fail("data.patch: expected three sizes [D, H, W]");
      for (int i = 0; i < 3; ++i) {
        Node n;
        n.scalar = p->second.list[i];
        Expected<int64_t> v = r.integer(n, "data.patch", 1);
        if (!v)
          return v.takeError();
        recipe.patch[i] = *v;
      }
    }
  }

  std::vector<std::string> loss, train;
  auto loss_ = top.find("loss");
  if (loss_ == top.end() || loss_->second.kind != Node::Section)
    return r.fail("missing 'loss' section (e.g. loss: {type: bce_with_logits, mask: true})");
  if (Error e = r.checkKeys(loss_->second, "loss",
                            {"type", "mask", "reduction", "auto_pos_weight", "max_pos_weight",
                             "weights", "batch_dice", "include_background"}))
    return std::move(e);
  for (auto &[key, value] : loss_->second.section)
    loss.push_back(optionName(key) + "=" +
                   (value.kind == Node::List ? join(value.list, ",") : value.scalar));
  if (!recipe.network.empty())
    loss.push_back("network=" + recipe.network);

  auto opt = top.find("optimizer");
  if (opt == top.end() || opt->second.kind != Node::Section)
    return r.fail("missing 'optimizer' section (e.g. optimizer: {type: adamw, lr: 1.0e-3})");
  if (Error e = r.checkKeys(opt->second, "optimizer",
                            {"type", "lr", "betas", "eps", "weight_decay", "momentum",
                             "nesterov", "exempt_norm_bias"}))
    return std::move(e);
  for (auto &[key, value] : opt->second.section) {
    if (key == "lr") { // the schedule's base rate: an input of every step
      if (Error e = r.number(value, "optimizer.lr"))
        return std::move(e);
      continue;
    }
    if (key == "type") {
      train.push_back("optimizer=" + value.scalar);
    } else if (key == "betas") {
      if (value.kind != Node::List || value.list.size() != 2)
        return r.fail("optimizer.betas: expected two numbers [beta1, beta2]");
      train.push_back("beta1=" + value.list[0]);
      train.push_back("beta2=" + value.list[1]);
    } else {
      train.push_back(optionName(key) + "=" + value.scalar);
    }
  }
  if (auto clip = top.find("clip_grad_norm"); clip != top.end()) {
    if (Error e = r.number(clip->second, "clip_grad_norm"))
      return std::move(e);
    train.push_back("clip=" + clip->second.scalar);
  }
  if (auto ema = top.find("ema"); ema != top.end()) {
    if (Error e = r.checkKeys(ema->second, "ema", {"decay", "warmup_steps", "evaluate_with"}))
      return std::move(e);
    train.push_back("ema=true");
  }
  if (auto precision = top.find("precision"); precision != top.end() &&
                                              precision->second.scalar != "fp32")
    return r.fail("precision '" + precision->second.scalar +
                  "' is not available yet; use fp32 (bf16-mixed and fp16-mixed come with the "
                  "CUDA backend)");
  recipe.lossOptions = join(loss, " ");
  recipe.trainOptions = join(train, " ");
  return recipe;
}

} // namespace medc
