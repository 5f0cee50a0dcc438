"""The layer API's gradients (tttlab.inner_loop_grad, tttlab.matrix_rule_grad, tttlab.ttt_layer_grad,
tttlab.deltanet_layer_grad, tttlab.mamba2_layer_grad, tttlab.titans_layer_grad, tttlab.lact_layer_grad)
and the two forms of the matrix rules and of the TTT, DeltaNet, Mamba-2, Titans and LaCT layers,
against central finite differences and plain NumPy loops in float64 (docs/PYTHON.md).

Finite-difference tolerances: a central difference with step h errs by O(h²·f''') from truncation and
by about ε·|L|/h from rounding; with h = 1e-5, inputs of order 1 and L of order 10 both are near 1e-9
relative, so 1e-6 relative leaves a margin of a thousand and still fails on any wrong term (a missing
term changes a gradient by order one).
"""

import numpy as np
import pytest

import tttlab

SEED = 20261201
H = 1e-5
RTOL_FD = 1e-6


def rng_for(case):
    seed = SEED + case
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def check_gradient(f, x, grads, names, rng, elements=3, h=H):
    """Central differences of the scalar f(x) along a random direction per argument and at a few elements."""
    for name in names:
        u = rng.standard_normal(np.shape(x[name]))
        plus, minus = dict(x), dict(x)
        plus[name] = x[name] + h * u
        minus[name] = x[name] - h * u
        fd = (f(plus) - f(minus)) / (2 * h)
        an = float((grads[name] * u).sum())
        assert an == pytest.approx(fd, rel=RTOL_FD, abs=1e-8), f"d/d{name} along a random direction"
        flat = np.asarray(x[name]).reshape(-1)
        for i in rng.choice(flat.size, size=min(elements, flat.size), replace=False):
            e = np.zeros(flat.size)
            e[i] = h
            plus[name] = (flat + e).reshape(np.shape(x[name]))
            minus[name] = (flat - e).reshape(np.shape(x[name]))
            fd = (f(plus) - f(minus)) / (2 * h)
            assert grads[name].reshape(-1)[i] == pytest.approx(fd, rel=RTOL_FD, abs=1e-8), f"d/d{name}[{i}]"
        plus[name] = minus[name] = x[name]


# ---- tttlab.inner_loop_grad ----


def inner_inputs(rng, T, d, b, bias=True):
    a = lambda *s: rng.standard_normal(s)
    x = dict(Q=a(T, d), K=a(T, d), V=a(T, d), lam=0.05 + 0.1 * rng.random(T), W1=0.3 * a(d, d),
             ln_weight=1 + 0.1 * a(d), ln_bias=0.1 * a(d), tau=1 / np.arange(1, b + 1) + 0.05 * a(b))
    if bias:
        x["b1"] = 0.1 * a(d)
    return x


@pytest.mark.parametrize(
    "case,T,b,opts",
    [
        (0, 21, 8, dict(ln_eps=1e-3)),  # 21 = 2·8 + 5: the last mini-batch is short
        (1, 16, 4, dict(layer_norm=False)),
        (2, 12, 12, dict(residual=False, bias=False)),  # one mini-batch, no bias
    ],
)
def test_inner_loop_grad_matches_finite_differences(case, T, b, opts):
    rng = rng_for(case)
    d = 6
    bias = opts.pop("bias", True)
    x = inner_inputs(rng, T, d, b, bias)
    dout = rng.standard_normal((T, d))
    loss = lambda y: float((tttlab.inner_loop(**y, mini_batch=b, form="dual", **opts)["out"] * dout).sum())
    g = tttlab.inner_loop_grad(**x, dout=dout, mini_batch=b, **opts)
    assert set(g) == set(x)
    for name in x:
        assert g[name].shape == np.shape(x[name]) and g[name].dtype == np.float64
    check_gradient(loss, x, g, list(x), rng)
    # The primal form computes the same function, so its finite differences agree as well.
    loss_primal = lambda y: float((tttlab.inner_loop(**y, mini_batch=b, **opts)["out"] * dout).sum())
    check_gradient(loss_primal, x, g, ["K", "lam", "W1"], rng, elements=1)


def test_inner_loop_grad_float32_follows_float64():
    rng = rng_for(3)
    x64 = inner_inputs(rng, 20, 8, 8)
    dout = rng.standard_normal((20, 8))
    g64 = tttlab.inner_loop_grad(**x64, dout=dout, mini_batch=8)
    g32 = tttlab.inner_loop_grad(**{k: v.astype(np.float32) for k, v in x64.items()}, dout=dout, mini_batch=8)
    for name in g64:
        assert g32[name].dtype == np.float32
        # fp32 rounding (2^-24 relative) through two passes over 20 tokens of d = 8: far inside 1e-3
        # of the gradient's scale.
        np.testing.assert_allclose(g32[name], g64[name], rtol=0, atol=1e-3 * np.abs(g64[name]).max())


