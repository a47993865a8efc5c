"""Spectral metrics of block Jacobians and the non-normality controls (chapter 4, sections 4.3 and 4.6).

Every definition here is **reconstructed** [ours]: the paper names the quantities (complex
eigenvalues, non-normality, rotation, effective rank of the cumulative product, removal of
structured non-normality) but its exact formulas were not available. Everything runs in float64 on
the CPU (LAPACK through NumPy/SciPy; the real Schur forms through :func:`lib.linalg.schur.real_schur`, which
releases the GIL); inputs may be NumPy arrays or torch tensors.

* :func:`complex_fraction` ``f_C``, with :func:`ginibre_complex_fraction` (real Ginibre baseline);
* :func:`henrici` ``dep(M) = ‖N‖_F`` from the complex Schur form, :func:`henrici_rel` ``δ_H``;
* :func:`rotation_fraction` ``r_rot`` of the update operator ``Ā = J̄ − I``;
* :func:`effective_rank` (σ²-entropy) and :func:`cumulative_product` (rescaled, optionally truncated);
* :func:`schur_normal` (same eigenvalues, exactly normal) and :func:`shuffled_schur` (same eigenvalues
  and Henrici mass, arrangement destroyed);
* batched over any leading axes (the prompt bootstrap's resamples, :mod:`lib.methods.funnel`):
  :func:`spectral_metrics` (``f_C``, ``δ_H``, ``r_rot``, erank of every matrix of a stack) and
  :func:`funnel_eranks` (the untruncated funnel of every stack of blocks).

The batched ``δ_H`` uses ``dep(A)² = ‖A‖_F² − Σ|λ_i(A)|²`` from batched eigenvalues, which is accurate when
``δ_H`` is not tiny (relative error ``≈ ε ‖A‖²/dep²``); :func:`henrici_rel` (complex Schur) is the reference,
and the tests compare both. Values of ``δ_H`` below ``1e-6`` are not resolved by this form.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import scipy.linalg

from lib.linalg.schur import real_schur
from lib.linalg.spectra import TAU_COMPLEX, as_float64, eigvals

if TYPE_CHECKING:
    import torch

    Matrix = np.ndarray | torch.Tensor
    """A matrix (or stack) as a NumPy array or a torch tensor of any float dtype, read in float64."""

__all__ = [
    "FunnelResult",
    "both_controls",
    "complex_fraction",
    "control_matrices",
    "cumulative_product",
    "effective_rank",
    "funnel_eranks",
    "funnel_variants",
    "ginibre_complex_fraction",
    "ginibre_simulation",
    "henrici",
    "henrici_rel",
    "layer_metrics",
    "normality_residual",
    "real_schur_blocks",
    "rotation_fraction",
    "schur_normal",
    "shuffled_schur",
    "spectral_metrics",
]


def _square(M: Matrix) -> np.ndarray:
    A = as_float64(M)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise ValueError(f"expected a non-empty square matrix, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError("matrix contains NaN or infinite entries")
    return A


def complex_fraction(M: Matrix, tau: float = TAU_COMPLEX) -> float:
    """``f_C``: share of eigenvalues with ``|Im λ| > τ · max|λ|`` (reconstructed; τ = 1e-8 by default).

    ``M`` is a square matrix, or a 1-D array of its eigenvalues. Shift-invariant:
    ``f_C(J̄) = f_C(J̄ − I)`` up to eigenvalues whose imaginary part sits at the threshold.
    """
    lam = np.asarray(M) if np.ndim(M) == 1 else eigvals(_square(M))
    scale = np.abs(lam).max()
    if scale == 0:
        return 0.0
    return float(np.mean(np.abs(lam.imag) > tau * scale))


def ginibre_complex_fraction(n: int) -> float:
    """Complex fraction of an ``n × n`` real Gaussian matrix, ``1 − (1/2 + sqrt(2n/π))/n``.

    The expected number of real eigenvalues is ``≈ 1/2 + sqrt(2n/π)`` (Edelman, Kostlan & Shub 1994).
    """
    return 1.0 - (0.5 + np.sqrt(2 * n / np.pi)) / n


def henrici(M: Matrix) -> float:
    """Henrici departure from normality ``dep(M) = ‖strict upper part of the complex Schur form‖_F``.

    Computed from ``scipy.linalg.schur(M, output="complex")``, never as the difference
    ``‖M‖_F² − Σ|λ|²`` (which cancels catastrophically).
    """
    T, _ = scipy.linalg.schur(_square(M), output="complex")
    return float(np.linalg.norm(np.triu(T, 1)))


def henrici_rel(J: Matrix) -> float:
    """``δ_H = dep(J − I) / ‖J − I‖_F ∈ [0, 1]`` (reconstructed): non-normality of the update.

    ``dep`` is shift-invariant, so this is ``dep(J)/‖J − I‖_F``; dividing by ``‖J‖_F`` instead would
    let the identity swamp a small update. Returns 0 when ``J = I``.
    """
    A = _square(J) - np.eye(len(J))
    nrm = np.linalg.norm(A)
    return 0.0 if nrm == 0 else henrici(A) / nrm


def rotation_fraction(A: Matrix) -> float:
    """``r_rot(A) = ‖(A − Aᵀ)/2‖_F² / ‖A‖_F²`` (reconstructed). Pass the update ``Ā = J̄ − I``, not ``J̄``."""
    A = _square(A)
    nrm2 = float(np.sum(A * A))
    return 0.0 if nrm2 == 0 else float(np.sum(((A - A.T) / 2) ** 2) / nrm2)


def effective_rank(M: Matrix) -> float:
    """``exp(−Σ p_i log p_i)`` with ``p_i = σ_i² / Σσ²`` (σ²-entropy; [secondary] as the paper's form)."""
    s = np.linalg.svd(as_float64(M), compute_uv=False)
    return _erank_from_sv(s)


def _erank_from_sv(s: np.ndarray) -> float:
    p = s.astype(np.float64) ** 2
    tot = p.sum()
    if tot == 0:
        return 0.0
    p = p[p > 0] / tot
    return float(np.exp(-np.sum(p * np.log(p))))


@dataclass
class FunnelResult:
    """The cumulative product ``P_l`` (rescaled to unit Frobenius norm) and its effective rank.

    Attributes:
        erank: ``(L + 1,)``, entry 0 is ``erank(I) = d``, entry ``l`` is after ``l`` blocks.
        P: the final product (unit Frobenius norm). k: the truncation rank (``d`` = none).
        log_scale: ``log ‖·‖_F`` removed at each step (``(L,)``), the product's growth per block.
    """

    erank: np.ndarray
    P: np.ndarray
    k: int
    log_scale: np.ndarray


def cumulative_product(Js: Matrix | Sequence[Matrix], k: int | None = None) -> FunnelResult:
    """Funnel of the cumulative transport ``P_l = J_{l−1} ⋯ J_0`` (reconstructed, chapter 4, section 4.6).

    Each step multiplies on the left by the next Jacobian, optionally truncates to rank ``k`` by SVD
    (at every step: our reading of [secondary]), and rescales to unit Frobenius norm (erank is
    scale-free; this prevents over- and underflow).

    Args:
        Js: ``(L, d, d)`` Jacobians in block order.
        k: truncation rank (``None`` or ``d``: no truncation).
    """
    Js = as_float64(Js)
    d = Js.shape[1]
    k = d if k is None else int(k)
    if not 1 <= k <= d:
        raise ValueError(f"k must be in 1..{d}, got {k}")
    P = np.eye(d)
    er = [float(d) if k == d else effective_rank(np.eye(d)[:, :k])]
    logs = []
    for J in Js:
        M = J @ P
        U, s, Vh = np.linalg.svd(M, full_matrices=False)
        if k < d:
            s = s[:k]
            M = (U[:, :k] * s) @ Vh[:k]
        nrm = float(np.sqrt(np.sum(s**2)))
        if nrm == 0:
            raise FloatingPointError("the cumulative product became exactly zero")
        P = M / nrm
        logs.append(np.log(nrm))
        er.append(_erank_from_sv(s))
    return FunnelResult(erank=np.array(er), P=P, k=k, log_scale=np.array(logs))


def real_schur_blocks(T: np.ndarray) -> list[tuple[int, int]]:
    """``(start, size)`` of the 1×1 and 2×2 diagonal blocks of a real quasi-triangular Schur form."""
    d, i, out = len(T), 0, []
    while i < d:
        if i + 1 < d and T[i + 1, i] != 0.0:
            out.append((i, 2))
            i += 2
        else:
            out.append((i, 1))
            i += 1
    return out


def _block_diag_mask(T: np.ndarray) -> np.ndarray:
    mask = np.zeros(T.shape, dtype=bool)
    for s, n in real_schur_blocks(T):
        mask[s : s + n, s : s + n] = True
    return mask


def _normal_blocks(T: np.ndarray) -> np.ndarray:
    """``T_N``: the 1×1 blocks of a real Schur form kept, each 2×2 block made normal, the rest zero."""
    TN = np.zeros_like(T)
    for s, n in real_schur_blocks(T):
        if n == 1:
            TN[s, s] = T[s, s]
        else:
            a = 0.5 * (T[s, s] + T[s + 1, s + 1])
            b, c = T[s, s + 1], T[s + 1, s]
            w = np.sign(b) * np.sqrt(max(-b * c, 0.0))
            TN[s : s + 2, s : s + 2] = [[a, w], [-w, a]]
    return TN


def _shuffled_upper(T: np.ndarray, seed: int, variant: str) -> np.ndarray:
    """``T`` with its strictly-upper, off-block entries permuted (or sign-flipped), seeded."""
    upper = np.triu(np.ones_like(T, dtype=bool), 1) & ~_block_diag_mask(T)
    rng = np.random.default_rng(seed)
    vals = T[upper]
    if variant == "permute":
        vals = rng.permutation(vals)
    elif variant == "signs":
        vals = vals * rng.choice([-1.0, 1.0], size=vals.shape)
    else:
        raise ValueError(f"variant must be 'permute' or 'signs', got {variant!r}")
    T2 = T.copy()
    T2[upper] = vals
    return T2


def schur_normal(M: Matrix, sort: str | None = None) -> np.ndarray:
    """The real normal matrix with ``M``'s eigenvalues in ``M``'s Schur basis (reconstructed control).

    ``M = Q T Qᵀ`` (real Schur). Keep the 1×1 blocks; replace each standardized 2×2 block
    ``[[a, b], [c, a]]`` (``bc < 0``) by ``[[a, s], [−s, a]]`` with ``s = sign(b) sqrt(−bc)``, which
    is normal and has the same eigenvalues ``a ± i sqrt(−bc)``; zero everything above the block
    diagonal. Returns ``Q T_N Qᵀ`` (in ``M``'s own basis: a normal ``M`` is returned unchanged).
    ``sort`` is passed to ``scipy.linalg.schur`` (e.g. ``"ouc"``) for the ordering sensitivity run.
    """
    A = _square(M)
    T, Q = scipy.linalg.schur(A, output="real", sort=sort)[:2] if sort else real_schur(A)
    return Q @ _normal_blocks(T) @ Q.T


def both_controls(M: Matrix, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(schur_normal(M), shuffled_schur(M, seed))`` from one real Schur decomposition (half the work), computed
    with the GIL released (:func:`lib.linalg.schur.real_schur`): resamples run side by side in
    :func:`lib.parallel.map_matrices`."""
    T, Q = real_schur(_square(M))
    return Q @ _normal_blocks(T) @ Q.T, Q @ _shuffled_upper(T, seed, "permute") @ Q.T


def shuffled_schur(M: Matrix, seed: int = 0, variant: str = "permute") -> np.ndarray:
    """Keep ``M``'s Schur diagonal blocks; scramble the strictly-upper (off-block) part (reconstructed control).

    ``variant="permute"``: a seeded random permutation of those entries among their positions;
    ``"signs"``: random sign flips only. Eigenvalues and ``‖T‖_F`` are unchanged, so the Henrici
    departure is exactly preserved; only its arrangement changes.
    """
    T, Q = real_schur(_square(M))
    return Q @ _shuffled_upper(T, seed, variant) @ Q.T


def normality_residual(M: Matrix) -> float:
    """``‖M Mᵀ − Mᵀ M‖_F / ‖M‖_F²`` (0 iff ``M`` is normal)."""
    A = _square(M)
    return float(np.linalg.norm(A @ A.T - A.T @ A) / max(np.sum(A * A), 1e-300))


def layer_metrics(Jbar: Matrix, tau: float = TAU_COMPLEX) -> pd.DataFrame:
    """Per-layer table of the spectral metrics of mean Jacobians ``(L, d, d)``.

    Columns: ``layer`` (1-based), ``f_C``, ``delta_H``, ``r_rot``, ``update_norm`` (``‖Ā‖_F``),
    ``spectral_radius`` of ``J̄``, ``erank_J`` (of ``J̄`` itself), ``min_abs_eig``.
    """
    Js = as_float64(Jbar)
    rows = []
    for l, J in enumerate(Js):
        lam = eigvals(J)
        A = J - np.eye(len(J))
        rows.append(
            {
                "layer": l + 1,
                "f_C": complex_fraction(lam, tau),
                "delta_H": henrici_rel(J),
                "r_rot": rotation_fraction(A),
                "update_norm": float(np.linalg.norm(A)),
                "spectral_radius": float(np.abs(lam).max()),
                "erank_J": effective_rank(J),
                "min_abs_eig": float(np.abs(lam).min()),
            }
        )
    return pd.DataFrame(rows)


def ginibre_simulation(d: int, draws: int = 5, seed: int = 0) -> dict[str, float]:
    """Mean ``f_C``, ``δ_H`` and ``r_rot`` of ``draws`` real Gaussian ``d × d`` matrices (seeded)."""
    rng = np.random.default_rng(seed)
    fc, dh, rr = [], [], []
    for _ in range(draws):
        G = rng.standard_normal((d, d))
        fc.append(complex_fraction(G))
        dh.append(henrici(G) / np.linalg.norm(G))
        rr.append(rotation_fraction(G))
    return {"f_C": float(np.mean(fc)), "delta_H": float(np.mean(dh)), "r_rot": float(np.mean(rr))}


def control_matrices(Jbar: Matrix, seed: int = 0) -> dict[str, np.ndarray]:
    """``J̄`` and its two controls, layer by layer: ``{"as measured", "Schur-normal", "shuffled Schur"}``.

    Each control keeps the eigenvalues of every ``J̄_l`` (:func:`schur_normal`,
    :func:`shuffled_schur` with seed ``seed + l``). Compute once, then multiply slices as needed.
    """
    Js = as_float64(Jbar)
    pairs = [both_controls(J, seed=seed + l) for l, J in enumerate(Js)]
    return {
        "as measured": Js,
        "Schur-normal": np.stack([p[0] for p in pairs]),
        "shuffled Schur": np.stack([p[1] for p in pairs]),
    }


def funnel_variants(Jbar: Matrix, k: int | None = None, seed: int = 0,
                    controls: dict[str, np.ndarray] | None = None) -> dict[str, FunnelResult]:
    """The funnel of ``J̄`` and of its two controls (see :func:`control_matrices`).

    Pass ``controls`` (from :func:`control_matrices`) to reuse the Schur work across several ``k``.
    """
    controls = control_matrices(Jbar, seed) if controls is None else controls
    return {name: cumulative_product(Ms, k) for name, Ms in controls.items()}


# --- Batched over stacks (chapter 4's prompt bootstrap): eigenvalues and singular values, no Schur form -------


def _erank_sv(s: np.ndarray) -> np.ndarray:
    """σ²-entropy effective rank over the last axis of ``s`` (``(..., n)`` singular values; 0 if all are 0)."""
    return _erank_sq(s**2)


def _erank_sq(p: np.ndarray) -> np.ndarray:
    """:func:`_erank_sv` from the squared singular values ``σ²`` ``(..., n)`` (≥ 0)."""
    tot = p.sum(-1, keepdims=True)
    p = np.divide(p, tot, out=np.zeros_like(p), where=tot > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        H = -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=-1)
    return np.where(tot[..., 0] > 0, np.exp(H), 0.0)


def spectral_metrics(Js: Matrix, *, update: bool = True, tau: float = TAU_COMPLEX) -> dict[str, np.ndarray]:
    """``f_C``, ``delta_H``, ``r_rot`` and ``erank`` of every matrix in a stack ``(..., d, d)`` (float64).

    Args:
        Js: block Jacobians (column convention), any leading shape.
        update: ``True`` (pre-norm): the operator is ``J − I``; ``False`` (post-LN contrast): ``J`` itself.
            ``f_C`` is shift-invariant, so only ``delta_H`` and ``r_rot`` depend on it. ``erank`` is always
            of ``J`` (what a perturbation passes through).

    Returns:
        arrays of shape ``Js.shape[:-2]``. Definitions as :func:`complex_fraction`, :func:`henrici_rel`
        (normalised by the operator's own norm) and :func:`rotation_fraction`.
    """
    J = as_float64(Js)
    d = J.shape[-1]
    A = J - np.eye(d) if update else J
    lam = np.linalg.eigvals(A)
    scale = np.abs(lam).max(-1, keepdims=True)
    f_c = np.mean(np.abs(lam.imag) > tau * scale, axis=-1)
    f_c = np.where(scale[..., 0] > 0, f_c, 0.0)
    nrm2 = np.sum(A * A, axis=(-2, -1))
    dep2 = np.clip(nrm2 - np.sum(np.abs(lam) ** 2, axis=-1), 0.0, None)
    safe = np.where(nrm2 > 0, nrm2, 1.0)
    delta_h = np.where(nrm2 > 0, np.sqrt(dep2 / safe), 0.0)
    K = (A - np.swapaxes(A, -1, -2)) / 2
    r_rot = np.where(nrm2 > 0, np.sum(K * K, axis=(-2, -1)) / safe, 0.0)
    # σ² as the eigenvalues of the Gram matrix J Jᵀ: 1.5× faster than the SVD at d = 128 and 1.8× at d = 384 (one
    # thread, this project's machine, Gram product included), and as exact for the erank (each σ² is off by at most
    # ~1e-16 σ₁², so each p_i by ~1e-16; tests/unit/test_nonnormal.py)
    s2 = np.clip(np.linalg.eigvalsh(J @ np.swapaxes(J, -1, -2)), 0.0, None)
    return {"f_C": f_c, "delta_H": delta_h, "r_rot": r_rot, "erank": _erank_sq(s2)}


def funnel_eranks(Js: Matrix) -> np.ndarray:
    """Effective rank of the untruncated cumulative product after every block, batched.

    Args:
        Js: ``(..., L, d, d)`` Jacobians in block order.
    Returns:
        ``(..., L + 1)``: entry 0 is ``d`` (the identity), entry ``l`` is ``erank(J_{l−1} ⋯ J_0)``;
        equal to :func:`cumulative_product` ``(Js).erank`` for each leading index.
    """
    J = as_float64(Js)
    *lead, L, d, _ = J.shape
    P = np.broadcast_to(np.eye(d), (*lead, d, d)).copy()
    out = [np.full(tuple(lead), float(d))]
    for l in range(L):
        P = J[..., l, :, :] @ P
        nrm = np.sqrt(np.sum(P * P, axis=(-2, -1), keepdims=True))
        if np.any(nrm == 0):
            raise FloatingPointError("the cumulative product became exactly zero")
        P = P / nrm
        out.append(_erank_sv(np.linalg.svd(P, compute_uv=False)))
    return np.stack(out, axis=-1)
