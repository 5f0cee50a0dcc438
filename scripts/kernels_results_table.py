#!/usr/bin/env python3
"""The results tables of docs/KERNELS.md, made from the committed benchmark files.

Reads the JSON that `tttlab bench --device cuda --json` prints (one file per GPU, by default
docs/results/bench-cuda-h100.json and docs/results/bench-cuda-h200.json) and prints Markdown: the
machine line (copy bandwidth, GEMM ceilings), the kernel rows, the whole-model training steps and
the batch-1 generation rows, one column per file. Every number comes from those files.

    python3 scripts/kernels_results_table.py                 # print the block
    python3 scripts/kernels_results_table.py --write         # rewrite it in docs/KERNELS.md
    python3 scripts/kernels_results_table.py --check         # exit 1 if docs/KERNELS.md is stale
    python3 scripts/kernels_results_table.py a.json b.json   # other files (one column each)

--write and --check take the Markdown file as an optional argument (default docs/KERNELS.md); the
block lies between the lines `<!-- results:begin -->` and `<!-- results:end -->`.
Standard library only.
"""
import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILES = ["docs/results/bench-cuda-h100.json", "docs/results/bench-cuda-h200.json"]
DEFAULT_DOC = "docs/KERNELS.md"
BEGIN = "<!-- results:begin -->"
END = "<!-- results:end -->"


def gpu_name(device: str) -> str:
    """'CUDA: NVIDIA H200, sm_90, 139.8 GiB' -> 'H200'."""
    m = re.search(r"NVIDIA\s+([^\s,]+)", device)
    return m.group(1) if m else device.split(",")[0]


def ms(x: float) -> str:
    if x < 1:
        return f"{x:.3f}"
    if x < 10:
        return f"{x:.2f}"
    if x < 100:
        return f"{x:.1f}"
    return f"{x:.0f}"


def spread(median: float, lo: float, hi: float, fmt=ms) -> str:
    return f"{fmt(median)} ({fmt(lo)}–{fmt(hi)})"


def grouped(x: float) -> str:
    return f"{x:,.0f}"


def peer_text(row: dict) -> str:
    if not row.get("peer"):
        return ""
    name = re.sub(r"\s*\(issue \d+\)", "", row["peer"])  # where the figure was quoted is not part of it
    return f"{name}: {ms(row['peer_ms'])}"


def table(header, rows) -> list:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def by_key(runs, section, key):
    """For each run, a dict key(row) -> row of that section; and the keys in first-seen order."""
    maps, order = [], []
    for r in runs:
        m = {}
        for row in r.get(section, []):
            k = key(row)
            m[k] = row
            if k not in order:
                order.append(k)
        maps.append(m)
    return maps, order


