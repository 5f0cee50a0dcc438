#!/usr/bin/env python3
"""Make the fast-weight inner-loop fixtures of tests/reference (README.md there, section "Fast weights").

The references are flash-linear-attention's (FLA, github.com/fla-org/flash-linear-attention) pure-PyTorch
"naive" implementations, read from a checkout whose path is given on the command line (never copied into
this repository). Each file is loaded by its path alone (importlib), so FLA's package __init__, its Triton
kernels and its other dependencies are not imported:

  member            reference (the fixture)                  second form (a self-check, manifest only)
  linear attention  linear_attn/naive.py                     naive_chunk_linear_attn (chunk 64, no initial
                    naive_recurrent_linear_attn              state: zero-padded to 64, from S0 = 0)
  decayed Hebbian   simple_gla/naive.py                      naive_chunk_simple_gla (chunk 16, the same
  (simple GLA)      naive_recurrent_simple_gla               inputs)
  DeltaNet          delta_rule/naive.py                      delta_rule_chunkwise (chunk 16, no initial
                    delta_rule_recurrence                    state: zero-padded to a multiple, from S0 = 0)
  Gated DeltaNet    gated_delta_rule/naive.py                naive_chunk_gated_delta_rule (chunk 16, the
                    naive_recurrent_gated_delta_rule         same inputs)
  Titans            titans/naive.py chunk_titans_linear_ref  use_chunk=True against use_chunk=False
                    (use_chunk=False: token by token)        (tests/core/test_titans.cpp reads it)

For each it writes <out>/fastweight-<name>/reference.safetensors, F64, every tensor in the layout
[B, H, T, ·] (the script transposes FLA's [B, T, H, ·] where the reference takes that):

  q, k [B, H, T, K], v [B, H, T, V]   the reference's inputs as passed (k L2-normalised for the delta
                                      rules and Titans, as FLA's layers do before calling the op; q NOT
                                      scaled: the reference multiplies it by `scale`)
  beta [B, H, T], g [B, H, T]         where the member takes them; g = log α (the reference decays by e^g)
  S0 [B, H, K, V]                     the initial state (FLA's layout: state [K, V], read o = q S)
  scale []                            the reference's query scale, K^-1/2
  o [B, H, T, V], S_T [B, H, K, V]    the outputs and the final state
  dO, dS_T                            fixed random weights of the functional L = Σ o ⊙ dO + Σ S_T ⊙ dS_T
  grad.<input>                        ∂L/∂input by torch autograd through the reference, for every input
  (Titans: q, k, v [B, H, T, D], theta, alpha, eta [B, H, T], w, b [H, D], S0 [B, H, D, D], o, S_T, and
   the same dO, dS_T and grad.<input>; its eps and mini-batch size are in the manifest)

and <out>/fastweight-manifest.json: the FLA commit (--fla-commit), the git blob id of every file used, the
torch version, each fixture's shapes, seed and conventions, and the self-checks below.

FLOAT64. The naive references cast their inputs to float32 (x.float(), x.to(torch.float32)). While they
run here, Float64Steps makes both of these leave a float64 tensor as it is, and makes float64 the default
dtype (Titans' chunked form builds a tensor with torch.full and no dtype); tensors made with an explicit
float32 dtype (an identity, a zero state) hold exact small integers and are promoted on first use. So the
fixture is the references' own code in float64. Every input is a float32 value (drawn in float64, then
rounded), so a float32 run sees the same inputs.

SELF-CHECKS (the manifest records each; the script stops if one fails):
  - the reference's result is float64 (the patch worked) and no gradient is all zero;
  - the second form above against the fixture, o, S_T and every gradient, within 1e-10 relative (the same
    function; only the summation order differs);
  - the unmodified reference in float32 (no patch) lands within 1e-4 of the fixture: float32 rounding,
    not a different formula.

Usage:
  python3 make_fastweight_fixtures.py FLA_SRC [--out tests/reference] [--fla-commit SHA]
FLA_SRC is the checkout's root (the folder holding fla/). Needs torch and einops (a minimal stand-in for
einops.rearrange is used when einops is absent; the manifest says which). The safetensors writer is
make_fixtures.py's.
"""

