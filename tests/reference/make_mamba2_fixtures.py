#!/usr/bin/env python3
"""Make the Mamba-2 layer fixtures of tests/reference (README.md there, section "Mamba-2").

The reference is state-spaces/mamba's Mamba2 layer (mamba_ssm/modules/mamba2.py), from a checkout whose
path is given with --mamba-src (never copied into this repository), in the configuration the lab's
Mamba2Layer implements: ngroups 1, rmsnorm True, norm_before_gate False, no projection biases, D per
head, dt_limit (0, inf). For each tiny seeded configuration below it writes

  <out>/mamba2-<name>/config.json          our Mamba2Config fields (width, d_state, d_conv, expand, headdim,
                                           chunk_size, norm_eps) and the batch and length
  <out>/mamba2-<name>/params.safetensors   F32, the reference's state_dict: in_proj.weight [out, in] (as
                                           nn.Linear), conv1d.weight [C, 1, K], conv1d.bias, dt_bias, A_log, D,
                                           norm.weight, out_proj.weight [out, in]. Every value is a float32
                                           value, so the float64 evaluation and a float loader see the same.
  <out>/mamba2-<name>/reference.safetensors  F64: x [B, T, D], G [B, T, D], y = layer(x) [B, T, D], and the
                                           gradients of sum(y * G): grad.x and grad.<parameter name>
  <out>/mamba2-manifest.json               the run: source commits, versions, which float64 evaluation
                                           made the fixture, and the self-checks below

THE FIXTURE is a float64 evaluation on the CPU (autograd for the gradients), by one of:
  "fla"        flash-linear-attention's Mamba2.torch_forward (--fla-src), its pure-PyTorch SSD, with the
               norm as FLA's own rms_norm_ref (its RMSNormGated runs a Triton kernel, GPU only);
  "mamba_ssm"  mamba_ssm's own pure-PyTorch pieces: the module's in_proj, conv1d and act, its
               ssd_minimal_discrete (modules/ssd_minimal.py), and rms_norm_ref (ops/triton/layernorm_gated.py).
Both call .float() on intermediate tensors, which would round a float64 run to float32; while they run,
Tensor.float() leaves float64 tensors as they are (Float64Steps). The manifest records how far FLA's
unmodified code (float32 steps kept) lands from the fixture: float32 rounding, not a different formula.

THE SELF-CHECKS (all in the manifest; the script stops if one fails):
  - the GENUINE layer, Mamba2.forward on the GPU in float32 with its Triton kernels (use_mem_eff_path False,
    and the default True where it runs: it needs the causal_conv1d package), y and every gradient against
    the fixture: float32 rounding, about 1e-6. Triton's float32 dot products are made IEEE (not TF32) with
    TRITON_F32_DEFAULT=ieee, set below before Triton is imported;
  - the genuine cached inference path: a prefill of P tokens through forward(inference_params=...), then
    one token per call (Mamba2.step: its conv roll and Triton selective_state_update), against the full
    forward; and step() token by token from empty states;
  - when both float64 evaluations ran, they agree to rounding; no gradient is all zero.

mamba_ssm/__init__.py imports compiled extensions (selective_scan_cuda via selective_scan_interface) and
every model of the package; none of them is used here. When it fails to import, the package is registered
without running its __init__ (a stand-in that holds only the package's path), so that mamba_ssm.modules.
mamba2 and what it imports are the real files. Without the causal_conv1d package Mamba2 uses its
nn.Conv1d path. huggingface_hub (Mamba2's mixin base) and, with --cpu-only on a machine without Triton,
triton get inert stand-ins; neither computes anything here.

Usage:
  python3 make_mamba2_fixtures.py --mamba-src DIR [--fla-src DIR] [--out tests/reference]
                                  [--mamba-commit SHA] [--fla-commit SHA] [--cpu-only] [--device cuda]
--cpu-only skips the GPU reference (the fixture itself is the same; the manifest then says it was not
checked against the genuine kernels). Needs torch and einops; the safetensors writer is make_fixtures.py's.
"""

import os

os.environ.setdefault("TRITON_F32_DEFAULT", "ieee")  # before anything imports Triton: IEEE float32 dots

import argparse
import importlib
import json
import math
import sys
import types

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # importing make_fixtures must leave no __pycache__ in tests/reference
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import rel_err, write_safetensors  # noqa: E402  (torch-only safetensors writer)

