"""Checks `medrun init K5.medc --init-from K3.safetensors --upkern` against MedNeXt's own
UpKern (mednext_v1.py: upkern_load_weights, torch.nn.functional.interpolate trilinear): the
kernel-3 weights load strictly into MedNeXt v1 with kernel 3, UpKern makes a kernel-5
network of them, and every parameter of ours equals its (max |difference| <= 1e-6; the
resized kernels are printed with theirs). Negative control: --align-corners makes the
reference interpolate with align_corners=True, which must not match."""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mednext_v1 import create_mednext_v1, upkern_load_weights  # noqa: E402
from runfiles import read_safetensors  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("k3", help="MedNeXt v1 kernel-3 state_dict (medrun export)")
ap.add_argument("ours", help="the parameters medrun init --upkern wrote")
ap.add_argument("--size", default="S")
ap.add_argument("--classes", type=int, default=3)
ap.add_argument("--align-corners", action="store_true")
args = ap.parse_args()

k3 = create_mednext_v1(1, args.classes, args.size, kernel_size=3)
k3.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in read_safetensors(args.k3).items()},
                   strict=True)
k5 = create_mednext_v1(1, args.classes, args.size, kernel_size=5)
upkern_load_weights(k5, k3, align_corners=True if args.align_corners else None)

ours = read_safetensors(args.ours)
theirs = {k: v.numpy() for k, v in k5.state_dict().items() if k != "dummy_tensor"}
model_keys = {k for k in ours if not k.startswith(("ema.", "optimizer."))}
if model_keys != set(theirs):
    sys.exit("upkern_check: keys differ: %s" % sorted(model_keys ^ set(theirs))[:5])
resized = [k for k in theirs if theirs[k].shape != k3.state_dict()[k].shape]
worst = max(float(np.abs(ours[k] - theirs[k]).max()) for k in theirs)
ok = worst <= 1e-6 and len(resized) > 0
print("upkern: %d kernels resized, %d parameters compared with MedNeXt's upkern_load_weights: "
      "max |diff| %s" % (len(resized), len(theirs), "ok" if ok else "%.3e" % worst))
sys.exit(0 if ok else 1)
