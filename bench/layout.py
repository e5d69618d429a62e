#!/usr/bin/env python3
"""Which activation layout the MedNeXt block MLP's GEMMs want: a measurement.

The 1x1x1 expand and compress of every MedNeXt-L block (its regular blocks, stages 0..8),
forward and both gradients, in bf16 as cuBLAS runs them, in the two layouts a step could
keep activations in:
  ncdhw   X as [N, C, V] (V voxels contiguous): H = W1 @ X[n], batched over N
  ndhwc   X as [N*V, C] (channels contiguous):  H = X @ W1^T, one GEMM
plus what a channels-last MLP costs when the depthwise stencil and the norm stay NCDHW:
one transpose of the block's MLP input and one of its output, forward and backward.
Prints per stage and in total, ms per training step (all blocks of the stage).

  python3 bench/layout.py [--patch 128] [--batch 2] [--repeat 20]
"""
import argparse

import torch

RATIOS = [3, 4, 8, 8, 8, 8, 8, 4, 3]  # MedNeXt-L: expansion and block count per stage
BLOCKS = [3, 4, 8, 8, 8, 8, 8, 4, 3]


def timed(fn, repeat):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeat


def mlp_step(x, w1, w2, channels_last):
    """Forward and backward of the two products (GELU left out: the same in both)."""
    x = x.detach().requires_grad_()
    if channels_last:
        h = x @ w1.t()
        y = h @ w2.t()
    else:
        h = torch.matmul(w1, x)
        y = torch.matmul(w2, h)
    y.backward(torch.ones_like(y))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--patch", type=int, default=128)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    dev, dt = "cuda", torch.bfloat16
    print(f"{'stage':>5} {'C':>4} {'R':>2} {'side':>4} {'blocks':>6} {'ncdhw ms':>9} {'ndhwc ms':>9} "
          f"{'transposes ms':>13}")
    total = [0.0, 0.0, 0.0]
    for stage, (r, blocks) in enumerate(zip(RATIOS, BLOCKS)):
        level = stage if stage <= 4 else 8 - stage
        c, side = 32 << level, a.patch >> level
        v = side ** 3
        w1 = torch.randn(r * c, c, device=dev, dtype=dt, requires_grad=True)
        w2 = torch.randn(c, r * c, device=dev, dtype=dt, requires_grad=True)
        xf = torch.randn(a.batch, c, v, device=dev, dtype=dt)
        xl = torch.randn(a.batch * v, c, device=dev, dtype=dt)
        first = timed(lambda: mlp_step(xf, w1, w2, False), a.repeat)
        last = timed(lambda: mlp_step(xl, w1, w2, True), a.repeat)
        # Into channels-last and back, for the MLP's input and output, forward and backward.
        move = 4 * timed(lambda: xf.transpose(1, 2).contiguous(), a.repeat)
        row = [first * blocks, last * blocks, move * blocks]
        total = [t + x for t, x in zip(total, row)]
        print(f"{stage:>5} {c:>4} {r:>2} {side:>4} {blocks:>6} {row[0]:>9.2f} {row[1]:>9.2f} {row[2]:>13.2f}")
        del w1, w2, xf, xl
        torch.cuda.empty_cache()
    print(f"{'total':>5} {'':>4} {'':>2} {'':>4} {sum(BLOCKS):>6} {total[0]:>9.2f} {total[1]:>9.2f} "
          f"{total[2]:>13.2f}")
    print(f"layout: ncdhw {total[0]:.1f} ms, ndhwc {total[1]:.1f} ms + transposes {total[2]:.1f} ms "
          f"per step ({torch.cuda.get_device_name()})")


if __name__ == "__main__":
    main()
