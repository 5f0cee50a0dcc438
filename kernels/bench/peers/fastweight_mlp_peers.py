#!/usr/bin/env python3
"""Times the public implementations of the MLP fast-weight members on the GPU, for the ratio columns of
docs/KERNELS.md ("Titans' memory (recurrent)", "LaCT's inner loop on the GPU"). Their code is read from
checkouts given on the command line and never copied here; each file is loaded by its path alone.

  LaCT  (github.com/a1600012888/LaCT, lact_llm/lact_model/):
    ttt_operation.py  block_causal_lact_swiglu  the language model's inner loop, with its bf16 autocast;
                      its torch.compile decorator is replaced by the identity unless --compile: compiling
                      the 32-chunk loop took 79 s (forward) and 202 s (forward + backward) on an H200
    ttt_operation_fused_kernel.py  postnorm_block_causal_lact_swiglu_fused_kernel_triton  the same loop
                      on their Triton kernels (their 760M "fused_kernel" configuration)
  Titans (github.com/fla-org/flash-linear-attention, fla/ops/titans/naive.py):
    chunk_titans_linear_ref(use_chunk=True)  FLA's only Titans implementation (PyTorch, fp32; FLA has
                      no Titans kernels), mini-batch b = 16

Shape: the lab's bench shape, B16 H12 T2048 d64 (LaCT: d_h = d, chunk 64, per-token momentum, as
`lact_rows` of kernels/bench/ttt_bench.cu; Titans: b = 16, as `titans_rows`). Forward, and forward +
backward through autograd (the gradients of every input that the lab's kernels give). CUDA events;
`--repeats` timed calls after 2 untimed (compilation happens there); the median and min-max in ms.
A member whose first call takes longer than --max-call-s seconds is timed once and reported so.
Prints one JSON object.

Usage: python3 fastweight_mlp_peers.py --lact LACT_SRC --fla FLA_SRC [--repeats 10] [--only lact-fused]
(--only: one member, lact, lact-fused or titans, so that each can run under its own time limit)
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
import types
import warnings

import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    mod.warnings = warnings
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def timed(fn, repeats, max_call_s):
    """(median, min, max) in ms of `repeats` calls after 2 warm-ups (the first compiles what it
    compiles); the second warm-up alone is reported when it takes longer than max_call_s."""
    t0 = time.time()
    fn()
    torch.cuda.synchronize()
    first = time.time() - t0
    t0 = time.time()
    fn()
    torch.cuda.synchronize()
    second = time.time() - t0
    if second > max_call_s:
        return {"ms_median": second * 1e3, "ms_min": second * 1e3, "ms_max": second * 1e3, "repeats": 1,
                "first_call_s": first, "note": f"a call took {second:.1f} s: timed once (wall clock)"}
    ts = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return {"ms_median": statistics.median(ts), "ms_min": min(ts), "ms_max": max(ts), "repeats": repeats,
            "first_call_s": first}


def lact_inputs(BH, T, d, dh, gen):
    dev = "cuda"
    r = lambda *s: torch.randn(*s, generator=gen, device=dev)  # noqa: E731
    l2 = lambda x: x / (x.norm(dim=-1, keepdim=True) + 1e-5)  # noqa: E731
    silu = torch.nn.functional.silu
    x = {"w0": r(BH, dh, d) / d ** 0.5, "w1": r(BH, d, dh) / dh ** 0.5, "w2": r(BH, dh, d) / d ** 0.5,
         "q": l2(silu(r(BH, T, d))).bfloat16(), "k": l2(silu(r(BH, T, d))).bfloat16(), "v": silu(r(BH, T, d)).bfloat16(),
         "lr0": torch.nn.functional.softplus(r(BH, T, 1) - 3), "lr1": torch.nn.functional.softplus(r(BH, T, 1) - 3),
         "lr2": torch.nn.functional.softplus(r(BH, T, 1) - 3), "momentum": torch.sigmoid(r(BH, T, 1))}
    return x


def time_lact(fn, x, chunk, repeats, max_call_s):
    names = list(x)

    def fwd():
        with torch.no_grad():
            fn(x["w0"], x["w1"], x["w2"], x["q"], x["k"], x["v"], x["lr0"], x["lr1"], x["lr2"],
               chunk_size=chunk, use_muon=False, momentum=x["momentum"])

    leaves = {n: t.clone().requires_grad_(True) for n, t in x.items()}

    def fwd_bwd():
        o = fn(leaves["w0"], leaves["w1"], leaves["w2"], leaves["q"], leaves["k"], leaves["v"], leaves["lr0"],
               leaves["lr1"], leaves["lr2"], chunk_size=chunk, use_muon=False, momentum=leaves["momentum"])
        torch.autograd.grad(o.float().sum(), [leaves[n] for n in names])

    out = {"forward": timed(fwd, repeats, max_call_s)}
    try:  # the fused Triton loop is forward-only: its kernels have no autograd
        out["forward_backward"] = timed(fwd_bwd, repeats, max_call_s)
    except Exception as e:  # noqa: BLE001
        out["forward_backward"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    return out


def time_titans(mod, B, H, T, D, mb, repeats, max_call_s, gen):
    dev = "cuda"
    r = lambda *s: torch.randn(*s, generator=gen, device=dev)  # noqa: E731
    u = lambda *s: torch.rand(*s, generator=gen, device=dev)  # noqa: E731
    x = {"q": r(B, T, H, D), "k": torch.nn.functional.normalize(r(B, T, H, D), dim=-1), "v": r(B, T, H, D),
         "w": 1 + 0.1 * r(H, D), "b": 0.1 * r(H, D), "theta": 0.01 + 0.09 * u(B, T, H, 1),
         "alpha": 0.01 + 0.09 * u(B, T, H, 1), "eta": 0.8 + 0.19 * u(B, T, H, 1), "S0": torch.zeros(B, H, D, D, device=dev)}
    names = list(x)

    def call(t):
        return mod.chunk_titans_linear_ref(t["q"], t["k"], t["v"], t["w"], t["b"], t["theta"], t["alpha"], t["eta"],
                                           eps=1e-6, chunk_size=mb, initial_state=t["S0"], output_final_state=True,
                                           use_chunk=True)

    def fwd():
        with torch.no_grad():
            call(x)

    leaves = {n: t.clone().requires_grad_(True) for n, t in x.items()}

    def fwd_bwd():
        o, S = call(leaves)
        torch.autograd.grad(o.sum() + S.sum(), [leaves[n] for n in names])

    return {"forward": timed(fwd, repeats, max_call_s), "forward_backward": timed(fwd_bwd, repeats, max_call_s)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lact", required=True)
    ap.add_argument("--fla", required=True)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--max-call-s", type=float, default=20.0)
    ap.add_argument("--compile", action="store_true", help="keep LaCT's torch.compile decorators")
    ap.add_argument("--only", choices=["lact", "lact-fused", "titans"], help="time this member only")
    a = ap.parse_args()
    if not a.compile:
        # The decorators run when the files load: the identity stands in for torch.compile there.
        def identity_compile(*args, **kwargs):
            if len(args) == 1 and callable(args[0]) and not kwargs:
                return args[0]
            return lambda f: f
        torch.compile = identity_compile
    B, H, T, d = 16, 12, 2048, 64
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "lact_torch_compile": a.compile,
           "shape": {"B": B, "H": H, "T": T, "d": d}, "results": {}}
    try:
        import einops  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "reference"))
        from make_fastweight_fixtures import ensure_einops
        ensure_einops()
    lact_dir = os.path.join(a.lact, "lact_llm", "lact_model")
    gen = torch.Generator(device="cuda").manual_seed(2041)
    x = lact_inputs(B * H, T, d, d, gen)
    for member, key, file, fn in (
            ("lact", "lact block_causal_lact_swiglu (bf16 autocast; compiled only with --compile)", "ttt_operation.py",
             "block_causal_lact_swiglu"),
            ("lact-fused", "lact postnorm fused Triton kernels", "ttt_operation_fused_kernel.py",
             "postnorm_block_causal_lact_swiglu_fused_kernel_triton")):
        if a.only and a.only != member:
            continue
        try:
            sys.path.insert(0, lact_dir)
            mod = load(os.path.join(lact_dir, file), "lact_" + file[:-3])
            out["results"][key] = time_lact(getattr(mod, fn), x, 64, a.repeats, a.max_call_s)
        except Exception as e:  # noqa: BLE001 - a peer that does not run is reported, not fatal
            out["results"][key] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
        print(json.dumps({key: out["results"][key]}), file=sys.stderr, flush=True)
    if a.only and a.only != "titans":
        print(json.dumps(out, indent=1))
        return
    try:
        for pkg in ("fla", "fla.ops", "fla.ops.titans"):
            m = types.ModuleType(pkg)
            m.__path__ = [os.path.join(a.fla, *pkg.split("."))]
            sys.modules.setdefault(pkg, m)
        load(os.path.join(a.fla, "fla", "ops", "titans", "log_impl.py"), "fla.ops.titans.log_impl")
        titans = load(os.path.join(a.fla, "fla", "ops", "titans", "naive.py"), "fla_naive_titans")
        out["results"]["titans chunk_titans_linear_ref (FLA, PyTorch fp32, b = 16)"] = time_titans(
            titans, B, H, T, d, 16, a.repeats, a.max_call_s, gen)
    except Exception as e:  # noqa: BLE001
        out["results"]["titans chunk_titans_linear_ref (FLA, PyTorch fp32, b = 16)"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
