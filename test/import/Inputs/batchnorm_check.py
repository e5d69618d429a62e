"""A Conv3d -> BatchNorm3d -> ReLU -> Conv3d network exported from PyTorch, and checks of
medc's BatchNorm (med.batch_norm) against PyTorch's train and eval modes.

  batchnorm_check.py export --out DIR
      DIR/bn.onnx (torch.onnx.export of the eval-mode network with
      training=TrainingMode.PRESERVE, which keeps BatchNormalization: the default EVAL mode
      folds it into the convolution), DIR/bn_training.onnx (exported in training mode),
      DIR/bn.safetensors (the state_dict, num_batches_tracked
      as f32), DIR/x.npy, and PyTorch's results: ref_eval.npy (eval mode), ref_train.npy and
      the running statistics after that train-mode forward (train_<key>.npy).
  batchnorm_check.py train DIR --artifact A --func F --medrun MEDRUN [--reference R]
      runs F (the network in its training form) with the state_dict and --save-params, and
      compares its output and the running statistics it assigns with PyTorch's train mode.
      --reference biased-running | unbiased-normalize | onnx-momentum computes the expected
      values by hand with that mistake instead (negative controls: they must not match).
  batchnorm_check.py eval DIR --artifact A --func F --medrun MEDRUN
      runs F (e.g. infer) and compares with PyTorch's eval-mode forward.
  batchnorm_check.py strict WEIGHTS.safetensors DIR --artifact A --func F --medrun MEDRUN [--drop KEY]
      loads WEIGHTS into the PyTorch network with strict=True and compares its eval-mode
      forward with ours (F, e.g. infer) on the same weights.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "medrun", "Inputs"))

MOMENTUM = 0.3  # not PyTorch's default, so that a convention mix-up shows
EPS = 1e-3


def build():
    import torch

    class BNNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv3d(1, 4, 3, padding=1)
            self.bn = torch.nn.BatchNorm3d(4, eps=EPS, momentum=MOMENTUM)
            self.head = torch.nn.Conv3d(4, 3, 1)

        def forward(self, x):
            return self.head(torch.relu(self.bn(self.conv(x))))

    torch.manual_seed(0)
    net = BNNet()
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():  # running statistics and affine far from their starts
        net.bn.weight.add_(0.3 * torch.randn(4, generator=g))
        net.bn.bias.add_(0.3 * torch.randn(4, generator=g))
        net.bn.running_mean.copy_(0.2 * torch.randn(4, generator=g))
        net.bn.running_var.copy_(0.5 + torch.rand(4, generator=g))
        net.bn.num_batches_tracked.fill_(7)
    return net


def state_dict_f32(net):
    return {k: v.detach().numpy().astype(np.float32) for k, v in net.state_dict().items()}


def export(args):
    import copy
    import torch
    from runfiles import write_safetensors
    net = build()
    os.makedirs(args.out, exist_ok=True)
    x = torch.from_numpy(np.random.default_rng(1).standard_normal([2, 1, 5, 4, 3]).astype(np.float32))
    write_safetensors(os.path.join(args.out, "bn.safetensors"), state_dict_f32(net))
    np.save(os.path.join(args.out, "x.npy"), x.numpy())
    train = copy.deepcopy(net).train()
    with torch.no_grad():
        np.save(os.path.join(args.out, "ref_train.npy"), train(x).numpy())
        for k, v in train.state_dict().items():
            if k.startswith("bn.running") or k.endswith("num_batches_tracked"):
                np.save(os.path.join(args.out, "train_%s.npy" % k), v.numpy().astype(np.float32))
        net.eval()
        np.save(os.path.join(args.out, "ref_eval.npy"), net(x).numpy())
    dyn = {"x": {0: "batch", 2: "depth", 3: "height", 4: "width"},
           "out0": {0: "batch", 2: "d", 3: "h", 4: "w"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, x, os.path.join(args.out, "bn.onnx"), opset_version=17,
                          input_names=["x"], output_names=["out0"], dynamic_axes=dyn,
                          do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
        # The same network exported in training mode: its BatchNormalization also returns the
        # running statistics, which the import refuses.
        torch.onnx.export(net, x, os.path.join(args.out, "bn_training.onnx"), opset_version=17,
                          input_names=["x"], output_names=["out0"], dynamic_axes=dyn,
                          do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
    print("exported bn: %d state_dict entries" % len(net.state_dict()))


def run_ours(args, x, weights, save=None):
    from runfiles import artifact_document
    func = [f for f in artifact_document(args.artifact)["functions"] if f["name"] == args.func][0]
    with tempfile.TemporaryDirectory() as work:
        cmd = [args.medrun, "run", args.artifact, "--func", args.func, "--input", "arg0=" + x,
               "--params", weights, "--out", work]
        if save:
            cmd += ["--save-params", save]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return np.load(os.path.join(work, func["output_names"][0] + ".npy"))


def rel(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / max(np.linalg.norm(b), 1e-30))


def by_hand(d, mistake):
    """PyTorch's train-mode forward written out in numpy, with one mistake."""
    import torch
    net = build()
    x = torch.from_numpy(np.load(os.path.join(d, "x.npy")))
    with torch.no_grad():
        h = net.conv(x).double().numpy()
    n = h.shape[0] * h.shape[2] * h.shape[3] * h.shape[4]
    mean = h.mean(axis=(0, 2, 3, 4))
    biased = h.var(axis=(0, 2, 3, 4))
    unbiased = biased * n / (n - 1)
    norm_var = unbiased if mistake == "unbiased-normalize" else biased
    run_var = biased if mistake == "biased-running" else unbiased
    m = 1 - MOMENTUM if mistake == "onnx-momentum" else MOMENTUM
    rm, rv = net.bn.running_mean.double().numpy(), net.bn.running_var.double().numpy()
    c = (slice(None), None, None, None)
    y = (h - mean[c]) / np.sqrt(norm_var[c] + EPS) * net.bn.weight.double().detach().numpy()[c] \
        + net.bn.bias.double().detach().numpy()[c]
    with torch.no_grad():
        out = net.head(torch.relu(torch.from_numpy(y).float())).numpy()
    return out, {"bn.running_mean": (1 - m) * rm + m * mean, "bn.running_var": (1 - m) * rv + m * run_var,
                 "bn.num_batches_tracked": np.float32(8)}


