#!/usr/bin/env python3
"""Make the cross-implementation fixtures of tests/reference (docs/MATH.md §10, oracle 12).

Runs the OFFICIAL ttt-lm-pytorch model (its file ttt.py, whose path is the first argument; it is never
copied into this repository) on four tiny seeded configurations - TTT-Linear and TTT-MLP, each on the
Transformer backbone (share_qk = pre_conv = use_gate = False) and on the Mamba-style backbone (all
True) - in float64, and writes what it computes:

  <out>/<fixture>/config.json          the official TTTConfig keys (our ModelConfig::from_json reads them)
  <out>/<fixture>/model.safetensors    the weights, official state_dict layout and names, F32, without the
                                       tied copy lm_head.weight (= model.embed_tokens.weight; our loader
                                       takes either). Every weight is a float32 value, so our float loader
                                       reads exactly what the float64 run used.
  <out>/<fixture>/reference.safetensors  F64:
      input_ids        [B, T]        the input bytes (exact small integers)
      logits           [B, T, V]     TTTForCausalLM's logits (computed in float64, see PRECISION below)
      loss             []            mean cross-entropy of logits[:, :-1] against input_ids[:, 1:]
      hidden.{i}       [B, T, D]     output of block i (output_hidden_states)
      mixer_in.{i}     [B, T, D]     the input of block i's TTT layer (after pre-conv and seq_norm)
      mixer_out.{i}    [B, T, D]     the output of block i's TTT layer (after o_proj)
      grad.{name}      (param shape) d loss / d parameter, for every parameter (official names and layout;
                                     the tied embedding's gradient includes the head's share)
      decode.logits    [B, S, V]     cached decoding: a prefill of the first P = T - S tokens (P a multiple
                                     of the mini-batch size, as TTTCache requires), then the last S input
                                     tokens fed one at a time with use_cache=True; the logits of each step
  <out>/manifest.json                  what was run: the source commit (given with --commit), torch version,
                                       seeds, shapes, and the self-checks below.

PRECISION. The official code keeps a few float32 steps even in a float64 model: RMSNorm normalises in
float32, RotaryEmbedding computes its angles in float32, the token-index buffer 1/i is made in float32,
the gelu derivative of the TTT-MLP inner loop uses 8-digit constants, and TTTForCausalLM casts the logits
to float32. For a float64 fixture this script runs the same formulas with those steps in float64 (the
classes and functions are replaced at run time, in memory, by float64 versions written here) and builds the
model with float64 as the default dtype (so TTTCache's conv buffers are float64 too). The manifest records
how far the unmodified official code (model.double(), float32 steps kept, logits cast) lands from the
fixture: 1.1e-7 to 1.5e-7 relative (float32 rounding), which shows the replacements change precision, not math.

If the `transformers` package is missing (or fails to import ttt.py or build its model), a minimal stand-in of the few names
ttt.py imports is installed first (see install_transformers_stand_in); nothing of it affects the numbers.

Usage: python3 make_fixtures.py PATH/TO/ttt.py OUT_DIR [--commit SHA] [--stand-in auto|always|never]
Needs only torch (no numpy, no safetensors package).
"""

import argparse
import array
import dataclasses
import importlib.util
import json
import logging
import math
import os
import struct
import sys
import types

import torch
import torch.nn.functional as F

# ---- the fixtures ----------------------------------------------------------------------------------------

BATCH = 2
SEQ_LEN = 11        # not a multiple of the mini-batch: 2 full mini-batches and a remainder of 3
PREFILL = 4         # a multiple of the mini-batch; 7 decode steps follow, across the commit at token 7
MINI_BATCH = 4

COMMON = dict(
    vocab_size=256,
    hidden_size=32,
    intermediate_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,   # head dim 16: the smallest the GPU kernels take
    mini_batch_size=MINI_BATCH,
    max_position_embeddings=64,
    conv_kernel=4,
    rope_theta=10000.0,
    rms_norm_eps=1e-6,
    initializer_range=0.02,
    scan_checkpoint_group_size=0,
    tie_word_embeddings=True,
    hidden_act="silu",
    pretraining_tp=1,
    use_cache=False,
    pad_token_id=None,
    bos_token_id=None,
    eos_token_id=None,
)

