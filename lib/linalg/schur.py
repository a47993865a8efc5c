"""The real Schur form ``M = Q T Qᵀ`` of a float64 matrix, computed with Python's GIL released.

SciPy's LAPACK wrappers hold the GIL while LAPACK runs, so ``scipy.linalg.schur`` called from a pool of threads
(:func:`lib.parallel.map_matrices`) runs one matrix at a time: chapter 4's non-normality controls, one Schur form
per layer and bootstrap resample, kept one core busy on a two-core machine. :func:`real_schur` calls the same
LAPACK routine (``dgees`` of the LAPACK that SciPy ships, reached through ``scipy.linalg.cython_lapack``) through
``ctypes``, which releases the GIL for the call. With the same workspace size as SciPy's it returns what
``scipy.linalg.schur(M, output="real")`` returns, bitwise (``tests/unit/test_schur.py``).

Conventions: ``T`` is quasi upper triangular (1×1 blocks for real eigenvalues, standardized 2×2 blocks
``[[a, b], [c, a]]`` with ``bc < 0`` for conjugate pairs), ``Q`` orthogonal, no sorting (LAPACK's order).
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
import scipy.linalg.cython_lapack

__all__ = ["real_schur"]

_INT = ctypes.POINTER(ctypes.c_int)
_DOUBLE = ctypes.POINTER(ctypes.c_double)
# void dgees(char *jobvs, char *sort, dselect2 *select, int *n, d *a, int *lda, int *sdim, d *wr, d *wi, d *vs,
#            int *ldvs, d *work, int *lwork, bint *bwork, int *info)   (scipy.linalg.cython_lapack)
_DGEES = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, _INT, _DOUBLE, _INT, _INT,
                          _DOUBLE, _DOUBLE, _DOUBLE, _INT, _DOUBLE, _INT, _INT, _INT)


@cache
def _dgees() -> ctypes._CFuncPtr:
    """SciPy's ``dgees`` as a ``ctypes`` function (a ``CFUNCTYPE`` call releases the GIL)."""
    capsule = scipy.linalg.cython_lapack.__pyx_capi__["dgees"]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return _DGEES(get_pointer(capsule, get_name(capsule)))


def _ptr(a: np.ndarray, kind: type) -> ctypes._Pointer:
    return a.ctypes.data_as(kind)


def _call(a: np.ndarray, vs: np.ndarray, work: np.ndarray, lwork: int) -> int:
    """One ``dgees`` call on the Fortran-ordered ``a`` (overwritten by ``T``); returns LAPACK's ``info``."""
    n = a.shape[0]
    wr, wi = np.empty(n), np.empty(n)
    bwork = np.zeros(max(n, 1), dtype=np.intc)  # not referenced without sorting
    size, ld, lw, sdim, info = (ctypes.c_int(v) for v in (n, max(n, 1), lwork, 0, 0))
    _dgees()(b"V", b"N", None, ctypes.byref(size), _ptr(a, _DOUBLE), ctypes.byref(ld), ctypes.byref(sdim),
             _ptr(wr, _DOUBLE), _ptr(wi, _DOUBLE), _ptr(vs, _DOUBLE), ctypes.byref(ld), _ptr(work, _DOUBLE),
             ctypes.byref(lw), _ptr(bwork, _INT), ctypes.byref(info))
    return info.value


def real_schur(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(T, Q)`` with ``M = Q T Qᵀ``: ``scipy.linalg.schur(M, output="real")``, bitwise, with the GIL released.

    Args:
        M: a real square ``(n, n)`` matrix, read in float64 (not modified).

    Returns:
        ``T`` ``(n, n)`` quasi upper triangular and ``Q`` ``(n, n)`` orthogonal, both float64.

    Raises:
        ValueError: ``M`` is not square or holds a non-finite entry (as SciPy's ``check_finite``).
        numpy.linalg.LinAlgError: LAPACK's QR iteration did not converge.
    """
    a = np.array(np.asarray(M, dtype=np.float64), order="F")  # a copy: dgees overwrites it
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"real_schur needs a square matrix, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("array must not contain infs or NaNs")
    n = a.shape[0]
    if n == 0:
        return a.copy(), a.copy()
    vs = np.empty((n, n), order="F")
    query = np.empty(1)
    info = _call(a.copy(order="F"), vs, query, -1)  # workspace query, as scipy.linalg.schur makes it
    if info != 0:
        raise ValueError(f"illegal value in argument {-info} of dgees")
    lwork = int(query[0])
    info = _call(a, vs, np.empty(max(lwork, 1)), lwork)
    if info < 0:
        raise ValueError(f"illegal value in argument {-info} of dgees")
    if info > 0:
        raise np.linalg.LinAlgError("Schur form not found (LAPACK's QR iteration did not converge)")
    return a, vs
