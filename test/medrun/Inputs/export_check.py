"""Checks a file `medrun export` wrote against MedNeXt v1 in PyTorch (mednext_v1.py, built
with create_mednext_v1 from the arguments given here, not from the file; --ds and --grn
build MedNeXt(...) with deep supervision and GRN): the state_dict loads with strict=True,
its keys come in PyTorch's order, dummy_tensor is [1.], and the network's forward equals
our `infer` (or --func) on the same input, every output (relative error <= 1e-4).

Negative controls: --drop KEY / --rename KEY=NEW change the file's dict before the strict
load (which must then fail); --perturb KEY changes one weight after it (the forward check
must then fail). Exit status 0 only if everything holds."""
import argparse
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mednext_v1 import VARIANTS, MedNeXt, create_mednext_v1  # noqa: E402
from runfiles import artifact_document, read_safetensors  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("exported")
ap.add_argument("--artifact", required=True, help="a compiled recipe (its `infer`) or its folder")
ap.add_argument("--medrun", required=True)
ap.add_argument("--size", default="S")
ap.add_argument("--kernel", type=int, default=3)
ap.add_argument("--func", default="infer")
ap.add_argument("--ds", action="store_true")
ap.add_argument("--grn", action="store_true")
ap.add_argument("--drop", action="append", default=[])
ap.add_argument("--rename", action="append", default=[])
ap.add_argument("--perturb")
args = ap.parse_args()

art = args.artifact
if os.path.isdir(art):
    art = sorted(glob.glob(os.path.join(art, "*.medc")))[0]
infer = [f for f in artifact_document(art)["functions"] if f["name"] == args.func][0]
shape = infer["values"][infer["inputs"][0]]["shape"]
classes = infer["values"][infer["outputs"][0]]["shape"][1]

raw = open(args.exported, "rb").read()
header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
meta = header.get("__metadata__", {})
file_keys = [k for k in header if k != "__metadata__"]
sd = {k: torch.from_numpy(v.copy()) for k, v in read_safetensors(args.exported).items()}
for key in args.drop:
    del sd[key]
for spec in args.rename:
    old, new = spec.split("=")
    sd[new] = sd.pop(old)

model = create_mednext_v1(shape[1], classes, args.size, kernel_size=args.kernel,
                          deep_supervision=args.ds)
built = "create_mednext_v1(%d, %d, '%s', kernel_size=%d)" % (shape[1], classes, args.size, args.kernel)
if args.grn:
    exp_r, block_counts, _ = VARIANTS[args.size]
    model = MedNeXt(shape[1], 32, classes, exp_r=exp_r, kernel_size=args.kernel,
                    deep_supervision=args.ds, do_res=True, do_res_up_down=True,
                    block_counts=block_counts, grn=True)
    built = "MedNeXt-%s(kernel_size=%d, deep_supervision=%s, grn=True)" % (args.size, args.kernel, args.ds)
model.eval()
try:
    model.load_state_dict(sd, strict=True)
except RuntimeError as e:
    print("strict load FAILED: %s" % str(e).splitlines()[1].strip())
    sys.exit(1)
problems = []
if file_keys != list(model.state_dict()):
    problems.append("keys not in PyTorch's state_dict order")
if model.dummy_tensor.tolist() != [1.0]:
    problems.append("dummy_tensor is %s" % model.dummy_tensor.tolist())
if json.loads(meta.get("mednext_v1", "{}")).get("n_classes") != classes:
    problems.append("metadata mednext_v1 %s" % meta.get("mednext_v1"))
if args.perturb:
    with torch.no_grad():
        dict(model.named_parameters())[args.perturb].add_(1e-2)

x = np.random.default_rng(11).standard_normal(shape).astype(np.float32)
with torch.no_grad():
    ref = model(torch.from_numpy(x))
    ref = [r.numpy() for r in ref] if isinstance(ref, list) else [ref.numpy()]
with tempfile.TemporaryDirectory() as work:
    np.save(os.path.join(work, "x.npy"), x)
    subprocess.run([args.medrun, "run", art, "--func", args.func, "--input",
                    "arg0=" + os.path.join(work, "x.npy"), "--params", args.exported,
                    "--out", work], check=True, stdout=subprocess.DEVNULL)
    ours = [np.load(os.path.join(work, name + ".npy")) for name in infer["output_names"]]
if len(ours) != len(ref):
    problems.append("%d outputs here, %d of ours" % (len(ref), len(ours)))
for i, (o, r) in enumerate(zip(ours, ref)):
    err = float(np.linalg.norm(o - r) / np.linalg.norm(r))
    if not err <= 1e-4:
        problems.append("forward differs from ours: output %d rel.err %.3e" % (i, err))
print("strict load of %d tensors (%s weights) into %s; forward vs ours (%d outputs): %s"
      % (len(sd), meta.get("weights"), built, len(ref), "; ".join(problems) if problems else "ok"))
sys.exit(1 if problems else 0)
