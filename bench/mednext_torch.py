#!/usr/bin/env python3
"""The PyTorch side of the benchmark: MedNeXt v1 and its training step, as users run it.

The network follows MedNeXt v1's definition (docs in shared/reference/mednext.md): stem,
four encoder stages, bottleneck, four decoder stages with additive skips, residual blocks of
depthwise conv -> GroupNorm(C, C) -> 1x1x1 expand -> GELU -> 1x1x1 compress, strided
depthwise down blocks and transposed-conv up blocks with 1x1x1 residual paths, a transposed
1x1x1 head, and `dummy_tensor`. Its state_dict has the same keys and shapes as our model
files but `dummy_tensor` (test/models/bench_state_dict.test), so both sides train the same
network.

  python3 bench/mednext_torch.py --check-keys PLAN.json     keys/shapes vs a medc plan
  python3 bench/mednext_torch.py --size L --patch 128 --batch 2 --modes eager,compile
  torchrun --standalone --nproc-per-node N bench/mednext_torch.py --ddp ...   (DDP over NCCL)

The step: bf16 autocast, BCE-with-logits on random targets, backward, fused AdamW,
cudnn.benchmark; median ms/step over --steps after --warmup, and peak device memory.
With --ddp (under torchrun: one process per GPU, LOCAL_RANK) the model is wrapped in
DistributedDataParallel over NCCL (the gradients averaged over the ranks in buckets during
backward, torch's defaults), each rank steps on its own batch of --batch, and rank 0 prints
each mode's slowest rank's median and the largest peak memory of a rank.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VARIANTS = {  # exp_r and block counts per stage: enc 0..3, bottleneck, dec 3..0
    "S": ([2] * 9, [2] * 9),
    "B": ([2, 3, 4, 4, 4, 4, 4, 3, 2], [2] * 9),
    "M": ([2, 3, 4, 4, 4, 4, 4, 3, 2], [3, 4, 4, 4, 4, 4, 4, 4, 3]),
    "L": ([3, 4, 8, 8, 8, 8, 8, 4, 3], [3, 4, 8, 8, 8, 8, 8, 4, 3]),
}


class Block(nn.Module):
    """Residual block; kind 'down' (stride-2 depthwise) or 'up' (stride-2 transposed)."""

    def __init__(self, c_in, c_out, exp, k, kind="block"):
        super().__init__()
        self.kind = kind
        if kind == "up":
            self.conv1 = nn.ConvTranspose3d(c_in, c_in, k, stride=2, padding=k // 2, groups=c_in)
        else:
            self.conv1 = nn.Conv3d(c_in, c_in, k, stride=2 if kind == "down" else 1,
                                   padding=k // 2, groups=c_in)
        self.norm = nn.GroupNorm(c_in, c_in)
        self.conv2 = nn.Conv3d(c_in, exp * c_in, 1)
        self.act = nn.GELU()
        self.conv3 = nn.Conv3d(exp * c_in, c_out, 1)
        if kind == "down":
            self.res_conv = nn.Conv3d(c_in, c_out, 1, stride=2)
        elif kind == "up":
            self.res_conv = nn.ConvTranspose3d(c_in, c_out, 1, stride=2)

    def forward(self, x):
        y = self.conv3(self.act(self.conv2(self.norm(self.conv1(x)))))
        if self.kind == "block":
            return x + y
        r = self.res_conv(x)
        if self.kind == "up":  # both paths give 2n-1 voxels: pad one in front of each axis
            y = F.pad(y, (1, 0, 1, 0, 1, 0))
            r = F.pad(r, (1, 0, 1, 0, 1, 0))
        return y + r


class OutBlock(nn.Module):
    def __init__(self, c, classes):
        super().__init__()
        self.conv_out = nn.ConvTranspose3d(c, classes, 1)

    def forward(self, x):
        return self.conv_out(x)


class MedNeXt(nn.Module):
    def __init__(self, size="L", kernel=3, in_channels=1, classes=3, c=32):
        super().__init__()
        exp, counts = VARIANTS[size]
        self.stem = nn.Conv3d(in_channels, c, 1)
        for i in range(4):
            w = c << i
            setattr(self, "enc_block_%d" % i,
                    nn.Sequential(*[Block(w, w, exp[i], kernel) for _ in range(counts[i])]))
            setattr(self, "down_%d" % i, Block(w, 2 * w, exp[i + 1], kernel, "down"))
        self.bottleneck = nn.Sequential(*[Block(16 * c, 16 * c, exp[4], kernel)
                                          for _ in range(counts[4])])
        for j, i in enumerate((3, 2, 1, 0)):
            w = c << i
            setattr(self, "up_%d" % i, Block(2 * w, w, exp[5 + j], kernel, "up"))
            setattr(self, "dec_block_%d" % i,
                    nn.Sequential(*[Block(w, w, exp[5 + j], kernel) for _ in range(counts[5 + j])]))
        self.out_0 = OutBlock(c, classes)
        self.dummy_tensor = nn.Parameter(torch.tensor([1.0]))

    def forward(self, x):
        x = self.stem(x)
        skips = []
        for i in range(4):
            x = getattr(self, "enc_block_%d" % i)(x)
            skips.append(x)
            x = getattr(self, "down_%d" % i)(x)
        x = self.bottleneck(x)
        for i in (3, 2, 1, 0):
            x = skips[i] + getattr(self, "up_%d" % i)(x)
            x = getattr(self, "dec_block_%d" % i)(x)
        return self.out_0(x)


def check_keys(plan_path, model):
    """Compares the state_dict with the parameters of a medc plan (`--emit=plan`)."""
    plan = json.load(open(plan_path))
    ours = {p["name"]: tuple(p["shape"]) for p in plan["parameters"]}
    # dummy_tensor only serves MedNeXt v1's gradient checkpointing; our files leave it out.
    theirs = {k: tuple(v.shape) for k, v in model.state_dict().items() if k != "dummy_tensor"}
    missing, extra = sorted(set(ours) - set(theirs)), sorted(set(theirs) - set(ours))
    shapes = sorted(k for k in set(ours) & set(theirs) if ours[k] != theirs[k])
    count = sum(v.numel() for k, v in model.state_dict().items() if k != "dummy_tensor")
    print("%d tensors, %d elements; only in the plan: %s; only in torch: %s; shapes differ: %s"
          % (len(theirs), count, missing[:3] or "none", extra[:3] or "none", shapes[:3] or "none"))
    return not (missing or extra or shapes)


def bench(model, args, mode):
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    net = model
    if args.ddp:
        # dummy_tensor takes no part in the forward pass (it serves MedNeXt v1's gradient
        # checkpointing): DDP would wait for its gradient forever.
        model.dummy_tensor.requires_grad_(False)
        net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
    net = torch.compile(net) if mode == "compile" else net
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2, fused=True)
    g = torch.Generator(device=dev).manual_seed(args.rank)
    p = args.patch
    x = torch.randn(args.batch, 1, p, p, p, device=dev, generator=g)
    y = (torch.rand(args.batch, args.classes, p, p, p, device=dev, generator=g) < 0.3).float()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = net(x)
        loss = F.binary_cross_entropy_with_logits(out.float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    t0 = time.time()
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    warm = time.time() - t0
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        loss = step()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    peak = torch.cuda.max_memory_allocated() / 2**30
    return statistics.median(times), peak, warm, float(loss.detach())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", default="L", choices=sorted(VARIANTS))
    ap.add_argument("--kernel", type=int, default=3)
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--patch", type=int, default=128)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--check-keys", metavar="PLAN.json")
    ap.add_argument("--ddp", action="store_true",
                    help="DistributedDataParallel over NCCL, one process per GPU (under torchrun)")
    args = ap.parse_args()
    model = MedNeXt(args.size, args.kernel, classes=args.classes)
    if args.check_keys:
        sys.exit(0 if check_keys(args.check_keys, model) else 1)
    args.rank, ranks = 0, 1
    if args.ddp:
        if "LOCAL_RANK" not in os.environ:
            sys.exit("mednext_torch.py: --ddp runs under torchrun (LOCAL_RANK is not set)")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        torch.distributed.init_process_group("nccl")
        args.rank, ranks = torch.distributed.get_rank(), torch.distributed.get_world_size()
    torch.manual_seed(0)  # the same initial parameters on every rank
    model = model.cuda()
    n = sum(p.numel() for p in model.parameters())
    if args.rank == 0:
        print("MedNeXt-%s k%d, %d parameters, batch %d%s, %d^3, bf16 autocast, fused AdamW, torch %s, %s"
              % (args.size, args.kernel, n, args.batch,
                 " per GPU, DDP over %d GPUs" % ranks if args.ddp else "", args.patch,
                 torch.__version__, torch.cuda.get_device_name()), flush=True)
    for mode in args.modes.split(","):
        ms, peak, warm, loss = bench(model, args, mode)
        label = "ddp-" + mode if args.ddp else mode
        if args.ddp:  # the slowest rank sets the pace; the fullest GPU the memory
            every = [None] * ranks
            torch.distributed.all_gather_object(every, (ms, peak))
            ms, peak = max(e[0] for e in every), max(e[1] for e in every)
        if args.rank == 0:
            print("torch %-8s %8.1f ms/step  peak %6.2f GiB  (warm-up %.0f s, loss %.4f)"
                  % (label, ms, peak, warm, loss), flush=True)
    if args.ddp:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
