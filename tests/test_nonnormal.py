"""Metrics and controls of lib.nonnormal against independent references (checks J3–J7)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib import nonnormal as nn


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


def test_naive_schur_normal_is_not_normal_J6_regression():
    M = _toy()
    naive = nn.schur_normal_naive(M)
    assert _same_spectrum(M, naive) < 1e-10
    assert nn.normality_residual(naive) > 1e-4
    assert nn.henrici(naive) > 0.01 * nn.henrici(M)


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


def test_checkers_accept_reference_and_reject_naive():
    assert "agree" in nn.check_effective_rank(nn.effective_rank)
    assert "normal" in nn.check_schur_normal(nn.schur_normal)
    with pytest.raises(AssertionError):
        nn.check_schur_normal(nn.schur_normal_naive)
    with pytest.raises(AssertionError):  # participation ratio instead of the entropy form
        nn.check_effective_rank(lambda M: np.sum(np.linalg.svd(M, compute_uv=False) ** 2) ** 2
                                / np.sum(np.linalg.svd(M, compute_uv=False) ** 4))


def test_funnel_variants_keys():
    Js = np.stack([_toy(20, s) for s in range(3)])
    v = nn.funnel_variants(Js)
    assert set(v) == {"as measured", "Schur-normal", "shuffled Schur"}
    assert all(len(r.erank) == 4 for r in v.values())
