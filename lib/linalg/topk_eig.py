"""Top-k eigenpairs of stacks of matrices ``(L, d, d)`` by a batched block Krylov–Schur method.

Many chapters need only the leading few eigenpairs of every layer matrix or mean Jacobian. A dense
``eig`` costs ``O(d³)`` per matrix (``~25 d³`` flops with vectors); the iterative method here costs
``O(d² · b)`` per block step for the matrix products plus ``O(d m²)`` for the orthogonalization
and the projection, and reads the stack in batched, BLAS-3 shaped products ``(L, d, d) @ (L, d, b)``.

Method [ours; a block variant of Stewart's Krylov–Schur with explicit Rayleigh–Ritz]:

* Keep, per matrix, an orthonormal basis ``Z`` of the current best invariant-subspace estimate
  (``p`` real Schur vectors) and ``A Z``.
* Each cycle expands ``V = [Z, U_1, U_2, …]`` to ``m`` columns: ``U_1`` spans the leading ``b``
  left singular directions of the residual ``R = A Z − Z (Zᵀ A Z)`` (in exact arithmetic ``R`` has
  rank ``b`` and this is the Krylov–Schur continuation block), then ``U_{j+1} = orth(A U_j)``
  (block Arnoldi, classical Gram–Schmidt twice, random replacement of numerically dependent
  directions: this handles invariant subspaces, zero matrices and repeated eigenvalues).
* Rayleigh–Ritz on the explicitly projected ``H = Vᵀ (A V)`` (``m × m``): real Schur form
  ``H = Q T Qᵀ`` in float64 LAPACK, reordered (``dtrsen``) so that the ``p`` largest-modulus Ritz
  values come first; then ``Z ← V Q[:, :p]`` and ``A Z ← (A V) Q[:, :p]`` (no extra products).
  Complex pairs stay in real arithmetic as 2×2 blocks of ``T`` (real Schur vectors).
* A Ritz pair ``(θ, x = Z y)`` has converged when ``‖A x − θ x‖ / ‖A‖_F ≤ tol`` (computed
  explicitly, not from a recurrence). Converged matrices leave the batch.

Because ``H`` is always the explicit projection and ``R`` the explicit residual, any orthonormal
``Z`` is a valid restart. This is what makes the mixed-precision path simple: on a GPU the cycles
run in float32 until the float32 residual floor, then continue in float64 from the float32 Schur
basis (re-orthonormalized, ``A Z`` recomputed in float64) until ``tol``. Final eigenvalues,
eigenvectors and residuals are float64/complex128 and are compared with LAPACK in
``tests/unit/test_topk_eig.py`` (the book's notation page, ``book/notation.md``, asks for float64 LAPACK
eigendecompositions; a GPU path stands in for them only because that test holds it to LAPACK's results).

Where the work happens: every ``O(d)``-sized tensor stays on the input's device. The ``m × m``
projected problem (``O(m³)``, independent of ``d``) is solved on the host with float64 LAPACK,
one small transfer per cycle; this is deliberate, not a hidden round trip of the data.

Output follows the book's notation page (``book/notation.md``) exactly: eigenvalues ordered by
:func:`lib.linalg.spectra.sort_order` (modulus, ties, ``|arg|``, ``Im``), eigenvectors normalized as
:func:`lib.linalg.spectra.normalize_eigvec` (implemented on-device in :func:`normalize_eigvecs`, tested
against it).

Small matrices (``d`` too small for a Krylov space of the requested size) go to the dense float64
LAPACK path, which is also available as ``method="dense"`` (the reference).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import torch
from scipy.linalg.lapack import dtrsen

from lib.linalg.spectra import TAU_COMPLEX, as_float64, is_complex, normalize_eigvec, sort_order

__all__ = ["DENSE_FACTOR", "TopK", "normalize_eigvecs", "topk_eig", "topk_eig_dense"]

DENSE_FACTOR = 3
"""``method="auto"`` uses dense LAPACK when ``d < DENSE_FACTOR · m`` (measured: below that the
Krylov basis is a large share of ``d`` and a full ``eig`` is as fast)."""


@dataclass
class TopK:
    """The leading ``k`` eigenpairs of every matrix of a stack (all tensors on the input's device).

    Attributes:
        eigvals: ``(..., k)`` complex128, in the book's order.
        eigvecs: ``(..., d, k)`` complex128, unit 2-norm, normalized by the book's convention
            (real eigenvalues: zero imaginary part).
        residuals: ``(..., k)`` float64, ``‖A x − λ x‖ / ‖A‖_F`` (0 for a zero matrix).
        schur_basis: ``(..., d, q)`` float64, orthonormal real Schur vectors spanning the leading
            invariant subspace, ``q ≥ k`` (``q = k + 1`` when the ``k``-th eigenvalue is the ``+i``
            member of a pair whose partner is cut off; padded to the largest ``q`` in the batch).
        converged: ``(...)`` bool, every residual ``≤ tol``.
        matvecs: ``(...)`` int64, matrix-vector products spent per matrix (dense path: 0).
        cycles: restart cycles of the slowest matrix (dense path: 0).
        method: ``"krylov-schur"`` or ``"dense"``.
    """

    eigvals: torch.Tensor
    eigvecs: torch.Tensor
    residuals: torch.Tensor
    schur_basis: torch.Tensor
    converged: torch.Tensor
    matvecs: torch.Tensor
    cycles: int
    method: str


# --------------------------------------------------------------------------------------------
# Normalization and residuals (on the input's device)
# --------------------------------------------------------------------------------------------


def normalize_eigvecs(X: torch.Tensor, complex_mask: torch.Tensor) -> torch.Tensor:
    """Batched, on-device :func:`lib.linalg.spectra.normalize_eigvec`.

    Args:
        X: ``(..., d, k)`` complex eigenvectors (columns).
        complex_mask: ``(..., k)`` bool, whether each eigenvalue counts as complex.

    Returns:
        ``(..., d, k)`` complex128: real eigenvalues get a real, sign-fixed unit vector (stored with
        zero imaginary part); complex ones the phase-fixed unit vector (``Re v ⊥ Im v``,
        ``‖Re v‖ ≥ ‖Im v‖``, sign fixed on ``Re v``).
    """
    X = X.to(torch.complex128)
    X = X / torch.linalg.vector_norm(X, dim=-2, keepdim=True)
    # Real eigenvalue: keep the real part, renormalize, sign-fix on the largest |entry| (first on ties).
    r = X.real
    r = r / torch.linalg.vector_norm(r, dim=-2, keepdim=True)
    r = r * _sign_at_argmax(r)
    # Complex eigenvalue: rotate so that vᵀv is real positive, then sign-fix on Re v.
    vv = (X * X).sum(dim=-2, keepdim=True)  # plain transpose, no conjugate
    ones = torch.ones_like(vv.real)
    rot = torch.where(vv.abs() >= 1e-12, torch.polar(ones, -0.5 * torch.angle(vv)), ones.to(vv.dtype))
    c = X * rot
    c = c * _sign_at_argmax(c.real)
    return torch.where(complex_mask.unsqueeze(-2), c, r.to(torch.complex128))


def _sign_at_argmax(r: torch.Tensor) -> torch.Tensor:
    """``±1`` per column: the sign of the column's entry of largest absolute value (first on ties)."""
    idx = torch.argmax(r.abs(), dim=-2, keepdim=True)
    s = torch.sign(torch.gather(r, -2, idx))
    return torch.where(s < 0, -torch.ones_like(s), torch.ones_like(s))


def _residuals(A64: torch.Tensor, lams: torch.Tensor, X: torch.Tensor, fro: torch.Tensor) -> torch.Tensor:
    """``‖A x − λ x‖ / ‖A‖_F`` for unit columns ``x`` (float64, on A's device; 0 where ‖A‖_F = 0)."""
    AX = torch.complex(A64 @ X.real, A64 @ X.imag)
    r = torch.linalg.vector_norm(AX - X * lams.unsqueeze(-2), dim=-2)
    return torch.where(fro[..., None] > 0, r / fro.clamp_min(torch.finfo(torch.float64).tiny)[..., None],
                       torch.zeros_like(r))


# --------------------------------------------------------------------------------------------
# Dense reference (float64 LAPACK)
# --------------------------------------------------------------------------------------------


def topk_eig_dense(A, k: int) -> TopK:
    """Leading ``k`` eigenpairs by full float64 LAPACK ``eig`` per matrix (the reference path).

    Same output as :func:`topk_eig`; results are moved to the input's device.
    """
    At, batch, d = _as_stack(A)
    k = _check_k(k, d)
    device = At.device
    A64 = as_float64(At)  # (L, d, d) on the host: LAPACK
    L = A64.shape[0]
    lams = np.zeros((L, k), np.complex128)
    vecs = np.zeros((L, d, k), np.complex128)
    bases = []
    for i in range(L):
        w, V = np.linalg.eig(A64[i])
        order = sort_order(w)
        w, V = w[order], V[:, order]
        scale = np.abs(w).max()
        q = k + 1 if (k < d and is_complex(w[k - 1], scale) and w[k - 1].imag > 0) else k
        lams[i] = w[:k]
        cols = [normalize_eigvec(V[:, j], bool(is_complex(w[j], scale))) for j in range(q)]
        vecs[i] = np.stack([np.asarray(c, np.complex128) for c in cols[:k]], axis=1)
        bases.append(_real_basis([np.asarray(c, np.complex128) for c in cols], [w[j] for j in range(q)], scale, d))
    qmax = max(b.shape[1] for b in bases)
    basis = np.zeros((L, d, qmax))
    for i, b in enumerate(bases):
        basis[i, :, : b.shape[1]] = b
    A64t = torch.from_numpy(A64).to(device)
    lt = torch.from_numpy(lams).to(device)
    vt = torch.from_numpy(vecs).to(device)
    fro = torch.linalg.matrix_norm(A64t)
    res = _residuals(A64t, lt, vt, fro)
    return _shape_out(TopK(lt, vt, res, torch.from_numpy(basis).to(device), torch.ones(L, dtype=torch.bool, device=device),
                           torch.zeros(L, dtype=torch.int64, device=device), 0, "dense"), batch)


def _real_basis(cols, lams, scale, d) -> np.ndarray:
    """Orthonormal real basis of the span of eigenvectors (complex ones contribute Re and Im)."""
    parts = []
    for v, lam in zip(cols, lams):
        if is_complex(lam, scale):
            if lam.imag > 0:
                parts += [v.real, v.imag]
        else:
            parts.append(v.real)
    if not parts:
        return np.zeros((d, 0))
    Q, R = np.linalg.qr(np.stack(parts, axis=1))
    return Q


# --------------------------------------------------------------------------------------------
# Block Krylov–Schur
# --------------------------------------------------------------------------------------------


def topk_eig(
    A,
    k: int,
    *,
    m: int | None = None,
    block: int | None = None,
    tol: float = 1e-12,
    max_cycles: int = 500,
    work_dtype: torch.dtype | None = None,
    seed: int = 0,
    method: str = "auto",
    keep: int | None = None,
    chunk: int | None = None,
) -> TopK:
    """Leading ``k`` eigenpairs (by modulus) of each matrix of ``A``, with residuals.

    Args:
        A: ``(d, d)`` or ``(..., d, d)`` tensor or array (column convention, any float dtype; it is
            used as given, i.e. a float32 input is the float32 matrix cast exactly to float64).
        k: how many eigenpairs, ``1 ≤ k ≤ d``.
        m: Krylov basis size per cycle (default ``max(96, 8k + 64)`` columns; ``"auto"`` caps it at
            ``d // 2``, ``"krylov"`` at ``d − b``).
        block: block size ``b`` (default 2). A single-vector Krylov space holds one eigenvector
            per distinct eigenvalue, so an eigenvalue of geometric multiplicity ``g`` is found
            ``g`` times only if ``g ≤ b``; pass a larger block for matrices with higher exact
            multiplicities (``b = 2`` costs about as much as ``b = 1`` on CPU: the stack is read
            once per block).
        keep: Schur vectors kept at a restart (default ``m // 3 + k // 2``, at least ``k + 2``).
        chunk: matrices per batched run. Default on CPU: as many as fit in 32 MiB (float64), so
            that a chunk stays in cache across its many matrix–vector products (measured on the
            24 × 1024² benchmark stack: chunks of 4 run 1.7× faster than one batch of 24); on
            CUDA: the whole stack.
        tol: convergence threshold on ``‖A x − θ x‖ / ‖A‖_F`` for each of the ``k`` Ritz pairs.
        max_cycles: restart cycles before giving up (unconverged matrices are flagged in
            ``converged`` and a warning is issued; their current Ritz pairs are returned).
        work_dtype: dtype of the Krylov cycles. Default: float64 on CPU; float32 on CUDA, followed
            by float64 cycles from the float32 Schur basis until ``tol``.
        seed: seed of the random start block and of random replacements (``torch.Generator``).
        method: ``"auto"`` (Krylov–Schur, dense when ``d`` is too small for the requested
            ``m``), ``"krylov"`` or ``"dense"`` (:func:`topk_eig_dense`).

    Returns:
        :class:`TopK`, on ``A``'s device (a NumPy input is treated as a CPU tensor).

    Example:
        >>> import numpy as np
        >>> A = np.diag(np.arange(1.0, 301.0))  # eigenvalues 1, ..., 300
        >>> A[0, 1] = 7.0                       # non-normal, same eigenvalues
        >>> r = topk_eig(A, 3)
        >>> r.eigvals.real.round(decimals=8).tolist(), bool(r.converged.all())
        ([300.0, 299.0, 298.0], True)
    """
    if method not in ("auto", "krylov", "dense"):
        raise ValueError(f"method must be 'auto', 'krylov' or 'dense', got {method!r}")
    At, batch, d = _as_stack(A)
    k = _check_k(k, d)
    b = int(block) if block is not None else 2
    m_req = int(m) if m is not None else max(96, 8 * k + 64)
    m = min(m_req, d - b) if method == "krylov" else min(m_req, d // 2)
    # The kept Schur basis needs room for k (+1 for a pair, +1 guard) and at least two new blocks.
    keep_min = k + 2
    if method == "dense" or (method == "auto" and (d < DENSE_FACTOR * m_req or m < keep_min + 2 * b)):
        return topk_eig_dense(At.reshape(tuple(batch) + (d, d)), k)
    if m < keep_min + b or b < 1:
        raise ValueError(f"d = {d} is too small for a Krylov basis of m = {m} with block {b} and k = {k}; "
                         "use method='dense'")
    device = At.device
    if chunk is None:
        chunk = At.shape[0] if device.type == "cuda" else max(1, (32 * 2**20) // (8 * d * d))
    chunk = max(1, int(chunk))
    if At.shape[0] > chunk:
        kw = dict(m=m_req, block=b, tol=tol, max_cycles=max_cycles, work_dtype=work_dtype, seed=seed,
                  method=method, keep=keep, chunk=chunk)
        parts = [topk_eig(At[i : i + chunk], k, **kw) for i in range(0, At.shape[0], chunk)]
        return _shape_out(_concat(parts), batch)
    if work_dtype is None:
        work_dtype = torch.float32 if device.type == "cuda" else torch.float64
    A64 = At.to(torch.float64)
    L = A64.shape[0]
    fro = torch.linalg.vector_norm(A64, dim=(-2, -1))  # (L,) ‖A‖_F, no d×d temporary
    if not bool(torch.isfinite(fro).all()):  # a NaN or ±inf entry makes ‖A‖_F non-finite
        raise ValueError("matrix contains NaN or infinite entries")
    p = min(max(keep_min, int(keep) if keep is not None else m // 3 + k // 2), m - b)
    gen = torch.Generator(device=device).manual_seed(seed)
    tol32 = 1e-6  # float32 residual target: below this, continue in float64

    # Outputs collected per matrix index.
    out_lams = torch.zeros(L, k, dtype=torch.complex128, device=device)
    out_Y = [None] * L
    out_Z = [None] * L
    matvecs = torch.zeros(L, dtype=torch.int64, device=device)
    converged = torch.zeros(L, dtype=torch.bool, device=device)

    active = torch.arange(L, device=device)
    dtype = work_dtype
    Aw = A64 if dtype == torch.float64 else A64.to(dtype)
    Z = _orth(None, torch.randn(L, d, b, generator=gen, device=device, dtype=dtype), gen)
    AZ = Aw @ Z
    matvecs += b
    cycles = 0
    last_res, stall = None, 0
    while active.numel() and cycles < max_cycles:
        cycles += 1
        # ---- expand: V = [Z, U1, U2, ...] with A V ----
        La, p_now = Z.shape[0], Z.shape[-1]
        V = torch.empty(La, d, m, device=device, dtype=dtype)
        AV = torch.empty_like(V)
        V[..., :p_now] = Z
        AV[..., :p_now] = AZ
        T = Z.mT @ AZ
        R = AZ - Z @ T
        R = R - Z @ (Z.mT @ R)
        if R.shape[-1] > b:  # the leading b directions of the residual
            Qr, Rr = torch.linalg.qr(R)
            Us, _, _ = torch.linalg.svd(Rr)
            R = Qr @ Us[..., :b]
        W = R
        ncol = p_now
        while ncol < m:
            nb = min(b, m - ncol)
            U = _orth(V[..., :ncol], W[..., :nb], gen)
            W = Aw @ U
            V[..., ncol : ncol + nb] = U
            AV[..., ncol : ncol + nb] = W
            matvecs[active] += nb
            ncol += nb
        H = (V.mT @ AV).to(torch.float64).cpu().numpy()  # (La, m, m): the small problem, on the host
        # ---- Rayleigh–Ritz in float64 LAPACK ----
        Qp = np.empty((H.shape[0], m, p))
        Ys = np.empty((H.shape[0], p, k), np.complex128)
        thetas = np.zeros((H.shape[0], k), np.complex128)
        for i in range(H.shape[0]):
            Qp[i], Ys[i], thetas[i] = _rayleigh_ritz(H[i], p, k)
        Qp_t = torch.from_numpy(Qp).to(device=device, dtype=dtype)
        Z = V @ Qp_t
        AZ = AV @ Qp_t
        # ---- convergence: explicit residuals of the k Ritz pairs, in the working dtype ----
        Y_t = torch.from_numpy(Ys).to(device)
        th_t = torch.from_numpy(thetas).to(device)
        X = torch.complex(Z.to(torch.float64) @ Y_t.real, Z.to(torch.float64) @ Y_t.imag)
        AX = torch.complex(AZ.to(torch.float64) @ Y_t.real, AZ.to(torch.float64) @ Y_t.imag)
        xn = torch.linalg.vector_norm(X, dim=-2)
        res = torch.linalg.vector_norm(AX - X * th_t.unsqueeze(-2), dim=-2) / xn.clamp_min(1e-300)
        fa = fro[active]
        res = torch.where(fa[:, None] > 0, res / fa.clamp_min(1e-300)[:, None], torch.zeros_like(res))
        rmax = res.max(dim=-1).values
        if dtype != torch.float64:
            # Switch to float64 once the float32 cycles reach their floor (or stop improving).
            best = rmax if last_res is None else torch.minimum(last_res, rmax)
            stall = stall + 1 if last_res is not None and bool((rmax > 0.9 * last_res).all()) else 0
            if (bool((rmax <= max(tol, tol32)).all()) or stall >= 3) and cycles < max_cycles:
                # A fresh float64 Krylov–Schur run whose start block is a random combination of
                # the float32 Schur vectors: its unwanted components are already filtered to the
                # float32 residual level. (Keeping Z itself would leave R = AZ − ZT of rank p,
                # not b, and the top-b restart would never remove the float32 error.)
                dtype = torch.float64
                Aw = A64[active]
                mix = torch.randn(Z.shape[0], Z.shape[-1], b, generator=gen, device=device, dtype=torch.float64)
                Z = _orth(None, Z.to(torch.float64) @ mix, gen)
                AZ = Aw @ Z
                matvecs[active] += b
                continue
            last_res = best
            done = torch.zeros_like(rmax, dtype=torch.bool)
        else:
            done = rmax <= tol
        if cycles == max_cycles:
            done = torch.ones_like(done)
        if done.any():
            idx_done = torch.nonzero(done).flatten().tolist()
            for j in idx_done:
                g = int(active[j])
                out_lams[g] = th_t[j]
                out_Y[g] = Y_t[j]
                out_Z[g] = Z[j].to(torch.float64)
                converged[g] = bool(rmax[j] <= tol) and dtype == torch.float64
            stay = torch.nonzero(~done).flatten()
            active = active[stay]
            if active.numel():
                Z, AZ = Z[stay], AZ[stay]
                Aw = Aw[stay]
    if not bool(converged.all()):
        warnings.warn(f"topk_eig: {int((~converged).sum())} of {L} matrices did not reach tol = {tol:g} "
                      f"in {max_cycles} cycles; their residuals are reported", RuntimeWarning, stacklevel=2)
    return _shape_out(_finish(A64, fro, out_lams, out_Y, out_Z, k, converged, matvecs, cycles), batch)


def _finish(A64, fro, lams, Ys, Zs, k, converged, matvecs, cycles) -> TopK:
    """Ritz vectors, normalization, explicit float64 residuals, real Schur bases."""
    Y = torch.stack(Ys)  # (L, p, k)
    Z = torch.stack(Zs)  # (L, d, p)
    X = torch.complex(Z @ Y.real, Z @ Y.imag)
    scale = lams.abs().max(dim=-1, keepdim=True).values
    cplx = lams.imag.abs() > TAU_COMPLEX * scale
    X = normalize_eigvecs(X, cplx)
    res = _residuals(A64, lams, X, fro)
    # Schur basis: the leading q columns of Z span the leading invariant subspace (pair-complete).
    last_plus = cplx[:, -1] & (lams[:, -1].imag > 0)
    q = k + 1 if bool(last_plus.any()) else k
    basis = Z[..., :q].clone()
    if q > k:
        basis[~last_plus, :, k:] = 0.0
    return TopK(lams, X, res, basis, converged, matvecs, cycles, "krylov-schur")


def _concat(parts: list[TopK]) -> TopK:
    """Join the results of consecutive chunks of a stack (Schur bases padded to the widest)."""
    q = max(p.schur_basis.shape[-1] for p in parts)
    bases = [torch.nn.functional.pad(p.schur_basis, (0, q - p.schur_basis.shape[-1])) for p in parts]
    cat = lambda name: torch.cat([getattr(p, name) for p in parts])  # noqa: E731
    return TopK(cat("eigvals"), cat("eigvecs"), cat("residuals"), torch.cat(bases), cat("converged"),
                cat("matvecs"), max(p.cycles for p in parts), parts[0].method)


def _rayleigh_ritz(H: np.ndarray, p: int, k: int):
    """Ordered real Schur form of the projected ``H`` (float64 LAPACK).

    Returns ``Q[:, :p]`` (the leading ``p`` Schur vectors, the ``p`` largest-modulus Ritz values
    first), ``Y`` (``p × k`` complex: the leading ``k`` Ritz vectors in that basis, in the book's
    order) and the ``k`` Ritz values in the book's order.
    """
    m = H.shape[0]
    T, Q = scipy.linalg.schur(H, output="real")
    if p < m:
        T, Q, *_, info = dtrsen(_select_blocks(T, p), T, Q, job="N")
        if info != 0:
            raise np.linalg.LinAlgError(f"dtrsen failed (info = {info})")
    # Ritz pairs of the leading p x p block (dtrsen keeps the selected values in their old order,
    # so sort them again). If Q[:, :p] splits a 2x2 block, that pair is beyond the k wanted ones.
    w, Yp = np.linalg.eig(T[:p, :p])
    o = sort_order(w)[:k]
    return Q[:, :p], Yp[:, o], w[o]


def _select_blocks(T: np.ndarray, p: int) -> np.ndarray:
    """``dtrsen`` selection of ``p`` Schur positions: the largest-modulus diagonal blocks, never half a pair.

    Blocks are taken in the book's order of their eigenvalue (the ``+i`` member for a 2×2 block);
    a pair that no longer fits in the last slot is skipped in favour of the next real Ritz value,
    so that ``Q[:, :p]`` spans an invariant subspace of ``H`` (this keeps the residual
    ``A Z − Z T`` of rank ``b``, which the restart relies on). Only if no real value is left is the
    last slot left to split a pair.
    """
    n = T.shape[0]
    starts, sizes, ev = [], [], []
    i = 0
    while i < n:
        if i + 1 < n and T[i + 1, i] != 0.0:
            w = np.linalg.eigvals(T[i : i + 2, i : i + 2])
            starts.append(i), sizes.append(2), ev.append(w[np.argmax(w.imag)])
            i += 2
        else:
            starts.append(i), sizes.append(1), ev.append(T[i, i])
            i += 1
    sel = np.zeros(n, np.int32)
    room = p
    for j in sort_order(np.asarray(ev, np.complex128)):
        if room == 0:
            break
        if sizes[j] <= room:
            sel[starts[j] : starts[j] + sizes[j]] = 1
            room -= sizes[j]
    return sel


def _orth(V: torch.Tensor | None, W: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Orthonormal ``(La, d, nb)`` block spanning ``W`` minus its part in ``span V``.

    Classical Gram–Schmidt twice against ``V``, then Householder QR of the block. A column whose
    norm drops below ``sqrt(eps)`` of its original norm (numerically dependent: an invariant
    subspace, a zero matrix, a repeated eigenvalue) is replaced by a random vector and the block
    is orthogonalized again.
    """
    eps = torch.finfo(W.dtype).eps
    for _ in range(4):
        n0 = torch.linalg.vector_norm(W, dim=-2)
        for _ in range(2):
            if V is not None:
                W = W - V @ (V.mT @ W)
        Q, R = torch.linalg.qr(W)
        rdiag = R.diagonal(dim1=-2, dim2=-1).abs()
        bad = rdiag <= math.sqrt(eps) * n0
        if not bool(bad.any()):
            return Q
        rnd = torch.randn(W.shape, generator=gen, device=W.device, dtype=W.dtype)
        W = torch.where(bad.unsqueeze(-2), rnd, Q)
    return Q


# --------------------------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------------------------


def _as_stack(A):
    At = A if isinstance(A, torch.Tensor) else torch.from_numpy(np.asarray(A))
    if At.is_complex():
        raise TypeError("topk_eig expects a real matrix")
    if At.ndim < 2 or At.shape[-1] != At.shape[-2]:
        raise ValueError(f"expected square matrices of shape (..., d, d), got shape {tuple(At.shape)}")
    d = At.shape[-1]
    if d == 0:
        raise ValueError("expected a non-empty matrix, got d = 0")
    batch = tuple(At.shape[:-2])
    return At.reshape(-1, d, d), batch, d


def _check_k(k, d) -> int:
    k = int(k)
    if not 1 <= k <= d:
        raise ValueError(f"k must be in 1..{d}, got {k}")
    return k


def _shape_out(r: TopK, batch: tuple) -> TopK:
    def rs(t, tail):
        return t.reshape(tuple(batch) + tuple(tail))

    d = r.eigvecs.shape[-2]
    return TopK(
        eigvals=rs(r.eigvals, r.eigvals.shape[-1:]),
        eigvecs=rs(r.eigvecs, (d, r.eigvecs.shape[-1])),
        residuals=rs(r.residuals, r.residuals.shape[-1:]),
        schur_basis=rs(r.schur_basis, (d, r.schur_basis.shape[-1])),
        converged=rs(r.converged, ()),
        matvecs=rs(r.matvecs, ()),
        cycles=r.cycles,
        method=r.method,
    )
