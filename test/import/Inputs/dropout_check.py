"""A Conv3d -> ReLU -> Dropout(0.3) -> Conv3d network exported from PyTorch in training mode,
and checks of medc's dropout (med.dropout) against PyTorch's modules.

  dropout_check.py export --out DIR
      DIR/drop.onnx (torch.onnx.export with training=TrainingMode.TRAINING: a Dropout node
      with its ratio and training_mode as Constant nodes), DIR/drop_eval.onnx (the default
      eval-mode export, which has no Dropout node), DIR/drop_bn.onnx (Conv3d -> BatchNorm3d
      -> ReLU -> Dropout(0.25) -> Conv3d in training mode), DIR/drop.safetensors (the state_dict),
      DIR/x.npy and PyTorch's eval-mode forward DIR/ref_eval.npy.
  dropout_check.py train DIR --artifact A --func F --medrun MEDRUN --key K [--mistake M]
      runs F (the imported network in its training form: the image and the step's key K) and
      compares it with PyTorch's train-mode forward whose nn.Dropout applies our mask, drawn by
      a third definition of Philox 4x32-10 here in numpy (counter (element, sample, stream 0,
      1) under K: kept where (w0 >> 8) * 2^-24 >= p), scaled by 1/(1 - p) as torch scales it.
      Also: the fraction kept is 1 - p within five standard errors. --mistake word0 (the mask of
      med.random's counter word 0) or scale-p (a scaling of 1/p) computes the reference with
      that mistake (negative controls: it must not match).
  dropout_check.py eval DIR --artifact A --func F --medrun MEDRUN [--key K]
      runs F (e.g. infer; with --key a function taking the key) and compares with PyTorch's
      eval-mode forward (no dropout).
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

P = 0.3
SHAPE = [2, 1, 6, 5, 4]


def build():
    import torch

    class DropNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv3d(1, 4, 3, padding=1)
            self.drop = torch.nn.Dropout(P)
            self.head = torch.nn.Conv3d(4, 3, 1)

        def forward(self, x):
            return self.head(self.drop(torch.relu(self.conv(x))))

    torch.manual_seed(0)
    return DropNet()


def build_bn():
    import torch

    class DropBNNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv3d(1, 4, 3, padding=1)
            self.bn = torch.nn.BatchNorm3d(4)
            self.drop = torch.nn.Dropout(0.25)
            self.head = torch.nn.Conv3d(4, 3, 1)

        def forward(self, x):
            return self.head(self.drop(torch.relu(self.bn(self.conv(x)))))

    torch.manual_seed(0)
    return DropBNNet()


def export(args):
    import torch
    from runfiles import write_safetensors
    net = build()
    os.makedirs(args.out, exist_ok=True)
    x = torch.from_numpy(np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32))
    write_safetensors(os.path.join(args.out, "drop.safetensors"),
                      {k: v.detach().numpy().astype(np.float32) for k, v in net.state_dict().items()})
    np.save(os.path.join(args.out, "x.npy"), x.numpy())
    with torch.no_grad():
        np.save(os.path.join(args.out, "ref_eval.npy"), net.eval()(x).numpy())
    dyn = {"x": {0: "batch", 2: "depth", 3: "height", 4: "width"},
           "out0": {0: "batch", 2: "d", 3: "h", 4: "w"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net.train(), x, os.path.join(args.out, "drop.onnx"), opset_version=17,
                          input_names=["x"], output_names=["out0"], dynamic_axes=dyn,
                          do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
        torch.onnx.export(net.eval(), x, os.path.join(args.out, "drop_eval.onnx"), opset_version=17,
                          input_names=["x"], output_names=["out0"], dynamic_axes=dyn,
                          do_constant_folding=False)
        # With a BatchNorm3d too: the training-mode export is the one that keeps Dropout, and
        # its BatchNormalization (training_mode 1) imports as the eval-mode export's.
        bn = build_bn().train()
        torch.onnx.export(bn, x, os.path.join(args.out, "drop_bn.onnx"), opset_version=17,
                          input_names=["x"], output_names=["out0"], dynamic_axes=dyn,
                          do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
    print("exported drop: %d state_dict entries" % len(net.state_dict()))


def philox_w0(key, c0, c1, c2, c3):
    """The first word of Philox 4x32-10 of the counters (arrays) under the 64-bit key."""
    m = np.uint64(0xFFFFFFFF)
    c = [np.asarray(v, np.uint64) & m for v in (c0, c1, c2, c3)]
    k0, k1 = np.uint64(key & 0xFFFFFFFF), np.uint64((key >> 32) & 0xFFFFFFFF)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [((p1 >> np.uint64(32)) ^ c[1] ^ k0) & m, p1 & m,
             ((p0 >> np.uint64(32)) ^ c[3] ^ k1) & m, p0 & m]
        k0 = (k0 + np.uint64(0x9E3779B9)) & m
        k1 = (k1 + np.uint64(0xBB67AE85)) & m
    return c[0]


def our_mask(shape, key, stream, word3):
    n = int(np.prod(shape))
    per = n // shape[0]
    i = np.arange(n, dtype=np.uint64)
    w0 = philox_w0(key, i % np.uint64(per), i // np.uint64(per), np.full(n, stream, np.uint64),
                   np.full(n, word3, np.uint64))
    u = (w0 >> np.uint64(8)).astype(np.float64) * 2.0 ** -24
    return (u >= P).reshape(shape)


def run_ours(args, x, weights, key=None):
    from runfiles import artifact_document
    func = [f for f in artifact_document(args.artifact)["functions"] if f["name"] == args.func][0]
    with tempfile.TemporaryDirectory() as work:
        cmd = [args.medrun, "run", args.artifact, "--func", args.func, "--input", "arg0=" + x,
               "--params", weights, "--out", work]
        if key is not None:
            cmd += ["--input", "arg1=%d" % key]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return np.load(os.path.join(work, func["output_names"][0] + ".npy"))


def rel(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / max(np.linalg.norm(b), 1e-30))


def train(args):
    import torch
    d = args.dir
    ours = run_ours(args, os.path.join(d, "x.npy"), os.path.join(d, "drop.safetensors"), args.key)
    net = build().train()
    x = torch.from_numpy(np.load(os.path.join(d, "x.npy")))
    with torch.no_grad():
        h = torch.relu(net.conv(x))
        keep = our_mask(list(h.shape), args.key, 0, 0 if args.mistake == "word0" else 1)
        scale = 1.0 / P if args.mistake == "scale-p" else 1.0 / (1.0 - P)
        # torch's dropout: input * (bernoulli(1 - p) / (1 - p)), here with our mask.
        noise = torch.from_numpy(keep.astype(np.float32)).div_(1.0 - P) if scale == 1.0 / (1.0 - P) \
            else torch.from_numpy(keep.astype(np.float32) * np.float32(scale))
        ref = net.head(h * noise).numpy()
    problems = []
    kept = float(keep.mean())
    sd = np.sqrt(P * (1 - P) / keep.size)
    if not abs(kept - (1 - P)) < 5 * sd:
        problems.append("kept %.4f of the elements, not %.2f" % (kept, 1 - P))
    e = rel(ours, ref)
    if not e <= 1e-5:
        problems.append("output differs: rel.err %.3e" % e)
    print("%s: train-mode forward vs %s: %s" % (
        args.func, "PyTorch with our mask" + (" (%s)" % args.mistake if args.mistake else ""),
        "; ".join(problems) if problems else "ok (kept %.3f)" % kept))
    sys.exit(1 if problems else 0)


def evaluate(args):
    ours = run_ours(args, os.path.join(args.dir, "x.npy"), os.path.join(args.dir, "drop.safetensors"),
                    args.key)
    e = rel(ours, np.load(os.path.join(args.dir, "ref_eval.npy")))
    ok = e <= 1e-5
    print("%s: eval-mode forward vs PyTorch: %s" % (args.func, "ok" if ok else "differs: rel.err %.3e" % e))
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
    c.add_argument("--key", type=int, required=name == "train")
    if name == "train":
        c.add_argument("--mistake", choices=["word0", "scale-p"])
args = p.parse_args()
{"export": export, "train": train, "eval": evaluate}[args.cmd](args)
