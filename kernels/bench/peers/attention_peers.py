#!/usr/bin/env python3
"""What a researcher would run instead of the lab's attention kernels, timed on this GPU.

Causal softmax attention: PyTorch's scaled_dot_product_attention in bf16, each backend it offers
(FlashAttention-2, cuDNN, memory-efficient) timed separately; the fastest is the peer.
Linear attention (O = tril(Q Kᵀ) V, no normalisation): flash-linear-attention's chunk_linear_attn in
bf16, when its source is on PYTHONPATH (normalize=False, scale=1, the lab's Theorem-1 form).

Shapes [B, T, H, d] as the lab's benchmark: B=16 H=12 d=64 by default, each T given. Times are CUDA
events around each call (forward; forward + backward with a fixed upstream gradient), after warm-up:
the median and the min - max of --repeats runs. Prints a table and writes --json.

    python3 attention_peers.py --seq 2048 8192 32768 --json peers.json
    python3 attention_peers.py --ops linear --seq 2048 8192 32768     # FLA only
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F


def timed(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times)}


def sdpa_rows(B, H, T, d, warmup, repeats):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    g = torch.Generator(device="cuda").manual_seed(7)
    # SDPA's layout is [B, H, T, d]; a transpose of [B, T, H, d] (what a model's projection gives),
    # as a model calls it.
    mk = lambda: torch.rand(B, T, H, d, device="cuda", generator=g, dtype=torch.bfloat16).mul_(2).sub_(1).transpose(1, 2)
    q, k, v, do = mk(), mk(), mk(), mk()
    rows = []
    for name, be in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                     ("efficient", SDPBackend.EFFICIENT_ATTENTION)]:
        try:
            with sdpa_kernel([be]):
                fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), warmup, repeats)
                qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))

                def fb():
                    o = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
                    o.backward(do)
                fwdbwd = timed(fb, warmup, repeats)
            rows.append({"op": "softmax-attention", "peer": f"torch sdpa {name} bf16", "T": T, "forward": fwd,
                         "fwd+bwd": fwdbwd})
        except Exception as e:  # a backend this build or GPU does not offer
            print(f"sdpa {name} T={T}: not available ({str(e).splitlines()[0][:100]})", file=sys.stderr)
    return rows


def fla_rows(B, H, T, d, warmup, repeats):
    try:
        from fla.ops.linear_attn import chunk_linear_attn
    except Exception as e:
        print(f"flash-linear-attention not importable: {e}", file=sys.stderr)
        return []
    g = torch.Generator(device="cuda").manual_seed(7)
    mk = lambda: torch.rand(B, T, H, d, device="cuda", generator=g, dtype=torch.bfloat16).mul_(2).sub_(1)
    q, k, v, do = mk(), mk(), mk(), mk()
    run = lambda q, k, v: chunk_linear_attn(q, k, v, scale=1.0, normalize=False)[0]
    fwd = timed(lambda: run(q, k, v), warmup, repeats)
    qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))

    def fb():
        run(qg, kg, vg).backward(do)
    return [{"op": "linear-attention", "peer": "fla chunk_linear_attn bf16", "T": T, "forward": fwd,
             "fwd+bwd": timed(fb, warmup, repeats)}]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--seq", type=int, nargs="+", default=[2048])
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--ops", nargs="+", choices=["softmax", "linear"], default=["softmax", "linear"],
                    help="which peers to time (softmax: SDPA; linear: FLA)")
    ap.add_argument("--json")
    a = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    rows = []
    for T in a.seq:
        # Fewer repeats where one call takes long; the spread is still reported.
        reps = max(5, a.repeats * 2048 // T) if T > 2048 else a.repeats
        if "softmax" in a.ops:
            rows += sdpa_rows(a.batch, a.heads, T, a.dim, a.warmup, reps)
        if "linear" in a.ops:
            rows += fla_rows(a.batch, a.heads, T, a.dim, a.warmup, reps)
        torch.cuda.empty_cache()
    for r in rows:
        f, fb = r["forward"], r["fwd+bwd"]
        print(f"{r['op']:18s} {r['peer']:30s} T={r['T']:<6d} fwd {f['median_ms']:9.4f} ms ({f['min_ms']:.4f} - "
              f"{f['max_ms']:.4f})   fwd+bwd {fb['median_ms']:9.4f} ms ({fb['min_ms']:.4f} - {fb['max_ms']:.4f})")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "shape": {"B": a.batch, "H": a.heads, "d": a.dim}, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
