"""Effective rank of cumulative products ``P_l = J_{l−1} ⋯ J_0``, fast and on the input's device.

Chapter 4, section 4.6 (reconstructed): ``erank(M) = exp(−Σ p_i log p_i)`` with
``p_i = σ_i² / Σ σ_j²``, and the product is built as

    P = I
    for l in 0..L−1:
        M = J_l @ P
        if k < d: M = U[:, :k] diag(s[:k]) Vh[:k]      # rank-k truncation, every step
        P = M / ‖M‖_F
        record erank(P)

:func:`lib.linalg.nonnormal.cumulative_product` implements exactly this with a full float64 SVD per step;
it is the reference that this module is tested against. The fast kernel here uses two facts
[ours]:

* **Only singular values are needed** for the erank, so the untruncated product (``k = d``) takes
  one ``d × d`` product and ``svdvals`` per step (no singular vectors).
* **Truncating every step is the same as truncating once.** After the first truncation ``P`` has
  rank ``≤ k``, and ``J P`` has rank ``≤ k`` too, so every later truncation is exact. Writing the
  first truncated product as ``B_0 Vh`` (``B_0 = U_k diag(s_k)``, ``Vh`` with orthonormal rows),
  ``P_l = B_l Vh`` with ``B_l = J_{l−1} ⋯ J_1 B_0`` (``d × k``) and ``σ(P_l) = σ(B_l)``. Each step
  is a ``d × d`` by ``d × k`` product and the singular values of a ``d × k`` matrix:
  ``O(d² k + d k²)`` instead of ``O(d³)``. ``d × d`` is never formed after the first step.

The first truncation uses a randomized range finder (seeded ``torch.Generator``, oversampling and
power iterations) when ``k ≤ d/4`` and ``randomized=True``, an exact SVD otherwise. A randomized
basis is only accepted if an a-posteriori probe (Halko–Martinsson–Tropp 2011, §4.3) bounds the
range error ``‖(I − QQᵀ) J_0‖_2`` below ``rand_rtol · σ_1`` (with probability ``1 − 10⁻¹⁰``);
otherwise the exact SVD is used. This matters: residual Jacobians ``I + A`` have flat singular
spectra, for which a randomized top-k is off by percents in erank; the check sends them to the
exact path. ``CumulativeRank.first_truncation`` says which path ran.

All arithmetic is float64 (the book's notation page, ``book/notation.md``: every SVD in float64) on the input's
device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["CumulativeRank", "cumulative_effective_rank", "erank_from_singular_values"]


@dataclass
class CumulativeRank:
    """Effective ranks of the rescaled (optionally truncated) cumulative product.

    Attributes:
        erank: ``(L + 1,)`` float64; entry 0 is ``erank(P_0)`` (``d``, or ``k`` when truncated, as in
            :func:`lib.linalg.nonnormal.cumulative_product`), entry ``l`` is after ``l`` blocks.
        log_scale: ``(L,)`` float64, ``log ‖M‖_F`` removed at each step (with ``rescale=False``:
            the log-norm of the unscaled product).
        k: the truncation rank (``d`` = none).
        factor: the final product as ``(B, Vh)`` with ``P_L = B @ Vh`` (``Vh = None`` when untruncated:
            then ``B = P_L``).
        first_truncation: ``"none"``, ``"exact"``, ``"randomized"`` or ``"exact (randomized check
            failed)"``.
    """

    erank: torch.Tensor
    log_scale: torch.Tensor
    k: int
    factor: tuple[torch.Tensor, torch.Tensor | None]
    first_truncation: str = "none"


def erank_from_singular_values(s: torch.Tensor) -> torch.Tensor:
    """``exp(−Σ p log p)``, ``p = s²/Σ s²`` over the last axis (0 for an all-zero ``s``); float64."""
    p = s.to(torch.float64) ** 2
    tot = p.sum(dim=-1, keepdim=True)
    p = torch.where(tot > 0, p / tot.clamp_min(torch.finfo(torch.float64).tiny), torch.zeros_like(p))
    H = -torch.special.xlogy(p, p).sum(dim=-1)
    return torch.where(tot[..., 0] > 0, torch.exp(H), torch.zeros_like(H))


def cumulative_effective_rank(
    mats,
    k: int | None = None,
    rescale: bool = True,
    randomized: bool = True,
    seed: int = 0,
    oversample: int = 10,
    power_iters: int = 4,
    rand_rtol: float = 1e-8,
) -> CumulativeRank:
    """Effective rank of ``P_l = J_{l−1} ⋯ J_0`` after every step (chapter 4, section 4.6).

    Args:
        mats: ``(L, d, d)`` tensor or array, ``J_0 … J_{L−1}`` in block order (column convention).
        k: truncation rank; ``None`` or ``d``: no truncation.
        rescale: divide by ``‖·‖_F`` every step (erank is scale-free; this avoids over/underflow).
        randomized: use the randomized range finder for the first truncation when ``k ≤ d/4``.
        seed: seed of the range finder's ``torch.Generator``.
        oversample, power_iters: range-finder oversampling columns and power iterations.
        rand_rtol: accept the randomized basis only if its estimated range error is below
            ``rand_rtol · σ_1`` (else fall back to the exact SVD).

    Returns:
        :class:`CumulativeRank` with tensors on the input's device (a NumPy input: CPU).
    """
    J = mats if isinstance(mats, torch.Tensor) else torch.from_numpy(np.asarray(mats))
    if J.ndim != 3 or J.shape[-1] != J.shape[-2]:
        raise ValueError(f"expected a stack of square matrices (L, d, d), got shape {tuple(J.shape)}")
    J = J.to(torch.float64)
    L, d = J.shape[0], J.shape[-1]
    k = d if k is None else int(k)
    if not 1 <= k <= d:
        raise ValueError(f"k must be in 1..{d}, got {k}")
    dev = J.device
    er = [torch.tensor(float(k), dtype=torch.float64, device=dev)]
    logs = []
    if L == 0:
        eye = torch.eye(d, dtype=torch.float64, device=dev)
        return CumulativeRank(torch.stack(er), torch.zeros(0, dtype=torch.float64, device=dev), k, (eye, None))
    how = "none"
    if k == d:
        P = J[0]
        s = torch.linalg.svdvals(P)
        Vh = None
    else:
        svd = None
        how = "exact"
        if randomized and 4 * k <= d:
            svd = _randomized_svd(J[0], k, oversample, power_iters, seed, rand_rtol)
            how = "randomized" if svd is not None else "exact (randomized check failed)"
        if svd is None:
            U, s, Vh = torch.linalg.svd(J[0], full_matrices=False)
            svd = U[:, :k], s[:k], Vh[:k]
        U, s, Vh = svd
        P = U * s  # B_0 = U_k diag(s_k); P_1 = B_0 @ Vh
    for step in range(1, L + 1):
        nrm = torch.linalg.vector_norm(s)
        logs.append(torch.log(nrm))
        er.append(erank_from_singular_values(s))
        if rescale:
            P = P / nrm
        if step == L:
            break
        P = J[step] @ P
        s = torch.linalg.svdvals(P)
    logs = torch.stack(logs)
    if not bool(torch.isfinite(logs).all()):  # one check at the end, not a sync per step
        raise FloatingPointError("the cumulative product became exactly zero (or overflowed)")
    return CumulativeRank(torch.stack(er), logs, k, (P, Vh), how)


def _randomized_svd(A: torch.Tensor, k: int, oversample: int, power_iters: int, seed: int, rtol: float):
    """Leading ``k`` singular triplets of ``A`` by a seeded randomized range finder (float64).

    Halko–Martinsson–Tropp: ``Q = orth((A Aᵀ)^q A Ω)`` with QR re-orthonormalization between
    power iterations, then the SVD of the small ``Qᵀ A``. Returns ``None`` when the probe estimate
    ``10 sqrt(2/π) max_i ‖(I − QQᵀ) A ω_i‖`` (10 Gaussian probes) exceeds ``rtol · σ_1``.
    """
    d = A.shape[-1]
    ell = min(d, k + oversample)
    gen = torch.Generator(device=A.device).manual_seed(seed)
    omega = torch.randn(d, ell, generator=gen, device=A.device, dtype=A.dtype)
    Q, _ = torch.linalg.qr(A @ omega)
    for _ in range(power_iters):
        Q, _ = torch.linalg.qr(A.mT @ Q)
        Q, _ = torch.linalg.qr(A @ Q)
    Ub, s, Vh = torch.linalg.svd(Q.mT @ A, full_matrices=False)
    probe = A @ torch.randn(d, 10, generator=gen, device=A.device, dtype=A.dtype)
    err = torch.linalg.vector_norm(probe - Q @ (Q.mT @ probe), dim=0).max() * 10 * (2 / torch.pi) ** 0.5
    if bool(err > rtol * s[0]):
        return None
    return (Q @ Ub)[:, :k], s[:k], Vh[:k]
