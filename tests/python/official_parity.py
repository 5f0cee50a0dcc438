#!/usr/bin/env python3
"""The shipped models against the official PyTorch model: tttlab's per-position loss equals TTTForCausalLM's.

For each shipped model under assets/models/ that the official ttt-lm-pytorch model can express (TTT-Linear
or TTT-MLP, Transformer or Mamba backbone, every tttlab_* option at the official model's value), this
script scores the same N windows of a text on both sides and compares the loss at each position of the
window, averaged over the windows (`loss_by_position` of `tttlab eval --json` and of Model.eval):

  ours         tttlab.load(model).eval(text, seq_len=T)["loss_by_position"]: the CPU implementation in
               float32 (tttlab/train/text_score.hpp). When `import tttlab` fails (the module is built for
               another Python), `tttlab eval --device cpu --json` instead (--exe), the same function, whose
               curve tests/python/test_tttlab.py checks equal to Model.eval's bit for bit. The output says
               which path was used.
  official64   the official TTTForCausalLM built from the model's config.json and model.safetensors
               (official names), in float64, with the few steps the official code keeps in float32 made
               float64 too (tests/reference/make_fixtures.py: Float64Steps), logits not cast: the exact
               function of the stored weights, to float64 rounding.
  official32   the same model as the official code runs it: float32, its own float32 steps, logits cast
               to float32 (TTTForCausalLM.forward), TF32 off.

Each side's window w reads bytes w·T … w·T + T − 1 and is scored on bytes w·T + 1 … w·T + T, from a fresh
state; the cross-entropy of each position is averaged over the N windows in float64.

TOLERANCE, on max |ours − official64|: 2·10⁻⁴·max|logit| nats per model (max|logit| of the official
float64 run over the windows; --tol NATS overrides it). Ours computes in float32, so it differs from the
float64 function by float32 rounding (~6e-8 per operation) grown through the blocks and the recurrence of
the inner state; the project's float32 bound on the logits is 1e-4 of their largest entry
(tests/core/test_reference.cpp, against the same official model in float64). A position's cross-entropy
moves by at most 2·max|Δlogit| (its gradient in the logits, softmax − one-hot, has an L1 norm of at most
2), hence the bound. A convention that differs (a transposed weight, a RoPE pairing, an η indexing) moves
logits by O(1), far beyond it. The official model's own float32 run (official32 against official64) is
printed as the scale of float32 rounding on this model: ours should land at about that distance.

Usage:
  python3 tests/python/official_parity.py PATH/TO/ttt.py [--models tiny-brown long-ttt-mlp-m ...]
  python3 tests/python/official_parity.py --dry-run      # our side only: no torch, no ttt.py
Options: --text FILE (default data/brown/val.txt where it exists, else README.md; bytes above 127 are
dropped so that any cut is valid UTF-8), --windows N (4), --tol NATS (default: the bound above), --exe
PATH (build/tttlab),
--device auto|cpu|cuda (where the official model runs), --stand-in auto|always|never (make_fixtures.py's).
Exit status: 0 every compared model within its bound, 1 one beyond it, 2 nothing could be compared or bad
usage. The official file is fetched, never committed (tests/reference/README.md).
"""

import argparse
import importlib.util
import inspect
import json
import math
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "assets" / "models"

# The tttlab_* options of config.json and the value at which the official model computes the same
# function. The others (learnable_w0, learnable_views, eta_token_index_learnable) decide what training
# updates, not the forward. An option not listed here is one the official model cannot express.
OFFICIAL_VALUES = {
    "tttlab_inner_layer_norm": True,
    "tttlab_inner_residual": True,
    "tttlab_inner_bias": True,
    "tttlab_eta_learned_gate": True,
    "tttlab_eta_token_index": True,
    "tttlab_ttt_rope": True,
    "tttlab_ttt_post_norm": True,
    "tttlab_ttt_ln_eps": 1e-6,  # ttt.py's ln_fwd and ln_fused_l2_bwd default
}
TRAINING_ONLY = {"tttlab_learnable_w0", "tttlab_learnable_views", "tttlab_eta_token_index_learnable"}
SEQ_LAYERS = {"ttt-linear": "linear", "ttt-mlp": "mlp"}


