"""``lib.parallel.map_matrices`` and the stack paths that use it (values, order, errors, threads)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import scipy.linalg
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from lib.linalg import spectra
from lib.methods.layer_spectra import LayerSpectra
from lib.parallel import available_cores, map_matrices, one_thread


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


def test_a_progress_bar_counts_every_item_once_and_closes(monkeypatch):
    """``progress=``: one bar of ``n`` steps, advanced in the calling thread as items finish, closed at the end;
    the values and their order are those of the map without a bar, and an error still comes out first in order."""
    import lib.progress

    bars = []

    class Bar:
        def __init__(self, total, desc):
            self.total, self.desc, self.n, self.closed, self.threads = total, desc, 0, False, set()
            bars.append(self)

        def update(self, k):
            self.n += k
            self.threads.add(threading.get_ident())

        def close(self):
            self.closed = True

    monkeypatch.setattr(lib.progress, "progress", lambda total, desc: Bar(total, desc))
    A = _stack(n=5)
    for workers in (1, 2):
        got = map_matrices(np.linalg.eigvals, A, workers=workers, progress="eigenvalues")
        for g, s in zip(got, map_matrices(np.linalg.eigvals, A, workers=1), strict=True):
            np.testing.assert_array_equal(g, s)
        bar = bars[-1]
        assert (bar.total, bar.desc, bar.n, bar.closed) == (5, "eigenvalues", 5, True)
        assert bar.threads == {threading.get_ident()}

    def second_fails(i):
        if i >= 1:
            raise ValueError(f"item {i}")
        return i

    with pytest.raises(ValueError, match="item 1"):
        map_matrices(second_fails, range(4), workers=2, progress="items")
    n_bars = len(bars)
    assert map_matrices(np.linalg.eigvals, np.zeros((0, 4, 4)), progress="nothing") == []
    assert len(bars) == n_bars  # no bar for no items


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


class _MeetThenSilu(torch.nn.Module):
    """SiLU that waits until both threads are inside it, then computes after ``delay`` seconds: one
    thread's Jacobian finishes while the other's is still being taken."""

    def __init__(self, barrier: threading.Barrier, delay: float):
        super().__init__()
        self.barrier, self.delay = barrier, delay

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        self.barrier.wait()
        time.sleep(self.delay)
        return torch.nn.functional.silu(z)


def test_closed_form_jacobians_of_two_models_side_by_side_equal_the_serial_ones(tiny_dir):
    """Chapter 6 maps its steering views over models in threads. Forward-mode AD (``torch.func.jvp``)
    keeps one dual level for the whole process, so two threads inside it at once mixed their tangents
    (a rerun of chapter 6 differed by up to 0.05 in one twin's Jacobian). Both threads now meet inside
    the activation's slope and must still get their serial values bitwise."""
    from tiny_models import block_inputs

    import lib
    from lib.jacobians import single_token as jc

    models = [lib.load_model(str(tiny_dir("llama")), dtype=torch.float64) for _ in range(2)]
    X = [block_inputs(m, P=3, seed=s) for s, m in enumerate(models)]
    with one_thread():  # the setting the map's workers compute under
        serial = [jc.block_jacobians(m, 1, x, "mlp") for m, x in zip(models, X)]
    barrier = threading.Barrier(2, timeout=20)
    for m, delay in zip(models, (0.0, 0.5)):
        m.blocks[1].mlp.act_fn = _MeetThenSilu(barrier, delay)
    side_by_side = map_matrices(lambda i: jc.block_jacobians(models[i], 1, X[i], "mlp"), [0, 1], workers=2)
    for got, ref in zip(side_by_side, serial):
        torch.testing.assert_close(got, ref, rtol=0, atol=0)


def test_one_thread_is_the_setting_the_map_computes_under_and_is_restored():
    """A serial reference inside ``one_thread`` runs with the thread counts of the map's workers (the
    bitwise promise rests on it); the counts come back after the block, even when it raises."""
    def counts(_=None):
        return torch.get_num_threads(), max(i["num_threads"] for i in threadpool_info())

    outside = counts()
    with one_thread():
        inside = counts()
    assert inside == (1, 1)
    assert set(map_matrices(counts, range(4), workers=2)) == {inside}
    assert map_matrices(counts, range(2), workers=1) == [inside, inside]
    with pytest.raises(RuntimeError), one_thread():
        raise RuntimeError("restored all the same")
    assert counts() == outside
