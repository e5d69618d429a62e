"""Checks the output directory of `medrun train` with numpy and the standard library only:
metrics.jsonl holds one line per step, the loss falls (--falls), and the latest checkpoint
loads as safetensors with MedNeXt's state_dict keys, the artifact's shapes and finite values."""
import argparse
import glob
import json
import os
import sys

import numpy as np

from runfiles import artifact_parameters, read_safetensors


def fail(msg):
    print("check_run: " + msg)
    sys.exit(1)


ap = argparse.ArgumentParser()
ap.add_argument("run")
ap.add_argument("--steps", type=int, required=True)
ap.add_argument("--falls", action="store_true")
ap.add_argument("--artifact-dir")
args = ap.parse_args()

lines = [json.loads(l) for l in open(os.path.join(args.run, "metrics.jsonl"))]
steps = [l["step"] for l in lines]
if steps != list(range(args.steps)):
    fail("metrics.jsonl steps %s, expected 0..%d" % (steps, args.steps - 1))
for key in ("loss", "lr", "grad_norm", "step_time", "samples_per_s", "data_wait"):
    if any(key not in l for l in lines):
        fail("metrics.jsonl lacks '%s'" % key)
losses = np.array([l["loss"] for l in lines])
if args.falls:
    first, last = losses[:5].mean(), losses[-5:].mean()
    print("loss %.4f -> %.4f" % (first, last))
    if not last < 0.95 * first:
        fail("the loss did not fall: %s" % losses)

config = json.load(open(os.path.join(args.run, "config.json")))
if config["train"]["steps"] != args.steps:
    fail("config.json says %d steps" % config["train"]["steps"])
if not glob.glob(os.path.join(args.run, "tensorboard", "events.out.tfevents.*")):
    fail("no TensorBoard event file")

latest = json.load(open(os.path.join(args.run, "checkpoints", "latest")))
step_dir = os.path.join(args.run, "checkpoints", latest["dir"])
state = json.load(open(os.path.join(step_dir, "state.json")))
if state["step"] != args.steps:
    fail("the latest checkpoint is step %d" % state["step"])
model = read_safetensors(os.path.join(step_dir, "model.safetensors"))
ema = read_safetensors(os.path.join(step_dir, "ema.safetensors"))
opt = read_safetensors(os.path.join(step_dir, "optimizer.safetensors"))
for key, shape in (("stem.weight", (32, 1, 1, 1, 1)), ("enc_block_0.0.conv1.weight", (32, 1, 3, 3, 3)),
                   ("bottleneck.0.norm.weight", (512,)), ("out_0.conv_out.weight", (32, 3, 1, 1, 1))):
    if key not in model or model[key].shape != shape:
        fail("model.safetensors: %s is %s, expected %s" % (key, model.get(key, np.empty(0)).shape, shape))
if any(k.startswith(("ema.", "optimizer.")) for k in model):
    fail("model.safetensors holds state that belongs elsewhere")
if set(ema) - set(model):
    fail("EMA keys that are no model keys: %s" % sorted(set(ema) - set(model))[:3])
for name, t in list(model.items()) + list(ema.items()) + list(opt.items()):
    if t.dtype == np.float32 and not np.isfinite(t).all():
        fail("%s is not finite" % name)
if args.artifact_dir:
    arts = glob.glob(os.path.join(args.artifact_dir, "*.medc"))
    params = artifact_parameters(arts[0])
    merged = dict(model)
    merged.update({"ema." + k: v for k, v in ema.items()})
    merged.update(opt)
    if set(merged) != set(params):
        fail("checkpoint keys differ from the artifact's parameters: %s" % sorted(set(merged) ^ set(params))[:5])
    for k, shape in params.items():
        if list(merged[k].shape) != shape:
            fail("%s: shape %s, artifact %s" % (k, merged[k].shape, shape))
print("ok: %d steps, %d model tensors, %d EMA, %d optimizer" % (len(lines), len(model), len(ema), len(opt)))
