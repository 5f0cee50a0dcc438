#!/usr/bin/env python3
"""fuzz/make_seeds.py: writes the generated seed inputs of fuzz/corpus/ (the safetensors and
train_state files, the configs and texts). The lessons and state files are seeded from lessons/ as
they are. Run from the repository root after a format changes; the files are committed, so nothing
is generated at build or test time. Python's standard library only.

Seeds are small on purpose: libFuzzer mutates them, and a small valid file of each kind (every
dtype, metadata, a scalar, an empty tensor) gives it the structure to start from.
"""
import json
import os
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")

DTYPE_FORMAT = {"F32": "<f", "F64": "<d", "U8": "<B", "I64": "<q"}


def bf16(x):
    return struct.pack("<H", struct.unpack("<I", struct.pack("<f", x))[0] >> 16)


def safetensors(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, values). The writer's layout: metadata first, data packed
    in order, the header padded with spaces to a multiple of 8 bytes."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, values in tensors:
        blob = b"".join(bf16(v) if dtype == "BF16" else struct.pack(DTYPE_FORMAT[dtype], v) for v in values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + data


def model_config(**changes):
    with open(os.path.join(ROOT, "assets", "models", "tiny-brown", "config.json")) as f:
        cfg = json.load(f)
    cfg.update(changes)
    return cfg


def train_config(**changes):
    cfg = {"model": model_config(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                 num_attention_heads=2, max_position_embeddings=32),
           "data": "mqar", "data_dir": "data/brown", "steps": 20, "batch_size": 2, "seq_len": 32,
           "lr": 0.003, "warmup_fraction": 0.1, "end_lr": 1e-05, "weight_decay": 0.1, "clip_norm": 1.0,
           "seed": 7, "threads": 1, "checkpoint_every": 10, "eval_every": 0, "eval_windows": 4}
    cfg.update(changes)
    return cfg


def dumps(obj):
    return (json.dumps(obj, indent=2) + "\n").encode()


def write(target, name, content):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(content)


def main():
    # safetensors: every dtype, metadata, a scalar, an empty tensor; a bare file; two broken ones.
    write("fuzz_safetensors", "all-dtypes.safetensors", safetensors(
        [("model.embed_tokens.weight", "F32", [2, 3], [1.0, -2.5, 3.25, 0.0, 1e-3, -7.0]),
         ("optim.scale", "F64", [3], [0.1, -0.2, 1e300]),
         ("half", "BF16", [2, 2], [1.0, 0.5, -3.0, 65504.0]),
         ("tokens", "U8", [4], [104, 105, 33, 10]),
         ("positions", "I64", [2], [0, 1 << 40]),
         ("scalar", "F32", [], [42.0]),
         ("empty", "F32", [0, 4], [])],
        {"format": "pt", "tttlab_step": "17"}))
    write("fuzz_safetensors", "empty-header.safetensors", safetensors([]))
    write("fuzz_safetensors", "one-tensor.safetensors", safetensors([("w", "F32", [1], [1.0])]))
    f16_header = b'{"x":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}'
    write("fuzz_safetensors", "unsupported-dtype.safetensors",
          struct.pack("<Q", len(f16_header)) + f16_header + b"\0\x3c")
    write("fuzz_safetensors", "truncated.safetensors", safetensors([("w", "F64", [4], [1, 2, 3, 4])])[:-5])

    # config.json: the shipped model's, each layer kind, the Transformer backbone, the variants.
    write("fuzz_model_config", "tiny-brown.json", dumps(model_config()))
    write("fuzz_model_config", "ttt-mlp.json", dumps(model_config(ttt_layer_type="mlp", tttlab_seq_layer="ttt-mlp",
                                                                  ttt_base_lr=0.1)))
    write("fuzz_model_config", "attention-transformer.json", dumps(model_config(
        tttlab_seq_layer="softmax-attention", use_gate=False, share_qk=False, pre_conv=False)))
    write("fuzz_model_config", "linear-attention.json", dumps(model_config(tttlab_seq_layer="linear-attention")))
    write("fuzz_model_config", "variants.json", dumps(model_config(
        tttlab_inner_layer_norm=False, tttlab_inner_residual=False, tttlab_eta_token_index_learnable=False,
        tttlab_learnable_views=False, tttlab_ttt_rope=False, tttlab_ttt_post_norm=False,
        tttlab_ttt_ln_eps=1e-5, scan_checkpoint_group_size=2)))
    write("fuzz_model_config", "minimal.json", b"{}")

    # train_config.json: a small synthetic run, a text-file run, a bad value.
    write("fuzz_train_config", "mqar.json", dumps(train_config()))
    write("fuzz_train_config", "text-file.json", dumps(train_config(data="notes.txt", seq_len=64, steps=100)))
    write("fuzz_train_config", "model-only.json", dumps({"model": {}}))
    write("fuzz_train_config", "bad-steps.json", dumps(train_config(steps=0)))

    # train_state.safetensors: what Trainer::save writes, for two parameters; and a state without the
    # optimizer's metadata.
    state_meta = {"optim.type": "adamw", "optim.step": "10", "tttlab_step": "10", "sampler_seed": "7",
                  "sampler_next_batch": "10", "train_config": json.dumps(train_config(), indent=2) + "\n"}
    write("fuzz_train_state", "two-params.safetensors", safetensors(
        [("optim.m.model.embed_tokens.weight", "F32", [4], [0.1, -0.2, 0.3, 0.0]),
         ("optim.v.model.embed_tokens.weight", "F32", [4], [0.01, 0.04, 0.09, 0.0]),
         ("optim.m.lm_head.bias", "F32", [2], [1e-3, -1e-3]),
         ("optim.v.lm_head.bias", "F32", [2], [1e-6, 1e-6])], state_meta))
    write("fuzz_train_state", "no-params.safetensors", safetensors([], {"optim.type": "adamw", "optim.step": "0"}))
    write("fuzz_train_state", "f64-moments.safetensors", safetensors(
        [("optim.m.w", "F64", [1], [0.5]), ("optim.v.w", "F64", [1], [0.25])],
        {"optim.type": "adamw", "optim.step": "3"}))

    # A crash fuzz_train_state's entry point once had (tests/core/test_fuzz_regressions.cpp): a step
    # count of 2^63 - 1, which the first step after resuming overflowed.
    write("fuzz_train_state", "regression-step-max.safetensors", safetensors(
        [("optim.m.w", "F32", [1], [0.5]), ("optim.v.w", "F32", [1], [0.25])],
        {"optim.type": "adamw", "optim.step": str(2**63 - 1)}))

    # .tttlab state files and lessons: the shipped ones, plus the smallest valid file of each.
    for target in ("fuzz_state_file", "fuzz_lesson"):
        os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    for name in sorted(os.listdir(os.path.join(ROOT, "lessons"))):
        source = os.path.join(ROOT, "lessons", name)
        if name.endswith(".tttlab"):
            shutil.copyfile(source, os.path.join(CORPUS, "fuzz_state_file", name))
        elif name.endswith(".md") and name[:2].isdigit():
            shutil.copyfile(source, os.path.join(CORPUS, "fuzz_lesson", name))
    write("fuzz_state_file", "minimal.tttlab", b'{"format": "tttlab-state"}\n')
    write("fuzz_lesson", "minimal.md", b"""---
title: T
goal: G
duration: 5
scene: s.tttlab
---
# One

```predict
ask: Up or down?
measure: gain
choice: Up | > 0
choice: Down | <= 0
```

```predict
id: slide
ask: How much?
measure: gain
slider: -1 .. 1
tolerance: 0.1
experiment: other
```

```check
claim: It goes up.
measure: gain
expect: 0.5 +- 0.5
depends-on-device: yes
```

```question
ask: Why?
hint: Look.
answer: Because.
```

```experiment
id: other
scene: o.tttlab
```

Some *prose* with `code`, a [link](x.md) and a list:

1. one
   - nested
""")

    # The shape of a hang fuzz_lesson's entry point once had (tests/app/test_fuzz_regressions.cpp):
    # one block of many repeatable "choice:" lines; at this size it parses in milliseconds either way,
    # the regression test checks the 1 MiB case.
    write("fuzz_lesson", "regression-many-choices.md", b"---\ntitle: Many\ngoal: G\nduration: 5\nscene: s.tttlab\n---\n"
          b"```predict\nask: Which?\nmeasure: gain\n"
          + b"".join(b"choice: c%d | > %d\n" % (i, i) for i in range(500))
          + b"```\n```check\nclaim: C\nmeasure: gain\nexpect: > 0\n```\n")

    # Training text: plain ASCII, UTF-8 with a BOM, Latin-1, control bytes, a binary header.
    write("fuzz_text_file", "ascii.txt", b"The cat sat on the mat.\nThe dog did not.\n" * 4)
    write("fuzz_text_file", "utf8-bom.txt", b"\xef\xbb\xbf" + "Grüße, ℓ(W₀; xₜ) → 𝔼\n".encode() * 8)
    write("fuzz_text_file", "latin1.txt", "caf\xe9 na\xefve r\xe9sum\xe9\n".encode("latin-1") * 4)
    write("fuzz_text_file", "controls.txt", b"page one\f\tpage two\r\n\x01\x7f" + b"x" * 200)
    write("fuzz_text_file", "binary.bin", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))

    # A run directory with one file mutated (fuzz_run_dir.cpp): byte 0 picks the file, byte 1 bit 0
    # cuts it, then 5-byte edits (offset, XOR). One seed per file, with and without a cut.
    for k in range(6):
        for cut in (0, 1):
            write("fuzz_run_dir", "file%d-cut%d.bin" % (k, cut),
                  bytes([k, cut]) + struct.pack("<I", 40 + 97 * k) + b"\x01" + struct.pack("<I", 3) + b"\x20")

    # Lesson folders (fuzz_lesson_pack.cpp): each shipped lesson with its views, the views renamed
    # scene-1.tttlab, scene-2.tttlab, ... in the order the lesson names them.
    lessons = os.path.join(ROOT, "lessons")
    for name in sorted(os.listdir(lessons)):
        if not name.endswith(".md") or name == "README.md":
            continue
        text = open(os.path.join(lessons, name), encoding="utf-8").read()
        views = []
        for line in text.splitlines():
            if line.startswith("scene: "):
                views.append(line[len("scene: "):].strip())
        parts = [text]
        for i, view in enumerate(views, 1):
            parts[0] = parts[0].replace("scene: " + view, "scene: scene-%d.tttlab" % i, 1)
            path = os.path.join(lessons, view)
            parts.append(open(path, encoding="utf-8").read() if os.path.exists(path) else "")
        write("fuzz_lesson_pack", name, "\n%%%%\n".join(parts).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
