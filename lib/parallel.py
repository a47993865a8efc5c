"""Run a per-matrix float64 LAPACK computation over a stack of matrices on all cores.

A loop of ``np.linalg.eig`` over the layers of a model leaves most of a many-core machine idle:
LAPACK's nonsymmetric eigensolver (Hessenberg reduction, then the QR sweeps) gains little from
a multithreaded BLAS. NumPy releases the GIL inside its LAPACK calls, so the matrices of a stack
can instead be handled side by side, one matrix per thread with BLAS pinned to one thread each
(``benchmarks/RESULTS.md``, row ``eigvals_stack_d1024``: 1.7× on 2 cores against a loop whose
BLAS may use both; ``tests/unit/test_parallel.py`` checks the values and the threads).

Each matrix is computed exactly as in a one-thread serial loop, so the results are bitwise
identical to that loop and do not depend on the number of workers (``threadpoolctl``, a
requirement, pins the BLAS threads; without it the map runs as a plain loop). Only functions that
spend their time in LAPACK with the GIL released gain: NumPy's, and the real Schur form of
:func:`lib.linalg.schur.real_schur`; SciPy's LAPACK wrappers hold the GIL and run one at a time.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, TypeVar

__all__ = ["available_cores", "map_matrices", "one_thread", "use_one_thread"]

T = TypeVar("T")
_THREAD_LIMITS: list[Any] = []  # keeps threadpoolctl's limiter alive for the session


def use_one_thread() -> None:
    """For the rest of the session: torch and BLAS on one thread, and no transformers info logs.

    For chapters whose models and matrices are small (``d ≤ 384``): on a shared 2-core CPU, spinning threads
    made forward passes and 128×128 eigendecompositions 20–40× slower. :func:`map_matrices` still runs one
    matrix per core, and :func:`one_thread` is the scoped version, for a ``with`` block.
    """
    import torch
    import transformers
    from threadpoolctl import threadpool_limits

    transformers.logging.set_verbosity_error()  # e.g. the decoder's LM head, unused by the base model
    torch.set_num_threads(1)
    _THREAD_LIMITS.append(threadpool_limits(1))


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Within the block: torch and BLAS (pthreads and OpenMP) on one thread; the counts are restored after.

    The scoped form of :func:`use_one_thread`, and the setting under which :func:`map_matrices` computes
    each matrix: a serial loop run inside it gives the map's values bitwise, on any CPU (torch's default
    intra-op threads split a reduction differently wherever the CPU's kernels divide the work).
    """
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(before)


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def map_matrices(fn: Callable[[Any], T], mats: Sequence[Any], *, workers: int | None = None,
                 progress: str | None = None) -> list[T]:
    """``[fn(M) for M in mats]``, computed in a pool of threads with BLAS limited to one thread.

    Args:
        fn: a function of one matrix; it should spend its time in NumPy's LAPACK (which releases
            the GIL) and must not touch shared mutable state. PyTorch's reverse-mode autograd is
            per thread, but its forward mode (``torch.func.jvp``, ``jacfwd``) keeps one dual level
            for the whole process: threads inside it at once mix their tangents.
        mats: the matrices, e.g. a ``(n, d, d)`` array (iterated along its first axis).
        workers: threads; default ``min(len(mats), available_cores())``. ``1`` runs a plain loop
            (still with one BLAS thread, so the results are the same for every value).
        progress: a description for one progress bar over the items (:func:`lib.progress.progress`),
            advanced in the calling thread as items finish; ``None``: no bar.

    Returns:
        The results in the order of ``mats``. An exception raised by ``fn`` for any matrix is
        re-raised here (the first in order).
    """
    items = list(mats)
    n = len(items)
    if workers is None:
        workers = min(n, available_cores())
    workers = max(1, min(int(workers), max(n, 1)))
    bar = _bar(progress, n)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # without it BLAS threads would oversubscribe the cores: stay serial
        return [_advance(bar, fn(M)) for M in items]
    _settle_torch_threads()
    # one_thread: torch.set_num_threads(1) and BLAS on one thread, process-wide, exactly the setting of a serial
    # reference run inside one_thread (BLAS limits alone left torch's own count at 2 in this thread, and on some
    # CPUs the map then differed from that reference by ~1e-14) ...
    with one_thread():
        if workers == 1:
            return [_advance(bar, fn(M)) for M in items]
        # ... but an OpenMP thread count (torch's intra-op pool) is per thread: pin it in each worker too.
        def pin() -> None:
            _settle_torch_threads()
            threadpool_limits(1, user_api="openmp")

        with ThreadPoolExecutor(max_workers=workers, initializer=pin) as pool:
            futures = [pool.submit(fn, M) for M in items]
            for _ in as_completed(futures):
                _advance(bar, None)
            return [f.result() for f in futures]


def _bar(desc: str | None, total: int) -> Any:
    """A progress bar of ``total`` steps, or ``None`` (also for no steps: a bar that never moves would stay open)."""
    if desc is None or total == 0:
        return None
    from lib.progress import progress

    return progress(total=total, desc=desc)


def _advance(bar: Any, value: T) -> T:
    """Advance ``bar`` by one step (closing it at its total) and return ``value``."""
    if bar is not None:
        bar.update(1)
        if bar.n >= bar.total:
            bar.close()
    return value


def _settle_torch_threads() -> None:
    """Let torch set this thread's OpenMP count now, so that a pin made after it holds.

    Torch gives each thread, on its first parallel call, the process-wide count of the last
    ``torch.set_num_threads``; in a new thread that would undo a pin made before it (workers then ran with
    two threads while a ``one_thread`` reference ran with one). Does nothing if torch is not imported.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.get_num_threads()