import argparse
import hashlib
import importlib.util
import json
import math
import os
import re
import sys
import types

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # importing make_fixtures must leave no __pycache__ in tests/reference
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import rel_err, write_safetensors  # noqa: E402  (torch-only safetensors writer)

# ---- the fixtures ----------------------------------------------------------------------------------------

# name, member, batch B, heads H, length T, K, V, seed. Lengths are not multiples of 16 (the chunked
# references' chunk), K ≠ V, and every fixture starts from a random initial state.
FIXTURES = [
    ("linear-attn", "linear_attn", 2, 2, 50, 8, 6, 4001),
    ("simple-gla", "simple_gla", 2, 2, 61, 8, 6, 4002),
    ("delta-rule", "delta_rule", 2, 2, 45, 8, 6, 4003),
    ("gated-delta-rule", "gated_delta_rule", 2, 2, 77, 8, 6, 4004),
]
TITANS = ("titans", 2, 2, 45, 8, 9, 1e-6, 4005)  # name, B, H, T, D (K = V), mini-batch, eps, seed
CHUNK = 16  # chunk of the chunked references (linear attention's is fixed at 64)
SELF_TOL = 1e-10  # second form against the fixture (float64, the same function)
FP32_TOL = 1e-4  # unmodified float32 reference against the fixture

SOURCES = {
    "linear_attn": "fla/ops/linear_attn/naive.py",
    "simple_gla": "fla/ops/simple_gla/naive.py",
    "delta_rule": "fla/ops/delta_rule/naive.py",
    "gated_delta_rule": "fla/ops/gated_delta_rule/naive.py",
    "titans": "fla/ops/titans/naive.py",
    "titans_log_impl": "fla/ops/titans/log_impl.py",
}

# What each reference computes, in this repository's words (docs/MATH.md §11.2); for the manifest.
CONVENTIONS = {
    "linear_attn": "S_t = S_{t-1} + k_t^T v_t, o_t = (scale q_t) S_t (read after the write); state [K, V]; "
                   "normalize=False",
    "simple_gla": "S_t = exp(g_t) S_{t-1} + k_t^T v_t, o_t = (scale q_t) S_t; ours: the decayed Hebbian rule "
                  "with alpha = exp(g), beta = 1",
    "delta_rule": "S_t = S_{t-1} + k_t^T (beta_t (v_t - k_t S_{t-1})), o_t = (scale q_t) S_t; k is not "
                  "normalised inside (FLA's layer L2-normalises it first; here k is given normalised)",
    "gated_delta_rule": "A = exp(g_t) S_{t-1}; S_t = A + k_t^T (beta_t (v_t - k_t A)), o_t = (scale q_t) S_t; "
                        "ours: Gated DeltaNet with alpha = exp(g)",
    "titans": "FLA's chunk_titans_linear_ref: momentum S_t = eta_t S_{t-1} - 2 theta_t k_t^T v_new, "
              "M_t = (1 - alpha_t) M_{t-1} + S_t, gradients at the mini-batch's start state, output "
              "o + LN(o) w + b with o = q M_t; no scale; tests/core/test_titans.cpp reads it",
}


# ---- importing the references -------------------------------------------------------------------------------

