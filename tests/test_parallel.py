"""``lib.parallel.map_matrices`` and the stack paths that use it (values, order, errors, threads)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.linalg
from threadpoolctl import threadpool_info, threadpool_limits

from lib import spectra
from lib.layer_spectra import LayerSpectra
from lib.parallel import available_cores, map_matrices


def _stack(n: int = 5, d: int = 48, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d, d)) / np.sqrt(d)


def test_results_are_in_order_and_bitwise_independent_of_workers():
    A = _stack()
    with threadpool_limits(1):
        serial = [np.linalg.eigvals(M) for M in A]
    for workers in (1, 2, 3, 8):
        got = map_matrices(np.linalg.eigvals, A, workers=workers)
        assert len(got) == len(A)
        for g, s in zip(got, serial):
            np.testing.assert_array_equal(g, s)


def test_really_runs_in_several_threads_and_pins_blas_to_one():
    seen, blas = set(), []
    barrier = threading.Barrier(2, timeout=10)

    def fn(M):
        seen.add(threading.get_ident())
        blas.append(max(i["num_threads"] for i in threadpool_info()))
        barrier.wait()  # both workers must be inside fn at once, or this times out
        return M.sum()

    out = map_matrices(fn, _stack(n=2), workers=2)
    assert len(seen) == 2 and blas == [1, 1]
    np.testing.assert_allclose(out, _stack(n=2).sum(axis=(1, 2)))


def test_errors_propagate_and_empty_stacks_work():
    def boom(M):
        raise ValueError("bad matrix")

    with pytest.raises(ValueError, match="bad matrix"):
        map_matrices(boom, _stack(n=3), workers=2)
    assert map_matrices(np.linalg.eigvals, np.zeros((0, 4, 4))) == []
    assert available_cores() >= 1


def test_stack_eigvals_match_scipy_per_matrix_in_book_order():
    A = _stack(n=4, d=40, seed=3)
    got = spectra.eigvals(A.reshape(2, 2, 40, 40), workers=2)
    assert got.shape == (2, 2, 40)
    for M, row in zip(A, got.reshape(4, 40)):
        ref = scipy.linalg.eigvals(M)
        ref = ref[spectra.sort_order(ref)]
        np.testing.assert_allclose(row, ref, atol=1e-12)
    np.testing.assert_array_equal(spectra.eigvals(A, workers=1), spectra.eigvals(A, workers=3))
    assert spectra.eigvals(np.zeros((0, 5, 5))).shape == (0, 5)


def test_layer_spectra_equals_its_serial_loop():
    A = _stack(n=3, d=24, seed=5)
    ls = LayerSpectra(A, "test")
    for t in range(3):
        p = spectra.principal(A[t], condition=True)
        np.testing.assert_allclose(ls.principal[t].eigvals, p.eigvals, atol=1e-12)
        assert ls.principal[t].condition == pytest.approx(p.condition, rel=1e-8)
