"""Type stub of the package tttlab (the extension tttlab._tttlab); docs/PYTHON.md has the details."""

import os
from typing import Any, Callable, Sequence, Union

import numpy as np
import numpy.typing as npt

Text = Union[str, bytes, bytearray, memoryview]

class Model:
    """A trained model (a checkpoint of `tttlab train`). Made by tttlab.load(path)."""

    @property
    def config(self) -> dict[str, Any]:
        """The model's config.json as a dict (hidden_size, num_hidden_layers, num_attention_heads, ...)."""
    @property
    def path(self) -> str:
        """The checkpoint directory the model was read from."""
    @property
    def parameters(self) -> int:
        """The number of parameters."""
    def eval(
        self, text: Text, *, seq_len: int | None = None, threads: int = 0, per_byte: bool = False
    ) -> dict[str, Any]:
        """Score every byte of `text` but the first, as `tttlab eval --data FILE --device cpu --json`.

        Windows of seq_len bytes (default: the run's T, else max_position_embeddings; 2 .. 2**20); a
        text shorter than one window is one window of its own length ('note' says so).
        Returns: loss_by_position float64 [seq_len] (nats, mean over the full windows), loss
        (nats/byte), bpb (bits/byte), accuracy (0..1), bytes, targets, full_windows, tail_targets,
        seq_len, note; with per_byte=True also per_byte float32 [bytes - 1] (nats, index i = byte i + 1).
        Ctrl-C stops it after the window in progress (KeyboardInterrupt).
        """
    def states(
        self,
        text: Text,
        *,
        block: int | Sequence[int] | None = None,
        head: int | Sequence[int] | None = None,
        every: str | int = "token",
        dtype: str = "float32",
        max_tokens: int = 65536,
    ) -> dict[str, npt.NDArray[Any]]:
        """The tensors of the safetensors file `tttlab states` writes, by name, without the file.

        T tokens, n saved states (every: 'token', 'mini-batch' or an int stride), head dimension d:
        tokens uint8 [T]; saved_tokens int64 [n]; block{B}.head{H}.W1 [n, d, d] (z = k @ W1 + b1),
        .b1 [n, d], .W1_initial [d, d], .b1_initial [d] (TTT-MLP adds W2, b2); .loss_initial,
        .loss_before, .loss_after [T] (the inner loss of W0, W_{t-1} and W_t on token t); .lambda,
        .tau, .eta [T]. Floating-point arrays in `dtype` (float32 or float64).
        Ctrl-C stops it after the block in progress (KeyboardInterrupt).
        """
    def head_inputs(self, text: Text, *, block: int, head: int, max_tokens: int = 65536) -> dict[str, Any]:
        """One TTT head's inner-loop inputs along `text`, as the app's stepper and states() take them.

        Computed by the model in float32, widened to float64; keyed by inner_loop's arguments: Q, K,
        V [T, d], lam [T], W1 [d, d], b1 [d] or None (W0), ln_weight, ln_bias [d], tau [b], mini_batch,
        layer_norm, residual, ln_eps. For TTT-Linear, inner_loop(**inputs) is the stepper's inner
        loop; a TTT-MLP head adds W2 [4d, d] and b2 [d] (its W1 is [d, 4d]), which inner_loop does
        not take.
        """
    def generate(
        self, prompt: Text, *, tokens: int = 200, temperature: float = 0.8, top_k: int = 0, seed: int = 0
    ) -> Union[str, bytes]:
        """The prompt and `tokens` sampled bytes, as `tttlab generate --device cpu` prints them.

        temperature in [0, 100] (0: greedy), top_k in [0, 256] (0: all), tokens in [0, 2**24].
        Returns str for a str prompt (bytes that are not UTF-8 become U+FFFD), bytes otherwise.
        Ctrl-C stops it after the token in progress (KeyboardInterrupt).
        """

