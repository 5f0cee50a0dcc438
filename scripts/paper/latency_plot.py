#!/usr/bin/env python3
"""Fig. 3 / 15 in miniature: the CSV that `tttlab bench --device cuda --latency --csv FILE` writes,
drawn as the paper draws it, against context length T (log x), in three panels:
  - prefill time per token (the forward over B sequences, divided by B·T; B = 16, written beside a
    point where it is smaller);
  - decode time per token at batch 512, the paper's decode panel (the step's time divided by B; B is
    the largest ≤ 512 that fits at that context, written beside a point where it is smaller);
  - decode time per token at batch 16 (solid) and 1 (dashed).
Points are medians; bars span the quartiles. Rows the bench skipped are not drawn; the title of each
panel names what is missing. The bench writes a (layer, T)'s decode rows in the order batch 1, 16,
512, and a row's batch column holds the batch it ran, so the order tells which request a row answers.

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
DECODE_ASKED = (1, 16, 512)


def label_requests(rows):
    """Each row gets 'asked': the batch the bench was asked for (prefill: 16)."""
    seen = {}
    for r in rows:
        if r["phase"] != "decode":
            r["asked"] = 16
            continue
        key = (r["layer"], r["T"])
        i = seen.get(key, 0)
        seen[key] = i + 1
        r["asked"] = DECODE_ASKED[min(i, len(DECODE_ASKED) - 1)]


def t_label(t):
    return f"{t // 1024}k" if t >= 1024 else str(t)


def draw(ax, rows, layers, phase, asked, style="-", note_missing=True):
    missing = []
    for layer in layers:
        mine = [r for r in rows if r["layer"] == layer and r["phase"] == phase and r["asked"] == asked
                and r["T"]]
        pts = [r for r in mine if r["status"] == "ok"]
        got = {int(r["T"]) for r in pts}
        gaps = [t_label(t) for t in sorted({int(r["T"]) for r in mine}) if t not in got]
        if not pts:
            missing.append(f"{NAMES.get(layer, layer)} (batch {asked})")
            continue
        if gaps:
            missing.append(f'{NAMES.get(layer, layer)} (batch {asked}) at {", ".join(gaps)}')
        pts.sort(key=lambda r: int(r["T"]))
        T = [int(r["T"]) for r in pts]
        med = [float(r["median_us_per_token"]) for r in pts]
        lo = [m - float(r["q1_us"]) for m, r in zip(med, pts)]
        hi = [float(r["q3_us"]) - m for m, r in zip(med, pts)]
        c = COLOURS.get(layer)
        label = NAMES.get(layer, layer) + ("" if style == "-" else f", batch {asked}")
        ax.errorbar(T, med, yerr=[lo, hi], marker="o", ms=4, capsize=3, color=c, ls=style, label=label)
        for t, m, r in zip(T, med, pts):
            if int(r["batch"]) != asked:
                ax.annotate(f'B{r["batch"]}', (t, m), textcoords="offset points", xytext=(4, 4), fontsize=7,
                            color=c)
    return missing if note_missing else []


def main(src, out):
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    label_requests(rows)
    layers = list(dict.fromkeys(r["layer"] for r in rows))
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    panels = [
        ("prefill", [(16, "-")], "forward time per token (µs)",
         "Prefill: forward over B sequences (B = 16 unless marked)"),
        ("decode", [(512, "-")], "time per generated token (µs)",
         "Decode at batch 512 (the largest B that fits, where marked):\nthe step's time / B"),
        ("decode", [(16, "-"), (1, "--")], "time per generated token (µs)",
         "Decode at batch 16 (solid) and batch 1 (dashed)"),
    ]
    Ts = sorted({int(r["T"]) for r in rows if r["T"]})
    for ax, (phase, series, ylabel, title) in zip(axes, panels):
        missing = []
        for asked, style in series:
            missing += draw(ax, rows, layers, phase, asked, style)
        ax.set_xscale("log", base=2)
        ax.set_xticks(Ts, [t_label(t) for t in Ts])
        ax.set_xlabel("context length T")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_ylabel(ylabel)
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
