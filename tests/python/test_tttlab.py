"""The Python module `tttlab` (python/, docs/PYTHON.md) against the command line it shares its code with.

Run by ctest (`ctest -L python`): PYTHONPATH holds the build's python/ folder, TTTLAB_EXE names the
built `tttlab`, TTTLAB_REPO the source tree. The module and the CLI run the same functions on the CPU,
so every comparison is exact: arrays equal bit for bit, error messages equal.
"""

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tttlab

REPO = Path(os.environ.get("TTTLAB_REPO", Path(__file__).resolve().parents[2]))
EXE = os.environ.get("TTTLAB_EXE", str(REPO / "build" / "tttlab"))
MODEL = REPO / "assets" / "models" / "tiny-brown"

# 600-odd bytes: two full windows of the model's T = 256 and a tail window, so eval covers both paths.
TEXT = (
    "The jury further said in term-end presentments that the City Executive Committee, which had over-all "
    "charge of the election, deserves the praise and thanks of the City of Atlanta for the manner in which "
    "the election was conducted. The September-October term jury had been charged by Fulton Superior Court "
    "Judge Durwood Pye to investigate reports of possible irregularities in the hard-fought primary which "
    "was won by Mayor-nominate Ivan Allen Jr. Only a relative handful of such reports was received, the "
    "jury said, considering the widespread interest in the election, the number of voters and the size of "
    "this city. The jury said it did find that many of the city's registration and election laws are "
    "outmoded or inadequate and often ambiguous."
)


def cli(*args, ok=True):
    r = subprocess.run([EXE, *map(str, args)], capture_output=True, timeout=120)
    if ok:
        assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r


def cli_error(*args):
    """The CLI's error line for a failing command ("tttlab: error: MESSAGE" or the message alone)."""
    r = cli(*args, ok=False)
    assert r.returncode != 0
    return r.stderr.decode(errors="replace")


def read_safetensors(path):
    """A safetensors file as {name: array}: an 8-byte little-endian header length, a JSON header, the data."""
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n :]
    dtypes = {"F32": "<f4", "F64": "<f8", "U8": "u1", "I64": "<i8"}
    out = {}
    for name, t in header.items():
        lo, hi = t["data_offsets"]
        out[name] = np.frombuffer(data[lo:hi], dtype=dtypes[t["dtype"]]).reshape(t["shape"])
    return out


@pytest.fixture(scope="module")
def model():
    assert MODEL.is_dir(), f"the shipped model is missing: {MODEL}"
    return tttlab.load(str(MODEL))


def test_load_and_config(model):
    c = model.config
    assert c["hidden_size"] == 128 and c["num_hidden_layers"] == 4 and c["num_attention_heads"] == 4
    assert c["mini_batch_size"] == 16 and c["max_position_embeddings"] == 256
    assert c["tttlab_seq_layer"] == "ttt-linear"
    assert Path(model.path) == MODEL
    assert model.parameters > 0
    r = repr(model)
    assert "ttt-linear" in r and "d_model 128" in r and "4 layers" in r and f"{model.parameters} parameters" in r


@pytest.mark.parametrize("seq_len", [None, 100])
def test_eval_equals_cli_json(model, tmp_path, seq_len):
    f = tmp_path / "text.txt"
    f.write_text(TEXT)
    args = ["eval", "--checkpoint", MODEL, "--data", f, "--device", "cpu", "--json"]
    if seq_len:
        args += ["--seq-len", seq_len]
    want = json.loads(cli(*args).stdout)
    got = model.eval(TEXT, seq_len=seq_len)
    assert got["loss_by_position"].dtype == np.float64
    assert got["loss_by_position"].shape == (want["seq_len"],)
    assert np.array_equal(got["loss_by_position"], np.array(want["loss_by_position"], dtype=np.float64))
    assert got["loss"] == want["val_loss"] and got["bpb"] == want["val_bpb"]
    assert got["accuracy"] == want["val_accuracy"]
    for k in ("bytes", "targets", "full_windows", "tail_targets", "seq_len"):
        assert got[k] == want[k], k
    assert got["full_windows"] >= 2 and got["tail_targets"] > 0  # both of score_text's paths were taken


def test_eval_bytes_and_per_byte(model):
    a = model.eval(TEXT.encode(), per_byte=True)
    assert a["per_byte"].dtype == np.float32 and a["per_byte"].shape == (len(TEXT) - 1,)
    # The mean of the per-byte losses is the loss (in double, over float32 terms: 1e-6 relative).
    assert abs(a["per_byte"].astype(np.float64).mean() - a["loss"]) < 1e-6 * a["loss"]
    b = model.eval(TEXT)
    assert a["loss"] == b["loss"] and np.array_equal(a["loss_by_position"], b["loss_by_position"])
    short = model.eval("A short text.")
    assert short["seq_len"] == 12 and "shorter than one window" in short["note"]


