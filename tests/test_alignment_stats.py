"""γ_t, ρ_t, bases, bootstrap and nulls against independent float64 references and known toy answers."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib import alignment_stats as als
from lib import dynamics, spectra, toys


def _loop_reference(trajs, bases):
    """γ, γ_in, ρ by explicit Python loops over prompts, tokens and layers (independent of the vectorised code)."""
    T = trajs[0].shape[0] - 1
    g, gi, r = np.zeros(T), np.zeros(T), np.zeros(T)
    n = 0
    for X in trajs:
        for i in range(X.shape[1]):
            n += 1
            for t in range(T):
                B = bases[t]
                a_in = np.sqrt(sum((B[:, k] @ X[t, i]) ** 2 for k in range(B.shape[1]))) / np.sqrt(X[t, i] @ X[t, i])
                a_out = np.sqrt(sum((B[:, k] @ X[t + 1, i]) ** 2 for k in range(B.shape[1]))) / np.sqrt(X[t + 1, i] @ X[t + 1, i])
                g[t] += a_out
                gi[t] += a_in
                r[t] += a_out > a_in
    return g / n, gi / n, r / n


def _random_trajs(rng, P=5, T=3, d=7):
    return [rng.standard_normal((T + 1, int(rng.integers(1, 6)), d)) for _ in range(P)]


def _orthonormal(rng, d, k):
    return np.linalg.qr(rng.standard_normal((d, k)))[0]


def test_gamma_rho_match_loops_with_mixed_line_and_plane_bases():
    rng = np.random.default_rng(0)
    trajs = _random_trajs(rng)
    raw = [_orthonormal(rng, 7, 1), _orthonormal(rng, 7, 2), _orthonormal(rng, 7, 1)]
    padded = np.zeros((3, 7, 2))
    for t, B in enumerate(raw):
        padded[t, :, : B.shape[1]] = B
    df = als.gamma_rho(als.TokenStates.from_trajectories(trajs), padded, n_boot=0)
    g, gi, r = _loop_reference(trajs, raw)
    np.testing.assert_allclose(df.gamma, g, rtol=1e-12)
    np.testing.assert_allclose(df.gamma_in, gi, rtol=1e-12)
    np.testing.assert_allclose(df.tilt, g - gi, atol=1e-14)
    np.testing.assert_allclose(df.rho, r, rtol=0, atol=0)
    assert df.layer.tolist() == [1, 2, 3]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(1e-3, 1e3))
def test_alignment_is_scale_and_sign_invariant(seed, scale):
    rng = np.random.default_rng(seed)
    trajs = _random_trajs(rng, P=3, T=2, d=5)
    B = _orthonormal(rng, 5, 1)
    ts = als.TokenStates.from_trajectories(trajs)
    ts2 = als.TokenStates.from_trajectories([scale * X for X in trajs])
    a = als.gamma_rho(ts, B, n_boot=0)
    b = als.gamma_rho(ts2, -B, n_boot=0)
    np.testing.assert_allclose(a[["gamma", "gamma_in", "rho"]], b[["gamma", "gamma_in", "rho"]], rtol=1e-12)
    # k = 1 agrees with lib.spectra.alignment
    np.testing.assert_allclose(als.step_alignment(ts, B), spectra.alignment(ts.states, B[:, 0]), rtol=1e-12)


def test_select_special_tokens_and_token_weighting():
    rng = np.random.default_rng(1)
    trajs = [rng.standard_normal((2, 4, 6)), rng.standard_normal((2, 2, 6))]
    special = [np.array([1, 0, 0, 1], bool), np.array([1, 0], bool)]
    ts = als.TokenStates.from_trajectories(trajs, special)
    content = ts.select("content")
    assert content.prompt.tolist() == [0, 0, 1] and content.n_prompts == 2
    assert ts.select("special").states.shape[1] == 3 and ts.select("all") is ts
    B = _orthonormal(rng, 6, 1)
    ref = np.mean([spectra.alignment(X[1, ~m], B[:, 0]).sum() for X, m in zip(trajs, special)]) * 2 / 3
    assert als.gamma_rho(content, B, n_boot=0).gamma[0] == pytest.approx(ref, rel=1e-12)
    with pytest.raises(ValueError, match="tokens must be"):
        ts.select("cls")
    with pytest.raises(ValueError, match="one entry per token"):
        als.TokenStates.from_trajectories(trajs, [np.ones(3, bool), np.ones(2, bool)])


def test_bootstrap_ratio_against_loop_reference():
    rng = np.random.default_rng(2)
    P = 12
    counts = rng.integers(1, 9, P).astype(float)
    sums = rng.random((2, P)) * counts
    est, lo, hi = als.bootstrap_ratio(sums, counts, n_boot=300, seed=5)
    np.testing.assert_allclose(est, sums.sum(1) / counts.sum(), rtol=1e-12)
    # Same draws, explicit loop.
    draws = np.random.default_rng(5).integers(0, P, size=(300, P))
    boot = np.array([[sums[j, idx].sum() / counts[idx].sum() for idx in draws] for j in range(2)])
    np.testing.assert_allclose(lo, np.quantile(boot, 0.025, axis=1), rtol=1e-12)
    np.testing.assert_allclose(hi, np.quantile(boot, 0.975, axis=1), rtol=1e-12)
    assert np.all(lo <= est) and np.all(est <= hi)


def test_bootstrap_interval_covers_known_mean():
    """Prompts with i.i.d. per-token values of known mean: the 95% interval covers it most of the time."""
    covered = 0
    for s in range(40):
        rng = np.random.default_rng(100 + s)
        counts = rng.integers(3, 10, 60).astype(float)
        sums = np.array([rng.random(int(c)).sum() for c in counts])  # uniform(0, 1): mean 0.5
        _, lo, hi = als.bootstrap_ratio(sums, counts, n_boot=400, seed=s)
        covered += lo <= 0.5 <= hi
    assert covered >= 33


@pytest.mark.parametrize("d, k", [(3, 1), (384, 1), (384, 2), (50, 3)])
def test_baseline_subspace_monte_carlo(d, k):
    U = als.random_directions(d, 40_000, seed=1)
    mc = np.linalg.norm(U[:, :k], axis=1).mean()
    assert als.baseline_subspace(d, k) == pytest.approx(mc, rel=0.015)


def test_baseline_subspace_closed_forms():
    for d in (2, 7, 768, 4096):
        assert als.baseline_subspace(d, 1) == pytest.approx(spectra.baseline_alignment(d), rel=1e-12)
    assert als.baseline_subspace(4096, 2) == pytest.approx(np.sqrt(np.pi / (2 * 4096)), rel=1e-3)
    assert als.baseline_subspace(5, 5) == 1.0
    with pytest.raises(ValueError):
        als.baseline_subspace(5, 6)


def test_eigen_bases_real_and_complex_against_scipy():
    rng = np.random.default_rng(3)
    S = rng.standard_normal((6, 6))
    Sinv = np.linalg.inv(S)
    # real λ1 = 3, then a pair 2 e^{±0.5i}, then 1, 0.5, 0.2
    rot = 2 * np.array([[np.cos(0.5), -np.sin(0.5)], [np.sin(0.5), np.cos(0.5)]])
    A = S @ scipy.linalg.block_diag([[3.0]], rot, [[1.0]], [[0.5]], [[0.2]]) @ Sinv
    # complex λ1 = 3 e^{±0.3i}, then 2.5 real
    rot3 = 3 * np.array([[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]])
    C = S @ scipy.linalg.block_diag(rot3, [[2.5]], [[1.0]], [[0.5]], [[0.1]]) @ Sinv
    eb = als.eigen_bases(np.stack([A, C]))
    assert eb.lambda1_complex.tolist() == [False, True] and eb.k1.tolist() == [1, 2] and eb.k12.tolist() == [3, 3]
    np.testing.assert_allclose(eb.gap_ratio, [2 / 3, 2.5 / 3], rtol=1e-10)
    np.testing.assert_allclose(eb.subspace_ratio, [1 / 3, 1 / 3], rtol=1e-10)
    # v1 of A is S[:, 0] up to sign; the plane of C is span(S[:, 0:2]); span{v1, v2} of A is span(S[:, :3])
    def proj(B, cols):
        Q = np.linalg.qr(S[:, cols])[0]
        return np.linalg.norm(Q @ (Q.T @ B) - B)
    assert proj(eb.v1[0], [0]) < 1e-10 and proj(eb.v1[1], [0, 1]) < 1e-10
    assert proj(eb.v12[0], [0, 1, 2]) < 1e-10 and proj(eb.v2[1], [2]) < 1e-10
    for B in (eb.v1, eb.v12):  # orthonormal used columns, zero padding
        G = np.einsum("tdk,tdl->tkl", B, B)
        assert np.allclose(G, np.einsum("tkl->tkl", G * 0) + np.stack([np.diag((np.arange(B.shape[2]) < k).astype(float)) for k in (np.linalg.matrix_rank(b) for b in B)]), atol=1e-10)
    assert eb.layer(1).n_layers == 1 and eb.layer(1).lambda1_complex.tolist() == [True]


def test_uniform_attention_toy_rho_is_one_when_gap_positive():
    """Uniform attention: every token leaves a layer as N(F x̄), so once all tokens agree the step is a power step.

    With a real dominant λ1 (gap ratio < 1), a *normal* F (orthonormal eigenvectors, so
    cos² = c₁²λ₁^{2t} / Σ_k c_k²|λ_k|^{2t} rises strictly) and tokens at consensus, the alignment with v1 rises
    at every step for every token: ρ = 1. The reference answer comes from the power method, not from γ/ρ.
    (For a non-normal F the cosine of the power iterate need not rise at every step; see the last check.)
    """
    d = 24
    F = toys.toy_matrix("real", d, gap=0.7, seed=4, cond=1.0)
    w = toys.weights_from_matrix(F, n_heads=4)
    p = spectra.principal(F)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(d)
    x0 = np.repeat(x[None, None], 5, axis=1)  # (1, n=5, d) all equal
    traj = dynamics.simulate(w, torch.as_tensor(x0[0]), 8, attention="uniform").numpy()
    ts = als.TokenStates.from_trajectories([traj])
    eb = als.eigen_bases(np.repeat(F[None], 8, axis=0))
    df = als.gamma_rho(ts, eb, n_boot=0)
    assert df.rho.tolist() == [1.0] * 8
    # γ_t equals the power method's alignment after t+1 steps
    from lib.power import power_method

    pm = power_method(F, x, 8)
    np.testing.assert_allclose(df.gamma, spectra.alignment(pm[1:], p.vector), rtol=1e-10)
    # and mixed initial tokens reach consensus after one uniform step: ρ = 1 from layer 2 on
    traj2 = dynamics.simulate(w, torch.as_tensor(rng.standard_normal((5, d))), 8, attention="uniform").numpy()
    df2 = als.gamma_rho(als.TokenStates.from_trajectories([traj2]), eb, n_boot=0)
    assert df2.rho.tolist()[1:] == [1.0] * 7
    # non-normal F (cond 3), same start: the exact power method can lose alignment at some step
    Fn = toys.toy_matrix("real", d, gap=0.7, seed=4, cond=3.0)
    trajn = dynamics.simulate(toys.weights_from_matrix(Fn, n_heads=4), torch.as_tensor(x0[0]), 8, attention="uniform").numpy()
    dfn = als.gamma_rho(als.TokenStates.from_trajectories([trajn]), als.eigen_bases(np.repeat(Fn[None], 8, axis=0)), n_boot=0)
    assert min(dfn.rho) == 0.0


def test_random_null_near_half_and_baseline_on_isotropic_states():
    rng = np.random.default_rng(6)
    trajs = [rng.standard_normal((3, 20, 64)) for _ in range(30)]
    null = als.random_null(als.TokenStates.from_trajectories(trajs), m=50, seed=1)
    assert np.all(np.abs(null.rho_null - 0.5) < 0.02)
    np.testing.assert_allclose(null.gamma_null, als.baseline_subspace(64), rtol=0.03)
    assert np.all(null.rho_null_lo <= null.rho_null) and np.all(null.rho_null <= null.rho_null_hi)


def test_cross_layer_diagonal_equals_gamma_rho():
    rng = np.random.default_rng(7)
    trajs = _random_trajs(rng, P=4, T=3, d=8)
    ts = als.TokenStates.from_trajectories(trajs)
    F = rng.standard_normal((3, 8, 8))
    eb = als.eigen_bases(F)
    g, r = als.cross_layer(ts, eb)
    df = als.gamma_rho(ts, eb, n_boot=0)
    np.testing.assert_allclose(np.diag(g), df.gamma, rtol=1e-12)
    np.testing.assert_allclose(np.diag(r), df.rho, rtol=1e-12)
    assert g.shape == (3, 3)


def test_shared_convergence_follows_the_gap_rate():
    d = 20
    F = toys.toy_matrix("real", d, gap=0.8, seed=9)
    w = toys.weights_from_matrix(F, n_heads=2)
    rng = np.random.default_rng(1)
    x0 = [torch.as_tensor(rng.standard_normal((4, d))) for _ in range(3)]
    trajs = [dynamics.simulate(w, x, 60, attention="uniform").numpy() for x in x0]
    eb = als.eigen_bases(F)
    df = als.shared_convergence(als.TokenStates.from_trajectories(trajs), eb, anchor=10)
    v1 = df[df.target == "v₁"].set_index("step")
    assert v1.rate.iloc[0] == pytest.approx(0.8, rel=1e-8)
    assert v1.alignment[60] > 1 - 1e-8
    ratio = (v1.distance[40] / v1.distance[20]) ** (1 / 20)
    assert ratio == pytest.approx(0.8, rel=0.02)
    with pytest.raises(ValueError, match="one shared layer"):
        als.shared_convergence(als.TokenStates.from_trajectories(trajs), als.eigen_bases(np.stack([F, F])))


def test_checker_accepts_reference_and_rejects_wrong(capsys):
    def good(Xi, Xo, v):
        ai = np.abs(Xi @ v) / np.linalg.norm(Xi, axis=1)
        ao = np.abs(Xo @ v) / np.linalg.norm(Xo, axis=1)
        return ao.mean(), (ao > ai).mean()

    def signed(Xi, Xo, v):
        ai = (Xi @ v) / np.linalg.norm(Xi, axis=1)
        ao = (Xo @ v) / np.linalg.norm(Xo, axis=1)
        return ao.mean(), (ao > ai).mean()

    def todo(Xi, Xo, v):
        raise NotImplementedError

    assert als.check_gamma_rho(good)
    assert not als.check_gamma_rho(signed)
    capsys.readouterr()
    assert not als.check_gamma_rho(todo)
    assert "not implemented yet" in capsys.readouterr().out


# -- summaries for tables and text ------------------------------------------------------------------
def _hand_frames():
    """Two variants × two layers of gamma_rho / random_null rows with round numbers."""
    import pandas as pd

    res = pd.DataFrame({
        "layer": [1, 2, 1, 2], "variant": ["a", "a", "b", "b"],
        "gamma": [0.2, 0.4, 0.1, 0.3], "gamma_lo": [0.15, 0.35, 0.05, 0.25], "gamma_hi": [0.25, 0.45, 0.15, 0.35],
        "tilt": [0.01, -0.02, 0.03, 0.0],
        "rho": [0.6, 0.4, 0.55, 0.5], "rho_lo": [0.55, 0.3, 0.45, 0.42], "rho_hi": [0.65, 0.45, 0.6, 0.58],
    })
    null = pd.DataFrame({
        "layer": [2, 1, 2, 1], "variant": ["a", "a", "b", "b"],  # other row order: the merge must match keys
        "gamma_null": [0.1, 0.1, 0.2, 0.2], "gamma_null_lo": 0.0, "gamma_null_hi": 1.0,
        "rho_null": [0.52, 0.48, 0.51, 0.49], "rho_null_lo": [0.4, 0.41, 0.42, 0.43], "rho_null_hi": [0.6, 0.61, 0.62, 0.63],
    })
    return res, null


def test_gamma_rho_table_columns_are_the_hand_computations():
    res, null = _hand_frames()
    t = als.gamma_rho_table(res, null, b_d=0.05)
    assert list(t.columns) == ["variant", "layer", "γ_t", "γ_t 95% CI", "γ_t / b_d", "Δγ_t", "ρ_t", "ρ_t 95% CI",
                               "ρ_t null (random u)", "null 95% range"]
    assert t.variant.tolist() == ["a", "a", "b", "b"] and t.layer.tolist() == [1, 2, 1, 2]
    np.testing.assert_allclose(t["γ_t / b_d"], [4.0, 8.0, 2.0, 6.0], rtol=1e-12)
    np.testing.assert_allclose(t["Δγ_t"], res.tilt)
    np.testing.assert_allclose(t["ρ_t null (random u)"], [0.48, 0.52, 0.49, 0.51])  # matched by (layer, variant)
    assert t["γ_t 95% CI"][0] == "[0.1500, 0.2500]" and t["ρ_t 95% CI"][1] == "[0.300, 0.450]"
    assert t["null 95% range"].tolist() == ["[0.410, 0.610]", "[0.400, 0.600]", "[0.430, 0.630]", "[0.420, 0.620]"]


def test_null_range_diagonal_wins_and_range_position():
    _, null = _hand_frames()
    nr = als.null_range(null, b_d=0.1)
    assert (nr.rho_min, nr.rho_max) == (0.48, 0.52) and nr.gamma_ratio_mean == pytest.approx(1.5, rel=1e-12)
    m = np.array([[3.0, 1.0, 2.0], [5.0, 4.0, 0.0], [1.0, 1.0, 1.0]])  # rows 0 and 2 (a tie counts) win
    assert als.diagonal_wins(m) == 2
    assert als.diagonal_wins(m.T) == 1  # rows [3, 5, 1], [1, 4, 1], [2, 0, 1]: only the middle one wins
    with pytest.raises(ValueError, match="square"):
        als.diagonal_wins(np.ones((2, 3)))
    assert [als.range_position(x, [0.2, 0.5, 0.3]) for x in (0.6, 0.5, 0.25, 0.2, 0.1)] == [
        "above", "within", "within", "within", "below"]
    with pytest.raises(ValueError, match="empty"):
        als.range_position(1.0, [])