def inner_loop(
    Q: npt.ArrayLike,
    K: npt.ArrayLike,
    V: npt.ArrayLike,
    lam: npt.ArrayLike,
    W1: npt.ArrayLike,
    b1: npt.ArrayLike | None = None,
    *,
    ln_weight: npt.ArrayLike | None = None,
    ln_bias: npt.ArrayLike | None = None,
    tau: npt.ArrayLike | None = None,
    mini_batch: int = 16,
    form: str = "primal",
    layer_norm: bool = True,
    residual: bool = True,
    ln_eps: float = 1e-6,
) -> dict[str, npt.NDArray[Any]]:
    """One TTT-Linear head's inner loop (docs/MATH.md §3) on your arrays, from W0 = (W1, b1).

    Q, K, V [T, d] (test, training and label views), lam [T] (the per-token rate), W1 [d, d] stored
    [in, out] (z = k @ W1 + b1), b1 [d] or None (no bias), ln_weight and ln_bias [d] (default 1 and
    0; the LayerNorm's epsilon ln_eps), tau [mini_batch] (default 1/i, i = 1..b). float32 when Q is float32, else float64.
    form='primal': out [T, d], W1 [T, d, d], b1 [T, d] (the state after each token), loss_initial,
    loss_before, loss_after [T]. form='dual': out only (the same function, per mini-batch products).
    """

def inner_loop_grad(
    Q: npt.ArrayLike,
    K: npt.ArrayLike,
    V: npt.ArrayLike,
    lam: npt.ArrayLike,
    W1: npt.ArrayLike,
    b1: npt.ArrayLike | None = None,
    *,
    dout: npt.ArrayLike,
    ln_weight: npt.ArrayLike | None = None,
    ln_bias: npt.ArrayLike | None = None,
    tau: npt.ArrayLike | None = None,
    mini_batch: int = 16,
    layer_norm: bool = True,
    residual: bool = True,
    ln_eps: float = 1e-6,
) -> dict[str, npt.NDArray[Any]]:
    """The gradients of a scalar loss L through inner_loop with the same arguments, given dout = dL/d(out).

    dout [T, d]. The manual backward the trainer uses (docs/MATH.md §7.3). Returns a dict keyed by
    argument: Q, K, V [T, d], lam [T], W1 [d, d], b1 [d] (when b1 is given), ln_weight, ln_bias [d],
    tau [mini_batch]. float32 when Q is float32, else float64.
    """

def matrix_rule(
    rule: str,
    q: npt.ArrayLike,
    k: npt.ArrayLike,
    v: npt.ArrayLike,
    beta: npt.ArrayLike | None = None,
    alpha: npt.ArrayLike | None = None,
    S0: npt.ArrayLike | None = None,
    *,
    form: str = "primal",
    chunk: int = 64,
) -> dict[str, npt.NDArray[Any]]:
    """One head of a matrix fast-weight rule (docs/MATH.md §11.2); every rule reads o_t = q_t S_t after its write.

    rule: 'linear_attention' (S_t = S_{t-1} + k_t^T v_t), 'decayed_hebbian' (Mamba-2's: alpha_t S_{t-1}
    + beta_t k_t^T v_t), 'deltanet' (S_{t-1} - beta_t k_t^T (k_t S_{t-1} - v_t)) or 'gated_deltanet'
    (alpha_t S_{t-1} - beta_t k_t^T (alpha_t k_t S_{t-1} - v_t)). q, k [T, d_k] (the delta rules
    expect L2-normalised k), v [T, d_v], beta [T] (all but linear_attention), alpha [T] in (0, 1]
    (decayed_hebbian, gated_deltanet), S0 [d_k, d_v] (default 0). float32 when q is float32, else
    float64. Returns o [T, d_v] and state [d_k, d_v] (S_T); form='primal' adds states [T, d_k, d_v]
    (S_t after each token) and loss_before, loss_after [T]; form='chunked' is the same function in
    chunks of `chunk` tokens.
    """

def matrix_rule_grad(
    rule: str,
    q: npt.ArrayLike,
    k: npt.ArrayLike,
    v: npt.ArrayLike,
    beta: npt.ArrayLike | None = None,
    alpha: npt.ArrayLike | None = None,
    S0: npt.ArrayLike | None = None,
    *,
    dout: npt.ArrayLike,
    dstate: npt.ArrayLike | None = None,
) -> dict[str, npt.NDArray[Any]]:
    """The gradients of a scalar loss L through matrix_rule, given dout = dL/do and dstate = dL/dS_T.

    dout [T, d_v], dstate [d_k, d_v] (default 0). The manual backward (docs/MATH.md §11.4). Returns a
    dict keyed by argument: q, k [T, d_k], v [T, d_v], beta [T] and alpha [T] (for the rules that
    take them), S0 [d_k, d_v].
    """

