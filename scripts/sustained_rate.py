#!/usr/bin/env python3
"""The sustained training rate of a `jiriki train` log (JSON lines): samples per second between the
first progress record at or after --skip seconds (the warm-up: cuDNN tuning, graph capture) and the
last one. Says how many seconds that covers."""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("log")
    ap.add_argument("--skip", type=float, default=15.0, help="seconds of warm-up left out")
    a = ap.parse_args()
    rows = []
    with open(a.log) as f:
        for line in f:
            j = json.loads(line)
            if j.get("type") == "train":
                rows.append((j["elapsed_seconds"], j["samples"], j["batch"]))
    after = [r for r in rows if r[0] >= a.skip]
    if len(after) < 2:
        sys.exit(f"{a.log}: fewer than 2 progress records after {a.skip} s")
    (t0, s0, b), (t1, s1, _) = after[0], after[-1]
    print(f"{a.log}: batch {b}: {(s1 - s0) / (t1 - t0):.0f} samples/s sustained over {t1 - t0:.1f} s "
          f"({s1 - s0} samples, from {t0:.1f} s to {t1:.1f} s)")


if __name__ == "__main__":
    main()
