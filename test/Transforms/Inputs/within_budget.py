"""Reads `medc stats --json` on standard input and checks its planned peak against a budget
in bytes (argv[1]): prints the comparison, exits 1 when the peak exceeds the budget."""
import json
import sys

budget = int(sys.argv[1])
peak = json.load(sys.stdin)["planned_peak_bytes"]
print("planned peak %d %s %d" % (peak, "<=" if peak <= budget else ">", budget))
sys.exit(0 if peak <= budget else 1)
