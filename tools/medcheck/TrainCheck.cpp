//===- TrainCheck.cpp - --train-steps: train_step against torch.optim -------------===//
//
// Ours runs train_step (the compiled step: forward, backward, clipping, optimizer, EMA, loss
// scaling) and torch runs autograd of the loss function's mapping, torch.optim and the EMA
// (and GradScaler, written out here, for fp16-mixed steps), from the same parameters on the
// same batch; after each step every scalar and state tensor is compared (AutocastCompare.cpp).
//
//===----------------------------------------------------------------------------------===//
#include "Check.h"

#include <torch/nn/utils/clip_grad.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <type_traits>

namespace medcheck {

/// The default tolerance of a precision: f32 and f64 compare against torch in the same
/// type; bf16 and f16 (mixed precision on our side, f32 in torch) compare how far the
/// rounding of activations moves a few training steps.
double defaultTolerance(medrun::Precision p) {
  switch (p) {
  case medrun::Precision::F32: return 1e-4;
  case medrun::Precision::F64: return 1e-10;
  case medrun::Precision::BF16: return kBF16Tolerance;
  case medrun::Precision::F16: return kF16Tolerance;
  }
  return 1e-4;
}

namespace {

/// The med-train-step options of the artifact (options["train"], "key=value ..."), with
/// the pass's defaults (include/med/Transforms/Passes.td).
struct TrainOptions {
  std::string loss = "loss";
  std::string optimizer = "adamw";
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 1e-2, momentum = 0, clip = 0;
  bool nesterov = false, exemptNormBias = false, ema = false;
  bool guardUpdate = false; ///< train_step reports a non-finite update (update_nonfinite)
  std::string precision = "fp32";
  // torch.amp.GradScaler's defaults
  double initScale = 65536, growthFactor = 2, backoffFactor = 0.5;
  int64_t growthInterval = 2000;
};

TrainOptions parseTrainOptions(const std::string &spec) {
  TrainOptions t;
  std::istringstream in(spec);
  std::string item;
  auto number = [](const std::string &key, const std::string &v) {
    char *end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0')
      throw Error(str("train option ", key, "='", v, "' is not a number"));
    return d;
  };
  auto boolean = [](const std::string &key, const std::string &v) {
    if (v == "true" || v == "1" || v.empty())
      return true;
    if (v == "false" || v == "0")
      return false;
    throw Error(str("train option ", key, "='", v, "' is not a boolean"));
  };
  while (in >> item) {
    size_t eq = item.find('=');
    std::string key = item.substr(0, eq), v = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
      v = v.substr(1, v.size() - 2);
    if (key == "loss")
      t.loss = v;
    else if (key == "optimizer")
      t.optimizer = v;
    else if (key == "beta1")
      t.beta1 = number(key, v);
    else if (key == "beta2")
      t.beta2 = number(key, v);
    else if (key == "eps")
      t.eps = number(key, v);
    else if (key == "weight-decay")
      t.weightDecay = number(key, v);
    else if (key == "momentum")
      t.momentum = number(key, v);
    else if (key == "clip")
      t.clip = number(key, v);
    else if (key == "nesterov")
      t.nesterov = boolean(key, v);
    else if (key == "exempt-norm-bias")
      t.exemptNormBias = boolean(key, v);
    else if (key == "ema")
      t.ema = boolean(key, v);
    else if (key == "guard-update")
      t.guardUpdate = boolean(key, v);
    else if (key == "precision")
      t.precision = v;
    else if (key == "init-scale")
      t.initScale = number(key, v);
    else if (key == "growth-factor")
      t.growthFactor = number(key, v);
    else if (key == "backoff-factor")
      t.backoffFactor = number(key, v);
    else if (key == "growth-interval")
      t.growthInterval = static_cast<int64_t>(number(key, v));
    else
      throw Error(str("unknown train option '", key, "' in the artifact's options"));
  }
  if (t.precision != "fp32" && t.precision != "bf16-mixed" && t.precision != "fp16-mixed")
    throw Error(str("unknown precision '", t.precision, "' in the artifact's train options"));
  if (t.optimizer != "adamw" && t.optimizer != "sgd")
    throw Error(str("unknown optimizer '", t.optimizer, "' in the artifact's train options"));
  return t;
}

/// The torch optimizer's state of parameter `p`. The map's key is the TensorImpl address
/// as a string in LibTorch 1.x and the address itself in 2.x; both are handled.
template <typename Map>
torch::optim::OptimizerParamState *findState(Map &state, const torch::Tensor &p) {
  using Key = typename std::decay_t<Map>::key_type;
  c10::TensorImpl *impl = p.unsafeGetTensorImpl();
  Key key;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream ss; // as c10::guts::to_string(impl)
    ss << impl;
    key = ss.str();
  } else {
    key = reinterpret_cast<Key>(impl);
  }
  auto it = state.find(key);
  return it == state.end() ? nullptr : it->second.get();
}

double toScalar(const medrun::Tensor &t) { return t.at(0); }

std::string medrunPrecisionName(medrun::Precision p) {
  switch (p) {
  case medrun::Precision::F32: return "f32";
  case medrun::Precision::F64: return "f64";
  case medrun::Precision::BF16: return "bf16";
  case medrun::Precision::F16: return "f16";
  }
  return "?";
}

/// Torch's side of the training steps: the parameters as leaves, the optimizer, the EMA and
/// GradScaler's state. The reference and the low run (--against-autocast: the f32 reference
/// and the autocast run; --against-f64: the f64 reference and the f32 run) each keep their
/// own.
struct TorchTrainer {
  torch::ScalarType type = torch::kFloat;    ///< leaves, state and arithmetic (f32 or f64)
  std::optional<torch::ScalarType> autocast; ///< forward passes under torch autocast to it
  bool scaling = false; ///< a GradScaler: fp16-mixed, or autocast to f16 (torch's recipe)
  std::map<std::string, torch::Tensor> leaf, ema;
  /// State the loss function's forward sets (BatchNorm's running statistics), as it stands
  /// after the last step; before the first, the initial values (TrainCheck::torchValues_).
  std::map<std::string, torch::Tensor> forwardState;
  std::vector<torch::Tensor> leaves;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  double scale = 0;    ///< GradScaler's scale (fp16-mixed)
  int64_t tracker = 0; ///< its growth tracker
  int64_t applied = 0; ///< optimizer steps taken (skipped ones do not count)
};

/// What one torch training step gives for the comparison.
struct TorchStep {
  double loss = NAN, gradNorm = NAN, scaleUsed = 0;
  bool foundInf = false;
  std::map<std::string, torch::Tensor> grads; ///< unscaled, before clipping
  std::map<std::string, torch::Tensor> forwardState; ///< the forward's assigns (all steps run them)
};

/// The functions --train-steps runs, and how train_step's inputs and outputs are bound.
struct StepFunctions {
  const medrun::Function *step = nullptr;
  const medrun::Function *loss = nullptr; ///< what the torch reference runs
  const medrun::Function *grad = nullptr; ///< --train-grad: <loss>_grad
  TrainOptions t;                         ///< the artifact's train options
  bool scaling = false;                   ///< fp16-mixed: loss scaling
  size_t batchArgs = 0; ///< train_step's first inputs: the loss function's
  std::map<std::string, size_t> slot; ///< then the per-step scalars, by name
  std::vector<std::string> outNames;

