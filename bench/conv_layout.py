#!/usr/bin/env python3
"""Which layout PlainConvUNet's dense convolutions want from cuDNN: a measurement.

Every 3x3x3 convolution and 2x2x2 transposed convolution of nnU-Net's 3d_fullres
PlainConvUNet (6 stages, 32 -> 320 features, two convolutions per stage, strided first
convolutions, the decoder's concatenations) at a patch and batch, in bf16 through cuDNN
(torch.backends.cudnn.benchmark: each shape's fastest algorithm), forward, input gradient
and weight gradient, in the two layouts a step can keep activations in:
  ncdhw   [N, C, D, H, W] contiguous (what medrun and a default PyTorch model use)
  ndhwc   torch.channels_last_3d (channels contiguous; tensor cores' native operand order)
Prints ms per training step per stage and in total, each layout's sum, and the ratio: the
share of a PlainConvUNet step that a channels-last step could save on its convolutions.

  python3 bench/conv_layout.py [--patch 128] [--batch 2] [--repeat 10]
"""
import argparse

import torch
import torch.nn.functional as F

from layout import timed  # the same timing as the 1x1x1 layout measurement

FEATURES = [32, 64, 128, 256, 320, 320]


def layers(patch, batch):
    """(stage, what, input shape, weight shape, stride, transposed) of every convolution."""
    out, cin, side = [], 1, patch
    for s, c in enumerate(FEATURES):
        stride = 1 if s == 0 else 2
        if s:
            side //= 2
        out.append((s, "enc conv1", (batch, cin, side * stride, side * stride, side * stride),
                    (c, cin, 3, 3, 3), stride, False))
        out.append((s, "enc conv2", (batch, c, side, side, side), (c, c, 3, 3, 3), 1, False))
        cin = c
    for s in range(len(FEATURES) - 2, -1, -1):
        c, below, side = FEATURES[s], FEATURES[s + 1], patch >> s
        out.append((s, "dec transp", (batch, below, side // 2, side // 2, side // 2),
                    (below, c, 2, 2, 2), 2, True))
        out.append((s, "dec conv1", (batch, 2 * c, side, side, side), (c, 2 * c, 3, 3, 3), 1, False))
        out.append((s, "dec conv2", (batch, c, side, side, side), (c, c, 3, 3, 3), 1, False))
    return out


def step_ms(shape, wshape, stride, transposed, fmt, repeat):
    dev, dt = "cuda", torch.bfloat16
    x = torch.randn(shape, device=dev, dtype=dt).contiguous(memory_format=fmt).requires_grad_()
    w = (torch.randn(wshape, device=dev, dtype=dt) * 0.05).contiguous(memory_format=fmt)
    w.requires_grad_()
    if transposed:
        conv = lambda: F.conv_transpose3d(x, w, stride=stride)
    else:
        conv = lambda: F.conv3d(x, w, stride=stride, padding=1)
    y = conv()
    dy = torch.randn_like(y).contiguous(memory_format=fmt)

    def fwd_bwd():
        torch.autograd.grad(conv(), (x, w), dy)

    return timed(fwd_bwd, repeat)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--patch", type=int, default=128)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    fmts = {"ncdhw": torch.contiguous_format, "ndhwc": torch.channels_last_3d}
    print(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, cuDNN "
          f"{torch.backends.cudnn.version()}; PlainConvUNet 3d_fullres, {a.patch}^3, batch "
          f"{a.batch}, bf16, forward + both gradients, ms per step")
    print(f"{'stage':>5} {'layer':>11} {'input':>22} {'ncdhw':>8} {'ndhwc':>8} {'ratio':>6}")
    total = {k: 0.0 for k in fmts}
    for stage, what, shape, wshape, stride, transposed in layers(a.patch, a.batch):
        ms = {k: step_ms(shape, wshape, stride, transposed, f, a.repeat) for k, f in fmts.items()}
        for k in fmts:
            total[k] += ms[k]
        print(f"{stage:>5} {what:>11} {'x'.join(map(str, shape)):>22} {ms['ncdhw']:8.3f} "
              f"{ms['ndhwc']:8.3f} {ms['ndhwc'] / ms['ncdhw']:6.2f}")
    print(f"{'all':>5} {'':>11} {'':>22} {total['ncdhw']:8.3f} {total['ndhwc']:8.3f} "
          f"{total['ndhwc'] / total['ncdhw']:6.2f}")


if __name__ == "__main__":
    main()
