"""Checks `medrun export` of an imported network against the run that trained it.

  export_check.py NET EXPORTED.safetensors|.pt --checkpoint STEP_DIR --artifact A.medc --func F
                  --medrun MEDRUN [--weights ema|model] [--shape N,C,D,H,W]

Loads EXPORTED (safetensors, or torch.load for .pt) into the PyTorch network NET (a key of
networks.NETWORKS) with
strict=True and compares its forward (eval mode) on a random input with ours: `medrun run`
with the checkpoint's own weights (STEP_DIR/ema.safetensors, or STEP_DIR/model.safetensors
with --weights model), not with the exported file, so that a tensor the export
got wrong (transposed, another one's) shows as a difference. Exit 1 on a failed load or a
relative error above 1e-4.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "medrun", "Inputs"))

import networks  # noqa: E402
from runfiles import read_safetensors, write_safetensors, artifact_document  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("net")
ap.add_argument("exported")
ap.add_argument("--checkpoint", required=True)
ap.add_argument("--artifact", required=True)
ap.add_argument("--func", required=True)
ap.add_argument("--medrun", required=True)
ap.add_argument("--weights", default="ema", choices=["ema", "model"])
ap.add_argument("--shape", default="2,1,16,16,16", help="the input's shape N,C,D,H,W")
args = ap.parse_args()

import torch  # noqa: E402

net = networks.NETWORKS[args.net]()
net.eval()
if args.exported.endswith((".pt", ".pth")):
    sd = torch.load(args.exported, map_location="cpu")
else:
    sd = {k: torch.from_numpy(v.copy()) for k, v in read_safetensors(args.exported).items()}
try:
    net.load_state_dict(sd, strict=True)
except RuntimeError as e:
    print("strict load FAILED: %s" % str(e).splitlines()[1].strip())
    sys.exit(1)

ours = read_safetensors(os.path.join(args.checkpoint, args.weights + ".safetensors"))

x = np.random.default_rng(3).standard_normal([int(v) for v in args.shape.split(",")]).astype(np.float32)
with torch.no_grad():
    ref = net(torch.from_numpy(x))
refs = [r.numpy() for r in ref] if isinstance(ref, (list, tuple)) else [ref.numpy()]
func = [f for f in artifact_document(args.artifact)["functions"] if f["name"] == args.func][0]
with tempfile.TemporaryDirectory() as work:
    np.save(os.path.join(work, "x.npy"), x)
    params = os.path.join(work, "ours.safetensors")
    write_safetensors(params, ours)
    subprocess.run([args.medrun, "run", args.artifact, "--func", args.func, "--input",
                    "arg0=" + os.path.join(work, "x.npy"), "--params", params, "--out", work],
                   check=True, stdout=subprocess.DEVNULL)
    mine = [np.load(os.path.join(work, n + ".npy")) for n in func["output_names"]]
errs = [float(np.linalg.norm(o - r) / np.linalg.norm(r)) for o, r in zip(mine, refs)]
ok = len(mine) == len(refs) and all(e <= 1e-4 for e in errs)
problem = ("%d outputs here, %d of ours" % (len(refs), len(mine)) if len(mine) != len(refs)
           else "differs: rel.err %s" % ", ".join("%.3e" % e for e in errs))
print("strict load of %d tensors into %s; forward vs ours (%s weights of the checkpoint, "
      "%d outputs): %s" % (len(sd), args.net, args.weights, len(refs), "ok" if ok else problem))
sys.exit(0 if ok else 1)