def test_inner_loop_grad_refuses_bad_arrays():
    rng = rng_for(4)
    x = inner_inputs(rng, 10, 4, 4)
    with pytest.raises(ValueError, match=r"dout must be a 2-D array of shape \[10, 4\], got shape \[10, 3\]"):
        tttlab.inner_loop_grad(**x, dout=np.ones((10, 3)), mini_batch=4)
    with pytest.raises(ValueError, match="dout must be finite"):
        tttlab.inner_loop_grad(**x, dout=np.full((10, 4), np.inf), mini_batch=4)
    with pytest.raises(ValueError, match="must be finite"):
        tttlab.inner_loop_grad(**{**x, "W1": np.full((4, 4), np.nan)}, dout=np.ones((10, 4)), mini_batch=4)
    with pytest.raises(TypeError, match="K must be an array of real numbers"):
        tttlab.inner_loop_grad(**{**x, "K": x["K"].astype(complex)}, dout=np.ones((10, 4)), mini_batch=4)
    with pytest.raises(TypeError, match="dout"):
        tttlab.inner_loop_grad(**x, mini_batch=4)  # dout is required


# ---- tttlab.matrix_rule and tttlab.matrix_rule_grad ----

RULES = ["linear_attention", "decayed_hebbian", "deltanet", "gated_deltanet"]


def rule_inputs(rng, rule, T, dk, dv):
    k = rng.standard_normal((T, dk))
    if rule in ("deltanet", "gated_deltanet"):
        k /= np.linalg.norm(k, axis=1, keepdims=True)  # the delta rules expect L2-normalised keys (§11.2)
    x = dict(q=rng.standard_normal((T, dk)), k=k, v=rng.standard_normal((T, dv)),
             S0=0.3 * rng.standard_normal((dk, dv)))
    if rule != "linear_attention":
        x["beta"] = 0.1 + 0.8 * rng.random(T)
    if rule in ("decayed_hebbian", "gated_deltanet"):
        x["alpha"] = 0.5 + 0.45 * rng.random(T)  # inside (0, 1] with room for the finite differences
    return x


def numpy_rule(rule, q, k, v, beta=None, alpha=None, S0=None):
    """The recurrences of docs/MATH.md §11.2 as written there, one token at a time."""
    S = np.zeros((k.shape[1], v.shape[1])) if S0 is None else S0.copy()
    o, states = [], []
    for t in range(q.shape[0]):
        kt, vt = k[t][:, None], v[t][None, :]
        if rule == "linear_attention":
            S = S + kt @ vt
        elif rule == "decayed_hebbian":
            S = alpha[t] * S + beta[t] * kt @ vt
        elif rule == "deltanet":
            S = S - beta[t] * kt @ (kt.T @ S - vt)
        else:
            S = alpha[t] * S - beta[t] * kt @ (alpha[t] * kt.T @ S - vt)
        states.append(S)
        o.append(q[t] @ S)
    return np.array(o), np.array(states)


@pytest.mark.parametrize("rule", RULES)
def test_matrix_rule_equals_a_numpy_loop_and_its_chunked_form(rule):
    rng = rng_for(10 + RULES.index(rule))
    T, dk, dv = 37, 5, 3
    x = rule_inputs(rng, rule, T, dk, dv)
    p = tttlab.matrix_rule(rule, **x)
    o, states = numpy_rule(rule, **x)
    assert p["o"].shape == (T, dv) and p["states"].shape == (T, dk, dv) and p["state"].shape == (dk, dv)
    # The same products in a different order: fp64 rounding over d-long sums and 37 steps.
    np.testing.assert_allclose(p["o"], o, rtol=0, atol=1e-12)
    np.testing.assert_allclose(p["states"], states, rtol=0, atol=1e-12)
    assert np.array_equal(p["state"], p["states"][-1])
    # The reported losses are the rule's inner loss of the states before and after each token (§11.1).
    delta = rule in ("deltanet", "gated_deltanet")
    before = np.concatenate([x["S0"][None], states[:-1]])
    for name, S in (("loss_before", before), ("loss_after", states)):
        pred = np.einsum("tk,tkv->tv", x["k"], S)
        want = 0.5 * ((pred - x["v"]) ** 2).sum(1) if delta else -(pred * x["v"]).sum(1)
        np.testing.assert_allclose(p[name], want, rtol=1e-12, atol=1e-12)
    # The chunked (UT-transform) form: the same function, 37 = 4·8 + 5 so the last chunk is short.
    for chunk in (8, 1, 64):
        c = tttlab.matrix_rule(rule, **x, form="chunked", chunk=chunk)
        assert set(c) == {"o", "state"}
        np.testing.assert_allclose(c["o"], p["o"], rtol=0, atol=1e-12)
        np.testing.assert_allclose(c["state"], p["state"], rtol=0, atol=1e-12)


