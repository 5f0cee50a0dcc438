"""TTT Lab from Python: a trained model loaded from a checkpoint, scored, inspected and sampled; one
head's inner loop and whole TTT and DeltaNet layers, with their gradients, on your arrays; and training, as
the command line trains.

    import tttlab
    model = tttlab.load("assets/models/tiny-brown")
    model.eval("Some text ...")["bpb"]
    model.states("Some text ...", block=0, head=0)["block0.head0.loss_before"]
    model.generate("The ", tokens=100, seed=1)
    run = tttlab.train(out="runs/a", data="notes.txt", steps=100, seq_len=64, batch=4)

The computations are the command line's (`tttlab eval`, `tttlab states`, `tttlab generate`,
`tttlab train --device cpu`) on the CPU implementation, so the results equal its output bit for bit.
docs/PYTHON.md has the API with shapes and units.
"""

import inspect
import os

from ._tttlab import Model, inner_loop, inner_loop_grad, load, matrix_rule, matrix_rule_grad, ttt_layer
from ._tttlab import deltanet_layer, deltanet_layer_grad, deltanet_layer_params
from ._tttlab import lact_layer, lact_layer_grad, lact_layer_params
from ._tttlab import mamba2_layer, mamba2_layer_grad, mamba2_layer_params
from ._tttlab import titans_layer, titans_layer_grad, titans_layer_params
from ._tttlab import ttt_layer_grad, ttt_layer_params
from ._tttlab import _train


def train(
    *,
    out=None,
    resume=None,
    data="brown",
    data_dir="data/brown",
    preset="tiny",
    layer="ttt-linear",
    backbone=None,
    steps=1000,
    batch=16,
    seq_len=None,
    lr=3e-3,
    warmup=0.1,
    seed=0,
    threads=0,
    checkpoint_every=0,
    keep_checkpoints=2,
    eval_every=0,
    eval_windows=64,
    mini_batch=16,
    hidden_size=None,
    layers=None,
    heads=None,
    intermediate_size=None,
    base_lr=None,
    remat_group=0,
    no_inner_ln=False,
    no_inner_residual=False,
    no_inner_bias=False,
    fixed_eta=False,
    no_token_index=False,
    frozen_token_index=False,
    fixed_w0=False,
    fixed_views=False,
    max_bad_steps=5,
    on_diverge="rollback",
    max_rollbacks=3,
    rollback_lr_factor=0.5,
    progress=None,
):
    """Train a byte-level model on the CPU as `tttlab train --device cpu` does, into the run directory `out`.

    The keywords are the command line's flags (--seq-len is seq_len, --warmup warmup, ...), with its
    defaults; None for backbone, seq_len, hidden_size, layers, heads, intermediate_size and base_lr
    means the flag left out (the preset's value). `data`: "brown" (data_dir's train.txt and val.txt),
    "mqar" or "copy" (synthetic recall tasks), or a UTF-8 text file (its last 5% validates).

    progress(step, loss, info) is called with the GIL after every step: step (steps done), loss (the
    batch's mean training loss, nats per byte) and info, a dict of lr, grad_norm, skipped,
    tokens_per_s, elapsed_s and steps (the run's total). Ctrl-C (KeyboardInterrupt) or an exception
    raised by progress stops the run before its next step; the run directory keeps the checkpoint a
    stopped run writes (resumable with `tttlab train --resume OUT` or `train(resume=OUT)`), and the
    exception is raised.

    resume=RUN continues the run in RUN from its latest checkpoint, as `tttlab train --resume RUN`:
    the run's saved settings apply, so out (if given) must be RUN and every other keyword but
    keep_checkpoints and progress must be left at its default; the same loss curve continues exactly.

    Returns a dict: run_dir, checkpoint (the newest checkpoint's directory), train_config (the run's
    train_config.json as a dict); the step records of metrics.jsonl as arrays: step int64 [n], loss,
    lr, grad_norm, tokens_per_s float64 [n], skipped bool [n]; the evaluations: eval_step int64 [m],
    eval_loss (nats per byte), eval_bpb, eval_accuracy float64 [m]; val_loss_by_position float64 [T]
    (the final evaluation's mean loss at each position); events, the event records (skipped steps,
    rollbacks) as dicts of step, event and message. After a rollback the arrays, like metrics.jsonl,
    hold the records up to the step the run went back to and then the steps computed again. A resumed
    run's arrays hold the whole run's records: those of metrics.jsonl up to the checkpoint, then the
    steps computed in this call.
    """
    options = dict(locals())
    options.pop("progress")
    if resume is None:
        if out is None:
            raise TypeError("train() needs out (the new run's directory) or resume (a run to continue)")
    else:
        resume = options["resume"] = os.fspath(resume)
        if out is not None and os.path.realpath(os.fspath(out)) != os.path.realpath(resume):
            raise ValueError("out must be the run directory itself when resuming (or left out)")
        defaults = inspect.signature(train).parameters
        for name, value in options.items():
            if name in ("out", "resume", "keep_checkpoints"):
                continue
            default = defaults[name].default
            if type(value) is not type(default) or value != default:
                raise ValueError(f"{name} cannot be changed when resuming (the run's saved settings apply)")
        options["out"] = resume
    for name in ("out", "data", "data_dir"):  # str or a path-like object
        options[name] = os.fspath(options[name])
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise ValueError(f"seed must be an integer in [0, 2**64 - 1], got {seed!r}")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable or None, got {type(progress).__name__}")
    return _train(options, progress)


__all__ = [
    "Model",
    "deltanet_layer",
    "deltanet_layer_grad",
    "deltanet_layer_params",
    "inner_loop",
    "inner_loop_grad",
    "lact_layer",
    "lact_layer_grad",
    "lact_layer_params",
    "load",
    "mamba2_layer",
    "mamba2_layer_grad",
    "mamba2_layer_params",
    "matrix_rule",
    "matrix_rule_grad",
    "titans_layer",
    "titans_layer_grad",
    "titans_layer_params",
    "train",
    "ttt_layer",
    "ttt_layer_grad",
    "ttt_layer_params",
]