def shipped_models():
    """Every checkpoint directory under assets/models/ (a folder with config.json, or one level down)."""
    found = []
    for d in sorted(MODELS.iterdir()):
        if (d / "config.json").is_file():
            found.append(d)
        elif d.is_dir():
            found += sorted(c for c in d.iterdir() if (c / "config.json").is_file())
    return found


def why_not_official(config):
    """None when the official model computes this config's function, else the reason it cannot."""
    seq = config.get("tttlab_seq_layer", "ttt-linear")
    if seq not in SEQ_LAYERS:
        return f"its sequence layer is {seq}; the official model has TTT-Linear and TTT-MLP only"
    if config.get("ttt_layer_type", "linear") != SEQ_LAYERS[seq]:
        return f"ttt_layer_type {config.get('ttt_layer_type')} disagrees with tttlab_seq_layer {seq}"
    for key, value in config.items():
        if not key.startswith("tttlab_") or key == "tttlab_seq_layer" or key in TRAINING_ONLY:
            continue
        if key not in OFFICIAL_VALUES:
            return f"{key} has no counterpart in the official model"
        if value != OFFICIAL_VALUES[key]:
            return f"{key} = {value} (the official model computes with {OFFICIAL_VALUES[key]})"
    if not (config.get("share_qk") == config.get("pre_conv") == config.get("use_gate")):
        return "share_qk, pre_conv and use_gate differ: neither backbone"
    return None


def window_text(path, windows, seq_len):
    """The first windows·T + 1 bytes of `path` below 128: N full windows of T and no tail window."""
    data = bytes(b for b in Path(path).read_bytes() if b < 128)
    need = windows * seq_len + 1
    if len(data) < need:
        raise SystemExit(f"official_parity: {path} has {len(data)} ASCII bytes, fewer than the "
                         f"{need} of {windows} windows of {seq_len}")
    return data[:need]


# ---- our side -------------------------------------------------------------------------------------------

def our_side(exe):
    """(name of the path used, function (model dir, text bytes, T) -> eval's result as a dict)."""
    try:
        import tttlab  # noqa: PLC0415 - the module is optional: the CLI is the fallback
    except ImportError as e:
        if not Path(exe).is_file():
            raise SystemExit(f"official_parity: `import tttlab` failed ({e}) and the CLI {exe} does not "
                             "exist: build it, set PYTHONPATH=build/python or pass --exe")

        def by_cli(model_dir, text, seq_len):
            with tempfile.NamedTemporaryFile(suffix=".txt") as f:
                f.write(text)
                f.flush()
                # --device cpu: the CPU implementation, as Model.eval (auto would take a GPU here).
                r = subprocess.run([str(exe), "eval", "--checkpoint", str(model_dir), "--data", f.name,
                                    "--device", "cpu", "--seq-len", str(seq_len), "--json"],
                                   capture_output=True, text=True, check=False)
            if r.returncode != 0:
                raise RuntimeError(f"{exe} eval failed: {r.stderr.strip()}")
            j = json.loads(r.stdout)
            return {"loss_by_position": j["loss_by_position"], "full_windows": j["full_windows"],
                    "tail_targets": j["tail_targets"], "loss": j["val_loss"]}

        return f"the CLI ({exe} eval --device cpu --json; `import tttlab` failed: {e})", by_cli

    def by_module(model_dir, text, seq_len):
        r = tttlab.load(str(model_dir)).eval(text, seq_len=seq_len)
        return {k: r[k] for k in ("loss_by_position", "full_windows", "tail_targets", "loss")}

    return f"the module ({tttlab.__file__})", by_module


# ---- the official side ----------------------------------------------------------------------------------

