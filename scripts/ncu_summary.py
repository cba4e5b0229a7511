#!/usr/bin/env python3
"""Summarises `ncu --csv --page raw --metrics gpu__time_duration.sum` output: the kernels of one
profiled range grouped by what they do, with their summed durations (the GPU's work without the
gaps between kernels and without overlap between streams)."""
import csv
import sys
from collections import defaultdict

GROUPS = [  # first match wins: (group, substrings of the kernel name)
    ("batch norm", ["channel_sums", "bn_"]),
    ("conv backward filter (wgrad)", ["wgrad", "dgrad_engine", "bprop_filter", "convolve_dep", "weight"]),
    ("conv backward data (dgrad)", ["dgrad", "bprop_data", "dconv"]),
    ("conv forward", ["fprop", "xmma", "sm90", "implicit", "conv"]),
    ("gemm (cuBLAS)", ["gemm", "cutlass", "Kernel2"]),
    ("loss and heads", ["loss", "heads", "value_", "column_sums", "features"]),
    ("optimizer and conversions", ["sgd", "adamw", "norm", "bf16_to_f32", "f32_to_bf16"]),
]


def main():
    rows = list(csv.reader(open(sys.argv[1])))
    header = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    names = rows[header]
    name_col, time_col = names.index("Kernel Name"), names.index("gpu__time_duration.sum")
    unit = rows[header + 1][time_col]  # the units row
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[unit]
    per_group, per_kernel = defaultdict(float), defaultdict(lambda: [0, 0.0])
    for r in rows[header + 2:]:
        if len(r) != len(names) or not r[time_col]:
            continue
        name, us = r[name_col], float(r[time_col].replace(",", "")) * scale
        group = next((g for g, keys in GROUPS if any(k in name for k in keys)), "other")
        per_group[group] += us
        per_kernel[name[:110]][0] += 1
        per_kernel[name[:110]][1] += us
    total = sum(per_group.values())
    print(f"kernels: {sum(c for c, _ in per_kernel.values())}, summed duration {total / 1e3:.3f} ms")
    for g, us in sorted(per_group.items(), key=lambda x: -x[1]):
        print(f"  {g:32s} {us / 1e3:8.3f} ms  {100 * us / total:5.1f}%")
    print("largest kernels (count, summed us, name):")
    for name, (c, us) in sorted(per_kernel.items(), key=lambda x: -x[1][1])[:25]:
        print(f"  {c:4d} {us:9.1f}  {name}")


if __name__ == "__main__":
    main()
