#!/usr/bin/env python3
"""Compares several `tttlab train` runs with a reference run, step by step (metrics.jsonl files).

    compare_curves.py [--tolerance NATS] REFERENCE RUN [RUN ...]

For each RUN: the largest |loss - reference loss| over the steps both recorded, the validation losses
at equal steps, and whether the run agrees within the tolerance in nats per byte: by default 1e-3, the
data-parallel target of docs/MULTI_GPU.md (a run on N GPUs against the one-GPU run with the same global
batch and seed); mixed precision (bf16) against fp32 uses its own (docs/KERNELS.md).
Prints the training loss of every run every 10 steps. Exit status 1 when a run disagrees.
"""
import os
import sys

from compare_runs import read  # metrics.jsonl → ({step: loss}, {step: val_loss})

TOLERANCE = 1e-3  # nats per byte, per step


def name(path):
    return os.path.basename(os.path.dirname(path)) or path


def main():
    args = sys.argv[1:]
    tolerance = TOLERANCE
    if len(args) >= 2 and args[0] == "--tolerance":
        tolerance = float(args[1])
        args = args[2:]
    if len(args) < 2:
        print(__doc__)
        return 2
    ref, ref_val = read(args[0])
    runs = [(name(p), *read(p)) for p in args[1:]]
    print("step " + " ".join(f"{name(args[0]):>9}" if i == 0 else f"{n:>9}" for i, n in enumerate([""] + [r[0] for r in runs])))
    for s in sorted(ref):
        if s % 10 == 0 or s == 1:
            print(f"{s:4d} {ref[s]:9.4f} " + " ".join(f"{r[1][s]:9.4f}" if s in r[1] else f"{'':9}" for r in runs))
    ok = True
    for n, train, val in runs:
        common = sorted(set(train) & set(ref))
        if not common:
            print(f"{n}: no steps in common with the reference")
            ok = False
            continue
        worst = max(abs(train[s] - ref[s]) for s in common)
        at = max(common, key=lambda s: abs(train[s] - ref[s]))
        vals = ", ".join(f"step {s}: {val[s] - ref_val[s]:+.1e}" for s in sorted(set(val) & set(ref_val)))
        good = worst <= tolerance
        ok &= good
        print(f"{n}: {len(common)} steps ({common[0]}..{common[-1]}), max |loss - reference| = {worst:.2e} nats "
              f"(step {at}); validation differences: {vals or 'none'}; {'AGREE' if good else 'DISAGREE'} "
              f"(tolerance {tolerance})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
