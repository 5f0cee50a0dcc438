#!/usr/bin/env python3
"""Summarise a mini-batch sweep (scripts/paper/minibatch_sweep.sh): one CSV row per run and the mean
and sample standard deviation over seeds per b. Reads OUT/runs/b<b>-s<seed>/metrics.jsonl and
train_config.json (the last evaluation record, the mean training tokens/s)."""
import csv, glob, json, math, os, re, sys
from collections import defaultdict

out = sys.argv[1]
rows = []
for d in sorted(glob.glob(os.path.join(out, "runs", "b*-s*"))):
    m = re.match(r"b(\d+)-s(\d+)$", os.path.basename(d))
    if not m or not os.path.isfile(os.path.join(d, "metrics.jsonl")):
        continue
    b, seed = int(m.group(1)), int(m.group(2))
    val, tps = None, []
    with open(os.path.join(d, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if "val_bpb" in r:
                val = r
            elif "tokens_per_s" in r and r.get("step", 0) > 5:
                tps.append(r["tokens_per_s"])
    if val is None:
        continue
    log = open(d + ".log").read() if os.path.isfile(d + ".log") else ""
    dev = re.search(r"device\s*[:=]?\s*(CUDA|CPU)", log)
    tps.sort()
    rows.append({"b": b, "seed": seed, "step": val["step"], "val_bpb": val["val_bpb"], "val_loss": val["val_loss"],
                 "tokens_per_s_median": tps[len(tps) // 2] if tps else "",
                 "device": dev.group(1) if dev else ""})
rows.sort(key=lambda r: (r["b"], r["seed"]))
with open(os.path.join(out, "minibatch.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()) if rows else ["b"])
    w.writeheader()
    w.writerows(rows)
by_b = defaultdict(list)
for r in rows:
    by_b[r["b"]].append(r)
summary = []
for b, rs in sorted(by_b.items()):
    v = [r["val_bpb"] for r in rs]
    mean = sum(v) / len(v)
    sd = math.sqrt(sum((x - mean) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else float("nan")
    t = [r["tokens_per_s_median"] for r in rs if r["tokens_per_s_median"] != ""]
    summary.append({"b": b, "seeds": len(v), "val_bpb_mean": round(mean, 4), "val_bpb_sd": round(sd, 4),
                    "per_seed": " ".join(f"{x:.4f}" for x in v), "tokens_per_s": round(sum(t) / len(t)) if t else "",
                    "device": rs[0]["device"]})
with open(os.path.join(out, "minibatch-summary.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(summary[0].keys()) if summary else ["b"])
    w.writeheader()
    w.writerows(summary)
print(f"{'b':>5} {'seeds':>5} {'bits/byte':>18} {'tokens/s':>10}  device  per seed")
for s in summary:
    print(f"{s['b']:>5} {s['seeds']:>5} {s['val_bpb_mean']:>9.4f} ± {s['val_bpb_sd']:<6.4f} {s['tokens_per_s']!s:>10}  {s['device']:<6}  {s['per_seed']}")
