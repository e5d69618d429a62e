#!/usr/bin/env python3
"""The PyTorch side of the imported networks' benchmark: nnU-Net's PlainConvUNet (3d_fullres
plan) and ResidualEncoderUNet (the ResEnc presets' network) trained as nnU-Net trains them.

The networks are the transcriptions medc imports (test/import/Inputs/networks.py, the same
classes torch.onnx.export writes the ONNX files from), so both sides train the same network:
  plainconvunet  6 stages, 32 -> 320 features, 2 convs per stage, InstanceNorm + LeakyReLU,
                 deep supervision (5 heads)
  resencunet     the same features and strides, (1, 3, 4, 6, 6, 6) residual blocks, one
                 decoder conv per stage, deep supervision

The step (nnU-Net's recipe): bf16 autocast for the network, Dice + CE with deep supervision
(nnU-Net's DC_and_CE_loss per level: CE mean + (-soft Dice of the softmax, background
excluded, batch Dice, smooth 1e-5), level weights 1/2^i with the lowest resolution's set to
0, normalized to sum 1; a level of weight 0 is skipped, as nnU-Net's wrapper does), SGD with
Nesterov momentum 0.99 and weight decay 3e-5, gradient norm clipped to 12,
cudnn.benchmark. Targets: random class indices, the lower levels taken every 2^i-th voxel
(nearest). Median ms/step over --steps after --warmup (CUDA events), peak device memory.

  python3 bench/import_torch.py --net plainconvunet --patch 128 --batch 2 --modes eager,compile
  python3 bench/import_torch.py --net resencunet --device cpu --patch 32 --batch 1 --steps 1 --warmup 0 --modes eager
"""
import argparse
import copy
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "import", "Inputs"))
import networks  # noqa: E402  (the transcriptions medc's ONNX files are exported from)

NETS = {  # --net -> the class (full-size defaults) and the networks.NETWORKS key medc's ONNX is
    # exported from (3 classes)
    "plainconvunet": (networks.PlainConvUNet, "plainconvunet_3d_fullres_ds"),
    "resencunet": (networks.ResidualEncoderUNet, "resencunet_preset_ds"),
}


def ds_weights(levels):
    """nnU-Net's deep-supervision weights: 1/2^i, the lowest resolution's 0, sum 1."""
    w = [1.0 / 2 ** i for i in range(levels)]
    w[-1] = 0.0
    s = sum(w)
    return [x / s for x in w]


def dice_ce(logits, target, smooth=1e-5):
    """nnU-Net's DC_and_CE_loss (weights 1, 1): CE mean + (-soft Dice), softmax, background
    excluded, batch Dice."""
    ce = F.cross_entropy(logits, target)
    p = torch.softmax(logits, 1)
    onehot = F.one_hot(target, logits.shape[1]).permute(0, 4, 1, 2, 3).to(p.dtype)
    axes = (0, 2, 3, 4)  # batch Dice: sums over the batch too
    tp = (p * onehot).sum(axes)
    denom = p.sum(axes) + onehot.sum(axes)
    dc = (2 * tp + smooth) / torch.clamp(denom + smooth, min=1e-8)
    return ce - dc[1:].mean()


def bench(model, args, mode, dev):
    torch.backends.cudnn.benchmark = True
    # "-cl": the network's weights and input in channels_last_3d (NDHWC strides; cuDNN's
    # tensor-core convolutions take that layout without transposing), on a copy of the model.
    cl = mode.endswith("-cl")
    if cl:
        model = copy.deepcopy(model).to(memory_format=torch.channels_last_3d)
    net = torch.compile(model) if mode.startswith("compile") else model
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.99, nesterov=True,
                          weight_decay=3e-5)
    g = torch.Generator(device=dev).manual_seed(0)
    p = args.patch
    x = torch.randn(args.batch, 1, p, p, p, device=dev, generator=g)
    if cl:
        x = x.contiguous(memory_format=torch.channels_last_3d)
    t = torch.randint(0, args.classes, (args.batch, p, p, p), device=dev, generator=g)
    levels = 5  # the 3d_fullres plan's decoder stages
    targets = [t[:, ::2 ** i, ::2 ** i, ::2 ** i].contiguous() for i in range(levels)]
    weights = ds_weights(levels)
    amp = torch.bfloat16

    def step():
        with torch.autocast(dev.type, dtype=amp):
            outs = net(x)
        loss = sum(w * dice_ce(o.float(), tt) for w, o, tt in zip(weights, outs, targets) if w != 0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 12.0)
        opt.step()
        return loss

    cuda = dev.type == "cuda"
    t0 = time.time()
    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    warm = time.time() - t0
    times = []
    for _ in range(args.steps):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            loss = step()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        else:
            s = time.perf_counter()
            loss = step()
            times.append(1e3 * (time.perf_counter() - s))
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
    return statistics.median(times), peak, warm, float(loss.detach())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--net", default="plainconvunet", choices=sorted(NETS))
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--patch", type=int, default=128)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--modes", default="eager,compile",
                    help="of eager, compile, eager-cl, compile-cl (-cl: channels_last_3d)")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu to check the script")
    args = ap.parse_args()
    dev = torch.device(args.device)
    torch.manual_seed(0)
    cls, key = NETS[args.net]
    model = cls(1, args.classes, deep_supervision=True)
    networks.kaiming_init(model)
    model = model.to(dev)
    n = sum(p.numel() for p in model.parameters())
    name = torch.cuda.get_device_name() if dev.type == "cuda" else "CPU"
    print("%s (%s), %d parameters, batch %d, %d^3, %d classes, bf16 autocast, Dice+CE deep "
          "supervision, SGD-Nesterov, torch %s, %s"
          % (args.net, key, n, args.batch, args.patch, args.classes, torch.__version__,
             name), flush=True)
    failed = 0
    for mode in args.modes.split(","):
        try:
            ms, peak, warm, loss = bench(model, args, mode, dev)
        except Exception as e:  # e.g. out of memory: the other mode still runs
            print("FAIL torch %s %s: %s" % (args.net, mode, str(e).splitlines()[0][:300]), flush=True)
            failed += 1
            if dev.type == "cuda":
                torch.cuda.empty_cache()
            continue
        print("torch %-13s %-8s %8.1f ms/step  peak %6.2f GiB  (warm-up %.0f s, loss %.4f)"
              % (args.net, mode, ms, peak, warm, loss), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
