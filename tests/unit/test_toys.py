"""Toy matrices and weights have the spectra and structure they promise."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lib.linalg import spectra
from lib.theory import toys


@pytest.mark.parametrize("seed", range(5))
def test_matrix_with_spectrum_recovers_eigenvalues(seed):
    eigs = [1.0, 0.5 * np.exp(0.7j), -0.3, 0.2 + 0.1j, 0.05]
    F = toys.matrix_with_spectrum(eigs, seed=seed, cond=4.0)
    want = np.array([1.0, 0.5 * np.exp(0.7j), 0.5 * np.exp(-0.7j), -0.3, 0.2 + 0.1j, 0.2 - 0.1j, 0.05])
    got = np.linalg.eigvals(F)
    # match each wanted eigenvalue to its nearest computed one
    assert max(np.min(np.abs(got - z)) for z in want) < 1e-10
    assert F.shape == (7, 7) and F.dtype == np.float64


@pytest.mark.parametrize("kind", ["real", "negative", "complex"])
@pytest.mark.parametrize("gap", [0.3, 0.8])
def test_toy_matrix_gap_and_kind(kind, gap):
    F = toys.toy_matrix(kind, 24, gap=gap, theta=1.1, seed=2)
    P = spectra.principal(F)
    assert abs(abs(P.eigval) - 1) < 1e-10
    assert abs(P.gap_ratio - gap) < 1e-10
    assert P.is_complex == (kind == "complex")
    if kind == "negative":
        assert abs(P.eigval + 1) < 1e-10
    if kind == "complex":
        assert abs(abs(np.angle(P.eigval)) - 1.1) < 1e-10


def test_ties_and_near_ties():
    lams = spectra.eigvals(toys.toy_matrix("opposite", 16, gap=0.4))
    assert np.allclose(sorted(lams[:2].real), [-1, 1], atol=1e-10) and abs(lams[2]) < 0.4 + 1e-10
    lams = spectra.eigvals(toys.toy_matrix("near_tie", 16, gap=0.4, near=0.95))
    assert np.allclose(lams[:2].real, [1, 0.95], atol=1e-10)
    lams = spectra.eigvals(toys.toy_matrix("tie", 16, gap=0.4))
    assert np.allclose(lams[:2], [1, 1], atol=1e-8)
    J = toys.toy_matrix("jordan", 16, gap=0.4)
    lams = spectra.eigvals(J)
    assert np.allclose(lams[:2], [1, 1], atol=1e-6)  # defective: eigenvalues are sensitive


@pytest.mark.parametrize("H", [1, 2, 4, 8])
def test_weights_from_matrix(H):
    F = toys.toy_matrix("complex", 32, seed=H)
    w = toys.weights_from_matrix(F, H, seed=H, qk_bias=True)
    torch.testing.assert_close(w.layer_matrix(), torch.tensor(F), rtol=0, atol=1e-13)
    torch.testing.assert_close(w.head_matrices().sum(0), torch.tensor(F), rtol=0, atol=1e-13)
    assert w.head_dim * H == 32 and w.score_scale == pytest.approx(1 / math.sqrt(32 // H))
    with pytest.raises(ValueError):
        toys.weights_from_matrix(F, 5)


def test_aligned_heads_have_positive_bipartite_scores():
    F = toys.toy_matrix("real", 16)
    v = spectra.principal(F).vector
    w = toys.weights_from_matrix(F, 4, qk="aligned", qk_gain=2.0)
    c = toys.bipartite_scores(w, v)
    assert c.shape == (4,) and np.all(c > 0)
    X = toys.bipartite_state(v, [1, -1, 1])
    assert np.allclose(X[1], -math.sqrt(16) * v)


def test_random_tokens_halfspace():
    w = np.random.default_rng(9).standard_normal(10)
    X = toys.random_tokens(50, 10, seed=1, halfspace=w, batch=(2,))
    assert X.shape == (2, 50, 10) and np.all(X @ w > 0)


def test_with_direction_moves_the_eigenvector():
    F = toys.toy_matrix("real", 12, seed=1)
    u = np.ones(12) / math.sqrt(12)
    G = toys.with_direction(F, spectra.principal(F).vector, u)
    np.testing.assert_allclose(spectra.eigvals(G), spectra.eigvals(F), atol=1e-10)
    assert spectra.alignment(spectra.principal(G).vector, u) > 1 - 1e-12