@pytest.mark.parametrize("rule", RULES)
def test_matrix_rule_grad_matches_finite_differences(rule):
    rng = rng_for(20 + RULES.index(rule))
    T, dk, dv = 13, 4, 3
    x = rule_inputs(rng, rule, T, dk, dv)
    dout, dstate = rng.standard_normal((T, dv)), rng.standard_normal((dk, dv))

    def loss(y):
        r = tttlab.matrix_rule(rule, **y, form="chunked", chunk=4)
        return float((r["o"] * dout).sum() + (r["state"] * dstate).sum())

    g = tttlab.matrix_rule_grad(rule, **x, dout=dout, dstate=dstate)
    assert set(g) == set(x)
    for name in x:
        assert g[name].shape == np.shape(x[name])
    check_gradient(loss, x, g, list(x), rng)
    # Without dstate, L is Σ dout ⊙ o alone.
    g0 = tttlab.matrix_rule_grad(rule, **x, dout=dout)
    loss_o = lambda y: float((tttlab.matrix_rule(rule, **y)["o"] * dout).sum())
    check_gradient(loss_o, x, g0, ["k", "S0"], rng, elements=1)


def test_matrix_rule_float32_follows_float64():
    rng = rng_for(30)
    x = rule_inputs(rng, "gated_deltanet", 32, 8, 8)
    x32 = {k: v.astype(np.float32) for k, v in x.items()}
    for form in ("primal", "chunked"):
        a = tttlab.matrix_rule("gated_deltanet", **x, form=form, chunk=8)
        b = tttlab.matrix_rule("gated_deltanet", **x32, form=form, chunk=8)
        assert b["o"].dtype == np.float32
        # fp32 rounding over 32 contracting steps of d = 8 products: far inside 1e-4.
        np.testing.assert_allclose(b["o"], a["o"], rtol=0, atol=1e-4)
    g = tttlab.matrix_rule_grad("gated_deltanet", **x32, dout=np.ones((32, 8), np.float32))
    assert all(v.dtype == np.float32 for v in g.values())


def test_matrix_rule_refuses_bad_input():
    rng = rng_for(31)
    x = rule_inputs(rng, "gated_deltanet", 6, 4, 2)
    with pytest.raises(ValueError, match="rule must be 'linear_attention', 'decayed_hebbian', 'deltanet' or"):
        tttlab.matrix_rule("mamba", **x)
    with pytest.raises(ValueError, match=r"gated_deltanet needs alpha \[T\]"):
        tttlab.matrix_rule("gated_deltanet", **{**x, "alpha": None})
    with pytest.raises(ValueError, match="deltanet takes no alpha"):
        tttlab.matrix_rule("deltanet", **x)
    with pytest.raises(ValueError, match="linear_attention takes no beta"):
        tttlab.matrix_rule("linear_attention", x["q"], x["k"], x["v"], beta=x["beta"])
    with pytest.raises(ValueError, match=r"alpha must lie in \(0, 1\], got 1.5.* at token 2"):
        tttlab.matrix_rule("gated_deltanet", **{**x, "alpha": np.array([1, 1, 1.5, 1, 1, 1.0])})
    with pytest.raises(ValueError, match=r"alpha must lie in \(0, 1\], got nan"):
        tttlab.matrix_rule("gated_deltanet", **{**x, "alpha": np.full(6, np.nan)})
    with pytest.raises(ValueError, match=r"k must be a 2-D array of shape \[6, 4\], got shape \[6, 3\]"):
        tttlab.matrix_rule("gated_deltanet", **{**x, "k": x["k"][:, :3]})
    with pytest.raises(ValueError, match=r"S0 must be a 2-D array of shape \[4, 2\]"):
        tttlab.matrix_rule("gated_deltanet", **{**x, "S0": np.zeros((2, 4))})
    with pytest.raises(ValueError, match="beta must be a 1-D array of length 6"):
        tttlab.matrix_rule("gated_deltanet", **{**x, "beta": np.ones(5)})
    with pytest.raises(ValueError, match="q, k, v, beta and S0 must be finite"):
        tttlab.matrix_rule("gated_deltanet", **{**x, "v": np.full((6, 2), np.nan)})
    with pytest.raises(ValueError, match="form must be 'primal' or 'chunked', got 'dual'"):
        tttlab.matrix_rule("gated_deltanet", **x, form="dual")
    with pytest.raises(ValueError, match=r"chunk must be in \[1, 65536\], got 0"):
        tttlab.matrix_rule("gated_deltanet", **x, form="chunked", chunk=0)
    with pytest.raises(TypeError, match="q must be an array of real numbers"):
        tttlab.matrix_rule("gated_deltanet", **{**x, "q": "abc"})
    with pytest.raises(ValueError, match=r"dstate must be a 2-D array of shape \[4, 2\]"):
        tttlab.matrix_rule_grad("gated_deltanet", **x, dout=np.ones((6, 2)), dstate=np.ones(8))
    with pytest.raises(ValueError, match="dout and dstate must be finite"):
        tttlab.matrix_rule_grad("gated_deltanet", **x, dout=np.full((6, 2), np.nan))


# ---- tttlab.ttt_layer and tttlab.ttt_layer_grad: a whole TTT layer from NumPy weights ----

LAYERS = [
    # The Mamba backbone's layer (shared Q/K with convolutions, gate), T = 10 = 2·4 + 2: a short last mini-batch.
    (40, dict(heads=2, mini_batch=4, share_qk=True, use_gate=True)),
    # The Transformer backbone's TTT-MLP layer, without the inner bias.
    (41, dict(heads=2, mini_batch=4, inner="mlp", bias=False)),
]


