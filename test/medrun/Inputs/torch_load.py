"""Loads the latest checkpoint of a `medrun train` run into the PyTorch MedNeXt v1 of bench/
and checks that it predicts what our `infer` predicts on the same input: the state_dict loads
(only MedNeXt v1's `dummy_tensor` is absent) and the outputs agree to 1e-4."""
import argparse
import glob
import json
import os
import subprocess
import sys

import numpy as np
import torch

from runfiles import artifact_document, read_safetensors, write_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench"))
from mednext_torch import MedNeXt  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("run")
ap.add_argument("--cache", required=True, help="folder of the run's compiled artifact")
ap.add_argument("--medrun", required=True)
ap.add_argument("--size", default="S")
ap.add_argument("--kernel", type=int, default=3)
args = ap.parse_args()

art = glob.glob(os.path.join(args.cache, "*.medc"))[0]
infer = [f for f in artifact_document(art)["functions"] if f["name"] == "infer"][0]
shape = infer["values"][infer["inputs"][0]]["shape"]
classes = infer["values"][infer["outputs"][0]]["shape"][1]

latest = json.load(open(os.path.join(args.run, "checkpoints", "latest")))
step_dir = os.path.join(args.run, "checkpoints", latest["dir"])
files = {n: read_safetensors(os.path.join(step_dir, n + ".safetensors"))
         for n in ("model", "ema", "optimizer")}

model = MedNeXt(args.size, args.kernel, classes=classes)
missing, unexpected = model.load_state_dict(
    {k: torch.from_numpy(v.copy()) for k, v in files["model"].items()}, strict=False)
if missing != ["dummy_tensor"] or unexpected:
    sys.exit("torch_load: missing %s, unexpected %s" % (missing, unexpected))

x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
with torch.no_grad():
    ref = model(torch.from_numpy(x)).numpy()

work = os.path.join(args.run, "torch_load")
os.makedirs(work, exist_ok=True)
merged = dict(files["model"])
merged.update({"ema." + k: v for k, v in files["ema"].items()})
merged.update(files["optimizer"])
write_safetensors(os.path.join(work, "all.safetensors"), merged)
np.save(os.path.join(work, "x.npy"), x)
subprocess.run([args.medrun, "run", art, "--func", "infer", "--input",
                "image=" + os.path.join(work, "x.npy"), "--params",
                os.path.join(work, "all.safetensors"), "--out", work],
               check=True, stdout=subprocess.DEVNULL)
ours = np.load(os.path.join(work, "out0.npy"))
err = np.linalg.norm(ours - ref) / np.linalg.norm(ref)
print("torch loads %s (missing only dummy_tensor); its output vs infer: rel.err %s"
      % (latest["dir"], "ok" if err <= 1e-4 else "%.3e" % err))
sys.exit(0 if err <= 1e-4 else 1)
