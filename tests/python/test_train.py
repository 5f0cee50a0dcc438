"""tttlab.train against `tttlab train --device cpu` (docs/PYTHON.md): the same options give the same run bit
for bit, and a run stopped from Python (Ctrl-C, a raising progress callback) leaves a run directory that
loads and resumes as the command line's own Ctrl-C does.

Runs are a few steps of the tiny preset on 2 × 32-byte batches of a 20 kB text, one thread (results are
deterministic per thread count), so each takes well under a second.
"""

import _thread
import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

import tttlab

REPO = Path(os.environ.get("TTTLAB_REPO", Path(__file__).resolve().parents[2]))
EXE = os.environ.get("TTTLAB_EXE", str(REPO / "build" / "tttlab"))
SEED = 7
OPTIONS = dict(steps=4, batch=2, seq_len=32, threads=1, seed=SEED, eval_windows=8)


def cli_flags(options):
    return [x for k, v in options.items() for x in (f"--{k.replace('_', '-')}", str(v))]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    """20 kB of prose-like bytes made from the seed: the last 5% (1 kB) validates."""
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    words = ["the", "jury", "said", "of", "election", "city", "and", "a", "court", "in", "was", "report"]
    text = " ".join(rng.choice(words, size=4000)) + "\n"
    path = tmp_path_factory.mktemp("data") / "text.txt"
    path.write_text(text[:20000])
    return path


def step_records(run_dir):
    lines = [json.loads(x) for x in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    return [r for r in lines if "loss" in r], [r for r in lines if "val_loss" in r]


def test_train_equals_cli_bit_for_bit(text_file, tmp_path):
    calls = []
    r = tttlab.train(out=tmp_path / "py", data=text_file, **OPTIONS,
                     progress=lambda step, loss, info: calls.append((step, loss, dict(info))))
    subprocess.run([EXE, "train", "--device", "cpu", "--out", tmp_path / "cli", "--data", text_file,
                    *cli_flags(OPTIONS)], check=True, capture_output=True, timeout=120)
    steps, evals = step_records(tmp_path / "cli")
    # The CLI's metrics.jsonl holds its doubles in round-trip precision, so == is bit for bit.
    assert list(r["step"]) == [1, 2, 3, 4]
    assert list(r["loss"]) == [s["loss"] for s in steps]
    assert list(r["grad_norm"]) == [s["grad_norm"] for s in steps]
    assert list(r["lr"]) == [s["lr"] for s in steps]
    assert not r["skipped"].any() and r["events"] == []
    assert list(r["eval_step"]) == [4] and list(r["eval_loss"]) == [e["val_loss"] for e in evals]
    assert list(r["val_loss_by_position"]) == evals[-1]["val_loss_by_position"]
    assert r["loss"].dtype == np.float64 and r["val_loss_by_position"].shape == (32,)
    # The Python run's own files are the CLI's, timings aside.
    py_steps, py_evals = step_records(tmp_path / "py")
    strip = lambda recs: [{k: v for k, v in x.items() if k not in ("tokens_per_s", "elapsed_s")} for x in recs]
    assert strip(py_steps) == strip(steps) and py_evals == evals
    assert Path(r["run_dir"]) == tmp_path / "py" and Path(r["checkpoint"]) == tmp_path / "py" / "step-0000004"
    assert r["train_config"]["seq_len"] == 32 and r["train_config"]["model"]["tttlab_seq_layer"] == "ttt-linear"
    # The callback saw every step, with the step's numbers.
    assert [c[0] for c in calls] == [1, 2, 3, 4] and [c[1] for c in calls] == list(r["loss"])
    assert calls[0][2]["steps"] == 4 and calls[0][2]["lr"] == r["lr"][0]


class Stop(Exception):
    pass


def test_a_raising_callback_stops_at_a_valid_resumable_checkpoint(text_file, tmp_path):
    options = {**OPTIONS, "steps": 6}
    whole = tttlab.train(out=tmp_path / "whole", data=text_file, **options)

    def progress(step, loss, info):
        if step == 2:
            raise Stop("enough")

    with pytest.raises(Stop, match="enough"):
        tttlab.train(out=tmp_path / "cut", data=text_file, **options, progress=progress)
    # Stopped before step 3 with the checkpoint of step 2, metrics up to it: what the CLI's Ctrl-C leaves.
    assert (tmp_path / "cut" / "latest").read_text().strip() == "step-0000002"
    steps, _ = step_records(tmp_path / "cut")
    assert [s["step"] for s in steps] == [1, 2]
    tttlab.load(str(tmp_path / "cut"))  # the checkpoint loads, with its checks
    # The CLI resumes it and continues the same loss curve exactly.
    subprocess.run([EXE, "train", "--device", "cpu", "--resume", tmp_path / "cut"], check=True,
                   capture_output=True, timeout=120)
    steps, _ = step_records(tmp_path / "cut")
    assert [s["loss"] for s in steps] == list(whole["loss"])


def interrupted_run(run_dir, text_file, **kw):
    with pytest.raises(KeyboardInterrupt):
        tttlab.train(out=run_dir, data=text_file, **{**OPTIONS, "steps": 2000, "batch": 1}, **kw)
    latest = (run_dir / "latest").read_text().strip()
    steps, _ = step_records(run_dir)
    # The checkpoint is of the last step recorded (step 0 on a machine so slow that the interrupt
    # came before the first step), and the run stopped long before its end.
    done = steps[-1]["step"] if steps else 0
    assert latest == f"step-{done:07d}" and done < 2000
    assert [s["step"] for s in steps] == list(range(1, done + 1))
    tttlab.load(str(run_dir))


def test_ctrl_c_between_steps_stops_cleanly(text_file, tmp_path):
    # Without a callback the only Python code during the run is the check between steps, so the
    # interrupt is seen there (2000 steps take far longer than the timer).
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        interrupted_run(tmp_path / "run", text_file)
    finally:
        timer.cancel()


def test_sigint_from_the_callback_stops_cleanly(text_file, tmp_path):
    def progress(step, loss, info):
        if step == 3:
            os.kill(os.getpid(), signal.SIGINT)

    interrupted_run(tmp_path / "run", text_file, progress=progress)
    assert (tmp_path / "run" / "latest").read_text().strip() == "step-0000003"


def test_train_refuses_bad_options_as_the_cli_does(text_file, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=r"^steps must be in \[1, 1000000000\], got 0$"):
        tttlab.train(out=out, data=text_file, steps=0)
    with pytest.raises(ValueError, match=r"^lr must be in \[1e-09, 10\], got nan$"):
        tttlab.train(out=out, data=text_file, lr=float("nan"))
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*64 - 1\], got -1"):
        tttlab.train(out=out, data=text_file, seed=-1)
    with pytest.raises(TypeError, match="batch must be an int, got float"):
        tttlab.train(out=out, data=text_file, batch=2.5)
    with pytest.raises(TypeError, match="progress must be callable"):
        tttlab.train(out=out, data=text_file, progress=3)
    # Messages of the compute engine: the CLI prints the same line.
    with pytest.raises(ValueError) as e:
        tttlab.train(out=out, data=text_file, heads=3)
    r = subprocess.run([EXE, "train", "--device", "cpu", "--out", out, "--data", text_file, "--heads", "3"],
                       capture_output=True, timeout=60)
    assert r.returncode != 0 and str(e.value) in r.stderr.decode()
    assert str(e.value) == "model config: num_attention_heads (3) must divide hidden_size (128)"
    missing = tmp_path / "missing.txt"
    with pytest.raises(RuntimeError) as e:
        tttlab.train(out=out, data=missing, steps=1)
    r = subprocess.run([EXE, "train", "--device", "cpu", "--out", out, "--data", missing], capture_output=True,
                       timeout=60)
    assert r.returncode != 0 and str(e.value) in r.stderr.decode()
    assert not out.exists()


