#!/usr/bin/env python3
"""Summary of scripts/paper/long_context.sh: reads OUT/seed*/<layer>-<backbone>/eval.json (tttlab eval
--json), writes OUT/long-context.csv (position, then per layer the mean loss in nats over the seeds)
and prints, per layer, bits/byte and the mean loss over position ranges as mean ± sample sd over seeds."""
import glob
import json
import math
import os
import statistics
import sys



def ranges(T):
    """Position ranges, as fractions of T (at T = 2048: 0–15, 16–127, 128–511, 512–1023, 1024–1535,
    1536–2047). The last column of the table compares the last quarter with T/16 … T/4 − 1."""
    return [(0, 16), (16, T // 16), (T // 16, T // 4), (T // 4, T // 2), (T // 2, 3 * T // 4), (3 * T // 4, T)]


def main(out):
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, "seed*", "*", "eval.json"))):
        name = os.path.basename(os.path.dirname(path))
        with open(path) as f:
            runs.setdefault(name, []).append(json.load(f))
    if not runs:
        sys.exit(f"no eval.json under {out}/seed*/")
    layers = sorted(runs)
    curves = {}
    RANGES = ranges(min(len(e["loss_by_position"]) for evals in runs.values() for e in evals))
    (a2, b2), (a5, b5) = RANGES[2], RANGES[5]
    print("| layer-backbone | seeds | bits/byte | " + " | ".join(f"{a}–{b - 1}" for a, b in RANGES) +
          f" | ({a5}–{b5 - 1}) − ({a2}–{b2 - 1}) |")
    print("|---" * (len(RANGES) + 4) + "|")
    for name in layers:
        evals = runs[name]
        pos = [e["loss_by_position"] for e in evals]
        T = min(len(p) for p in pos)
        curves[name] = [statistics.fmean(p[t] for p in pos) for t in range(T)]

        def spread(values):
            m = statistics.fmean(values)
            return f"{m:.3f} ± {statistics.stdev(values):.3f}" if len(values) > 1 else f"{m:.3f}"

        cells = [spread([e["val_bpb"] for e in evals])]
        per_range = []
        for a, b in RANGES:
            vals = [statistics.fmean(p[a:min(b, T)]) for p in pos]
            per_range.append(vals)
            cells.append(spread(vals))
        late_minus_mid = [late - mid for late, mid in zip(per_range[5], per_range[2])]
        cells.append(spread(late_minus_mid))
        print(f"| {name} | {len(evals)} | " + " | ".join(cells) + " |")
    T = min(len(c) for c in curves.values())
    with open(os.path.join(out, "long-context.csv"), "w") as f:
        f.write("position," + ",".join(layers) + "\n")
        for t in range(T):
            f.write(f"{t}," + ",".join(f"{curves[n][t]:.5f}" for n in layers) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/long-context")
