"""lib.dynamics against a slow, obviously-correct reference (explicit loops over tokens and heads)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lib import dynamics
from lib.models.weights import AttentionWeights


def random_weights(rng, d, H, dh, *, biases=False, causal=False, window=None, scale=None):
    """AttentionWeights with independent Gaussian entries (H·d_h may differ from d)."""
    def mat(r, c):
        return torch.tensor(rng.standard_normal((r, c)) / math.sqrt(c))

    def vec(m):
        return torch.tensor(rng.standard_normal(m)) if biases else None

    return AttentionWeights(
        Q=mat(H * dh, d), K=mat(H * dh, d), V=mat(H * dh, d), O=mat(d, H * dh),
        b_Q=vec(H * dh), b_K=vec(H * dh), b_V=vec(H * dh), b_O=vec(d),
        n_heads=H, n_kv_heads=H, head_dim=dh, score_scale=scale if scale is not None else 1 / math.sqrt(dh),
        causal=causal, window=window,
    )


def ref_step(w, X, *, norm, radius, residual, attention, beta, keep_vo_bias):
    """One layer, token by token and head by head, in NumPy float64."""
    Q, K, V, O = (np.asarray(m, dtype=np.float64) for m in (w.Q, w.K, w.V, w.O))
    bq = np.zeros(Q.shape[0]) if w.b_Q is None else np.asarray(w.b_Q)
    bk = np.zeros(K.shape[0]) if w.b_K is None else np.asarray(w.b_K)
    n, d = X.shape
    H, dh = w.n_heads, w.head_dim
    Y = np.zeros((n, d))
    for i in range(n):
        visible = [j for j in range(n)
                   if (not w.causal or j <= i) and (w.window is None or abs(i - j) < w.window)]
        for h in range(H):
            rows = slice(h * dh, (h + 1) * dh)
            if attention == "uniform":
                a = np.full(len(visible), 1.0 / len(visible))
            else:
                q = Q[rows] @ X[i] + bq[rows]
                s = np.array([beta * w.score_scale * q @ (K[rows] @ X[j] + bk[rows]) for j in visible])
                a = np.exp(s - s.max())
                a /= a.sum()
            mix = sum(a[k] * X[j] for k, j in enumerate(visible))
            Y[i] += O[:, rows] @ (V[rows] @ mix)
        if keep_vo_bias:
            if w.b_V is not None:
                Y[i] += O @ np.asarray(w.b_V)
            if w.b_O is not None:
                Y[i] += np.asarray(w.b_O)
    if residual:
        Y = Y + X
    r = math.sqrt(d) if radius is None else radius
    out = np.empty_like(Y)
    for i in range(n):
        y = Y[i]
        if norm == "layernorm":
            y = y - y.mean()
        out[i] = y if norm == "none" else r * y / np.sqrt(np.sum(y * y))
    return out


def ref_simulate(layers, X, steps, **kw):
    norm, radius = kw["norm"], kw["radius"]
    out = [ref_normalize(X, norm, radius)]
    for t in range(steps):
        out.append(ref_step(layers[t], out[-1], **kw))
    return np.stack(out)


def ref_normalize(X, norm, radius):
    if norm == "none":
        return X
    return np.stack([ref_step_norm(x, norm, radius) for x in X])


def ref_step_norm(x, norm, radius):
    r = math.sqrt(x.size) if radius is None else radius
    if norm == "layernorm":
        x = x - x.mean()
    return r * x / np.sqrt(np.sum(x * x))


CASES = [
    # (n, d, H, dh, biases, causal, window, norm, residual, attention, beta, keep_vo_bias, radius)
    (1, 4, 1, 4, False, False, None, "l2", False, "softmax", 1.0, False, None),
    (5, 8, 2, 4, True, False, None, "l2", False, "softmax", 1.0, False, None),
    (6, 8, 4, 2, True, True, None, "layernorm", False, "softmax", 2.0, False, None),
    (7, 6, 3, 3, False, True, 3, "none", False, "softmax", 0.5, False, None),
    (4, 8, 2, 3, True, False, None, "l2", True, "softmax", 1.0, True, 1.0),  # H·d_h ≠ d
    (5, 8, 2, 4, True, True, 2, "layernorm", True, "uniform", 1.0, True, None),
    (3, 10, 5, 2, False, False, None, "l2", False, "uniform", 1.0, False, 2.5),
    (8, 12, 3, 4, True, False, 4, "l2", True, "softmax", 3.0, False, None),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", range(4))
def test_simulate_matches_reference(case, seed):
    n, d, H, dh, biases, causal, window, norm, residual, attention, beta, keep_vo_bias, radius = case
    rng = np.random.default_rng(1000 * seed + CASES.index(case))
    layers = [random_weights(rng, d, H, dh, biases=biases, causal=causal, window=window) for _ in range(3)]
    X = rng.standard_normal((n, d))
    kw = dict(norm=norm, radius=radius, residual=residual, attention=attention, beta=beta, keep_vo_bias=keep_vo_bias)
    got = dynamics.simulate(layers, X, **kw)
    want = ref_simulate(layers, X, 3, **kw)
    assert got.dtype == torch.float64 and got.shape == (4, n, d)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_shared_weights_and_batches(seed):
    rng = np.random.default_rng(seed)
    w = random_weights(rng, 8, 2, 4, biases=True)
    X = rng.standard_normal((3, 2, 5, 8))  # two batch axes
    got = dynamics.simulate(w, X, 6)
    assert got.shape == (7, 3, 2, 5, 8)
    kw = dict(norm="l2", radius=None, residual=False, attention="softmax", beta=1.0, keep_vo_bias=False)
    for a in range(3):
        for b in range(2):
            np.testing.assert_allclose(got[:, a, b].numpy(), ref_simulate([w] * 6, X[a, b], 6, **kw), rtol=1e-10, atol=1e-10)


def test_layernorm_equals_torch_layernorm():
    rng = np.random.default_rng(0)
    Y = torch.tensor(rng.standard_normal((4, 7, 16)))
    got = dynamics.normalize(Y, "layernorm")
    want = torch.nn.functional.layer_norm(Y, (16,), eps=0.0)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_consensus_is_invariant(causal):
    """C4: equal tokens stay equal and follow N_r(F x) exactly, multi-head and masked."""
    rng = np.random.default_rng(3)
    w = random_weights(rng, 12, 3, 4, biases=True, causal=causal)
    x = rng.standard_normal(12)
    X = np.tile(x, (9, 1))
    out = dynamics.layer_step(w, X).numpy()
    F = (w.O @ w.V).numpy()
    y = F @ x
    np.testing.assert_allclose(out, np.tile(math.sqrt(12) * y / np.linalg.norm(y), (9, 1)), rtol=1e-12, atol=1e-12)


def test_attention_matrices_are_stochastic_and_masked():
    rng = np.random.default_rng(1)
    w = random_weights(rng, 8, 2, 4, causal=True, window=3)
    A = dynamics.attention_matrices(w, rng.standard_normal((6, 8)))
    assert A.shape == (2, 6, 6)
    torch.testing.assert_close(A.sum(-1), torch.ones(2, 6, dtype=torch.float64))
    assert torch.all(A[:, ~dynamics.visibility_mask(6, causal=True, window=3)] == 0)


def test_beta_zero_is_uniform():
    rng = np.random.default_rng(2)
    w = random_weights(rng, 8, 2, 4, biases=True, causal=True)
    X = rng.standard_normal((5, 8))
    torch.testing.assert_close(
        dynamics.simulate(w, X, 3, beta=0.0), dynamics.simulate(w, X, 3, attention="uniform"), rtol=1e-12, atol=1e-12
    )


def test_accepts_layer_objects_and_checks_input():
    rng = np.random.default_rng(4)
    w = random_weights(rng, 8, 2, 4)

    class Layer:  # what model.layer(t) returns: an object with .attention
        attention = w

    X = rng.standard_normal((3, 8))
    torch.testing.assert_close(dynamics.simulate([Layer(), Layer()], X), dynamics.simulate(w, X, 2))
    with pytest.raises(ValueError, match="steps is required"):
        dynamics.simulate(w, X)
    with pytest.raises(ValueError, match="exceeds"):
        dynamics.simulate([w], X, 2)
    with pytest.raises(ValueError, match="d = 5"):
        dynamics.simulate(w, rng.standard_normal((3, 5)), 1)
    with pytest.raises(TypeError, match="AttentionWeights"):
        dynamics.simulate(np.eye(8), X, 1)
    with pytest.raises(ValueError, match="norm"):
        dynamics.simulate(w, X, 1, norm="rms")


def test_real_model_weights(minilm):
    """Per-layer weights of the offline model (objects with .attention) run through the simulator and
    agree with the loop reference; entry 0 is the normalized embedding output."""
    hs = minilm.hidden_states(["Tokens tilt toward the principal eigenvector."])[0]
    X0 = hs[0, :5].numpy()
    layers = [minilm.layer(t) for t in range(2)]
    got = dynamics.simulate(layers, X0, keep_vo_bias=True)
    kw = dict(norm="l2", radius=None, residual=False, attention="softmax", beta=1.0, keep_vo_bias=True)
    want = ref_simulate([layer.attention for layer in layers], X0, 2, **kw)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-9)
    assert got.shape == (3, 5, minilm.d_model)


def test_per_batch_beta():
    rng = np.random.default_rng(5)
    w = random_weights(rng, 8, 2, 4, biases=True)
    X = rng.standard_normal((5, 8))
    betas = [0.0, 0.5, 3.0]
    got = dynamics.simulate(w, np.stack([X] * 3), 4, beta=torch.tensor(betas))
    for j, b in enumerate(betas):
        torch.testing.assert_close(got[:, j], dynamics.simulate(w, X, 4, beta=b), rtol=1e-12, atol=1e-12)
