#!/usr/bin/env python3
"""Which activation layout the MedNeXt block MLP's GEMMs want: a measurement.

The 1x1x1 expand and compress of every MedNeXt-L block (its regular blocks, stages 0..8):
forward, input gradient and weight gradient each, in bf16 through cuBLAS, in the two
layouts a step could keep activations in:
  ncdhw   X as [N, C, V] (V voxels contiguous): H = W1 @ X[n], batched over N
  ndhwc   X as [N*V, C] (channels contiguous):  H = X @ W1^T, one GEMM
plus what a channels-last MLP costs when the depthwise stencil and the norm stay NCDHW:
the MLP's input and output into channels-last and back, forward and backward.
Prints ms per training step (all blocks of a stage), per stage and in total.

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


def products(x, w, dy, channels_last):
    """The three products of one 1x1x1 convolution: forward, input and weight gradient.

    ncdhw: x [N, Cin, V], w [Cout, Cin], dy [N, Cout, V]; the weight gradient sums the
    samples' products. ndhwc: x [N*V, Cin], dy [N*V, Cout]."""
    if channels_last:
        return (lambda: x @ w.t(), lambda: dy @ w, lambda: dy.t() @ x)
    return (lambda: torch.matmul(w, x), lambda: torch.matmul(w.t(), dy),
            lambda: torch.bmm(dy, x.transpose(1, 2)).sum(0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--patch", type=int, default=128)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    dev, dt = "cuda", torch.bfloat16
    names = ["fwd", "dx", "dw"]
    print(f"{'stage':>5} {'C':>4} {'R':>2} {'side':>4} {'blocks':>6} "
          + " ".join(f"{'ncdhw ' + n:>9}" for n in names) + " "
          + " ".join(f"{'ndhwc ' + n:>9}" for n in names) + f" {'transposes':>10}")
    total = [0.0] * 7
    for stage, (r, blocks) in enumerate(zip(RATIOS, BLOCKS)):
        level = stage if stage <= 4 else 8 - stage
        c, side = 32 << level, a.patch >> level
        v = side ** 3
        row = []
        for last in (False, True):
            t = [0.0, 0.0, 0.0]
            for cin, cout in ((c, r * c), (r * c, c)):  # expand, then compress
                shape = (lambda ch: (a.batch * v, ch)) if last else (lambda ch: (a.batch, ch, v))
                w = torch.randn(cout, cin, device=dev, dtype=dt)
                x = torch.randn(*shape(cin), device=dev, dtype=dt)
                dy = torch.randn(*shape(cout), device=dev, dtype=dt)
                for k, f in enumerate(products(x, w, dy, last)):
                    t[k] += timed(f, a.repeat) * blocks
                del w, x, dy
                torch.cuda.empty_cache()
            row += t
        # A channels-last MLP between NCDHW stencils and norms: its input and its output
        # into channels-last and back, forward and backward (4 transposes of C channels).
        xf = torch.randn(a.batch, c, v, device=dev, dtype=dt)
        row.append(4 * timed(lambda: xf.transpose(1, 2).contiguous(), a.repeat) * blocks)
        del xf
        torch.cuda.empty_cache()
        total = [u + w for u, w in zip(total, row)]
        print(f"{stage:>5} {c:>4} {r:>2} {side:>4} {blocks:>6} " + " ".join(f"{x:>9.2f}" for x in row[:6])
              + f" {row[6]:>10.2f}")
    print(f"{'total':>5} {'':>4} {'':>2} {'':>4} {sum(BLOCKS):>6} " + " ".join(f"{x:>9.2f}" for x in total[:6])
          + f" {total[6]:>10.2f}")
    print(f"layout: ncdhw {sum(total[0:3]):.1f} ms, ndhwc {sum(total[3:6]):.1f} ms + transposes "
          f"{total[6]:.1f} ms per step over all blocks ({torch.cuda.get_device_name()})")


if __name__ == "__main__":
    main()