def train(args):
    from runfiles import read_safetensors
    d = args.dir
    with tempfile.TemporaryDirectory() as work:
        after = os.path.join(work, "after.st")
        ours = run_ours(args, os.path.join(d, "x.npy"), os.path.join(d, "bn.safetensors"), after)
        state = read_safetensors(after)
    if args.reference:
        ref, stats = by_hand(d, args.reference)
    else:
        ref = np.load(os.path.join(d, "ref_train.npy"))
        stats = {k: np.load(os.path.join(d, "train_%s.npy" % k))
                 for k in ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked")}
    problems = []
    e = rel(ours, ref)
    if not e <= 1e-5:
        problems.append("output differs: rel.err %.3e" % e)
    for k, v in stats.items():
        if k not in state:
            problems.append("%s not assigned" % k)
            continue
        e = rel(state[k], v)
        if not e <= 1e-6:
            problems.append("%s differs: rel.err %.3e" % (k, e))
    print("%s: train-mode forward and running statistics vs %s: %s" % (
        args.func, args.reference or "PyTorch", "; ".join(problems) if problems else "ok"))
    sys.exit(1 if problems else 0)


def evaluate(args):
    ours = run_ours(args, os.path.join(args.dir, "x.npy"), os.path.join(args.dir, "bn.safetensors"))
    e = rel(ours, np.load(os.path.join(args.dir, "ref_eval.npy")))
    ok = e <= 1e-5
    print("%s: eval-mode forward vs PyTorch: %s" % (args.func, "ok" if ok else "differs: rel.err %.3e" % e))
    sys.exit(0 if ok else 1)


def strict(args):
    import torch
    from runfiles import read_safetensors
    net = build()
    sd = {k: torch.from_numpy(v.copy()) for k, v in read_safetensors(args.weights).items()
          if k != args.drop}
    try:
        net.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        print("strict load FAILED: %s" % str(e).splitlines()[1].strip())
        sys.exit(1)
    net.eval()
    from runfiles import artifact_document
    func = [f for f in artifact_document(args.artifact)["functions"] if f["name"] == args.func][0]
    shape = func["values"][func["inputs"][0]]["shape"]  # the size the artifact was compiled for
    with tempfile.TemporaryDirectory() as work:
        x = os.path.join(work, "x.npy")
        np.save(x, np.random.default_rng(3).standard_normal(shape).astype(np.float32))
        with torch.no_grad():
            ref = net(torch.from_numpy(np.load(x))).numpy()
        ours = run_ours(args, x, args.weights)
    e = rel(ours, ref)
    ok = e <= 1e-5
    print("strict load of %d tensors (num_batches_tracked %d); eval forward vs ours: %s" % (
        len(sd), int(net.bn.num_batches_tracked), "ok" if ok else "differs: rel.err %.3e" % e))
    sys.exit(0 if ok else 1)


p = argparse.ArgumentParser()
sub = p.add_subparsers(dest="cmd", required=True)
e = sub.add_parser("export")
e.add_argument("--out", required=True)
for name in ("train", "eval"):
    c = sub.add_parser(name)
    c.add_argument("dir")
    c.add_argument("--artifact", required=True)
    c.add_argument("--func", required=True)
    c.add_argument("--medrun", required=True)
    if name == "train":
        c.add_argument("--reference", choices=["biased-running", "unbiased-normalize", "onnx-momentum"])
s = sub.add_parser("strict")
s.add_argument("weights")
s.add_argument("dir")
s.add_argument("--artifact", required=True)
s.add_argument("--func", required=True)
s.add_argument("--medrun", required=True)
s.add_argument("--drop")
a = p.parse_args()
{"export": export, "train": train, "eval": evaluate, "strict": strict}[a.cmd](a)
