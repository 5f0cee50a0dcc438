#!/usr/bin/env python3
"""Fig. 3 / 15 in miniature: the CSV that `tttlab bench --device cuda --latency --csv FILE` writes,
drawn as the paper draws it, two panels against context length T (log x): prefill time per token
(the forward over B sequences, divided by B·T; B is written beside each point where it is not 16)
and decode time per token at batch 1. Points are medians; bars span the quartiles. Rows the bench
skipped are not drawn; the title of each panel names what is missing.

Needs matplotlib (Debian: python3-matplotlib). Usage:
    /usr/bin/python3 scripts/paper/latency_plot.py docs/results/latency-125m-h200.csv docs/results/latency-125m-h200.png
"""
import csv
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("latency_plot.py needs matplotlib: sudo apt-get install python3-matplotlib (then run it with /usr/bin/python3)")

NAMES = {"ttt-linear": "TTT-Linear", "ttt-mlp": "TTT-MLP", "softmax-attention": "Transformer",
         "mamba2": "Mamba-2", "linear-attention": "linear attention"}
COLOURS = {"ttt-linear": "#d62728", "ttt-mlp": "#9467bd", "softmax-attention": "#1f77b4",
           "mamba2": "#2ca02c", "linear-attention": "#7f7f7f"}


def main(src, out):
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    layers = list(dict.fromkeys(r["layer"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, phase in zip(axes, ("prefill", "decode")):
        missing = []
        for layer in layers:
            pts = [r for r in rows if r["layer"] == layer and r["phase"] == phase and r["status"] == "ok"
                   and r["T"]]
            if phase == "decode":
                pts = [r for r in pts if r["batch"] == "1"]
            asked = sorted({int(r["T"]) for r in rows if r["layer"] == layer and r["phase"] == phase and r["T"]})
            got = {int(r["T"]) for r in pts}
            if not pts:
                missing.append(NAMES.get(layer, layer))
                continue
            if got != set(asked):
                gaps = [f"{t // 1024}k" if t >= 1024 else str(t) for t in asked if t not in got]
                missing.append(f'{NAMES.get(layer, layer)} at {", ".join(gaps)}')
            pts.sort(key=lambda r: int(r["T"]))
            T = [int(r["T"]) for r in pts]
            med = [float(r["median_us_per_token"]) for r in pts]
            lo = [m - float(r["q1_us"]) for m, r in zip(med, pts)]
            hi = [float(r["q3_us"]) - m for m, r in zip(med, pts)]
            c = COLOURS.get(layer)
            ax.errorbar(T, med, yerr=[lo, hi], marker="o", ms=4, capsize=3, color=c, label=NAMES.get(layer, layer))
            if phase == "prefill":
                for t, m, r in zip(T, med, pts):
                    if r["batch"] != "16":
                        ax.annotate(f'B{r["batch"]}', (t, m), textcoords="offset points", xytext=(4, 4), fontsize=7,
                                    color=c)
        ax.set_xscale("log", base=2)
        Ts = sorted({int(r["T"]) for r in rows if r["T"]})
        ax.set_xticks(Ts, [f"{t // 1024}k" if t >= 1024 else str(t) for t in Ts])
        ax.set_xlabel("context length T")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        if phase == "prefill":
            ax.set_ylabel("forward time per token (µs)")
            title = "Prefill: forward over B sequences (B = 16 unless marked)"
        else:
            ax.set_ylabel("time per generated token (µs)")
            title = "Decode at batch 1, against the context already walked"
        if missing:
            title += "\nnot measured: " + ", ".join(missing)
        ax.set_title(title, fontsize=9)
    fig.suptitle("Latency against context length (tttlab bench --device cuda --latency; medians, bars: quartiles)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