FIXTURES = [
    # name, ttt_layer_type, mamba backbone, ttt_base_lr, seed
    ("ttt-linear-t", "linear", False, 1.0, 1101),
    ("ttt-linear-m", "linear", True, 1.0, 1102),
    ("ttt-mlp-t", "mlp", False, 0.5, 1103),
    ("ttt-mlp-m", "mlp", True, 0.5, 1104),
]


# ---- a stand-in for the few transformers names ttt.py imports -------------------------------------------

def install_transformers_stand_in():
    """Registers modules named like the transformers package, holding only what ttt.py uses: a config
    base class that stores keyword arguments, a module base class with post_init (init + weight tying),
    an output base class indexable like a tuple, the activation table, a logger and a feature probe."""

    class PretrainedConfig:
        def __init__(self, pad_token_id=None, bos_token_id=None, eos_token_id=None,
                     tie_word_embeddings=True, **kwargs):
            self.pad_token_id = pad_token_id
            self.bos_token_id = bos_token_id
            self.eos_token_id = eos_token_id
            self.tie_word_embeddings = tie_word_embeddings
            self.output_hidden_states = kwargs.pop("output_hidden_states", False)
            self.use_return_dict = kwargs.pop("return_dict", True)
            for key, value in kwargs.items():
                setattr(self, key, value)

    class PreTrainedModel(torch.nn.Module):
        def __init__(self, config, *args, **kwargs):
            super().__init__()
            self.config = config

        @property
        def device(self):
            return next(self.parameters()).device

        def post_init(self):
            self.apply(self._init_weights)
            if getattr(self.config, "tie_word_embeddings", False) and hasattr(self, "lm_head"):
                self.lm_head.weight = self.get_input_embeddings().weight

    class ModelOutput:
        # Subclasses are dataclasses; positional access skips the fields that are None.
        def to_tuple(self):
            return tuple(getattr(self, f.name) for f in dataclasses.fields(self)
                         if getattr(self, f.name) is not None)

        def __getitem__(self, key):
            if isinstance(key, str):
                return getattr(self, key)
            return self.to_tuple()[key]

        def get(self, key, default=None):
            return getattr(self, key, default)

    class Logger:
        def __init__(self, name):
            self._log = logging.getLogger(name)
            self._seen = set()

        def info(self, *a, **k):
            self._log.info(*a, **k)

        def warning(self, *a, **k):
            self._log.warning(*a, **k)

        def warning_once(self, msg, *a, **k):
            if msg not in self._seen:
                self._seen.add(msg)
                self._log.warning(msg, *a, **k)

    def module(name, **names):
        m = types.ModuleType(name)
        m.__dict__.update(names)
        sys.modules[name] = m
        return m

    root = module("transformers", PretrainedConfig=PretrainedConfig)
    root.activations = module("transformers.activations", ACT2FN={"silu": torch.nn.SiLU()})
    root.modeling_outputs = module("transformers.modeling_outputs",
                                   BaseModelOutputWithPast=ModelOutput, CausalLMOutputWithPast=ModelOutput)
    root.modeling_utils = module("transformers.modeling_utils", PreTrainedModel=PreTrainedModel)
    log_mod = module("transformers.utils.logging", get_logger=Logger)
    imp_mod = module("transformers.utils.import_utils", is_causal_conv1d_available=lambda: False)
    root.utils = module("transformers.utils", ModelOutput=ModelOutput, logging=log_mod, import_utils=imp_mod)