def git_blob_id(path):
    """The git blob id of a file (what `git hash-object` prints): names the exact file used."""
    with open(path, "rb") as f:
        data = f.read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def rearrange_stand_in(x, pattern, **sizes):
    """einops.rearrange for the patterns the naive references use (named axes, `...`, one level of
    parentheses on either side)."""
    lhs, rhs = (s.strip() for s in pattern.split("->"))
    tokens = lambda side: re.findall(r"\([^)]*\)|\.\.\.|\w+", side)  # noqa: E731
    left, right = tokens(lhs), tokens(rhs)
    n_ell = x.dim() - (len(left) - (1 if "..." in left else 0))
    # 1. the input's axes split into elementary axes
    elem, size, axis = [], dict(sizes), 0
    for tok in left:
        if tok == "...":
            for j in range(n_ell):
                elem.append(f"...{j}")
                size[f"...{j}"] = x.shape[axis]
                axis += 1
        elif tok.startswith("("):
            names = tok[1:-1].split()
            known = math.prod(size[n] for n in names if n in size)
            unknown = [n for n in names if n not in size]
            if len(unknown) > 1:
                raise ValueError(f"stand-in rearrange: cannot split {tok}")
            if unknown:
                size[unknown[0]] = x.shape[axis] // known
            elem.extend(names)
            axis += 1
        else:
            elem.append(tok)
            size[tok] = x.shape[axis]
            axis += 1
    x = x.reshape([size[n] for n in elem])
    # 2. the output's elementary axes, permuted, then grouped
    out_elem, out_shape = [], []
    for tok in right:
        if tok == "...":
            names = [f"...{j}" for j in range(n_ell)]
            out_elem.extend(names)
            out_shape.extend(size[n] for n in names)
        elif tok.startswith("("):
            names = tok[1:-1].split()
            out_elem.extend(names)
            out_shape.append(math.prod(size[n] for n in names))
        else:
            out_elem.append(tok)
            out_shape.append(size[tok])
    if sorted(out_elem) != sorted(elem):
        raise ValueError(f"stand-in rearrange: '{pattern}' is not a permutation")
    perm = [elem.index(n) for n in out_elem]
    x = x.permute(perm) if hasattr(x, "permute") else x.transpose(perm)
    return x.reshape(out_shape)


# The patterns the naive references pass to rearrange, with their sizes, for checking the stand-in.
REARRANGE_PATTERNS = [
    ("b h (n c) d -> b h n c d", (2, 3, 48, 5), {"c": 16}),
    ("b h n c d -> b h (n c) d", (2, 3, 3, 16, 5), {}),
    ("b t h ... -> b h t ...", (2, 7, 3, 5), {}),
    ("b t h ... -> b h t ...", (2, 7, 3), {}),
    ("b h n c d -> b (n c) h d", (2, 3, 2, 16, 5), {}),
    ("b (n c) h d -> b h n c d", (2, 64, 3, 5), {"c": 16}),
]


def ensure_einops():
    """einops if installed (then the stand-in is checked against it on REARRANGE_PATTERNS); otherwise
    a module `einops` holding rearrange_stand_in. Returns what was used."""
    try:
        import einops  # noqa: F401
        for pattern, shape, sizes in REARRANGE_PATTERNS:
            x = torch.randn(shape, dtype=torch.float64)
            if not torch.equal(rearrange_stand_in(x, pattern, **sizes), einops.rearrange(x, pattern, **sizes)):
                raise SystemExit(f"make_fastweight_fixtures: the rearrange stand-in differs from einops on {pattern}")
        return f"einops {einops.__version__} (the stand-in, checked against it, equal on every pattern used)"
    except ImportError:
        sys.modules["einops"] = types.SimpleNamespace(rearrange=rearrange_stand_in, __version__="stand-in")
        return "stand-in (einops absent)"


def load_file(fla_src, rel, name):
    """Executes one FLA file as module `name`, without importing FLA's package."""
    path = os.path.join(fla_src, rel)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def load_references(fla_src):
    refs = {m: load_file(fla_src, SOURCES[m], f"fla_naive_{m}")
            for m in ("linear_attn", "simple_gla", "delta_rule", "gated_delta_rule")}
    titans_error = None
    try:
        # titans/naive.py imports fla.ops.titans.log_impl: register that one file under its name, with
        # empty packages above it (FLA's own __init__ files are not run).
        for pkg in ("fla", "fla.ops", "fla.ops.titans"):
            if pkg not in sys.modules:
                m = types.ModuleType(pkg)
                m.__path__ = [os.path.join(fla_src, *pkg.split("."))]
                sys.modules[pkg] = m
        load_file(fla_src, SOURCES["titans_log_impl"], "fla.ops.titans.log_impl")
        refs["titans"] = load_file(fla_src, SOURCES["titans"], "fla_naive_titans")
    except Exception as e:  # noqa: BLE001 - Titans is optional: record why it did not load
        titans_error = f"{type(e).__name__}: {e}"
    return refs, titans_error


# ---- float64 steps ---------------------------------------------------------------------------------------

