"""lib.linalg.topk_eig: the block Krylov–Schur top-k eigenpairs equal float64 LAPACK (lib.linalg.spectra).

Hard cases: Ginibre bulks, complex pairs at the cut, repeated (multiplicity ≤ block) and defective
eigenvalues, zero and identity matrices, d = 1, float32 inputs and the float32 → float64 path,
and outputs staying on the input's device.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.linalg import spectra
from lib.linalg.topk_eig import normalize_eigvecs, topk_eig, topk_eig_dense
from lib.theory import toys

REL = 1e-8  # eigenvalues equal to LAPACK, relative to |λ_1|


def _ginibre(L, d, seed):
    return np.random.default_rng(seed).standard_normal((L, d, d)) / np.sqrt(d)


def _with_outliers(d, lams, seed, bulk=1.0):
    """A non-normal matrix: a Ginibre bulk plus a planted block with the given spectrum."""
    rng = np.random.default_rng(seed)
    P = toys.block_matrix(lams)
    i = P.shape[0]
    D = np.zeros((d, d))
    D[:i, :i] = P
    D[i:, i:] = bulk * rng.standard_normal((d - i, d - i)) / np.sqrt(d)
    D[:i, i:] = 0.3 * rng.standard_normal((i, d - i)) / np.sqrt(d)  # couple them (non-normal)
    S = np.eye(d) + 0.3 * rng.standard_normal((d, d)) / np.sqrt(d)
    return S @ D @ np.linalg.inv(S)


def _check_against_lapack(A, r, k, rel=REL, vec_tol=1e-6):
    A = np.asarray(A, dtype=np.float64).reshape(-1, A.shape[-1], A.shape[-1])
    lams = r.eigvals.reshape(-1, k).numpy()
    vecs = r.eigvecs.reshape(-1, A.shape[-1], k).numpy()
    for i in range(A.shape[0]):
        ref, V = spectra.eig(A[i])
        scale = abs(ref[0])
        np.testing.assert_allclose(lams[i], ref[:k], rtol=0, atol=rel * max(scale, 1e-300))
        for j in range(k):
            np.testing.assert_allclose(vecs[i][:, j], V[:, j], rtol=0, atol=vec_tol)
            assert spectra.eig_residual(A[i], lams[i][j], vecs[i][:, j]) < 1e-10


def test_ginibre_stack_equals_lapack():
    A = _ginibre(3, 160, seed=1)
    r = topk_eig(torch.from_numpy(A), 6, method="krylov", m=64)
    assert r.method == "krylov-schur" and bool(r.converged.all())
    assert r.eigvals.shape == (3, 6) and r.eigvecs.shape == (3, 160, 6) and r.residuals.shape == (3, 6)
    assert float(r.residuals.max()) < 1e-11
    _check_against_lapack(A, r, 6)


def test_dense_reference_matches_spectra():
    A = _ginibre(2, 40, seed=2)
    r = topk_eig_dense(A, 5)
    _check_against_lapack(A, r, 5)
    assert r.method == "dense"
    # auto uses the dense path for small d
    assert topk_eig(A, 5).method == "dense"


def test_complex_pair_at_the_cut_and_schur_basis():
    # λ = 3, 2.5 ± 1i (|.| = 2.69), -2, 1.9 ± 0.5i (1.96): with k = 5 the 5th is the +i member of
    # a pair whose partner is cut off.
    A = _with_outliers(180, [3.0, complex(2.5, 1.0), -2.0, complex(1.9, 0.5)], seed=3)
    ref = spectra.eigvals(A)
    r = topk_eig(A, 5, method="krylov", m=48)
    np.testing.assert_allclose(r.eigvals.numpy(), ref[:5], atol=REL * abs(ref[0]), rtol=0)
    assert r.eigvals[1].imag > 0 and r.eigvals[2].imag < 0 and r.eigvals[4].imag > 0
    # The Schur basis completes the pair: k + 1 orthonormal columns spanning an invariant subspace.
    B = r.schur_basis.numpy()
    assert B.shape == (180, 6)
    np.testing.assert_allclose(B.T @ B, np.eye(6), atol=1e-12)
    assert np.linalg.norm(A @ B - B @ (B.T @ A @ B)) < 1e-10 * np.linalg.norm(A)
    np.testing.assert_allclose(np.sort_complex(np.linalg.eigvals(B.T @ A @ B)), np.sort_complex(ref[:6]), atol=1e-9)
    _check_against_lapack(A, r, 5)
    # The complex eigenvector follows the convention: Re v ⊥ Im v, ‖Re v‖ ≥ ‖Im v‖.
    v = r.eigvecs[:, 1].numpy()
    assert abs(v.real @ v.imag) < 1e-10 and np.linalg.norm(v.real) >= np.linalg.norm(v.imag)


@pytest.mark.parametrize("mult,block", [(2, None), (3, 4)])
def test_repeated_eigenvalues(mult, block):
    # A diagonalizable, non-normal matrix whose top eigenvalue has geometric multiplicity `mult`.
    A = _with_outliers(150, [2.0] * mult + [-1.7, 1.5], seed=4, bulk=0.8)
    ref = spectra.eigvals(A)
    k = mult + 2
    r = topk_eig(A, k, method="krylov", m=48, block=block)
    np.testing.assert_allclose(r.eigvals.numpy(), ref[:k], atol=1e-8 * 2.0, rtol=0)
    np.testing.assert_allclose(r.eigvals.numpy()[:mult], 2.0, atol=1e-8)
    # Each returned vector is an eigenvector, and the repeated ones span a mult-dimensional space.
    assert float(r.residuals.max()) < 1e-11
    X = r.eigvecs.numpy()[:, :mult].real
    assert np.linalg.matrix_rank(X, tol=1e-6) == mult


def test_defective_eigenvalue():
    # A 2×2 Jordan block at λ = 2: eigenvalues are only determined to ~sqrt(eps) (for LAPACK too).
    d = 150
    rng = np.random.default_rng(5)
    D = np.zeros((d, d))
    D[0, 0] = D[1, 1] = 2.0
    D[0, 1] = 1.0
    D[2, 2] = -1.5
    D[3:, 3:] = 0.8 * rng.standard_normal((d - 3, d - 3)) / np.sqrt(d)
    S = np.eye(d) + 0.2 * rng.standard_normal((d, d)) / np.sqrt(d)
    A = S @ D @ np.linalg.inv(S)
    r = topk_eig(A, 3, method="krylov", m=48)
    lams = r.eigvals.numpy()
    np.testing.assert_allclose(lams[:2], 2.0, atol=1e-6)
    np.testing.assert_allclose(lams[2], -1.5, atol=1e-9)
    ref = spectra.eigvals(A)[:3]
    np.testing.assert_allclose(lams, ref, atol=1e-6)
    assert float(r.residuals.max()) < 1e-10


@pytest.mark.parametrize("method", ["krylov", "auto"])
def test_zero_and_identity(method):
    d = 140 if method == "krylov" else 3
    Z = torch.zeros(2, d, d, dtype=torch.float64)
    r = topk_eig(Z, 3, method=method, m=40 if method == "krylov" else None)
    assert torch.all(r.eigvals == 0) and torch.all(r.residuals == 0) and bool(r.converged.all())
    np.testing.assert_allclose(torch.linalg.vector_norm(r.eigvecs, dim=-2).numpy(), 1.0)
    Ident = 1.5 * torch.eye(d, dtype=torch.float64)
    r = topk_eig(Ident, 3, method=method, m=40 if method == "krylov" else None)
    np.testing.assert_allclose(r.eigvals.numpy(), 1.5, atol=1e-14)
    assert float(r.residuals.max()) < 1e-14


def test_d1():
    for a in (-2.5, 0.0, 3.0):
        r = topk_eig(np.array([[a]]), 1)
        assert r.eigvals.shape == (1,) and complex(r.eigvals[0]) == a
        assert r.eigvecs.numpy().tolist() == [[1.0]]
        assert float(r.residuals[0]) == 0.0
    with pytest.raises(ValueError):
        topk_eig(np.eye(3), 4)
    with pytest.raises(ValueError):
        topk_eig(np.ones((3, 2)), 1)
    bad = np.eye(150)
    bad[3, 4] = np.nan
    with pytest.raises(ValueError):
        topk_eig(bad, 2, method="krylov")


def test_float32_input_and_mixed_precision_path():
    A32 = torch.from_numpy(_with_outliers(200, [3.0, -2.5, complex(2.0, 0.7), 1.8], seed=6)).float()
    A64 = A32.double().numpy()  # the float32 matrix, cast exactly
    r = topk_eig(A32, 5, method="krylov", m=48)
    assert r.eigvals.dtype == torch.complex128 and r.residuals.dtype == torch.float64
    _check_against_lapack(A64, r, 5)
    # The GPU default: float32 cycles, then float64 cycles from the float32 Schur basis.
    r32 = topk_eig(A32, 5, method="krylov", m=48, work_dtype=torch.float32)
    assert bool(r32.converged.all()) and float(r32.residuals.max()) < 1e-11
    _check_against_lapack(A64, r32, 5)


def test_batch_shapes_and_device():
    A = torch.from_numpy(_ginibre(4, 140, seed=7)).reshape(2, 2, 140, 140)
    r = topk_eig(A, 2, method="krylov", m=40)
    assert r.eigvals.shape == (2, 2, 2) and r.eigvecs.shape == (2, 2, 140, 2)
    assert r.converged.shape == (2, 2) and r.schur_basis.shape[:3] == (2, 2, 140)
    for t in (r.eigvals, r.eigvecs, r.residuals, r.schur_basis, r.converged, r.matvecs):
        assert t.device == A.device
    single = topk_eig(A[0, 1], 2, method="krylov", m=40)
    np.testing.assert_allclose(single.eigvals.numpy(), r.eigvals[0, 1].numpy(), atol=1e-10)
    chunked = topk_eig(A, 2, method="krylov", m=40, chunk=3)  # chunks of 3 and 1
    assert chunked.eigvals.shape == (2, 2, 2) and chunked.schur_basis.shape[:3] == (2, 2, 140)
    np.testing.assert_allclose(chunked.eigvals.numpy(), r.eigvals.numpy(), atol=1e-10)
    np.testing.assert_allclose(chunked.residuals.numpy(), r.residuals.numpy(), atol=1e-12)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_stays_on_device_and_equals_lapack():
    A = _with_outliers(300, [3.0, -2.5, complex(2.0, 0.7), 1.8], seed=8)
    At = torch.from_numpy(A).cuda()
    r = topk_eig(At, 5)  # float32 cycles + float64 refinement on the GPU
    for t in (r.eigvals, r.eigvecs, r.residuals, r.schur_basis, r.converged, r.matvecs):
        assert t.device.type == "cuda"
    ref = spectra.eigvals(A)[:5]
    np.testing.assert_allclose(r.eigvals.cpu().numpy(), ref, atol=REL * abs(ref[0]), rtol=0)


def test_normalize_eigvecs_matches_spectra():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((7, 5)) + 1j * rng.standard_normal((7, 5))
    X[:, 3] = X[:, 3].real * (0.3 - 0.8j)  # a real vector with an arbitrary complex phase
    mask = np.array([True, True, False, False, True])
    got = normalize_eigvecs(torch.from_numpy(X), torch.from_numpy(mask)).numpy()
    for j in range(5):
        want = spectra.normalize_eigvec(X[:, j], bool(mask[j]))
        np.testing.assert_allclose(got[:, j], want, atol=1e-14)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(130, 170), k=st.integers(1, 6))
def test_random_outlier_matrices_property(seed, d, k):
    rng = np.random.default_rng(seed)
    outs = list(rng.choice([-1, 1], 4) * rng.uniform(1.3, 3.0, 4))
    A = _with_outliers(d, outs, seed=seed)
    r = topk_eig(A, k, method="krylov", m=40, seed=seed)
    ref = spectra.eigvals(A)[:k]
    np.testing.assert_allclose(r.eigvals.numpy(), ref, atol=REL * abs(ref[0]), rtol=0)