def layer_case(case, options, T=10, D=16):
    rng = rng_for(case)
    params = tttlab.ttt_layer_params(D, seed=case, **options)
    # Away from the initialisation (W0 ~ N(0, 0.02), zero biases) so that every term is exercised.
    params = {k: v + 0.1 * rng.standard_normal(v.shape) for k, v in params.items()}
    return rng, params, rng.standard_normal((T, D))


@pytest.mark.parametrize("case,options", LAYERS)
def test_ttt_layer_grad_matches_finite_differences(case, options):
    rng, params, x = layer_case(case, options)
    dy = rng.standard_normal(x.shape)
    y = lambda xx, pp: tttlab.ttt_layer(xx, pp, **options)["y"]
    g = tttlab.ttt_layer_grad(x, params, dy=dy, **options)
    assert set(g) == set(params) | {"x"}
    check_gradient(lambda a: float((y(a["x"], params) * dy).sum()), {"x": x}, g, ["x"], rng)
    for name in params:
        f = lambda a: float((y(x, {**params, name: a[name]}) * dy).sum())
        check_gradient(f, {name: params[name]}, g, [name], rng, elements=1)


@pytest.mark.parametrize("case,options", LAYERS)
def test_ttt_layer_primal_form_equals_the_dual_form(case, options):
    _, params, x = layer_case(case, options)
    dual = tttlab.ttt_layer(x, params, **options)
    primal = tttlab.ttt_layer(x, params, **options, form="primal")
    assert set(dual) == {"y"}
    # The two forms of every head's inner loop agree to fp64 rounding (docs/MATH.md §4).
    np.testing.assert_allclose(primal["y"], dual["y"], rtol=0, atol=1e-12)
    H, T, d = options["heads"], x.shape[0], x.shape[1] // options["heads"]
    mlp = options.get("inner") == "mlp"
    assert primal["W1"].shape == ((H, T, d, 4 * d) if mlp else (H, T, d, d))
    assert primal["loss_before"].shape == (H, T) and ("W2" in primal) == mlp
    assert ("b1" in primal) == options.get("bias", True)
    # W_t changes within a mini-batch and the first token starts from W0.
    assert not np.array_equal(primal["W1"][0, 0], params["W1[0]"])
    x32 = tttlab.ttt_layer(x.astype(np.float32), {k: v.astype(np.float32) for k, v in params.items()}, **options)
    # fp32 rounding through the projections, 10 tokens of inner loop and the norms: far inside 1e-4.
    assert x32["y"].dtype == np.float32
    np.testing.assert_allclose(x32["y"], dual["y"], rtol=0, atol=1e-4)


def test_ttt_layer_refuses_bad_input():
    _, params, x = layer_case(42, LAYERS[0][1])
    o = LAYERS[0][1]
    with pytest.raises(ValueError, match=r"params lacks 'W1\[1\]' \[8, 8\]"):
        tttlab.ttt_layer(x, {k: v for k, v in params.items() if k != "W1[1]"}, **o)
    with pytest.raises(ValueError, match=r"params\['q_proj.weight'\] must be of shape \[16, 16\]"):
        tttlab.ttt_layer(x, {**params, "q_proj.weight": np.zeros((16, 8))}, **o)
    with pytest.raises(ValueError, match="params has 'k_proj.weight', which this layer does not have"):
        tttlab.ttt_layer(x, {**params, "k_proj.weight": np.zeros((16, 16))}, **o)
    with pytest.raises(ValueError, match=r"params\['o_proj.weight'\] must be finite"):
        tttlab.ttt_layer(x, {**params, "o_proj.weight": np.full((16, 16), np.nan)}, **o)
    with pytest.raises(ValueError, match="x must be finite"):
        tttlab.ttt_layer(np.full_like(x, np.inf), params, **o)
    with pytest.raises(TypeError, match="unexpected keyword argument 'mini_batches'"):
        tttlab.ttt_layer(x, params, **o, mini_batches=4)
    with pytest.raises(ValueError, match="inner must be 'linear' or 'mlp'"):
        tttlab.ttt_layer_params(16, 2, inner="titans")
    with pytest.raises(ValueError, match="heads"):
        tttlab.ttt_layer_params(16, 3)  # 3 does not divide 16
    with pytest.raises(ValueError, match=r"dy must be a 2-D array of shape \[10, 16\]"):
        tttlab.ttt_layer_grad(x, params, dy=np.ones((10, 15)), **o)


# ---- tttlab.deltanet_layer and tttlab.deltanet_layer_grad: a whole DeltaNet layer from NumPy weights ----

DELTANET = [
    # T = 10 in chunks of 4: two full chunks and a short one.
    (50, dict(heads=2, chunk=4)),
    (51, dict(heads=2, chunk=4, gated=True, conv_kernel=3)),
]


def deltanet_case(case, options, T=10, D=16):
    rng = rng_for(case)
    params = tttlab.deltanet_layer_params(D, seed=case, **options)
    # Away from the initialisation (unit norm weight, small projections) so that every term matters.
    params = {k: v + 0.1 * rng.standard_normal(v.shape) for k, v in params.items()}
    return rng, params, rng.standard_normal((T, D))