def ttt_layer_params(width: int, heads: int, *, seed: int = 0, dtype: str = "float64", **layer: Any) -> dict[str, npt.NDArray[Any]]:
    """A TTT layer's parameters at the initialisation of docs/MATH.md §8.5, drawn from `seed`.

    A dict of 2-D arrays by the official PyTorch names, linear maps stored [in, out]: q_proj.weight
    [D, D] (k_proj.weight without share_qk, g_proj.weight with use_gate), v_proj.weight, o_proj.weight,
    conv_q.weight [D, K] and conv_q.bias [1, D] (and conv_k's, with share_qk), learnable_ttt_lr_weight
    [H, D], learnable_ttt_lr_bias [1, H], learnable_token_idx [1, b], ttt_norm_weight and
    ttt_norm_bias [H, d], post_norm.weight and post_norm.bias [1, D], and per head W1[h], b1[h] (W2[h],
    b2[h] for TTT-MLP). `layer`: the keywords of ttt_layer.
    """

def ttt_layer(
    x: npt.ArrayLike,
    params: dict[str, npt.ArrayLike],
    *,
    heads: int,
    form: str = "dual",
    mini_batch: int = 16,
    inner: str = "linear",
    layer_norm: bool = True,
    residual: bool = True,
    bias: bool = True,
    base_lr: float = ...,
    learned_gate: bool = True,
    token_index: bool = True,
    share_qk: bool = False,
    use_gate: bool = False,
    conv_kernel: int = 4,
    rope: bool = True,
    rope_theta: float = 1e4,
    post_norm: bool = True,
    ln_eps: float = 1e-6,
) -> dict[str, npt.NDArray[Any]]:
    """A whole TTT layer (tttlab/ttt/layer.hpp) on one sequence x [T, D] from the fresh state.

    params: ttt_layer_params' names and shapes (a vector may be given 1-D). Returns y [T, D];
    form='primal' adds every head's state after every token, W1 [H, T, d, d] and b1 [H, T, d]
    (TTT-MLP: W1 [H, T, d, 4d], b1 [H, T, 4d], W2 [H, T, 4d, d], b2 [H, T, d]; no biases with
    bias=False), and loss_before, loss_after [H, T]. base_lr defaults to 1.0 (linear) or 0.1 (mlp);
    share_qk=True, use_gate=True is the Mamba backbone's layer. float32 when x is float32, else float64.
    """

def ttt_layer_grad(
    x: npt.ArrayLike, params: dict[str, npt.ArrayLike], *, dy: npt.ArrayLike, heads: int, **layer: Any
) -> dict[str, npt.NDArray[Any]]:
    """The gradients of a scalar loss L through ttt_layer (dual form), given dy = dL/dy [T, D].

    The layer's manual backward, the one training runs. Returns x [T, D] and every parameter by name.
    """

def deltanet_layer_params(
    width: int, heads: int, *, seed: int = 0, dtype: str = "float64", std: float = 0.02, **layer: Any
) -> dict[str, npt.NDArray[Any]]:
    """A DeltaNet layer's parameters at their initialisation (tttlab/seq/deltanet_layer.hpp), from `seed`.

    By flash-linear-attention's names, projections stored [in, out]: q_proj.weight, k_proj.weight,
    v_proj.weight [D, D], b_proj.weight [D, H], q_conv1d.weight, k_conv1d.weight, v_conv1d.weight
    [D, K]; gated: a_proj.weight [D, H], A_log, dt_bias [1, H], g_proj.weight [D, D]; o_norm.weight
    [1, d], o_proj.weight [D, D]. `std`: the projections' standard deviation. The layer's keywords:
    gated (False: DeltaNet; True: Gated DeltaNet), conv_kernel (4), chunk (64), norm_eps, l2_eps (1e-6).
    """

def deltanet_layer(
    x: npt.ArrayLike, params: dict[str, npt.ArrayLike], *, heads: int, form: str = "chunked", **layer: Any
) -> dict[str, npt.NDArray[Any]]:
    """A whole DeltaNet or Gated DeltaNet layer on x [T, D] from the empty state (docs/MATH.md §11.8).

    Returns y [T, D]. form: 'chunked' (chunks of `chunk` tokens, the UT transform) or 'primal' (token
    by token), the same function. float32 when x is float32, else float64.
    """

