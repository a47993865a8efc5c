"""Each proposition of chapter 2 (power-method §5, checks C5–C10 of §8) on random matrices built to
satisfy its assumptions, run through the multi-head softmax simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lib.linalg import power, spectra
from lib.theory import dynamics, toys

D, N, H = 48, 10, 4


def run(F, steps, *, seed=0, heads=H, x0=None, **kw):
    w = toys.weights_from_matrix(F, heads, seed=seed)
    X0 = toys.random_tokens(N, F.shape[0], seed=seed) if x0 is None else x0
    return dynamics.simulate(w, X0, steps, **kw).numpy()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("gap", [0.5, 0.8])
@pytest.mark.parametrize("kind", ["real", "negative"])
def test_consensus_on_v1_within_predicted_steps(kind, gap, seed):
    """Prop. 1 / C5: every token aligns with ±v1 (> 0.999) once gap^t < 1e-3; signs alternate if λ1 < 0."""
    F = toys.toy_matrix(kind, D, gap=gap, seed=seed)
    v1 = spectra.principal(F).vector
    T = power.steps_needed(gap, 1e-3)
    X = run(F, T + 4, seed=seed)
    assert spectra.alignment(X[T], v1).min() > 0.999
    s = power.signed_alignment(X[-4:], v1)  # (4, N)
    assert np.all(np.sign(s) == np.sign(s[:, :1]))  # all tokens on the same side: consensus
    flips = np.sign(s[1:, 0]) != np.sign(s[:-1, 0])
    assert np.all(flips) if kind == "negative" else not np.any(flips)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("theta", [0.4, 1.3, 2.5])
def test_complex_pair_limit_cycle(theta, seed):
    """Prop. 2 / C6: planar alignment > 0.999 once |λ3/λ1|^t < 1e-3; the tokens keep turning by θ."""
    F = toys.toy_matrix("complex", D, gap=0.5, theta=theta, seed=seed)
    P = spectra.principal(F)
    T = power.steps_needed(P.gap_ratio, 1e-3)
    X = run(F, T + 40, seed=seed)
    assert spectra.subspace_alignment(X[T:], P.basis).min() > 0.999
    a1 = spectra.alignment(X[-20:], P.basis[:, 0])
    assert a1.max() - a1.min() > 0.05  # no single limit direction
    ang = power.eigen_plane_angle(X[-10:, 0], P.vector)
    turn = np.angle(np.exp(1j * np.diff(ang)))
    np.testing.assert_allclose(turn, -theta, atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_near_tie_settles_in_plane_first(seed):
    """Prop. 3 / C7: with λ2 = 0.97 λ1, span{v1, v2} is reached at rate |λ3/λ1|, v1 itself much later."""
    F = toys.toy_matrix("near_tie", D, gap=0.4, near=0.97, seed=seed)
    lams, V = spectra.eig(F)
    B, _ = np.linalg.qr(V[:, :2].real)
    T = power.steps_needed(0.4, 1e-3)
    X = run(F, T, seed=seed)
    assert spectra.subspace_alignment(X[T], B).min() > 0.999
    assert spectra.alignment(X[T], V[:, 0].real).min() < 0.99  # still far from v1 alone


@pytest.mark.parametrize("seed", range(3))
def test_opposite_tie_period_two(seed):
    """C7: λ1 = −λ2 gives a period-2 oscillation inside span{v1, v2}, no single limit."""
    F = toys.toy_matrix("opposite", D, gap=0.4, seed=seed)
    lams, V = spectra.eig(F)
    B, _ = np.linalg.qr(V[:, :2].real)
    X = run(F, 60, seed=seed)
    assert spectra.subspace_alignment(X[-1], B).min() > 1 - 1e-9
    np.testing.assert_allclose(X[-1], X[-3], atol=1e-8)
    assert np.abs(X[-1] - X[-2]).max() > 0.1


def real_spectrum_matrix(seed):
    return toys.matrix_with_spectrum([1.0, 0.8, -0.6] + list(np.linspace(0.4, 0.0, D - 3)), seed=seed, cond=2.0)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("k", [1, 2])
def test_only_v1_consensus_is_stable(k, seed):
    """Prop. 5 / C8: started 1e-6 from consensus at v2 or v3, tokens leave it and reach v1."""
    F = real_spectrum_matrix(seed)
    lams, V = spectra.eig(F)
    vk, v1 = V[:, k].real, V[:, 0].real
    X0 = np.tile(vk, (N, 1)) + 1e-6 * np.random.default_rng(seed).standard_normal((N, D))
    X = run(F, 400, x0=X0, seed=seed)
    assert spectra.alignment(X[1], vk).min() > 0.999  # starts at v_k ...
    assert spectra.alignment(X[-1], v1).min() > 0.999  # ... ends at v1
    # and consensus at v1 itself is kept
    X = run(F, 100, x0=np.tile(v1, (N, 1)) + 1e-6 * np.random.default_rng(seed).standard_normal((N, D)), seed=seed)
    assert spectra.alignment(X, v1).min() > 0.999


@pytest.mark.parametrize("k", [0, 1, 2])
@pytest.mark.parametrize("causal", [False, True])
def test_linearization_at_consensus(k, causal):
    """Prop. 5: the Jacobian of one layer at consensus x_i = r v_k has spectral radius max_{j≠k}|λj|/|λk|."""
    d, n = 12, 4
    F = toys.matrix_with_spectrum([1.0, 0.8, -0.6] + list(np.linspace(0.4, 0.05, d - 3)), seed=1, cond=2.0)
    lams, V = spectra.eig(F)
    w = toys.weights_from_matrix(F, 3, seed=2, qk_gain=2.0, causal=causal)
    x = torch.tensor(np.tile(math.sqrt(d) * V[:, k].real, (n, 1)))
    J = torch.autograd.functional.jacobian(lambda X: dynamics.layer_step(w, X), x).reshape(n * d, n * d)
    rho = np.abs(np.linalg.eigvals(J.numpy())).max()
    others = np.delete(np.abs(lams), k)
    assert rho == pytest.approx(others.max() / abs(lams[k]), rel=1e-8)


@pytest.mark.parametrize("n_plus, n_minus", [(5, 5), (7, 3), (2, 8)])
@pytest.mark.parametrize("factor", [0.8, 1.25])
def test_bipartite_fixed_point_condition(n_plus, n_minus, factor):
    """Prop. 4 / C9: single head, x_j = r s_j v1 is a fixed point iff e^{2c} > max(n+/n−, n−/n+)."""
    F = toys.toy_matrix("real", 16, gap=0.5, seed=0)
    v1 = spectra.principal(F).vector
    w1 = toys.weights_from_matrix(F, 1, qk="aligned", seed=0)
    c1 = toys.bipartite_scores(w1, v1)[0]
    c_star = 0.5 * math.log(max(n_plus / n_minus, n_minus / n_plus))
    c_target = factor * c_star if c_star > 0 else (0.05 if factor < 1 else 1.0)
    w = toys.weights_from_matrix(F, 1, qk="aligned", seed=0, qk_gain=math.sqrt(c_target / c1))
    assert toys.bipartite_scores(w, v1)[0] == pytest.approx(c_target, rel=1e-10)
    X0 = toys.bipartite_state(v1, [1] * n_plus + [-1] * n_minus)
    X1 = dynamics.layer_step(w, X0).numpy()
    fixed = np.allclose(X1, X0, atol=1e-10)
    assert fixed == (math.exp(2 * c_target) > max(n_plus / n_minus, n_minus / n_plus))


def test_bipartite_survives_one_sharp_head_but_not_random_heads():
    """Prop. 4 (multi-head): perturbed by 1e-3, a sharp single-head bipartite state persists; with
    several heads with independent Q_h, K_h it collapses to consensus."""
    F = toys.toy_matrix("real", 16, gap=0.6, seed=0, cond=2.0)
    v1 = spectra.principal(F).vector
    X0 = toys.bipartite_state(v1, [1] * 6 + [-1] * 4)
    noise = 1e-3 * np.random.default_rng(0).standard_normal((10, *X0.shape))

    def split_kept(w):
        s = power.signed_alignment(dynamics.simulate(w, X0 + noise, 200)[-1].numpy(), v1)
        return np.mean([(np.abs(r) > 0.99).all() and (r > 0).any() and (r < 0).any() for r in s])

    assert split_kept(toys.weights_from_matrix(F, 1, qk="aligned", qk_gain=2.0, seed=1)) == 1.0
    assert split_kept(toys.weights_from_matrix(F, 4, qk="random", qk_gain=2.0, seed=1)) == 0.0


def test_layernorm_and_residual_variants():
    """C10: LayerNorm converges to v1(P F); the residual picks the eigenvector maximizing |1 + λ|."""
    F = toys.toy_matrix("real", D, gap=0.6, seed=5)
    P = np.eye(D) - np.ones((D, D)) / D
    X = run(F, 150, norm="layernorm")
    assert spectra.alignment(X[-1], spectra.principal(P @ F).vector).min() > 0.999
    G = toys.matrix_with_spectrum([-1.0, 0.8] + list(np.linspace(0.5, 0.0, D - 2)), seed=4, cond=2.0)
    lams, V = spectra.eig(G)
    assert spectra.alignment(run(G, 150)[-1], V[:, 0].real).min() > 0.999
    assert spectra.alignment(run(G, 150, residual=True)[-1], V[:, 1].real).min() > 0.999


def test_random_baseline():
    """C11: the mean |cos| between a fixed direction and random unit vectors is b_d (± 2%)."""
    d = 384
    X = np.random.default_rng(0).standard_normal((20000, d))
    e = np.zeros(d)
    e[0] = 1
    assert spectra.alignment(X, e).mean() == pytest.approx(spectra.baseline_alignment(d), rel=0.02)


@pytest.mark.parametrize("signs", [[1, 1] + [-1] * 8, [1] * 4 + [-1] * 5 + [1], [1, -1] * 3, [-1, 1, 1, 1]])
@pytest.mark.parametrize("c", [0.2, 0.45, 0.8])
def test_causal_bipartite_prefix_condition(signs, c):
    """Exercise 2.2: under a causal mask the single-head bipartite state is a fixed point iff every token i,
    seeing a_i tokens of its own group (itself included) and b_i of the other among 1..i, has a_i e^{2c} > b_i."""
    F = toys.toy_matrix("real", 12, gap=0.5, seed=1)
    v1 = spectra.principal(F).vector
    c1 = toys.bipartite_scores(toys.weights_from_matrix(F, 1, qk="aligned", seed=1), v1)[0]
    w = toys.weights_from_matrix(F, 1, qk="aligned", seed=1, qk_gain=math.sqrt(c / c1), causal=True)
    X0 = toys.bipartite_state(v1, signs)
    fixed = np.allclose(dynamics.layer_step(w, X0).numpy(), X0, atol=1e-10)
    prefix = [(sum(1 for x in signs[: i + 1] if x == s), i + 1 - sum(1 for x in signs[: i + 1] if x == s))
              for i, s in enumerate(signs)]
    assert fixed == all(a * math.exp(2 * c) > b for a, b in prefix)


@pytest.mark.parametrize("k", [0, 1, 2])
def test_linearization_with_a_residual(k):
    """Exercise 2.3: with the residual x_i + F Σ_j A_ij x_j the radius at consensus on v_k is
    max(1, max_{j≠k}|1 + λ_j|)/|1 + λ_k|: the 1 is the differences between tokens, which the residual keeps."""
    d, n = 12, 4
    F = toys.matrix_with_spectrum([1.0, 0.8, -0.6] + list(np.linspace(0.4, 0.05, d - 3)), seed=1, cond=2.0)
    lams, V = spectra.eig(F)
    w = toys.weights_from_matrix(F, 3, seed=2, qk_gain=2.0)
    lam = lams.real
    rho = dynamics.consensus_jacobian_radius(w, V[:, k].real, n, residual=True)
    assert rho == pytest.approx(max(1.0, np.abs(1 + np.delete(lam, k)).max()) / abs(1 + lam[k]), rel=1e-8)
