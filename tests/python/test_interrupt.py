"""Ctrl-C stops Model.eval, Model.states and Model.generate while they compute (docs/PYTHON.md, "Memory
and threads"): each looks for it at the engine's progress points, stops, and raises KeyboardInterrupt.

A call that cannot be interrupted still ends in a KeyboardInterrupt (raised after it returns), so each
test gives the interrupted call far more work than it could finish before the bound, and checks that it
raised within the bound: for eval and generate, work of hundreds of seconds or more against a bound of
20 s (a hang, not a speed claim); for states, which looks after each block, four blocks against a bound
of six times one block's time, measured first on the same machine (the four cost more than ten times one,
each block running the model's forward up to it).
"""

import _thread
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tttlab

REPO = Path(os.environ.get("TTTLAB_REPO", Path(__file__).resolve().parents[2]))
MODEL = REPO / "assets" / "models" / "tiny-brown"

SENTENCE = ("The jury further said in term-end presentments that the City Executive Committee, which had "
            "over-all charge of the election, deserves the praise and thanks of the City of Atlanta. ")


@pytest.fixture(scope="module")
def model():
    return tttlab.load(str(MODEL))


def interrupted(call, after_s):
    """Runs call() with Ctrl-C arriving after `after_s` seconds; the seconds until it raised."""
    timer = threading.Timer(after_s, _thread.interrupt_main)
    t0 = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        timer.cancel()
    return time.monotonic() - t0


def test_ctrl_c_stops_eval(model):
    text = SENTENCE * (2**24 // len(SENTENCE))  # 16 MiB: 65,000 windows of T = 256
    assert interrupted(lambda: model.eval(text, threads=2), 0.2) < 20
    # The model is unchanged: it scores as before.
    short = SENTENCE * 8
    fresh = tttlab.load(str(MODEL))
    assert np.array_equal(model.eval(short)["loss_by_position"], fresh.eval(short)["loss_by_position"])


def test_ctrl_c_stops_generate(model):
    assert interrupted(lambda: model.generate("The ", tokens=2**24), 0.2) < 20
    assert model.generate("The ", tokens=20, seed=3) == tttlab.load(str(MODEL)).generate("The ", tokens=20, seed=3)


def test_ctrl_c_stops_states_after_a_block(model):
    text = (SENTENCE * (16384 // len(SENTENCE) + 1))[:16384]
    t0 = time.monotonic()
    model.states(text, block=0, head=0, every="mini-batch")
    one_block = time.monotonic() - t0
    took = interrupted(lambda: model.states(text, block=[0, 1, 2, 3], head=0, every="mini-batch"), one_block / 4)
    assert took < 6 * one_block, (took, one_block)
