"""Writes generated CUDA source with a kernel library file replaced by a variant of it.

usage: replace_library.py SOURCE.cu LIBRARY.cuh VARIANT.cuh OUT.cu

medc embeds each lib/Target/Cuda/kernels/*.cuh its kernels use, verbatim, in front of them;
every copy of LIBRARY's text in SOURCE becomes VARIANT's (a negative control's sed'ed
template). Fails if SOURCE holds no copy or VARIANT is the same text.
"""
import sys

src, lib, variant, out = sys.argv[1:5]
text, old, new = (open(p).read() for p in (src, lib, variant))
if old not in text:
    sys.exit("replace_library.py: %s does not hold the text of %s" % (src, lib))
if new == old:
    sys.exit("replace_library.py: %s is the same as %s" % (variant, lib))
open(out, "w").write(text.replace(old, new))
print("replaced %d copies of %s" % (text.count(old), lib))
