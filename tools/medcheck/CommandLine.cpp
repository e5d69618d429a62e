//===- CommandLine.cpp - medcheck's options and --help -----------------------------===//
#include "Check.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace medcheck {
namespace {

uint64_t parseUnsigned(const std::string &opt, const std::string &s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(str(opt, " expects a non-negative integer, got '", s, "'"));
  errno = 0;
  char *end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno == ERANGE)
    throw UsageError(str(opt, " value '", s, "' is out of range"));
  return v;
}

double parsePositive(const std::string &opt, const std::string &s) {
  char *end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v > 0) || !std::isfinite(v))
    throw UsageError(str(opt, " expects a positive number, got '", s, "'"));
  return v;
}

} // namespace

const char *const kUsage =
    "usage: medcheck ARTIFACT.medc [options]\n"
    "\n"
    "Runs functions of a medc artifact on medrun's CPU backend (or its CUDA backend,\n"
    "--device cuda) and, op by op, with LibTorch (on its CPU or its GPU), and compares\n"
    "every output.\n"
    "\n"
    "For each function, parameters come from medrun::initParameters(seed) and inputs are\n"
    "random, drawn by the role of each argument (medrun/InputRoles.h, shared with medrun\n"
    "cuda-check): a `mask` operand gets {0,1} values, the `targets` of med.dice_ce class\n"
    "indices in [0, C), the labelled `input` of a linear_argmax med.spatial_transform values\n"
    "of its `labels`, a label transform's input ids in [-1, 4], the `target` of\n"
    "med.bce_with_logits U(0,1) values, its `pos_weight` U(0.5,2), what sqrt, log or pow's\n"
    "base reads U(0.1,2.1), an optimizer's `lr` 1e-3, AdamW's `exp_avg_sq` U(0,1) and `step`\n"
    "an integer in [1, 10], med.random's key all 64 bits, anything else standard normal\n"
    "values. An integer argument that no rule gives a role is an error.\n"
    "\n"
    "Each output prints one line: function, output name (out0, out1, ...; grad.<parameter>\n"
    "and grad.arg<i> for the gradients of a <f>_grad function), shape, the largest\n"
    "absolute error, the relative error norm ||ours - torch||_2 / ||torch||_2 (the\n"
    "absolute norm when ||torch|| is 0; NaNs at the same places count as equal) and ok or\n"
    "FAIL. Each function then prints the wall time of our run and of torch's; a last line\n"
    "counts the outputs checked and failed. Gradient ops (conv3d_grad_weight,\n"
    "shift_sum_grad_weight, *_norm_grad, gelu_grad, extremum_grad, reduce_extremum_grad,\n"
    "slice_grad, the loss gradients) are\n"
    "mapped to torch autograd of their forward ops, group_norm_grad (from the statistics\n"
    "group_norm saved) to torch's native_group_norm_backward, so this also checks <f>_grad\n"
    "functions op by op.\n"
    "\n"
    "--fusions  checks each distinct fusion body of the artifact (med.fusion, the\n"
    "  table `fusions` of plan v4) in isolation: random inputs (from --seed), the body\n"
    "  run op by op on our CPU backend and in LibTorch, in f32 (f64 with --precision f64)\n"
    "  as values inside a fusion are; one line per body and output: `fusion <k>`, its\n"
    "  template, its op count, then as above. Fails when the artifact has no fusion.\n"
    "\n"
    "A gradient output whose norm and torch's are both below 1e-2 * T * (the largest\n"
    "gradient norm of the function), T the tolerance, passes as `vanishing`: it is zero\n"
    "mathematically (a bias right before an instance norm, a norm over one voxel) and\n"
    "both sides hold rounding noise, where a relative error says nothing.\n"
    "\n"
    "Gradient checks, for artifacts compiled with `medc compile --grad` and each function\n"
    "f that has an f_grad (--func selects by either name):\n"
    "\n"
    "--grad  runs f_grad on our backend and compares each output with torch: out<i>\n"
    "  with f's forward mapping, grad.* with torch autograd of out0 of f's mapping, the\n"
    "  parameters f reads and its float arguments being leaves. Lines, tolerance and the\n"
    "  vanishing rule as above. An argument that reaches the loss only as the target, mask\n"
    "  or pos_weight of med.bce_with_logits or the targets of med.dice_ce has no gradient\n"
    "  by definition: ours must be zero, and torch's is (they are detached); such lines\n"
    "  end in `(data, zero)`.\n"
    "\n"
    "--fd N  finite differences, independent of both our autodiff and torch: in f64 on\n"
    "  our CPU backend, for N random elements (from --seed) of every parameter and float\n"
    "  argument, fd = (L(v+h) - L(v-h)) / 2h with h = 1e-6*max(1,|v|) and L = out0 of f\n"
    "  (two forward runs per element), against f_grad's value g (f64). An element passes\n"
    "  when\n"
    "      |fd - g| <= noise + T * max(|fd|, |g|),\n"
    "      noise = 64 * 2^-52 * max(1, |L|) / 2h,\n"
    "  T the --fd-tolerance; `noise` bounds the rounding error of the difference\n"
    "  quotient (each L(v+-h) is off by a few ulps of |L|: up to ~15 seen). Gradients that\n"
    "  are tiny next to the loss are thus judged by their absolute error (about\n"
    "  1e-8 * |L|), the others relatively. One line per tensor: the elements used, the\n"
    "  largest |fd - g| (max_abs), the largest noise bound and\n"
    "  rel = max(0, |fd - g| - noise) / max(|fd|, |g|), the largest over the elements.\n"
    "  Data arguments (see --grad) are not perturbed; ours must be exactly zero there.\n"
    "  Runs f_grad once and f 2*N times per tensor; --precision does not apply.\n"
    "\n"
    "Training steps, for artifacts compiled with `medc compile --train ...` (a function\n"
    "train_step and the plain loss function it was built from, `loss` unless the train\n"
    "options name another):\n"
    "\n"
    "--train-steps N  runs N consecutive training steps on our backend and,\n"
    "  independently, in LibTorch, and compares the two states after each.\n"
    "  Both start from medrun::initParameters(seed); ONE random batch, drawn by the roles\n"
    "  above for the loss function's arguments, is reused by every step. Step s = 1..N uses\n"
    "  lr_s from --lr and --lr-schedule (constant: lr; cosine: lr * (1 + cos(pi (s-1)/N))/2)\n"
    "  and ema_decay_s = 0 for s <= W (--ema-warmup), D (--ema-decay) after; in f32 both are\n"
    "  rounded to f32 first, and torch gets the rounded values too.\n"
    "    ours:  train_step(batch, lr_s, step = s[, ema_decay_s][, loss_scale,\n"
    "           growth_tracker], rng = s), inputs bound by name, then the values it assigns\n"
    "           (med.assign) replace the state.\n"
    "    torch: the loss function's op-by-op torch mapping with the trainable parameters as\n"
    "           leaf tensors, torch autograd, torch::nn::utils::clip_grad_norm_(clip) (when\n"
    "           the train options set clip > 0; its total norm is the reference grad_norm,\n"
    "           taken before clipping), then torch::optim::AdamW (betas, eps, weight decay;\n"
    "           with exempt-norm-bias a second parameter group with weight decay 0 holds\n"
    "           the parameters of rank <= 1 and those named grn_*) or torch::optim::SGD\n"
    "           (momentum, nesterov, weight decay, dampening 0), its lr set to lr_s every\n"
    "           step; then the EMA by hand, e = d*e + (1-d)*p on the updated parameters, e\n"
    "           starting as a copy of the initial parameters. The moments are read from\n"
    "           the torch optimizer's own state (exp_avg, exp_avg_sq, momentum_buffer).\n"
    "  A parameter the loss does not reach gets a zero gradient on both sides.\n"
    "  fp16-mixed steps (dynamic loss scaling): ours feeds its loss_scale and\n"
    "  growth_tracker outputs back as the next inputs, starting from --loss-scale (default:\n"
    "  the artifact's init_loss_scale) and 0. Torch runs torch.amp.GradScaler by hand:\n"
    "  autograd of loss * scale, found_inf = any non-finite scaled gradient, gradients times\n"
    "  float(1/double(scale)) before clipping, optimizer step and EMA skipped on found_inf\n"
    "  (AdamW's step count then does not advance), and torch._amp_update_scale_ (growth,\n"
    "  backoff, growth interval from the train options). found_inf, loss_scale,\n"
    "  growth_tracker and AdamW's optimizer.step are compared exactly; grad_norm passes as\n"
    "  non-finite on both sides; on a skipped step every state tensor of ours must be bit\n"
    "  for bit unchanged (`skipped` line).\n"
    "  --precision bf16 / f16 runs ours with bf16 / emulated f16 activations (master weights\n"
    "  and optimizer math in f32) against torch in f32: a check of how far rounding moves a\n"
    "  few steps, with loose default tolerances (5e-2 for bf16, 1e-2 for f16).\n"
    "  Each step prints a line for loss and grad_norm (relative error) and one per tensor\n"
    "  kind: params, exp_avg and exp_avg_sq (AdamW) or momentum_buffer (SGD), ema, and with\n"
    "  --train-grad grads: the largest relative error norm over the tensors of that kind\n"
    "  and the tensor that has it. A last line counts the steps checked and failed.\n"
    "  Torch's state is never reset to ours: errors accumulate as in real training.\n"
    "  Moments use the vanishing rule of gradients. A parameter whose torch gradient\n"
    "  vanished (rule above) in some step so far is `noise-driven`: its gradient is zero\n"
    "  mathematically (a conv bias right before an instance norm) and AdamW normalizes the\n"
    "  rounding noise of both sides into updates of up to lr each, of either sign; such a\n"
    "  parameter (and its EMA) passes when max_abs <= 2 * sum_s lr_s * B_s, B_s the bound\n"
    "  (1-b1)/(1-b1^s) * sqrt((1-b2^s)/(1-b2)) * sqrt(sum_{j<s} (b1^2/b2)^j) on\n"
    "  |m_hat / (sqrt(v_hat) + eps)| (AdamW; with SGD noise moves it by noise only).\n"
    "  Without autocast, another AdamW parameter or EMA that fails its relative error is\n"
    "  judged again after each element's difference is reduced by how far AdamW can\n"
    "  amplify gradients that differ by T times their RMS (small or cancelling gradients:\n"
    "  lr * min(2 B_s, d (1 + B_s) / (sqrt(v_hat) + eps - d)) per step, from torch's\n"
    "  second moments; runtime/include/medrun/AdamDrift.h), counted as `amplified`.\n"
    "\n"
    "--against-autocast  with --train-steps and --precision bf16 or f16: the acceptance\n"
    "  check of bf16-mixed and fp16-mixed. Each step runs three times, in turn: ours, torch\n"
    "  in f32 (the reference, as above) and torch with its forward passes under torch\n"
    "  autocast to bf16 or f16 on the torch device (`with torch.autocast(device,\n"
    "  dtype=...)` around the loss, backward, clipping, optimizer and EMA outside it), the\n"
    "  two torch runs from the same parameters and batch, each with its own optimizer, EMA\n"
    "  and state across steps. Autocast to f16 runs with its own GradScaler as above\n"
    "  (PyTorch's fp16 recipe), from ours' first scale (the artifact's init_loss_scale, or\n"
    "  65536 for a step without loss scaling). The autocast type is --precision's, or\n"
    "  --autocast-type's (a step in one type against autocast in the other: ours in\n"
    "  bf16-mixed against autocast to f16 is the negative control of the f16 check).\n"
    "  LibTorch 1.13's CPU autocast has no f16 (an error before any step: use\n"
    "  --torch-device cuda). Under autocast, CUDA autocast's policy holds on any torch\n"
    "  device: conv3d and conv_transpose3d compute in bf16 or f16 (autocast's own lists; the\n"
    "  transposed convolution's operands are converted by hand on the CPU, whose list\n"
    "  lacks it) and every float result keeps the type its op produced, as in a PyTorch\n"
    "  model; the norms, the losses, exp and log read their operands in f32 (CUDA\n"
    "  autocast's float32 list, by hand on the CPU: LibTorch 1.13's CPU autocast has no\n"
    "  policy for the norms), and an op mixing bf16 or f16 and f32 operands reads both in f32\n"
    "  (its promote policy). An instance norm (a group_norm that `medc import` made of ONNX\n"
    "  InstanceNormalization, marked med.instance_norm; also the group_norm_apply a pass\n"
    "  made of one) runs as autocast runs torch's instance_norm, on none of its lists: its\n"
    "  operands in f32, group_norm's math in f32, and its result converted back to its\n"
    "  input's type (bf16 or f16 after a convolution); an unmarked group_norm (nn.GroupNorm)\n"
    "  keeps the float32 list's f32 result. A fusion computes its body in f32 and its results\n"
    "  stay f32 (the ops med-split-norms makes of a marked norm included, which it fuses with\n"
    "  their consumer). --autocast-types prints, after the first\n"
    "  step's autocast run, how many 5-D float results of each op kind it held in each\n"
    "  type (`autocast types  group_norm instance_norm: BFloat16 34`). Per tensor (loss,\n"
    "  grad_norm, each gradient with --train-grad, parameter, moment and EMA),\n"
    "  e_ours = rel(ours, torch f32) and e_autocast = rel(autocast, torch f32), the\n"
    "  relative error norms above; it passes when\n"
    "      e_ours <= R * e_autocast  or  e_ours <= 1e-5,\n"
    "  R from --autocast-ratio (default 1.5). Below 1e-5 both sides hold f32 rounding\n"
    "  (our f32 steps match torch to ~1e-6): bf16 played no part and a ratio of two\n"
    "  roundings says nothing. A gradient or moment also passes at the autocast type's\n"
    "  rounding level, rel <= u (2^-8 bf16, 2^-11 f16; 2u for exp_avg_sq, the squares):\n"
    "  a gradient stored in that type carries up to one such rounding per element\n"
    "  whatever computed it, and on a tensor of a few elements autocast's own rounding\n"
    "  may land closer by chance. The vanishing rule (gradients, moments; T = --tolerance,\n"
    "  default 5e-2) and the noise-driven rule (parameters, EMA) apply as above, before\n"
    "  the ratio; a moment of a noise-driven parameter (SGD's momentum buffer holds the\n"
    "  vanished gradient's noise beside the weight decay term) passes when\n"
    "  ||ours - torch f32|| <= 2 * the vanishing limit (both noises below it). Lines as above, with each tensor kind's largest ratio e_ours/e_autocast,\n"
    "  the tensor that has it and its two errors, and `N at f32 level` for the tensors\n"
    "  that pass by the 1e-5 floor alone; scalar lines add autocast's error and the ratio.\n"
    "  Errors made of a few discrete events are compared as counts. AdamW turns the sign\n"
    "  of each gradient element into an update of up to lr, so an element whose gradient\n"
    "  is within rounding noise of 0 moves by up to the noise bound B above (2B between\n"
    "  two runs), whichever run it is. With --train-grad a `sign flips` line counts, per\n"
    "  step, the gradient elements of ours and of autocast whose sign differs from torch\n"
    "  f32's. For parameters and EMA, e in units of one element moved by 2B (2B/|ref|;\n"
    "  for the EMA, B followed through the EMA) is k = e^2 elements' worth. A count k of\n"
    "  ours (flips, or elements' worth) passes when\n"
    "      k_ours <= R^2 k_autocast  or  k_ours - R^2 k_autocast <= 3 R sqrt(k_ours + k_autocast),\n"
    "  two Poisson counts whose rates may be in the ratio R^2, allowed three standard\n"
    "  deviations: for large counts the ratio rule, for a handful what chance gives two\n"
    "  runs of equal quality. loss and grad_norm, single numbers, pass this way too with\n"
    "  k_autocast = 1 (of two runs with equal error spreads, one is 1.5 times the other's\n"
    "  in a third of the cases).\n"
    "  A gradient, moment or parameter whose error sits in few elements (exp_avg_sq, made\n"
    "  of the squared gradients, in its few largest; a bias of a few hundred elements; a\n"
    "  parameter, whose error is the sum of its updates': after SGD's first step exactly\n"
    "  its gradient's times lr (1 + momentum)) makes the\n"
    "  ratio of two errors itself noisy: where autocast's error d is spread over\n"
    "  n = (sum d^2)^2 / sum d^4 elements, k = n e^2 / e_autocast^2 is also compared as a\n"
    "  count (k_autocast = n) by the rule above. For a spread over many elements this is\n"
    "  the ratio rule; a sum of n squared Gaussian errors varies more than a Poisson count\n"
    "  of n, so the allowance errs on the strict side.\n"
    "  A bf16-mixed artifact's <loss>_grad runs in bf16 on either backend, so\n"
    "  --train-grad compares bf16 gradients (an fp16-mixed artifact has none: its\n"
    "  gradients exist only scaled, inside the step).\n"
    "  With loss scaling, ours' found_inf must equal torch f32's or autocast's (ours\n"
    "  overflows where one of them does, or nowhere), and ours' loss_scale, growth_tracker\n"
    "  and optimizer.step must equal what GradScaler's update makes of ours' found_inf; a\n"
    "  non-finite grad_norm passes where torch f32's or autocast's is. A run in which ours\n"
    "  skipped every step compared nothing of the step and fails.\n"
    "\n"
    "--against-f64  with --precision f32 (the default): ours in f32 judged against torch's\n"
    "  own f32 rounding instead of a fixed tolerance. Torch runs twice, in turn, from the\n"
    "  same parameters and batch (ours' f32 values, exact in f64): in f64 (the reference,\n"
    "  the truth up to f64 rounding) and in f32 (the low run: torch's own rounding), each\n"
    "  with its own optimizer, EMA and state across steps. With --train-steps every step's\n"
    "  tensors are judged (loss, grad_norm, gradients with --train-grad, parameters,\n"
    "  moments, forward state, EMA); without, every output of each function (the forward\n"
    "  check). Per tensor, e_ours = rel(ours, torch f64) and e_f32 = rel(torch f32, torch\n"
    "  f64); it passes when\n"
    "      e_ours <= R * e_f32  or  e_ours <= 1e-5,\n"
    "  R from --f64-ratio (default 2). Below 1e-5 an error is f32 rounding of the order of\n"
    "  operations, where a ratio says nothing: torch's CPU sums are cascaded (its f32 loss is\n"
    "  often within one rounding of f64's), ours' reductions sum in f32 in other orders\n"
    "  (ours' loss 5e-8 to 2e-6 off on the small imported networks). Beyond it, ours must be\n"
    "  about as close to the truth as torch f32 is: a fixed tolerance cannot tell rounding\n"
    "  from a defect (deep networks' gradients of few voxels carry up to 6e-2 of f32\n"
    "  rounding in torch f32 itself), the ratio can (a LeakyReLU slope 0.01001 instead of 0.01 in ours, within a\n"
    "  1e-2 tolerance, is 2600 times torch f32's error on the small PlainConvUNet). The rest\n"
    "  is --against-autocast's rule with torch f64 as the reference and torch f32 as the\n"
    "  low run (`f32` where those lines say `autocast`): the vanishing rule (T = --tolerance,\n"
    "  default 1e-4: both norms below 1e-6 of the largest) and the noise-driven rule first,\n"
    "  then the counts (sign flips with --train-grad, elements moved by AdamW's noise bound,\n"
    "  the spread of f32's error, loss and grad_norm as counts of one); no rounding-level\n"
    "  rule (f32 is both sides' storage). The forward check applies the vanishing rule to\n"
    "  grad.* outputs, then the ratio and the 1e-5 level. With --device cuda both torch runs\n"
    "  are on the GPU by default (TF32 off; --torch-device cpu moves them to the host).\n"
    "  Costs one more torch run per step in f64 (on the CPU 1.2 to 7 times the f32 run).\n"
    "\n"
    "--train-grad  with --train-steps: also runs <loss>_grad on our backend with each\n"
    "  step's parameters (before the update) and compares every parameter gradient with\n"
    "  torch autograd's (before clipping), the vanishing rule above applying.\n"
    "  Each step also prints the wall time of our run (with --train-grad, <loss>_grad and\n"
    "  train_step) and of torch's.\n"
    "\n"
    "Devices:\n"
    "\n"
    "--device cuda  runs our side on medrun's CUDA backend: one CudaSession (GPU 0, the\n"
    "  artifact's kernels loaded once) for the whole medcheck run, each function run as\n"
    "  runCpu would (inputs and the parameters it reads uploaded, outputs and assigned\n"
    "  values downloaded). Needs an artifact compiled with `medc compile --target cuda`\n"
    "  and precision f32, or for --train-steps also --precision bf16 or f16 with a\n"
    "  train_step compiled with precision=bf16-mixed or fp16-mixed (the backend runs the\n"
    "  precision the step was compiled for). Applies to the forward check, --grad and --train-steps\n"
    "  (+ --train-grad); --fd always runs on the CPU backend in f64. MEDRUN_LIBCUDA names\n"
    "  another driver library (as for medrun).\n"
    "--torch-device cuda  computes the torch side on LibTorch's GPU 0: parameters, inputs,\n"
    "  constants and optimizer state live there; results come back to the CPU (f64) to be\n"
    "  compared. TF32 is off for cuDNN convolutions and cuBLAS matmuls (f32 products stay\n"
    "  f32) and cuDNN benchmarking is off. Our run always ends (results on the host) before\n"
    "  torch's starts, and the GPU memory torch's caching allocator keeps is released\n"
    "  before each of our runs (c10::getDeviceAllocator's emptyCache, or in older CUDA\n"
    "  builds the CUDA caching allocator's), so that both sides can use most of one GPU in\n"
    "  turn. Needs a LibTorch with CUDA and a GPU.\n"
    "--torch-recompute  runs torch's autograd reference (--grad, --train-steps) in parts, so\n"
    "  that the reference of a large network fits the device: the loss function's ops are cut\n"
    "  into segments of about equal estimated autograd memory, the forward pass keeps only the\n"
    "  values later segments read, and the backward pass runs each segment again under\n"
    "  autograd, last first, passing the gradients on (activation checkpointing). The\n"
    "  gradients are those of the reference in one piece (a value read by several segments\n"
    "  gets its gradient summed in autograd's order); it costs one more forward pass. Without\n"
    "  the option it runs in parts where its estimate exceeds the free memory of torch's\n"
    "  device (the GPU's as the driver tells it plus what torch's allocator holds unused, or\n"
    "  the host's MemAvailable); --no-torch-recompute never. A line `torch recompute ...`\n"
    "  says when it ran in parts, in how many, and the estimates. --torch-recompute-segments N\n"
    "  aims at N segments; --torch-recompute-verify also runs the reference in one piece and\n"
    "  fails unless every output and gradient is equal bit for bit (a test of the\n"
    "  segmentation, meant for the CPU: GPU libraries may choose other algorithms when run\n"
    "  again).\n"
    "\n"
    "options:\n"
    "  --func NAME        check function NAME (repeatable; default: every function)\n"
    "  --seed S           seed of the parameters and inputs (default 0)\n"
    "  --tolerance T      largest relative error norm that passes\n"
    "                     (default 1e-4 for f32, 1e-10 for f64, 5e-2 for bf16, 1e-2 for f16)\n"
    "  --precision P      f32 or f64: storage type of our run and the type torch\n"
    "                     computes in (default f32); with --train-steps also bf16 or f16\n"
    "                     (mixed precision on our side, f32 in torch, see above)\n"
    "  --threads N        threads of medrun and of torch, which always get the same\n"
    "                     number (default: medrun's, MEDRUN_THREADS or the hardware\n"
    "                     concurrency)\n"
    "  --grad             check <f>_grad against torch autograd instead of the forward\n"
    "                     check (see above)\n"
    "  --fd N             check <f>_grad with finite differences at N elements per\n"
    "                     tensor (see above); with --grad, both checks run\n"
    "  --fd-params REGEX  with --fd: only the tensors whose name (a parameter name or\n"
    "                     arg<i>) contains a match of the ECMAScript REGEX\n"
    "  --fd-tolerance T   with --fd: relative tolerance beyond the noise (default 1e-6)\n"
    "  --train-steps N    check N training steps (see above)\n"
    "  --lr L             with --train-steps: base learning rate (default 1e-3)\n"
    "  --lr-schedule S    with --train-steps: constant (default) or cosine\n"
    "  --ema-decay D      with --train-steps: EMA decay after the warm-up (default 0.999)\n"
    "  --ema-warmup W     with --train-steps: steps with EMA decay 0 (default 0)\n"
    "  --loss-scale S     with --train-steps on an fp16-mixed step: the first loss scale\n"
    "                     (default: the artifact's init_loss_scale)\n"
    "  --train-grad       with --train-steps: compare the gradients too (see above)\n"
    "  --against-autocast with --train-steps and --precision bf16 or f16: judge ours\n"
    "                     against torch autocast's error (see above)\n"
    "  --autocast-ratio R with --against-autocast: the largest e_ours / e_autocast that\n"
    "                     passes (default 1.5)\n"
    "  --autocast-type T  with --against-autocast: bf16 or f16, the type torch autocast\n"
    "                     computes in (default: --precision's)\n"
    "  --against-f64      with --precision f32: judge ours against torch f32's error,\n"
    "                     both next to torch f64 (see above)\n"
    "  --f64-ratio R      with --against-f64: the largest e_ours / e_f32 that passes\n"
    "                     (default 2)\n"
    "  --autocast-types   with --against-autocast: print the autocast run's type flow\n"
    "                     (see above)\n"
    "  --device D         our backend: cpu (default) or cuda (see above)\n"
    "  --torch-device D   where LibTorch computes: cpu or cuda (default: as --device)\n"
    "  --torch-recompute  run torch's autograd reference in parts (see above; default:\n"
    "                     where it would not fit the free memory)\n"
    "  --no-torch-recompute  in one piece, always\n"
    "  --torch-recompute-segments N  in parts, aiming at N segments\n"
    "  --torch-recompute-verify  in parts, and require it equal to one piece bit for bit\n"
    "  --help             print this help\n"
    "  --version          the version, the git commit, LibTorch's and the GPU libraries'\n"
    "\n"
    "exit status: 0 all outputs within the tolerance, 1 a failed comparison or an error,\n"
    "2 a usage error, including --grad or --fd on an artifact (or a --func selection)\n"
    "without <f>_grad functions, and a --fd-params matching no tensor, --train-steps on an\n"
    "artifact without train_step or its loss function, --train-grad without <loss>_grad,\n"
    "--loss-scale on a step without loss scaling, --against-autocast without --precision\n"
    "bf16 or f16, --autocast-ratio or --autocast-type without --against-autocast, --against-f64\n"
    "with another precision than f32, with --against-autocast, --grad, --fd or --fusions,\n"
    "--f64-ratio without --against-f64, --device\n"
    "cuda with a precision other than f32 (bf16 or f16 with --train-steps on a step\n"
    "compiled for it). No CUDA driver or GPU (--device cuda), or a LibTorch without CUDA\n"
    "(--torch-device cuda): an error, exit status 1.\n";

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string value;
    bool hasInline = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      value = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
      hasInline = true;
    }
    auto next = [&]() -> std::string {
      if (hasInline)
        return value;
      if (i + 1 >= argc)
        throw UsageError(str(a, " needs a value"));
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "--version") {
      o.version = true;
    } else if (a == "--func") {
      o.funcs.push_back(next());
    } else if (a == "--seed") {
      o.seed = parseUnsigned(a, next());
    } else if (a == "--tolerance") {
      o.tolerance = parsePositive(a, next());
    } else if (a == "--precision") {
      std::string p = next();
      if (p == "f32")
        o.precision = medrun::Precision::F32;
      else if (p == "f64")
        o.precision = medrun::Precision::F64;
      else if (p == "bf16")
        o.precision = medrun::Precision::BF16;
      else if (p == "f16")
        o.precision = medrun::Precision::F16;
      else
        throw UsageError(str("--precision must be f32, f64, bf16 or f16, got '", p, "'"));
    } else if (a == "--threads") {
      uint64_t n = parseUnsigned(a, next());
      if (n < 1 || n > 4096)
        throw UsageError(str("--threads expects 1 to 4096, got '", n, "'"));
      o.threads = static_cast<int>(n);
    } else if (a == "--fusions") {
      if (hasInline)
        throw UsageError("--fusions takes no value");
      o.fusions = true;
    } else if (a == "--grad") {
      if (hasInline)
        throw UsageError("--grad takes no value");
      o.grad = true;
    } else if (a == "--fd") {
      uint64_t n = parseUnsigned(a, next());
      if (n < 1 || n > 1000000)
        throw UsageError(str("--fd expects 1 to 1000000 elements per tensor, got '", n, "'"));
      o.fd = static_cast<int64_t>(n);
    } else if (a == "--fd-params") {
      o.fdParams = next();
      o.hasFdParams = true;
      try {
        o.fdRegex = std::regex(o.fdParams, std::regex::ECMAScript);
      } catch (const std::regex_error &e) {
        throw UsageError(str("--fd-params: invalid regular expression '", o.fdParams, "': ",
                             e.what()));
      }
    } else if (a == "--fd-tolerance") {
      o.fdTolerance = parsePositive(a, next());
    } else if (a == "--train-steps") {
      uint64_t n = parseUnsigned(a, next());
      if (n < 1 || n > 1000000)
        throw UsageError(str("--train-steps expects 1 to 1000000, got '", n, "'"));
      o.trainSteps = static_cast<int64_t>(n);
    } else if (a == "--lr") {
      o.lr = parsePositive(a, next());
      o.hasTrainOnly = true;
    } else if (a == "--lr-schedule") {
      o.lrSchedule = next();
      if (o.lrSchedule != "constant" && o.lrSchedule != "cosine")
        throw UsageError(str("--lr-schedule must be constant or cosine, got '", o.lrSchedule,
                             "'"));
      o.hasTrainOnly = true;
    } else if (a == "--ema-decay") {
      std::string v = next();
      char *end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(d >= 0 && d <= 1))
        throw UsageError(str("--ema-decay expects a number in [0, 1], got '", v, "'"));
      o.emaDecay = d;
      o.hasTrainOnly = true;
    } else if (a == "--ema-warmup") {
      o.emaWarmup = static_cast<int64_t>(parseUnsigned(a, next()));
      o.hasTrainOnly = true;
    } else if (a == "--loss-scale") {
      o.lossScale = parsePositive(a, next());
      if (o.lossScale > 3.4028234663852886e38)
        throw UsageError(str("--loss-scale must be a finite f32 number, got '", o.lossScale, "'"));
      o.hasTrainOnly = true;
    } else if (a == "--train-grad") {
      if (hasInline)
        throw UsageError("--train-grad takes no value");
      o.trainGrad = true;
      o.hasTrainOnly = true;
    } else if (a == "--against-autocast") {
      if (hasInline)
        throw UsageError("--against-autocast takes no value");
      o.againstAutocast = true;
      o.hasTrainOnly = true;
    } else if (a == "--against-f64") {
      if (hasInline)
        throw UsageError("--against-f64 takes no value");
      o.againstF64 = true;
    } else if (a == "--f64-ratio") {
      o.f64Ratio = parsePositive(a, next());
      o.hasF64Ratio = true;
    } else if (a == "--autocast-types") {
      if (hasInline)
        throw UsageError("--autocast-types takes no value");
      o.autocastTypes = true;
    } else if (a == "--autocast-ratio") {
      o.autocastRatio = parsePositive(a, next());
      o.hasAutocastRatio = true;
    } else if (a == "--autocast-type") {
      std::string p = next();
      if (p == "bf16")
        o.autocastType = medrun::Precision::BF16;
      else if (p == "f16")
        o.autocastType = medrun::Precision::F16;
      else
        throw UsageError(str("--autocast-type must be bf16 or f16, got '", p, "'"));
    } else if (a == "--torch-recompute" || a == "--no-torch-recompute" ||
               a == "--torch-recompute-verify" || a == "--torch-recompute-fault") {
      if (hasInline)
        throw UsageError(str(a, " takes no value"));
      o.recompute.mode = a == "--no-torch-recompute" ? medcheck::Recompute::Mode::Off
                                                     : medcheck::Recompute::Mode::On;
      if (a == "--torch-recompute-verify")
        o.recompute.verify = true;
      if (a == "--torch-recompute-fault") // not in --help: the tests' negative control
        o.recompute.fault = true;
    } else if (a == "--torch-recompute-segments") {
      std::string n = next();
      uint64_t v = parseUnsigned(a, n);
      if (v < 1 || v > 100000)
        throw UsageError(str("--torch-recompute-segments expects 1 to 100000, got '", n, "'"));
      o.recompute.segments = static_cast<int64_t>(v);
      o.recompute.mode = medcheck::Recompute::Mode::On;
    } else if (a == "--device" || a == "--torch-device") {
      std::string d = next();
      if (d != "cpu" && d != "cuda")
        throw UsageError(str(a, " must be cpu or cuda, got '", d, "'"));
      (a == "--device" ? o.device : o.torchDevice) = d;
    } else if (a.size() > 1 && a[0] == '-') {
      throw UsageError(str("unknown option '", a, "'"));
    } else if (o.artifact.empty()) {
      o.artifact = a;
    } else {
      throw UsageError(str("more than one artifact given: '", o.artifact, "' and '", a, "'"));
    }
  }
  if (!o.help && !o.version && o.artifact.empty())
    throw UsageError("no artifact given");
  if (o.fd == 0 && o.hasFdParams)
    throw UsageError("--fd-params needs --fd N");
  if (o.fd == 0 && o.fdTolerance > 0)
    throw UsageError("--fd-tolerance needs --fd N");
  if (o.trainSteps == 0 && o.hasTrainOnly)
    throw UsageError("--lr, --lr-schedule, --ema-decay, --ema-warmup, --loss-scale, "
                     "--train-grad and --against-autocast need --train-steps N");
  if (o.againstAutocast && o.precision != medrun::Precision::BF16 &&
      o.precision != medrun::Precision::F16)
    throw UsageError("--against-autocast needs --precision bf16 or f16 (ours in bf16-mixed or "
                     "fp16-mixed, torch autocast to the same type)");
  if (o.againstF64 && o.precision != medrun::Precision::F32)
    throw UsageError("--against-f64 needs --precision f32 (ours in f32, torch in f64 and f32)");
  if (o.againstF64 && o.againstAutocast)
    throw UsageError("--against-f64 and --against-autocast do not combine");
  if (o.againstF64 && (o.grad || o.fd > 0 || o.fusions))
    throw UsageError("--against-f64 applies to --train-steps and the forward check, not to "
                     "--grad, --fd or --fusions");
  if (o.hasF64Ratio && !o.againstF64)
    throw UsageError("--f64-ratio needs --against-f64");
  if (o.autocastTypes && !o.againstAutocast)
    throw UsageError("--autocast-types needs --against-autocast");
  if (o.hasAutocastRatio && !o.againstAutocast)
    throw UsageError("--autocast-ratio needs --against-autocast");
  if (o.autocastType && !o.againstAutocast)
    throw UsageError("--autocast-type needs --against-autocast");
  if (o.againstAutocast && !o.autocastType)
    o.autocastType = o.precision;
  if (o.trainSteps == 0 &&
      (o.precision == medrun::Precision::BF16 || o.precision == medrun::Precision::F16))
    throw UsageError("--precision bf16 and f16 (mixed precision) need --train-steps N");
  if (o.trainSteps > 0 && (o.grad || o.fd > 0 || !o.funcs.empty()))
    throw UsageError("--train-steps does not combine with --grad, --fd or --func");
  if (o.torchDevice.empty())
    o.torchDevice = o.device;
  if (o.device == "cuda" && o.precision != medrun::Precision::F32 &&
      !((o.precision == medrun::Precision::BF16 || o.precision == medrun::Precision::F16) &&
        o.trainSteps > 0))
    throw UsageError("--device cuda runs f32, and bf16 or f16 with --train-steps (the CUDA "
                     "backend runs bf16-mixed and fp16-mixed training steps only); other "
                     "precisions need --device cpu");
  return o;
}

} // namespace medcheck
