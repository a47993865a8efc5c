"""γ_t, ρ_t, bases, bootstrap and nulls against independent float64 references and known toy answers."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib import stats
from lib.chapters import real_models as rm
from lib.chapters import real_models_directions as rd
from lib.linalg import spectra
from lib.methods import alignment as als
from lib.page import real_models as rp
from lib.theory import dynamics, toys


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
    # k = 1 agrees with lib.linalg.spectra.alignment
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
    est, lo, hi = stats.bootstrap_ratio(sums, counts, n_boot=300, seed=5)
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
        _, lo, hi = stats.bootstrap_ratio(sums, counts, n_boot=400, seed=s)
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
    from lib.linalg.power import power_method

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


def _isotropic(seed=6, P=30, n=20, T=2, d=64):
    rng = np.random.default_rng(seed)
    return als.TokenStates.from_trajectories([rng.standard_normal((T + 1, n, d)) for _ in range(P)])


def _mixed_bases(rng, d, ks):
    """Zero-padded ``(T, d, max k)`` orthonormal bases of the given dimensions."""
    B = np.zeros((len(ks), d, max(ks)))
    for t, k in enumerate(ks):
        B[t, :, :k] = _orthonormal(rng, d, k)
    return B


def test_isotropic_planar_bases_gamma_ratio_is_one_and_the_null_agrees():
    """Issue §1: for isotropic tokens a plane's chance level is c_{d,2}, not the line's c_{d,1} (ratio π/2·(1+O(1/d))
    too high with the old 1-D baseline; reverting ``chance`` to ``baseline_subspace(d, 1)`` fails here)."""
    ts = _isotropic(P=80, n=25)  # 2000 tokens: γ/chance has a standard error of about 0.017 (k = 1)
    B = _mixed_bases(np.random.default_rng(0), 64, [2, 1])
    df = als.gamma_rho(ts, B, n_boot=200)
    assert df.k.tolist() == [2, 1]
    np.testing.assert_allclose(df.chance, [als.baseline_subspace(64, 2), als.baseline_subspace(64, 1)], rtol=1e-12)
    np.testing.assert_allclose(df.gamma_ratio, 1.0, atol=0.07)  # the old 1-D chance level gives 1.57 for the plane
    assert np.all(df.gamma_ratio_lo <= df.gamma_ratio) and np.all(df.gamma_ratio <= df.gamma_ratio_hi)
    np.testing.assert_allclose(df.gamma_ratio_lo * df.chance, df.gamma_lo, rtol=1e-12)
    null = als.random_null(ts, B, m=400, seed=1)
    np.testing.assert_allclose(null.gamma_null, null.chance, rtol=0.02)  # the null's mean is the chance level
    np.testing.assert_allclose(null.gamma_ratio_null, 1.0, atol=0.02)
    assert np.all(np.abs(null.rho_null - 0.5) < 0.03)
    # γ is one more draw from the null: inside its 95% range, and no layer beats it
    assert np.all((null.gamma_null_lo <= null.gamma) & (null.gamma <= null.gamma_null_hi))
    assert np.all(null.q_gamma > 0.05) and np.all(null.q_rho > 0.05)
    assert np.all(null.rho_null_lo <= null.rho_null) and np.all(null.rho_null <= null.rho_null_hi)


@pytest.mark.parametrize("d, k", [(6, 1), (6, 3), (40, 2)])
def test_random_subspaces_are_uniform_beta_moments(d, k):
    """‖Qᵀx‖² for a fixed unit x and a uniform k-subspace is Beta(k/2, (d−k)/2): mean k/d and its variance.

    Wrong draws fail: Gaussian columns without orthonormalisation (mean ≠ k/d), columns normalised one by one but
    not orthogonalised (d = 6, k = 3: variance too large), or one direction whatever k (mean 1/d)."""
    Q = als.random_subspaces(d, k, 40_000, np.random.default_rng(3))
    assert Q.shape == (40_000, d, k)
    np.testing.assert_allclose(np.einsum("mdk,mdl->mkl", Q[:50], Q[:50]), np.broadcast_to(np.eye(k), (50, k, k)), atol=1e-12)
    a2 = np.sum(Q[:, 0, :] ** 2, axis=1)  # ‖Qᵀe₁‖² for the fixed unit vector e₁
    a, b = k / 2, (d - k) / 2
    assert a2.mean() == pytest.approx(a / (a + b), rel=0.02)
    assert a2.var() == pytest.approx(a * b / ((a + b) ** 2 * (a + b + 1)), rel=0.05)
    assert np.sqrt(a2).mean() == pytest.approx(als.baseline_subspace(d, k), rel=0.01)


def test_null_draws_use_each_layers_own_dimension():
    """Issue §1: the null of a planar layer draws planes. Isotropic states: per-layer null mean = c_{d,k_t}
    (reverting to 1-D draws, ``kt = 1``, gives c_{d,1} for the planar layers and fails)."""
    ts = _isotropic(seed=8, P=20, n=15, T=3, d=30)
    eb_dims = [2, 1, 3]
    B = _mixed_bases(np.random.default_rng(1), 30, eb_dims)
    gam, rho = als.null_draws(ts, B, m=300, seed=2, chunk=70)  # chunks that do not divide m
    assert gam.shape == rho.shape == (3, 300)
    np.testing.assert_allclose(gam.mean(axis=1), [als.baseline_subspace(30, k) for k in eb_dims], rtol=0.015)
    # a draw equals gamma_rho against that very subspace (same definition, float32 projections)
    rng = np.random.default_rng(2)
    Q0 = als.random_subspaces(30, 2, 70, rng)[0]
    ref = als.gamma_rho(ts, _pad_to(Q0, 3), n_boot=0)
    assert gam[0, 0] == pytest.approx(ref.gamma[0], rel=1e-5) and rho[0, 0] == pytest.approx(ref.rho[0], abs=1e-12)


def _pad_to(Q, width):
    out = np.zeros((3, Q.shape[0], width))
    out[:, :, : Q.shape[1]] = Q
    return out


def test_null_rho_is_a_strict_increase_and_empirical_p():
    """Unchanged states: every token's alignment stays equal, so ρ = 0 in the data and in every null draw
    (a ``>=`` would give 1). p = (1 + #{null ≥ obs}) / (m + 1): never 0, 1 when every draw ties."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((1, 10, 8))
    ts = als.TokenStates.from_trajectories([np.concatenate([X, X])])
    B = _orthonormal(rng, 8, 1)[None]
    assert als.gamma_rho(ts, B, n_boot=0).rho[0] == 0.0
    _, rho = als.null_draws(ts, B, m=50)
    assert np.all(rho == 0.0)
    null = als.random_null(ts, B, m=50)
    assert null.p_rho[0] == 1.0
    p = stats.empirical_p(np.array([0.5, 2.0, 0.0]), np.array([[0.1, 0.5, 0.9, 1.0], [0.0, 1.0, 1.5, 1.9], [0.0, 0.0, 0.0, 0.0]]))
    np.testing.assert_allclose(p, [(1 + 3) / 5, 1 / 5, 1.0])  # ties count against the observation


def test_random_null_q_values_are_bh_across_layers():
    from lib.stats import benjamini_hochberg

    rng = np.random.default_rng(5)
    trajs = _random_trajs(rng, P=6, T=4, d=9)
    ts = als.TokenStates.from_trajectories(trajs)
    B = _mixed_bases(rng, 9, [1, 2, 2, 1])
    null = als.random_null(ts, B, m=99, seed=3)
    gam, rho = als.null_draws(ts, B, m=99, seed=3)
    obs = als.gamma_rho(ts, B, n_boot=0)
    np.testing.assert_allclose(null.p_gamma, (1 + (gam >= obs.gamma.to_numpy()[:, None]).sum(1)) / 100)
    np.testing.assert_allclose(null.q_gamma, benjamini_hochberg(null.p_gamma))
    np.testing.assert_allclose(null.q_rho, benjamini_hochberg(null.p_rho))
    np.testing.assert_allclose(null.gamma_null_lo, np.quantile(gam, 0.025, axis=1))
    assert null.draws.tolist() == [99] * 4 and null.k.tolist() == [1, 2, 2, 1]


def test_alignment_with_a_plane_and_a_line_known_answer():
    """A token at 45° between e₁ and e₂ in R^4: |cos| with e₁ is 1/√2, with the plane span{e₁, e₂} it is 1."""
    x_in = np.array([[0.0, 0.0, 1.0, 0.0]])
    x_out = np.array([[1.0, 1.0, 0.0, 0.0]])
    ts = als.TokenStates.from_trajectories([np.stack([x_in, x_out])])
    line = np.eye(4)[:, :1][None]
    plane = np.eye(4)[:, :2][None]
    g_line, g_plane = (als.gamma_rho(ts, B, n_boot=0).iloc[0] for B in (line, plane))
    assert g_line.gamma == pytest.approx(1 / np.sqrt(2), rel=1e-14) and g_plane.gamma == pytest.approx(1.0, rel=1e-14)
    assert (g_line.k, g_plane.k) == (1, 2) and g_line.rho == g_plane.rho == 1.0
    assert g_plane.gamma_ratio == pytest.approx(1 / als.baseline_subspace(4, 2), rel=1e-12)


def test_gamma_is_token_weighted_not_prompt_weighted():
    """Prompt 0 has 3 tokens with a = 1, prompt 1 one token with a = 0: γ = 3/4 (a per-prompt mean would give 1/2)."""
    e1, e2 = np.eye(2)
    p0 = np.stack([np.tile(e2, (3, 1)), np.tile(e1, (3, 1))])
    p1 = np.stack([e1[None], e2[None]])
    df = als.gamma_rho(als.TokenStates.from_trajectories([p0, p1]), e1[:, None][None], n_boot=0)
    assert df.gamma[0] == 0.75 and df.rho[0] == 0.75 and df.tokens[0] == 4 and df.prompts[0] == 2


def test_bootstrap_resamples_prompts_not_tokens():
    """Two prompts of 50 identical tokens each, values 0 and 1: resampling prompts gives the interval [0, 1]
    (both draws from one prompt happen a quarter of the time each); resampling tokens would give about ±0.1."""
    sums, counts = np.array([0.0, 50.0]), np.array([50.0, 50.0])
    est, lo, hi = stats.bootstrap_ratio(sums, counts, n_boot=2000, seed=0)
    assert est == 0.5 and lo == 0.0 and hi == 1.0


def test_cross_layer_relative_to_chance_normalises_each_column_by_its_basis():
    rng = np.random.default_rng(9)
    ts = als.TokenStates.from_trajectories(_random_trajs(rng, P=4, T=3, d=8))
    B = _mixed_bases(rng, 8, [1, 2, 3])
    g, r = rd.cross_layer(ts, B)
    gn, rn = rd.cross_layer(ts, B, relative_to_chance=True)
    chance = np.array([als.baseline_subspace(8, k) for k in (1, 2, 3)])
    np.testing.assert_allclose(gn, g / chance[None, :], rtol=1e-12)
    np.testing.assert_array_equal(rn, r)
    np.testing.assert_allclose(np.diag(gn), als.gamma_rho(ts, B, n_boot=0).gamma_ratio, rtol=1e-12)
    # a plane beats a line on raw values but not on normalised ones (isotropic states)
    iso = _isotropic(seed=2, P=40, n=20, T=2, d=16)
    Bi = _mixed_bases(rng, 16, [1, 2])
    graw, _ = rd.cross_layer(iso, Bi)
    gnorm, _ = rd.cross_layer(iso, Bi, relative_to_chance=True)
    assert np.all(graw[:, 1] > 1.4 * graw[:, 0]) and np.all(np.abs(gnorm - 1) < 0.05)


def test_fixed_direction_profile_on_isotropic_states_and_hand_build_up():
    ts = _isotropic(seed=3, P=25, n=10, T=3, d=20)
    B = np.zeros((20, 2))
    B[:, :2] = _orthonormal(np.random.default_rng(0), 20, 2)
    prof = rm.fixed_direction_profile(ts, B, m=300, n_boot=200, seed=1)
    assert prof.step.tolist() == [0, 1, 2, 3] and prof.k.tolist() == [2] * 4
    np.testing.assert_allclose(prof.chance, als.baseline_subspace(20, 2))
    np.testing.assert_allclose(prof.ratio, 1.0, atol=0.08)
    assert np.all((prof.null_ratio_lo < 1) & (1 < prof.null_ratio_hi))
    a = als.step_alignment(ts, B)
    assert prof.build_up[0] == pytest.approx((a[2] - a[0]).mean(), rel=1e-12)  # input of the last layer minus embeddings
    assert prof.build_up_lo[0] <= prof.build_up[0] <= prof.build_up_hi[0]
    # isotropic states do not build up toward B: the change is one more draw of the random subspaces' changes
    assert prof.build_up_null_lo[0] < prof.build_up[0] < prof.build_up_null_hi[0] and prof.p_build_up[0] > 0.05
    # states that turn toward B step by step do: p is the smallest possible, 1/(m+1)
    rng = np.random.default_rng(5)
    X0 = rng.standard_normal((30, 8, 20))
    drift = np.stack([X0 + 0.4 * t * np.sqrt(20) * B[:, 0] for t in range(4)], axis=1)  # (P, T+1, n, d)
    ts_up = als.TokenStates.from_trajectories(list(drift))
    up = rm.fixed_direction_profile(ts_up, B, m=300, n_boot=200, seed=1)
    assert up.build_up_lo[0] > 0 and up.p_build_up[0] == pytest.approx(1 / 301)


def test_cross_layer_diagonal_equals_gamma_rho():
    rng = np.random.default_rng(7)
    trajs = _random_trajs(rng, P=4, T=3, d=8)
    ts = als.TokenStates.from_trajectories(trajs)
    F = rng.standard_normal((3, 8, 8))
    eb = als.eigen_bases(F)
    g, r = rd.cross_layer(ts, eb)
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
    df = rm.shared_convergence(als.TokenStates.from_trajectories(trajs), eb, anchor=10)
    v1 = df[df.target == "v₁"].set_index("step")
    assert v1.rate.iloc[0] == pytest.approx(0.8, rel=1e-8)
    assert v1.chance.iloc[0] == als.baseline_subspace(d, 1)  # each target's own chance level
    span = df[df.target == "span{v₁, v₂}"]
    assert span.chance.iloc[0] == als.baseline_subspace(d, int(eb.k12[0]))
    assert v1.alignment[60] > 1 - 1e-8
    ratio = (v1.distance[40] / v1.distance[20]) ** (1 / 20)
    assert ratio == pytest.approx(0.8, rel=0.02)
    with pytest.raises(ValueError, match="one shared layer"):
        rm.shared_convergence(als.TokenStates.from_trajectories(trajs), als.eigen_bases(np.stack([F, F])))


# -- summaries for tables and text ------------------------------------------------------------------
def _hand_results():
    """Two variants × two layers of layer_varying-style result rows with round numbers."""
    import pandas as pd

    return pd.DataFrame({
        "layer": [1, 2, 1, 2], "variant": ["a", "a", "b", "b"], "k": [1, 2, 1, 2],
        "gamma": [0.2, 0.4, 0.1, 0.3], "chance": [0.05, 0.1, 0.05, 0.1],
        "gamma_ratio": [4.0, 4.0, 2.0, 3.0], "gamma_ratio_lo": [3.0, 3.5, 1.0, 2.5], "gamma_ratio_hi": [5.0, 4.5, 3.0, 3.5],
        "gamma_ratio_null_lo": [0.5, 0.6, 0.7, 0.8], "gamma_ratio_null_hi": [1.5, 1.6, 1.7, 1.8],
        "tilt": [0.01, -0.02, 0.03, 0.0],
        "rho": [0.6, 0.4, 0.55, 0.5], "rho_lo": [0.55, 0.3, 0.45, 0.42], "rho_hi": [0.65, 0.45, 0.6, 0.58],
        "rho_null_lo": [0.4, 0.41, 0.42, 0.43], "rho_null_hi": [0.6, 0.61, 0.62, 0.63],
        "q_gamma": [0.0004, 0.2, 0.01, 1.0], "q_rho": [0.5, 0.04, 0.0009, 0.3],
    })


def test_gamma_rho_table_columns_are_the_hand_computations():
    res = _hand_results()
    t = rp.gamma_rho_table(res)
    assert list(t.columns) == ["variant", "layer", "k", "γₜ", "chance c(d, k)", "γₜ / chance", "γₜ / chance 95% CI",
                               "null 95% range of γₜ / chance", "q(γₜ)", "Δγₜ", "ρₜ", "ρₜ 95% CI",
                               "null 95% range of ρₜ", "q(ρₜ)"]
    assert t.variant.tolist() == ["a", "a", "b", "b"] and t.layer.tolist() == [1, 2, 1, 2]
    np.testing.assert_allclose(t["γₜ / chance"], res.gamma_ratio)
    np.testing.assert_allclose(t["Δγₜ"], res.tilt)
    assert t["γₜ / chance 95% CI"][0] == "[3.00, 5.00]" and t["ρₜ 95% CI"][1] == "[0.300, 0.450]"
    assert t["null 95% range of γₜ / chance"][3] == "[0.80, 1.80]"
    assert t["null 95% range of ρₜ"].tolist() == ["[0.400, 0.600]", "[0.410, 0.610]", "[0.420, 0.620]", "[0.430, 0.630]"]
    assert t["q(γₜ)"].tolist() == ["<0.001", "0.200", "0.010", "1.000"] and t["q(ρₜ)"][2] == "<0.001"
    assert set(rp.GAMMA_RHO_FORMAT) <= set(t.columns)  # every format names a column of the table


def test_gamma_rho_table_without_a_null_keeps_the_estimates_and_adds_the_token_count():
    res = _hand_results().drop(columns=["gamma_ratio_null_lo", "gamma_ratio_null_hi", "rho_null_lo", "rho_null_hi",
                                        "q_gamma", "q_rho"]).assign(tokens=[10, 10, 12, 12])
    t = rp.gamma_rho_table(res, null=False)
    assert list(t.columns) == ["variant", "layer", "k", "γₜ", "chance c(d, k)", "γₜ / chance", "γₜ / chance 95% CI",
                               "Δγₜ", "ρₜ", "ρₜ 95% CI", "tokens"]
    assert t.tokens.tolist() == [10, 10, 12, 12] and t["ρₜ 95% CI"][1] == "[0.300, 0.450]"
    headers = " ".join(t.columns)
    assert "_{" not in headers and "c_" not in headers  # readable labels, no TeX (issue #17)


def test_null_range_diagonal_wins_and_range_position():
    nr = rm.null_range(_hand_results())
    assert (nr.rho_lo, nr.rho_hi, nr.gamma_ratio_lo, nr.gamma_ratio_hi) == (0.4, 0.63, 0.5, 1.8)
    m = np.array([[3.0, 1.0, 2.0], [5.0, 4.0, 0.0], [1.0, 1.0, 1.0]])  # rows 0 and 2 (a tie counts) win
    assert rd.diagonal_wins(m) == 2
    assert rd.diagonal_wins(m.T) == 1  # rows [3, 5, 1], [1, 4, 1], [2, 0, 1]: only the middle one wins
    with pytest.raises(ValueError, match="square"):
        rd.diagonal_wins(np.ones((2, 3)))
    assert [rm.range_position(x, [0.2, 0.5, 0.3]) for x in (0.6, 0.5, 0.25, 0.2, 0.1)] == [
        "above", "within", "within", "within", "below"]
    with pytest.raises(ValueError, match="empty"):
        rm.range_position(1.0, [])


def test_fitted_rate_interval_against_a_loop_over_resamples():
    """The vectorised refit equals lib.linalg.power.fitted_ratio on each resampled mean curve (same draws)."""
    from lib.linalg.power import fitted_ratio

    rng = np.random.default_rng(3)
    P, T = 7, 40
    rates = rng.uniform(0.6, 0.8, P)
    counts = rng.integers(1, 5, P).astype(float)
    sums = counts * (rng.uniform(0.5, 2.0, P) * rates ** np.arange(T + 1)[:, None])  # (T+1, P)
    fit, n_boot = (10, 30), 50
    est, lo, hi = rm.fitted_rate_interval(sums, counts, fit, n_boot=n_boot, seed=0)
    assert est == pytest.approx(fitted_ratio((sums.sum(1) / counts.sum())[: fit[1] + 1], start=fit[0], floor=1e-9))
    draws = np.random.default_rng(0).integers(0, P, (n_boot, P))
    boot = []
    for d in draws:
        w = np.bincount(d, minlength=P).astype(float)
        boot.append(fitted_ratio(((sums @ w) / (w @ counts))[: fit[1] + 1], start=fit[0], floor=1e-9))
    assert (lo, hi) == pytest.approx(tuple(np.quantile(boot, [0.025, 0.975])))
    assert rates.min() < lo <= est <= hi < rates.max()


def test_fitted_rate_interval_is_exact_for_a_common_rate():
    sums = np.outer(0.7 ** np.arange(31), [1.0, 3.0, 2.0])
    est, lo, hi = rm.fitted_rate_interval(sums, np.ones(3), (5, 25), n_boot=20)
    assert est == pytest.approx(0.7) and lo == pytest.approx(0.7) and hi == pytest.approx(0.7)
    with pytest.raises(ValueError, match="two distances"):
        rm.fitted_rate_interval(np.zeros((31, 3)), np.ones(3), (5, 25))



def test_fit_window_moves_before_the_floor_for_a_fast_contraction():
    """The book decoder iterated as a shared layer contracts so fast (rate 0.3: 0.3^17 ≈ 1.3e-9) that no distance of
    steps 20–50 is above the 1e-9 floor; `make report MODEL=book-decoder` then stopped in chapter 3 with "need at
    least two distances above the floor". The window moves to the steps still above it, and the rate is exact."""
    e = 0.3 ** np.arange(61)
    assert rm.fit_window(0.9 ** np.arange(61), (20, 50)) == (20, 50)  # a slow one keeps the window asked for
    start, stop = rm.fit_window(e, (20, 50))
    assert (start, stop) == (1, 17) and e[stop] > 1e-9 >= e[stop + 1]
    sums = np.outer(e, [1.0, 2.0, 3.0])
    est, lo, hi = rm.fitted_rate_interval(sums, np.ones(3), (start, stop), n_boot=20)
    assert est == pytest.approx(0.3) and lo == pytest.approx(0.3) and hi == pytest.approx(0.3)
    with pytest.raises(ValueError, match="floor"):
        rm.fit_window(np.r_[1.0, np.zeros(60)], (20, 50))


def test_shared_convergence_fits_a_layer_that_converges_before_the_window():
    F = np.diag([1.0, 0.3, 0.2, 0.1])
    rng = np.random.default_rng(0)
    trajs = [np.stack([np.linalg.matrix_power(F, t) @ x for t in range(61)]) for x in rng.standard_normal((3, 4))]
    ts = als.TokenStates.from_trajectories([tr[:, None, :] for tr in trajs])
    df = rm.shared_convergence(ts, als.eigen_bases(F), anchor=20, fit=(20, 50))
    v1 = df[df.target == "v₁"]
    assert v1.fit_stop.iloc[0] < 20 and v1.fitted.iloc[0] == pytest.approx(0.3, abs=0.01)

# -- issue #25 §6: the tilt against its own null, the own-direction and twin-direction nulls, equivalence -------
def test_tilt_has_its_own_null_a_level_above_chance_is_not_a_tilt():
    """Tokens aligned with B before *and* after the layer: γ beats its random-subspace null, but nothing tilts
    (Δγ = 0 exactly, every null draw's tilt is 0 too, so p = 1). Reading a tilt off the level γ (the code before
    #25) calls this layer tilted; the tilt's own test does not. Tokens pushed toward B across the layer tilt."""
    rng = np.random.default_rng(11)
    d, B = 24, _orthonormal(rng, 24, 1)
    X = rng.standard_normal((40, 1, 6, d)) + 3.0 * B[:, 0]  # 40 prompts, already aligned with B
    still = als.TokenStates.from_trajectories(list(np.concatenate([X, X], axis=1)))
    null = als.random_null(still, B[None], m=200, seed=0).iloc[0]
    assert null.q_gamma < 0.05 and null.tilt == 0.0 and null.p_tilt == 1.0 and null.q_tilt == 1.0
    Y = rng.standard_normal((40, 1, 6, d))
    moved = als.TokenStates.from_trajectories(list(np.concatenate([Y, Y + 3.0 * B[:, 0]], axis=1)))
    up = als.random_null(moved, B[None], m=200, seed=0).iloc[0]
    assert up.tilt > 0.3 and up.p_tilt == pytest.approx(1 / 201) and up.tilt_null_lo < 0 < up.tilt_null_hi


def test_null_draws_with_tilt_keep_the_draws_of_null_draws_and_match_gamma_rho():
    ts = _isotropic(seed=4, P=10, n=8, T=3, d=12)
    B = _mixed_bases(np.random.default_rng(2), 12, [1, 2, 1])
    gam, rho = als.null_draws(ts, B, m=60, seed=5, chunk=25)
    gam3, rho3, tilt = als.null_draws_with_tilt(ts, B, m=60, seed=5, chunk=25)
    np.testing.assert_array_equal(gam, gam3)
    np.testing.assert_array_equal(rho, rho3)
    rng = np.random.default_rng(5)  # layer 0's first draw is the first subspace of the generator
    ref = als.gamma_rho(ts, _pad_to(als.random_subspaces(12, 1, 25, rng)[0], 2), n_boot=0)
    assert tilt[0, 0] == pytest.approx(ref.tilt[0], abs=1e-6)


def test_own_direction_test_cancels_row_and_column_effects():
    """An additive map (row effect + column effect: an anisotropic direction that every layer's tokens catch)
    has no diagonal advantage: every permutation ties, p = 1, excess 0, although its diagonal "wins" the one row
    of the dominant column. A diagonal bonus under a dominant column wins one row only (``diagonal_wins``, the
    statistic the page quoted before #25, says 1 of 4), yet the permutation test finds it: p = 1/4! = 1/24."""
    rows, cols = np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, 0.0, 0.0, 5.0])
    additive = rows[:, None] + cols[None, :]
    t = rd.own_direction_test(additive)
    assert (t.p, t.permutations, t.exact) == (1.0, 24, True) and t.excess == pytest.approx(0.0, abs=1e-12)
    bonus = additive + np.eye(4)
    t = rd.own_direction_test(bonus)
    assert rd.diagonal_wins(bonus) == 1 and t.wins == 1
    assert t.p == pytest.approx(1 / 24) and t.excess == pytest.approx(1.0)