  size_t output(const std::string &n) const {
    auto it = std::find(outNames.begin(), outNames.end(), n);
    if (it == outNames.end())
      throw Error(str("train_step has no output '", n, "'"));
    return static_cast<size_t>(it - outNames.begin());
  }
};

/// Finds train_step, its loss function (and <loss>_grad) in the artifact and checks them
/// against the options: UsageError or Error saying what does not fit.
StepFunctions stepFunctions(const Options &o, const Sides &sides) {
  const medrun::Artifact &artifact = sides.artifact;
  auto find = [&](const std::string &name) -> const medrun::Function * {
    for (const medrun::Function &f : artifact.functions)
      if (f.name == name)
        return &f;
    return nullptr;
  };
  StepFunctions fn;
  fn.step = find("train_step");
  if (!fn.step)
    throw UsageError(str("--train-steps: ", o.artifact, " has no function train_step ",
                         "(compile it with medc compile --train \"...\")"));
  auto opt = artifact.options.find("train");
  const TrainOptions &t = fn.t =
      parseTrainOptions(opt == artifact.options.end() ? "" : opt->second);
  if (!fn.step->precision.empty() && fn.step->precision != t.precision)
    throw Error(str("train_step records precision ", fn.step->precision, ", its train options ",
                    t.precision));
  fn.scaling = t.precision == "fp16-mixed";
  // The CUDA backend runs the precision train_step was compiled for.
  const char *compiledFor = o.precision == medrun::Precision::BF16  ? "bf16-mixed"
                            : o.precision == medrun::Precision::F16 ? "fp16-mixed"
                                                                    : "fp32";
  if (sides.cuda && t.precision != compiledFor)
    throw UsageError(str("--device cuda runs train_step of ", o.artifact, " in ", t.precision,
                         " as compiled; --precision ", medrunPrecisionName(o.precision),
                         " needs an artifact compiled with precision=", compiledFor));
  if (o.lossScale > 0 && !fn.scaling)
    throw UsageError(str("--loss-scale: train_step of ", o.artifact, " is ", t.precision,
                         "; only fp16-mixed steps scale the loss"));
  fn.loss = find(t.loss);
  if (!fn.loss)
    throw UsageError(str("--train-steps: ", o.artifact, " has no loss function '", t.loss,
                         "' (the torch reference runs it; medc compile --entry ", t.loss,
                         " keeps it)"));
  fn.grad = o.trainGrad ? find(t.loss + "_grad") : nullptr;
  if (o.trainGrad && !fn.grad)
    throw UsageError(str("--train-grad: ", o.artifact, " has no function '", t.loss, "_grad'"));

  // train_step's inputs: the loss function's, then the per-step scalars, bound by name.
  const medrun::Function &step = *fn.step;
  fn.batchArgs = fn.loss->inputs.size();
  if (step.inputs.size() < fn.batchArgs)
    throw Error(str("train_step has ", step.inputs.size(), " arguments, fewer than ", t.loss,
                    "'s ", fn.batchArgs));
  for (size_t i = fn.batchArgs; i < step.inputs.size(); ++i) {
    const std::string &n = step.inputNames.at(i);
    if (n != "lr" && n != "step" && n != "ema_decay" && n != "loss_scale" &&
        n != "growth_tracker" && n != "rng")
      throw Error(str("train_step input ", i, " '", n, "' is none medcheck knows (lr, step, ",
                      "ema_decay, loss_scale, growth_tracker, rng)"));
    fn.slot[n] = i;
  }
  std::vector<std::string> required{"lr", "step"};
  if (t.ema)
    required.push_back("ema_decay");
  if (fn.scaling)
    required.insert(required.end(), {"loss_scale", "growth_tracker"});
  for (const std::string &n : required)
    if (!fn.slot.count(n))
      throw Error(str("train_step has no input '", n, "' (", t.precision, ", ema=",
                      t.ema ? "true" : "false", ")"));
  for (size_t i = 0; i < step.outputs.size(); ++i)
    fn.outNames.push_back(outputName(step, i));
  return fn;
}

/// What our side of one step gives: train_step's outputs, the state before it and what it
/// assigned (already applied to the state), and --train-grad's gradients.
struct OursStep {
  std::vector<medrun::Tensor> outs, grads;
  medrun::TensorMap before, updates;
};

/// --train-steps: both sides start from the same parameters and run the same steps on one
/// batch; after each, every scalar and state tensor of ours is judged against torch's.
class TrainCheck {
public:
  TrainCheck(const Options &o, const Sides &sides, double tolerance, torch::ScalarType floatType)
      : o_(o), sides_(sides), artifact_(sides.artifact), tolerance_(tolerance),
        floatType_(floatType), fn_(stepFunctions(o, sides)), t_(fn_.t),
        f64_(o.precision == medrun::Precision::F64),
        storage_(f64_ ? medrun::DType::F64 : medrun::DType::F32) {}

