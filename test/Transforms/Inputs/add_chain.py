"""Prints a function summing N + 1 scalar arguments with a chain of N adds.

usage: add_chain.py N
"""
import sys

n = int(sys.argv[1])
print("func.func @chain(%s) -> tensor<f32> {" % ", ".join("%%a%d: tensor<f32>" % i for i in range(n + 1)))
prev = "%a0"
for i in range(1, n + 1):
    print("  %%s%d = med.add %s, %%a%d : (tensor<f32>, tensor<f32>) -> tensor<f32>" % (i, prev, i))
    prev = "%%s%d" % i
print("  return %s : tensor<f32>" % prev)
print("}")