def test_own_direction_test_is_the_exact_permutation_share_and_monte_carlo_beyond_max_exact():
    from itertools import permutations

    m = np.random.default_rng(3).standard_normal((5, 5))
    sums = np.array([m[np.arange(5), list(p)].sum() for p in permutations(range(5))])
    assert rd.own_direction_test(m).p == pytest.approx((sums >= np.trace(m) - 1e-12).mean(), abs=1e-15)
    big = np.eye(9) * 10 + np.random.default_rng(4).standard_normal((9, 9)) * 0.1
    t = rd.own_direction_test(big, n_perm=999)
    assert not t.exact and t.permutations == 999 and t.p == pytest.approx(1 / 1000)
    with pytest.raises(ValueError, match="square"):
        rd.own_direction_test(np.ones((2, 3)))


def test_foreign_direction_test_known_answers():
    """Own value 1 in every layer, foreign values {0, 1}: the pooled mean reaches 1 only when every layer draws
    its 1, probability 1/8 for three layers; per layer p = (1 + 1)/3. Own values above every foreign one: the
    smallest p-values, 1/(S + 1) per layer and 1/(n + 1) pooled."""
    f = np.array([[0.0, 1.0]] * 3)
    t = rd.foreign_direction_test(np.ones(3), f, n_draw=40_000, seed=1)
    assert t.p == pytest.approx(1 / 8, abs=0.01) and (t.directions, t.draws) == (2, 40_000)
    np.testing.assert_allclose(t.p_layer, 2 / 3)
    np.testing.assert_allclose(t.null_lo, 0.0) and np.testing.assert_allclose(t.null_hi, 1.0)
    top = rd.foreign_direction_test(np.full(3, 2.0), f, n_draw=999)
    assert top.p == pytest.approx(1 / 1000) and np.allclose(top.p_layer, 1 / 3)
    with pytest.raises(ValueError, match="foreign"):
        rd.foreign_direction_test(np.ones(2), f)


