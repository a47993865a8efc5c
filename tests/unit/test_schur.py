"""``lib.linalg.schur.real_schur`` against ``scipy.linalg.schur(M, output="real")``: bitwise, on the matrices the
book decomposes and on hard cases, with SciPy's errors, and through a thread pool."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import scipy.linalg
import torch

from lib.linalg.nonnormal import both_controls
from lib.linalg.schur import _dgees, real_schur
from lib.parallel import map_matrices, one_thread


def _cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    jordan = np.eye(6) + np.diag(np.ones(5), 1)  # defective: one eigenvalue, one eigenvector
    rotation = np.array([[0.0, -2.0], [2.0, 0.0]])
    graded = np.diag(10.0 ** np.arange(-8, 8)) @ rng.standard_normal((16, 16))  # badly scaled rows
    return {
        "1x1": np.array([[3.5]]),
        "rotation": rotation,
        "jordan": jordan,
        "symmetric": (lambda a: a + a.T)(rng.standard_normal((9, 9))),
        "graded": graded,
        "residual block, d = 128": np.eye(128) + 0.5 * rng.standard_normal((128, 128)) / np.sqrt(128),
        "gaussian, d = 257": rng.standard_normal((257, 257)),
        "zeros": np.zeros((5, 5)),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_real_schur_is_scipys_bitwise(name):
    M = _cases()[name]
    T, Q = real_schur(M)
    T_ref, Q_ref = scipy.linalg.schur(M, output="real")
    assert T.dtype == Q.dtype == np.float64
    assert np.array_equal(T, T_ref) and np.array_equal(Q, Q_ref)
    np.testing.assert_allclose(Q @ T @ Q.T, M, atol=1e-12 * max(1.0, np.abs(M).max()))


def test_real_schur_reads_float32_and_tensors_in_float64_and_leaves_its_input_alone():
    M = np.random.default_rng(1).standard_normal((12, 12)).astype(np.float32)
    before = M.copy()
    ref = scipy.linalg.schur(M.astype(np.float64), output="real")
    for x in (M, torch.from_numpy(M), np.asfortranarray(M)):
        T, Q = real_schur(x)
        assert np.array_equal(T, ref[0]) and np.array_equal(Q, ref[1])
    assert np.array_equal(M, before)


def test_real_schur_refuses_what_scipy_refuses():
    with pytest.raises(ValueError, match="square"):
        real_schur(np.ones((3, 4)))
    with pytest.raises(ValueError, match="square"):
        real_schur(np.ones((2, 3, 3)))
    bad = np.eye(4)
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        real_schur(bad)
    bad[1, 2] = np.inf
    with pytest.raises(ValueError, match="infs or NaNs"):
        real_schur(bad)
    T, Q = real_schur(np.zeros((0, 0)))
    assert T.shape == Q.shape == (0, 0)


def test_the_lapack_call_releases_the_gil():
    """A ``CFUNCTYPE`` foreign call releases the GIL; a ``PYFUNCTYPE`` one (the flag below) would hold it and the
    controls' resamples would run one at a time again."""
    assert not _dgees()._flags_ & ctypes._FUNCFLAG_PYTHONAPI


def test_controls_in_a_thread_pool_equal_the_serial_loop_bitwise():
    rng = np.random.default_rng(2)
    mats = np.eye(64) + 0.4 * rng.standard_normal((6, 64, 64)) / 8
    with one_thread():
        serial = [both_controls(M, seed=3) for M in mats]
    pooled = map_matrices(lambda M: both_controls(M, seed=3), mats, workers=2)
    for (n1, s1), (n2, s2) in zip(serial, pooled, strict=True):
        assert np.array_equal(n1, n2) and np.array_equal(s1, s2)
