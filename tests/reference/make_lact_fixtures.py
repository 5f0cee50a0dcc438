#!/usr/bin/env python3
"""Make the LaCT inner-loop fixtures of tests/reference (README.md there, section "Fast weights").

The reference is LaCT's (github.com/a1600012888/LaCT, "Test-Time Training Done Right") PyTorch inner
loop `block_causal_lact_swiglu`, read from a checkout whose path is given on the command line (never
copied into this repository). Two copies of it are loaded, each by its path alone (importlib), so
neither the LaCT packages nor flash-attn, fla or transformers are imported:

  lact_llm/lact_model/ttt_operation.py       the language model's inner loop: the FIXTURE
  minimal_implementations/
    causal_lact_with_sliding_window_attn.py  the minimal implementation's copy: a self-check (the same
                                             function, its own argument order), manifest only

Per head (the reference's batch axis b holds the heads), fast weights of a SwiGLU MLP
f(x) = W1 (silu(W0 x) ⊙ (W2 x)), W0, W2 [dh, dk], W1 [dv, dh]; the sequence is cut into chunks of C
tokens; chunk c is read with the weights from before it (o = f_W(q)), then ONE step on the chunk's
rate-weighted dot-product loss −Σ_t ⟨f(k_t), v_t⟩ (a rate per token and per weight: lr0, lr1, lr2),
optionally with momentum (the chunk's mean of a per-token momentum) and Muon (5 Newton–Schulz steps),
then every row of each weight rescaled to its norm at the start of the sequence. The last chunk (the
tokens from the last multiple of C below T, or the last full chunk when C divides T) is only read.

For each fixture it writes <out>/fastweight-lact-<name>/reference.safetensors, F64:

  q, k [B, T, dk], v [B, T, dv]       the op's inputs as passed (q, k L2-normalised rows as the layer
                                      passes them: x / (‖x‖ + 1e-5), LaCT's l2_norm, applied here)
  lr0, lr1, lr2 [B, T]                the per-token rates (the layer's softplus output)
  momentum [B, T]                     the per-token momentum (sigmoid output); only where used
  w0, w2 [B, dh, dk], w1 [B, dv, dh]  the initial fast weights (the reference's layout)
  o [B, T, dv]                        the output
  dO [B, T, dv]                       fixed random weights of the functional L = Σ o ⊙ dO
  grad.<input>                        ∂L/∂input by torch autograd through the reference
  chunk [], use_muon [], use_momentum []  the configuration, as numbers

(B is the reference's batch axis, 2 here: two heads, each with its own weights.) The reference returns
no final weights, so none are stored; the C++ test checks its own through its backward (the weights
reach o through the later chunks).

FLOAT64. The reference's Muon casts to bfloat16 (G.bfloat16()); while it runs here, Tensor.bfloat16
leaves a float64 tensor as it is, so the fixture is the reference's own code in float64. torch.compile
(a decorator there) is replaced by the identity before loading; the autocast decorator of
ttt_operation.py is for CUDA and does nothing on the CPU tensors used here (on a torch without CUDA,
which cannot construct it, it is replaced by the identity while the file loads). Every input is a float32
value (drawn in float64, then rounded), so a float32 run sees the same inputs.

SELF-CHECKS (the manifest records each; the script stops if one fails):
  - the result is float64 and no gradient is all zero or non-finite;
  - the minimal implementation's copy against the fixture, o and every gradient, ≤ 1e-12 relative;
  - the unmodified reference in float32 (no patch): within 1e-4 of the fixture without Muon; with Muon
    recorded only (its Newton–Schulz steps run in bfloat16 there).

Usage:
  /usr/bin/python3 make_lact_fixtures.py LACT_SRC [--out tests/reference] [--lact-commit SHA]
LACT_SRC is the checkout's root (the folder holding lact_llm/ and minimal_implementations/). Needs torch
(any version from 1.13; einops is replaced by make_fastweight_fixtures.py's stand-in when absent). The
safetensors writer is make_fixtures.py's.
"""

import argparse
import importlib.util
import json
import math
import os
import sys
import types
import warnings

import torch

sys.dont_write_bytecode = True  # importing make_fixtures must leave no __pycache__ in tests/reference
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import rel_err, write_safetensors  # noqa: E402
from make_fastweight_fixtures import ensure_einops, git_blob_id  # noqa: E402

SOURCES = {
    "ttt_operation": "lact_llm/lact_model/ttt_operation.py",
    "minimal": "minimal_implementations/causal_lact_with_sliding_window_attn.py",
}

# name, B (heads), T, dk, dv, dh, chunk C, momentum, muon, seed. dh ≠ dk so that Muon's Newton–Schulz
# takes both of its branches (W0, W2 [dh, dk] are transposed inside, W1 [dv, dh] is not).
FIXTURES = [
    ("gd", 2, 50, 8, 6, 12, 16, False, False, 4101),        # last chunk partial (2 tokens)
    ("momentum", 2, 61, 8, 6, 12, 16, True, False, 4102),   # last chunk partial (13 tokens)
    ("muon", 2, 77, 8, 6, 12, 20, True, True, 4103),        # momentum + Muon, last chunk 17 tokens
    ("muon-exact", 2, 64, 8, 6, 12, 16, False, True, 4104),  # C divides T: the last full chunk is only read
]
SELF_TOL = 1e-12
FP32_TOL = 1e-4