def deltanet_reference(x, p, heads, chunk=None, gated=False, conv_kernel=4, eps=1e-6):
    """The layer as tttlab/seq/deltanet_layer.hpp states it (docs/MATH.md §11.8), token by token in NumPy."""
    T, D = x.shape
    d = D // heads
    silu = lambda z: z / (1 + np.exp(-z))
    sigmoid = lambda z: 1 / (1 + np.exp(-z))

    def conv(z, w):  # depthwise, causal: the last tap multiplies the current token
        padded = np.vstack([np.zeros((conv_kernel - 1, D)), z])
        return sum(padded[j:j + T] * w[:, j] for j in range(conv_kernel))

    q, k, v = (silu(conv(x @ p[f"{n}_proj.weight"], p[f"{n}_conv1d.weight"])) for n in "qkv")
    beta = sigmoid(x @ p["b_proj.weight"])
    if gated:
        softplus = np.log1p(np.exp(x @ p["a_proj.weight"] + p["dt_bias"].reshape(-1)))
        alpha = np.exp(-np.exp(p["A_log"].reshape(-1)) * softplus)  # Mamba-2's decay
    o = np.zeros((T, D))
    for h in range(heads):
        c = slice(h * d, (h + 1) * d)
        qh = q[:, c] / np.sqrt((q[:, c] ** 2).sum(1, keepdims=True) + eps) / np.sqrt(d)
        kh = k[:, c] / np.sqrt((k[:, c] ** 2).sum(1, keepdims=True) + eps)
        S = np.zeros((d, d))
        for t in range(T):
            if gated:
                S = alpha[t, h] * S
            S = S - beta[t, h] * np.outer(kh[t], kh[t] @ S - v[t, c])
            o[t, c] = qh[t] @ S
        o[:, c] = o[:, c] / np.sqrt((o[:, c] ** 2).mean(1, keepdims=True) + eps) * p["o_norm.weight"].reshape(-1)
    if gated:
        o = o * silu(x @ p["g_proj.weight"])
    return o @ p["o_proj.weight"]


@pytest.mark.parametrize("case,options", DELTANET)
def test_deltanet_layer_equals_its_statement_in_numpy(case, options):
    _, params, x = deltanet_case(case, options)
    want = deltanet_reference(x, params, **options)
    chunked = tttlab.deltanet_layer(x, params, **options)["y"]
    primal = tttlab.deltanet_layer(x, params, **options, form="primal")["y"]
    # The same function in float64: only the order of the sums differs (~1e-16 per operation).
    np.testing.assert_allclose(primal, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(chunked, want, rtol=0, atol=1e-12)
    y32 = tttlab.deltanet_layer(x.astype(np.float32), {k: v.astype(np.float32) for k, v in params.items()},
                                **options)["y"]
    # fp32 rounding through the projections, 10 tokens of the rule and the norms: far inside 1e-4.
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, want, rtol=0, atol=1e-4)


@pytest.mark.parametrize("case,options", DELTANET)
def test_deltanet_layer_grad_matches_finite_differences(case, options):
    rng, params, x = deltanet_case(case, options)
    dy = rng.standard_normal(x.shape)
    y = lambda xx, pp: tttlab.deltanet_layer(xx, pp, **options)["y"]
    g = tttlab.deltanet_layer_grad(x, params, dy=dy, **options)
    assert set(g) == set(params) | {"x"}
    check_gradient(lambda a: float((y(a["x"], params) * dy).sum()), {"x": x}, g, ["x"], rng)
    for name in params:
        f = lambda a: float((y(x, {**params, name: a[name]}) * dy).sum())
        check_gradient(f, {name: params[name]}, g, [name], rng, elements=1)


def test_deltanet_layer_refuses_bad_input():
    o = DELTANET[1][1]
    _, params, x = deltanet_case(52, o)
    with pytest.raises(ValueError, match=r"params lacks 'A_log' \[1, 2\]"):
        tttlab.deltanet_layer(x, {k: v for k, v in params.items() if k != "A_log"}, **o)
    with pytest.raises(ValueError, match="params has 'a_proj.weight', which this layer does not have"):
        tttlab.deltanet_layer(x, params, **{**o, "gated": False})
    with pytest.raises(ValueError, match=r"params\['o_proj.weight'\] must be finite"):
        tttlab.deltanet_layer(x, {**params, "o_proj.weight": np.full((16, 16), np.nan)}, **o)
    with pytest.raises(TypeError, match="unexpected keyword argument 'chunks'"):
        tttlab.deltanet_layer(x, params, **o, chunks=4)
    with pytest.raises(ValueError, match="form must be 'chunked' or 'primal'"):
        tttlab.deltanet_layer(x, params, **o, form="dual")
    with pytest.raises(ValueError, match="heads"):
        tttlab.deltanet_layer_params(16, 3)
    with pytest.raises(ValueError, match=r"dy must be a 2-D array of shape \[10, 16\]"):
        tttlab.deltanet_layer_grad(x, params, dy=np.ones((10, 15)), **o)


