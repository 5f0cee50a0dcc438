#!/usr/bin/env python3
"""web/test/bench_report.py — the web benchmark's table (scripts/web.sh --bench), from browser_test.mjs's
results.json: each part of the engine check timed in the browser and natively on the same machine, as
medians over the same number of runs, and their ratio; then the time to the first frame and the
download size."""
import json
import sys

r = json.load(open(sys.argv[1]))
web, native = r.get("web_check"), r.get("native_check")
if not web or not native:
    sys.exit("bench_report: results.json has no engine check from both builds (did the browser run fail?)")
rows = [
    ("verify", "run_verify_suite, 42 checks", 1),
    ("eval", f"tiny-brown, {web['eval']['windows']} validation windows", 1),
    ("greedy", f"tiny-brown, {len(web['greedy']['bytes_hex']) // 2} bytes greedy", 1),
    ("train", f"tiny preset, {len(web['train']['losses'])} steps of B=4, T=64, 1 thread", 1),
]
repeats = web["verify"]["time"]["repeats"]
print(f"engine in the browser vs native (median of {repeats} runs each; ratio = browser / native; target <= 3)")
print(f"  {'part':<8} {'what':<44} {'native s':>9} {'browser s':>10} {'ratio':>6}")
for key, what, _ in rows:
    n = native[key]["time"]["median_s"]
    w = web[key]["time"]["median_s"]
    print(f"  {key:<8} {what:<44} {n:9.3f} {w:10.3f} {w / n:6.2f}")
print(f"first frame: {r['first_frame_ms']:.0f} ms after navigation (target <= 2000 ms on localhost)")
s = r["sizes"]
print(f"download before the first frame: {s['raw'] / 1e6:.2f} MB, {s['gzip'] / 1e6:.2f} MB gzip-compressed (target <= 10 MB)")
print(f"then, after the first frame, the other shipped models: {s['later_raw'] / 1e6:.2f} MB, "
      f"{s['later_gzip'] / 1e6:.2f} MB gzip-compressed")
for name, f in sorted(s["files"].items(), key=lambda kv: -kv[1]["raw"]):
    print(f"  {name:<18} {f['raw'] / 1e6:7.2f} MB  {f['gzip'] / 1e6:7.2f} MB gzip")