# ---- the fixtures ----------------------------------------------------------------------------------------

# name, layer configuration (our Mamba2Config fields), batch, length, prefill of the decode check, seed.
# Lengths are not multiples of the chunk; d_inner = expand·width, heads = d_inner / headdim.
FIXTURES = [
    ("a", dict(width=32, d_state=16, d_conv=4, expand=2, headdim=16, chunk_size=8), 2, 21, 5, 3901),
    ("b", dict(width=48, d_state=32, d_conv=3, expand=2, headdim=32, chunk_size=16), 2, 37, 16, 3902),
    ("c", dict(width=32, d_state=16, d_conv=4, expand=1, headdim=16, chunk_size=8), 3, 13, 8, 3903),
]
NORM_EPS = 1e-5  # Mamba2's RMSNormGated eps (fixed in its constructor)
PARAM_NAMES = ["in_proj.weight", "conv1d.weight", "conv1d.bias", "dt_bias", "A_log", "D", "norm.weight",
               "out_proj.weight"]


def draw_params(cfg, gen):
    """Every parameter drawn afresh, at a scale where its path matters, rounded to float32 values:
    unit-scale activations through the projections and the conv; dt = softplus(dt_raw + dt_bias) about
    0.2 (0.015 .. 1.6 in these fixtures) and A in [-2, -0.5], so the per-token decay exp(dt·A) is about 0.8
    (0.11 .. 0.99): it matters, and the state carried across a chunk is not ~0; D, norm.weight and
    conv1d.bias away from their inits."""
    D, N, K = cfg["width"], cfg["d_state"], cfg["d_conv"]
    di = cfg["expand"] * D
    H, C = di // cfg["headdim"], di + 2 * N

    def randn(*shape):
        return torch.randn(shape, generator=gen, dtype=torch.float64)

    def rand(*shape):
        return torch.rand(shape, generator=gen, dtype=torch.float64)

    p = {
        "in_proj.weight": randn(2 * di + 2 * N + H, D) / math.sqrt(D),
        "conv1d.weight": randn(C, 1, K) / math.sqrt(K),
        "conv1d.bias": 0.1 * randn(C),
        "dt_bias": -1.5 + 0.3 * randn(H),
        "A_log": torch.log(0.5 + 1.5 * rand(H)),
        "D": 1.0 + 0.5 * randn(H),
        "norm.weight": 1.0 + 0.1 * randn(di),
        "out_proj.weight": randn(D, di) / math.sqrt(di),
    }
    return {k: v.to(torch.float32).double() for k, v in p.items()}


# ---- importing the sources --------------------------------------------------------------------------------

class _Inert:
    """Any other name of the Triton stand-in: calling it or reading an attribute gives another _Inert."""

    def __call__(self, *args, **kwargs):
        return _Inert()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


class _InertModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


class _TritonConfig:
    def __init__(self, kwargs, **options):
        self.kwargs = kwargs
        self.__dict__.update(options)


def _triton_stand_in():
    """Enough of Triton for its kernels' modules to be imported (decorators keep the Python function, an
    autotuned kernel keeps its configs, which module-level code reads); no kernel can run."""
    t = _module("triton", _InertModule, __version__="0.0.0", Config=_TritonConfig,
                jit=lambda fn=None, **_: fn if fn is not None else (lambda f: f),
                heuristics=lambda *_, **__: (lambda fn: fn),
                autotune=lambda configs, *_, **__: (lambda fn: types.SimpleNamespace(fn=fn, configs=list(configs))))
    t.language = _module("triton.language", _InertModule)


def _module(name, cls=types.ModuleType, **names):
    m = cls(name)
    m.__dict__.update(names)
    sys.modules[name] = m
    return m


def install_stand_ins(cpu_only):
    """Stand-ins for what is missing and computes nothing here; returns their names."""
    used = []
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        _module("huggingface_hub", PyTorchModelHubMixin=type("PyTorchModelHubMixin", (), {}))
        used.append("huggingface_hub")
    try:
        import triton  # noqa: F401
    except ImportError:
        if not cpu_only:
            raise SystemExit("make_mamba2_fixtures: Triton is not installed; the GPU reference needs it "
                             "(or run with --cpu-only)")
        _triton_stand_in()
        used.append("triton")
    return used


def drop_modules(prefix):
    for name in [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]:
        del sys.modules[name]


