"""Negative control for med-form-mlp-fusions: rewrites a compiled module so that each
mlp_grad body recomputes the expansion without its bias (a plausible bug), keeping it valid.

usage: drop_recompute_bias.py IN.mlir OUT.mlir
"""
import re
import sys

text = open(sys.argv[1]).read()
# The first conv3d of an mlp_grad body: %h = med.conv3d %x, %w, %b : (X, W, B) -> H
pattern = re.compile(r'(med\.fusion "mlp_grad".*?\n.*?\n\s*%\S+ = med\.conv3d %\S+, %\S+), %\S+ '
                     r': \((tensor<[^>]*>), (tensor<[^>]*>), tensor<[^>]*>\)')
out, n = pattern.subn(r'\1 : (\2, \3)', text)
if n == 0:
    sys.exit("no mlp_grad body with a biased expansion found")
open(sys.argv[2], "w").write(out)
print("dropped the recomputed bias in %d mlp_grad bodies" % n)