# ---- tttlab.mamba2_layer and tttlab.mamba2_layer_grad: a whole Mamba-2 layer from NumPy weights ----

MAMBA2 = [
    # d_inner = 16 in 4 heads of 4, T = 10 in chunks of 4: two full chunks and a short one.
    (60, dict(expand=2, headdim=4, d_state=4, d_conv=3, chunk=4)),
    # One head, one chunk longer than the sequence.
    (61, dict(expand=1, headdim=8, d_state=3, d_conv=4, chunk=16)),
]


def mamba2_case(case, options, T=10, D=8):
    rng = rng_for(case)
    params = tttlab.mamba2_layer_params(D, seed=case, **options)
    params = {k: v + 0.1 * rng.standard_normal(v.shape) for k, v in params.items()}
    # dt = softplus(dt_raw + dt_bias) of order 1 and A = −exp(A_log) in [−4, −1], so that each token's
    # decay exp(dt·A) is far from 1 and the scan's decay terms carry weight in every gradient.
    params["dt_bias"] = rng.uniform(-1, 1, params["dt_bias"].shape)
    params["A_log"] = np.log(rng.uniform(1, 4, params["A_log"].shape))
    return rng, params, rng.standard_normal((T, D))


def mamba2_reference(x, p, expand, headdim, d_state, d_conv, chunk=None, eps=1e-5):
    """The layer as tttlab/seq/mamba2_layer.hpp states it (docs/MATH.md §8.8), token by token in NumPy."""
    T, D = x.shape
    di, N, K = expand * D, d_state, d_conv
    silu = lambda z: z / (1 + np.exp(-z))
    zxbcdt = x @ p["in_proj.weight"]
    z, xbc, dt_raw = zxbcdt[:, :di], zxbcdt[:, di:2 * di + 2 * N], zxbcdt[:, 2 * di + 2 * N:]
    padded = np.vstack([np.zeros((K - 1, xbc.shape[1])), xbc])  # causal: the last tap is the current token
    xbc = silu(sum(padded[j:j + T] * p["conv1d.weight"][:, j] for j in range(K)) + p["conv1d.bias"].reshape(-1))
    xs, B, C = xbc[:, :di], xbc[:, di:di + N], xbc[:, di + N:]
    dt = np.log1p(np.exp(dt_raw + p["dt_bias"].reshape(-1)))
    A = -np.exp(p["A_log"].reshape(-1))
    y = np.zeros((T, di))
    for h in range(di // headdim):
        c = slice(h * headdim, (h + 1) * headdim)
        S = np.zeros((headdim, N))
        for t in range(T):
            S = np.exp(dt[t, h] * A[h]) * S + dt[t, h] * np.outer(xs[t, c], B[t])
            y[t, c] = S @ C[t] + p["D"].reshape(-1)[h] * xs[t, c]
    g = y * silu(z)
    n = g / np.sqrt((g ** 2).mean(1, keepdims=True) + eps) * p["norm.weight"].reshape(-1)
    return n @ p["out_proj.weight"]


@pytest.mark.parametrize("case,options", MAMBA2)
def test_mamba2_layer_equals_its_statement_in_numpy(case, options):
    _, params, x = mamba2_case(case, options)
    want = mamba2_reference(x, params, **options)
    chunked = tttlab.mamba2_layer(x, params, **options)["y"]
    recurrent = tttlab.mamba2_layer(x, params, **options, form="recurrent")["y"]
    # The same function in float64: only the order of the sums differs (~1e-16 per operation).
    np.testing.assert_allclose(recurrent, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(chunked, want, rtol=0, atol=1e-12)
    y32 = tttlab.mamba2_layer(x.astype(np.float32), {k: v.astype(np.float32) for k, v in params.items()},
                              **options)["y"]
    # fp32 rounding through the projections, 10 tokens of the scan and the norm: far inside 1e-4.
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, want, rtol=0, atol=1e-4)


@pytest.mark.parametrize("case,options", MAMBA2)
def test_mamba2_layer_grad_matches_finite_differences(case, options):
    rng, params, x = mamba2_case(case, options)
    dy = rng.standard_normal(x.shape)
    y = lambda xx, pp: tttlab.mamba2_layer(xx, pp, **options)["y"]
    g = tttlab.mamba2_layer_grad(x, params, dy=dy, **options)
    assert set(g) == set(params) | {"x"}
    check_gradient(lambda a: float((y(a["x"], params) * dy).sum()), {"x": x}, g, ["x"], rng)
    for name in params:
        f = lambda a: float((y(x, {**params, name: a[name]}) * dy).sum())
        check_gradient(f, {name: params[name]}, g, [name], rng, elements=1)
    g32 = tttlab.mamba2_layer_grad(x.astype(np.float32), {k: v.astype(np.float32) for k, v in params.items()},
                                   dy=dy.astype(np.float32), **options)
    # fp32 against fp64 relative to each gradient's size: the same sums in fp32 (ε ≈ 6e-8), over
    # tens of terms and a norm; 1e-4 still fails on any wrong term.
    for name in g:
        assert g32[name].dtype == np.float32
        np.testing.assert_allclose(g32[name], g[name], rtol=0, atol=1e-4 * max(1.0, np.abs(g[name]).max()))


def test_mamba2_layer_refuses_bad_input():
    o = MAMBA2[0][1]
    _, params, x = mamba2_case(62, o)
    with pytest.raises(ValueError, match=r"params lacks 'A_log' \[1, 4\]"):
        tttlab.mamba2_layer(x, {k: v for k, v in params.items() if k != "A_log"}, **o)
    with pytest.raises(ValueError, match="params has 'a_proj.weight', which this layer does not have"):
        tttlab.mamba2_layer(x, {**params, "a_proj.weight": np.zeros((8, 4))}, **o)
    with pytest.raises(ValueError, match=r"params\['in_proj.weight'\] must be of shape \[8, 44\]"):
        tttlab.mamba2_layer(x, {**params, "in_proj.weight": np.zeros((44, 8))}, **o)
    with pytest.raises(ValueError, match=r"params\['out_proj.weight'\] must be finite"):
        tttlab.mamba2_layer(x, {**params, "out_proj.weight": np.full((16, 8), np.nan)}, **o)
    with pytest.raises(ValueError, match="x must be finite"):
        tttlab.mamba2_layer(np.full((10, 8), np.nan), params, **o)
    with pytest.raises(ValueError, match=r"x must be a 2-D array \[T, D\]"):
        tttlab.mamba2_layer(np.zeros(8), params, **o)
    with pytest.raises(TypeError, match="unexpected keyword argument 'chunks'"):
        tttlab.mamba2_layer(x, params, **o, chunks=4)
    with pytest.raises(ValueError, match="form must be 'chunked' or 'recurrent', got 'primal'"):
        tttlab.mamba2_layer(x, params, **o, form="primal")
    with pytest.raises(ValueError, match="headdim"):
        tttlab.mamba2_layer_params(8, expand=2, headdim=5)
    with pytest.raises(ValueError, match="expand must be at most 64, got 100000"):
        tttlab.mamba2_layer_params(8, expand=100000)
    with pytest.raises(ValueError, match=r"dy must be a 2-D array of shape \[10, 8\]"):
        tttlab.mamba2_layer_grad(x, params, dy=np.ones((10, 7)), **o)


# ---- tttlab.titans_layer and tttlab.lact_layer, and their gradients: whole layers from NumPy weights ----
# Their state is more than one matrix (memory and momentum; SwiGLU fast weights beside an attention
# cache), so these check the two forms against each other and the backward against central differences.

SEQUENCE_LAYERS = [
    # Titans, T = 10 in mini-batches of 4: two full and a short one.
    ("titans", 70, dict(heads=2, mini_batch=4, conv_kernel=3)),
    # One head, one mini-batch longer than the sequence.
    ("titans", 71, dict(heads=1, mini_batch=16)),
    # LaCT, T = 10 in chunks of 4 with a window of 4: the attention's cache and the fast weights both
    # cross chunk boundaries. base_lr 0.1 (1e-3 by default) so that the fast weights' updates carry weight.
    ("lact", 72, dict(attn_heads=2, lact_heads=2, chunk=4, window=4, base_lr=0.1)),
    # Muon without momentum, a hidden width twice the head's, a window longer than the chunk.
    ("lact", 73, dict(attn_heads=4, lact_heads=1, inter_multi=2, chunk=4, window=6, momentum=False,
                      muon=True, base_lr=0.1)),
]
SECOND_FORM = {"titans": "primal", "lact": "stream"}


def sequence_layer_case(member, case, options, T=10, D=8):
    rng = rng_for(case)
    make = getattr(tttlab, f"{member}_layer_params")
    params = make(D, options["heads"], seed=case, **{k: v for k, v in options.items() if k != "heads"}) \
        if member == "titans" else make(D, seed=case, **options)
    # Away from the initialisation (unit norms, zero offsets, small projections) so that every term matters.
    params = {k: v + 0.1 * rng.standard_normal(v.shape) for k, v in params.items()}
    return rng, params, rng.standard_normal((T, D))


@pytest.mark.parametrize("member,case,options", SEQUENCE_LAYERS)
def test_sequence_layer_forms_agree_and_float32_follows_float64(member, case, options):
    _, params, x = sequence_layer_case(member, case, options)
    layer = getattr(tttlab, f"{member}_layer")
    chunked = layer(x, params, **options)["y"]
    other = layer(x, params, **options, form=SECOND_FORM[member])["y"]
    # The same function in float64: only the order of the sums differs, ~1e-16 per operation over 10
    # tokens.
    assert np.abs(chunked).max() > 1e-2
    np.testing.assert_allclose(other, chunked, rtol=0, atol=1e-12)
    y32 = layer(x.astype(np.float32), {k: v.astype(np.float32) for k, v in params.items()}, **options)["y"]
    # fp32 rounding through the projections, 10 tokens of the inner loop and the norms: far inside 1e-4.
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, chunked, rtol=0, atol=1e-4)


