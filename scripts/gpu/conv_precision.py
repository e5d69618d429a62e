#!/usr/bin/env python3
"""How far cuDNN's f32 convolutions are from f64 when the algorithm is chosen by timing.

For every convolution of PlainConvUNet 3d_fullres (bench/conv_layout.py's list) at a patch
and batch, in f32 with TF32 off: the forward, input gradient and weight gradient of one
random problem, each against the same computed in f64, as relative error norms, once with
cuDNN's heuristic choice (torch.backends.cudnn.benchmark False) and once with the fastest
algorithm by timing (True, cudnnFind: FFT and Winograd transforms among the candidates).
A row whose timed error is many times the heuristic one marks a shape where timing picks
a less exact algorithm; medrun's f32 programs take only the direct-sum algorithms
(runtime/src/cuda/Cudnn.cpp, directSums) for that reason.

  python3 scripts/gpu/conv_precision.py [--patch 64] [--batch 2]
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from conv_layout import layers  # noqa: E402


def errors(shape, wshape, stride, transposed, benchmark):
    torch.backends.cudnn.benchmark = benchmark
    g = torch.Generator(device="cuda").manual_seed(1)
    x64 = torch.randn(shape, device="cuda", dtype=torch.float64, generator=g)
    w64 = torch.randn(wshape, device="cuda", dtype=torch.float64, generator=g) * 0.05

    def run(x, w):
        x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
        y = (F.conv_transpose3d(x, w, stride=stride) if transposed
             else F.conv3d(x, w, stride=stride, padding=1))
        dy = torch.ones_like(y) * 0.5 + (y.detach() > 0) * 0.25  # a fixed, uneven gradient
        dx, dw = torch.autograd.grad(y, (x, w), dy)
        return y, dx, dw

    ref = run(x64, w64)
    got = run(x64.float(), w64.float())
    # Twice: the first call with benchmark on measures, the second runs the chosen one.
    got = run(x64.float(), w64.float())
    return [((a.double() - r).norm() / r.norm()).item() for a, r in zip(got, ref)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--patch", type=int, default=64)
    ap.add_argument("--batch", type=int, default=2)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, cuDNN "
          f"{torch.backends.cudnn.version()}; f32 against f64, relative error norms "
          f"(forward / input gradient / weight gradient)")
    print(f"{'stage':>5} {'layer':>11} {'input':>18}  {'heuristic':>26}  {'timed':>26}  worst ratio")
    worst = 0.0
    for stage, what, shape, wshape, stride, transposed in layers(a.patch, a.batch):
        h = errors(shape, wshape, stride, transposed, False)
        t = errors(shape, wshape, stride, transposed, True)
        r = max(tt / hh if hh > 0 else 0.0 for tt, hh in zip(t, h))
        worst = max(worst, r)
        fmt = lambda e: " ".join(f"{v:8.1e}" for v in e)
        print(f"{stage:>5} {what:>11} {'x'.join(map(str, shape)):>18}  {fmt(h)}  {fmt(t)}  {r:.1f}")
    print(f"largest ratio of a timed error to the heuristic one: {worst:.1f}")


if __name__ == "__main__":
    main()