def test_an_interrupted_run_resumed_from_python_continues_bit_for_bit(text_file, tmp_path):
    options = {**OPTIONS, "steps": 6}
    whole = tttlab.train(out=tmp_path / "whole", data=text_file, **options)

    def progress(step, loss, info):
        if step == 2:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        tttlab.train(out=tmp_path / "cut", data=text_file, **options, progress=progress)
    assert (tmp_path / "cut" / "latest").read_text().strip() == "step-0000002"
    seen = []
    r = tttlab.train(resume=tmp_path / "cut", progress=lambda step, loss, info: seen.append(step))
    # The arrays are the whole run's (steps 1 and 2 read back from metrics.jsonl), equal to the
    # uninterrupted run's bit for bit, and so is the file; the callback saw the steps computed again.
    assert seen == [3, 4, 5, 6]
    assert list(r["step"]) == list(whole["step"]) == [1, 2, 3, 4, 5, 6]
    for k in ("loss", "lr", "grad_norm", "eval_step", "eval_loss", "eval_bpb", "eval_accuracy",
              "val_loss_by_position"):
        assert np.array_equal(r[k], whole[k]), k
    assert list(r["skipped"]) == list(whole["skipped"]) and r["events"] == whole["events"] == []
    assert r["train_config"] == whole["train_config"]
    assert Path(r["checkpoint"]) == tmp_path / "cut" / "step-0000006"
    steps, _ = step_records(tmp_path / "cut")
    assert [s["loss"] for s in steps] == list(whole["loss"])
    # A finished run resumes to itself: nothing more is computed.
    again = tttlab.train(resume=str(tmp_path / "cut"), out=tmp_path / "cut")
    assert np.array_equal(again["loss"], whole["loss"])


def test_resume_refuses_what_the_cli_refuses(text_file, tmp_path):
    tttlab.train(out=tmp_path / "run", data=text_file, **OPTIONS)
    with pytest.raises(ValueError, match=r"^steps cannot be changed when resuming \(the run's saved settings apply\)$"):
        tttlab.train(resume=tmp_path / "run", steps=8)
    with pytest.raises(ValueError, match="out must be the run directory itself when resuming"):
        tttlab.train(resume=tmp_path / "run", out=tmp_path / "other")
    with pytest.raises(TypeError, match="needs out"):
        tttlab.train(data=text_file)
    with pytest.raises(ValueError, match="already holds a run; choose another out, or resume it"):
        tttlab.train(out=tmp_path / "run", data=text_file, **OPTIONS)
    missing = tmp_path / "missing"
    with pytest.raises(Exception) as e:
        tttlab.train(resume=missing)
    r = subprocess.run([EXE, "train", "--device", "cpu", "--resume", missing], capture_output=True, timeout=60)
    assert r.returncode != 0 and str(e.value) in r.stderr.decode()
