//===- medcheck.cpp - checks medrun's CPU or CUDA backend against LibTorch ------------===//
//
//   medcheck X.medc [--func NAME]... [--seed S] [--tolerance T] [--precision f32|f64]
//            [--threads N] [--grad] [--fd N [--fd-params REGEX] [--fd-tolerance T]]
//            [--device cpu|cuda] [--torch-device cpu|cuda]
//   medcheck X.medc --train-steps N [--lr L] [--lr-schedule constant|cosine]
//            [--ema-decay D] [--ema-warmup W] [--loss-scale S] [--train-grad] [--seed S]
//            [--tolerance T] [--precision f32|f64|bf16|f16] [--threads N]
//            [--against-autocast [--autocast-ratio R] [--autocast-type bf16|f16]]
//            [--device cpu|cuda] [--torch-device cpu|cuda]
//
// For each selected function of the artifact: initializes the parameters (initParameters),
// draws random inputs by the role of each argument, runs the function with runCpu (or a
// CudaSession, --device cuda) and with the LibTorch reference of TorchReference.cpp (on
// torch's CPU or GPU, --torch-device), and compares every output.
// --grad compares the gradients <f>_grad computes with torch autograd of f's mapping;
// --fd compares them with central finite differences of f on our own backend in f64.
// --train-steps runs N steps of train_step against torch autograd + torch.optim + EMA
// (+ a GradScaler written out here for fp16-mixed steps); with --against-autocast, a bf16
// or f16 step is judged against torch autocast's error next to torch f32.
//
//===----------------------------------------------------------------------------------===//
#include "TorchReference.h"
#include "Version.h"

#include "medrun/AdamDrift.h"
#include "medrun/Artifact.h"
#include "medrun/Cuda.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/GpuLibraries.h"
#include "medrun/InputRoles.h"
#include "medrun/Parallel.h"
#include "medrun/Tensor.h"

#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/version.h>

