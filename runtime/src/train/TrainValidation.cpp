//===- TrainValidation.cpp - validation during a training run ----------------------===//
#include "TrainRun.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace medrun::training {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

// The curves of progress.png from the log of a resumed run (what precedes the resumed step).
ProgressHistory readHistory(const std::string &path) {
  ProgressHistory h;
  std::ifstream in(path);
  std::string line;
  auto number = [](const json &j, const char *key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : std::nan("");
  };
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer())
      continue;
    const int64_t step = j["step"].get<int64_t>();
    if (j.contains("val_dice")) {
      h.dice.push_back({step, number(j, "val_dice")});
      h.diceEma.push_back({step, number(j, "val_dice_ema")});
    } else if (!j.contains("skipped")) {
      h.loss.push_back({step, number(j, "loss")});
      h.stepTime.push_back({step, number(j, "step_time")});
      h.lr.push_back({step, number(j, "lr")});
    }
  }
  return h;
}

// How the validator windows and scores: the `infer` function's window and classes, the
// recipe's validation keys, and dataset.json's class names when its labels are the
// network's classes 0..C-1.
ValidationOptions validationOptions(const Function &inferFn, const json &config,
                                    const DataContract &contract) {
  const json &validationConfig = section(config, "validation");
  const Shape &in = inferFn.values[inferFn.inputs.at(0)].shape;
  const Shape &out = inferFn.values[inferFn.outputs.at(0)].shape;
  ValidationOptions vo;
  vo.affinities = setting<std::string>(config, "loss", "type") == "bce_with_logits";
  // Offsets other than BANIS's six (the volumes' own targets): the validator makes them.
  const json &loss = section(config, "loss");
  if (vo.affinities && loss.contains("affinities")) {
    for (const json &o : loss["affinities"]["offsets"])
      vo.offsets.push_back({o[0].get<int64_t>(), o[1].get<int64_t>(), o[2].get<int64_t>()});
    if (std::equal(vo.offsets.begin(), vo.offsets.end(), banisOffsets().begin(), banisOffsets().end()))
      vo.offsets.clear();
  }
  if (auto box = validationConfig.find("box"); box != validationConfig.end())
    vo.box = size3(config, "validation", "box");
  vo.window.window = {in.at(2), in.at(3), in.at(4)};
  vo.window.batch = in.at(0);
  vo.window.overlap = validationConfig.value("overlap", 0.5);
  vo.window.mirror = validationConfig.value("mirror", false);
  if (!vo.affinities && static_cast<int64_t>(contract.labels.size()) == out.at(1)) {
    bool consecutive = true;
    for (size_t k = 0; k < contract.labels.size(); ++k)
      consecutive = consecutive && contract.labels[k].second == static_cast<int64_t>(k);
    if (consecutive)
      for (size_t k = 1; k < contract.labels.size(); ++k)
        vo.classNames.push_back(contract.labels[k].first);
  }
  vo.ignoreLabel = contract.ignoreLabel;
  return vo;
}

ojson numberOrNull(double v) { return std::isfinite(v) ? ojson(v) : ojson(nullptr); }
ojson numberOrNull(const std::optional<double> &v) { return v ? ojson(*v) : ojson(nullptr); }

} // namespace

RunValidation::RunValidation(const Artifact &artifact, const StepInputs &feed, const json &config,
                             std::shared_ptr<const PatchSource> source,
                             const DataContract &contract, int64_t every,
                             const TrainOptions &options, bool lead, const Json &resumed,
                             const RunLogs &logs, bool resuming, Progress &progress,
                             Progress::Mode progressMode, FILE *console)
    : emaWeights_(feed.input("ema_decay") >= 0), every_(every), lead_(lead), progress_(progress),
      progressMode_(progressMode), console_(console),
      plotPath_((fs::path(options.out) / "progress.png").string()) {
  if (std::none_of(artifact.functions.begin(), artifact.functions.end(),
                   [](const Function &f) { return f.name == "infer"; }))
    throw Error(str(artifact.path, ": has no function 'infer' to validate with (compile the "
                                   "recipe with medc compile --recipe)"));
  inferFn_ = &artifact.function("infer");
  for (const OpInfo &op : inferFn_->ops)
    if (op.kind == "param")
      inferParams_.push_back(op.strAttr("name"));
  const int64_t channels = inferFn_->values[inferFn_->outputs.at(0)].shape.at(1);
  const auto volumes = source->size();
  validator_ = std::make_unique<Validator>(std::move(source), channels,
                                           validationOptions(*inferFn_, config, contract));
  progress.message(str("validation: every ", every, " steps and at the end, ",
                       volumes, " volume(s), ", validator_->batches(),
                       " window batches, ", emaWeights_ ? "EMA" : "model",
                       " weights; the Dice chooses checkpoints/best",
                       progressPlotSupported() ? "; progress.png"
                                               : "; no progress.png (medrun was built without "
                                                 "libpng-dev or libcairo2-dev)"));
  if (resumed.is_object()) {
    if (resumed.value("best", Json()).is_number()) {
      best_ = resumed["best"].get<double>();
      bestStep_ = resumed.value("best_step", int64_t(0));
    }
    if (resumed.value("dice_ema", Json()).is_number())
      diceEma_ = resumed["dice_ema"].get<double>();
  }
  if (resuming && logs.metrics)
    history_ = readHistory(logs.metrics->path());
}