@pytest.mark.parametrize(
    "py_kwargs,cli_args",
    [
        ({}, []),
        ({"block": [1, 3], "head": 2, "every": "mini-batch", "dtype": "float64"},
         ["--block", "1,3", "--head", "2", "--every", "mini-batch", "--dtype", "f64"]),
        ({"block": 0, "every": 7}, ["--block", "0", "--stride", "7"]),
    ],
)
def test_states_equal_cli_file(model, tmp_path, py_kwargs, cli_args):
    text = TEXT[:150]
    out = tmp_path / "states.safetensors"
    cli("states", "--checkpoint", MODEL, "--text", text, "--out", out, *cli_args)
    want = read_safetensors(out)
    got = model.states(text, **py_kwargs)
    assert sorted(got) == sorted(want)
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype and g.shape == w.shape, name
        assert np.array_equal(g, w), name
    assert got["tokens"].tobytes() == text.encode()


def test_states_losses_are_the_inner_losses(model):
    s = model.states(TEXT[:64], block=0, head=0, dtype="float64")
    before, after = s["block0.head0.loss_before"], s["block0.head0.loss_after"]
    assert before.shape == (64,) and s["block0.head0.W1"].shape == (64, 32, 32)
    # A gradient step on token t's own loss lowers it: docs/MATH.md's inner loop, on average.
    assert after.mean() < before.mean()


@pytest.mark.parametrize("temperature,top_k,seed", [(0.0, 0, 0), (0.8, 20, 7), (1.3, 0, 12345)])
def test_generate_equals_cli(model, temperature, top_k, seed):
    want = cli("generate", "--checkpoint", MODEL, "--prompt", "The ", "--tokens", 80, "--temperature", temperature,
               "--top-k", top_k, "--seed", seed, "--device", "cpu").stdout
    got = model.generate(b"The ", tokens=80, temperature=temperature, top_k=top_k, seed=seed)
    assert isinstance(got, bytes) and got == want
    as_str = model.generate("The ", tokens=80, temperature=temperature, top_k=top_k, seed=seed)
    assert as_str == want.decode("utf-8", errors="replace")


