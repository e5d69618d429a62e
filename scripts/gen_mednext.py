#!/usr/bin/python3
"""Generate MedNeXt v1 networks in the `med` MLIR dialect.

The networks are the MIC-DKFZ MedNeXt v1 models built by `create_mednext_v1`
(nnunet_mednext/network_architecture/mednextv1): 32 base channels, do_res=True,
do_res_up_down=True, GroupNorm with one group per channel. Parameter names are the
PyTorch state_dict keys (without `dummy_tensor`), declared in state_dict order.

See /work/shared/reference/mednext.md section 1 for the architecture.
"""

import argparse
import os
import sys

N_CHANNELS = 32

# Per-variant expansion ratios and block counts of the nine stages
# (enc_block_0..3, bottleneck, dec_block_3..0).
VARIANTS = {
    "S": ([2] * 9, [2] * 9),
    "B": ([2, 3, 4, 4, 4, 4, 4, 3, 2], [2] * 9),
    "M": ([2, 3, 4, 4, 4, 4, 4, 3, 2], [3, 4, 4, 4, 4, 4, 4, 4, 3]),
    "L": ([3, 4, 8, 8, 8, 8, 8, 4, 3], [3, 4, 8, 8, 8, 8, 8, 4, 3]),
}

# The checked-in model files: (file name, size, kernel, classes, deep supervision).
# S, B, M, L with kernel 3 and 5 (3 classes); the recipes' variants: MedNeXt-L with 6
# affinity channels (BANIS, BANIS+) and with deep supervision (nnU-Net style).
CHECKED_IN = [("mednext_%s%s.mlir" % (size.lower(), "" if kernel == 3 else "_k5"), size, kernel,
               3, False)
              for kernel in (3, 5) for size in ("S", "B", "M", "L")] + [
    ("mednext_l_6ch.mlir", "L", 3, 6, False),
    ("mednext_l_k5_6ch.mlir", "L", 5, 6, False),
    ("mednext_l_ds.mlir", "L", 3, 3, True),
]


def act(c):
    """Activation type: batch and spatial dims dynamic, channels static."""
    return "tensor<?x%dx?x?x?xf32>" % c


def tensor(shape):
    return "tensor<%sxf32>" % "x".join(str(d) for d in shape)


def i64s(values):
    return "array<i64: %s>" % ", ".join(str(v) for v in values)


PAD_LOW = i64s([0, 0, 1, 1, 1])
PAD_HIGH = i64s([0, 0, 0, 0, 0])


class Param:
    """One state_dict entry: key, shape, initializer and fan-in (uniform only)."""

    def __init__(self, key, shape, init, fan_in=None):
        self.key, self.shape, self.init, self.fan_in = key, list(shape), init, fan_in

    @property
    def type(self):
        return tensor(self.shape)

    @property
    def ssa(self):
        return "%" + self.key  # dots, digits and underscores are valid in SSA names

    def declaration(self):
        init = self.init if self.fan_in is None else "%s(%d)" % (self.init, self.fan_in)
        return 'med.parameter @"%s" : %s init %s' % (self.key, self.type, init)

    def read(self):
        return '%s = med.param @"%s" : %s' % (self.ssa, self.key, self.type)


def conv_params(prefix, weight_shape, bias_len):
    """Weight and bias of a Conv3d (Cout×Cin/g×k³) or ConvTranspose3d (Cin×Cout/g×k³).

    PyTorch's default init draws both from U(±1/sqrt(fan_in)) with
    fan_in = weight.shape[1]·kD·kH·kW for either layout; the bias has the output width.
    """
    fan_in = weight_shape[1] * weight_shape[2] * weight_shape[3] * weight_shape[4]
    return [Param(prefix + ".weight", weight_shape, "uniform", fan_in),
            Param(prefix + ".bias", [bias_len], "uniform", fan_in)]


