#!/usr/bin/env python3
"""Writes the hostile and broken files of docs/SECURITY.md into a directory (standard library only).

    python3 make_hostile_files.py SHIPPED_MODEL_DIR OUT_DIR

Each case is a checkpoint folder OUT_DIR/<case>/ (config.json + model.safetensors) or a file. The
random bit flips use a fixed seed (printed), so a failure names a reproducible file.
"""
import json, os, random, shutil, struct, sys

BITFLIP_SEED = 1212


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    return header, raw[8 + n:]


def write_safetensors(path, header, data):
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def clone(src, dst):
    os.makedirs(dst, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(src, name), os.path.join(dst, name))


def with_config(src, dst, **changes):
    clone(src, dst)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg.update(changes)
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=1)


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    huge = 1 << 30
    # Size bombs: a 1 KB config naming a huge model next to the real (small) weights.
    for field in ("conv_kernel", "num_hidden_layers", "mini_batch_size", "hidden_size",
                  "intermediate_size", "vocab_size", "max_position_embeddings"):
        with_config(src, os.path.join(out, "bomb_" + field), **{field: huge})
    with_config(src, os.path.join(out, "bomb_heads"), hidden_size=1 << 20, num_attention_heads=1 << 15)
    # Within the config bounds but not the weights': refused from the header alone.
    with_config(src, os.path.join(out, "mismatch_mini_batch_size"), mini_batch_size=60000)
    with_config(src, os.path.join(out, "mismatch_num_hidden_layers"), num_hidden_layers=4000)
    with_config(src, os.path.join(out, "mismatch_hidden_size"), hidden_size=65536)
    # Within the config bounds, but no weight depends on T: only the memory estimate can refuse it.
    with_config(src, os.path.join(out, "big_positions"), max_position_embeddings=1 << 20)
    # Library errors: a value of the wrong type, a value out of int range.
    with_config(src, os.path.join(out, "config_float_field"), hidden_size=128.5)
    with_config(src, os.path.join(out, "config_huge_integer"), hidden_size=10 ** 30)
    with_config(src, os.path.join(out, "config_long_string"), ttt_layer_type="x" * 100000)
    clone(src, os.path.join(out, "config_deep"))
    open(os.path.join(out, "config_deep", "config.json"), "w").write("[" * 100000 + "]" * 100000)

    header, data = read_safetensors(os.path.join(src, "model.safetensors"))
    meta = header.pop("__metadata__", {})
    # The rewritten files stand for files another tool wrote: no TTT Lab digest (which any rewrite
    # would break first) and no recorded config, so that each case reaches the check it is about.
    for key in ("tttlab_sha256", "tttlab_data_sha256", "tttlab_config"):
        meta.pop(key, None)
    names = [k for k in header]

    def rewrite(case, hdr, dat, cfg_changes=None):
        d = os.path.join(out, case)
        clone(src, d)
        if cfg_changes:
            with_config(src, d, **cfg_changes)
        full = dict(hdr)
        if meta:
            full = {"__metadata__": meta, **hdr}
        write_safetensors(os.path.join(d, "model.safetensors"), full, dat)

    # lm_head.weight: NaN-filled, wrong shape, missing.
    def tensor_bytes(name):
        b, e = header[name]["data_offsets"]
        return data[b:e]

    def rebuild(entries):
        """entries: list of (name, dtype, shape, bytes) -> header, data"""
        hdr, blob, off = {}, b"", 0
        for name, dtype, shape, b in entries:
            hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(b)]}
            blob += b
            off += len(b)
        return hdr, blob

    base = [(n, header[n]["dtype"], header[n]["shape"], tensor_bytes(n)) for n in sorted(names, key=lambda n: header[n]["data_offsets"][0])]
    has_head = "lm_head.weight" in header
    head_dtype = header["model.embed_tokens.weight"]["dtype"]
    esize = 2 if head_dtype == "BF16" else 4
    emb_shape = header["model.embed_tokens.weight"]["shape"]
    nan = (b"\xc0\x7f" if esize == 2 else b"\x00\x00\xc0\x7f") * (emb_shape[0] * emb_shape[1])
    entries = [e for e in base if e[0] != "lm_head.weight"]
    rewrite("head_nan", *rebuild(entries + [("lm_head.weight", head_dtype, emb_shape, nan)]))
    emb = tensor_bytes("model.embed_tokens.weight")
    row = esize * emb_shape[1]
    other = emb[row:] + emb[:row]  # the embedding's rows rotated by one: finite, the right shape, not equal
    rewrite("head_differs", *rebuild(entries + [("lm_head.weight", head_dtype, emb_shape, other)]))
    small = tensor_bytes("model.embed_tokens.weight")[: esize * emb_shape[1] * 2]
    rewrite("head_wrong_shape", *rebuild(entries + [("lm_head.weight", head_dtype, [2, emb_shape[1]], small)]))
    rewrite("head_absent", *rebuild(entries))
    # A tensor of the model NaN-filled (not lm_head).
    print("shipped model has lm_head.weight:", has_head)

    # Random bit flips in the tensor data, fixed seed: each case flips one bit.
    rng = random.Random(BITFLIP_SEED)
    print("bit flips: seed", BITFLIP_SEED)
    raw = bytearray(open(os.path.join(src, "model.safetensors"), "rb").read())
    n = struct.unpack("<Q", raw[:8])[0]
    for i in range(8):
        pos = 8 + n + rng.randrange(len(raw) - 8 - n)
        bit = rng.randrange(8)
        flipped = bytearray(raw)
        flipped[pos] ^= 1 << bit
        d = os.path.join(out, "bitflip_%d" % i)
        clone(src, d)
        open(os.path.join(d, "model.safetensors"), "wb").write(bytes(flipped))
        print("  bitflip_%d: byte %d bit %d" % (i, pos, bit))

    # Special files.
    fifo = os.path.join(out, "fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    d = os.path.join(out, "fifo_model")
    clone(src, d)
    os.remove(os.path.join(d, "model.safetensors"))
    os.mkfifo(os.path.join(d, "model.safetensors"))
    d = os.path.join(out, "devzero_model")
    clone(src, d)
    os.remove(os.path.join(d, "model.safetensors"))
    os.symlink("/dev/zero", os.path.join(d, "model.safetensors"))

    # A state file nested 100,000 deep (200 KB) in the version field.
    depth = 100000
    open(os.path.join(out, "deep.tttlab"), "w").write(
        '{"format": "tttlab-state", "version": ' + "[" * depth + "]" * depth + "}")
    open(os.path.join(out, "long_version.tttlab"), "w").write(
        '{"format": "tttlab-state", "version": "' + "v" * 1000000 + '"}')
    open(os.path.join(out, "bomb_model.tttlab"), "w").write(json.dumps({
        "format": "tttlab-state", "version": 1, "active_panel": "inner_stepper",
        "panels": {"inner_stepper": {"model": "file:" + os.path.join(out, "bomb_hidden_size")}}}))


if __name__ == "__main__":
    main()
