#!/usr/bin/python3
"""Parameter and multiply-add counts of the MedNeXt v1 models, checked against medc.

The expected numbers come from closed-form per-stage formulas written here from the
MedNeXt v1 architecture (MIC-DKFZ create_mednext_v1; /work/shared/reference/mednext.md
section 1), independently of scripts/gen_mednext.py, which is only run as a program.

  test_mednext.py --medc build/bin/medc --generator scripts/gen_mednext.py --models models

Prints one PASS/FAIL line per check; exits 1 if any check failed.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

C = 32  # n_channels of every create_mednext_v1 variant
EXP_R = {
    "S": [2] * 9,
    "B": [2, 3, 4, 4, 4, 4, 4, 3, 2],
    "M": [2, 3, 4, 4, 4, 4, 4, 3, 2],
    "L": [3, 4, 8, 8, 8, 8, 8, 4, 3],
}
BLOCKS = {
    "S": [2] * 9,
    "B": [2] * 9,
    "M": [3, 4, 4, 4, 4, 4, 4, 4, 3],
    "L": [3, 4, 8, 8, 8, 8, 8, 4, 3],
}

# Published anchors. The B count is what PyTorch's sum(p.numel() for p in
# model.parameters()) gives (reference §1, matching nanaHa1003/mednext-accel); that sum
# includes MedNeXt's 1-element `dummy_tensor` checkpointing helper, which the med models
# leave out (their parameters are the state_dict minus dummy_tensor).
ANCHOR_L3 = 61779299          # L, kernel 3, 1 -> 3 channels, no DS, no GRN (no dummy_tensor)
ANCHOR_B3_DS_TORCH = 10529232  # B, kernel 3, 1 -> 3 channels, DS, counted by PyTorch
DUMMY_TENSOR = 1

# Convolution multiply-adds at batch 1, 128³, 6 classes, no DS (BANIS), reference §1.
MAC_TARGETS = {("L", 3): 494.8e9, ("L", 5): 559.1e9}


# ---------------------------------------------------------------------------------------
# Closed-form parameter counts
# ---------------------------------------------------------------------------------------

def block_params(c, e, k, grn):
    """MedNeXtBlock(c -> c): depthwise conv1, GroupNorm, conv2 (c -> ec), conv3 (ec -> c)."""
    return (c * k ** 3 + c          # conv1 depthwise weight c×1×k³ + bias
            + 2 * c                 # norm weight, bias
            + c * e * c + e * c     # conv2
            + e * c * c + c         # conv3
            + (2 * e * c if grn else 0))


def down_params(c, e, k, grn):
    """MedNeXtDownBlock(c -> 2c) with res_conv Conv3d(c, 2c, 1, stride 2)."""
    return (c * k ** 3 + c + 2 * c + c * e * c + e * c
            + e * c * 2 * c + 2 * c     # conv3 ec -> 2c
            + c * 2 * c + 2 * c         # res_conv
            + (2 * e * c if grn else 0))


def up_params(c, e, k, grn):
    """MedNeXtUpBlock(c -> c/2) with res_conv ConvTranspose3d(c, c/2, 1, stride 2)."""
    h = c // 2
    return (c * k ** 3 + c + 2 * c + c * e * c + e * c
            + e * c * h + h             # conv3 ec -> c/2
            + c * h + h                 # res_conv
            + (2 * e * c if grn else 0))


def head_params(c, classes):
    return c * classes + classes


def param_count(size, k, cin=1, classes=3, ds=False, grn=False):
    e, n = EXP_R[size], BLOCKS[size]
    total = cin * C + C  # stem
    for i in range(4):
        w = C << i
        total += n[i] * block_params(w, e[i], k, grn)
        total += down_params(w, e[i + 1], k, grn and i > 0)  # down_0 has no GRN
    total += n[4] * block_params(16 * C, e[4], k, grn)
    for j, i in enumerate((3, 2, 1, 0)):
        w = C << i
        total += up_params(2 * w, e[5 + j], k, grn)
        total += n[5 + j] * block_params(w, e[5 + j], k, grn)
    total += head_params(C, classes)
    if ds:
        total += sum(head_params(C << i, classes) for i in range(1, 5))
    return total


# ---------------------------------------------------------------------------------------
# Closed-form convolution multiply-adds
#   conv:            out_voxels · Cout · (Cin/groups) · k³
#   transposed conv: in_voxels  · Cin  · (Cout/groups) · k³
# The up block's depthwise transposed conv and 1x1x1 transposed res_conv read the coarse
# grid; its conv2/conv3 run on the (2n−1)³ grid before the (1, 0) padding.
# ---------------------------------------------------------------------------------------

def vox(dims):
    v = 1
    for d in dims:
        v *= d
    return v


def conv_macs(size, k, batch, patch, cin=1, classes=3, ds=False):
    """Returns {'conv 1x1x1': ..., 'conv depthwise': ...} multiply-adds."""
    e, n = EXP_R[size], BLOCKS[size]
    level = [[d >> l for d in patch] for l in range(5)]
    V = [batch * vox(level[l]) for l in range(5)]
    k3 = k ** 3
    pw = dw = 0  # pointwise (1x1x1, incl. transposed) and depthwise
    pw += V[0] * C * cin  # stem
    for i in range(4):
        c = C << i
        pw += n[i] * V[i] * 2 * e[i] * c * c
        dw += n[i] * V[i] * c * k3
        ed = e[i + 1]  # down_i
        dw += V[i + 1] * c * k3
        pw += V[i + 1] * (c * ed * c + ed * c * 2 * c + c * 2 * c)
    c = 16 * C
    pw += n[4] * V[4] * 2 * e[4] * c * c
    dw += n[4] * V[4] * c * k3
    for j, i in enumerate((3, 2, 1, 0)):
        c, eu = C << (i + 1), e[5 + j]  # up_i: c -> c/2, input at level i+1
        grid = batch * vox([2 * d - 1 for d in level[i + 1]])
        dw += V[i + 1] * c * k3                        # transposed depthwise conv1
        pw += grid * (c * eu * c + eu * c * (c // 2))  # conv2, conv3 on (2n−1)³
        pw += V[i + 1] * c * (c // 2)                  # transposed res_conv
        w = C << i
        pw += n[5 + j] * V[i] * 2 * eu * w * w
        dw += n[5 + j] * V[i] * w * k3
    pw += V[0] * C * classes  # out_0 (transposed 1x1x1: in_voxels · Cin · Cout)
    if ds:
        pw += sum(V[i] * (C << i) * classes for i in range(1, 5))
    return {"conv 1x1x1": pw, "conv depthwise": dw}


# ---------------------------------------------------------------------------------------
# Running the tools
# ---------------------------------------------------------------------------------------

class Checker:
    def __init__(self):
        self.failed = 0
        self.count = 0

    def check(self, ok, what):
        self.count += 1
        if not ok:
            self.failed += 1
        print("%s: %s" % ("PASS" if ok else "FAIL", what), flush=True)
        return ok


def stats(medc, path, batch=1, patch=(128, 128, 128)):
    cmd = [medc, "stats", path, "--json", "--batch", str(batch),
           "--patch", ",".join(str(p) for p in patch)]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s" % (" ".join(cmd), r.returncode,
                                                         r.stderr[-2000:]))
    return json.loads(r.stdout)


def generate(generator, out, size, kernel, *flags):
    cmd = [sys.executable, generator, "--size", size, "--kernel", str(kernel), "-o", out]
    cmd += list(flags)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s" % (" ".join(cmd), r.returncode, r.stderr))
    return out


def rel(a, b):
    return abs(a - b) / max(abs(b), 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--medc", required=True, help="path of the medc binary")
    ap.add_argument("--generator", required=True, help="path of scripts/gen_mednext.py")
    ap.add_argument("--models", required=True, help="directory of the checked-in models")
    args = ap.parse_args()
    t = Checker()

    def run(what, fn):
        try:
            fn()
        except Exception as exc:  # a tool failed: report it as a failed check
            t.check(False, "%s: %s" % (what, exc))

    # 0. Anchors on the formula side.
    p = param_count("L", 3)
    t.check(p == ANCHOR_L3, "formula L k3 params %d == anchor %d" % (p, ANCHOR_L3))
    p = param_count("B", 3, ds=True)
    t.check(p + DUMMY_TENSOR == ANCHOR_B3_DS_TORCH,
            "formula B k3 DS params %d + dummy_tensor %d == PyTorch anchor %d"
            % (p, DUMMY_TENSOR, ANCHOR_B3_DS_TORCH))

    # 1a. Checked-in models.
    for kernel in (3, 5):
        for size in "SBML":
            name = "mednext_%s%s.mlir" % (size.lower(), "" if kernel == 3 else "_k5")

            def one(name=name, size=size, kernel=kernel):
                got = stats(args.medc, os.path.join(args.models, name))["parameters"]
                want = param_count(size, kernel)
                t.check(got == want, "%s params medc %d == formula %d" % (name, got, want))
            run(name, one)

    # 1b. Generated variants.
    variants = [
        ("B", 3, ["--deep-supervision"], dict(ds=True)),
        ("L", 3, ["--grn"], dict(grn=True)),
        ("S", 5, ["--in-channels", "2", "--classes", "6", "--deep-supervision"],
         dict(cin=2, classes=6, ds=True)),
        ("M", 5, ["--grn", "--deep-supervision"], dict(ds=True, grn=True)),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for size, kernel, flags, kw in variants:
            label = "%s k%d %s" % (size, kernel, " ".join(flags))

            def one(size=size, kernel=kernel, flags=flags, kw=kw, label=label):
                path = generate(args.generator, os.path.join(tmp, "v.mlir"), size, kernel, *flags)
                got = stats(args.medc, path)["parameters"]
                want = param_count(size, kernel, **kw)
                t.check(got == want, "%s params medc %d == formula %d" % (label, got, want))
                if (size, kernel, flags) == ("B", 3, ["--deep-supervision"]):
                    t.check(got + DUMMY_TENSOR == ANCHOR_B3_DS_TORCH,
                            "%s params medc %d + dummy_tensor == PyTorch anchor %d"
                            % (label, got, ANCHOR_B3_DS_TORCH))
            run(label, one)

        # 2. Convolution multiply-adds (BANIS: 6 classes, no DS, batch 1, 128³).
        for (size, kernel), target in sorted(MAC_TARGETS.items()):
            label = "%s k%d 6 classes" % (size, kernel)

            def one(size=size, kernel=kernel, target=target, label=label):
                path = generate(args.generator, os.path.join(tmp, "v.mlir"), size, kernel,
                                "--classes", "6")
                s = stats(args.medc, path)
                got = s["conv_multiply_adds"]
                fam = conv_macs(size, kernel, 1, (128, 128, 128), classes=6)
                want = sum(fam.values())
                t.check(rel(got, target) <= 0.005,
                        "%s conv MACs medc %.4g G within 0.5%% of %.4g G (%+.3f%%)"
                        % (label, got / 1e9, target / 1e9, 100 * (got - target) / target))
                t.check(rel(got, want) <= 1e-9,
                        "%s conv MACs medc %d == formula %d (1x1x1 %.2f G, depthwise %.2f G)"
                        % (label, got, want, fam["conv 1x1x1"] / 1e9, fam["conv depthwise"] / 1e9))
                for family, macs in fam.items():
                    flops = s["flops_by_family"].get(family, 0)
                    t.check(rel(flops, 2 * macs) <= 1e-9,
                            "%s '%s' FLOPs medc %.6g == 2 x formula MACs %.6g"
                            % (label, family, flops, 2 * macs))
            run(label, one)

        # A non-cubic patch, batch 2, with DS, exercises the per-axis grid formulas.
        label = "M k5 DS batch 2 patch 64,96,160"

        def odd():
            path = generate(args.generator, os.path.join(tmp, "v.mlir"), "M", 5,
                            "--deep-supervision")
            got = stats(args.medc, path, 2, (64, 96, 160))["conv_multiply_adds"]
            want = sum(conv_macs("M", 5, 2, (64, 96, 160), ds=True).values())
            t.check(rel(got, want) <= 1e-9, "%s conv MACs medc %d == formula %d"
                    % (label, got, want))
        run(label, odd)

    # 3. The checked-in models are what the generator produces now.
    r = subprocess.run([sys.executable, args.generator, "--check-models", args.models],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t.check(r.returncode == 0, "gen_mednext.py --check-models %s exit %d%s"
            % (args.models, r.returncode, ("\n" + r.stdout.strip()) if r.returncode else ""))

    print("%d checks, %d failed" % (t.count, t.failed))
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