def import_make_fixtures():
    """tests/reference/make_fixtures.py as a module: its loader of ttt.py and its float64 steps."""
    path = REPO / "tests" / "reference" / "make_fixtures.py"
    spec = importlib.util.spec_from_file_location("tttlab_make_fixtures", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_safetensors(path, torch):
    """{name: float64 tensor} of a safetensors file (F32, F64, BF16, F16): exact widenings."""
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        blob = bytearray(raw[base + a:base + b])
        dt = h["dtype"]
        t = torch.frombuffer(blob, dtype={"F32": torch.float32, "F64": torch.float64, "BF16": torch.bfloat16,
                                          "F16": torch.float16}[dt])
        out[name] = t.to(torch.float64).reshape(h["shape"])
    return out


def official_config(mod, config):
    """TTTConfig from config.json's official keys (the tttlab_* and metadata keys left out)."""
    known = set(inspect.signature(mod.TTTConfig.__init__).parameters) - {"self", "kwargs"}
    keys = {k: v for k, v in config.items() if k in known}
    keys["use_cache"] = False
    return mod.TTTConfig(**keys)


def official_losses(mf, mod, torch, model_dir, config, text, seq_len, device, float64):
    """([T] the official model's cross-entropy at each position, mean over the windows, in float64;
    max |logit|)."""
    import torch.nn.functional as F  # noqa: PLC0415, N812
    dtype = torch.float64 if float64 else torch.float32
    weights = read_safetensors(model_dir / "model.safetensors", torch)
    cfg = official_config(mod, config)
    saved_default = torch.get_default_dtype()
    steps = mf.Float64Steps(mod) if float64 else None
    try:
        torch.set_default_dtype(dtype)
        if steps:
            steps.__enter__()
        model = mod.TTTForCausalLM(cfg)
        model.train(False)
        state = model.state_dict()
        # The tied head may be left out of the file (our loader takes either); nothing else may.
        tied_head = "lm_head.weight" if cfg.tie_word_embeddings else None
        missing = [k for k in state if k not in weights and k != tied_head]
        if missing:
            raise RuntimeError(f"model.safetensors lacks {missing[:4]}{' ...' if len(missing) > 4 else ''}")
        extra = [k for k in weights if k not in state]
        if extra:
            raise RuntimeError(f"model.safetensors has tensors the official model does not: {extra[:4]}")
        model.load_state_dict({k: v.to(dtype) for k, v in weights.items()}, strict=False)
        if cfg.tie_word_embeddings and model.lm_head.weight is not model.model.embed_tokens.weight:
            raise RuntimeError("the official LM head is not tied to the embedding")
        model.to(device)
        windows = (len(text) - 1) // seq_len
        ids = torch.tensor(list(text[:windows * seq_len]), dtype=torch.long, device=device)
        ids = ids.reshape(windows, seq_len)
        targets = torch.tensor(list(text[1:windows * seq_len + 1]), dtype=torch.long, device=device)
        targets = targets.reshape(windows, seq_len)
        with torch.no_grad():
            if float64:  # the head in float64, without TTTForCausalLM.forward's float32 cast
                out = model.model(input_ids=ids, use_cache=False, return_dict=True)
                logits = model.lm_head(out.last_hidden_state)
            else:  # as the official code runs: its forward, logits cast to float32
                logits = model(input_ids=ids, use_cache=False, return_dict=True).logits
            ce = F.cross_entropy(logits.double().reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                 reduction="none").reshape(windows, seq_len)
        return ce.mean(dim=0).cpu().tolist(), float(logits.abs().max())
    finally:
        if steps:
            steps.__exit__(None, None, None)
        torch.set_default_dtype(saved_default)


# ---- the comparison -------------------------------------------------------------------------------------

def max_abs(a, b):
    if len(a) != len(b):
        raise RuntimeError(f"curves of {len(a)} and {len(b)} positions")
    return max(abs(x - y) for x, y in zip(a, b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ttt_py", nargs="?", help="the official ttt-lm-pytorch ttt.py (not needed with --dry-run)")
    ap.add_argument("--models", nargs="*", help="folder names under assets/models/ (default: all)")
    ap.add_argument("--text", help="the text scored (default: data/brown/val.txt, else README.md)")
    ap.add_argument("--windows", type=int, default=4, help="windows of the model's T scored (default 4)")
    ap.add_argument("--tol", type=float, default=None,
                    help="bound on max |ours - official64|, nats (default: 2e-4 max|logit| per model)")
    ap.add_argument("--exe", default=str(REPO / "build" / "tttlab"), help="the CLI, when `import tttlab` fails")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                    help="where the official model runs (auto: a GPU when torch sees one)")
    ap.add_argument("--stand-in", choices=["auto", "always", "never"], default="auto",
                    help="make_fixtures.py's transformers stand-in: when the package fails, always, never")
    ap.add_argument("--dry-run", action="store_true", help="our side only: no torch and no ttt.py needed")
    args = ap.parse_args()
    if not args.dry_run and not args.ttt_py:
        ap.error("the path of the official ttt.py is required (or --dry-run)")
    if args.windows < 1:
        ap.error("--windows must be at least 1")
    text_path = Path(args.text) if args.text else (
        REPO / "data" / "brown" / "val.txt" if (REPO / "data" / "brown" / "val.txt").is_file()
        else REPO / "README.md")

    chosen = shipped_models()
    if args.models:
        by_name = {str(d.relative_to(MODELS)): d for d in chosen}
        unknown = [m for m in args.models if m not in by_name]
        if unknown:
            ap.error(f"not under assets/models/: {unknown} (there: {sorted(by_name)})")
        chosen = [by_name[m] for m in args.models]

    how, ours = our_side(args.exe)
    print(f"[official_parity] our side: {how}", flush=True)
    bound = f"{args.tol:g} nats" if args.tol is not None else "2e-4 max|logit| nats"
    print(f"[official_parity] text: {text_path} (bytes below 128), {args.windows} windows per model; "
          f"tolerance {bound} on max |ours - official64|", flush=True)

    torch = mf = mod = None
    device = "cpu"
    if not args.dry_run:
        import torch  # noqa: PLC0415
        mf = import_make_fixtures()
        mod, used = mf.load_official(args.ttt_py, args.stand_in)
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 is float32: no tensor-core rounding
        torch.backends.cudnn.allow_tf32 = False
        device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
        print(f"[official_parity] official: {args.ttt_py} (transformers: {used}), torch {torch.__version__}, "
              f"on {device}", flush=True)

    compared, failed = 0, []
    for d in chosen:
        name = str(d.relative_to(MODELS))
        config = json.loads((d / "config.json").read_text())
        reason = why_not_official(config)
        if reason:
            print(f"  {name:26s} skipped: {reason}", flush=True)
            continue
        T = int(config["max_position_embeddings"])
        text = window_text(text_path, args.windows, T)
        r = ours(d, text, T)
        lbp = [float(x) for x in r["loss_by_position"]]
        if r["full_windows"] != args.windows or r["tail_targets"] != 0 or len(lbp) != T:
            raise SystemExit(f"official_parity: {name}: eval scored {r['full_windows']} windows and "
                             f"{r['tail_targets']} tail targets, not {args.windows} windows of {T}")
        if not all(math.isfinite(x) for x in lbp):
            raise SystemExit(f"official_parity: {name}: our loss by position is not finite")
        mean = sum(lbp) / T
        if args.dry_run:
            print(f"  {name:26s} T {T:5d}: ours mean {mean:.6f} nats (loss {r['loss']:.6f}); "
                  "official not run (--dry-run)", flush=True)
            continue
        o64, max_logit = official_losses(mf, mod, torch, d, config, text, T, device, float64=True)
        o32, _ = official_losses(mf, mod, torch, d, config, text, T, device, float64=False)
        e64, e32, scale = max_abs(lbp, o64), max_abs(lbp, o32), max_abs(o32, o64)
        tol = args.tol if args.tol is not None else 2e-4 * max_logit
        ok = e64 <= tol
        compared += 1
        if not ok:
            failed.append(name)
        print(f"  {name:26s} T {T:5d}: mean loss ours {mean:.6f}, official64 {sum(o64) / T:.6f} nats; "
              f"max |ours - official64| {e64:.3e}, |ours - official32| {e32:.3e}, "
              f"|official32 - official64| {scale:.3e}; bound {tol:.2e} (max|logit| {max_logit:.2f})  "
              f"{'ok' if ok else 'BEYOND THE BOUND'}",
              flush=True)

    if args.dry_run:
        print("[official_parity] dry run: our side computed, nothing compared", flush=True)
        return 0
    if compared == 0:
        print("[official_parity] no model the official code can express was chosen", flush=True)
        return 2
    if failed:
        print(f"[official_parity] FAILED: {failed} beyond the bound", flush=True)
        return 1
    print(f"[official_parity] {compared} models within the bound of the official model", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
