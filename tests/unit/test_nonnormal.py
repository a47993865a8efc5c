"""Metrics and controls of lib.linalg.nonnormal against independent references (checks J3–J7)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.linalg import nonnormal as nn


def _rot_blocks(angles, radii):
    """Block-diagonal matrix of scaled 2×2 rotations: known eigenvalues r e^{±iθ}."""
    d = 2 * len(angles)
    M = np.zeros((d, d))
    for i, (a, r) in enumerate(zip(angles, radii)):
        M[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = r * np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return M


def test_complex_fraction_known_spectrum():
    rng = np.random.default_rng(0)
    M = _rot_blocks([0.3, 1.0, 0.0, np.pi], [1.0, 2.0, 1.5, 0.5])  # two complex pairs, four real
    Q, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    assert nn.complex_fraction(Q @ M @ Q.T) == pytest.approx(0.5)
    assert nn.complex_fraction(np.eye(5)) == 0.0
    assert nn.complex_fraction(np.array([1 + 1j, 1 - 1j, 2.0])) == pytest.approx(2 / 3)


def test_shift_invariance_J3():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((60, 60)) / 8
    J = np.eye(60) + A
    assert nn.complex_fraction(J) == nn.complex_fraction(A)
    assert nn.henrici(J) == pytest.approx(nn.henrici(A), rel=1e-10)


def test_henrici_against_definition():
    rng = np.random.default_rng(2)
    M = rng.standard_normal((40, 40))
    ref = np.sqrt(np.sum(M**2) - np.sum(np.abs(np.linalg.eigvals(M)) ** 2))
    assert nn.henrici(M) == pytest.approx(ref, rel=1e-8)
    Q, _ = np.linalg.qr(rng.standard_normal((10, 10)))
    S = Q @ np.diag(rng.standard_normal(10)) @ Q.T  # symmetric: normal
    assert nn.henrici(S) < 1e-12 * np.linalg.norm(S)
    assert nn.henrici_rel(np.eye(7)) == 0.0


def test_rotation_fraction():
    rng = np.random.default_rng(3)
    B = rng.standard_normal((30, 30))
    assert nn.rotation_fraction(B + B.T) == pytest.approx(0.0, abs=1e-15)
    assert nn.rotation_fraction(B - B.T) == pytest.approx(1.0)


def test_ginibre_baselines_J4():
    d = 384
    sim = nn.ginibre_simulation(d, draws=1, seed=0)
    assert abs(sim["f_C"] - nn.ginibre_complex_fraction(d)) < 0.015
    assert nn.ginibre_complex_fraction(d) == pytest.approx(0.958, abs=5e-4)
    assert sim["delta_H"] == pytest.approx(1 / np.sqrt(2), abs=0.01)
    assert sim["r_rot"] == pytest.approx(0.5, abs=0.01)


def test_effective_rank_J5():
    assert nn.effective_rank(np.eye(17)) == pytest.approx(17)
    u = np.arange(1.0, 6.0)
    assert nn.effective_rank(np.outer(u, u[::-1])) == pytest.approx(1.0)
    # against an independent formula on the eigenvalues of M Mᵀ
    M = np.random.default_rng(4).standard_normal((12, 9))
    ev = np.clip(np.linalg.eigvalsh(M @ M.T), 0, None)
    p = ev[ev > 1e-12] / ev.sum()
    assert nn.effective_rank(M) == pytest.approx(np.exp(-(p * np.log(p)).sum()), rel=1e-10)


@settings(max_examples=15, deadline=None)
@given(st.integers(3, 12), st.integers(1, 12), st.floats(1e-3, 1e3), st.integers(0, 10**6))
def test_funnel_scale_free_and_capped(d, k, scale, seed):
    k = min(k, d)
    Js = np.random.default_rng(seed).standard_normal((4, d, d))
    a = nn.cumulative_product(Js, k=k)
    b = nn.cumulative_product(Js * scale, k=k)
    np.testing.assert_allclose(a.erank, b.erank, rtol=1e-8)
    assert np.all(a.erank <= k + 1e-9) and np.all(a.erank >= 1 - 1e-9)


def test_funnel_matches_direct_product():
    Js = np.random.default_rng(5).standard_normal((5, 20, 20))
    res = nn.cumulative_product(Js)
    P = np.eye(20)
    for l, J in enumerate(Js):
        P = J @ P
        assert res.erank[l + 1] == pytest.approx(nn.effective_rank(P), rel=1e-9)
    np.testing.assert_allclose(res.P, P / np.linalg.norm(P), atol=1e-12)


def _toy(d=200, seed=0):
    rng = np.random.default_rng(seed)
    return np.eye(d) + rng.standard_normal((d, d)) / np.sqrt(d) @ np.diag(rng.uniform(0.2, 2, d))


def _same_spectrum(A, B):
    la, lb = np.sort_complex(np.linalg.eigvals(A)), np.sort_complex(np.linalg.eigvals(B))
    return np.max(np.abs(la - lb)) / np.max(np.abs(la))


def test_schur_normal_J6():
    M = _toy()
    N = nn.schur_normal(M)
    assert _same_spectrum(M, N) < 1e-10
    assert nn.normality_residual(N) < 1e-10
    assert nn.henrici(N) < 1e-10 * np.linalg.norm(N)
    assert nn.complex_fraction(N) == nn.complex_fraction(M)
    N2 = nn.schur_normal(M, sort="ouc")  # the ordering sensitivity run is also exactly normal
    assert nn.normality_residual(N2) < 1e-10 and _same_spectrum(M, N2) < 1e-10


@pytest.mark.parametrize("variant", ["permute", "signs"])
def test_shuffled_schur_J7(variant):
    M = _toy(seed=1)
    S = nn.shuffled_schur(M, seed=3, variant=variant)
    assert _same_spectrum(M, S) < 1e-10
    assert nn.henrici(S) == pytest.approx(nn.henrici(M), rel=1e-10)
    assert not np.allclose(S, M)


def test_layer_metrics_table():
    Js = np.stack([_toy(30, s) for s in range(3)])
    tab = nn.layer_metrics(Js)
    assert list(tab.layer) == [1, 2, 3]
    assert tab.delta_H.between(0, 1).all() and tab.r_rot.between(0, 1).all()


def test_funnel_variants_keys():
    Js = np.stack([_toy(20, s) for s in range(3)])
    v = nn.funnel_variants(Js)
    assert set(v) == {"as measured", "Schur-normal", "shuffled Schur"}
    assert all(len(r.erank) == 4 for r in v.values())


# --- Values, not only invariants: each test below fails on one plausible wrong implementation ---


def test_henrici_rel_normalised_by_the_update_not_by_J():
    """δ_H = dep(J − I)/‖J − I‖_F: a nilpotent update is all departure (δ_H = 1), whatever the identity adds.

    Normalising by ‖J‖_F instead gives 1/√3 for the 2 × 2 case below.
    """
    J = np.array([[1.0, 1.0], [0.0, 1.0]])
    assert nn.henrici_rel(J) == pytest.approx(1.0, rel=1e-12)
    # a triangular update with known diagonal: dep² = Σ strictly-upper², ‖A‖² adds the diagonal
    A = np.array([[0.5, 2.0, 1.0], [0.0, -0.3, 0.4], [0.0, 0.0, 0.2]])
    want = np.sqrt(2.0**2 + 1.0 + 0.4**2) / np.linalg.norm(A)
    assert nn.henrici_rel(np.eye(3) + A) == pytest.approx(want, rel=1e-10)
    assert nn.layer_metrics((np.eye(3) + A)[None]).delta_H.iloc[0] == pytest.approx(want, rel=1e-10)


def test_rotation_fraction_value_and_layer_metrics_use_the_update():
    """r_rot is a ratio of *squared* norms, on Ā = J̄ − I (not on J̄, where the identity looks symmetric)."""
    A = np.array([[1.0, 1.0], [0.0, 1.0]])  # ‖(A − Aᵀ)/2‖² = 0.5, ‖A‖² = 3
    assert nn.rotation_fraction(A) == pytest.approx(1 / 6, rel=1e-12)
    B = np.random.default_rng(7).standard_normal((6, 6))
    K = (B - B.T) / 10  # a pure rotation update
    row = nn.layer_metrics((np.eye(6) + K)[None]).iloc[0]
    assert row.r_rot == pytest.approx(1.0, rel=1e-12)
    assert row.update_norm == pytest.approx(np.linalg.norm(K), rel=1e-12)


def test_schur_normal_is_in_the_original_basis():
    """A normal matrix is its own Schur-normal control; a control left in the Schur basis (T_N, not Q T_N Qᵀ)
    keeps the spectrum and normality but fails here."""
    rng = np.random.default_rng(8)
    Q, _ = np.linalg.qr(rng.standard_normal((10, 10)))
    M = Q @ _rot_blocks([0.4, 1.1, 2.0, 0.0, np.pi], [1.0, 0.7, 1.3, 0.5, 0.9]) @ Q.T  # orthogonally similar to blocks: normal
    np.testing.assert_allclose(nn.schur_normal(M), M, atol=1e-12)
    S = (M + M.T) / 2  # symmetric
    np.testing.assert_allclose(nn.schur_normal(S), S, atol=1e-12)
    # a small non-normal perturbation moves the control only a little, in the original basis
    E = 1e-3 * rng.standard_normal((10, 10))
    assert np.linalg.norm(nn.schur_normal(M + E) - M) < 1e-1


def test_shuffled_schur_is_in_the_original_basis():
    """The shuffled control shares M's Schur basis: Qᵀ S Q is quasi-triangular with M's diagonal blocks, and a
    normal M (nothing to shuffle) comes back unchanged."""
    import scipy.linalg

    M = _toy(40, seed=2)
    T, Q = scipy.linalg.schur(M, output="real")
    S = nn.shuffled_schur(M, seed=1)
    T2 = Q.T @ S @ Q
    mask = np.zeros_like(T, dtype=bool)
    for s, n in nn.real_schur_blocks(T):
        mask[s : s + n, s : s + n] = True
    below = np.tril(np.ones_like(T, dtype=bool), -1) & ~mask
    assert np.abs(T2[below]).max() < 1e-10 * np.abs(T).max()
    np.testing.assert_allclose(T2[mask], T[mask], atol=1e-10)
    rng = np.random.default_rng(9)
    Qn, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    N = Qn @ _rot_blocks([0.3, 1.2, 0.0, 2.5], [1.0, 2.0, 0.5, 1.5]) @ Qn.T
    np.testing.assert_allclose(nn.shuffled_schur(N, seed=4), N, atol=1e-12)


def test_truncation_can_raise_the_effective_rank():
    """Chapter 4, exercise 4: truncating at every step is not monotone in the erank.

    σ = (1, 1, 0.01) then diag(1, 1, 1000): untruncated the third direction ends dominant (erank ≈ 1.2);
    truncated to k = 2 it is dropped at step 1 and the product keeps two equal directions (erank 2).
    """
    Js = np.stack([np.diag([1.0, 1.0, 0.01]), np.diag([1.0, 1.0, 1000.0])])
    full = nn.cumulative_product(Js).erank[-1]
    trunc = nn.cumulative_product(Js, k=2).erank[-1]
    assert trunc == pytest.approx(2.0, rel=1e-12)
    assert full < 1.3
    assert trunc > full


@pytest.mark.parametrize("case", ["random", "rank one", "zero", "near singular", "scaled 1e8", "block-Jacobian-like"])
def test_spectral_metrics_erank_from_the_gram_matrix_equals_the_svds(case):
    """``spectral_metrics`` takes σ² from ``eigvalsh(J Jᵀ)`` (faster than an SVD in the bootstrap's loop): its erank
    equals :func:`effective_rank`'s, from LAPACK's SVD, to 1e-10 relative, including rank-deficient matrices whose
    small σ² the Gram matrix cannot resolve (their p_i are below 1e-15 either way)."""
    rng = np.random.default_rng(3)
    d = 64
    M = {"random": rng.standard_normal((d, d)),
         "rank one": np.outer(rng.standard_normal(d), rng.standard_normal(d)),
         "zero": np.zeros((d, d)),
         "near singular": np.diag(np.r_[np.ones(4), 1e-9 * np.ones(d - 4)]) @ rng.standard_normal((d, d)),
         "scaled 1e8": 1e8 * rng.standard_normal((d, d)),
         "block-Jacobian-like": np.eye(d) + 0.3 * rng.standard_normal((d, 3)) @ rng.standard_normal((3, d))}[case]
    got = nn.spectral_metrics(M[None], update=False)["erank"][0]
    want = nn.effective_rank(M) if case != "zero" else 0.0
    assert got == pytest.approx(want, rel=1e-10, abs=1e-12)