def test_load_errors_match_cli(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(FileNotFoundError) as e:
        tttlab.load(str(missing))
    assert "does not exist" in str(e.value)
    assert str(e.value) in cli_error("eval", "--checkpoint", missing, "--data", MODEL / "config.json")

    corrupt = tmp_path / "corrupt"
    shutil.copytree(MODEL, corrupt)
    weights = corrupt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # the header, then the data cut short
    with pytest.raises(RuntimeError) as e:
        tttlab.load(str(corrupt))
    assert "model.safetensors" in str(e.value)
    assert str(e.value) in cli_error("generate", "--checkpoint", corrupt, "--tokens", 1)

    with pytest.raises(RuntimeError) as e:
        tttlab.load(str(tmp_path))
    assert "holds no checkpoint" in str(e.value)


def test_bad_arguments(model):
    with pytest.raises(TypeError, match="text must be str or bytes, got int"):
        model.eval(123)
    with pytest.raises(TypeError, match="text must be str or bytes, got list"):
        model.states(["a"])
    with pytest.raises(TypeError, match="prompt must be str or bytes"):
        model.generate(None)
    with pytest.raises(ValueError, match=r"seq_len must be in \[2, 1048576\], got 0"):
        model.eval(TEXT, seq_len=0)
    with pytest.raises(ValueError, match="the text has fewer than 2 bytes: nothing to score"):
        model.eval("x")
    with pytest.raises(ValueError, match="binary"):
        model.eval(bytes(range(256)) * 4)
    with pytest.raises(ValueError, match=r"temperature must be a finite number in \[0, 100\], got nan"):
        model.generate("The ", temperature=float("nan"))
    with pytest.raises(ValueError, match=r"top_k must be in \[0, 256\], got 300"):
        model.generate("The ", top_k=300)
    with pytest.raises(ValueError, match="prompt must not be empty"):
        model.generate("")
    with pytest.raises(ValueError, match="the stride must be at least 1, got 0"):
        model.states(TEXT, every=0)
    with pytest.raises(ValueError, match="above max_tokens 10"):
        model.states(TEXT, max_tokens=10)
    with pytest.raises(ValueError, match="the text is empty"):
        model.states("")


def test_states_errors_match_cli(model, tmp_path):
    with pytest.raises(ValueError) as e:
        model.states("abc", block=9)
    msg = str(e.value)
    assert msg == "block 9 does not exist: the model has 4 blocks (0 … 3)"
    assert msg in cli_error("states", "--checkpoint", MODEL, "--text", "abc", "--block", 9, "--out",
                            tmp_path / "x.safetensors")


def test_docs_example_runs(capsys, monkeypatch):
    """docs/PYTHON.md's example, run as written from the repository's root."""
    doc = (REPO / "docs" / "PYTHON.md").read_text()
    blocks = doc.split("```python\n")[1:]
    assert blocks, "docs/PYTHON.md has no Python example"
    monkeypatch.chdir(REPO)
    for b in blocks:
        exec(compile(b.split("```")[0], "docs/PYTHON.md", "exec"), {})
    out = capsys.readouterr().out
    assert "loss_initial" in out and "loss_after" in out


# ---- tttlab.inner_loop: one TTT-Linear head on the caller's arrays ----

INNER_SEED = 20261130


def inner_inputs(T=40, d=8, dtype=np.float64):
    rng = np.random.default_rng(INNER_SEED)
    a = lambda *s: rng.standard_normal(s)
    return dict(Q=a(T, d), K=a(T, d), V=a(T, d), lam=0.05 + 0.1 * rng.random(T), W1=0.3 * a(d, d), b1=0.1 * a(d),
                ln_weight=1 + 0.1 * a(d), ln_bias=0.1 * a(d))


def ln_l2_loss(W, b, k, v, gamma, beta, eps=1e-6):
    """The inner loss with the LayerNorm and the residual (docs/MATH.md §3): ½‖LN(k W + b) − (v − k)‖²."""
    z = k @ W + b
    mu = z.mean()
    y = (z - mu) / np.sqrt(((z - mu) ** 2).mean() + eps) * gamma + beta
    return 0.5 * ((y - (v - k)) ** 2).sum()


def test_inner_loop_primal_states_give_its_losses_and_equal_the_dual_form():
    print(f"seed {INNER_SEED}")
    x = inner_inputs()
    p = tttlab.inner_loop(**x, mini_batch=8)
    T, d = x["Q"].shape
    assert p["out"].shape == (T, d) and p["W1"].shape == (T, d, d) and p["b1"].shape == (T, d)
    # Each reported loss is the NumPy loss of the reported state (fp64; 1e-12 relative covers the
    # different order of a few d-long sums).
    for t in range(T):
        k, v, g, b = x["K"][t], x["V"][t], x["ln_weight"], x["ln_bias"]
        after = ln_l2_loss(p["W1"][t], p["b1"][t], k, v, g, b)
        before = ln_l2_loss(*((p["W1"][t - 1], p["b1"][t - 1]) if t else (x["W1"], x["b1"])), k, v, g, b)
        initial = ln_l2_loss(x["W1"], x["b1"], k, v, g, b)
        assert after == pytest.approx(p["loss_after"][t], rel=1e-12)
        assert before == pytest.approx(p["loss_before"][t], rel=1e-12)
        assert initial == pytest.approx(p["loss_initial"][t], rel=1e-12)
    # The state changes only through the tokens' updates: mini-batch ends commit it (b = 8).
    assert not np.array_equal(p["W1"][7], x["W1"])
    dual = tttlab.inner_loop(**x, mini_batch=8, form="dual")
    assert set(dual) == {"out"}
    # The two forms agree to fp64 rounding (the core's own tests hold them to ~1e-15).
    np.testing.assert_allclose(dual["out"], p["out"], rtol=0, atol=1e-12)


def test_inner_loop_float32_follows_float64():
    x64 = inner_inputs()
    x32 = {k: v.astype(np.float32) for k, v in x64.items()}
    a, b = tttlab.inner_loop(**x64, mini_batch=8), tttlab.inner_loop(**x32, mini_batch=8)
    assert b["out"].dtype == np.float32 and a["out"].dtype == np.float64
    # fp32 rounding (2^-24 relative) over 40 tokens of d = 8 products: far inside 1e-4.
    np.testing.assert_allclose(b["out"], a["out"], rtol=0, atol=1e-4)
    np.testing.assert_allclose(b["W1"], a["W1"], rtol=0, atol=1e-4)


def test_inner_loop_refuses_bad_arrays():
    x = inner_inputs()
    with pytest.raises(ValueError, match=r"K must be a 2-D array of shape \[40, 8\]"):
        tttlab.inner_loop(**{**x, "K": x["K"][:5]})
    with pytest.raises(ValueError, match="lam must be a 1-D array of length 40"):
        tttlab.inner_loop(**{**x, "lam": x["lam"][:, None]})
    with pytest.raises(ValueError, match=r"tau must be a 1-D array of length 4"):
        tttlab.inner_loop(**x, mini_batch=4, tau=np.ones(3))
    with pytest.raises(ValueError, match="must be finite"):
        tttlab.inner_loop(**{**x, "V": np.full_like(x["V"], np.nan)})
    with pytest.raises(ValueError, match="form must be 'primal' or 'dual'"):
        tttlab.inner_loop(**x, form="chunked")
    with pytest.raises(ValueError, match=r"mini_batch must be in \[1, 1048576\], got 0"):
        tttlab.inner_loop(**x, mini_batch=0)


def test_head_inputs_give_the_states_through_inner_loop(model):
    """model.head_inputs' arrays are the stepper's: inner_loop's primal form on them is model.states."""
    text = TEXT[:200]
    for block, head in ((0, 0), (3, 1)):
        x = model.head_inputs(text, block=block, head=head)
        T, d = len(text), 32
        assert x["Q"].shape == (T, d) and x["lam"].shape == (T,) and x["W1"].shape == (d, d)
        assert x["tau"].shape == (16,) and x["mini_batch"] == 16 and x["layer_norm"] and x["residual"]
        assert x["Q"].dtype == np.float64 and x["ln_eps"] == model.config["tttlab_ttt_ln_eps"]
        s = model.states(text, block=block, head=head, dtype="float64")
        p = tttlab.inner_loop(**x)
        h = f"block{block}.head{head}."
        # The same function on the same double inputs, in the same order: equal bit for bit.
        for name in ("W1", "b1", "loss_initial", "loss_before", "loss_after"):
            assert np.array_equal(p[name], s[h + name]), name
        assert np.array_equal(x["W1"], s[h + "W1_initial"]) and np.array_equal(x["lam"], s[h + "lambda"])


def test_head_inputs_refuse_bad_arguments(model):
    with pytest.raises(ValueError, match="block 4 does not exist: the model has 4 blocks"):
        model.head_inputs("abc", block=4, head=0)
    with pytest.raises(ValueError, match="head -1 does not exist: the model has 4 heads"):
        model.head_inputs("abc", block=0, head=-1)
    with pytest.raises(ValueError, match="text must not be empty"):
        model.head_inputs(b"", block=0, head=0)
    with pytest.raises(ValueError, match="the text has 3 bytes, above max_tokens 2"):
        model.head_inputs("abc", block=0, head=0, max_tokens=2)
    with pytest.raises(TypeError, match="text must be str or bytes"):
        model.head_inputs(3, block=0, head=0)


def test_inner_loop_ln_eps():
    x = inner_inputs()
    a = tttlab.inner_loop(**x, mini_batch=8)
    b = tttlab.inner_loop(**x, mini_batch=8, ln_eps=1e-6)
    c = tttlab.inner_loop(**x, mini_batch=8, ln_eps=0.5)
    assert np.array_equal(a["out"], b["out"]) and not np.allclose(a["out"], c["out"])
    # The reported loss follows the epsilon (ln_l2_loss above, with eps = 0.5).
    k, v = x["K"][0], x["V"][0]
    want = ln_l2_loss(x["W1"], x["b1"], k, v, x["ln_weight"], x["ln_bias"], eps=0.5)
    assert c["loss_initial"][0] == pytest.approx(want, rel=1e-12)
    with pytest.raises(ValueError, match=r"ln_eps must be in \(0, 1\], got 0"):
        tttlab.inner_loop(**x, ln_eps=0.0)


def test_official_parity_script_runs_our_side(tmp_path):
    # tests/python/official_parity.py compares with the official PyTorch model where torch is (docs/PYTHON.md,
    # "The official model"); its dry run is our side alone: the windows cut, eval's curve, the skips.
    f = tmp_path / "text.txt"
    f.write_text(TEXT)
    r = subprocess.run([sys.executable, str(REPO / "tests" / "python" / "official_parity.py"), "--dry-run",
                        "--models", "tiny-brown", "long-mamba2-t", "--windows", "2", "--text", str(f)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "our side: the module" in r.stdout
    assert "long-mamba2-t" in r.stdout and "skipped: its sequence layer is mamba2" in r.stdout
    line = next(x for x in r.stdout.splitlines() if x.strip().startswith("tiny-brown"))
    # Two windows of T = 256 from the text's first 513 bytes: eval of those bytes, as Model.eval gives it.
    want = tttlab.load(str(MODEL)).eval(TEXT.encode()[:513], seq_len=256)
    assert want["full_windows"] == 2 and want["tail_targets"] == 0
    assert f"ours mean {sum(want['loss_by_position'].tolist()) / 256:.6f}" in line  # the script's sum