def import_mamba_ssm(src):
    pkg_dir = os.path.join(src, "mamba_ssm")
    if not os.path.isfile(os.path.join(pkg_dir, "modules", "mamba2.py")):
        raise SystemExit(f"make_mamba2_fixtures: --mamba-src {src!r} is not a state-spaces/mamba checkout "
                         "(no mamba_ssm/modules/mamba2.py)")
    sys.path.insert(0, os.path.abspath(src))
    try:
        importlib.import_module("mamba_ssm")
        init = "real"
    except Exception as e:  # noqa: BLE001 - the compiled extensions the package's __init__ imports
        print(f"[mamba2] mamba_ssm/__init__.py failed ({type(e).__name__}: {e}); registering the package "
              "without it", flush=True)
        drop_modules("mamba_ssm")
        _module("mamba_ssm", __path__=[os.path.abspath(pkg_dir)], __file__=os.path.join(pkg_dir, "__init__.py"))
        init = f"skipped ({type(e).__name__}: {e})"
    mods = types.SimpleNamespace(
        mamba2=importlib.import_module("mamba_ssm.modules.mamba2"),
        ssd_minimal=importlib.import_module("mamba_ssm.modules.ssd_minimal"),
        norm=importlib.import_module("mamba_ssm.ops.triton.layernorm_gated"),
    )
    if mods.mamba2.causal_conv1d_fn is not None:
        print("[mamba2] note: causal_conv1d is installed; the GPU reference uses its kernels", flush=True)
    return mods, init


def import_fla(src):
    """flash-linear-attention's Mamba2 layer module and its rms_norm_ref, or (None, reason)."""
    if not os.path.isfile(os.path.join(src, "fla", "layers", "mamba2.py")):
        raise SystemExit(f"make_mamba2_fixtures: --fla-src {src!r} is not a flash-linear-attention checkout "
                         "(no fla/layers/mamba2.py)")
    sys.path.insert(0, os.path.abspath(src))
    try:
        layer = importlib.import_module("fla.layers.mamba2")
        norm = importlib.import_module("fla.modules.layernorm_gated")
        fla = types.SimpleNamespace(layer=layer, rms_norm_ref=norm.rms_norm_ref)
        # Importing is not enough: build a tiny layer and run it once in float64 on the CPU.
        tiny = dict(width=16, d_state=16, d_conv=2, expand=1, headdim=16, chunk_size=4)
        gen = torch.Generator().manual_seed(0)
        with Float64Steps():
            fla_forward(build_fla(fla, tiny, draw_params(tiny, gen)), torch.randn(1, 3, 16, dtype=torch.float64))
        return fla, None
    except Exception as e:  # noqa: BLE001 - any failure means: use mamba_ssm's pieces
        print(f"[mamba2] FLA does not import ({type(e).__name__}: {e}); the fixture uses mamba_ssm's pieces",
              flush=True)
        return None, f"{type(e).__name__}: {e}"


# ---- float64 steps ---------------------------------------------------------------------------------------

class Float64Steps:
    """While active, Tensor.float() returns a float64 tensor unchanged (the pure-PyTorch references call it
    on intermediates to upcast half precision; on float64 it would round to float32)."""

    def __enter__(self):
        self.saved = torch.Tensor.float
        saved = self.saved

        def float_keeping_f64(t, *args, **kwargs):
            return t if t.dtype == torch.float64 else saved(t, *args, **kwargs)

        torch.Tensor.float = float_keeping_f64
        return self

    def __exit__(self, *exc):
        torch.Tensor.float = self.saved
        return False


# ---- the evaluations ---------------------------------------------------------------------------------------

def build_mamba2(mods, cfg, params, device, dtype, mem_eff=False):
    m = mods.mamba2.Mamba2(
        d_model=cfg["width"], d_state=cfg["d_state"], d_conv=cfg["d_conv"], expand=cfg["expand"],
        headdim=cfg["headdim"], ngroups=1, rmsnorm=True, norm_before_gate=False, chunk_size=cfg["chunk_size"],
        use_mem_eff_path=mem_eff, layer_idx=0, device=device, dtype=dtype)
    m = m.to(device, dtype)  # Mamba2 makes D in float32 whatever `dtype` says (and so its float64 gradient)
    load_params(m, params, "mamba_ssm Mamba2")
    assert m.norm.eps == NORM_EPS and m.nheads == cfg["expand"] * cfg["width"] // cfg["headdim"]
    return m