class Block:
    """A MedNeXtBlock ('block'), MedNeXtDownBlock ('down') or MedNeXtUpBlock ('up')."""

    def __init__(self, kind, c, exp, kernel, grn):
        self.kind, self.c, self.exp, self.kernel, self.grn = kind, c, exp, kernel, grn
        self.c_out = {"block": c, "down": 2 * c, "up": c // 2}[kind]

    @property
    def func_name(self):
        return "%s_c%d_e%d_k%d%s" % (self.kind, self.c, self.exp, self.kernel,
                                      "_grn" if self.grn else "")

    def params(self, prefix):
        """The block's parameters in state_dict order: the module's own parameters
        (grn_beta, grn_gamma) come before those of its submodules (conv1, norm, conv2,
        conv3, res_conv, in registration order)."""
        c, e, k, co = self.c, self.exp, self.kernel, self.c_out
        ps = []
        if self.grn:
            ps += [Param(prefix + "grn_beta", [1, e * c, 1, 1, 1], "zeros"),
                   Param(prefix + "grn_gamma", [1, e * c, 1, 1, 1], "zeros")]
        ps += conv_params(prefix + "conv1", [c, 1, k, k, k], c)
        ps += [Param(prefix + "norm.weight", [c], "ones"), Param(prefix + "norm.bias", [c], "zeros")]
        ps += conv_params(prefix + "conv2", [e * c, c, 1, 1, 1], e * c)
        ps += conv_params(prefix + "conv3", [co, e * c, 1, 1, 1], co)
        if self.kind == "down":
            ps += conv_params(prefix + "res_conv", [co, c, 1, 1, 1], co)
        elif self.kind == "up":  # ConvTranspose3d layout Cin×Cout×1×1×1
            ps += conv_params(prefix + "res_conv", [c, co, 1, 1, 1], co)
        return ps

    # Short argument names of the block function, in the order of params().
    def arg_names(self):
        names = ["%grn_beta", "%grn_gamma"] if self.grn else []
        names += ["%conv1_w", "%conv1_b", "%norm_w", "%norm_b", "%conv2_w", "%conv2_b",
                  "%conv3_w", "%conv3_b"]
        if self.kind != "block":
            names += ["%res_w", "%res_b"]
        return names

    def function(self):
        c, e, k, co = self.c, self.exp, self.kernel, self.c_out
        ps = self.params("")
        names = self.arg_names()
        args = ["%%x: %s" % act(c)] + ["%s: %s" % (n, p.type) for n, p in zip(names, ps)]
        types = {n: p.type for n, p in zip(names, ps)}

        def ty(name):
            return types[name]

        conv1_attrs = "groups = %d : i64, padding = %s" % (c, i64s([k // 2] * 3))
        if self.kind != "block":
            conv1_attrs += ", stride = %s" % i64s([2] * 3)
        conv1_op = "med.conv3d_transpose" if self.kind == "up" else "med.conv3d"
        what = {"block": "MedNeXtBlock(%d -> %d, exp %d, kernel %d%s), residual x + conv3(...)",
                "down": "MedNeXtDownBlock(%d -> %d, exp %d, kernel %d%s): stride-2 depthwise "
                        "conv + res_conv",
                "up": "MedNeXtUpBlock(%d -> %d, exp %d, kernel %d%s): stride-2 depthwise "
                      "transposed conv + res_conv, both padded (1, 0) per spatial axis"}[self.kind]
        lines = ["// " + what % (c, co, e, k, ", GRN" if self.grn else ""),
                 "func.func private @%s(%s) -> %s {" % (self.func_name, ", ".join(args), act(co))]
        body = []
        body.append("%%dw = %s %%x, %%conv1_w, %%conv1_b {%s} : (%s, %s, %s) -> %s"
                    % (conv1_op, conv1_attrs, act(c), ty("%conv1_w"), ty("%conv1_b"), act(c)))
        body.append("%%normed = med.group_norm %%dw, %%norm_w, %%norm_b {groups = %d : i64} "
                    ": (%s, %s, %s) -> %s" % (c, act(c), ty("%norm_w"), ty("%norm_b"), act(c)))
        body.append("%%expanded = med.conv3d %%normed, %%conv2_w, %%conv2_b : (%s, %s, %s) -> %s"
                    % (act(c), ty("%conv2_w"), ty("%conv2_b"), act(e * c)))
        body.append("%%act = med.gelu %%expanded : %s" % act(e * c))
        hidden = "%act"
        if self.grn:
            body.append("%%grn = med.grn %%act, %%grn_gamma, %%grn_beta : (%s, %s, %s) -> %s"
                        % (act(e * c), ty("%grn_gamma"), ty("%grn_beta"), act(e * c)))
            hidden = "%grn"
        body.append("%%main = med.conv3d %s, %%conv3_w, %%conv3_b : (%s, %s, %s) -> %s"
                    % (hidden, act(e * c), ty("%conv3_w"), ty("%conv3_b"), act(co)))
        if self.kind == "block":
            body.append("%%y = med.add %%x, %%main : (%s, %s) -> %s" % (act(c), act(c), act(c)))
        elif self.kind == "down":
            body.append("%%res = med.conv3d %%x, %%res_w, %%res_b {stride = %s} : (%s, %s, %s) -> %s"
                        % (i64s([2] * 3), act(c), ty("%res_w"), ty("%res_b"), act(co)))
            body.append("%%y = med.add %%main, %%res : (%s, %s) -> %s" % (act(co), act(co), act(co)))
        else:
            pad = "{low = %s, high = %s} : (%s) -> %s" % (PAD_LOW, PAD_HIGH, act(co), act(co))
            body.append("%%main_padded = med.pad %%main %s" % pad)
            body.append("%%res = med.conv3d_transpose %%x, %%res_w, %%res_b {stride = %s} "
                        ": (%s, %s, %s) -> %s"
                        % (i64s([2] * 3), act(c), ty("%res_w"), ty("%res_b"), act(co)))
            body.append("%%res_padded = med.pad %%res %s" % pad)
            body.append("%%y = med.add %%main_padded, %%res_padded : (%s, %s) -> %s"
                        % (act(co), act(co), act(co)))
        body.append("return %%y : %s" % act(co))
        lines += ["  " + b for b in body]
        lines.append("}")
        return "\n".join(lines)


def build_modules(size, kernel, in_channels, classes, deep_supervision, grn):
    """The network as a list of (module name, kind, object) in registration order.

    kind is 'stem', 'stage' (a list of Blocks), 'down', 'up' or 'head'."""
    exp_r, counts = VARIANTS[size]
    C = N_CHANNELS
    mods = [("stem", "stem", (in_channels, C))]
    for i in range(4):
        w = C << i
        mods.append(("enc_block_%d" % i, "stage",
                     [Block("block", w, exp_r[i], kernel, grn) for _ in range(counts[i])]))
        # down_0 never gets GRN in the original code.
        mods.append(("down_%d" % i, "down", Block("down", w, exp_r[i + 1], kernel, grn and i > 0)))
    mods.append(("bottleneck", "stage",
                 [Block("block", 16 * C, exp_r[4], kernel, grn) for _ in range(counts[4])]))
    for j, i in enumerate((3, 2, 1, 0)):
        w = C << i
        mods.append(("up_%d" % i, "up", Block("up", 2 * w, exp_r[5 + j], kernel, grn)))
        mods.append(("dec_block_%d" % i, "stage",
                     [Block("block", w, exp_r[5 + j], kernel, grn) for _ in range(counts[5 + j])]))
    mods.append(("out_0", "head", (C, classes)))
    if deep_supervision:
        for i in range(1, 5):
            mods.append(("out_%d" % i, "head", (C << i, classes)))
    return mods


def module_params(name, kind, obj):
    if kind == "stem":
        cin, c = obj
        return conv_params("stem", [c, cin, 1, 1, 1], c)
    if kind == "head":
        c, classes = obj
        return conv_params(name + ".conv_out", [c, classes, 1, 1, 1], classes)
    if kind == "stage":
        return [p for b, blk in enumerate(obj) for p in blk.params("%s.%d." % (name, b))]
    return obj.params(name + ".")


def generate(size, kernel, in_channels=1, classes=3, deep_supervision=False, grn=False):
    """Return the MLIR text of one MedNeXt v1 variant."""
    mods = build_modules(size, kernel, in_channels, classes, deep_supervision, grn)
    fname = "mednext_%s" % size.lower()
    C = N_CHANNELS
    flags = "--size %s --kernel %d" % (size, kernel)
    if in_channels != 1:
        flags += " --in-channels %d" % in_channels
    if classes != 3:
        flags += " --classes %d" % classes
    if deep_supervision:
        flags += " --deep-supervision"
    if grn:
        flags += " --grn"
    exp_r, counts = VARIANTS[size]
    out = []
    w = out.append
    w("// MedNeXt v1 %s, kernel %d (create_mednext_v1(num_input_channels=%d, num_classes=%d, "
      "model_id='%s', kernel_size=%d, deep_supervision=%s)%s)."
      % (size, kernel, in_channels, classes, size, kernel, deep_supervision,
         ", with GRN" if grn else ""))
    w("// n_channels %d, exp_r %s, block_counts %s, do_res and do_res_up_down on,"
      % (C, exp_r, counts))
    w("// GroupNorm with one group per channel. Parameters are the PyTorch state_dict keys "
      "(no dummy_tensor).")
    w("//")
    w("// Generated by scripts/gen_mednext.py %s; do not edit." % flags)
    w("")

    # Parameter declarations, one group per module.
    all_params = {}
    for name, kind, obj in mods:
        ps = module_params(name, kind, obj)
        all_params[name] = ps
        w("// %s" % name)
        for p in ps:
            w(p.declaration())
        w("")

    # One private function per distinct block shape, in order of first use.
    seen = {}
    for name, kind, obj in mods:
        for blk in (obj if kind == "stage" else [obj] if kind in ("down", "up") else []):
            if blk.func_name not in seen:
                seen[blk.func_name] = blk
    for blk in seen.values():
        w(blk.function())
        w("")

    # The network.
    heads = [(name, obj) for name, kind, obj in mods if kind == "head"]
    result_types = [act(classes)] * len(heads)
    ret = result_types[0] if len(heads) == 1 else "(%s)" % ", ".join(result_types)
    w("// Input N×%d×D×H×W (D, H, W divisible by 16); returns the logits%s."
      % (in_channels, " and the deep-supervision outputs out_1..out_4" if deep_supervision else ""))
    w("func.func @%s(%%x: %s) -> %s {" % (fname, act(in_channels), ret))
    body = []
    b = body.append

    def call(blk, prefix_params, x, result):
        for p in prefix_params:
            b(p.read())
        args = [x] + [p.ssa for p in prefix_params]
        types = [act(blk.c)] + [p.type for p in prefix_params]
        b("%s = func.call @%s(%s)" % (result, blk.func_name, ", ".join(args)))
        b("    : (%s) -> %s" % (", ".join(types), act(blk.c_out)))

    def run_stage(name, blocks, x, tag):
        ps = all_params[name]
        i = 0
        for n, blk in enumerate(blocks):
            k = len(blk.params(""))
            result = "%%%s" % tag if n == len(blocks) - 1 else "%%%s_%d" % (tag, n)
            call(blk, ps[i:i + k], x, result)
            i += k
            x = result
        return x

    def head(name, x, c, result):
        ps = all_params[name]
        for p in ps:
            b(p.read())
        b("%s = med.conv3d_transpose %s, %s, %s : (%s, %s, %s) -> %s"
          % (result, x, ps[0].ssa, ps[1].ssa, act(c), ps[0].type, ps[1].type, act(classes)))

    mod = {name: (kind, obj) for name, kind, obj in mods}
    b("// stem: 1x1x1 conv %d -> %d" % (in_channels, C))
    ps = all_params["stem"]
    for p in ps:
        b(p.read())
    b("%%stem = med.conv3d %%x, %s, %s : (%s, %s, %s) -> %s"
      % (ps[0].ssa, ps[1].ssa, act(in_channels), ps[0].type, ps[1].type, act(C)))
    x = "%stem"
    skips = {}
    for i in range(4):
        blocks = mod["enc_block_%d" % i][1]
        b("")
        b("// enc_block_%d: %d x MedNeXtBlock(%d, exp %d), %s resolution"
          % (i, len(blocks), C << i, blocks[0].exp, "1/%d" % (1 << i) if i else "full"))
        x = run_stage("enc_block_%d" % i, blocks, x, "enc%d" % i)
        skips[i] = x
        down = mod["down_%d" % i][1]
        b("// down_%d: %d -> %d, exp %d" % (i, down.c, down.c_out, down.exp))
        call(down, all_params["down_%d" % i], x, "%%x_down%d" % i)
        x = "%%x_down%d" % i
    blocks = mod["bottleneck"][1]
    b("")
    b("// bottleneck: %d x MedNeXtBlock(%d, exp %d), 1/16 resolution"
      % (len(blocks), 16 * C, blocks[0].exp))
    x = run_stage("bottleneck", blocks, x, "bottleneck")
    ds = {}
    if deep_supervision:
        b("// out_4: deep-supervision head on the bottleneck output")
        head("out_4", x, 16 * C, "%out4")
        ds[4] = "%out4"
    for i in (3, 2, 1, 0):
        up = mod["up_%d" % i][1]
        blocks = mod["dec_block_%d" % i][1]
        b("")
        b("// up_%d: %d -> %d, exp %d; skip from enc_block_%d" % (i, up.c, up.c_out, up.exp, i))
        call(up, all_params["up_%d" % i], x, "%%x_up%d" % i)
        b("%%dec%d_in = med.add %s, %%x_up%d : (%s, %s) -> %s"
          % (i, skips[i], i, act(C << i), act(C << i), act(C << i)))
        b("// dec_block_%d: %d x MedNeXtBlock(%d, exp %d)" % (i, len(blocks), C << i, blocks[0].exp))
        x = run_stage("dec_block_%d" % i, blocks, "%%dec%d_in" % i, "dec%d" % i)
        if deep_supervision and i > 0:
            b("// out_%d: deep-supervision head on the dec_block_%d output" % (i, i))
            head("out_%d" % i, x, C << i, "%%out%d" % i)
            ds[i] = "%%out%d" % i
    b("")
    b("// out_0: 1x1x1 transposed-conv head %d -> %d" % (C, classes))
    head("out_0", x, C, "%out0")
    results = ["%out0"] + [ds[i] for i in range(1, 5)] if deep_supervision else ["%out0"]
    b("return %s : %s" % (", ".join(results), ", ".join(result_types)))
    out.extend("  " + line if line else "" for line in body)
    w("}")
    return "\n".join(out) + "\n"


def checked_in_models():
    return [(name, generate(size, kernel, classes=classes, deep_supervision=ds))
            for name, size, kernel, classes, ds in CHECKED_IN]


def main(argv=None):
    parser = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""\
Generate MedNeXt v1 in the med MLIR dialect: exactly the network that MIC-DKFZ's
create_mednext_v1(in_channels, classes, model_id, kernel_size, deep_supervision) builds
(n_channels 32, do_res and do_res_up_down on, GroupNorm with one group per channel).

Modes (exactly one):
  --size S|B|M|L --kernel 3|5 [options]   write one variant to stdout or -o FILE
  --write-models DIR                      write the 8 checked-in model files into DIR
  --check-models DIR                      regenerate them in memory and compare with DIR;
                                          exit 1 naming every missing or differing file

The generated file holds:
  * a header comment saying what was generated and how;
  * one med.parameter per PyTorch state_dict key (e.g. enc_block_0.0.conv1.weight,
    down_0.res_conv.bias, out_0.conv_out.weight; dummy_tensor is left out), in state_dict
    order: stem, enc_block_0, down_0, ..., bottleneck, up_3, dec_block_3, ..., out_0,
    out_1..out_4; inside a block the block's own grn_beta, grn_gamma first (as PyTorch
    lists a module's own parameters before its submodules'), then conv1, norm, conv2,
    conv3, res_conv. Initializers follow PyTorch: conv weights and biases
    uniform(fan_in = weight.shape[1]*k^3), norm weight ones, bias zeros, GRN zeros;
  * one private function per distinct block shape, named block_cC_eE_kK,
    down_cC_eE_kK or up_cC_eE_kK (C input channels, E expansion ratio, K kernel; _grn
    suffix with GRN), taking the activation and the block's parameters;
  * the public function @mednext_<size> (s, b, m or l, for either kernel) taking
    N x in_channels x D x H x W (D, H, W divisible by 16) and returning N x classes x D x H x W,
    or with --deep-supervision the tuple (out_0, out_1, out_2, out_3, out_4) at full,
    1/2, 1/4, 1/8 and 1/16 resolution.""",
        epilog="""\
The checked-in files are mednext_{s,b,m,l}.mlir (kernel 3) and mednext_{s,b,m,l}_k5.mlir
(kernel 5), all with 1 input channel, 3 classes, no deep supervision and no GRN, plus the
recipes' MedNeXt-L variants mednext_l_6ch.mlir, mednext_l_k5_6ch.mlir (6 output channels)
and mednext_l_ds.mlir (deep supervision).

Examples:
  scripts/gen_mednext.py --size L --kernel 5 --classes 6 -o /tmp/banis_l.mlir
  scripts/gen_mednext.py --write-models models
  scripts/gen_mednext.py --check-models models""")
    parser.add_argument("--size", choices=sorted(VARIANTS, key="SBML".index),
                        help="model variant: S, B, M or L (exp_r and block_counts of "
                             "create_mednext_v1)")
    parser.add_argument("--kernel", type=int, choices=(3, 5),
                        help="depthwise kernel size of every block, 3 or 5")
    parser.add_argument("--in-channels", type=int, default=1, metavar="N",
                        help="input channels (default 1)")
    parser.add_argument("--classes", type=int, default=3, metavar="N",
                        help="output channels of each head (default 3)")
    parser.add_argument("--deep-supervision", action="store_true",
                        help="add the heads out_1..out_4; the network then returns "
                             "(out_0, out_1, out_2, out_3, out_4)")
    parser.add_argument("--grn", action="store_true",
                        help="global response normalization (grn_beta, grn_gamma) on the expanded tensor of "
                             "every block, down_1..3 and every up block (not down_0)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write the generated model here (default: stdout)")
    parser.add_argument("--write-models", metavar="DIR",
                        help="write the 8 checked-in model files into DIR")
    parser.add_argument("--check-models", metavar="DIR",
                        help="regenerate the 8 checked-in model files in memory and compare "
                             "them with DIR; exit 1 naming every file that is missing or "
                             "differs")
    args = parser.parse_args(argv)

    single = args.size is not None or args.kernel is not None
    modes = sum([single, args.write_models is not None, args.check_models is not None])
    if modes != 1:
        parser.error("give either --size and --kernel, or --write-models DIR, "
                     "or --check-models DIR")
    if single and (args.size is None or args.kernel is None):
        parser.error("--size and --kernel are both required to generate a model")
    if not single and (args.output or args.in_channels != 1 or args.classes != 3
                       or args.deep_supervision or args.grn):
        parser.error("--in-channels, --classes, --deep-supervision, --grn and -o only apply "
                     "with --size and --kernel")
    if args.in_channels < 1:
        parser.error("--in-channels must be at least 1")
    if args.classes < 1:
        parser.error("--classes must be at least 1")

    if args.write_models is not None:
        os.makedirs(args.write_models, exist_ok=True)
        for name, text in checked_in_models():
            with open(os.path.join(args.write_models, name), "w") as f:
                f.write(text)
        return 0
    if args.check_models is not None:
        stale = []
        for name, text in checked_in_models():
            path = os.path.join(args.check_models, name)
            try:
                with open(path) as f:
                    current = f.read()
            except OSError:
                current = None
            if current != text:
                stale.append(path)
                print("%s: %s; regenerate with: scripts/gen_mednext.py --write-models %s"
                      % (path, "missing" if current is None else "out of date",
                         args.check_models), file=sys.stderr)
        if stale:
            return 1
        print("all %d model files in %s are up to date" % (len(CHECKED_IN), args.check_models))
        return 0

    text = generate(args.size, args.kernel, args.in_channels, args.classes,
                    args.deep_supervision, args.grn)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
