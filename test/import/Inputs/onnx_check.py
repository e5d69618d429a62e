"""Exports a PyTorch network to ONNX and checks medc's import of it against PyTorch.

  onnx_check.py export NET --out DIR [--shape N,C,D,H,W] [--seed S]
      DIR/NET.onnx (torch.onnx.export, opset 17, batch and spatial axes dynamic, no constant
      folding, so that norm weights keep their state_dict names), DIR/NET.safetensors (the
      state_dict), DIR/x.npy (an input) and DIR/ref_<i>.npy (PyTorch's outputs, eval mode).
  onnx_check.py compare DIR --artifact A.medc --func F --medrun MEDRUN [--perturb KEY]
      runs our forward (`medrun run`) with the state_dict and compares with PyTorch's.
  onnx_check.py strict NET WEIGHTS.safetensors --artifact A.medc --func F --medrun MEDRUN
      loads WEIGHTS (e.g. a checkpoint's model.safetensors) into the PyTorch network with
      strict=True, and compares its forward with ours (`medrun run`) on the same weights.
  onnx_check.py same-params A.mlir B.mlir
      the two modules declare the same parameters (names and shapes), in any order.

NET: a key of networks.NETWORKS, or mednext_s (MIC-DKFZ MedNeXt v1, test/medrun/Inputs).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "medrun", "Inputs"))


def build(name):
    import torch
    if name.startswith("mednext_"):
        import mednext_v1
        net = mednext_v1.create_mednext_v1(1, 3, name.split("_")[1].upper(), kernel_size=3,
                                           deep_supervision=name.endswith("_ds"))
        return net, {k: v for k, v in net.state_dict().items() if k != "dummy_tensor"}
    import networks
    net = networks.NETWORKS[name]()
    networks.kaiming_init(net)
    # Non-trivial norm parameters, so that a swapped weight and bias would show.
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for k, v in net.state_dict().items():
            if ".norm." in k or ".adn.N." in k:  # (MONAI names its norms adn.N)
                v.add_(0.1 * torch.randn(v.shape, generator=g))
    return net, dict(net.state_dict())


def export(args):
    import torch
    from runfiles import write_safetensors
    torch.manual_seed(args.seed)
    net, sd = build(args.net)
    net.eval()
    shape = [int(s) for s in args.shape.split(",")]
    x = torch.from_numpy(np.random.default_rng(args.seed).standard_normal(shape).astype(np.float32))
    os.makedirs(args.out, exist_ok=True)
    with torch.no_grad():
        ref = net(x)
    refs = ref if isinstance(ref, (list, tuple)) else [ref]
    outputs = ["out%d" % i for i in range(len(refs))]
    dyn = {"x": {0: "batch", 2: "depth", 3: "height", 4: "width"}}
    dyn.update({o: {0: "batch", 2: "d%d" % i, 3: "h%d" % i, 4: "w%d" % i} for i, o in enumerate(outputs)})
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, x, os.path.join(args.out, args.net + ".onnx"), opset_version=17,
                          input_names=["x"], output_names=outputs, dynamic_axes=dyn,
                          do_constant_folding=False)
    write_safetensors(os.path.join(args.out, args.net + ".safetensors"),
                      {k: v.numpy() for k, v in sd.items()})
    np.save(os.path.join(args.out, "x.npy"), x.numpy())
    for i, r in enumerate(refs):
        np.save(os.path.join(args.out, "ref_%d.npy" % i), r.numpy())
    print("exported %s: %d parameters, %d outputs" % (args.net, len(sd), len(refs)))


def compare(args):
    from runfiles import read_safetensors, write_safetensors, artifact_document, artifact_parameters
    params = os.path.join(args.dir, [f for f in os.listdir(args.dir) if f.endswith(".safetensors")][0])
    # A head the exported forward does not run is in the state_dict, not in the ONNX graph.
    declared = artifact_parameters(args.artifact)
    t = {k: v for k, v in read_safetensors(params).items() if k in declared}
    if args.perturb:
        t[args.perturb] = t[args.perturb] + 1e-2
    params = os.path.join(args.dir, "ours.st")
    write_safetensors(params, t)
    refs = sorted(f for f in os.listdir(args.dir) if re.fullmatch(r"ref_\d+\.npy", f))
    refs = [np.load(os.path.join(args.dir, "ref_%d.npy" % i)) for i in range(len(refs))]
    doc = artifact_document(args.artifact)
    func = [f for f in doc["functions"] if f["name"] == args.func][0]
    with tempfile.TemporaryDirectory() as work:
        subprocess.run([args.medrun, "run", args.artifact, "--func", args.func, "--input",
                        "arg0=" + os.path.join(args.dir, "x.npy"), "--params", params,
                        "--out", work], check=True, stdout=subprocess.DEVNULL)
        ours = [np.load(os.path.join(work, n + ".npy")) for n in func["output_names"]]
    problems = []
    if len(ours) != len(refs):
        problems.append("%d outputs of ours, %d of PyTorch" % (len(ours), len(refs)))
    worst = 0.0
    for i, (o, r) in enumerate(zip(ours, refs)):
        if o.shape != r.shape:
            problems.append("output %d: shape %s, PyTorch's %s" % (i, o.shape, r.shape))
            continue
        err = float(np.linalg.norm(o - r) / max(np.linalg.norm(r), 1e-30))
        worst = max(worst, err)
        if not err <= 1e-4:
            problems.append("output %d differs from PyTorch's: rel.err %.3e" % (i, err))
    print("%s: forward vs PyTorch (%d outputs): %s" % (
        args.func, len(refs), "; ".join(problems) if problems else "ok"))
    sys.exit(1 if problems else 0)


def strict(args):
    import torch
    from runfiles import read_safetensors, artifact_document
    net, _ = build(args.net)
    net.eval()
    sd = {k: torch.from_numpy(v.copy()) for k, v in read_safetensors(args.weights).items()
          if k != args.drop}
    try:
        net.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        print("strict load FAILED: %s" % str(e).splitlines()[1].strip())
        sys.exit(1)
    x = np.random.default_rng(3).standard_normal([2, 1, 16, 16, 16]).astype(np.float32)
    with torch.no_grad():
        ref = net(torch.from_numpy(x))
    refs = [r.numpy() for r in ref] if isinstance(ref, (list, tuple)) else [ref.numpy()]
    func = [f for f in artifact_document(args.artifact)["functions"] if f["name"] == args.func][0]
    with tempfile.TemporaryDirectory() as work:
        np.save(os.path.join(work, "x.npy"), x)
        subprocess.run([args.medrun, "run", args.artifact, "--func", args.func, "--input",
                        "arg0=" + os.path.join(work, "x.npy"), "--params", args.weights,
                        "--out", work], check=True, stdout=subprocess.DEVNULL)
        ours = [np.load(os.path.join(work, n + ".npy")) for n in func["output_names"]]
    errs = [float(np.linalg.norm(o - r) / np.linalg.norm(r)) for o, r in zip(ours, refs)]
    ok = len(ours) == len(refs) and all(e <= 1e-4 for e in errs)
    problem = ("%d outputs here, %d of ours" % (len(refs), len(ours)) if len(ours) != len(refs)
               else "differs: rel.err %s" % errs)
    print("strict load of %d tensors into %s; forward vs ours (%d outputs): %s" % (
        len(sd), args.net, len(refs), "ok" if ok else problem))
    sys.exit(0 if ok else 1)


def parameters_of(path):
    out = {}
    for m in re.finditer(r'med\.parameter @"?([^" ]+)"? : tensor<([0-9x]+)xf32>', open(path).read()):
        out[m.group(1)] = m.group(2)
    return out


def same_params(args):
    a, b = parameters_of(args.a), parameters_of(args.b)
    problems = ["only in %s: %s" % (p, ", ".join(sorted(set(x) - set(y))[:5]))
                for p, x, y in ((args.a, a, b), (args.b, b, a)) if set(x) - set(y)]
    problems += ["%s: %s vs %s" % (k, a[k], b[k]) for k in sorted(set(a) & set(b)) if a[k] != b[k]][:5]
    print("%d and %d parameters: %s" % (len(a), len(b), "; ".join(problems) if problems else "the same"))
    sys.exit(1 if problems else 0)


ap = argparse.ArgumentParser()
sub = ap.add_subparsers(dest="cmd", required=True)
e = sub.add_parser("export")
e.add_argument("net")
e.add_argument("--out", required=True)
e.add_argument("--shape", default="1,1,16,16,16")
e.add_argument("--seed", type=int, default=0)
c = sub.add_parser("compare")
c.add_argument("dir")
c.add_argument("--artifact", required=True)
c.add_argument("--func", required=True)
c.add_argument("--medrun", required=True)
c.add_argument("--perturb")
t = sub.add_parser("strict")
t.add_argument("net")
t.add_argument("weights")
t.add_argument("--artifact", required=True)
t.add_argument("--func", required=True)
t.add_argument("--medrun", required=True)
t.add_argument("--drop", help="leave this key out (a negative control)")
s = sub.add_parser("same-params")
s.add_argument("a")
s.add_argument("b")
args = ap.parse_args()
{"export": export, "compare": compare, "strict": strict, "same-params": same_params}[args.cmd](args)