class Float64Steps:
    """While active, Tensor.float() and Tensor.to(torch.float32) leave a float64 tensor as it is, and the
    default dtype is float64 (see the module's docstring)."""

    def __enter__(self):
        self._float, self._to = torch.Tensor.float, torch.Tensor.to
        self._default = torch.get_default_dtype()
        orig_float, orig_to = self._float, self._to

        def keep_float(t, *args, **kwargs):
            return t if t.dtype == torch.float64 else orig_float(t, *args, **kwargs)

        def keep_to(t, *args, **kwargs):
            target = kwargs.get("dtype")
            if target is None:
                target = next((a for a in args if isinstance(a, torch.dtype)), None)
            if t.dtype == torch.float64 and target == torch.float32:
                args = tuple(torch.float64 if a is torch.float32 else a for a in args)
                if "dtype" in kwargs:
                    kwargs = dict(kwargs, dtype=torch.float64)
            return orig_to(t, *args, **kwargs)

        torch.Tensor.float, torch.Tensor.to = keep_float, keep_to
        torch.set_default_dtype(torch.float64)
        return self

    def __exit__(self, *exc):
        torch.Tensor.float, torch.Tensor.to = self._float, self._to
        torch.set_default_dtype(self._default)
        return False


# ---- the members ------------------------------------------------------------------------------------------

def bthd(x):
    """[B, H, T, ...] -> [B, T, H, ...] (FLA's layout for most naive references), contiguous."""
    return x.transpose(1, 2).contiguous()


def run_member(refs, member, inp, form):
    """The reference on inputs in [B, H, T, ·]: returns (o [B, H, T, V], S_T [B, H, K, V]). form
    "recurrent" is the fixture; "chunk" the second form, on the same inputs (simple GLA, Gated DeltaNet)."""
    q, k, v, S0 = inp["q"], inp["k"], inp["v"], inp["S0"]
    if member == "linear_attn":
        o, S = refs[member].naive_recurrent_linear_attn(bthd(q), bthd(k), bthd(v), initial_state=S0,
                                                        output_final_state=True)
        return bthd(o), S
    if member == "simple_gla":
        g = bthd(inp["g"])
        if form == "recurrent":
            o, S = refs[member].naive_recurrent_simple_gla(bthd(q), bthd(k), bthd(v), g, initial_state=S0,
                                                           output_final_state=True)
        else:
            o, S = refs[member].naive_chunk_simple_gla(bthd(q), bthd(k), bthd(v), g, initial_state=S0,
                                                       output_final_state=True, chunk_size=CHUNK)
        return bthd(o), S
    if member == "delta_rule":  # this reference takes [B, H, T, ·] and always scales q by K^-1/2
        return refs[member].delta_rule_recurrence(q, k, v, inp["beta"], initial_state=S0,
                                                  output_final_state=True)
    if member == "gated_delta_rule":
        beta, g = bthd(inp["beta"]), bthd(inp["g"])
        if form == "recurrent":
            o, S = refs[member].naive_recurrent_gated_delta_rule(bthd(q), bthd(k), bthd(v), beta, g,
                                                                 initial_state=S0, output_final_state=True)
        else:  # note the order: g before beta
            o, S = refs[member].naive_chunk_gated_delta_rule(bthd(q), bthd(k), bthd(v), g, beta,
                                                             chunk_size=CHUNK, initial_state=S0,
                                                             output_final_state=True)
        return bthd(o), S
    raise ValueError(member)


def pad_time(x, multiple):
    """Zero-pads axis 2 (time) of a [B, H, T, ·] or [B, H, T] tensor up to a multiple."""
    T = x.shape[2]
    pad = (multiple - T % multiple) % multiple
    if pad == 0:
        return x
    shape = list(x.shape)
    shape[2] = pad
    return torch.cat([x, x.new_zeros(shape)], dim=2)


