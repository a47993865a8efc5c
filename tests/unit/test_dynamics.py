"""lib.theory.dynamics against a slow, obviously-correct reference (explicit loops over tokens and heads)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lib.models.weights import AttentionWeights
from lib.theory import dynamics


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


# -- the experiments of chapters 1 and 2 (lib.theory.dynamics' toy-weight helpers) ------------------------------------------
from lib.linalg import power, spectra
from lib.methods import alignment as als  # noqa: E402
from lib.theory import toys  # noqa: E402


def _toy(d=16, gap=0.6, seed=0, heads=4):
    F = toys.toy_matrix("real", d, gap=gap, seed=seed)
    return F, toys.weights_from_matrix(F, heads, seed=seed)


def test_shared_run_is_simulate_on_toy_weights():
    F, w = _toy()
    X0 = toys.random_tokens(6, 16, seed=3)
    np.testing.assert_array_equal(dynamics.shared_run(F, 5, heads=4, x0=X0, seed=0),
                                  dynamics.simulate(w, X0, 5).numpy())
    default = dynamics.shared_run(F, 5, heads=4, n_tokens=6, seed=0)
    np.testing.assert_array_equal(default, dynamics.simulate(w, toys.random_tokens(6, 16, seed=0), 5).numpy())


def test_alignment_curves_follow_simulate_and_the_power_method():
    F, w = _toy()
    X0 = toys.random_tokens(8, 16, seed=1)
    v1 = spectra.principal(F).vector
    cur = dynamics.alignment_curves(w, X0, 10, {"v₁": v1}, {"uniform": dict(attention="uniform"), "plain": {}},
                                    power_method_of=F)
    assert list(dict.fromkeys(cur.variant)) == ["power method (mean token)", "uniform", "plain"]
    pm = cur[cur.variant == "power method (mean token)"]["mean alignment"].to_numpy()
    np.testing.assert_array_equal(pm, spectra.alignment(power.power_method(F, X0.mean(0), 10), v1))
    plain = cur[cur.variant == "plain"]["mean alignment"].to_numpy()
    np.testing.assert_array_equal(plain, spectra.alignment(dynamics.simulate(w, X0, 10).numpy(), v1).mean(1))
    uni = cur[cur.variant == "uniform"]["mean alignment"].to_numpy()
    assert uni[-1] > 0.999  # uniform attention is the power method: it converges


def test_one_layer_tilt_matches_alignment_stats():
    F, w = _toy(d=16, heads=2)
    v1 = spectra.principal(F).vector
    tt = als.one_layer_tilt(w, v1, n_tokens=5, n_sets=4, m=50, seed=2)
    ts = als.TokenStates.from_trajectories(
        [dynamics.simulate(w, toys.random_tokens(5, 16, seed=s), 1).numpy() for s in range(4)])
    null = als.random_null(ts, v1[:, None][None], m=50, seed=2).iloc[0]
    assert (tt.gamma, tt.p_gamma, tt.rho_null_lo, tt.draws) == (null.gamma, null.p_gamma, null.rho_null_lo, 50)
    a_in = spectra.alignment(ts.states[0], v1).mean()
    assert tt.gamma_in == pytest.approx(a_in, rel=1e-12)
    assert tt.chance == pytest.approx(als.baseline_subspace(16, 1))
    assert (tt.tilt, tt.p_tilt, tt.tilt_null_hi) == (null.tilt, null.p_tilt, null.tilt_null_hi)  # #25 §6
    assert tt.tilt == pytest.approx(tt.gamma - tt.gamma_in, abs=1e-12)


def test_consensus_curves_and_rates():
    cons = dynamics.consensus_curves([0.5], d=16, steps=60, seed=0, heads=2, n_tokens=5)
    assert list(cons.columns) == ["t", "|λ₂/λ₁|", "statistic", "alignment with v₁"] and len(cons) == 2 * 61
    least = cons[cons.statistic == "min over tokens"]["alignment with v₁"].to_numpy()
    mean = cons[cons.statistic == "mean over tokens"]["alignment with v₁"].to_numpy()
    assert np.all(least <= mean + 1e-15) and least[-1] > 0.999
    rate = dynamics.consensus_rates([0.5, 0.8], [0], d=16, steps=150, heads=2, n_tokens=5)
    assert list(rate.columns) == ["gap ratio |λ₂/λ₁|", "seed", "fitted per-layer factor", "layers to alignment > 0.999"]
    np.testing.assert_allclose(rate["fitted per-layer factor"], rate["gap ratio |λ₂/λ₁|"], atol=0.05)
    assert rate["layers to alignment > 0.999"].iloc[0] < rate["layers to alignment > 0.999"].iloc[1]


def test_bipartite_threshold_scan_finds_the_threshold():
    F = toys.toy_matrix("real", 12, gap=0.5, seed=0, cond=2.0)
    v1 = spectra.principal(F).vector
    signs = [1] * 4 + [-1] * 2
    c_star = 0.5 * math.log(2)
    scan = dynamics.bipartite_threshold_scan(F, v1, signs, [0.5 * c_star, 2 * c_star], seed=1)
    change = scan["largest token change ‖Δxᵢ‖"].to_numpy()
    assert change[0] == pytest.approx(2 * math.sqrt(12)) and change[1] < 1e-12


def test_bipartite_survival_one_aligned_head_keeps_the_split():
    F = toys.toy_matrix("real", 12, gap=0.6, seed=0, cond=2.0)
    v1 = spectra.principal(F).vector
    surv = dynamics.bipartite_survival(F, v1, [1] * 4 + [-1] * 2, heads=(1, 4), qk=("aligned", "random"),
                                       qk_gain=3.0, runs=3, steps=100)
    assert list(surv.columns) == ["Q, K", "heads", "share of runs still bipartite", "heads with cₕ < 0"]
    assert surv.iloc[0]["share of runs still bipartite"] == 1.0 and (surv[surv["Q, K"] == "aligned"][
        "heads with cₕ < 0"] == 0).all()


@pytest.mark.parametrize("residual", [False, True])
def test_consensus_jacobian_radius(residual):
    """Without a residual: max_{j≠k}|λ_j|/|λ_k| (prop-stability); with one: max(1, max_{j≠k}|1 + λ_j|)/|1 + λ_k|
    (exercise 2.3: the residual keeps the differences between tokens)."""
    d, n = 8, 3
    F = toys.matrix_with_spectrum([1.0, -0.9, -0.7, -0.6, -0.5, -0.4, -0.3, -0.2], seed=5, cond=2.0)
    lams, V = spectra.eig(F)
    w = toys.weights_from_matrix(F, 2, seed=5, qk_gain=1.5)
    lam = lams.real
    for k in range(3):
        got = dynamics.consensus_jacobian_radius(w, V[:, k].real, n, residual=residual)
        others = np.delete(lam, k)
        want = (max(1.0, np.abs(1 + others).max()) / abs(1 + lam[k]) if residual
                else np.abs(others).max() / abs(lam[k]))
        assert got == pytest.approx(want, rel=1e-8)