def load_params(module, params, what):
    names = sorted(n for n, _ in module.named_parameters())
    if names != sorted(PARAM_NAMES):
        raise SystemExit(f"make_mamba2_fixtures: {what} has parameters {names}, expected {sorted(PARAM_NAMES)}")
    ref = module.state_dict()
    module.load_state_dict({k: v.to(ref[k].device, ref[k].dtype) for k, v in params.items()})


def with_grads(module, x, G, forward):
    """y = forward(module, x) and the gradients of sum(y * G) with respect to x and every parameter."""
    module.zero_grad()
    x = x.detach().clone().requires_grad_(True)
    y = forward(module, x)
    (y * G.to(y.device, y.dtype)).sum().backward()
    grads = {"x": x.grad.detach()}
    grads.update({n: p.grad.detach() for n, p in module.named_parameters()})
    return y.detach(), grads


def mamba_ssm_pieces_forward(mods, m, u):
    """Mamba2.forward's non-fused path (ngroups 1, no d_mlp), with its Triton scan replaced by the
    package's ssd_minimal_discrete and its Triton gated norm by rms_norm_ref."""
    Bsz, T, _ = u.shape
    di, N, H, P, Q = m.d_inner, m.d_state, m.nheads, m.headdim, m.chunk_size
    z, xBC, dt = torch.split(m.in_proj(u), [di, di + 2 * N, H], dim=-1)
    xBC = m.act(m.conv1d(xBC.transpose(1, 2)).transpose(1, 2)[:, :T])  # the causal part of the padded conv
    x, B, C = torch.split(xBC, [di, N, N], dim=-1)
    dt = F.softplus(dt + m.dt_bias)
    A = -torch.exp(m.A_log)
    X = x.reshape(Bsz, T, H, P)
    pad = (Q - T % Q) % Q  # ssd_minimal_discrete takes whole chunks; zeros after the end change nothing before it

    def padded(t):
        return F.pad(t, (0, 0) * (t.dim() - 2) + (0, pad))

    Y, _ = mods.ssd_minimal.ssd_minimal_discrete(
        padded(X * dt[..., None]), padded(A * dt),
        padded(B[:, :, None, :].expand(Bsz, T, H, N)), padded(C[:, :, None, :].expand(Bsz, T, H, N)), Q)
    y = (Y[:, :T] + X * m.D[:, None]).reshape(Bsz, T, di)
    y = mods.norm.rms_norm_ref(y, m.norm.weight, None, z=z, eps=m.norm.eps, group_size=di,
                               norm_before_gate=False, upcast=True)
    return m.out_proj(y)


def build_fla(fla, cfg, params):
    m = fla.layer.Mamba2(hidden_size=cfg["width"], state_size=cfg["d_state"], conv_kernel=cfg["d_conv"],
                         expand=cfg["expand"], head_dim=cfg["headdim"], n_groups=1, rmsnorm=True,
                         norm_before_gate=False, norm_eps=NORM_EPS, chunk_size=cfg["chunk_size"], use_bias=False,
                         use_conv_bias=True, layer_idx=0)
    m = m.double()
    load_params(m, params, "FLA Mamba2")
    # Its silu (ACT2FN) and RMSNormGated are Triton kernels (GPU only, float32 inside): the same formulas in
    # PyTorch, F.silu and FLA's own rms_norm_ref.
    m.act = F.silu
    norm = m.norm
    norm.forward = lambda x, z=None: fla.rms_norm_ref(x, norm.weight, norm.bias, z=z, eps=norm.eps,
                                                     group_size=norm.group_size,
                                                     norm_before_gate=norm.norm_before_gate, upcast=True)
    return m


def fla_forward(m, u):
    return m.torch_forward(u)[0]