def zero_state_chunk_check(refs, member, inp):
    """The chunked references without an initial state (linear attention, DeltaNet), against the
    recurrent reference from S0 = 0 on the same q, k, v (and β): outputs only, the tokens after the
    zero padding dropped (causal, so the padding changes nothing before it). Gradients of Σ o ⊙ dO with
    respect to q, k, v (and β) too."""
    T = inp["q"].shape[2]
    leaves = {n: inp[n].detach().clone().requires_grad_(True) for n in ("q", "k", "v", "beta") if n in inp}
    zero = dict(leaves, S0=torch.zeros_like(inp["S0"]))
    o_rec, _ = run_member(refs, member, zero, "recurrent")
    L = (o_rec * inp["dO"]).sum()
    g_rec = torch.autograd.grad(L, list(leaves.values()))
    if member == "linear_attn":
        c = 64  # naive_chunk_linear_attn's fixed chunk
        o_chk = refs[member].naive_chunk_linear_attn(*(bthd(pad_time(leaves[n], c)) for n in ("q", "k", "v")))
        o_chk = bthd(o_chk)[:, :, :T]
    else:
        c = CHUNK
        o_chk, _ = refs[member].delta_rule_chunkwise(*(pad_time(leaves[n], c) for n in ("q", "k", "v", "beta")),
                                                     chunk_size=c)
        o_chk = o_chk[:, :, :T]
    L = (o_chk * inp["dO"]).sum()
    g_chk = torch.autograd.grad(L, list(leaves.values()))
    out = {"form": ("naive_chunk_linear_attn" if member == "linear_attn" else "delta_rule_chunkwise")
           + f" (chunk {c}, zero-padded to a multiple, S0 = 0) vs the recurrent reference from S0 = 0",
           "o": rel_err(o_chk.detach(), o_rec.detach())}
    for n, a, b in zip(leaves, g_chk, g_rec):
        out[f"grad.{n}"] = rel_err(a, b)
    return out


def draw_inputs(member, B, H, T, K, V, gen):
    def randn(*shape):
        return torch.randn(shape, generator=gen, dtype=torch.float64)

    def rand(*shape):
        return torch.rand(shape, generator=gen, dtype=torch.float64)

    inp = {"q": randn(B, H, T, K), "k": randn(B, H, T, K), "v": randn(B, H, T, V)}
    if member in ("delta_rule", "gated_delta_rule"):
        inp["k"] = F.normalize(inp["k"], p=2, dim=-1)  # FLA's layers L2-normalise k before the op
        inp["beta"] = torch.sigmoid(randn(B, H, T))  # (0, 1): FLA's layers make β = sigmoid(·)
    else:
        inp["k"] = inp["k"] / math.sqrt(K)
    if member in ("simple_gla", "gated_delta_rule"):
        inp["g"] = torch.log(0.75 + 0.25 * rand(B, H, T))  # decay α = e^g in (0.75, 1)
    inp["S0"] = 0.5 * randn(B, H, K, V)
    inp = {n: x.to(torch.float32).double() for n, x in inp.items()}  # float32 values
    O = {"dO": randn(B, H, T, V), "dS_T": randn(B, H, K, V)}
    return inp, O


def check_grads(name, grads):
    for n, g in grads.items():
        if not torch.isfinite(g).all() or float(g.abs().max()) == 0.0:
            raise SystemExit(f"make_fastweight_fixtures: {name}: grad.{n} is zero or not finite")


