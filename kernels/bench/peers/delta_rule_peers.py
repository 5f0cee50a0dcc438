#!/usr/bin/env python3
"""What a researcher would run instead of the lab's delta-rule kernels, timed on this GPU.

flash-linear-attention's (FLA) chunked kernels in bf16, when its source is on PYTHONPATH:
chunk_delta_rule (DeltaNet) and chunk_gated_delta_rule (Gated DeltaNet). The inputs are what the
lab's matrix-rule kernels take (docs/MATH.md §11.2): keys and queries already L2-normalised per head
(so FLA's in-kernel normalisation is off), β = σ(x) in (0, 1) per token and head, and for the gated
rule the log of the decay, log α = log σ(x) < 0. Scale 1.

Shapes [B, T, H, d] as the lab's benchmark: B=16 H=12 d=64 by default, each T given. Times are CUDA
events around each call (forward; forward + backward with a fixed upstream gradient), after warm-up:
the median and the min - max of --repeats runs (attention_peers.timed). Prints a table and writes
--json.

    PYTHONPATH=/path/to/flash-linear-attention python3 delta_rule_peers.py --seq 2048 8192 --json f.json
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_peers import timed  # noqa: E402  (the same timing as the attention peers)


GUARD_NOTE = ("timed with FLA's Triton-version guard lifted: on Triton >= 3.4.0 and < 3.7.1 on Hopper its gated "
              "chunk_bwd_dqkwg gives wrong gradients (FLA issue #640), so this is the time of its kernels, not a "
              "check of their result")


def timed_past_the_guard(call, warmup, repeats):
    """Times call with FLA's refusal of its gated backward on this Triton switched off, then back on."""
    import fla.ops.common.chunk_o as chunk_o
    saved = chunk_o.TRITON_ABOVE_3_7_1
    chunk_o.TRITON_ABOVE_3_7_1 = True
    try:
        return dict(timed(call, warmup, repeats), note=GUARD_NOTE)
    finally:
        chunk_o.TRITON_ABOVE_3_7_1 = saved


def delta_rows(B, H, T, d, warmup, repeats, lift_guard=False):
    try:
        from fla.ops.delta_rule import chunk_delta_rule
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except Exception as e:
        print(f"flash-linear-attention not importable: {e}", file=sys.stderr)
        return []
    g = torch.Generator(device="cuda").manual_seed(7)
    uni = lambda *s: torch.rand(*s, device="cuda", generator=g, dtype=torch.float32).mul_(2).sub_(1)
    unit = lambda x: F.normalize(x, dim=-1).to(torch.bfloat16)
    q, k = unit(uni(B, T, H, d)), unit(uni(B, T, H, d))
    v, do = uni(B, T, H, d).to(torch.bfloat16), uni(B, T, H, d).to(torch.bfloat16)
    beta = torch.sigmoid(uni(B, T, H) * 2).to(torch.bfloat16)
    log_alpha = F.logsigmoid(uni(B, T, H) * 2 + 4)  # α ≈ 0.9 - 1.0, fp32 as FLA keeps its gates

    def dn(q, k, v, b):
        return chunk_delta_rule(q, k, v, b, scale=1.0)[0]

    def gdn(q, k, v, b):
        return chunk_gated_delta_rule(q, k, v, log_alpha, b, scale=1.0)[0]

    rows = []
    for op, peer, fn in [("delta rule", "fla chunk_delta_rule bf16", dn),
                         ("gated delta rule", "fla chunk_gated_delta_rule bf16", gdn)]:
        row = {"op": op, "peer": peer, "T": T}
        qg, kg, vg, bg = (x.detach().requires_grad_() for x in (q, k, v, beta))

        def fb():
            fn(qg, kg, vg, bg).backward(do)
        # A phase FLA refuses (its gated backward on some Triton versions, for one) is recorded with
        # FLA's reason instead of a time.
        for phase, call in [("forward", lambda: fn(q, k, v, beta)), ("fwd+bwd", fb)]:
            try:
                row[phase] = timed(call, warmup, repeats)
            except Exception as e:
                row[phase] = {"error": str(e).splitlines()[0][:300]}
                print(f"{peer} T={T} {phase}: {row[phase]['error']}", file=sys.stderr)
                if lift_guard and "#640" in str(e):
                    row[phase] = timed_past_the_guard(call, warmup, repeats)
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--seq", type=int, nargs="+", default=[2048])
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--lift-triton-guard", action="store_true",
                    help="where FLA refuses its gated backward for the Triton version (#640), time it anyway")
    a = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    rows = []
    for T in a.seq:
        reps = max(5, a.repeats * 2048 // T) if T > 2048 else a.repeats
        rows += delta_rows(a.batch, a.heads, T, a.dim, a.warmup, reps, a.lift_triton_guard)
        torch.cuda.empty_cache()
    show = lambda t: (f"{t['median_ms']:9.4f} ms ({t['min_ms']:.4f} - {t['max_ms']:.4f})"
                      + (" (guard lifted)" if "note" in t else "") if "median_ms" in t else "refused by FLA")
    for r in rows:
        print(f"{r['op']:18s} {r['peer']:34s} T={r['T']:<6d} fwd {show(r['forward'])}   fwd+bwd {show(r['fwd+bwd'])}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "shape": {"B": a.batch, "H": a.heads, "d": a.dim}, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