  int run() {
    initState();
    makeTrainers();
    drawBatch();
    printHeader();
    for (int64_t s = 1; s <= o_.trainSteps; ++s)
      runStep(s);
    return summary();
  }

private:
  medrun::Tensor asStorage(const medrun::Tensor &x) const {
    if (!medrun::isFloat(x.dtype()) || x.dtype() == storage_)
      return x.clone();
    return x.to(storage_);
  }
  medrun::Tensor scalar(double v) const {
    medrun::Tensor s(storage_, {});
    if (f64_)
      s.data<double>()[0] = v;
    else
      s.data<float>()[0] = static_cast<float>(v);
    return s;
  }
  double rounded(double v) const { return f64_ ? v : static_cast<double>(static_cast<float>(v)); }
  /// How the lines name the low run of the ratio rule.
  std::string lowName() const { return o_.againstF64 ? "f32" : "autocast"; }

  void initState();
  std::unique_ptr<TorchTrainer> makeTrainer(torch::ScalarType type,
                                            std::optional<torch::ScalarType> autocast,
                                            bool scales);
  void makeTrainers();
  void drawBatch();
  void printHeader();
  void runStep(int64_t s);
  OursStep runOurs(int64_t s, double lr, double decay);
  TorchStep torchStep(TorchTrainer &tr, double lr, double decay);
  void updateScale(double &scale, int64_t &tracker, bool foundInf) const;
  torch::Tensor moment(TorchTrainer &tr, const std::string &name, const std::string &m,
                       int64_t s);
  void followNoise(const TorchStep &ref, const medrun::TensorMap &before, int64_t s, double lr,
                   double decay);
  bool compareStep(int64_t s, double lr, double decay, OursStep &ours, const TorchStep &ref,
                   const TorchStep &ac);
  bool checkLossScaling(StepJudge &judge, int64_t s, const OursStep &ours,
                        const TorchStep &ref, const TorchStep &ac);
  void compareState(StepJudge &judge, int64_t s, const OursStep &ours, const TorchStep &ref,
                    const TorchStep &ac);
  int summary() const;

  const Options &o_;
  const Sides &sides_;
  const medrun::Artifact &artifact_;
  const double tolerance_;
  const torch::ScalarType floatType_;
  const StepFunctions fn_;
  const TrainOptions &t_;
  const bool f64_;
  const medrun::DType storage_;

  // State: ours and torch's start from the same values.
  medrun::TensorMap state_;
  std::map<std::string, torch::Tensor> torchValues_; ///< parameters the loss reads, not trained
  std::vector<std::string> trained_;                  ///< trainable parameters the loss reads
  /// torch's reference, and the low run of the ratio rule (--against-autocast: torch
  /// autocast; --against-f64: torch f32, the reference then in f64).
  std::unique_ptr<TorchTrainer> reference_, low_;
  std::string autocastName_; ///< "bf16" or "f16"
  std::vector<medrun::Tensor> batch_;
  std::vector<torch::Tensor> torchBatch_;

  // Loss scaling: ours feeds its loss_scale and growth_tracker outputs back as the next
  // step's inputs (as the runtime does); torch's GradScaler keeps its own. GradScaler's state
  // as torch._amp_update_scale_ makes it from ours' found_inf, which ours' loss_scale and
  // growth_tracker must equal; ours' updates applied so far.
  double scaleOurs_ = 0, trackerOurs_ = 0;
  size_t skippedSteps_ = 0;
  double expectScale_ = 0;
  int64_t expectTracker_ = 0, appliedOurs_ = 0;

