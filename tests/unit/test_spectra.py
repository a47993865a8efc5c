"""lib.linalg.spectra against independent float64 references (SciPy, closed forms, simulation)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.linalg import spectra


def _rotation_matrix(d: int, lams_real: list[float], pairs: list[tuple[float, float]], rng) -> np.ndarray:
    """A matrix with prescribed real eigenvalues and conjugate pairs r e^{±iθ}, in a random basis."""
    blocks = [np.array([[lam]]) for lam in lams_real]
    blocks += [r * np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]]) for r, th in pairs]
    D = scipy.linalg.block_diag(*blocks)
    assert D.shape == (d, d)
    S = rng.standard_normal((d, d))
    return S @ D @ np.linalg.inv(S)


def test_eigvals_match_scipy_and_are_sorted():
    rng = np.random.default_rng(0)
    for d in (5, 17, 64):
        M = rng.standard_normal((d, d))
        lams = spectra.eigvals(M)
        ref = scipy.linalg.eigvals(M)
        assert np.allclose(np.sort_complex(lams), np.sort_complex(ref), atol=1e-10)
        assert np.all(np.diff(np.abs(lams)) <= 1e-10 * np.abs(lams).max())


def test_tie_order_positive_real_first_then_plus_i():
    M = np.diag([-2.0, 2.0, 1.0])
    lams = spectra.eigvals(M)
    assert lams[0] == 2 and lams[1] == -2
    R = _rotation_matrix(4, [2.0, -2.0], [(2.0, 0.7)], np.random.default_rng(1))
    lams = spectra.eigvals(R)
    assert np.isclose(lams[0], 2) and lams[1].imag > 0 and lams[2].imag < 0 and np.isclose(lams[3], -2)


def test_stack_input_and_torch_input():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((3, 6, 6))
    out = spectra.eigvals(torch.from_numpy(A).float())
    assert out.shape == (3, 6) and out.dtype == np.complex128
    for k in range(3):
        assert np.allclose(np.sort_complex(out[k]), np.sort_complex(np.linalg.eigvals(A[k].astype(np.float32).astype(np.float64))))


def test_real_eigenvector_sign_and_norm():
    rng = np.random.default_rng(3)
    M = _rotation_matrix(6, [3.0, 1.0, 0.5, -0.2], [(0.9, 1.0)], rng)
    p = spectra.principal(M)
    assert not p.is_complex and np.isclose(p.eigval, 3.0)
    v = p.vector
    assert v.dtype == np.float64 and np.isclose(np.linalg.norm(v), 1)
    assert v[np.argmax(np.abs(v))] > 0
    assert np.linalg.norm(M @ v - 3 * v) < 1e-9 * np.linalg.norm(M)
    assert p.residual < 1e-12
    assert np.isclose(p.gap_ratio, 1.0 / 3.0)


def test_complex_eigenvector_phase_convention():
    rng = np.random.default_rng(4)
    M = _rotation_matrix(7, [1.0, 0.5, 0.1], [(2.0, 0.8), (0.3, 2.0)], rng)
    p = spectra.principal(M)
    assert p.is_complex and np.isclose(abs(p.eigval), 2.0) and p.eigval.imag > 0
    v = p.vector
    assert np.isclose(np.linalg.norm(v), 1)
    assert abs(v.real @ v.imag) < 1e-10
    assert np.linalg.norm(v.real) >= np.linalg.norm(v.imag)
    assert v.real[np.argmax(np.abs(v.real))] > 0
    B = p.basis
    assert B.shape == (7, 2) and np.allclose(B.T @ B, np.eye(2), atol=1e-10)
    # The plane is invariant: M B stays in span(B).
    MB = M @ B
    assert np.linalg.norm(MB - B @ (B.T @ MB)) < 1e-9 * np.linalg.norm(MB)
    # Gap ratio skips the conjugate partner.
    assert np.isclose(p.gap_ratio, 1.0 / 2.0)


def test_alignment_and_subspace_alignment():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((10, 8))
    v = rng.standard_normal(8)
    ref = np.abs(X @ v) / (np.linalg.norm(X, axis=1) * np.linalg.norm(v))
    assert np.allclose(spectra.alignment(X, v), ref)
    q, _ = np.linalg.qr(rng.standard_normal((8, 2)))
    proj = X @ q @ q.T
    assert np.allclose(spectra.subspace_alignment(X, q), np.linalg.norm(proj, axis=1) / np.linalg.norm(X, axis=1))
    with pytest.raises(ValueError, match="dimension mismatch"):
        spectra.alignment(X, np.ones(3))


@pytest.mark.parametrize("d", [384, 768])
def test_baseline_alignment_matches_simulation_and_closed_forms(d):
    b = spectra.baseline_alignment(d)
    assert abs(b - np.sqrt(2 / (np.pi * d))) / b < 2 / d  # asymptotic form
    rng = np.random.default_rng(d)
    U = rng.standard_normal((40_000, d))
    sim = spectra.alignment(U, np.eye(d)[0]).mean()
    assert abs(sim - b) / b < 0.02  # C11
    assert np.isclose(spectra.baseline_alignment(2), 2 / np.pi)  # E|cos θ| on the circle


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="square"):
        spectra.eigvals(np.ones((3, 4)))
    with pytest.raises(ValueError, match="NaN"):
        spectra.eigvals(np.array([[np.nan, 0], [0, 1.0]]))
    with pytest.raises(ValueError):
        spectra.baseline_alignment(0)


@settings(max_examples=60, deadline=None)
@given(
    d=st.integers(2, 24),
    seed=st.integers(0, 2**31 - 1),
    log_scale=st.floats(-6, 6),
)
def test_eig_is_an_eigendecomposition(d, seed, log_scale):
    """Property: every returned pair satisfies M v = λ v, with unit vectors, for any size and scale."""
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((d, d)) * 10.0**log_scale
    lams, V = spectra.eig(M)
    assert np.allclose(np.linalg.norm(V, axis=0), 1)
    for k in range(d):
        assert spectra.eig_residual(M, lams[k], V[:, k]) < 1e-8


def test_eig_condition_closed_forms():
    rng = np.random.default_rng(6)
    Q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    N = Q @ np.diag([3.0, 2, 1, 0.5, -0.2, 0.1]) @ Q.T  # symmetric: κ = 1
    assert np.isclose(spectra.eig_condition(N, 0), 1.0)
    for a in (0.0, 1.0, 10.0):
        T = np.array([[2.0, a], [0.0, 1.0]])  # κ(λ=2) = sqrt(1 + (a / (2 - 1))²)
        assert np.isclose(spectra.eig_condition(T, 0), np.sqrt(1 + a**2))
    p = spectra.principal(np.array([[2.0, 10.0], [0.0, 1.0]]), condition=True)
    assert np.isclose(p.condition, np.sqrt(101))
    assert np.isnan(spectra.principal(np.eye(2) * 2).condition)


def test_residual_warning_machinery(monkeypatch):
    monkeypatch.setattr(spectra, "RESIDUAL_TOL", 0.0)
    with pytest.warns(spectra.SpectralAccuracyWarning, match="residual"):
        spectra.eig(np.random.default_rng(7).standard_normal((5, 5)))


@st.composite
def prescribed_spectrum(draw):
    """A real matrix S D S⁻¹ with repeated real eigenvalues, conjugate pairs and a chosen conditioning."""
    n_real = draw(st.integers(0, 5))
    n_pairs = draw(st.integers(0 if n_real else 1, 3))
    reals = draw(st.lists(st.sampled_from([-2.0, -0.5, 0.0, 0.5, 1.0, 3.0]), min_size=n_real, max_size=n_real))
    pairs = draw(
        st.lists(st.tuples(st.floats(0.1, 3.0), st.floats(0.05, 3.0)), min_size=n_pairs, max_size=n_pairs)
    )
    log_cond = draw(st.floats(0, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    d = n_real + 2 * n_pairs
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    W, _ = np.linalg.qr(rng.standard_normal((d, d)))
    S = U @ np.diag(np.logspace(0, log_cond, d)) @ W
    blocks = [np.array([[r]]) for r in reals]
    blocks += [rad * np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]]) for rad, th in pairs]
    D = scipy.linalg.block_diag(*blocks)
    M = S @ D @ np.linalg.solve(S, np.eye(d))
    expected = np.concatenate([np.array(reals, dtype=complex), [rad * np.exp(1j * th) for rad, th in pairs],
                               [rad * np.exp(-1j * th) for rad, th in pairs]])
    return M, expected, 10.0**log_cond


@settings(max_examples=80, deadline=None)
@given(prescribed_spectrum())
def test_prescribed_spectra_are_recovered_in_convention_order(case):
    """Property: repeated, complex and ill-conditioned spectra come back right and in the book's order."""
    M, expected, cond = case
    lams = spectra.eigvals(M)
    tol = 1e-9 * cond**2 * max(1.0, np.abs(expected).max())
    # every prescribed eigenvalue is matched (a greedy matching is enough at these tolerances)
    remaining = list(lams)
    for e in expected:
        j = int(np.argmin([abs(e - r) for r in remaining]))
        assert abs(e - remaining.pop(j)) < max(tol, 1e-6 * cond), (e, lams)
    mod = np.abs(lams)
    assert np.all(np.diff(mod) <= 1e-6 * cond * max(1.0, mod.max()))
    p = spectra.principal(M)
    if p.is_complex:
        assert p.eigval.imag > 0 and p.basis.shape[1] == 2
        assert abs(p.vector.real @ p.vector.imag) < 1e-8
    else:
        assert p.vector[np.argmax(np.abs(p.vector))] > 0


def test_no_residual_warning_for_an_eigenvalue_that_counts_as_real():
    """A conjugate pair 1 ± 2e-8 i (under τ_C · max|λ|, so it counts as real and keeps a real vector) is no
    inaccuracy of the decomposition: ``eig`` measured its residual after dropping the imaginary part (about
    5e-9) and warned, which printed chapter 6's matched-α twins' SpectralAccuracyWarnings on the site."""
    rng = np.random.default_rng(8)
    B = np.diag([5.0, 1.0, 1.0, 0.3, 0.2, 0.1])
    B[1, 2], B[2, 1] = 2e-8, -2e-8
    Q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    A = Q @ B @ Q.T
    with warnings.catch_warnings():
        warnings.simplefilter("error", spectra.SpectralAccuracyWarning)
        lams, V = spectra.eig(A)
    assert not spectra.is_complex(lams[1], 5.0) and np.all(V[:, 1].imag == 0)
    assert spectra.eig_residual(A, lams[1], V[:, 1]) < 1e-7  # the convention's own residual, about τ_C