def deltanet_layer_grad(
    x: npt.ArrayLike, params: dict[str, npt.ArrayLike], *, dy: npt.ArrayLike, heads: int, **layer: Any
) -> dict[str, npt.NDArray[Any]]:
    """The gradients of a scalar loss L through deltanet_layer, given dy = dL/dy [T, D].

    The layer's manual backward, the one training runs. Returns x [T, D] and every parameter by name.
    """

def mamba2_layer_params(
    width: int, *, seed: int = 0, dtype: str = "float64", std: float = 0.02, **layer: Any
) -> dict[str, npt.NDArray[Any]]:
    """A Mamba-2 layer's parameters at their initialisation (tttlab/seq/mamba2_layer.hpp), from `seed`.

    By the reference's state_dict names, projections stored [in, out]: in_proj.weight [D, 2*d_inner +
    2N + H] (columns z, x, B, C, dt), conv1d.weight [d_inner + 2N, K], conv1d.bias [1, d_inner + 2N],
    dt_bias, A_log, D [1, H], norm.weight [1, d_inner], out_proj.weight [d_inner, D]. `std`: the
    projections' standard deviation. The layer's keywords: d_state (N, 16), d_conv (K, 4), expand (2;
    d_inner = expand*D), headdim (P, 16; H = d_inner/P), chunk (16), norm_eps (1e-5).
    """

def mamba2_layer(
    x: npt.ArrayLike, params: dict[str, npt.ArrayLike], *, form: str = "chunked", **layer: Any
) -> dict[str, npt.NDArray[Any]]:
    """A whole Mamba-2 layer on x [T, D] from the empty state (docs/MATH.md §8.8).

    Returns y [T, D]. form: 'chunked' (the SSD matrix form in chunks of `chunk` tokens) or 'recurrent'
    (token by token), the same function. float32 when x is float32, else float64.
    """

def mamba2_layer_grad(
    x: npt.ArrayLike, params: dict[str, npt.ArrayLike], *, dy: npt.ArrayLike, **layer: Any
) -> dict[str, npt.NDArray[Any]]:
    """The gradients of a scalar loss L through mamba2_layer, given dy = dL/dy [T, D].

    The layer's manual backward through the chunked form, the one training runs. Returns x [T, D] and
    every parameter by name.
    """

def titans_layer_params(
    width: int, heads: int, *, seed: int = 0, dtype: str = "float64", std: float = 0.02, **layer: Any
) -> dict[str, npt.NDArray[Any]]:
    """A Titans layer's parameters at their initialisation (tttlab/seq/titans_layer.hpp), from `seed`.

    Projections stored [in, out]: q_proj.weight, k_proj.weight, v_proj.weight [D, D], q_conv1d.weight,
    k_conv1d.weight, v_conv1d.weight [D, K], theta_proj.weight, alpha_proj.weight, eta_proj.weight
    [D, H] and their .bias [1, H], ttt_norm.weight, ttt_norm.bias [H, d], o_norm.weight [1, d],
    g_proj.weight, o_proj.weight [D, D]. `std`: the projections' standard deviation. The layer's
    keywords: conv_kernel (4), mini_batch (16), ln_eps, norm_eps, l2_eps (1e-6).
    """

def titans_layer(
    x: npt.ArrayLike, params: dict[str, npt.ArrayLike], *, heads: int, form: str = "chunked", **layer: Any
) -> dict[str, npt.NDArray[Any]]:
    """A whole Titans layer on x [T, D] from the empty state (docs/MATH.md §11.9).

    Returns y [T, D]. form: 'chunked' (one chunk per mini-batch) or 'primal' (token by token), the
    same function. float32 when x is float32, else float64.
    """

def titans_layer_grad(
    x: npt.ArrayLike, params: dict[str, npt.ArrayLike], *, dy: npt.ArrayLike, heads: int, **layer: Any
) -> dict[str, npt.NDArray[Any]]:
    """The gradients of a scalar loss L through titans_layer, given dy = dL/dy [T, D].

    The layer's manual backward, the one training runs. Returns x [T, D] and every parameter by name.
    """

