"""same_losses.py A B N TOL: the first N steps of two runs' metrics.jsonl have losses and
gradient norms within a relative TOL of each other; exit 1 naming the first that is not."""
import json
import sys

a, b, n, tol = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
rows = [[json.loads(x) for x in open(d + "/metrics.jsonl")][:n] for d in (a, b)]
if len(rows[0]) < n or len(rows[1]) < n:
    print("fewer than %d steps: %d and %d" % (n, len(rows[0]), len(rows[1])))
    sys.exit(1)
for step, (x, y) in enumerate(zip(*rows)):
    for key in ("loss", "grad_norm"):
        if abs(x[key] - y[key]) > tol * max(abs(x[key]), abs(y[key]), 1e-30):
            print("step %d: %s %.9g vs %.9g" % (step, key, x[key], y[key]))
            sys.exit(1)
print("%d steps: losses and gradient norms within %g" % (n, tol))