def make_fixture(refs, out_dir, name, member, B, H, T, K, V, seed):
    gen = torch.Generator().manual_seed(seed)
    inp, weights = draw_inputs(member, B, H, T, K, V, gen)
    names = list(inp)
    leaves = {n: inp[n].clone().requires_grad_(True) for n in names}
    with Float64Steps():
        o, S = run_member(refs, member, leaves, "recurrent")
        if o.dtype != torch.float64 or S.dtype != torch.float64:
            raise SystemExit(f"make_fastweight_fixtures: {name}: the reference did not run in float64")
        L = (o * weights["dO"]).sum() + (S * weights["dS_T"]).sum()
        grads = dict(zip(names, torch.autograd.grad(L, [leaves[n] for n in names])))
    check_grads(name, grads)
    scale = K ** -0.5
    record = {"member": member, "reference": SOURCES[member], "seed": seed, "B": B, "H": H, "T": T, "K": K,
              "V": V, "scale": scale, "inputs": names, "conventions": CONVENTIONS[member], "checks": {}}

    # second form, float64
    with Float64Steps():
        if member in ("simple_gla", "gated_delta_rule"):
            l2 = {n: inp[n].clone().requires_grad_(True) for n in names}
            o2, S2 = run_member(refs, member, l2, "chunk")
            L2 = (o2 * weights["dO"]).sum() + (S2 * weights["dS_T"]).sum()
            g2 = dict(zip(names, torch.autograd.grad(L2, [l2[n] for n in names])))
            fn = "naive_chunk_simple_gla" if member == "simple_gla" else "naive_chunk_gated_delta_rule"
            chk = {"form": f"{fn} (chunk {CHUNK}, the same inputs and initial state)",
                   "o": rel_err(o2.detach(), o.detach()), "S_T": rel_err(S2.detach(), S.detach())}
            chk.update({f"grad.{n}": rel_err(g2[n], grads[n]) for n in names})
        else:
            chk = zero_state_chunk_check(refs, member, dict(inp, **weights))
    record["checks"]["second_form"] = chk

    # the unmodified reference in float32
    inp32 = {n: x.float() for n, x in inp.items()}
    o32, S32 = run_member(refs, member, inp32, "recurrent")
    record["checks"]["float32_unmodified"] = {"o": rel_err(o32.double(), o.detach()),
                                              "S_T": rel_err(S32.double(), S.detach()),
                                              "dtype": str(o32.dtype)}
    bad = [k for k, v in chk.items() if k != "form" and not v <= SELF_TOL]
    bad += [k for k in ("o", "S_T") if not record["checks"]["float32_unmodified"][k] <= FP32_TOL]
    record["checks"]["passed"] = not bad
    print(f"[fastweight] {name}: second form {json.dumps({k: v for k, v in chk.items() if k != 'form'})}; "
          f"float32 o {record['checks']['float32_unmodified']['o']:.2e}", flush=True)
    if bad:
        raise SystemExit(f"make_fastweight_fixtures: {name}: self-check failed: {bad}")

    tensors = [(n, inp[n]) for n in names]
    tensors += [("scale", torch.tensor(scale, dtype=torch.float64)), ("o", o.detach()), ("S_T", S.detach()),
                ("dO", weights["dO"]), ("dS_T", weights["dS_T"])]
    tensors += [(f"grad.{n}", grads[n]) for n in names]
    d = os.path.join(out_dir, f"fastweight-{name}")
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "reference.safetensors"), tensors, "F64")
    return record


