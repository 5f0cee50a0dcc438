#!/usr/bin/env python3
"""Reads the files of a `gpu_check.sh family` call (a folder or its family.tar.gz) and prints one JSON
object: every target of the fast-weight family's GPU work with the value measured in that call and,
where the target is a ratio, the peer's time from the same call; then the raw rows it came from.

  python3 kernels/bench/family_targets.py family.tar.gz > docs/results/family-targets-h200.json

Given several calls' files (a call that timed a subset again, e.g. the delta rules with FLA), each
target is read from the first call that measured both its sides, and says which ("call": the index).

The targets (docs/KERNELS.md, "The family against its targets"): DeltaNet and Gated
DeltaNet forward and forward + backward at most 1.0x flash-linear-attention's chunk_delta_rule /
chunk_gated_delta_rule at T = 2048 and 8192; TTT-MLP forward + backward at most 8 ms; Titans' memory
and LaCT's update faster than the fastest public implementation run (FLA's PyTorch Titans reference,
LaCT's own loop); 125m whole-model training in bf16, TTT-MLP at 200k tokens/s or more. A target whose
peer did not run (a refusal, a time-out) is listed with the peer's message and met = null.
"""
import io
import json
import os
import re
import sys
import tarfile

ROW = re.compile(r"^(?P<name>.*?)\s+(?P<shape>B=\d+ H=\d+ T=(?P<T>\d+) d=\d+(?: [A-Za-z]+=\d+)*)\s+"
                 r"(?P<med>[\d.]+)\s+(?P<lo>[\d.]+) - (?P<hi>[\d.]+)")


def read_files(src):
    files = {}
    if os.path.isdir(src):
        for n in os.listdir(src):
            with open(os.path.join(src, n), "rb") as fh:
                files[n] = fh.read()
    else:
        with tarfile.open(src) as tf:
            for m in tf.getmembers():
                if m.isfile():
                    files[os.path.basename(m.name)] = tf.extractfile(m).read()
    return files


def kernel_rows(text):
    rows = []
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            rows.append({"kernel": m["name"].strip(), "shape": m["shape"], "T": int(m["T"]),
                         "median_ms": float(m["med"]), "min_ms": float(m["lo"]), "max_ms": float(m["hi"])})
    return rows


def find(rows, name, T):
    for r in rows:
        if r["kernel"] == name and r["T"] == T:
            return r
    return None


def ratio_target(text, ours, peer_ms, peer_error, limit=1.0):
    t = {"target": text, "ours_ms": ours["median_ms"] if ours else None,
         "ours_min_max_ms": [ours["min_ms"], ours["max_ms"]] if ours else None}
    if peer_error or peer_ms is None or ours is None:
        t.update({"peer_ms": None, "peer_error": peer_error or "not measured", "ratio": None, "met": None})
    else:
        r = ours["median_ms"] / peer_ms
        t.update({"peer_ms": peer_ms, "ratio": round(r, 4), "met": r <= limit})
    return t


def targets_of(src):
    files = read_files(src)
    text = lambda n: files.get(n, b"").decode("utf-8", "replace")  # noqa: E731
    k = kernel_rows(text("family_kernels_2048.txt")) + kernel_rows(text("family_kernels_8192.txt"))
    training = json.loads(text("family_training.json") or "{}")
    fla = json.loads(text("family_fla_delta.json") or "{}")

    def peer_json(name):
        try:
            return json.loads(text(name))
        except json.JSONDecodeError:
            return {"error": (text(name.replace(".json", ".err")) or "no output")[-400:]}
    titans_peer, lact_peer = peer_json("family_titans_peer.json"), peer_json("family_lact_peer.json")

    targets = []
    for op, label in (("delta rule", "DeltaNet"), ("gated delta rule", "Gated DeltaNet")):
        for T in (2048, 8192):
            prow = next((r for r in fla.get("rows", []) if r["op"] == op and r["T"] == T), {})
            for phase, ours_name, key in (("forward", f"{op} forward bf16 chunked tensor cores", "forward"),
                                          ("forward + backward", f"{op} fwd+bwd bf16 chunked tensor cores", "fwd+bwd")):
                p = prow.get(key, {"error": "not measured"})
                t = ratio_target(f"{label} {phase}, T = {T}: at most 1.0x FLA {prow.get('peer', '')}",
                                 find(k, ours_name, T), p.get("median_ms"), p.get("error"))
                if "note" in p:
                    t["peer_note"] = p["note"]
                targets.append(t)
    mlp = [r for r in k if r["kernel"].startswith("ttt-mlp forward+backward") and r["T"] == 2048]
    best = min(mlp, key=lambda r: r["median_ms"]) if mlp else None
    targets.append({"target": "TTT-MLP forward + backward at most 8 ms (B16 H12 T2048 d64 b16)",
                    "ours_ms": best and best["median_ms"], "row": best and best["kernel"], "limit_ms": 8.0,
                    "met": None if best is None else best["median_ms"] <= 8.0,
                    "every_row": mlp})
    for member, ours_f, ours_b, peer_key, peer_res in (
            ("Titans memory", "titans memory (recurrent) forward fp32", "titans memory (recurrent) fwd+bwd fp32",
             "titans chunk_titans_linear_ref", titans_peer),
            ("LaCT update", "lact chunked forward tf32", "lact chunked fwd+bwd tf32", "lact block_causal_lact_swiglu",
             lact_peer)):
        res = next((v for kk, v in peer_res.get("results", {}).items() if kk.startswith(peer_key)), None)
        for phase, ours_name, pk in (("forward", ours_f, "forward"), ("forward + backward", ours_b, "forward_backward")):
            pr = (res or {}).get(pk, {})
            err = (res or peer_res).get("error") or pr.get("error")
            targets.append(ratio_target(f"{member} {phase}: faster than {peer_key}", find(k, ours_name, 2048),
                                        pr.get("ms_median"), err, limit=1.0))
    rates = {}
    for r in training.get("training", []):
        if r.get("shape") == "D768-L12" and r.get("gemm") == "bf16":
            rates[r["layer"]] = {"tokens_per_s": round(r["tokens_per_s"]), "median_ms": r["median_ms"],
                                 "min_ms": r["min_ms"], "max_ms": r["max_ms"]}
    mlp_rate = rates.get("ttt-mlp", {}).get("tokens_per_s")
    targets.append({"target": "TTT-MLP 125m training in bf16 at 200,000 tokens/s or more (D768 L12 B8 T2048)",
                    "ours_tokens_per_s": mlp_rate, "met": None if mlp_rate is None else mlp_rate >= 200000})
    return {"source": os.path.basename(src.rstrip("/")), "device": training.get("device") or fla.get("device"),
            "targets": targets, "training_bf16_125m": rates, "gemm_ceiling": training.get("gemm_ceiling"),
            "kernels": k, "fla_delta_rule": fla, "titans_peer": titans_peer, "lact_peer": lact_peer}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    calls = [targets_of(src) for src in sys.argv[1:]]
    merged = []
    for i, t in enumerate(calls[0]["targets"]):
        choice = next((c for c, call in enumerate(calls) if call["targets"][i]["met"] is not None), 0)
        merged.append(dict(calls[choice]["targets"][i], call=choice))
    json.dump({"targets": merged, "calls": calls}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