def render(paths) -> str:
    runs = [json.loads((ROOT / p if not Path(p).is_absolute() else Path(p)).read_text()) for p in paths]
    names = [gpu_name(r["device"]) for r in runs]
    files = ", ".join(f"`{p}`" for p in paths)
    lines = [
        f"<!-- Made by scripts/kernels_results_table.py from {files}; rerun it with --write, do not edit. -->",
        "",
    ]

    # The machines.
    lines.append("| GPU | device | copy bandwidth | cuBLAS GEMM ceiling (n = 4096), TFLOP/s |")
    lines.append("| --- | --- | --- | --- |")
    for n, r in zip(names, runs):
        ceil = r.get("gemm_ceiling", {})
        parts = [f"{p} {spread(c['median_tflops'], c['min_tflops'], c['max_tflops'], lambda x: f'{x:.1f}')}"
                 for p, c in ceil.items()]
        lines.append(f"| {n} | {r['device'].removeprefix('CUDA: ')} | {grouped(r['copy_bandwidth_gbs'])} GB/s | "
                     f"{'; '.join(parts)} |")
    lines.append("")

    # The kernels.
    # A row is its name at its shape: one kernel may be timed at several sequence lengths.
    maps, order = by_key(runs, "kernels", lambda k: (k["name"], k["shape"]))
    shapes = Counter(m[k]["shape"] for m in maps for k in m)
    common = shapes.most_common(1)[0][0] if shapes else ""
    lines.append(f"Kernels at {common.replace(' ', ', ')} unless the row says otherwise; median of "
                 f"{maps[0][order[0]]['repeats'] if order else '?'} timed runs (min–max), ms:")
    lines.append("")
    header = ["row"] + [f"{n} ms" for n in names] + ["memory floor " + " / ".join(names), "peer (published), ms",
                                                        "target, ms"]
    rows = []
    for k in order:
        present = [m.get(k) for m in maps]
        first = next(p for p in present if p)
        label = f"`{k[0]}`" + ("" if first["shape"] == common else f" ({first['shape']})")
        cells = [spread(p["median_ms"], p["min_ms"], p["max_ms"]) if p else "" for p in present]
        floors = " / ".join(ms(p["floor_ms"]) if p and p.get("floor_ms") else "–" for p in present)
        target = f"≤ {first['target_ms']:g}" if first.get("target_ms") else ""
        rows.append([label] + cells + [floors, peer_text(first), target])
    lines += table(header, rows)
    lines.append("")

    # Whole-model training steps.
    maps, order = by_key(runs, "training", lambda t: (t["shape"], t["layer"], t["gemm"]))
    first_row = next(iter(maps[0].values()), None)
    lines.append("Whole-model training steps (forward, backward, AdamW; "
                 f"{first_row['repeats'] if first_row else '?'} timed steps): ms per step, median (min–max), "
                 "tokens/s, and the model's FLOP rate as a share of the GEMM ceiling of the same precision:")
    lines.append("")
    header = ["model", "mixer", "products"]
    for n in names:
        header += [f"{n} ms/step", f"{n} tokens/s"]
    header.append("of ceiling " + " / ".join(names))
    rows = []
    for k in order:
        present = [m.get(k) for m in maps]
        first = next(p for p in present if p)
        model = f"{first['shape']} B{first['B']} T{first['T']}"
        row = [model, first["layer"], first["gemm"]]
        for p in present:
            row += [spread(p["median_ms"], p["min_ms"], p["max_ms"]) if p else "",
                    grouped(p["tokens_per_s"]) if p else ""]
        row.append(" / ".join(f"{100 * p['ratio_to_ceiling']:.0f}%" if p else "–" for p in present))
        rows.append(row)
    lines += table(header, rows)
    lines.append("")

    # Where one profiled step of the large model goes (CUDA events around each phase).
    prof = [(n, k, m[k]) for n, m in zip(names, maps) for k in order
            if k in m and m[k].get("one_profiled_step") and m[k]["layer"].startswith("ttt") and m[k]["L"] >= 12]
    if prof:
        lines.append("One profiled step of the D768 models with a TTT mixer, ms (a profiled step runs every product on "
                     "the step's stream and times each phase with CUDA events, so it takes longer than the "
                     "median above):")
        lines.append("")
        header = ["GPU", "mixer", "products", "step", "matrix products", "inner loop forward", "inner loop backward",
                  "the rest"]
        rows = []
        for n, k, t in prof:
            p = t["one_profiled_step"]
            rows.append([n, t["layer"], t["gemm"]] + [ms(p[x]) for x in
                                                      ("total_ms", "gemm_ms", "mixer_forward_ms", "mixer_backward_ms",
                                                       "rest_ms")])
        lines += table(header, rows)
        lines.append("")

    # Generation at batch 1.
    maps, order = by_key(runs, "generation", lambda g: (g["preset"], g["layer"], g["device"]))
    if order:
        lines.append("Greedy generation at batch 1, bytes/s, median (min–max) over the repeats; the CPU rows are "
                     "the same host's CPU cores:")
        lines.append("")
        header = ["preset", "mixer", "device"] + [f"{n} host, bytes/s" for n in names]
        rows = []
        for k in order:
            cells = []
            for m in maps:
                g = m.get(k)
                if not g:
                    cells.append("")
                    continue
                f = lambda x: grouped(x)
                c = spread(g["bytes_per_s_median"], g["bytes_per_s_min"], g["bytes_per_s_max"], f)
                if g.get("ratio_to_cpu"):
                    c += f", {g['ratio_to_cpu']:.1f}× CPU"
                cells.append(c)
            rows.append([k[0], k[1], k[2]] + cells)
        lines += table(header, rows)
    return "\n".join(lines) + "\n"


def splice(doc: str, block: str) -> str:
    b, e = doc.find(BEGIN), doc.find(END)
    if b < 0 or e < b:
        raise SystemExit(f"no {BEGIN} ... {END} block")
    return doc[: b + len(BEGIN)] + "\n" + block + doc[e:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", default=DEFAULT_FILES, help="bench JSON files, one column each")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", nargs="?", const=DEFAULT_DOC, metavar="MD", help="rewrite the block in MD")
    g.add_argument("--check", nargs="?", const=DEFAULT_DOC, metavar="MD", help="exit 1 if MD's block is stale")
    a = ap.parse_args()
    block = render(a.files)
    target = a.write or a.check
    if not target:
        sys.stdout.write(block)
        return 0
    path = ROOT / target if not Path(target).is_absolute() else Path(target)
    doc = path.read_text()
    new = splice(doc, block)
    if a.check:
        if new != doc:
            print(f"{target}: the results block is not what scripts/kernels_results_table.py makes from "
                  f"{', '.join(a.files)}; run it with --write", file=sys.stderr)
            return 1
        print(f"{target}: results block current")
        return 0
    if new != doc:
        path.write_text(new)
        print(f"{target}: results block rewritten")
    else:
        print(f"{target}: results block already current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