# A step of 1e-6 here: both blocks normalise q and k per head to unit length (d = 4 or 8 channels), whose
# third derivatives are large, so along a random direction of a whole projection the h² term at
# h = 1e-5 reaches a few 1e-6 relative (it falls a hundredfold per tenfold smaller h, as truncation
# does). At 1e-6 it is near 3e-8 relative, while rounding, ε·|L|/h with |L| of order 10, grows to a
# few 1e-9 absolute: inside the 1e-8 absolute floor that covers the small gradients (the rates' and
# the biases', ~1e-3), where a wrong term would still be off by order one.
H_SEQUENCE = 1e-6


@pytest.mark.parametrize("member,case,options", SEQUENCE_LAYERS)
def test_sequence_layer_grad_matches_finite_differences(member, case, options):
    rng, params, x = sequence_layer_case(member, case, options)
    dy = rng.standard_normal(x.shape)
    layer, grad = getattr(tttlab, f"{member}_layer"), getattr(tttlab, f"{member}_layer_grad")
    y = lambda xx, pp: layer(xx, pp, **options)["y"]
    g = grad(x, params, dy=dy, **options)
    assert set(g) == set(params) | {"x"}
    check_gradient(lambda a: float((y(a["x"], params) * dy).sum()), {"x": x}, g, ["x"], rng, h=H_SEQUENCE)
    for name in params:
        f = lambda a: float((y(x, {**params, name: a[name]}) * dy).sum())
        check_gradient(f, {name: params[name]}, g, [name], rng, elements=1, h=H_SEQUENCE)