// Releasing the GPU memory torch's caching allocator holds (between our run and torch's on
// one GPU): through c10::getDeviceAllocator where this LibTorch has it (found by
// releaseCached below, so that no version number is assumed), else, in a CUDA build of a
// LibTorch older than 2.10, through the CUDA caching allocator itself (MEDCHECK_TORCH_CUDA
// comes from CMake: the header alone is no proof, Debian's CPU-only LibTorch ships it
// without libc10_cuda).
#if __has_include(<c10/core/CachingDeviceAllocator.h>)
#include <c10/core/CachingDeviceAllocator.h>
#endif
#if (TORCH_VERSION_MAJOR < 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 10)) && \
    defined(MEDCHECK_TORCH_CUDA) && __has_include(<c10/cuda/CUDACachingAllocator.h>) && \
    __has_include(<c10/cuda/impl/cuda_cmake_macros.h>) && __has_include(<cuda_runtime_api.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#define MEDCHECK_CUDA_CACHING_ALLOCATOR 1
#endif

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

using medrun::Error;
using medrun::str;

namespace {

const char *kUsage =
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
    "  (its promote policy). Per tensor (loss,\n"
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
    "  the ratio. Lines as above, with each tensor kind's largest ratio e_ours/e_autocast,\n"
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
    "  A gradient or moment whose error sits in few elements (exp_avg_sq, made of the\n"
    "  squared gradients, in its few largest; a bias of a few hundred elements) makes the\n"
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
    "bf16 or f16, --autocast-ratio or --autocast-type without --against-autocast, --device\n"
    "cuda with a precision other than f32 (bf16 or f16 with --train-steps on a step\n"
    "compiled for it). No CUDA driver or GPU (--device cuda), or a LibTorch without CUDA\n"
    "(--torch-device cuda): an error, exit status 1.\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string artifact;
  std::vector<std::string> funcs;
  uint64_t seed = 0;
  double tolerance = -1; // < 0: the precision's default
  medrun::Precision precision = medrun::Precision::F32;
  int threads = 0;
  bool help = false;
  bool version = false;
  bool grad = false;
  bool fusions = false; ///< --fusions: each fusion body in isolation
  int64_t fd = 0; ///< > 0: finite differences with this many elements per tensor
  std::string fdParams;
  bool hasFdParams = false;
  std::regex fdRegex;
  double fdTolerance = -1; // < 0: default
  int64_t trainSteps = 0;   ///< > 0: --train-steps
  double lr = 1e-3;
  bool hasLr = false;
  std::string lrSchedule = "constant";
  double emaDecay = 0.999;
  int64_t emaWarmup = 0;
  double lossScale = 0; ///< > 0: --loss-scale
  bool trainGrad = false;
  bool againstAutocast = false; ///< --against-autocast
  double autocastRatio = 1.5;
  bool hasAutocastRatio = false;
  std::optional<medrun::Precision> autocastType; ///< --autocast-type (default: --precision)
  bool hasTrainOnly = false; ///< an option that needs --train-steps
  std::string device = "cpu"; ///< our backend: cpu or cuda
  std::string torchDevice;    ///< where LibTorch computes: cpu or cuda (empty: as device)
  medcheck::Recompute recompute; ///< --torch-recompute and its variants
};

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

// ---- comparison -----------------------------------------------------------------------

struct Comparison {
  double maxAbs = 0, rel = 0;
  double oursNorm = 0, refNorm = 0; ///< 2-norms of the finite values
  std::string problem; ///< non-empty: a mismatch other than the values
};

/// `x` (any device and float type) against `ref`, as compare below.
Comparison compareTorch(const torch::Tensor &x, const torch::Tensor &ref) {
  Comparison c;
  torch::Tensor ours = x.to(torch::kCPU, torch::kDouble).contiguous();
  torch::Tensor theirs = ref.to(torch::kCPU, torch::kDouble).contiguous(); // from any device
  if (ours.sizes() != theirs.sizes()) {
    c.problem = str("shape ", medrun::shapeStr(medrun::Shape(x.sizes().begin(), x.sizes().end())),
                    " vs torch ",
                    medrun::shapeStr(medrun::Shape(ref.sizes().begin(), ref.sizes().end())));
    c.maxAbs = c.rel = NAN;
    return c;
  }
  if (ours.numel() == 0)
    return c;
  // Two results that are NaN everywhere agree on nothing: comparing them checks nothing.
  // (Infinities are compared, signs included.)
  if (!(~theirs.isnan()).any().item<bool>()) {
    c.problem = "torch's result is NaN everywhere: nothing to compare";
    c.maxAbs = c.rel = NAN;
    return c;
  }
  // Equal where both are NaN or both hold the same value (infinities included).
  torch::Tensor same = (ours.isnan() & theirs.isnan()) | ours.eq(theirs);
  torch::Tensor diff = torch::where(same, torch::zeros_like(ours), ours - theirs);
  c.maxAbs = diff.abs().max().item<double>();
  double diffNorm = diff.norm().item<double>();
  torch::Tensor finite = torch::where(theirs.isfinite(), theirs, torch::zeros_like(theirs));
  double refNorm = finite.norm().item<double>();
  c.refNorm = refNorm;
  c.oursNorm = torch::where(ours.isfinite(), ours, torch::zeros_like(ours)).norm().item<double>();
  c.rel = refNorm > 0 ? diffNorm / refNorm : diffNorm;
  if (std::isnan(c.maxAbs) || std::isnan(diffNorm))
    c.maxAbs = c.rel = NAN;
  return c;
}

/// How many elements the difference d = x - ref is spread over: (sum d^2)^2 / sum d^4 (1 when
/// one element holds it all, the element count when all are alike; 0 for no difference).
double spreadOf(const torch::Tensor &x, const torch::Tensor &ref) {
  torch::Tensor d = x.to(torch::kCPU, torch::kDouble) - ref.to(torch::kCPU, torch::kDouble);
  d = torch::where(d.isfinite(), d, torch::zeros_like(d));
  const double largest = d.numel() ? d.abs().max().item<double>() : 0;
  if (!(largest > 0))
    return 0;
  torch::Tensor sq = (d / largest).square(); // scaled: no underflow in d^4
  const double s2 = sq.sum().item<double>(), s4 = sq.square().sum().item<double>();
  return s2 * s2 / s4;
}

Comparison compare(const medrun::Tensor &ours, const torch::Tensor &ref) {
  return compareTorch(medcheck::toTorch(ours), ref);
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

std::string seconds(double s) {
  char buf[32];
  if (s < 1)
    std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

double now() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// ---- the two sides --------------------------------------------------------------------

/// Empties the cache of the device allocator of `type` and returns true, where LibTorch has
/// c10::getDeviceAllocator (found by argument-dependent lookup, so that the overload drops
/// out where it does not exist); false otherwise.
template <typename DeviceType>
auto releaseCached(DeviceType type, int)
    -> decltype(getDeviceAllocator(type)->emptyCache(), bool()) {
  getDeviceAllocator(type)->emptyCache();
  return true;
}
template <typename DeviceType> bool releaseCached(DeviceType, long) { return false; }

/// Torch's caching allocator on GPU 0: bytes allocated and reserved (taken from the driver),
/// now and at their peak since the last resetTorchPeak, where this LibTorch tells them.
struct TorchMemory {
  int64_t allocated = 0, allocatedPeak = 0, reserved = 0, reservedPeak = 0;
};
template <typename DeviceType>
auto torchMemory(DeviceType type, int)
    -> decltype(getDeviceAllocator(type)->getDeviceStats(0), std::optional<TorchMemory>()) {
  auto s = getDeviceAllocator(type)->getDeviceStats(0);
  // index 0: StatType::AGGREGATE (both pools)
  return TorchMemory{s.allocated_bytes[0].current, s.allocated_bytes[0].peak,
                     s.reserved_bytes[0].current, s.reserved_bytes[0].peak};
}
template <typename DeviceType> std::optional<TorchMemory> torchMemory(DeviceType, long) {
#ifdef MEDCHECK_CUDA_CACHING_ALLOCATOR
  auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  return TorchMemory{s.allocated_bytes[0].current, s.allocated_bytes[0].peak,
                     s.reserved_bytes[0].current, s.reserved_bytes[0].peak};
#else
  return std::nullopt;
#endif
}
template <typename DeviceType>
auto resetTorchPeak(DeviceType type, int) -> decltype(getDeviceAllocator(type)->resetPeakStats(0)) {
  getDeviceAllocator(type)->resetPeakStats(0);
}
template <typename DeviceType> void resetTorchPeak(DeviceType, long) {
#ifdef MEDCHECK_CUDA_CACHING_ALLOCATOR
  c10::cuda::CUDACachingAllocator::resetPeakStats(0);
#endif
}

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GiB", bytes / double(size_t(1) << 30));
  return b;
}

/// Device memory in use on the GPU of the calling thread's CUDA context, as cudaMemGetInfo
/// tells it (total - free: both sides, every context, other processes), read through the
/// driver the CUDA backend loads (MEDRUN_LIBCUDA, else libcuda.so.1); and its peak over a
/// stretch of work, sampled every millisecond by a thread of its own (allocations that live
/// less than that can be missed).
class DeviceMemory {
public:
  static DeviceMemory &get() {
    static DeviceMemory m;
    return m;
  }
  ~DeviceMemory() { stop(); }
  /// (in use, total) now; false where the driver does not tell.
  bool now(size_t &used, size_t &total) const {
    size_t free = 0;
    if (!getInfo || getInfo(&free, &total) != 0)
      return false;
    used = total - free;
    return true;
  }
  /// Starts sampling on the calling thread's context (nothing where there is none).
  void start() {
    stop();
    void *ctx = nullptr;
    size_t used = 0, total = 0;
    if (!getCurrent || !setCurrent || getCurrent(&ctx) != 0 || !ctx || !now(used, total))
      return;
    peak = used;
    running = true;
    sampler = std::thread([this, ctx] {
      setCurrent(ctx);
      size_t u = 0, t = 0;
      while (running.load()) {
        if (now(u, t) && u > peak.load())
          peak = u;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  /// Stops sampling; the peak in use since start (with the reading now), 0 if unknown.
  size_t stop() {
    if (!sampler.joinable())
      return 0;
    running = false;
    sampler.join();
    size_t used = 0, total = 0;
    if (now(used, total) && used > peak.load())
      peak = used;
    return peak.load();
  }

private:
  using GetInfo = int (*)(size_t *, size_t *);
  using GetCurrent = int (*)(void **);
  using SetCurrent = int (*)(void *);
  DeviceMemory() {
    const char *path = std::getenv("MEDRUN_LIBCUDA");
    void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return;
    getInfo = reinterpret_cast<GetInfo>(dlsym(lib, "cuMemGetInfo_v2"));
    getCurrent = reinterpret_cast<GetCurrent>(dlsym(lib, "cuCtxGetCurrent"));
    setCurrent = reinterpret_cast<SetCurrent>(dlsym(lib, "cuCtxSetCurrent"));
  }
  GetInfo getInfo = nullptr;
  GetCurrent getCurrent = nullptr;
  SetCurrent setCurrent = nullptr;
  std::thread sampler;
  std::atomic<bool> running{false};
  std::atomic<size_t> peak{0};
};

/// "torch's allocator: peak 61.20 GiB allocated, 63.00 GiB reserved" (since the last reset),
/// or "now 0.95 GiB allocated, 1.00 GiB reserved"; empty where this LibTorch does not tell.
std::string torchMemoryText(bool peaks) {
  std::optional<TorchMemory> m;
  try {
    m = torchMemory(c10::DeviceType::CUDA, 0);
  } catch (const c10::Error &) {
  }
  if (!m)
    return "";
  return peaks ? str("torch's allocator: peak ", gib(double(m->allocatedPeak)), " allocated, ",
                     gib(double(m->reservedPeak)), " reserved")
               : str("torch holds ", gib(double(m->allocated)), " allocated, ",
                     gib(double(m->reserved)), " reserved");
}

/// Where each side computes: ours on medrun's CPU backend, or on the CUDA backend through
/// one CudaSession for the whole medcheck run (--device); torch on its CPU or its CUDA
/// device (--torch-device). With both on one GPU, each run needs the memory the other
/// leaves: ours frees its arena when a run ends (releaseMemory), and torch's cached blocks are released
/// before each of our runs (beforeOurs).
struct Sides {
  const medrun::Artifact &artifact;
  medrun::Precision precision = medrun::Precision::F32;
  medrun::CudaSession *cuda = nullptr; ///< --device cuda
  torch::Device torchDevice = torch::kCPU;
  medcheck::Recompute recompute; ///< how gradTorch runs (--torch-recompute)

  /// `recompute` with the memory torch's device has free now: on a GPU what the driver
  /// reports free plus what torch's allocator reserves but does not use, on the CPU the
  /// host's MemAvailable (0 where unknown: then it never runs in parts by itself).
  medcheck::Recompute recomputeNow() const {
    medcheck::Recompute r = recompute;
    r.availableBytes = 0;
    if (torchDevice.is_cuda()) {
      size_t used = 0, total = 0;
      if (DeviceMemory::get().now(used, total)) {
        r.availableBytes = total - used;
        try {
          if (std::optional<TorchMemory> m = torchMemory(c10::DeviceType::CUDA, 0))
            r.availableBytes += size_t(std::max<int64_t>(0, m->reserved - m->allocated));
        } catch (const c10::Error &) {
        }
      }
    } else if (FILE *f = std::fopen("/proc/meminfo", "r")) {
      char line[256];
      unsigned long long kib = 0;
      while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
          r.availableBytes = size_t(kib) * 1024;
          break;
        }
      std::fclose(f);
    }
    return r;
  }

  /// Our run of `fn` (runCpu's interface); outputs and `updates` come back on the host.
  std::vector<medrun::Tensor> ours(const medrun::Function &fn,
                                   const std::vector<medrun::Tensor> &inputs,
                                   const medrun::TensorMap &params,
                                   medrun::TensorMap *updates = nullptr) const {
    if (cuda) {
      const bool shared = torchDevice.is_cuda(); // both sides on one GPU
      if (shared)
        DeviceMemory::get().start();
      std::vector<medrun::Tensor> out = cuda->run(fn, inputs, params, nullptr, updates);
      if (shared) {
        const size_t peak = DeviceMemory::get().stop();
        const std::string held =
            str(gib(double(cuda->deviceBytes())), " (values ", gib(double(cuda->arenaBytes())),
                ", cuDNN workspace ", gib(double(cuda->workspaceBytes())), ", resident ",
                gib(double(cuda->stateBytes())), ")");
        cuda->releaseMemory(); // torch needs the GPU next
        // What a reader needs to see that each side fits in turn: ours' peak with torch's
        // live tensors beside it, and what is left in use once ours is released.
        size_t used = 0, total = 0;
        const bool known = DeviceMemory::get().now(used, total);
        std::cout << "memory  ours " << fn.name << ": held " << held;
        if (peak)
          std::cout << "; peak " << gib(double(peak)) << " in use on the GPU";
        if (known)
          std::cout << "; after releasing ours " << gib(double(used)) << " in use of "
                    << gib(double(total));
        if (std::string t = torchMemoryText(false); !t.empty())
          std::cout << " (" << t << ")";
        std::cout << "\n" << std::flush;
      }
      return out;
    }
    return medrun::runCpu(artifact, fn, inputs, params, precision, nullptr, updates);
  }

  /// A copy of `t` on torch's device.
  torch::Tensor toTorch(const medrun::Tensor &t) const {
    return medcheck::toTorch(t, torchDevice);
  }

  /// Before each of our runs: with torch on a GPU, the memory its caching allocator keeps
  /// goes back to the driver (the tensors still alive, parameters and optimizer state, stay).
  void beforeOurs() const {
    if (!torchDevice.is_cuda())
      return;
    torch::cuda::synchronize();
    std::string why = "this LibTorch offers no way to do it";
    try {
      if (releaseCached(c10::DeviceType::CUDA, 0))
        return;
#ifdef MEDCHECK_CUDA_CACHING_ALLOCATOR
      c10::cuda::CUDACachingAllocator::emptyCache();
      return;
#endif
    } catch (const c10::Error &e) {
      why = e.what_without_backtrace();
    }
    static bool told = false; // once: the check goes on, our runs get what torch leaves
    if (!told)
      std::cerr << "medcheck: torch's cached GPU memory is not released (" << why << ")\n";
    told = true;
  }

  /// Before torch's run: with torch on a GPU, its allocator's peaks are reset and the
  /// device's memory in use is sampled until afterTorch.
  void beforeTorch() const {
    if (!torchDevice.is_cuda())
      return;
    torch::cuda::synchronize();
    try {
      resetTorchPeak(c10::DeviceType::CUDA, 0);
    } catch (const c10::Error &) {
    }
    DeviceMemory::get().start();
  }

  /// After torch's run (`what`): waits for its kernels, so that its wall time is complete;
  /// with torch on a GPU, prints its peak memory (the device's and torch's allocator's).
  void afterTorch(const std::string &what) const {
    if (!torchDevice.is_cuda())
      return;
    torch::cuda::synchronize();
    const size_t peak = DeviceMemory::get().stop();
    size_t used = 0, total = 0;
    const bool known = DeviceMemory::get().now(used, total);
    std::cout << "memory  torch " << what << ":";
    if (peak)
      std::cout << " peak " << gib(double(peak)) << " in use on the GPU"
                << (known ? str(" of ", gib(double(total))) : std::string()) << ";";
    if (std::string t = torchMemoryText(true); !t.empty())
      std::cout << " " << t << ";";
    if (cuda)
      std::cout << " ours held " << gib(double(cuda->deviceBytes())) << " meanwhile";
    std::cout << "\n" << std::flush;
  }

  /// "2 threads" or "cuda", for the time lines.
  std::string oursWhere() const {
    return cuda ? std::string("cuda") : str(medrun::numThreads(), " threads");
  }
  std::string torchWhere() const {
    return torchDevice.is_cuda() ? std::string("cuda") : str(torch::get_num_threads(), " threads");
  }
};

// ---- gradients ------------------------------------------------------------------------

/// Values through which out0 depends on something differentiably: walking back from out0,
/// every operand but the data operands of the losses (the target, mask and pos_weight of
/// med.bce_with_logits, the targets of med.dice_ce), as docs/dialect.md defines them and
/// med-autodiff follows. Gradient ops and constants pass nothing on.
std::vector<bool> differentiablePaths(const medrun::Function &fn) {
  std::vector<bool> useful(fn.values.size(), false);
  if (fn.outputs.empty())
    return useful;
  useful.at(fn.outputs[0]) = true;
  for (auto op = fn.ops.rbegin(); op != fn.ops.rend(); ++op) {
    bool any = false;
    for (int r : op->results)
      any |= useful.at(r);
    const std::string &k = op->kind;
    bool gradOp = k == "conv3d_grad_weight" || k == "shift_sum_grad_weight" ||
                  (k.size() > 5 && k.compare(k.size() - 5, 5, "_grad") == 0);
    if (!any || gradOp || k == "constant")
      continue;
    for (const auto &[name, ids] : op->operands) {
      bool data = (k == "bce_with_logits" &&
                   (name == "target" || name == "mask" || name == "pos_weight")) ||
                  (k == "dice_ce" && name == "targets");
      if (data)
        continue;
      for (int id : ids)
        if (medrun::isFloat(fn.values.at(id).dtype))
          useful.at(id) = true;
    }
  }
  return useful;
}

/// A loss function and the gradient function med-autodiff made of it.
struct GradPair {
  const medrun::Function *f = nullptr, *g = nullptr;
};

/// What a gradient output of g is the gradient of.
struct GradTarget {
  enum Kind { Output, Param, Arg } kind = Output;
  std::string param; ///< Param: its name
  size_t index = 0;  ///< Output: out<index>; Arg: arg<index>
  std::string label; ///< the output name without "grad."
};

std::string outputName(const medrun::Function &fn, size_t i) {
  if (i < fn.outputNames.size() && !fn.outputNames[i].empty())
    return fn.outputNames[i];
  return str("out", i);
}

GradTarget gradTarget(const GradPair &p, size_t i) {
  std::string name = outputName(*p.g, i);
  GradTarget t;
  auto number = [&](const std::string &digits) -> std::optional<size_t> {
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    return static_cast<size_t>(std::stoull(digits));
  };
  if (name.rfind("grad.", 0) != 0) {
    auto k = name.rfind("out", 0) == 0 ? number(name.substr(3)) : std::nullopt;
    if (!k || *k >= p.f->outputs.size())
      throw Error(str(p.g->name, ": output ", i, " is named '", name, "', which names no ",
                      "result of ", p.f->name));
    t.kind = GradTarget::Output;
    t.index = *k;
    t.label = name;
    return t;
  }
  t.label = name.substr(5);
  if (t.label.rfind("arg", 0) == 0) {
    if (auto k = number(t.label.substr(3))) {
      if (*k >= p.f->inputs.size())
        throw Error(str(p.g->name, ": output '", name, "', but ", p.f->name, " has ",
                        p.f->inputs.size(), " arguments"));
      t.kind = GradTarget::Arg;
      t.index = *k;
      return t;
    }
  }
  t.kind = GradTarget::Param;
  t.param = t.label;
  return t;
}

/// The inputs of a function, drawn as the forward check draws them for `fn`'s name.
std::vector<medrun::Tensor> drawInputs(const medrun::Function &fn, uint64_t seed) {
  std::vector<medrun::Tensor> inputs;
  medrun::randomInputs(fn, inputs, seed);
  return inputs;
}

void printLine(const std::string &fn, const std::string &name, const medrun::Shape &shape,
               const Comparison &c, bool ok, const std::string &note) {
  std::cout << fn << "  " << name << "  " << medrun::shapeStr(shape) << "  max_abs "
            << sci(c.maxAbs) << "  rel " << sci(c.rel) << "  " << (ok ? "ok" : "FAIL");
  if (!c.problem.empty())
    std::cout << " (" << c.problem << ")";
  if (!note.empty())
    std::cout << " (" << note << ")";
  std::cout << "\n";
}

struct Counts {
  size_t checked = 0, failed = 0;
};

/// Gradients whose norms (ours and torch's) are both below kVanishing * tolerance * the
/// largest gradient norm of the function count as zero.
constexpr double kVanishing = 1e-2;

/// Default tolerances of the mixed-precision training checks (--precision bf16 / f16, see
/// --help): a few times the largest relative error seen over a few steps of the checked
/// networks; bf16 keeps 8 bits of mantissa per activation, f16 11.
constexpr double kBF16Tolerance = 5e-2, kF16Tolerance = 1e-2;

/// Pass or fail for each output of one function: the relative error norm within the
/// tolerance; or, for a gradient (isGrad), both norms vanishing next to the function's
/// largest gradient. A gradient that is zero mathematically (a bias right before an instance
/// norm, anything before a norm over a single voxel) is rounding noise on both sides, where
/// a relative error says nothing. Adds "vanishing: ..." to the note of such outputs.
std::vector<bool> judge(const std::vector<Comparison> &cs, const std::vector<bool> &isGrad,
                        double tolerance, std::vector<std::string> &notes) {
  double largest = 0;
  for (size_t i = 0; i < cs.size(); ++i)
    if (isGrad[i] && std::isfinite(cs[i].refNorm))
      largest = std::max(largest, cs[i].refNorm);
  double vanishing = kVanishing * tolerance * largest;
  std::vector<bool> ok;
  for (size_t i = 0; i < cs.size(); ++i) {
    const Comparison &c = cs[i];
    bool pass = c.problem.empty() && c.rel <= tolerance;
    if (!pass && isGrad[i] && c.problem.empty() && c.refNorm <= vanishing &&
        c.oursNorm <= vanishing) {
      pass = true;
      notes[i] = str("vanishing: both norms below ", sci(vanishing));
    }
    ok.push_back(pass);
  }
  return ok;
}

Counts checkForward(const Options &o, const Sides &sides,
                    const std::vector<const medrun::Function *> &fns,
                    const medrun::TensorMap &params,
                    const std::map<std::string, torch::Tensor> &torchParams, double tolerance,
                    torch::ScalarType floatType) {
  Counts n;
  for (const medrun::Function *fn : fns) {
    std::vector<medrun::Tensor> inputs = drawInputs(*fn, o.seed);
    std::vector<torch::Tensor> torchInputs;
    for (const medrun::Tensor &t : inputs)
      torchInputs.push_back(sides.toTorch(t));

    sides.beforeOurs();
    double t0 = now();
    std::vector<medrun::Tensor> ours = sides.ours(*fn, inputs, params);
    double t1 = now();
    sides.beforeTorch();
    std::vector<torch::Tensor> ref =
        medcheck::runTorch(sides.artifact, *fn, torchInputs, torchParams, floatType);
    sides.afterTorch(fn->name);
    double t2 = now();

    if (ours.size() != ref.size())
      throw Error(str(fn->name, ": medrun returned ", ours.size(), " outputs, torch ",
                      ref.size()));
    std::vector<Comparison> cs;
    std::vector<bool> isGrad;
    for (size_t i = 0; i < ours.size(); ++i) {
      cs.push_back(compare(ours[i], ref[i]));
      isGrad.push_back(outputName(*fn, i).rfind("grad.", 0) == 0);
    }
    std::vector<std::string> notes(ours.size());
    std::vector<bool> ok = judge(cs, isGrad, tolerance, notes);
    for (size_t i = 0; i < ours.size(); ++i) {
      ++n.checked;
      n.failed += ok[i] ? 0 : 1;
      printLine(fn->name, outputName(*fn, i), ours[i].shape(), cs[i], ok[i], notes[i]);
    }
    std::cout << fn->name << "  time  ours " << seconds(t1 - t0) << " (" << sides.oursWhere()
              << ")  torch " << seconds(t2 - t1) << " (" << sides.torchWhere() << ")\n"
              << std::flush;
  }
  return n;
}

/// --grad: f_grad on our backend against torch autograd of f's mapping.
Counts checkGrad(const Options &o, const Sides &sides, const std::vector<GradPair> &pairs,
                 const medrun::TensorMap &params,
                 const std::map<std::string, torch::Tensor> &torchParams, double tolerance,
                 torch::ScalarType floatType) {
  Counts n;
  for (const GradPair &p : pairs) {
    // The inputs of f, so that out<i> of f_grad and f agree.
    std::vector<medrun::Tensor> inputs = drawInputs(*p.f, o.seed);
    std::vector<torch::Tensor> torchInputs;
    for (const medrun::Tensor &t : inputs)
      torchInputs.push_back(sides.toTorch(t));
    std::vector<bool> paths = differentiablePaths(*p.f);

    sides.beforeOurs();
    double t0 = now();
    std::vector<medrun::Tensor> ours = sides.ours(*p.g, inputs, params);
    double t1 = now();
    sides.beforeTorch();
    medcheck::TorchGradients ref =
        medcheck::gradTorch(sides.artifact, *p.f, torchInputs, torchParams, floatType, {},
                            std::nullopt, sides.recomputeNow());
    if (!ref.recompute.empty())
      std::cout << "torch recompute  " << ref.recompute << "\n";
    sides.afterTorch(str("autograd of ", p.f->name));
    double t2 = now();

    std::vector<Comparison> cs;
    std::vector<std::string> notes;
    std::vector<bool> isGrad;
    for (size_t i = 0; i < ours.size(); ++i) {
      GradTarget t = gradTarget(p, i);
      torch::Tensor expected;
      std::string note;
      switch (t.kind) {
      case GradTarget::Output:
        expected = ref.outputs.at(t.index);
        break;
      case GradTarget::Param: {
        auto it = ref.params.find(t.param);
        if (it == ref.params.end())
          throw Error(str(p.g->name, ": returns '", outputName(*p.g, i), "', but ", p.f->name,
                          " reads no float parameter '", t.param, "'"));
        expected = it->second;
        if (!ref.paramReached.at(t.param))
          note = "loss does not depend on it, zero";
        break;
      }
      case GradTarget::Arg:
        expected = ref.inputs.at(t.index);
        if (!expected.defined())
          throw Error(str(p.g->name, ": returns '", outputName(*p.g, i), "' for an argument ",
                          "that is not a float tensor"));
        if (!paths.at(p.f->inputs.at(t.index)))
          note = "data, zero";
        break;
      }
      cs.push_back(compare(ours[i], expected));
      notes.push_back(note);
      isGrad.push_back(t.kind != GradTarget::Output);
    }
    std::vector<bool> ok = judge(cs, isGrad, tolerance, notes);
    for (size_t i = 0; i < ours.size(); ++i) {
      ++n.checked;
      n.failed += ok[i] ? 0 : 1;
      printLine(p.g->name, outputName(*p.g, i), ours[i].shape(), cs[i], ok[i], notes[i]);
    }
    std::cout << p.g->name << "  time  ours " << seconds(t1 - t0) << " (" << sides.oursWhere()
              << ")  torch autograd " << seconds(t2 - t1) << " (" << sides.torchWhere() << ")\n"
              << std::flush;
  }
  return n;
}

/// N distinct flat indices of [0, numel), or all of them when there are no more than N.
std::vector<int64_t> sampleIndices(int64_t numel, int64_t n, uint64_t seed) {
  std::vector<int64_t> out;
  if (numel <= n) {
    for (int64_t i = 0; i < numel; ++i)
      out.push_back(i);
    return out;
  }
  std::mt19937_64 rng(seed);
  std::set<int64_t> seen;
  std::uniform_int_distribution<int64_t> d(0, numel - 1);
  while (static_cast<int64_t>(out.size()) < n) {
    int64_t i = d(rng);
    if (seen.insert(i).second)
      out.push_back(i);
  }
  std::sort(out.begin(), out.end());
  return out;
}

medrun::Tensor toF64(const medrun::Tensor &t) {
  if (!medrun::isFloat(t.dtype()))
    return t;
  return t.dtype() == medrun::DType::F64 ? t.clone() : t.to(medrun::DType::F64);
}

/// Whether --fd-params (if any) selects the gradient output `i` of `p`.
bool fdSelected(const Options &o, const GradPair &p, size_t i) {
  GradTarget t = gradTarget(p, i);
  if (t.kind == GradTarget::Output)
    return false;
  return !o.hasFdParams || std::regex_search(t.label, o.fdRegex);
}

bool fdSelectsAny(const Options &o, const GradPair &p) {
  for (size_t i = 0; i < p.g->outputs.size(); ++i)
    if (fdSelected(o, p, i))
      return true;
  return false;
}

/// Bound on the rounding error of the two losses of a central difference, in ulps of |L|.
constexpr double kFdNoiseUlps = 64;

/// --fd: central differences of f on our backend in f64 against f_grad in f64.
Counts checkFd(const Options &o, const medrun::Artifact &artifact,
               const std::vector<GradPair> &pairs, const medrun::TensorMap &params,
               double tolerance, size_t &elements) {
  Counts n;
  const medrun::Precision f64 = medrun::Precision::F64;
  medrun::TensorMap params64;
  for (const auto &[name, t] : params)
    params64[name] = toF64(t);
  for (const GradPair &p : pairs) {
    if (!fdSelectsAny(o, p))
      continue;
    std::vector<medrun::Tensor> inputs = drawInputs(*p.f, o.seed);
    for (medrun::Tensor &t : inputs)
      t = toF64(t);
    std::vector<bool> paths = differentiablePaths(*p.f);

    double t0 = now();
    std::vector<medrun::Tensor> ours = medrun::runCpu(artifact, *p.g, inputs, params64, f64);
    double loss0 = ours.at(0).at(0);
    size_t forwards = 0;
    auto loss = [&]() {
      ++forwards;
      return medrun::runCpu(artifact, *p.f, inputs, params64, f64).at(0).at(0);
    };

    for (size_t i = 0; i < ours.size(); ++i) {
      if (!fdSelected(o, p, i))
        continue;
      GradTarget t = gradTarget(p, i);
      const std::string name = outputName(*p.g, i);
      const medrun::Tensor &g = ours[i];
      medrun::Tensor *target = nullptr;
      if (t.kind == GradTarget::Param) {
        auto it = params64.find(t.param);
        if (it == params64.end())
          throw Error(str(p.g->name, ": returns '", name, "' for an unknown parameter"));
        target = &it->second;
      } else {
        target = &inputs.at(t.index);
      }
      if (target->shape() != g.shape() || target->dtype() != medrun::DType::F64)
        throw Error(str(p.g->name, ": '", name, "' is ", medrun::shapeStr(g.shape()),
                        ", the float tensor it differentiates ",
                        medrun::shapeStr(target->shape()), " ",
                        medrun::dtypeName(target->dtype())));

      if (t.kind == GradTarget::Arg && !paths.at(p.f->inputs.at(t.index))) {
        // Data (target, mask, pos_weight): no gradient by definition; ours must be zero.
        double maxAbs = 0;
        for (int64_t k = 0; k < g.numel(); ++k)
          maxAbs = std::max(maxAbs, std::abs(g.at(k)));
        bool ok = maxAbs == 0;
        ++n.checked;
        n.failed += ok ? 0 : 1;
        std::cout << p.g->name << "  " << name << "  " << medrun::shapeStr(g.shape())
                  << "  data, not perturbed  max_abs " << sci(maxAbs) << "  "
                  << (ok ? "ok" : "FAIL") << "\n"
                  << std::flush;
        continue;
      }

      std::vector<int64_t> idx =
          sampleIndices(target->numel(), o.fd, medrun::inputSeed(o.seed, p.f->name + "/" + name, 0));
      double maxAbs = 0, maxErr = 0, maxNoise = 0;
      bool finite = true;
      double *data = target->data<double>();
      for (int64_t k : idx) {
        double v = data[k];
        double h = 1e-6 * std::max(1.0, std::abs(v));
        double up = v + h, down = v - h;
        data[k] = up;
        double lUp = loss();
        data[k] = down;
        double lDown = loss();
        data[k] = v;
        double step = up - down;
        double fd = (lUp - lDown) / step;
        double analytic = g.at(k);
        double diff = std::abs(fd - analytic);
        // Rounding noise of the difference quotient: L(v±h) are each off by a few ulps of
        // |L|, divided by 2h. kFdNoiseUlps is generous: we see up to ~15 on the op tests,
        // 8 on MedNeXt-S.
        double noise = kFdNoiseUlps * std::numeric_limits<double>::epsilon() *
                       std::max({1.0, std::abs(loss0), std::abs(lUp), std::abs(lDown)}) / step;
        double scale = std::max(std::abs(fd), std::abs(analytic));
        double beyond = std::max(0.0, diff - noise);
        double err = beyond == 0 ? 0 : scale > 0 ? beyond / scale : INFINITY;
        if (!std::isfinite(fd) || !std::isfinite(analytic))
          finite = false;
        maxAbs = std::max(maxAbs, diff);
        maxNoise = std::max(maxNoise, noise);
        maxErr = std::max(maxErr, err);
      }
      elements += idx.size();
      bool ok = finite && maxErr <= tolerance;
      ++n.checked;
      n.failed += ok ? 0 : 1;
      std::cout << p.g->name << "  " << name << "  " << medrun::shapeStr(g.shape()) << "  fd "
                << idx.size() << " of " << target->numel() << "  max_abs "
                << (finite ? sci(maxAbs) : "nan") << "  noise " << sci(maxNoise) << "  rel "
                << (finite ? sci(maxErr) : "nan") << "  " << (ok ? "ok" : "FAIL") << "\n"
                << std::flush;
    }
    std::cout << p.g->name << "  time  fd " << seconds(now() - t0) << " (" << forwards
              << " forward runs of " << p.f->name << ", " << medrun::numThreads()
              << " threads)\n"
              << std::flush;
  }
  return n;
}

// ---- training steps -------------------------------------------------------------------

/// The med-train-step options of the artifact (options["train"], "key=value ..."), with
/// the pass's defaults (include/med/Transforms/Passes.td).
struct TrainOptions {
  std::string loss = "loss";
  std::string optimizer = "adamw";
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 1e-2, momentum = 0, clip = 0;
  bool nesterov = false, exemptNormBias = false, ema = false;
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

/// The largest relative error norm over tensors of one kind, with the tensor that has it.
struct KindSummary {
  size_t tensors = 0, failed = 0, vanishing = 0;
  double worst = 0;
  std::string worstName;
  std::string firstFailed;
};

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

/// Torch's side of the training steps: the parameters as leaves, the optimizer, the EMA and
/// GradScaler's state. The f32 reference and the autocast run (--against-autocast) each
/// keep their own.
struct TorchTrainer {
  std::optional<torch::ScalarType> autocast; ///< forward passes under torch autocast to it
  bool scaling = false; ///< a GradScaler: fp16-mixed, or autocast to f16 (torch's recipe)
  std::map<std::string, torch::Tensor> leaf, ema;
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
};

/// --against-autocast: ours passes where its relative error (against torch f32) is within
/// `ratio` times autocast's, or at most kAutocastFloor: errors that small are f32
/// rounding (our f32 steps match torch to ~1e-6), where bf16 played no part on either side
/// and a ratio of two roundings says nothing.
constexpr double kAutocastFloor = 1e-5;
bool withinAutocast(double rel, double autocastRel, double ratio) {
  return rel <= ratio * autocastRel || rel <= kAutocastFloor;
}
/// The unit roundoff of the autocast type (2^-8 bf16, 2^-11 f16): a gradient stored in it
/// carries a relative error of up to this much per element, whatever computed it. A
/// gradient or moment of ours within that of torch f32 holds no more than that one
/// rounding, which no run in the type can be asked to beat, even where autocast's own
/// rounding happened to land closer on a tensor of a few elements (the squares of
/// exp_avg_sq double it).
double unitRoundoff(medrun::Precision p) {
  return p == medrun::Precision::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
}
/// The same for errors made of few discrete events (sign flips; elements moved by up to
/// the AdamW noise bound; a scalar), `rel` and `autocastRel` in units of one event: the
/// counts k = rel^2 are compared as two Poisson counts. Ours fails only where k_ours exceeds
/// R^2 k_autocast by more than three standard deviations of that difference at the limit
/// (rates in the ratio R^2, estimated from both counts): the ratio rule for large counts,
/// and for a handful no more than chance gives two runs of equal quality.
bool withinAutocastCount(double rel, double autocastRel, double ratio) {
  const double k = rel * rel, kAc = autocastRel * autocastRel, r2 = ratio * ratio;
  return k <= r2 * kAc || k - r2 * kAc <= 3 * ratio * std::sqrt(k + kAc);
}
double ratioOf(double rel, double autocastRel) {
  if (std::isnan(rel) || std::isnan(autocastRel))
    return INFINITY;
  return autocastRel > 0 ? rel / autocastRel : rel > 0 ? INFINITY : 0;
}
std::string ratioStr(double rel, double autocastRel) {
  double r = ratioOf(rel, autocastRel);
  if (!std::isfinite(r))
    return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", r);
  return buf;
}

int checkTrain(const Options &o, const Sides &sides, double tolerance,
               torch::ScalarType floatType) {
  const medrun::Artifact &artifact = sides.artifact;
  auto find = [&](const std::string &name) -> const medrun::Function * {
    for (const medrun::Function &f : artifact.functions)
      if (f.name == name)
        return &f;
    return nullptr;
  };
  const medrun::Function *step = find("train_step");
  if (!step)
    throw UsageError(str("--train-steps: ", o.artifact, " has no function train_step ",
                         "(compile it with medc compile --train \"...\")"));
  auto opt = artifact.options.find("train");
  TrainOptions t = parseTrainOptions(opt == artifact.options.end() ? "" : opt->second);
  if (!step->precision.empty() && step->precision != t.precision)
    throw Error(str("train_step records precision ", step->precision, ", its train options ",
                    t.precision));
  const bool scaling = t.precision == "fp16-mixed";
  // The CUDA backend runs the precision train_step was compiled for.
  const char *compiledFor = o.precision == medrun::Precision::BF16  ? "bf16-mixed"
                            : o.precision == medrun::Precision::F16 ? "fp16-mixed"
                                                                    : "fp32";
  if (sides.cuda && t.precision != compiledFor)
    throw UsageError(str("--device cuda runs train_step of ", o.artifact, " in ", t.precision,
                         " as compiled; --precision ", medrunPrecisionName(o.precision),
                         " needs an artifact compiled with precision=", compiledFor));
  if (o.lossScale > 0 && !scaling)
    throw UsageError(str("--loss-scale: train_step of ", o.artifact, " is ", t.precision,
                         "; only fp16-mixed steps scale the loss"));
  const medrun::Function *lossFn = find(t.loss);
  if (!lossFn)
    throw UsageError(str("--train-steps: ", o.artifact, " has no loss function '", t.loss,
                         "' (the torch reference runs it; medc compile --entry ", t.loss,
                         " keeps it)"));
  const medrun::Function *gradFn = o.trainGrad ? find(t.loss + "_grad") : nullptr;
  if (o.trainGrad && !gradFn)
    throw UsageError(str("--train-grad: ", o.artifact, " has no function '", t.loss, "_grad'"));

  // train_step's inputs: the loss function's, then the per-step scalars, bound by name.
  size_t batchArgs = lossFn->inputs.size();
  if (step->inputs.size() < batchArgs)
    throw Error(str("train_step has ", step->inputs.size(), " arguments, fewer than ", t.loss,
                    "'s ", batchArgs));
  std::map<std::string, size_t> slot;
  for (size_t i = batchArgs; i < step->inputs.size(); ++i) {
    const std::string &n = step->inputNames.at(i);
    if (n != "lr" && n != "step" && n != "ema_decay" && n != "loss_scale" &&
        n != "growth_tracker" && n != "rng")
      throw Error(str("train_step input ", i, " '", n, "' is none medcheck knows (lr, step, ",
                      "ema_decay, loss_scale, growth_tracker, rng)"));
    slot[n] = i;
  }
  std::vector<std::string> required{"lr", "step"};
  if (t.ema)
    required.push_back("ema_decay");
  if (scaling)
    required.insert(required.end(), {"loss_scale", "growth_tracker"});
  for (const std::string &n : required)
    if (!slot.count(n))
      throw Error(str("train_step has no input '", n, "' (", t.precision, ", ema=",
                      t.ema ? "true" : "false", ")"));
  std::vector<std::string> outNames;
  for (size_t i = 0; i < step->outputs.size(); ++i)
    outNames.push_back(outputName(*step, i));
  auto outputIndex = [&](const std::string &n) {
    auto it = std::find(outNames.begin(), outNames.end(), n);
    if (it == outNames.end())
      throw Error(str("train_step has no output '", n, "'"));
    return static_cast<size_t>(it - outNames.begin());
  };

  const bool f64 = o.precision == medrun::Precision::F64;
  const medrun::DType storage = f64 ? medrun::DType::F64 : medrun::DType::F32;
  auto asStorage = [&](const medrun::Tensor &x) {
    if (!medrun::isFloat(x.dtype()) || x.dtype() == storage)
      return x.clone();
    return x.to(storage);
  };
  auto scalar = [&](double v) {
    medrun::Tensor s(storage, {});
    if (f64)
      s.data<double>()[0] = v;
    else
      s.data<float>()[0] = static_cast<float>(v);
    return s;
  };
  auto rounded = [&](double v) { return f64 ? v : static_cast<double>(static_cast<float>(v)); };

  // State: ours and torch's start from the same values.
  medrun::TensorMap state = medrun::initParameters(artifact, o.seed);
  for (auto &[name, x] : state)
    x = asStorage(x);
  std::map<std::string, torch::Tensor> torchValues; // parameters the loss reads, not trained
  std::vector<std::string> trained;                 // trainable parameters the loss reads
  std::set<std::string> read;
  for (const medrun::OpInfo &op : lossFn->ops)
    if (op.kind == "param")
      read.insert(op.strAttr("name"));
  for (const medrun::ParameterInfo &p : artifact.parameters) {
    torchValues[p.name] = sides.toTorch(state.at(p.name)).to(
        medrun::isFloat(p.dtype) ? floatType : medcheck::torchType(p.dtype));
    if (p.trainable && read.count(p.name) && medrun::isFloat(p.dtype))
      trained.push_back(p.name);
  }
  // Torch's trainers: the reference in floatType and, with --against-autocast, one whose
  // forward passes run under torch autocast to bf16 or f16; each from the same initial
  // values, each with its own optimizer, EMA and loss scale.
  auto makeTrainer = [&](std::optional<torch::ScalarType> autocast, bool scales) {
    auto tr = std::make_unique<TorchTrainer>();
    tr->autocast = autocast;
    tr->scaling = scales;
    std::vector<torch::Tensor> decayed, exempt;
    for (const std::string &name : trained) {
      const medrun::ParameterInfo *info = artifact.parameter(name);
      torch::Tensor x = torchValues.at(name).detach().clone().requires_grad_(true);
      tr->leaf[name] = x;
      tr->leaves.push_back(x);
      bool ex = t.exemptNormBias &&
                (info->shape.size() <= 1 || name.find("grn_") != std::string::npos);
      (ex ? exempt : decayed).push_back(x);
      if (t.ema)
        tr->ema[name] = x.detach().clone();
    }
    if (t.optimizer == "adamw") {
      auto options = [&](double wd) {
        return torch::optim::AdamWOptions(o.lr)
            .betas(std::make_tuple(t.beta1, t.beta2))
            .eps(t.eps)
            .weight_decay(wd)
            .amsgrad(false);
      };
      std::vector<torch::optim::OptimizerParamGroup> groups;
      if (!decayed.empty())
        groups.emplace_back(decayed, std::make_unique<torch::optim::AdamWOptions>(
                                         options(t.weightDecay)));
      if (!exempt.empty())
        groups.emplace_back(exempt, std::make_unique<torch::optim::AdamWOptions>(options(0.0)));
      tr->optimizer = std::make_unique<torch::optim::AdamW>(groups, options(t.weightDecay));
    } else {
      auto options = [&](double wd) {
        return torch::optim::SGDOptions(o.lr)
            .momentum(t.momentum)
            .dampening(0)
            .weight_decay(wd)
            .nesterov(t.nesterov);
      };
      std::vector<torch::optim::OptimizerParamGroup> groups;
      if (!decayed.empty())
        groups.emplace_back(decayed,
                            std::make_unique<torch::optim::SGDOptions>(options(t.weightDecay)));
      if (!exempt.empty())
        groups.emplace_back(exempt, std::make_unique<torch::optim::SGDOptions>(options(0.0)));
      tr->optimizer = std::make_unique<torch::optim::SGD>(groups, options(t.weightDecay));
    }
    return tr;
  };
  if (trained.empty())
    throw Error(str(t.loss, " reads no trainable float parameter"));
  std::unique_ptr<TorchTrainer> reference = makeTrainer(std::nullopt, scaling);
  std::unique_ptr<TorchTrainer> autocast;
  std::string autocastName; // "bf16" or "f16"
  if (o.againstAutocast) {
    autocastName = medrunPrecisionName(*o.autocastType);
    const torch::ScalarType type =
        *o.autocastType == medrun::Precision::F16 ? torch::kHalf : torch::kBFloat16;
    try { // before anything runs: LibTorch 1.13's CPU autocast has no f16
      medcheck::checkAutocast(sides.torchDevice, type);
    } catch (const Error &e) {
      throw Error(str("--against-autocast: ", e.what(),
                      sides.torchDevice.is_cpu() ? "; compute torch on a GPU (--torch-device cuda)"
                                                 : ""));
    }
    // PyTorch trains in f16 with autocast and a GradScaler: an autocast run to f16 scales
    // its loss whether ours does or not.
    autocast = makeTrainer(type, scaling || type == torch::kHalf);
  }
  // Each trainer holds its own trained parameters (its leaves): on torch's device only
  // the parameters not trained stay here.
  for (const std::string &name : trained)
    torchValues.erase(name);

  // One batch, drawn as the other modes draw the loss function's inputs.
  std::vector<medrun::Tensor> batch = drawInputs(*lossFn, o.seed);
  for (medrun::Tensor &x : batch)
    x = asStorage(x);
  std::vector<torch::Tensor> torchBatch;
  for (const medrun::Tensor &x : batch)
    torchBatch.push_back(sides.toTorch(x));

  const std::string precisionName = medrunPrecisionName(o.precision);
  std::cout << "train_step  " << t.optimizer << "  " << trained.size()
            << " trained parameters  clip " << t.clip << "  ema "
            << (t.ema ? "true" : "false") << "  exempt-norm-bias "
            << (t.exemptNormBias ? "true" : "false") << "  lr " << sci(o.lr) << " "
            << o.lrSchedule << "  one batch for all steps  precision " << precisionName
            << "  (compiled " << t.precision << ")\n";

  // Loss scaling: ours feeds its loss_scale and growth_tracker outputs back as the next
  // step's inputs (as the runtime does); torch's GradScaler keeps its own.
  double scaleOurs = 0, trackerOurs = 0;
  size_t skippedSteps = 0;
  if (scaling) {
    double init = o.lossScale > 0 ? o.lossScale
                  : step->initLossScale > 0 ? step->initLossScale
                                            : t.initScale;
    scaleOurs = reference->scale = static_cast<float>(init);
    std::cout << "loss scaling  init " << reference->scale << "  growth " << t.growthFactor
              << " every " << t.growthInterval << " steps  backoff " << t.backoffFactor
              << "\n";
  }
  if (autocast) {
    autocast->scale = scaling ? reference->scale : static_cast<float>(t.initScale);
    std::cout << "torch  f32 reference and autocast " << autocastName;
    if (autocast->scaling && !scaling)
      std::cout << " with GradScaler from " << autocast->scale;
    std::cout << " (" << sides.torchWhere()
              << "), each from the same parameters with its own optimizer; pass: rel <= "
              << o.autocastRatio << " * autocast's rel, or rel <= " << sci(kAutocastFloor)
              << " (gradients and moments: or <= " << sci(unitRoundoff(*o.autocastType))
              << ", one " << autocastName << " rounding)\n";
  }

  // torch._amp_update_scale_: GradScaler's update of its scale and growth tracker.
  auto updateScale = [&](double &scale, int64_t &tracker, bool foundInf) {
    if (foundInf) {
      scale = static_cast<float>(scale * t.backoffFactor);
      tracker = 0;
    } else if (tracker + 1 == t.growthInterval) {
      float grown = static_cast<float>(scale * t.growthFactor);
      if (std::isfinite(grown))
        scale = grown;
      tracker = 0;
    } else {
      ++tracker;
    }
  };
  // One torch step of `tr`: autograd, then GradScaler (scale, unscale_, the finiteness
  // check, a skipped optimizer step, update) by hand around clip_grad_norm_ and the
  // optimizer, then the EMA.
  auto torchStep = [&](TorchTrainer &tr, double lr, double decay) {
    const bool scaling = tr.scaling;
    TorchStep r;
    sides.beforeTorch();
    std::map<std::string, torch::Tensor> values = torchValues;
    for (const std::string &name : trained)
      values[name] = tr.leaf.at(name).detach();
    torch::Tensor seed;
    if (scaling)
      seed = torch::full({}, tr.scale,
                         torch::TensorOptions().dtype(floatType).device(sides.torchDevice));
    medcheck::TorchGradients ref = medcheck::gradTorch(artifact, *lossFn, torchBatch, values,
                                                       floatType, seed, tr.autocast,
                                                       sides.recomputeNow());
    if (!ref.recompute.empty())
      std::cout << "torch recompute  "
                << (tr.autocast ? str("autocast to ", autocastName, ": ") : std::string())
                << ref.recompute << "\n";
    r.loss = ref.outputs.at(0).item<double>();
    // inv_scale = scale.double().reciprocal().float(), as GradScaler.unscale_
    double inverse = scaling ? rounded(1.0 / tr.scale) : 1.0;
    for (const std::string &name : trained) {
      torch::Tensor g = ref.params.at(name).to(floatType).detach().clone();
      if (scaling) {
        r.foundInf |= !torch::isfinite(g).all().item<bool>();
        g = g * inverse;
      }
      r.grads[name] = g.clone();
      tr.leaf.at(name).mutable_grad() = g;
    }
    ref = medcheck::TorchGradients(); // the forward values, before the optimizer's memory
    if (t.clip > 0) {
      r.gradNorm = torch::nn::utils::clip_grad_norm_(tr.leaves, t.clip);
    } else {
      std::vector<torch::Tensor> norms;
      for (const torch::Tensor &x : tr.leaves)
        norms.push_back(x.grad().norm());
      r.gradNorm = torch::stack(norms).norm().item<double>();
    }
    for (auto &group : tr.optimizer->param_groups()) {
      if (t.optimizer == "adamw")
        static_cast<torch::optim::AdamWOptions &>(group.options()).lr(lr);
      else
        static_cast<torch::optim::SGDOptions &>(group.options()).lr(lr);
    }
    if (!r.foundInf) {
      tr.optimizer->step();
      ++tr.applied;
      torch::NoGradGuard noGrad;
      if (t.ema)
        for (const std::string &name : trained)
          tr.ema[name] = decay * tr.ema[name] + (1 - decay) * tr.leaf.at(name).detach();
    }
    r.scaleUsed = tr.scale;
    if (scaling)
      updateScale(tr.scale, tr.tracker, r.foundInf);
    sides.afterTorch(tr.autocast ? str("train_step under autocast to ", autocastName)
                                 : std::string("train_step"));
    return r;
  };
  // The optimizer moment `m` (exp_avg, exp_avg_sq, momentum_buffer) of a parameter of `tr`,
  // from the torch optimizer's own state.
  auto moment = [&](TorchTrainer &tr, const std::string &name, const std::string &m,
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
  };

  // GradScaler's state as torch._amp_update_scale_ makes it from ours' found_inf, which
  // ours' loss_scale and growth_tracker must equal; ours' updates applied so far.
  double expectScale = scaleOurs;
  int64_t expectTracker = 0, appliedOurs = 0;
  size_t failedSteps = 0;
  double oursTime = 0, torchTime = 0, autocastTime = 0;
  // Parameters whose torch gradient vanished (zero mathematically, rounding noise on both
  // sides) in some step so far, and the bound on how far AdamW can move them on noise.
  std::set<std::string> noiseDriven;
  double noiseBound = 0;
  // The same bound for the EMA of such a parameter: e_s = d e_{s-1} + (1-d) p_s.
  double emaNoiseBound = 0;
  // Without autocast, AdamW's amplification of gradient differences within the tolerance,
  // per element (medrun/AdamDrift.h), from torch's second moments before and after each step.
  std::optional<medrun::AdamDriftBound> drift;
  if (t.optimizer == "adamw" && !autocast)
    drift.emplace(t.beta1, t.beta2, t.eps);
  std::map<std::string, medrun::Tensor> secondMoments; // torch's, after the last step
  for (int64_t s = 1; s <= o.trainSteps; ++s) {
    double lr = o.lr;
    if (o.lrSchedule == "cosine")
      lr = o.lr * (1 + std::cos(M_PI * double(s - 1) / double(o.trainSteps))) / 2;
    lr = rounded(lr);
    double decay = rounded(s <= o.emaWarmup ? 0.0 : o.emaDecay);

    // Ours, all of it on the host when it ends (a GPU run downloads its results), before
    // torch starts.
    sides.beforeOurs();
    double t0 = now();
    std::vector<medrun::Tensor> gradsOurs;
    if (gradFn)
      gradsOurs = sides.ours(*gradFn, batch, state);
    std::vector<medrun::Tensor> inputs(step->inputs.size());
    for (size_t i = 0; i < batchArgs; ++i)
      inputs[i] = batch[i];
    inputs[slot.at("lr")] = scalar(lr);
    inputs[slot.at("step")] = scalar(double(s));
    if (t.ema)
      inputs[slot.at("ema_decay")] = scalar(decay);
    if (scaling) {
      inputs[slot.at("loss_scale")] = scalar(scaleOurs);
      inputs[slot.at("growth_tracker")] = scalar(trackerOurs);
    }
    if (slot.count("rng")) {
      medrun::Tensor counter(medrun::DType::I64, {});
      counter.data<int64_t>()[0] = s;
      inputs[slot.at("rng")] = counter;
    }
    medrun::TensorMap before = state, updates;
    std::vector<medrun::Tensor> outs = sides.ours(*step, inputs, state, &updates);
    for (auto &[name, x] : updates) {
      if (!state.count(name))
        throw Error(str("train_step assigns '", name, "', which is no parameter"));
      state[name] = x.dtype() == storage ? x : x.to(storage);
    }
    double t1 = now();

    // Torch: the reference, then (--against-autocast) the autocast run, in turn.
    TorchStep ref = torchStep(*reference, lr, decay);
    const bool foundTorch = ref.foundInf;
    if (!foundTorch) {
      double largest = 0;
      for (const auto &[name, g] : ref.grads)
        largest = std::max(largest, g.norm().item<double>());
      for (const auto &[name, g] : ref.grads)
        if (g.norm().item<double>() <= kVanishing * tolerance * largest)
          noiseDriven.insert(name);
      if (t.optimizer == "adamw") {
        // |m_hat / (sqrt(v_hat) + eps)| <= (1-b1)/(1-b1^k) * sqrt((1-b2^k)/(1-b2)) *
        // sqrt(sum_{j<k} (b1^2/b2)^j) for any gradients (Cauchy-Schwarz), k = updates so far.
        double sum = 0, k = double(reference->applied);
        for (int64_t j = 0; j < reference->applied; ++j)
          sum += std::pow(t.beta1 * t.beta1 / t.beta2, double(j));
        noiseBound += lr * (1 - t.beta1) / (1 - std::pow(t.beta1, k)) *
                      std::sqrt((1 - std::pow(t.beta2, k)) / (1 - t.beta2)) * std::sqrt(sum);
      }
      emaNoiseBound = decay * emaNoiseBound + (1 - decay) * noiseBound;
      if (drift)
        for (const std::string &name : trained) {
          medrun::Tensor now = medcheck::fromTorch(moment(*reference, name, "exp_avg_sq", s));
          auto last = secondMoments.find(name);
          auto initial = before.find("optimizer.exp_avg_sq." + name);
          const medrun::Tensor previous = last != secondMoments.end() ? last->second
                                          : initial != before.end() ? initial->second
                                                                    : medrun::Tensor();
          drift->step(name, previous, now, double(reference->applied), lr, tolerance);
          drift->emaStep(name, decay);
          secondMoments[name] = now;
        }
    }
    double t2 = now();
    TorchStep ac;
    if (autocast)
      ac = torchStep(*autocast, lr, decay);
    double t3 = now();
    oursTime += t1 - t0;
    torchTime += t2 - t1;
    autocastTime += t3 - t2;
    const double scaleUsed = ref.scaleUsed;
    const double gradNorm = ref.gradNorm;
    const std::map<std::string, torch::Tensor> &gradsTorch = ref.grads;

    // Compare.
    bool stepFailed = false;
    auto relOf = [](double x, double theirs) {
      return theirs != 0 ? std::abs(x - theirs) / std::abs(theirs) : std::abs(x - theirs);
    };
    // `acValue`: the autocast run's value (--against-autocast).
    auto scalarLine = [&](const char *what, double ours, double theirs, double acValue = NAN) {
      double rel = relOf(ours, theirs);
      // Overflowed gradients give a non-finite norm, inf or NaN by the order of the
      // operations that met the infinities: any non-finite pair matches.
      bool ok = std::isfinite(ours) ? rel <= tolerance : !std::isfinite(theirs);
      double acRel = relOf(acValue, theirs);
      if (autocast && !std::isfinite(ours)) // overflowed as autocast's fp16 run did
        ok = !std::isfinite(theirs) || !std::isfinite(acValue);
      if (autocast && std::isfinite(ours))
        // A scalar is one element: two runs of equal quality differ by 1.5x in a third of
        // the cases, so it is compared as a count of one as well.
        ok = withinAutocast(rel, acRel, o.autocastRatio) ||
             (acRel > 0 && withinAutocastCount(rel / acRel, 1, o.autocastRatio));
      stepFailed |= !ok;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.9g", ours);
      std::cout << "step " << s << "  " << what << "  " << buf;
      if (std::isfinite(ours) && std::isfinite(theirs)) {
        std::cout << "  rel " << sci(rel);
        if (autocast)
          std::cout << "  autocast " << sci(acRel) << "  ratio " << ratioStr(rel, acRel);
      } else {
        std::cout << "  torch " << theirs;
        if (autocast)
          std::cout << "  autocast " << acValue;
      }
      std::cout << "  " << (ok ? "ok" : "FAIL") << "\n";
    };
    auto exactLine = [&](const char *what, double ours, double theirs) {
      bool ok = ours == theirs;
      stepFailed |= !ok;
      std::cout << "step " << s << "  " << what << "  " << ours << "  torch " << theirs << "  "
                << (ok ? "ok" : "FAIL") << "\n";
    };
    std::cout << "step " << s << "  lr " << sci(lr);
    if (t.ema)
      std::cout << "  ema_decay " << decay;
    if (scaling)
      std::cout << "  loss_scale " << scaleUsed;
    std::cout << "\n";
    scalarLine("loss", toScalar(outs.at(outputIndex("loss"))), ref.loss, ac.loss);
    scalarLine("grad_norm", toScalar(outs.at(outputIndex("grad_norm"))), gradNorm, ac.gradNorm);
    bool skipped = false;
    if (scaling) {
      double found = toScalar(outs.at(outputIndex("found_inf")));
      skipped = found != 0;
      if (autocast) {
        // Ours overflows where one of the torch runs does (autocast's f16 run has f16's
        // range too), or nowhere.
        const double acFound = ac.foundInf ? 1 : 0;
        const bool ok = found == (foundTorch ? 1 : 0) || found == acFound;
        stepFailed |= !ok;
        std::cout << "step " << s << "  found_inf  " << found << "  torch " << foundTorch
                  << "  autocast " << acFound << "  " << (ok ? "ok" : "FAIL") << "\n";
      } else {
        exactLine("found_inf", found, foundTorch ? 1 : 0);
      }
      updateScale(expectScale, expectTracker, skipped);
      scaleOurs = toScalar(outs.at(outputIndex("loss_scale")));
      trackerOurs = toScalar(outs.at(outputIndex("growth_tracker")));
      exactLine("loss_scale", scaleOurs, expectScale);
      exactLine("growth_tracker", trackerOurs, double(expectTracker));
      if (found != 0) {
        // A skipped step leaves every state tensor exactly as it was.
        ++skippedSteps;
        size_t changed = 0;
        std::string first;
        for (auto &[name, x] : updates) {
          const medrun::Tensor &old = before.at(name), &now = state.at(name);
          bool same = old.dtype() == now.dtype() && old.shape() == now.shape() &&
                      std::memcmp(old.raw(), now.raw(), old.nbytes()) == 0;
          if (!same && changed++ == 0)
            first = name;
        }
        stepFailed |= changed > 0;
        std::cout << "step " << s << "  skipped  " << updates.size() - changed << " of "
                  << updates.size() << " state tensors unchanged";
        if (changed)
          std::cout << ", first changed " << first;
        std::cout << "  " << (changed ? "FAIL" : "ok") << "\n";
      }
    }
    appliedOurs += skipped ? 0 : 1;

    // Gradient elements whose sign differs from torch f32's: AdamW turns each into an
    // update of the other sign. Counted per tensor, judged by withinAutocastCount.
    auto signLine = [&](const std::vector<std::string> &names,
                        const std::vector<medrun::Tensor> &ours,
                        const std::vector<torch::Tensor> &theirs,
                        const std::vector<torch::Tensor> &acs) {
      int64_t totalOurs = 0, totalAc = 0, elements = 0;
      std::vector<std::string> failed;
      for (size_t i = 0; i < names.size(); ++i) {
        torch::Tensor ref = theirs[i].to(torch::kCPU, torch::kDouble).sign();
        torch::Tensor mine =
            medcheck::toTorch(ours[i]).to(torch::kDouble).reshape(ref.sizes()).sign();
        torch::Tensor flipOurs = mine != ref,
                      flipAc = acs[i].to(torch::kCPU, torch::kDouble).sign() != ref;
        const int64_t nOurs = flipOurs.sum().item<int64_t>(), nAc = flipAc.sum().item<int64_t>();
        totalOurs += nOurs;
        totalAc += nAc;
        elements += ref.numel();
        if (!withinAutocastCount(std::sqrt(double(nOurs)), std::sqrt(double(nAc)),
                                 o.autocastRatio))
          failed.push_back(str(names[i], ": ", nOurs, " against autocast's ", nAc));
      }
      stepFailed |= !failed.empty();
      std::cout << "step " << s << "  sign flips  ours " << totalOurs << ", autocast " << totalAc
                << " of " << elements << " gradient elements";
      if (!failed.empty())
        std::cout << "  " << failed.size() << " FAIL, first " << failed.front();
      std::cout << "  " << (failed.empty() ? "ok" : "FAIL") << "\n";
    };

    // `gradients`: the vanishing rule applies (gradients, optimizer moments); `values`:
    // parameters and EMA, where a noise-driven parameter (see --help) passes within the
    // AdamW noise bound. `acs`: the autocast run's tensors (--against-autocast), which turn
    // the tolerance into the bound on ours' error relative to autocast's. `elementBound`
    // (values, with autocast): how far the AdamW noise bound lets one element of this kind
    // move; errors of a few such elements are compared as counts (withinAutocastCount).
    // `bySpreadToo`: an error carried by few elements (spreadOf) is compared as a
    // count of autocast's per-element shares (see --help).
    auto kindLine = [&](const std::string &kind, const std::vector<std::string> &names,
                        const std::vector<medrun::Tensor> &ours,
                        const std::vector<torch::Tensor> &theirs,
                        const std::vector<torch::Tensor> &acs, bool gradients,
                        double elementBound = 0, bool bySpreadToo = false) {
      std::vector<Comparison> cs, acCs;
      for (size_t i = 0; i < names.size(); ++i) {
        cs.push_back(compare(ours[i], theirs[i]));
        if (autocast)
          acCs.push_back(compareTorch(acs[i], theirs[i]));
      }
      std::vector<std::string> notes(names.size());
      std::vector<bool> ok = judge(cs, std::vector<bool>(names.size(), gradients), tolerance,
                                   notes);
      KindSummary k;
      size_t noisy = 0, floored = 0, rounded = 0, counted = 0, spread = 0, amplified = 0;
      // Gradients and moments: one rounding to the autocast type (unitRoundoff).
      const double roundingLevel =
          autocast && gradients
              ? unitRoundoff(*o.autocastType) * (kind == "exp_avg_sq" ? 2 : 1)
              : 0;
      double vanishing = 0; // with autocast: the vanishing rule's limit, as judge's
      if (autocast && gradients)
        for (const Comparison &c : cs)
          if (std::isfinite(c.refNorm))
            vanishing = std::max(vanishing, kVanishing * tolerance * c.refNorm);
      for (size_t i = 0; i < names.size(); ++i) {
        if (!gradients && noiseBound > 0 && noiseDriven.count(names[i]) && cs[i].problem.empty()) {
          ++noisy;
          ok[i] = cs[i].maxAbs <= 2 * noiseBound;
          notes[i] = str("noise-driven: max_abs within 2 * ", sci(noiseBound));
        } else if (!gradients && !ok[i] && drift && drift->slack(names[i], kind == "ema") &&
                   cs[i].problem.empty()) {
          const double excess = drift->excessError(names[i], ours[i],
                                                   medcheck::fromTorch(theirs[i]), kind == "ema");
          if (excess <= tolerance) {
            ok[i] = true;
            ++amplified;
            notes[i] = str("amplified: rel ", sci(excess), " after AdamW's amplification of "
                           "gradient noise");
          }
        } else if (autocast && gradients && cs[i].problem.empty() &&
                   cs[i].refNorm <= vanishing && cs[i].oursNorm <= vanishing) {
          ok[i] = true;
          notes[i] = str("vanishing: both norms below ", sci(vanishing));
        } else if (autocast) {
          const Comparison &c = cs[i], &a = acCs[i];
          const double unit = c.refNorm > 0 ? 2 * elementBound / c.refNorm : 0;
          const bool byRatio = withinAutocast(c.rel, a.rel, o.autocastRatio);
          const bool byCount = unit > 0 && withinAutocastCount(c.rel / unit, a.rel / unit,
                                                               o.autocastRatio);
          // Autocast's error in units of its share per element it is spread over (only
          // where the ratio rule fails: the spread takes a pass over the tensor).
          const double n = bySpreadToo && !byRatio ? spreadOf(acs[i], theirs[i]) : 0;
          const double share = n > 0 ? a.rel / std::sqrt(n) : 0;
          const bool bySpread = share > 0 &&
                                withinAutocastCount(c.rel / share, a.rel / share, o.autocastRatio);
          const bool byRounding = c.rel <= roundingLevel;
          ok[i] = c.problem.empty() && a.problem.empty() &&
                  (byRatio || byCount || bySpread || byRounding);
          if (ok[i] && !byRatio && !byCount && !bySpread) {
            ++rounded;
            notes[i] = str("rounding level: rel <= ", sci(roundingLevel), ", autocast ",
                           sci(a.rel));
          } else if (ok[i] && !byRatio && !byCount) {
            ++spread;
            notes[i] = str("spread: autocast's error over ", sci(n), " elements, ratio ",
                           ratioStr(c.rel, a.rel));
          } else if (ok[i] && !byRatio) {
            ++counted;
            notes[i] = str("counted: ", sci(std::pow(c.rel / unit, 2)), " elements' worth, autocast ",
                           sci(std::pow(a.rel / unit, 2)));
          } else if (ok[i] && !(c.rel <= o.autocastRatio * a.rel)) {
            ++floored;
            notes[i] = str("f32 level: rel <= ", sci(kAutocastFloor));
          } else {
            notes[i] = str("autocast rel ", sci(a.rel), ", ratio ", ratioStr(c.rel, a.rel));
          }
        }
      }
      for (size_t i = 0; i < names.size(); ++i) {
        ++k.tensors;
        bool special = notes[i].rfind("vanishing", 0) == 0 ||
                       notes[i].rfind("rounding", 0) == 0 ||
                       notes[i].rfind("noise", 0) == 0 || notes[i].rfind("f32", 0) == 0 ||
                       notes[i].rfind("counted", 0) == 0 || notes[i].rfind("spread", 0) == 0 ||
                       notes[i].rfind("amplified", 0) == 0;
        if (notes[i].rfind("vanishing", 0) == 0)
          ++k.vanishing;
        if (!ok[i]) {
          ++k.failed;
          if (k.firstFailed.empty())
            k.firstFailed = names[i];
        }
        // The worst: the largest relative error, or with autocast the largest ratio.
        double r = std::isnan(cs[i].rel) ? INFINITY : cs[i].rel;
        if (autocast)
          r = ratioOf(cs[i].rel, acCs[i].rel);
        if (!special && (k.worstName.empty() || r > k.worst)) {
          k.worst = r;
          k.worstName = names[i];
        }
      }
      stepFailed |= k.failed > 0;
      std::cout << "step " << s << "  " << kind << "  " << k.tensors << " tensors  ";
      if (!autocast) {
        std::cout << "max rel " << sci(k.worst) << " (" << k.worstName << ")";
      } else if (k.worstName.empty()) {
        std::cout << "max ratio -";
      } else {
        size_t w = static_cast<size_t>(
            std::find(names.begin(), names.end(), k.worstName) - names.begin());
        std::cout << "max ratio " << ratioStr(cs[w].rel, acCs[w].rel) << " (" << k.worstName
                  << ": rel " << sci(cs[w].rel) << ", autocast " << sci(acCs[w].rel) << ")";
      }
      if (k.vanishing)
        std::cout << "  " << k.vanishing << " vanishing";
      if (noisy)
        std::cout << "  " << noisy << " noise-driven";
      if (amplified)
        std::cout << "  " << amplified << " within AdamW's amplification of gradient noise";
      if (floored)
        std::cout << "  " << floored << " at f32 level";
      if (rounded)
        std::cout << "  " << rounded << " at " << autocastName << " rounding level";
      if (counted)
        std::cout << "  " << counted << " within the count of noise-moved elements";
      if (spread)
        std::cout << "  " << spread << " within the spread of autocast's error";
      if (k.failed)
        std::cout << "  " << k.failed << " FAIL, first " << k.firstFailed;
      std::cout << "  " << (k.failed ? "FAIL" : "ok") << "\n";
      for (size_t i = 0; i < names.size(); ++i)
        if (!ok[i])
          printLine(str("step ", s, "  ", kind), names[i], ours[i].shape(), cs[i], false,
                    notes[i]);
    };
    auto stateOf = [&](const std::string &key) -> const medrun::Tensor & {
      auto it = state.find(key);
      if (it == state.end())
        throw Error(str("the artifact has no parameter '", key, "'"));
      return it->second;
    };

    if (gradFn) {
      std::vector<std::string> names;
      std::vector<medrun::Tensor> ours;
      std::vector<torch::Tensor> theirs, acs;
      for (size_t i = 0; i < gradFn->outputs.size(); ++i) {
        std::string n = outputName(*gradFn, i);
        if (n.rfind("grad.", 0) != 0 || !gradsTorch.count(n.substr(5)))
          continue;
        names.push_back(n.substr(5));
        ours.push_back(gradsOurs.at(i));
        theirs.push_back(gradsTorch.at(n.substr(5)));
        if (autocast)
          acs.push_back(ac.grads.at(n.substr(5)));
      }
      kindLine("grads", names, ours, theirs, acs, true, 0, true);
      if (autocast && !foundTorch)
        signLine(names, ours, theirs, acs);
    }
    {
      std::vector<medrun::Tensor> ours;
      std::vector<torch::Tensor> theirs, acs;
      for (const std::string &name : trained) {
        ours.push_back(stateOf(name));
        theirs.push_back(reference->leaf.at(name).detach());
        if (autocast)
          acs.push_back(autocast->leaf.at(name).detach());
      }
      kindLine("params", trained, ours, theirs, acs, false, noiseBound);
    }
    std::vector<std::string> moments = t.optimizer == "adamw"
                                           ? std::vector<std::string>{"exp_avg", "exp_avg_sq"}
                                           : std::vector<std::string>{"momentum_buffer"};
    for (const std::string &m : moments) {
      std::vector<medrun::Tensor> ours;
      std::vector<torch::Tensor> theirs, acs;
      for (const std::string &name : trained) {
        ours.push_back(stateOf("optimizer." + m + "." + name));
        // (compared with the vanishing rule: the moments of a zero gradient are noise)
        theirs.push_back(moment(*reference, name, m, s));
        if (autocast)
          acs.push_back(moment(*autocast, name, m, s));
      }
      // Gradient-made tensors whose error sits in few elements (exp_avg_sq, the squares, in
      // its largest; a bias of a few hundred elements) make the ratio of two errors noisy.
      kindLine(m, trained, ours, theirs, acs, true, 0, true);
    }
    if (scaling && t.optimizer == "adamw")
      exactLine("optimizer.step", toScalar(stateOf("optimizer.step")), double(appliedOurs));
    if (t.ema) {
      std::vector<medrun::Tensor> ours;
      std::vector<torch::Tensor> theirs, acs;
      for (const std::string &name : trained) {
        ours.push_back(stateOf("ema." + name));
        theirs.push_back(reference->ema.at(name));
        if (autocast)
          acs.push_back(autocast->ema.at(name));
      }
      kindLine("ema", trained, ours, theirs, acs, false, emaNoiseBound);
    }
    failedSteps += stepFailed ? 1 : 0;
    std::cout << "step " << s << "  time  ours " << seconds(t1 - t0) << "  torch "
              << seconds(t2 - t1);
    if (autocast)
      std::cout << "  autocast " << seconds(t3 - t2);
    std::cout << "\n" << std::flush;
  }
  std::cout << "train_step  time  ours " << seconds(oursTime) << " (" << sides.oursWhere()
            << ")  torch " << seconds(torchTime);
  if (autocast)
    std::cout << ", autocast " << seconds(autocastTime);
  std::cout << " (" << sides.torchWhere() << ")\n";
  if (scaling)
    std::cout << "loss scaling  " << skippedSteps << " of " << o.trainSteps
              << " steps skipped, final scale " << scaleOurs << "\n";
  // A step that ours skipped compares the old state with itself: with no update at all, the
  // check against autocast would pass without having seen the mixed-precision step.
  const bool vacuous = autocast && appliedOurs == 0;
  if (vacuous)
    std::cout << "FAIL: every step overflowed (found_inf) and none updated the state, so "
                 "nothing of the step was compared; start from a smaller --loss-scale\n";
  if (autocast)
    std::cout << o.trainSteps << " steps checked, " << failedSteps
              << " failed (against torch autocast: rel <= " << o.autocastRatio
              << " * autocast's rel or <= " << sci(kAutocastFloor) << ", vanishing below "
              << sci(kVanishing * tolerance)
              << " of the largest, errors of few elements as counts; precision " << precisionName
              << (autocastName != precisionName ? ", autocast " + autocastName : "") << ")\n";
  else
    std::cout << o.trainSteps << " steps checked, " << failedSteps << " failed (tolerance "
              << sci(tolerance) << ", precision " << precisionName << ")\n";
  return failedSteps > 0 || vacuous ? 1 : 0;
}

/// --fusions: every distinct fusion body against LibTorch, in isolation.
int checkFusions(const Options &o, const medrun::Artifact &artifact, torch::Device device) {
  const bool f64 = o.precision == medrun::Precision::F64;
  const double tolerance = o.tolerance > 0 ? o.tolerance : f64 ? 1e-10 : 1e-5;
  if (artifact.fusions.empty()) {
    std::cout << artifact.path << ": no fusion bodies to check (compiled with "
              << "--disable-pass=med-form-fusions and med-form-stencil-fusions, or nothing to "
                 "fuse)\n";
    return 1;
  }
  size_t checked = 0, failed = 0;
  for (size_t k = 0; k < artifact.fusions.size(); ++k) {
    const medrun::Function &body = *artifact.fusions[k];
    std::vector<medrun::Tensor> inputs = drawInputs(body, o.seed + k);
    std::vector<medrun::Tensor> ours =
        medrun::runCpu(artifact, body, inputs, {}, f64 ? medrun::Precision::F64 : medrun::Precision::F32);
    std::vector<torch::Tensor> torchInputs;
    for (const medrun::Tensor &t : inputs)
      torchInputs.push_back(medcheck::toTorch(t).to(device));
    std::vector<torch::Tensor> ref = medcheck::runTorch(artifact, body, torchInputs, {},
                                                        f64 ? torch::kDouble : torch::kFloat);
    for (size_t i = 0; i < ours.size(); ++i) {
      Comparison c = compare(ours[i], ref.at(i));
      const bool ok = c.problem.empty() && c.rel <= tolerance;
      ++checked;
      failed += !ok;
      printLine(str("fusion ", k, "  ", body.fusionTemplate, "  ", body.ops.size(), " ops"),
                str("out", i), body.values.at(body.outputs[i]).shape, c, ok, "");
    }
  }
  std::cout << artifact.fusions.size() << " fusion bodies, " << checked << " outputs checked, "
            << failed << " failed (tolerance " << sci(tolerance) << ", precision "
            << (f64 ? "f64" : "f32") << ")\n";
  return failed ? 1 : 0;
}

int run(const Options &o) {
  torch::Device torchDevice = torch::kCPU;
  if (o.torchDevice == "cuda") {
    if (!torch::cuda::is_available())
      throw Error("--torch-device cuda: this LibTorch has no usable CUDA device (a CPU-only "
                  "build, or no GPU or driver); use --torch-device cpu");
    torchDevice = torch::Device(torch::kCUDA, 0);
    // f32 products in f32: TF32 (10-bit mantissas) in cuDNN's convolutions or cuBLAS's
    // matmuls would be far outside the f32 tolerances. No benchmarking: cuDNN picks its
    // algorithms by its heuristics, the same in every step.
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setBenchmarkCuDNN(false);
  }
  medrun::Artifact artifact = medrun::Artifact::load(o.artifact);
  std::unique_ptr<medrun::CudaSession> session; // one for the whole run
  if (o.device == "cuda")
    session = std::make_unique<medrun::CudaSession>(artifact);
  if (o.fusions)
    return checkFusions(o, artifact, torchDevice);
  Sides sides{artifact, o.precision, session.get(), torchDevice};
  sides.recompute = o.recompute;
  if (session || torchDevice.is_cuda()) {
    std::cout << "devices  ours " << o.device;
    if (session)
      std::cout << " (" << session->deviceName()
                << (session->loadedFromPtx() ? ", kernels from PTX" : "") << ")";
    std::cout << "  torch " << o.torchDevice << (torchDevice.is_cuda() ? " (TF32 off)" : "")
              << "\n";
  }
  if (o.trainSteps > 0) {
    double tolerance = o.tolerance > 0 ? o.tolerance : defaultTolerance(o.precision);
    return checkTrain(o, sides, tolerance,
                      o.precision == medrun::Precision::F64 ? torch::kDouble : torch::kFloat);
  }
  bool gradients = o.grad || o.fd > 0;
  std::vector<const medrun::Function *> fns;
  if (o.funcs.empty()) {
    for (const medrun::Function &f : artifact.functions)
      fns.push_back(&f);
  } else {
    std::set<std::string> seen;
    for (const std::string &name : o.funcs)
      if (seen.insert(name).second)
        fns.push_back(&artifact.function(name)); // throws, listing the functions there are
  }
  if (fns.empty())
    throw Error(str(o.artifact, ": the artifact has no functions"));

  // Gradient modes: the pairs (f, f_grad) among the selection; --func f_grad means f.
  std::vector<GradPair> pairs;
  if (gradients) {
    const char *mode = o.grad ? "--grad" : "--fd";
    auto find = [&](const std::string &name) -> const medrun::Function * {
      for (const medrun::Function &f : artifact.functions)
        if (f.name == name)
          return &f;
      return nullptr;
    };
    std::set<std::string> seen;
    for (const medrun::Function *fn : fns) {
      GradPair p;
      if (const medrun::Function *g = find(fn->name + "_grad")) {
        p = {fn, g};
      } else if (fn->name.size() > 5 &&
                 fn->name.compare(fn->name.size() - 5, 5, "_grad") == 0 &&
                 find(fn->name.substr(0, fn->name.size() - 5))) {
        p = {find(fn->name.substr(0, fn->name.size() - 5)), fn};
      } else {
        if (!o.funcs.empty())
          throw UsageError(str(mode, ": function '", fn->name, "' has no gradient function '",
                               fn->name, "_grad' in ", o.artifact,
                               " (compile it with medc compile --grad; the first result must "
                               "be a scalar loss)"));
        continue;
      }
      if (seen.insert(p.f->name).second)
        pairs.push_back(p);
    }
    if (pairs.empty())
      throw UsageError(str(mode, ": ", o.artifact, " has no gradient function (<f>_grad); ",
                           "compile it with medc compile --grad"));
    if (o.fd > 0 && o.hasFdParams &&
        std::none_of(pairs.begin(), pairs.end(),
                     [&](const GradPair &p) { return fdSelectsAny(o, p); }))
      throw UsageError(str("--fd-params '", o.fdParams, "' matches no parameter or argument ",
                           "of the checked functions"));
  }

  double tolerance = o.tolerance > 0 ? o.tolerance
                     : o.precision == medrun::Precision::F64 ? 1e-10
                                                             : 1e-4;
  torch::ScalarType floatType =
      o.precision == medrun::Precision::F64 ? torch::kDouble : torch::kFloat;

  medrun::TensorMap params = medrun::initParameters(artifact, o.seed);
  std::map<std::string, torch::Tensor> torchParams;
  for (const auto &[name, t] : params)
    torchParams[name] = sides.toTorch(t);

  const char *precisionName = o.precision == medrun::Precision::F64 ? "f64" : "f32";
  bool failed = false;
  if (!gradients) {
    Counts n = checkForward(o, sides, fns, params, torchParams, tolerance, floatType);
    std::cout << n.checked << " outputs checked, " << n.failed << " failed (tolerance "
              << sci(tolerance) << ", precision " << precisionName << ")\n";
    failed = n.failed > 0;
  }
  if (o.grad) {
    Counts n = checkGrad(o, sides, pairs, params, torchParams, tolerance, floatType);
    std::cout << n.checked << " gradient outputs checked against torch autograd, " << n.failed
              << " failed (tolerance " << sci(tolerance) << ", precision " << precisionName
              << ")\n"
              << std::flush;
    failed |= n.failed > 0;
  }
  if (o.fd > 0) {
    if (session)
      std::cout << "--fd: finite differences run on the CPU backend in f64 (--device cuda "
                   "does not apply to them)\n";
    double fdTolerance = o.fdTolerance > 0 ? o.fdTolerance : 1e-6;
    size_t elements = 0;
    Counts n = checkFd(o, artifact, pairs, params, fdTolerance, elements);
    std::cout << n.checked << " gradients checked by finite differences (" << elements
              << " elements), " << n.failed << " failed (tolerance " << sci(fdTolerance)
              << ", f64)\n";
    failed |= n.failed > 0;
  }
  return failed ? 1 : 0;
}

/// After an error in a run that was being sampled (an out-of-memory one, say): how much of
/// the GPU was in use at the peak of that run, and torch's allocator's peaks.
void memoryAtError() {
  const size_t peak = DeviceMemory::get().stop();
  if (!peak)
    return;
  std::string t = torchMemoryText(true);
  std::cerr << "medcheck: memory of the run that failed: peak " << gib(double(peak))
            << " in use on the GPU" << (t.empty() ? std::string() : "; " + t) << "\n";
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  try {
    o = parseArgs(argc, argv);
  } catch (const UsageError &e) {
    std::cerr << "medcheck: " << e.what() << "\n(medcheck --help lists the options)\n";
    return 2;
  }
  if (o.help) {
    std::cout << kUsage;
    return 0;
  }
  if (o.version) {
    medtool::VersionLines lines = {{"LibTorch", TORCH_VERSION}};
    for (auto &line : medrun::gpuLibraryVersions())
      lines.push_back(line);
    std::cout << medtool::versionText("medcheck", lines);
    return 0;
  }
  try {
    // Both sides get the same number of threads, so that the times compare.
    if (o.threads > 0)
      medrun::setNumThreads(o.threads);
    torch::set_num_threads(medrun::numThreads());
    return run(o);
  } catch (const UsageError &e) { // a usage error only the artifact reveals (--grad, --fd)
    std::cout << std::flush;
    std::cerr << "medcheck: " << e.what() << "\n";
    return 2;
  } catch (const medrun::Error &e) {
    std::cout << std::flush;
    std::cerr << "medcheck: " << e.what() << "\n";
  } catch (const c10::Error &e) {
    std::cout << std::flush;
    std::cerr << "medcheck: torch: " << e.what_without_backtrace() << "\n";
  } catch (const std::exception &e) {
    std::cout << std::flush;
    std::cerr << "medcheck: " << e.what() << "\n";
  }
  memoryAtError();
  return 1;
}