def make_titans(refs, out_dir):
    name, B, H, T, D, mb, eps, seed = TITANS
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(shape, generator=gen, dtype=torch.float64)

    def rand(*shape):
        return torch.rand(shape, generator=gen, dtype=torch.float64)

    inp = {"q": randn(B, H, T, D), "k": F.normalize(randn(B, H, T, D), p=2, dim=-1), "v": randn(B, H, T, D),
           "w": 1.0 + 0.1 * randn(H, D), "b": 0.1 * randn(H, D),
           "theta": 0.01 + 0.09 * rand(B, H, T),   # inner learning rate
           "alpha": 0.01 + 0.09 * rand(B, H, T),   # forgetting (weight decay) in (0.01, 0.1)
           "eta": 0.8 + 0.19 * rand(B, H, T),      # momentum in (0.8, 0.99)
           "S0": 0.1 * randn(B, H, D, D)}
    inp = {n: x.to(torch.float32).double() for n, x in inp.items()}
    weights = {"dO": randn(B, H, T, D), "dS_T": randn(B, H, D, D)}
    names = list(inp)

    def run(x, use_chunk):
        o, S = refs["titans"].chunk_titans_linear_ref(
            bthd(x["q"]), bthd(x["k"]), bthd(x["v"]), x["w"], x["b"], bthd(x["theta"][..., None]),
            bthd(x["alpha"][..., None]), bthd(x["eta"][..., None]), eps=eps, chunk_size=mb,
            initial_state=x["S0"], output_final_state=True, use_chunk=use_chunk)
        return bthd(o), S

    results = {}
    with Float64Steps():
        for use_chunk in (False, True):
            leaves = {n: inp[n].clone().requires_grad_(True) for n in names}
            o, S = run(leaves, use_chunk)
            L = (o * weights["dO"]).sum() + (S * weights["dS_T"]).sum()
            results[use_chunk] = (o.detach(), S.detach(),
                                  dict(zip(names, torch.autograd.grad(L, [leaves[n] for n in names]))))
    o, S, grads = results[False]
    if o.dtype != torch.float64:
        raise SystemExit("make_fastweight_fixtures: titans: the reference did not run in float64")
    check_grads(name, grads)
    o2, S2, g2 = results[True]
    chk = {"form": f"chunk_titans_linear_ref use_chunk=True (chunk {mb}) vs use_chunk=False",
           "o": rel_err(o2, o), "S_T": rel_err(S2, S)}
    chk.update({f"grad.{n}": rel_err(g2[n], grads[n]) for n in names})
    o32, S32 = run({n: x.float() for n, x in inp.items()}, False)
    f32 = {"o": rel_err(o32.double(), o), "S_T": rel_err(S32.double(), S), "dtype": str(o32.dtype)}
    print(f"[fastweight] {name}: chunked vs token by token "
          f"{json.dumps({k: v for k, v in chk.items() if k != 'form'})}; float32 o {f32['o']:.2e}", flush=True)
    # Recorded, not required: whether FLA's two Titans forms agree is itself a finding for the later step.
    tensors = [(n, inp[n]) for n in names] + [("o", o), ("S_T", S), ("dO", weights["dO"]),
                                              ("dS_T", weights["dS_T"])]
    tensors += [(f"grad.{n}", grads[n]) for n in names]
    d = os.path.join(out_dir, f"fastweight-{name}")
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "reference.safetensors"), tensors, "F64")
    return {"member": "titans", "reference": SOURCES["titans"] + " chunk_titans_linear_ref(use_chunk=False)",
            "seed": seed, "B": B, "H": H, "T": T, "D": D, "mini_batch": mb, "eps": eps, "inputs": names,
            "conventions": CONVENTIONS["titans"],
            "checks": {"second_form": chk, "float32_unmodified": f32}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("fla_src", help="flash-linear-attention checkout (the folder holding fla/)")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--fla-commit", default=None, help="the checkout's commit, for the manifest")
    ap.add_argument("--no-titans", action="store_true")
    args = ap.parse_args()

    einops_used = ensure_einops()
    refs, titans_error = load_references(args.fla_src)
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    manifest = {
        "about": "Fast-weight inner-loop fixtures: flash-linear-attention's naive references run in float64 "
                 "on the CPU (Float64Steps), with autograd gradients. Made by tests/reference/"
                 "make_fastweight_fixtures.py; see README.md, section Fast weights.",
        "fla_commit": args.fla_commit,
        "fla_files": {SOURCES[m]: git_blob_id(os.path.join(args.fla_src, SOURCES[m])) for m in SOURCES},
        "torch": torch.__version__,
        "einops": einops_used,
        "layout": "every tensor [B, H, T, ...]; state [B, H, K, V], read o = (scale q) S",
        "functional": "L = sum(o * dO) + sum(S_T * dS_T); grad.<input> = dL/d<input>",
        "fixtures": {},
    }
    for fx in FIXTURES:
        manifest["fixtures"][f"fastweight-{fx[0]}"] = make_fixture(refs, args.out, *fx)
    if args.no_titans:
        manifest["titans"] = "skipped (--no-titans)"
    elif titans_error:
        manifest["titans"] = f"not loadable: {titans_error}"
    else:
        try:
            manifest["fixtures"][f"fastweight-{TITANS[0]}"] = make_titans(refs, args.out)
            manifest["titans"] = "made (tests/core/test_titans.cpp reads it)"
        except Exception as e:  # noqa: BLE001 - Titans is optional; record why it did not run
            manifest["titans"] = f"did not run: {type(e).__name__}: {e}"
            print(f"[fastweight] titans: {manifest['titans']}", flush=True)
    with open(os.path.join(args.out, "fastweight-manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print("[fastweight] wrote", os.path.join(args.out, "fastweight-manifest.json"), flush=True)


if __name__ == "__main__":
    main()