def load_official(path, stand_in):
    def load():
        spec = importlib.util.spec_from_file_location("ttt_official", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def load_and_build():
        # Importing is not enough: some transformers versions import ttt.py but refuse to build its model
        # (e.g. 5.x expects _tied_weights_keys as a dict). Build a tiny one to find out.
        mod = load()
        tiny = mod.TTTConfig(vocab_size=8, hidden_size=4, intermediate_size=4, num_hidden_layers=1,
                             num_attention_heads=2, mini_batch_size=2)
        m = mod.TTTForCausalLM(tiny)
        if m.lm_head.weight is not m.model.embed_tokens.weight:
            raise RuntimeError("the LM head is not tied to the embedding")
        return mod

    used = "transformers"
    if stand_in == "always":
        install_transformers_stand_in()
        used = "stand-in"
        mod = load_and_build()
    else:
        try:
            mod = load_and_build()
        except Exception as e:  # noqa: BLE001 - any failure of the real package means: use the stand-in
            if stand_in == "never":
                raise
            print(f"[make_fixtures] ttt.py with the transformers package failed ({type(e).__name__}: {e}); "
                  "using the stand-in", flush=True)
            for name in [n for n in sys.modules if n == "transformers" or n.startswith("transformers.")]:
                del sys.modules[name]
            install_transformers_stand_in()
            used = "stand-in"
            mod = load()
    # The CUDA conv kernels would take over on GPUs; the fixtures use the plain PyTorch path.
    mod.causal_conv1d_fn = None
    mod.causal_conv1d_update = None
    return mod, used


# ---- float64 versions of the official code's float32 steps (see PRECISION) ------------------------------

class Float64Steps:
    """Swaps, while active, the official RMSNorm.forward, RotaryEmbedding.forward and gelu_bwd for
    versions that compute the same formulas in the input dtype."""

    def __init__(self, mod):
        self.mod = mod
        self.saved = None

    @staticmethod
    def rms_norm_forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))

    @staticmethod
    def rotary_forward(self, x, position_ids):
        exponents = torch.arange(0, self.dim, 2, dtype=torch.float64, device=x.device) / self.dim
        inv_freq = 1.0 / (float(self.base) ** exponents)
        angles = position_ids.to(torch.float64)[:, :, None] * inv_freq[None, None, :]
        emb = torch.cat((angles, angles), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    @staticmethod
    def gelu_bwd(x):
        c = math.sqrt(2.0 / math.pi)
        a = 0.044715
        t = torch.tanh(c * x * (1 + a * x * x))
        return 0.5 * x * ((1 - t * t) * (c + 3 * a * c * x * x)) + 0.5 * (1 + t)

    def __enter__(self):
        m = self.mod
        self.saved = (m.RMSNorm.forward, m.RotaryEmbedding.forward, m.gelu_bwd)
        m.RMSNorm.forward = Float64Steps.rms_norm_forward
        m.RotaryEmbedding.forward = Float64Steps.rotary_forward
        m.gelu_bwd = Float64Steps.gelu_bwd
        return self

    def __exit__(self, *exc):
        m = self.mod
        m.RMSNorm.forward, m.RotaryEmbedding.forward, m.gelu_bwd = self.saved
        return False


# ---- weights --------------------------------------------------------------------------------------------

def seeded_weights(model, gen):
    """Every parameter drawn afresh at a scale where its path matters: unit-scale activations through
    the projections, norms' gains near 1 and biases near 0 but not at them, learnable_token_idx offsets
    small enough that no τ_i = 1/i + δ_i reaches the clamp at 0. Rounded to float32 values."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            n = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            leaf = name.split(".")[-1]
            if name.endswith("embed_tokens.weight"):
                v = n
            elif leaf in ("ttt_norm_weight",) or (leaf == "weight" and "norm" in name):
                v = 1.0 + 0.1 * n
            elif leaf in ("ttt_norm_bias",) or (leaf == "bias" and "norm" in name):
                v = 0.1 * n
            elif name.endswith("_proj.weight"):
                v = n / math.sqrt(p.shape[1])
            elif leaf == "weight" and ("conv" in name):
                v = n / math.sqrt(p.shape[-1])
            elif leaf == "bias" and ("conv" in name):
                v = 0.1 * n
            elif leaf == "learnable_ttt_lr_weight":
                v = n / math.sqrt(p.shape[-1])
            elif leaf == "learnable_ttt_lr_bias":
                v = 0.3 * n
            elif leaf == "learnable_token_idx":
                v = 0.05 * n
            elif leaf in ("W1", "W2"):
                v = n / math.sqrt(p.shape[1])
            elif leaf in ("b1", "b2"):
                v = 0.1 * n
            else:
                raise SystemExit(f"make_fixtures: no initialisation rule for parameter '{name}'")
            p.copy_(v.float().double())


# ---- safetensors (written here so that only torch is needed) ----------------------------------------------

def write_safetensors(path, tensors, dtype):
    """tensors: list of (name, torch tensor). dtype "F32" or "F64"; little-endian, row-major, packed."""
    assert sys.byteorder == "little"
    code = {"F32": "f", "F64": "d"}[dtype]
    header, blobs, offset = {}, [], 0
    for name, t in tensors:
        values = t.detach().to("cpu", torch.float64).contiguous().reshape(-1).tolist()
        if dtype == "F32":
            for v in values:  # the weights are float32 values by construction: storing them is exact
                if struct.unpack("<f", struct.pack("<f", v))[0] != v:
                    raise SystemExit(f"make_fixtures: tensor '{name}' is not exactly representable in F32")
        blob = array.array(code, values).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)


# ---- one fixture ----------------------------------------------------------------------------------------

def rel_err(a, b):
    """max |a − b| / max |b|"""
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def make_fixture(mod, out_dir, name, layer_type, mamba, base_lr, seed):
    cfg_keys = dict(COMMON, ttt_layer_type=layer_type, ttt_base_lr=base_lr,
                    share_qk=mamba, pre_conv=mamba, use_gate=mamba)
    config = mod.TTTConfig(**cfg_keys)
    T, B, P = SEQ_LEN, BATCH, PREFILL
    S = T - P
    V = config.vocab_size

    gen = torch.Generator().manual_seed(seed)
    torch.set_default_dtype(torch.float64)
    with Float64Steps(mod):
        model = mod.TTTForCausalLM(config)
    model.train(False)
    assert model.lm_head.weight is model.model.embed_tokens.weight, "the LM head must be tied"
    seeded_weights(model, gen)
    # The token-index buffer 1/i, made in float64 (the default dtype) by the constructor; checked here.
    for layer in model.model.layers:
        ref = 1.0 / torch.arange(1, MINI_BATCH + 1, dtype=torch.float64)
        assert layer.seq_modeling_block.token_idx.dtype == torch.float64
        assert torch.equal(layer.seq_modeling_block.token_idx, ref)
    ids = torch.randint(0, V, (B, T), generator=gen)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    # Record each TTT layer's input and output.
    mixer_in, mixer_out = {}, {}
    for i, layer in enumerate(model.model.layers):
        block = layer.seq_modeling_block
        original = block.forward

        def recording(*args, _i=i, _orig=original, **kwargs):
            x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            y = _orig(*args, **kwargs)
            mixer_in.setdefault(_i, x.detach().clone())
            mixer_out.setdefault(_i, y.detach().clone())
            return y

        block.forward = recording

    with Float64Steps(mod):
        # Forward and backward, float64 throughout (TTTForCausalLM's head without its float32 cast).
        out = model.model(input_ids=ids, output_hidden_states=True, use_cache=False, return_dict=True)
        logits = model.lm_head(out.last_hidden_state)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
        model.zero_grad()
        loss.backward()
        grads = [(n, p.grad.detach().clone()) for n, p in model.named_parameters()]
        hidden = [h.detach().clone() for h in out.hidden_states[:-1]]
        logits = logits.detach()
        for layer in model.model.layers:  # stop recording
            del layer.seq_modeling_block.forward

        with torch.no_grad():
            # TTTForCausalLM.forward itself (logits cast to float32): the same numbers.
            full = model(input_ids=ids, labels=ids, use_cache=False, return_dict=True)
            lm_forward_err = rel_err(full.logits.double(), logits)
            lm_loss_err = abs(full.loss.item() - loss.item()) / loss.item()

            # Cached decoding: prefill P tokens, then one token per call.
            pre = model.model(input_ids=ids[:, :P], use_cache=True, return_dict=True)
            cache = pre.cache_params
            prefill_logits = model.lm_head(pre.last_hidden_state)
            steps = []
            for s in range(S):
                o = model.model(input_ids=ids[:, P + s:P + s + 1], cache_params=cache, use_cache=True,
                                return_dict=True)
                steps.append(model.lm_head(o.last_hidden_state))
            decode = torch.cat(steps, dim=1)

    # The unmodified official code on the same weights (model.double(), its float32 steps kept).
    torch.set_default_dtype(torch.float32)
    plain = mod.TTTForCausalLM(config)
    plain.load_state_dict({k: v.float() for k, v in state.items()})
    plain = plain.double()
    plain.train(False)
    with torch.no_grad():
        plain_logits = plain(input_ids=ids, use_cache=False, return_dict=True).logits.double()
    torch.set_default_dtype(torch.float64)

    checks = {
        "TTTForCausalLM.forward logits (float32 cast) vs fixture, rel": lm_forward_err,
        "TTTForCausalLM.forward loss (float32) vs fixture, rel": lm_loss_err,
        "unmodified official code (float32 steps) vs fixture logits, rel": rel_err(plain_logits, logits),
        "cached prefill logits vs full forward, rel": rel_err(prefill_logits, logits[:, :P]),
        "cached decode logits vs full forward, rel": rel_err(decode, logits[:, P:]),
    }
    for what, err in checks.items():
        limit = 1e-12 if "cached" in what else 1e-5
        print(f"  {name}: {what}: {err:.3e}", flush=True)
        if not err <= limit:
            raise SystemExit(f"make_fixtures: {name}: {what} = {err:.3e} exceeds {limit:g}")
    silent = [n for n, g in grads if float(g.abs().max()) == 0.0]
    if silent:
        raise SystemExit(f"make_fixtures: {name}: zero gradient for {silent}")

    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(cfg_keys, architectures=["TTTForCausalLM"], model_type="ttt"), f, indent=2, sort_keys=True)
        f.write("\n")
    write_safetensors(os.path.join(d, "model.safetensors"),
                      [(k, v) for k, v in state.items() if k != "lm_head.weight"], "F32")
    ref = [("input_ids", ids.double()), ("logits", logits), ("loss", loss.detach().reshape(()))]
    for i in range(config.num_hidden_layers):
        ref += [(f"hidden.{i}", hidden[i]), (f"mixer_in.{i}", mixer_in[i]), (f"mixer_out.{i}", mixer_out[i])]
    ref += [(f"grad.{n}", g) for n, g in grads]
    ref += [("decode.logits", decode)]
    write_safetensors(os.path.join(d, "reference.safetensors"), ref, "F64")
    return {
        "seed": seed, "batch": B, "seq_len": T, "prefill": P, "decode_steps": S,
        "ttt_layer_type": layer_type, "backbone": "mamba" if mamba else "transformer",
        "ttt_base_lr": base_lr, "loss": loss.item(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "self_checks": checks,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ttt_py", help="path of the official ttt-lm-pytorch ttt.py")
    ap.add_argument("out_dir", help="where the fixtures go (e.g. tests/reference)")
    ap.add_argument("--commit", default="unknown", help="the ttt-lm-pytorch commit ttt.py comes from")
    ap.add_argument("--stand-in", choices=["auto", "always", "never"], default="auto",
                    help="use the transformers stand-in: when the real package fails (auto), always, never")
    args = ap.parse_args()

    torch.use_deterministic_algorithms(True)
    mod, used = load_official(args.ttt_py, args.stand_in)
    os.makedirs(args.out_dir, exist_ok=True)
    manifest = {
        "about": "Outputs of the official ttt-lm-pytorch TTTForCausalLM on seeded tiny models, float64 "
                 "(docs/MATH.md §10, oracle 12). Made by tests/reference/make_fixtures.py; see README.md.",
        "ttt_lm_pytorch_commit": args.commit,
        "torch": torch.__version__,
        "transformers": used if used == "stand-in" else sys.modules["transformers"].__version__,
        "fixtures": {},
    }
    for name, layer_type, mamba, base_lr, seed in FIXTURES:
        print(f"[make_fixtures] {name} (seed {seed})", flush=True)
        manifest["fixtures"][name] = make_fixture(mod, args.out_dir, name, layer_type, mamba, base_lr, seed)
    with open(os.path.join(args.out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(f"[make_fixtures] wrote {len(FIXTURES)} fixtures to {args.out_dir}", flush=True)


if __name__ == "__main__":
    main()