void RunValidation::run(int64_t step, const TensorMap &state, TrainBackend &backend,
                        RunLogs &logs) {
  const double start = seconds();
  TensorMap weights;
  for (const std::string &name : inferParams_) { // a frozen parameter has no EMA copy
    auto ema = emaWeights_ ? state.find("ema." + name) : state.end();
    weights[name] = ema != state.end() ? ema->second : state.at(name);
  }
  const WindowPredictor predict = backend.predictor(*inferFn_, weights);
  Progress::Options vpo;
  vpo.total = validator_->batches();
  vpo.desc = "validate";
  vpo.mode = progressMode_;
  ValidationResult r;
  {
    Progress bar(console_, vpo);
    r = validator_->run(predict, [&](int64_t done, int64_t) { bar.update(done); });
  }
  const double elapsed = seconds() - start;
  validated_ = r.dice;
  std::string classes;
  ojson perClass = ojson::object();
  std::vector<std::pair<std::string, double>> scalars = {{"val/dice", r.dice}};
  for (size_t c = 0; c < r.names.size(); ++c) {
    perClass[r.names[c]] = numberOrNull(r.perClass[c]);
    scalars.push_back({"val/dice/" + r.names[c], r.perClass[c]});
    classes += str(c ? ", " : "", r.names[c], " ", fmtNumber(r.perClass[c]));
  }
  if (std::isfinite(r.dice)) {
    diceEma_ = diceEma_ ? 0.9 * *diceEma_ + 0.1 * r.dice : r.dice;
    if (!best_ || r.dice > *best_) { // ties keep the earlier step
      best_ = r.dice;
      bestStep_ = step + 1;
    }
  }
  if (diceEma_)
    scalars.push_back({"val/dice_ema", *diceEma_});
  ojson record = {{"step", step},
                  {"val_dice", numberOrNull(r.dice)},
                  {"val_dice_ema", numberOrNull(diceEma_)},
                  {"val_dice_per_class", perClass},
                  {"val_best", numberOrNull(best_)},
                  {"val_volumes", r.volumes},
                  {"val_time", elapsed}};
  if (logs.metrics)
    logs.metrics->write(record);
  if (logs.board)
    logs.board->addScalars(step, scalars);
  progress_.message(str("validation after step ", step + 1, ": Dice ", fmtNumber(r.dice), " (",
                        classes, "), moving average ", diceEma_ ? fmtNumber(*diceEma_) : "-",
                        "; best ", best_ ? fmtNumber(*best_) : "-", " after step ", bestStep_,
                        " (", r.volumes, " volume(s), ", r.voxels, " voxels, ",
                        Progress::formatInterval(elapsed), ")"));
  history_.dice.push_back({step, r.dice});
  history_.diceEma.push_back({step, diceEma_ ? *diceEma_ : std::nan("")});
  if (lead_ && progressPlotSupported()) {
    try {
      writePng(plotPath_, drawProgress(history_));
    } catch (const Error &e) {
      progress_.message(str("medrun: warning: ", e.what()));
    }
  }
}

Json RunValidation::stateJson() const {
  if (!best_ && !diceEma_)
    return nullptr;
  Json v = {{"metric", "val_dice"}};
  if (best_) {
    v["best"] = *best_;
    v["best_step"] = bestStep_;
  }
  if (diceEma_)
    v["dice_ema"] = *diceEma_;
  return v;
}

} // namespace medrun::training
