#!/usr/bin/env python3
"""Plots of the paper-in-miniature results (docs/RESULTS.md), as PNG, from the CSV and JSON files that
scripts/paper/reproduce.sh writes (any of them may be missing; a missing one is skipped):

  OUT/table1.json                    tttlab ablate --json            -> OUT/table1.png
  OUT/minibatch/minibatch-summary.csv  minibatch_summary.py           -> OUT/fig8-minibatch.png
  OUT/long/long-context.csv          long_context_summary.py         -> OUT/fig2-long-context.png

Needs matplotlib (Debian: python3-matplotlib). Usage: plots.py OUT [--table1 F] [--minibatch F] [--long F]
(the options name the files directly, e.g. the committed ones in docs/results)."""
import argparse
import csv
import json
import math
import os
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plots.py needs matplotlib: sudo apt-get install python3-matplotlib (then run it with /usr/bin/python3)")


def table1(path, out):
    with open(path) as f:
        j = json.load(f)
    rows = j["rows"]
    names = [f'{r["row"]} {r["name"]}' for r in rows]
    means = [r["val_bpb_mean"] for r in rows]
    sds = [r.get("val_bpb_sd") or 0.0 for r in rows]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    y = range(len(rows))
    ax.barh(list(y), means, xerr=sds, color="#4c78a8", capsize=3)
    ax.set_yticks(list(y), names)
    ax.invert_yaxis()
    lo = min(m - s for m, s in zip(means, sds))
    ax.set_xlim(max(0.0, lo - 0.3), max(m + s for m, s in zip(means, sds)) + 0.1)
    ax.set_xlabel("validation bits per byte (mean ± sd over seeds; lower is better)")
    ax.set_title(f'Table 1 in miniature: {j["preset"]} preset, T = {j["seq_len"]}, {j["steps"]} steps, {j["seeds"]} seeds', fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def minibatch(path, out):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    rows.sort(key=lambda r: int(r["b"]))
    b = [int(r["b"]) for r in rows]
    mean = [float(r["val_bpb_mean"]) for r in rows]
    sd = [float(r["val_bpb_sd"] or 0) for r in rows]
    tps = [float(r["tokens_per_s"] or 0) for r in rows]
    dev = [r.get("device", "") for r in rows]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    a1.errorbar(b, mean, yerr=sd, marker="o", capsize=3, color="#4c78a8")
    a1.set_xscale("log", base=2)
    a1.set_xlabel("inner mini-batch size b")
    a1.set_ylabel("validation bits per byte (mean ± sd)")
    a1.set_title("quality against b")
    for x, t, d in zip(b, tps, dev):
        a2.bar(str(x), t / 1e3, color="#f58518" if d.upper().startswith("CUDA") else "#9d9da1")
    a2.set_xlabel("b (orange: GPU, grey: CPU)")
    a2.set_ylabel("training throughput, thousand tokens/s")
    a2.set_title("speed against b (one run per b)")
    fig.suptitle("Fig. 8 in miniature")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def long_context(path, out, window=32):
    with open(path) as f:
        rows = list(csv.reader(f))
    header, data = rows[0], rows[1:]
    pos = [int(r[0]) for r in data]
    fig, ax = plt.subplots(figsize=(7, 4))
    for k, name in enumerate(header[1:], start=1):
        ys = [float(r[k]) for r in data]
        # A centred moving mean over `window` positions, shorter at the ends: the raw curve is noisy.
        sm = []
        for t in range(len(ys)):
            a, e = max(0, t - window // 2), min(len(ys), t + window // 2 + 1)
            sm.append(sum(ys[a:e]) / (e - a))
        ax.plot([p + 1 for p in pos], sm, label=name, linewidth=1.4)
    ax.set_xscale("log")
    ax.set_xlabel("token position (log scale)")
    ax.set_ylabel("validation loss, nats per byte (mean over seeds)")
    ax.set_title(f"Fig. 2 (right) in miniature: loss by position, T = {len(pos)}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--table1")
    p.add_argument("--minibatch")
    p.add_argument("--long")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    jobs = [
        (table1, a.table1 or os.path.join(a.out, "table1.json"), "table1.png"),
        (minibatch, a.minibatch or os.path.join(a.out, "minibatch", "minibatch-summary.csv"), "fig8-minibatch.png"),
        (long_context, a.long or os.path.join(a.out, "long", "long-context.csv"), "fig2-long-context.png"),
    ]
    for fn, src, name in jobs:
        if not os.path.exists(src):
            print(f"plots.py: {src} not found, {name} skipped")
            continue
        fn(src, os.path.join(a.out, name))
        print(f"plots.py: wrote {os.path.join(a.out, name)}")


if __name__ == "__main__":
    main()