def test_cross_layer_maps_agree_with_gamma_rho_on_foreign_bases():
    rng = np.random.default_rng(8)
    ts = als.TokenStates.from_trajectories(_random_trajs(rng, P=4, T=3, d=8))
    foreign = _mixed_bases(rng, 8, [1, 2, 2, 1, 1])  # five bases of another "model"
    maps = rd.cross_layer_maps(ts, foreign)
    assert maps.gamma.shape == maps.rho.shape == maps.tilt.shape == (3, 5)
    for s in range(5):
        df = als.gamma_rho(ts, np.broadcast_to(foreign[s], (3, 8, 2)).copy(), n_boot=0)
        np.testing.assert_allclose(maps.gamma[:, s], df.gamma_ratio, rtol=1e-12)
        np.testing.assert_allclose(maps.tilt[:, s], df.tilt / df.chance, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(maps.rho[:, s], df.rho, rtol=0, atol=0)


def test_equivalence_test_known_answers():
    """Bootstrap draws N(μ, σ) against ±δ: TOST p = max of the two tail shares. μ = 0, σ ≪ δ: equivalent with
    the smallest p; μ = 0.9δ, σ = 0.1δ: p = P(draw ≥ δ) = 1 − Φ(1) ≈ 0.159, not equivalent although the estimate
    lies inside the margin (its interval does not); a wide interval is never equivalence."""
    z = np.random.default_rng(0).standard_normal(20_000)
    tight = stats.equivalence_test(0.0, 0.01 * z, 0.0, 1.0)
    assert tight.equivalent and tight.p == pytest.approx(1 / 20_001)
    near = stats.equivalence_test(0.9, 0.9 + 0.1 * z, 0.0, 1.0)
    assert not near.equivalent and near.p == pytest.approx(0.1587, abs=0.01)
    assert near.lo == pytest.approx(0.9 - 0.1645, abs=0.01) and near.difference == pytest.approx(0.9)
    wide = stats.equivalence_test(0.0, 3 * z, 0.0, 1.0)
    assert not wide.equivalent and wide.p > 0.3
    shifted = stats.equivalence_test(5.0, 5.0 + 0.01 * z, 5.0, 1.0)  # the reference is subtracted
    assert shifted.equivalent and shifted.difference == 0.0
    with pytest.raises(ValueError, match="margin"):
        stats.equivalence_test(0.0, z, 0.0, 0.0)


def test_fixed_direction_profile_equivalence_needs_power():
    """Isotropic states have no build-up: with many prompts the TOST shows it (equivalent within half a chance
    level), with four one-token prompts it cannot (p_equivalent > 0.05) although the build-up does not beat
    its null either: the case the verdict before #25 read as "no build-up"."""
    B = _orthonormal(np.random.default_rng(0), 20, 1)
    many = rm.fixed_direction_profile(_isotropic(seed=3, P=200, n=10, T=3, d=20), B, m=300, n_boot=400, seed=1)
    assert many.p_build_up[0] > 0.05 and many.p_equivalent[0] < 0.05
    assert many.margin[0] == pytest.approx(0.5 * als.baseline_subspace(20, 1))
    assert many.excess[0] == pytest.approx(many.build_up[0] - many.build_up_null_mid[0])
    assert many.excess_lo[0] < many.excess[0] < many.excess_hi[0]
    few = rm.fixed_direction_profile(_isotropic(seed=3, P=4, n=1, T=3, d=20), B, m=300, n_boot=400, seed=1)
    assert few.p_build_up[0] > 0.05 and few.p_equivalent[0] > 0.05


def test_gamma_rho_table_shows_the_tilts_own_test_when_the_results_carry_it():
    res = _hand_results().assign(tilt_null_lo=-0.01, tilt_null_hi=0.02, q_tilt=[0.0004, 0.5, 0.03, 1.0])
    t = rp.gamma_rho_table(res)
    cols = list(t.columns)
    assert cols[cols.index("Δγₜ") + 1: cols.index("ρₜ")] == ["null 95% range of Δγₜ", "q(Δγₜ)"]
    assert t["null 95% range of Δγₜ"][0] == "[-0.0100, +0.0200]" and t["q(Δγₜ)"].tolist() == ["<0.001", "0.500",
                                                                                              "0.030", "1.000"]