CONVENTIONS = (
    "per head: W0, W2 [dh, dk], W1 [dv, dh], f(x) = W1 (silu(W0 x) * (W2 x)); chunks of C tokens, chunk c "
    "read with the weights before it; the update G1 = sum_t lr1_t v_t h_t^T, G0 = sum_t lr0_t dz0_t k_t^T, "
    "G2 = sum_t lr2_t dz2_t k_t^T (minus the gradient of -sum_t <f(k_t), v_t>, rate-weighted per token); "
    "momentum M_c = G_c + mean_{t in c}(momentum_t) M_{c-1}, M_0 = 0; Muon: U = NS5(M) (Frobenius "
    "normalisation with eps 1e-7, 5 steps with the coefficients in the source); W <- W + U; every row of W "
    "rescaled W_r <- W_r / (|W_r| + 1e-5) * |W_r at the start|; the chunk from the last multiple of C "
    "below T (or the last full chunk) is only read")


def load_file(src, rel, name):
    """Executes one LaCT file as module `name`. `warnings` is provided up front: the minimal file calls
    it when flash-attn is absent without importing it."""
    path = os.path.join(src, rel)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    mod.warnings = warnings
    sys.modules[name] = mod
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec.loader.exec_module(mod)
    return mod


def identity_compile(*args, **kwargs):
    """Stands in for torch.compile as a decorator, with or without arguments."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda f: f


class KeepFloat64:
    """While active, Tensor.bfloat16() leaves a float64 tensor as it is (the reference's Muon casts)."""

    def __enter__(self):
        self._bf16 = torch.Tensor.bfloat16
        orig = self._bf16

        def keep(t, *args, **kwargs):
            return t if t.dtype == torch.float64 else orig(t, *args, **kwargs)

        torch.Tensor.bfloat16 = keep
        return self

    def __exit__(self, *exc):
        torch.Tensor.bfloat16 = self._bf16
        return False


def draw_inputs(B, T, dk, dv, dh, use_momentum, l2_norm, gen):
    def randn(*shape):
        return torch.randn(shape, generator=gen, dtype=torch.float64)

    silu = torch.nn.functional.silu
    softplus = torch.nn.functional.softplus
    inv_softplus_01 = 0.1 + math.log(-math.expm1(-0.1))  # softplus(inv) = 0.1
    inp = {
        "q": l2_norm(silu(randn(B, T, dk))),  # as the layer: silu, then LaCT's l2_norm
        "k": l2_norm(silu(randn(B, T, dk))),
        "v": randn(B, T, dv),
        # rates around 0.1 (the layer's base is 1e-3; larger here so that the updates show)
        "lr0": softplus(0.5 * randn(B, T) + inv_softplus_01),
        "lr1": softplus(0.5 * randn(B, T) + inv_softplus_01),
        "lr2": softplus(0.5 * randn(B, T) + inv_softplus_01),
    }
    if use_momentum:
        inp["momentum"] = torch.sigmoid(randn(B, T))
    inp["w0"] = randn(B, dh, dk) / math.sqrt(dk)  # the layer's initialisation
    inp["w1"] = randn(B, dv, dh) / math.sqrt(dh)
    inp["w2"] = randn(B, dh, dk) / math.sqrt(dk)
    inp = {n: x.to(torch.float32).double() for n, x in inp.items()}  # float32 values
    return inp, randn(B, T, dv)


def run_ref(mod, which, x, chunk, use_momentum, use_muon):
    """The reference on the fixture's inputs (rates and momentum [B, T] -> [B, T, 1])."""
    lr = [x[n][..., None] for n in ("lr0", "lr1", "lr2")]
    m = x["momentum"][..., None] if use_momentum else None
    if which == "ttt_operation":
        return mod.block_causal_lact_swiglu(x["w0"], x["w1"], x["w2"], x["q"], x["k"], x["v"], *lr,
                                            chunk_size=chunk, use_muon=use_muon, momentum=m)
    return mod.block_causal_lact_swiglu(x["w0"], x["w1"], x["w2"], x["q"], x["k"], x["v"], *lr, m, use_muon,
                                        chunk_size=chunk)


def make_fixture(mods, out_dir, name, B, T, dk, dv, dh, chunk, use_momentum, use_muon, seed):
    gen = torch.Generator().manual_seed(seed)
    inp, dO = draw_inputs(B, T, dk, dv, dh, use_momentum, mods["ttt_operation"].l2_norm, gen)
    names = list(inp)
    results = {}
    with KeepFloat64():
        for which in ("ttt_operation", "minimal"):
            leaves = {n: inp[n].clone().requires_grad_(True) for n in names}
            o = run_ref(mods[which], which, leaves, chunk, use_momentum, use_muon)
            if o.dtype != torch.float64:
                raise SystemExit(f"make_lact_fixtures: {name}: the reference did not run in float64")
            L = (o * dO).sum()
            results[which] = (o.detach(), dict(zip(names, torch.autograd.grad(L, [leaves[n] for n in names]))))
    o, grads = results["ttt_operation"]
    for n, g in grads.items():
        if not torch.isfinite(g).all() or float(g.abs().max()) == 0.0:
            raise SystemExit(f"make_lact_fixtures: {name}: grad.{n} is zero or not finite")
    o2, g2 = results["minimal"]
    chk = {"form": "minimal_implementations' block_causal_lact_swiglu vs lact_llm's (the same function)",
           "o": rel_err(o2, o)}
    chk.update({f"grad.{n}": rel_err(g2[n], grads[n]) for n in names})
    o32 = run_ref(mods["ttt_operation"], "ttt_operation", {n: x.float() for n, x in inp.items()}, chunk,
                  use_momentum, use_muon)
    f32 = {"o": rel_err(o32.detach().double(), o), "dtype": str(o32.dtype),
           "note": "Newton-Schulz in bfloat16 (the reference's cast)" if use_muon else "float32 throughout"}
    bad = [k for k, v in chk.items() if k != "form" and not v <= SELF_TOL]
    if not use_muon and not f32["o"] <= FP32_TOL:
        bad.append("float32_unmodified.o")
    n_updates = len(range(0, T - chunk, chunk))
    print(f"[lact] {name}: {n_updates} updates, last chunk {T - n_updates * chunk} tokens; minimal copy "
          f"max rel {max(v for k, v in chk.items() if k != 'form'):.1e}; float32 o {f32['o']:.2e}", flush=True)
    if bad:
        raise SystemExit(f"make_lact_fixtures: {name}: self-check failed: {bad}")

    tensors = [(n, inp[n]) for n in names] + [("o", o), ("dO", dO)]
    tensors += [(f"grad.{n}", grads[n]) for n in names]
    tensors += [("chunk", torch.tensor(float(chunk), dtype=torch.float64)),
                ("use_momentum", torch.tensor(float(use_momentum), dtype=torch.float64)),
                ("use_muon", torch.tensor(float(use_muon), dtype=torch.float64))]
    d = os.path.join(out_dir, f"fastweight-lact-{name}")
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "reference.safetensors"), tensors, "F64")
    return {"reference": SOURCES["ttt_operation"] + " block_causal_lact_swiglu", "seed": seed, "B": B, "T": T,
            "dk": dk, "dv": dv, "dh": dh, "chunk": chunk, "use_momentum": use_momentum, "use_muon": use_muon,
            "updates": n_updates, "last_chunk_tokens": T - n_updates * chunk, "inputs": names,
            "checks": {"second_copy": chk, "float32_unmodified": f32, "passed": True}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("lact_src", help="LaCT checkout (the folder holding lact_llm/ and minimal_implementations/)")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--lact-commit", default=None, help="the checkout's commit, for the manifest")
    args = ap.parse_args()

    einops_used = ensure_einops()
    torch.compile = identity_compile  # the files decorate with it; torch 1.13 has none
    autocast = torch.autocast
    if not torch.cuda.is_available():
        # ttt_operation.py's @torch.autocast(device_type="cuda", dtype=bfloat16) affects CUDA tensors only;
        # a CPU-only torch 1.13 cannot even construct it, so it is the identity while the files load.
        torch.autocast = lambda *a, **k: (lambda f: f)
    mods = {m: load_file(args.lact_src, SOURCES[m], f"lact_{m}") for m in SOURCES}
    torch.autocast = autocast
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    manifest = {
        "about": "LaCT inner-loop fixtures: block_causal_lact_swiglu run in float64 on the CPU (KeepFloat64), "
                 "with autograd gradients. Made by tests/reference/make_lact_fixtures.py; see README.md, "
                 "section Fast weights.",
        "lact_commit": args.lact_commit,
        "lact_files": {SOURCES[m]: git_blob_id(os.path.join(args.lact_src, SOURCES[m])) for m in SOURCES},
        "torch": torch.__version__,
        "einops": einops_used,
        "layout": "q, k [B, T, dk], v [B, T, dv], rates and momentum [B, T], w0, w2 [B, dh, dk], w1 [B, dv, dh] "
                  "(the reference's: B is its batch axis, here heads)",
        "functional": "L = sum(o * dO); grad.<input> = dL/d<input>",
        "conventions": CONVENTIONS,
        "fixtures": {},
    }
    for fx in FIXTURES:
        manifest["fixtures"][f"fastweight-lact-{fx[0]}"] = make_fixture(mods, args.out, *fx)
    path = os.path.join(args.out, "fastweight-lact-manifest.json")
    with open(path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print("[lact] wrote", path, flush=True)


if __name__ == "__main__":
    main()