def gpu_reference(mods, cfg, params, x, G, P, device):
    """The genuine layer on the GPU in float32: {path: (y, grads) or error}, and the decode outputs."""
    out = {}
    for mem_eff in (False, True):
        key = f"use_mem_eff_path={mem_eff}"
        try:
            m = build_mamba2(mods, cfg, params, device, torch.float32, mem_eff)
            out[key] = with_grads(m, x.to(device, torch.float32), G, lambda mod, u: mod(u))
        except Exception as e:  # noqa: BLE001 - the fused path needs causal_conv1d's compiled kernels
            if not mem_eff:
                raise
            print(f"[mamba2] {key} did not run ({type(e).__name__}: {e})", flush=True)
            out[key] = f"did not run: {type(e).__name__}: {e}"
    m = build_mamba2(mods, cfg, params, device, torch.float32, False)
    u = x.to(device, torch.float32)
    T = u.shape[1]
    with torch.no_grad():
        full = m(u)
        # The cached path: forward with inference_params (prefill), then one token per call (step()).
        ip = types.SimpleNamespace(key_value_memory_dict={}, seqlen_offset=0, max_seqlen=T, max_batch_size=u.shape[0])
        steps = [m(u[:, :P], inference_params=ip)]
        for t in range(P, T):
            ip.seqlen_offset = t
            steps.append(m(u[:, t:t + 1], inference_params=ip))
        prefill_decode = torch.cat(steps, dim=1)
        # step() alone from empty states, every token.
        conv_state, ssm_state = m.allocate_inference_cache(u.shape[0], T)
        stepped = torch.cat([m.step(u[:, t:t + 1], conv_state, ssm_state)[0] for t in range(T)], dim=1)
    out["decode"] = {"full": full.double().cpu(), "prefill_decode": prefill_decode.double().cpu(),
                     "step": stepped.double().cpu()}
    return out


# ---- one fixture ---------------------------------------------------------------------------------------