def lact_layer_params(
    width: int, *, seed: int = 0, dtype: str = "float64", std: float = 0.02, **layer: Any
) -> dict[str, npt.NDArray[Any]]:
    """A LaCT layer's parameters at their initialisation (tttlab/seq/lact_layer.hpp), from `seed`.

    By its authors' module names, projections stored [in, out], the initial fast weights one array per
    head: qkv.weight [D, 3D], qk_scale, qk_offset [D, 2], w0[h], w2[h] [d_h, d_f], w1[h] [d_f, d_h],
    lr_proj.weight [D, 3*H_f], lr_proj.bias [1, 3*H_f], with momentum momentum_proj.0.weight [D, H_f]
    and momentum_proj.0.bias [1, H_f], ttt_scale_proj.weight [D, H_f], ttt_scale_proj.bias [1, H_f],
    ttt_norm.weight [1, d_f], o_proj.weight [D, D]. `std`: the projections' standard deviation. The
    layer's keywords: attn_heads (H_a, 4), lact_heads (H_f, 2), inter_multi (1; d_h = inter_multi*d_f),
    chunk (64), window (64), momentum (True), muon (False), rope_theta (1e4), base_lr (1e-3),
    norm_eps (1e-5).
    """

def lact_layer(
    x: npt.ArrayLike, params: dict[str, npt.ArrayLike], *, form: str = "chunked", **layer: Any
) -> dict[str, npt.NDArray[Any]]:
    """A whole LaCT layer on x [T, D] from the empty state (docs/MATH.md §11.10).

    Returns y [T, D]. form: 'chunked' (the training path, the sequence at once) or 'stream' (the
    streaming forward one token at a time, as decoding), the same function. float32 when x is float32,
    else float64.
    """

def lact_layer_grad(
    x: npt.ArrayLike, params: dict[str, npt.ArrayLike], *, dy: npt.ArrayLike, **layer: Any
) -> dict[str, npt.NDArray[Any]]:
    """The gradients of a scalar loss L through lact_layer, given dy = dL/dy [T, D].

    The layer's manual backward, the one training runs. Returns x [T, D] and every parameter by name.
    """

def train(
    *,
    out: str | os.PathLike[str] | None = None,
    resume: str | os.PathLike[str] | None = None,
    data: str | os.PathLike[str] = "brown",
    data_dir: str | os.PathLike[str] = "data/brown",
    preset: str = "tiny",
    layer: str = "ttt-linear",
    backbone: str | None = None,
    steps: int = 1000,
    batch: int = 16,
    seq_len: int | None = None,
    lr: float = 3e-3,
    warmup: float = 0.1,
    seed: int = 0,
    threads: int = 0,
    checkpoint_every: int = 0,
    keep_checkpoints: int = 2,
    eval_every: int = 0,
    eval_windows: int = 64,
    mini_batch: int = 16,
    hidden_size: int | None = None,
    layers: int | None = None,
    heads: int | None = None,
    intermediate_size: int | None = None,
    base_lr: float | None = None,
    remat_group: int = 0,
    no_inner_ln: bool = False,
    no_inner_residual: bool = False,
    no_inner_bias: bool = False,
    fixed_eta: bool = False,
    no_token_index: bool = False,
    frozen_token_index: bool = False,
    fixed_w0: bool = False,
    fixed_views: bool = False,
    max_bad_steps: int = 5,
    on_diverge: str = "rollback",
    max_rollbacks: int = 3,
    rollback_lr_factor: float = 0.5,
    progress: Callable[[int, float, dict[str, Any]], Any] | None = None,
) -> dict[str, Any]:
    """Train on the CPU as `tttlab train --device cpu` does (the same flags as keywords), into `out`.

    progress(step, loss, info) after every step, with the GIL (info: lr, grad_norm, skipped,
    tokens_per_s, elapsed_s, steps). Ctrl-C or an exception from progress stops the run before its next
    step, leaves the run directory with a checkpoint of that step, and is raised. resume=RUN continues
    RUN from its latest checkpoint as `tttlab train --resume RUN` (the run's saved settings: every
    other keyword but out = RUN, keep_checkpoints and progress left at its default). Returns run_dir,
    checkpoint, train_config (dict), step int64 [n], loss (nats/byte), lr, grad_norm, tokens_per_s
    float64 [n], skipped bool [n], eval_step int64 [m], eval_loss, eval_bpb, eval_accuracy float64 [m],
    val_loss_by_position float64 [T], events (list of dicts: step, event, message); resumed, the
    whole run's records.
    """

def load(path: str) -> Model:
    """Load a trained model from a checkpoint directory or a run directory (its newest checkpoint).

    The checks of the command line (config, header, checksum, finite outputs). FileNotFoundError when
    the path does not exist; ValueError or RuntimeError with the engine's message otherwise.
    """

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