def test_titans_layer_refuses_bad_input():
    o = SEQUENCE_LAYERS[0][2]
    _, params, x = sequence_layer_case("titans", 74, o)
    with pytest.raises(ValueError, match=r"params lacks 'eta_proj.bias' \[1, 2\]"):
        tttlab.titans_layer(x, {k: v for k, v in params.items() if k != "eta_proj.bias"}, **o)
    with pytest.raises(ValueError, match="params has 'w0', which this layer does not have"):
        tttlab.titans_layer(x, {**params, "w0": np.zeros((4, 4))}, **o)
    with pytest.raises(ValueError, match=r"params\['ttt_norm.weight'\] must be of shape \[2, 4\]"):
        tttlab.titans_layer(x, {**params, "ttt_norm.weight": np.ones(8)}, **o)
    with pytest.raises(ValueError, match=r"params\['g_proj.weight'\] must be finite"):
        tttlab.titans_layer(x, {**params, "g_proj.weight": np.full((8, 8), np.inf)}, **o)
    with pytest.raises(ValueError, match="x must be finite"):
        tttlab.titans_layer(np.full((10, 8), np.nan), params, **o)
    with pytest.raises(TypeError, match="unexpected keyword argument 'chunk'"):
        tttlab.titans_layer(x, params, **o, chunk=4)
    with pytest.raises(ValueError, match="form must be 'chunked' or 'primal', got 'recurrent'"):
        tttlab.titans_layer(x, params, **o, form="recurrent")
    with pytest.raises(ValueError, match="heads"):
        tttlab.titans_layer_params(8, 3)
    with pytest.raises(ValueError, match=r"dy must be a 2-D array of shape \[10, 8\]"):
        tttlab.titans_layer_grad(x, params, dy=np.ones((9, 8)), **o)


def test_lact_layer_refuses_bad_input():
    o = SEQUENCE_LAYERS[2][2]
    _, params, x = sequence_layer_case("lact", 75, o)
    with pytest.raises(ValueError, match=r"params lacks 'w1\[1\]' \[4, 4\]"):
        tttlab.lact_layer(x, {k: v for k, v in params.items() if k != "w1[1]"}, **o)
    with pytest.raises(ValueError, match="params has 'momentum_proj.0.weight', which this layer does not have"):
        tttlab.lact_layer(x, params, **{**o, "momentum": False})
    with pytest.raises(ValueError, match=r"params\['qkv.weight'\] must be of shape \[8, 24\]"):
        tttlab.lact_layer(x, {**params, "qkv.weight": np.zeros((24, 8))}, **o)
    with pytest.raises(ValueError, match=r"params\['w0\[0\]'\] must be finite"):
        tttlab.lact_layer(x, {**params, "w0[0]": np.full((4, 4), np.nan)}, **o)
    with pytest.raises(ValueError, match=r"x must be a 2-D array \[T, 8\] with T >= 1"):
        tttlab.lact_layer(np.zeros((0, 8)), params, **o)
    with pytest.raises(TypeError, match="unexpected keyword argument 'heads'"):
        tttlab.lact_layer(x, params, **o, heads=2)
    with pytest.raises(ValueError, match="form must be 'chunked' or 'stream', got 'primal'"):
        tttlab.lact_layer(x, params, **o, form="primal")
    with pytest.raises(ValueError, match="RoPE needs an even attention head dim"):
        tttlab.lact_layer_params(8, attn_heads=8)
    with pytest.raises(ValueError, match="inter_multi must be at most 64, got 1000"):
        tttlab.lact_layer_params(8, inter_multi=1000)
    with pytest.raises(ValueError, match=r"dy must be a 2-D array of shape \[10, 8\]"):
        tttlab.lact_layer_grad(x, params, dy=np.ones((10, 7)), **o)