  size_t failedSteps_ = 0;
  double oursTime_ = 0, torchTime_ = 0, lowTime_ = 0;
  bool typesPrinted_ = false; ///< --autocast-types: printed once, for the first step
  // Parameters whose torch gradient vanished (zero mathematically, rounding noise on both
  // sides) in some step so far, and the bound on how far AdamW can move them on noise.
  std::set<std::string> noiseDriven_;
  double noiseBound_ = 0;
  // The same bound for the EMA of such a parameter: e_s = d e_{s-1} + (1-d) p_s.
  double emaNoiseBound_ = 0;
  // Without the ratio rule, AdamW's amplification of gradient differences within the tolerance,
  // per element (medrun/AdamDrift.h), from torch's second moments before and after each step.
  std::optional<medrun::AdamDriftBound> drift_;
  std::map<std::string, medrun::Tensor> secondMoments_; ///< torch's, after the last step
};

void TrainCheck::initState() {
  state_ = medrun::initParameters(artifact_, o_.seed);
  for (auto &[name, x] : state_)
    x = asStorage(x);
  std::set<std::string> read;
  for (const medrun::OpInfo &op : fn_.loss->ops)
    if (op.kind == "param")
      read.insert(op.strAttr("name"));
  for (const medrun::ParameterInfo &p : artifact_.parameters) {
    torchValues_[p.name] = sides_.toTorch(state_.at(p.name))
                               .to(medrun::isFloat(p.dtype) ? floatType_ : torchType(p.dtype));
    if (p.trainable && read.count(p.name) && medrun::isFloat(p.dtype))
      trained_.push_back(p.name);
  }
}

// A torch trainer from the initial values: its leaves, the optimizer and the EMA.
std::unique_ptr<TorchTrainer> TrainCheck::makeTrainer(torch::ScalarType type,
                                                      std::optional<torch::ScalarType> autocast,
                                                      bool scales) {
  auto tr = std::make_unique<TorchTrainer>();
  tr->type = type;
  tr->autocast = autocast;
  tr->scaling = scales;
  std::vector<torch::Tensor> decayed, exempt;
  for (const std::string &name : trained_) {
    const medrun::ParameterInfo *info = artifact_.parameter(name);
    torch::Tensor x = torchValues_.at(name).detach().to(type).clone().requires_grad_(true);
    tr->leaf[name] = x;
    tr->leaves.push_back(x);
    bool ex = t_.exemptNormBias &&
              (info->shape.size() <= 1 || name.find("grn_") != std::string::npos);
    (ex ? exempt : decayed).push_back(x);
    if (t_.ema)
      tr->ema[name] = x.detach().clone();
  }
  if (t_.optimizer == "adamw") {
    auto options = [&](double wd) {
      return torch::optim::AdamWOptions(o_.lr)
          .betas(std::make_tuple(t_.beta1, t_.beta2))
          .eps(t_.eps)
          .weight_decay(wd)
          .amsgrad(false);
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    if (!decayed.empty())
      groups.emplace_back(decayed, std::make_unique<torch::optim::AdamWOptions>(
                                       options(t_.weightDecay)));
    if (!exempt.empty())
      groups.emplace_back(exempt, std::make_unique<torch::optim::AdamWOptions>(options(0.0)));
    tr->optimizer = std::make_unique<torch::optim::AdamW>(groups, options(t_.weightDecay));
  } else {
    auto options = [&](double wd) {
      return torch::optim::SGDOptions(o_.lr)
          .momentum(t_.momentum)
          .dampening(0)
          .weight_decay(wd)
          .nesterov(t_.nesterov);
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    if (!decayed.empty())
      groups.emplace_back(decayed,
                          std::make_unique<torch::optim::SGDOptions>(options(t_.weightDecay)));
    if (!exempt.empty())
      groups.emplace_back(exempt, std::make_unique<torch::optim::SGDOptions>(options(0.0)));
    tr->optimizer = std::make_unique<torch::optim::SGD>(groups, options(t_.weightDecay));
  }
  return tr;
}

// Torch's trainers: the reference in floatType (f64 with --against-f64) and the low run of
// the ratio rule: with --against-autocast one whose forward passes run under torch autocast
// to bf16 or f16, with --against-f64 one in f32; each from the same initial values (ours'
// f32 values, exact in f64), each with its own optimizer, EMA and loss scale.
void TrainCheck::makeTrainers() {
  if (trained_.empty())
    throw Error(str(t_.loss, " reads no trainable float parameter"));
  reference_ = makeTrainer(o_.againstF64 ? torch::kDouble : floatType_, std::nullopt, fn_.scaling);
  if (o_.againstF64)
    low_ = makeTrainer(torch::kFloat, std::nullopt, fn_.scaling);
  if (o_.againstAutocast) {
    autocastName_ = medrunPrecisionName(*o_.autocastType);
    const torch::ScalarType type =
        *o_.autocastType == medrun::Precision::F16 ? torch::kHalf : torch::kBFloat16;
    try { // before anything runs: LibTorch 1.13's CPU autocast has no f16
      checkAutocast(sides_.torchDevice, type);
    } catch (const Error &e) {
      throw Error(str("--against-autocast: ", e.what(),
                      sides_.torchDevice.is_cpu() ? "; compute torch on a GPU (--torch-device cuda)"
                                                  : ""));
    }
    // PyTorch trains in f16 with autocast and a GradScaler: an autocast run to f16 scales
    // its loss whether ours does or not.
    low_ = makeTrainer(floatType_, type, fn_.scaling || type == torch::kHalf);
  }
  // Each trainer holds its own trained parameters (its leaves): on torch's device only
  // the parameters not trained stay here.
  for (const std::string &name : trained_)
    torchValues_.erase(name);
  if (t_.optimizer == "adamw" && !low_)
    drift_.emplace(t_.beta1, t_.beta2, t_.eps);
}

// One batch, drawn as the other modes draw the loss function's inputs.
void TrainCheck::drawBatch() {
  batch_ = drawInputs(*fn_.loss, o_.seed);
  for (medrun::Tensor &x : batch_)
    x = asStorage(x);
  for (const medrun::Tensor &x : batch_)
    torchBatch_.push_back(sides_.toTorch(x));
}

void TrainCheck::printHeader() {
  std::cout << "train_step  " << t_.optimizer << "  " << trained_.size()
            << " trained parameters  clip " << t_.clip << "  ema "
            << (t_.ema ? "true" : "false") << "  exempt-norm-bias "
            << (t_.exemptNormBias ? "true" : "false") << "  lr " << sci(o_.lr) << " "
            << o_.lrSchedule << "  one batch for all steps  precision "
            << medrunPrecisionName(o_.precision) << "  (compiled " << t_.precision << ")\n";
  if (fn_.scaling) {
    double init = o_.lossScale > 0                ? o_.lossScale
                  : fn_.step->initLossScale > 0 ? fn_.step->initLossScale
                                                  : t_.initScale;
    scaleOurs_ = reference_->scale = static_cast<float>(init);
    std::cout << "loss scaling  init " << reference_->scale << "  growth " << t_.growthFactor
              << " every " << t_.growthInterval << " steps  backoff " << t_.backoffFactor
              << "\n";
  }
  expectScale_ = scaleOurs_;
  if (o_.againstF64) {
    low_->scale = reference_->scale;
    std::cout << "torch  f64 reference and f32 (" << sides_.torchWhere()
              << "), each from the same parameters with its own optimizer; pass: rel <= "
              << o_.f64Ratio << " * f32's rel, or rel <= " << sci(kF32Level)
              << " (rel: against torch f64)\n";
  }
  if (o_.againstAutocast) {
    low_->scale = fn_.scaling ? reference_->scale : static_cast<float>(t_.initScale);
    std::cout << "torch  f32 reference and autocast " << autocastName_;
    if (low_->scaling && !fn_.scaling)
      std::cout << " with GradScaler from " << low_->scale;
    std::cout << " (" << sides_.torchWhere()
              << "), each from the same parameters with its own optimizer; pass: rel <= "
              << o_.autocastRatio << " * autocast's rel, or rel <= " << sci(kF32Level)
              << " (gradients and moments: or <= " << sci(unitRoundoff(*o_.autocastType))
              << ", one " << autocastName_ << " rounding)\n";
  }
}

// Step `s` (1-based) on both sides, then the comparison.
void TrainCheck::runStep(int64_t s) {
  double lr = o_.lr;
  if (o_.lrSchedule == "cosine")
    lr = o_.lr * (1 + std::cos(M_PI * double(s - 1) / double(o_.trainSteps))) / 2;
  lr = rounded(lr);
  const double decay = rounded(s <= o_.emaWarmup ? 0.0 : o_.emaDecay);

  // Ours, all of it on the host when it ends (a GPU run downloads its results), before torch
  // starts; then torch: the reference, then (the ratio rule) the low run, in turn.
  sides_.beforeOurs();
  const double t0 = now();
  OursStep ours = runOurs(s, lr, decay);
  const double t1 = now();
  const TorchStep ref = torchStep(*reference_, lr, decay);
  if (!ref.foundInf)
    followNoise(ref, ours.before, s, lr, decay);
  const double t2 = now();
  TorchStep ac;
  if (low_)
    ac = torchStep(*low_, lr, decay);
  const double t3 = now();
  oursTime_ += t1 - t0;
  torchTime_ += t2 - t1;
  lowTime_ += t3 - t2;

  failedSteps_ += compareStep(s, lr, decay, ours, ref, ac) ? 1 : 0;
  std::cout << "step " << s << "  time  ours " << seconds(t1 - t0) << "  torch "
            << seconds(t2 - t1);
  if (low_)
    std::cout << "  " << lowName() << " " << seconds(t3 - t2);
  std::cout << "\n" << std::flush;
}

// train_step (and --train-grad's <loss>_grad) on our backend; its assignments applied.
OursStep TrainCheck::runOurs(int64_t s, double lr, double decay) {
  OursStep r;
  if (fn_.grad)
    r.grads = sides_.ours(*fn_.grad, batch_, state_);
  std::vector<medrun::Tensor> inputs(fn_.step->inputs.size());
  for (size_t i = 0; i < fn_.batchArgs; ++i)
    inputs[i] = batch_[i];
  inputs[fn_.slot.at("lr")] = scalar(lr);
  inputs[fn_.slot.at("step")] = scalar(double(s));
  if (t_.ema)
    inputs[fn_.slot.at("ema_decay")] = scalar(decay);
  if (fn_.scaling) {
    inputs[fn_.slot.at("loss_scale")] = scalar(scaleOurs_);
    inputs[fn_.slot.at("growth_tracker")] = scalar(trackerOurs_);
  }
  if (fn_.slot.count("rng")) {
    medrun::Tensor counter(medrun::DType::I64, {});
    counter.data<int64_t>()[0] = s;
    inputs[fn_.slot.at("rng")] = counter;
  }
  r.before = state_;
  r.outs = sides_.ours(*fn_.step, inputs, state_, &r.updates);
  for (auto &[name, x] : r.updates) {
    if (!state_.count(name))
      throw Error(str("train_step assigns '", name, "', which is no parameter"));
    state_[name] = x.dtype() == storage_ ? x : x.to(storage_);
  }
  return r;
}

// torch._amp_update_scale_: GradScaler's update of its scale and growth tracker.
void TrainCheck::updateScale(double &scale, int64_t &tracker, bool foundInf) const {
  if (foundInf) {
    scale = static_cast<float>(scale * t_.backoffFactor);
    tracker = 0;
  } else if (tracker + 1 == t_.growthInterval) {
    float grown = static_cast<float>(scale * t_.growthFactor);
    if (std::isfinite(grown))
      scale = grown;
    tracker = 0;
  } else {
    ++tracker;
  }
}

// One torch step of `tr`: autograd, then GradScaler (scale, unscale_, the finiteness check, a
// skipped optimizer step, update) by hand around clip_grad_norm_ and the optimizer, then the
// EMA.
TorchStep TrainCheck::torchStep(TorchTrainer &tr, double lr, double decay) {
  const bool scaling = tr.scaling;
  TorchStep r;
  sides_.beforeTorch();
  std::map<std::string, torch::Tensor> values = torchValues_;
  for (const std::string &name : trained_)
    values[name] = tr.leaf.at(name).detach();
  for (const auto &[name, x] : tr.forwardState)
    values[name] = x;
  torch::Tensor seed;
  if (scaling)
    seed = torch::full({}, tr.scale,
                       torch::TensorOptions().dtype(tr.type).device(sides_.torchDevice));
  TorchGradients ref = gradTorch(artifact_, *fn_.loss, torchBatch_, values, tr.type, seed,
                                 tr.autocast, sides_.recomputeNow());
  if (!ref.recompute.empty())
    std::cout << "torch recompute  "
              << (tr.autocast ? str("autocast to ", autocastName_, ": ") : std::string())
              << ref.recompute << "\n";
  if (o_.autocastTypes && tr.autocast && !typesPrinted_) {
    typesPrinted_ = true;
    for (const auto &[what, counts] : ref.autocastTypes) {
      std::cout << "autocast types  " << what << ":";
      for (const auto &[type, n] : counts)
        std::cout << " " << type << " " << n;
      std::cout << "\n";
    }
  }
  r.loss = ref.outputs.at(0).item<double>();
  // As PyTorch's train-mode forward, whether or not the optimizer step is then skipped.
  for (const auto &[name, x] : ref.assigned) {
    tr.forwardState[name] = x;
    r.forwardState[name] = x;
  }
  // inv_scale = scale.double().reciprocal().float(), as GradScaler.unscale_
  double inverse = scaling ? rounded(1.0 / tr.scale) : 1.0;
  for (const std::string &name : trained_) {
    torch::Tensor g = ref.params.at(name).to(tr.type).detach().clone();
    if (scaling) {
      r.foundInf |= !torch::isfinite(g).all().item<bool>();
      g = g * inverse;
    }
    r.grads[name] = g.clone();
    tr.leaf.at(name).mutable_grad() = g;
  }
  ref = TorchGradients(); // the forward values, before the optimizer's memory
  if (t_.clip > 0) {
    r.gradNorm = torch::nn::utils::clip_grad_norm_(tr.leaves, t_.clip);
  } else {
    std::vector<torch::Tensor> norms;
    for (const torch::Tensor &x : tr.leaves)
      norms.push_back(x.grad().norm());
    r.gradNorm = torch::stack(norms).norm().item<double>();
  }
  for (auto &group : tr.optimizer->param_groups()) {
    if (t_.optimizer == "adamw")
      static_cast<torch::optim::AdamWOptions &>(group.options()).lr(lr);
    else
      static_cast<torch::optim::SGDOptions &>(group.options()).lr(lr);
  }
  if (!r.foundInf) {
    tr.optimizer->step();
    ++tr.applied;
    torch::NoGradGuard noGrad;
    if (t_.ema)
      for (const std::string &name : trained_)
        tr.ema[name] = decay * tr.ema[name] + (1 - decay) * tr.leaf.at(name).detach();
  }
  r.scaleUsed = tr.scale;
  if (scaling)
    updateScale(tr.scale, tr.tracker, r.foundInf);
  sides_.afterTorch(tr.autocast           ? str("train_step under autocast to ", autocastName_)
                    : tr.type == torch::kDouble ? std::string("train_step in f64")
                                                : std::string("train_step"));
  return r;
}

// The optimizer moment `m` (exp_avg, exp_avg_sq, momentum_buffer) of a parameter of `tr`,
// from the torch optimizer's own state.
torch::Tensor TrainCheck::moment(TorchTrainer &tr, const std::string &name, const std::string &m,
                                 int64_t s) {
  torch::optim::OptimizerParamState *ps = findState(tr.optimizer->state(), tr.leaf.at(name));
  if (!ps && tr.applied > 0)
    throw Error(str("torch's optimizer has no state for '", name, "' after step ", s));
  torch::Tensor x;
  if (!ps) // no update yet (every step so far skipped): torch creates it on the first
    x = torch::zeros_like(tr.leaf.at(name));
  else if (m == "exp_avg")
    x = static_cast<torch::optim::AdamWParamState &>(*ps).exp_avg();
  else if (m == "exp_avg_sq")
    x = static_cast<torch::optim::AdamWParamState &>(*ps).exp_avg_sq();
  else
    x = static_cast<torch::optim::SGDParamState &>(*ps).momentum_buffer();
  return x.detach();
}

// After a torch step that applied: the parameters whose gradient vanished, AdamW's bound on
// how far noise moves them (and their EMA), and the drift bound's step.
void TrainCheck::followNoise(const TorchStep &ref, const medrun::TensorMap &before, int64_t s,
                             double lr, double decay) {
  double largest = 0;
  for (const auto &[name, g] : ref.grads)
    largest = std::max(largest, g.norm().item<double>());
  for (const auto &[name, g] : ref.grads)
    if (g.norm().item<double>() <= kVanishing * tolerance_ * largest)
      noiseDriven_.insert(name);
  if (t_.optimizer == "adamw") {
    // |m_hat / (sqrt(v_hat) + eps)| <= (1-b1)/(1-b1^k) * sqrt((1-b2^k)/(1-b2)) *
    // sqrt(sum_{j<k} (b1^2/b2)^j) for any gradients (Cauchy-Schwarz), k = updates so far.
    double sum = 0, k = double(reference_->applied);
    for (int64_t j = 0; j < reference_->applied; ++j)
      sum += std::pow(t_.beta1 * t_.beta1 / t_.beta2, double(j));
    noiseBound_ += lr * (1 - t_.beta1) / (1 - std::pow(t_.beta1, k)) *
                   std::sqrt((1 - std::pow(t_.beta2, k)) / (1 - t_.beta2)) * std::sqrt(sum);
  }
  emaNoiseBound_ = decay * emaNoiseBound_ + (1 - decay) * noiseBound_;
  if (drift_)
    for (const std::string &name : trained_) {
      medrun::Tensor now = fromTorch(moment(*reference_, name, "exp_avg_sq", s));
      auto last = secondMoments_.find(name);
      auto initial = before.find("optimizer.exp_avg_sq." + name);
      const medrun::Tensor previous = last != secondMoments_.end() ? last->second
                                      : initial != before.end()    ? initial->second
                                                                   : medrun::Tensor();
      drift_->step(name, previous, now, double(reference_->applied), lr, tolerance_);
      drift_->emaStep(name, decay);
      secondMoments_[name] = now;
    }
}

// Step `s`'s scalars, loss scaling and state against torch's: true if anything failed.
bool TrainCheck::compareStep(int64_t s, double lr, double decay, OursStep &ours,
                             const TorchStep &ref, const TorchStep &ac) {
  StepRules rules;
  rules.tolerance = tolerance_;
  rules.byRatio = low_ != nullptr;
  rules.lowName = lowName();
  if (o_.againstAutocast) {
    rules.lowTypeName = autocastName_;
    rules.ratio = o_.autocastRatio;
    rules.roundoff = unitRoundoff(*o_.autocastType);
  } else if (o_.againstF64) {
    rules.lowTypeName = "f32";
    rules.ratio = o_.f64Ratio;
  }
  rules.noiseBound = noiseBound_;
  rules.noiseDriven = &noiseDriven_;
  rules.drift = drift_ ? &*drift_ : nullptr;
  StepJudge judge(rules, s);
  std::cout << "step " << s << "  lr " << sci(lr);
  if (t_.ema)
    std::cout << "  ema_decay " << decay;
  if (fn_.scaling)
    std::cout << "  loss_scale " << ref.scaleUsed;
  std::cout << "\n";
  judge.scalar("loss", toScalar(ours.outs.at(fn_.output("loss"))), ref.loss, ac.loss);
  judge.scalar("grad_norm", toScalar(ours.outs.at(fn_.output("grad_norm"))), ref.gradNorm,
               ac.gradNorm);
  const bool skipped = fn_.scaling && checkLossScaling(judge, s, ours, ref, ac);
  if (t_.guardUpdate) {
    // The step's guard says whether any state it assigns is inf or NaN: as torch's updated
    // parameters (and EMA) are, where the step was not skipped for its loss scale.
    bool torchNonFinite = false;
    if (!skipped)
      for (const auto *state : {&reference_->leaf, &reference_->ema})
        for (const auto &[name, x] : *state)
          torchNonFinite = torchNonFinite || !torch::isfinite(x).all().item<bool>();
    judge.exact("update_nonfinite", toScalar(ours.outs.at(fn_.output("update_nonfinite"))),
                torchNonFinite ? 1 : 0);
  }
  appliedOurs_ += skipped ? 0 : 1;
  compareState(judge, s, ours, ref, ac);
  return judge.failed();
}

// fp16-mixed: found_inf, the loss scale and its tracker as GradScaler's, and a skipped step
// that changed nothing. Returns whether ours skipped the step.
bool TrainCheck::checkLossScaling(StepJudge &judge, int64_t s, const OursStep &ours,
                                  const TorchStep &ref, const TorchStep &ac) {
  const double found = toScalar(ours.outs.at(fn_.output("found_inf")));
  const bool skipped = found != 0;
  if (low_) {
    // Ours overflows where one of the torch runs does (autocast's f16 run has f16's range
    // too), or nowhere.
    const double acFound = ac.foundInf ? 1 : 0;
    const bool ok = found == (ref.foundInf ? 1 : 0) || found == acFound;
    if (!ok)
      judge.fail();
    std::cout << "step " << s << "  found_inf  " << found << "  torch " << ref.foundInf
              << "  " << lowName() << " " << acFound << "  " << (ok ? "ok" : "FAIL") << "\n";
  } else {
    judge.exact("found_inf", found, ref.foundInf ? 1 : 0);
  }
  updateScale(expectScale_, expectTracker_, skipped);
  scaleOurs_ = toScalar(ours.outs.at(fn_.output("loss_scale")));
  trackerOurs_ = toScalar(ours.outs.at(fn_.output("growth_tracker")));
  judge.exact("loss_scale", scaleOurs_, expectScale_);
  judge.exact("growth_tracker", trackerOurs_, double(expectTracker_));
  if (skipped) {
    // A skipped step leaves every state tensor exactly as it was.
    ++skippedSteps_;
    size_t changed = 0, kept = 0;
    std::string first;
    for (auto &[name, x] : ours.updates) {
      if (ref.forwardState.count(name)) // set by the forward, which ran (compareState)
        continue;
      ++kept;
      const medrun::Tensor &old = ours.before.at(name), &now = state_.at(name);
      bool same = old.dtype() == now.dtype() && old.shape() == now.shape() &&
                  std::memcmp(old.raw(), now.raw(), old.nbytes()) == 0;
      if (!same && changed++ == 0)
        first = name;
    }
    if (changed > 0)
      judge.fail();
    std::cout << "step " << s << "  skipped  " << kept - changed << " of " << kept
              << " state tensors unchanged";
    if (changed)
      std::cout << ", first changed " << first;
    std::cout << "  " << (changed ? "FAIL" : "ok") << "\n";
  }
  return skipped;
}

// The gradients (--train-grad), parameters, optimizer moments and EMA, kind by kind.
void TrainCheck::compareState(StepJudge &judge, int64_t s, const OursStep &ours,
                              const TorchStep &ref, const TorchStep &ac) {
  auto stateOf = [&](const std::string &key) -> const medrun::Tensor & {
    auto it = state_.find(key);
    if (it == state_.end())
      throw Error(str("the artifact has no parameter '", key, "'"));
    return it->second;
  };
  if (fn_.grad) {
    std::vector<std::string> names;
    std::vector<medrun::Tensor> mine;
    std::vector<torch::Tensor> theirs, acs;
    for (size_t i = 0; i < fn_.grad->outputs.size(); ++i) {
      std::string n = outputName(*fn_.grad, i);
      if (n.rfind("grad.", 0) != 0 || !ref.grads.count(n.substr(5)))
        continue;
      names.push_back(n.substr(5));
      mine.push_back(ours.grads.at(i));
      theirs.push_back(ref.grads.at(n.substr(5)));
      if (low_)
        acs.push_back(ac.grads.at(n.substr(5)));
    }
    judge.kind("grads", names, mine, theirs, acs, true, 0, true);
    if (low_ && !ref.foundInf)
      judge.signs(names, mine, theirs, acs);
  }
  {
    std::vector<medrun::Tensor> mine;
    std::vector<torch::Tensor> theirs, acs;
    for (const std::string &name : trained_) {
      mine.push_back(stateOf(name));
      theirs.push_back(reference_->leaf.at(name).detach());
      if (low_)
        acs.push_back(low_->leaf.at(name).detach());
    }
    // A parameter's error is a sum of its updates' errors: with SGD its momentum buffers'
    // (at step 1, from equal parameters, exactly its gradient's times lr (1 + momentum)),
    // so it is spread over elements as theirs and gets the same spread rule.
    judge.kind("params", trained_, mine, theirs, acs, false, noiseBound_, true);
  }
  std::vector<std::string> moments = t_.optimizer == "adamw"
                                         ? std::vector<std::string>{"exp_avg", "exp_avg_sq"}
                                         : std::vector<std::string>{"momentum_buffer"};
  for (const std::string &m : moments) {
    std::vector<medrun::Tensor> mine;
    std::vector<torch::Tensor> theirs, acs;
    for (const std::string &name : trained_) {
      mine.push_back(stateOf("optimizer." + m + "." + name));
      // (compared with the vanishing rule: the moments of a zero gradient are noise)
      theirs.push_back(moment(*reference_, name, m, s));
      if (low_)
        acs.push_back(moment(*low_, name, m, s));
    }
    // Gradient-made tensors whose error sits in few elements (exp_avg_sq, the squares, in
    // its largest; a bias of a few hundred elements) make the ratio of two errors noisy.
    judge.kind(m, trained_, mine, theirs, acs, true, 0, true);
  }
  if (!ref.forwardState.empty()) { // e.g. BatchNorm's running statistics, as torch's batch_norm
    std::vector<std::string> names;
    std::vector<medrun::Tensor> mine;
    std::vector<torch::Tensor> theirs, acs;
    for (const auto &[name, x] : ref.forwardState) {
      names.push_back(name);
      mine.push_back(stateOf(name));
      theirs.push_back(x);
      if (low_)
        acs.push_back(ac.forwardState.at(name));
    }
    judge.kind("forward_state", names, mine, theirs, acs, false, 0);
  }
  if (fn_.scaling && t_.optimizer == "adamw")
    judge.exact("optimizer.step", toScalar(stateOf("optimizer.step")), double(appliedOurs_));
  if (t_.ema) {
    std::vector<medrun::Tensor> mine;
    std::vector<torch::Tensor> theirs, acs;
    for (const std::string &name : trained_) {
      mine.push_back(stateOf("ema." + name));
      theirs.push_back(reference_->ema.at(name));
      if (low_)
        acs.push_back(low_->ema.at(name));
    }
    judge.kind("ema", trained_, mine, theirs, acs, false, emaNoiseBound_);
  }
}

// The times, the loss scaling's skipped steps and the verdict: 0 when every step passed.
int TrainCheck::summary() const {
  std::cout << "train_step  time  ours " << seconds(oursTime_) << " (" << sides_.oursWhere()
            << ")  torch " << seconds(torchTime_);
  if (low_)
    std::cout << ", " << lowName() << " " << seconds(lowTime_);
  std::cout << " (" << sides_.torchWhere() << ")\n";
  if (fn_.scaling)
    std::cout << "loss scaling  " << skippedSteps_ << " of " << o_.trainSteps
              << " steps skipped, final scale " << scaleOurs_ << "\n";
  // A step that ours skipped compares the old state with itself: with no update at all, the
  // check against autocast would pass without having seen the mixed-precision step.
  const bool vacuous = low_ && appliedOurs_ == 0;
  if (vacuous)
    std::cout << "FAIL: every step overflowed (found_inf) and none updated the state, so "
                 "nothing of the step was compared; start from a smaller --loss-scale\n";
  const std::string precisionName = medrunPrecisionName(o_.precision);
  if (o_.againstF64)
    std::cout << o_.trainSteps << " steps checked, " << failedSteps_
              << " failed (against torch f64: rel <= " << o_.f64Ratio << " * f32's rel or <= "
              << sci(kF32Level) << ", vanishing below " << sci(kVanishing * tolerance_)
              << " of the largest, errors of few elements as counts; precision "
              << precisionName << ")\n";
  else if (low_)
    std::cout << o_.trainSteps << " steps checked, " << failedSteps_
              << " failed (against torch autocast: rel <= " << o_.autocastRatio
              << " * autocast's rel or <= " << sci(kF32Level) << ", vanishing below "
              << sci(kVanishing * tolerance_)
              << " of the largest, errors of few elements as counts; precision " << precisionName
              << (autocastName_ != precisionName ? ", autocast " + autocastName_ : "") << ")\n";
  else
    std::cout << o_.trainSteps << " steps checked, " << failedSteps_ << " failed (tolerance "
              << sci(tolerance_) << ", precision " << precisionName << ")\n";
  return failedSteps_ > 0 || vacuous ? 1 : 0;
}

} // namespace

int checkTrain(const Options &o, const Sides &sides, double tolerance,
               torch::ScalarType floatType) {
  return TrainCheck(o, sides, tolerance, floatType).run();
}

} // namespace medcheck