def make_fixture(mods, fla, out_dir, name, cfg, batch, T, P, seed, device):
    gen = torch.Generator().manual_seed(seed)
    params = draw_params(cfg, gen)
    x = torch.randn(batch, T, cfg["width"], generator=gen, dtype=torch.float64).to(torch.float32).double()
    G = torch.randn(batch, T, cfg["width"], generator=gen, dtype=torch.float64).to(torch.float32).double()

    # The float64 evaluations on the CPU.
    with Float64Steps():
        m64 = build_mamba2(mods, cfg, params, "cpu", torch.float64)
        evals = {"mamba_ssm": with_grads(m64, x, G, lambda mod, u: mamba_ssm_pieces_forward(mods, mod, u))}
        if fla is not None:
            evals["fla"] = with_grads(build_fla(fla, cfg, params), x, G, fla_forward)
    source = "fla" if "fla" in evals else "mamba_ssm"
    y, grads = evals[source]

    checks, limits = {}, {}

    def check(what, got, ref, limit):
        checks[what] = rel_err(got.detach().to("cpu", torch.float64), ref)
        limits[what] = limit

    if "fla" in evals:
        other_y, other_g = evals["mamba_ssm"]
        check("float64: mamba_ssm pieces vs FLA torch_forward, y", other_y, y, 1e-12)
        for n in grads:
            check(f"float64: mamba_ssm pieces vs FLA torch_forward, grad.{n}", other_g[n], grads[n], 1e-12)
        with torch.no_grad():  # FLA's code as it is, float32 steps kept: rounding, not another formula
            plain = fla_forward(build_fla(fla, cfg, params), x)
        check("FLA torch_forward with its float32 steps vs fixture, y", plain, y, 1e-5)

    if device is not None:
        ref = gpu_reference(mods, cfg, params, x, G, P, device)
        for path in ("use_mem_eff_path=False", "use_mem_eff_path=True"):
            if isinstance(ref[path], str):
                checks[f"GPU float32 Mamba2.forward ({path})"] = ref[path]
                continue
            gy, gg = ref[path]
            check(f"GPU float32 Mamba2.forward ({path}) vs fixture, y", gy, y, 1e-4)
            for n in grads:
                check(f"GPU float32 Mamba2.forward ({path}) vs fixture, grad.{n}", gg[n], grads[n], 1e-4)
        d = ref["decode"]
        check(f"GPU cached prefill {P} + step() decode vs GPU forward, y", d["prefill_decode"], d["full"], 1e-5)
        check("GPU step() from empty states vs GPU forward, y", d["step"], d["full"], 1e-5)
        check("GPU step() from empty states vs fixture, y", d["step"], y, 1e-4)

    for what, err in checks.items():
        print(f"  mamba2-{name}: {what}: {err if isinstance(err, str) else f'{err:.3e}'}", flush=True)
    failed = [w for w, e in checks.items() if not isinstance(e, str) and not e <= limits[w]]
    silent = [n for n, g in grads.items() if float(g.abs().max()) == 0.0]
    if failed or silent:
        raise SystemExit(f"make_mamba2_fixtures: mamba2-{name}: " +
                         "; ".join([f"{w} = {checks[w]:.3e} exceeds {limits[w]:g}" for w in failed] +
                                   [f"zero gradient for {silent}"] * bool(silent)) +
                         ("; a GPU error near 1e-3 is TF32: check that TRITON_F32_DEFAULT=ieee reached Triton "
                          "(a fresh TRITON_CACHE_DIR)" if any(w.startswith("GPU") for w in failed) else ""))

    d = os.path.join(out_dir, f"mamba2-{name}")
    os.makedirs(d, exist_ok=True)
    config = dict(cfg, norm_eps=NORM_EPS, batch=batch, seq_len=T)
    tmp = os.path.join(d, "config.json.tmp")
    with open(tmp, "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, os.path.join(d, "config.json"))
    write_safetensors(os.path.join(d, "params.safetensors"), [(n, params[n]) for n in PARAM_NAMES], "F32")
    write_safetensors(os.path.join(d, "reference.safetensors"),
                      [("x", x), ("G", G), ("y", y)] + [(f"grad.{n}", grads[n]) for n in ["x"] + PARAM_NAMES],
                      "F64")
    return {"seed": seed, "config": config, "decode_prefill": P, "fixture_from": source,
            "y_max_abs": float(y.abs().max()), "self_checks": checks}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mamba-src", required=True, help="a checkout of state-spaces/mamba (the directory "
                    "holding mamba_ssm/)")
    ap.add_argument("--fla-src", help="a checkout of flash-linear-attention (the directory holding fla/)")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)), help="where the fixtures go "
                    "(default: this script's directory, tests/reference)")
    ap.add_argument("--mamba-commit", default="unknown", help="the state-spaces/mamba commit of --mamba-src")
    ap.add_argument("--fla-commit", default="unknown", help="the flash-linear-attention commit of --fla-src")
    ap.add_argument("--cpu-only", action="store_true", help="skip the GPU reference (no CUDA needed)")
    ap.add_argument("--device", default="cuda", help="the GPU for the reference (default cuda)")
    args = ap.parse_args()

    device = None if args.cpu_only else torch.device(args.device)
    if device is not None and not torch.cuda.is_available():
        raise SystemExit("make_mamba2_fixtures: CUDA is not available; the GPU reference needs it "
                         "(or run with --cpu-only)")
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 products in float32 (the default, made explicit)
    torch.backends.cudnn.allow_tf32 = False        # (this one defaults to True for convolutions)
    stand_ins = install_stand_ins(args.cpu_only)
    mods, init = import_mamba_ssm(args.mamba_src)
    fla, fla_error = import_fla(args.fla_src) if args.fla_src else (None, "not given")

    manifest = {
        "about": "Mamba-2 layer fixtures: state-spaces/mamba's Mamba2 (ngroups 1, rmsnorm, norm_before_gate "
                 "False), float64 on the CPU" + (", not checked against the genuine Triton kernels (--cpu-only)"
                                                  if args.cpu_only else
                                                  ", checked against the genuine layer on the GPU in float32") +
                 ". Made by tests/reference/make_mamba2_fixtures.py; see README.md.",
        "mamba_commit": args.mamba_commit,
        "fla_commit": args.fla_commit if fla is not None else None,
        "fla": "used" if fla is not None else f"not used ({fla_error})",
        "mamba_ssm_init": init,
        "stand_ins": stand_ins,
        "torch": torch.__version__,
        "triton": getattr(sys.modules.get("triton"), "__version__", None),
        "TRITON_F32_DEFAULT": os.environ.get("TRITON_F32_DEFAULT"),
        "gpu": torch.cuda.get_device_name(device) if device is not None else None,
        "fixtures": {},
    }
    for name, cfg, batch, T, P, seed in FIXTURES:
        print(f"[mamba2] mamba2-{name} (seed {seed})", flush=True)
        manifest["fixtures"][f"mamba2-{name}"] = make_fixture(mods, fla, args.out, name, cfg, batch, T, P, seed,
                                                              device)
    path = os.path.join(args.out, "mamba2-manifest.json")
    with open(path + ".tmp", "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print(f"[mamba2] wrote {len(FIXTURES)} fixtures and {path}", flush=True)


if __name__ == "__main__":
    main()
