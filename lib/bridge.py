"""Two views of one layer (chapter 6) [ours]: the power-method matrix ``F_t = O_t V_t`` inside the block Jacobian.

On a single token the attention core is affine (``n ↦ F n + b``, :mod:`lib.jacobian_closed`), so the
attention sub-block's Jacobian is **affine in F**:

    ``J_attn(x) = S + L F R``

with, by family (``J_n`` a norm's Jacobian at its input; ``z = x + F x + b`` for post-LN):

    ======================  ============  ==================  ============
    family                  ``S``          ``L``               ``R``
    ======================  ============  ==================  ============
    GPT-2, GPT-Neo, Llama   ``I``          ``I``               ``J_n1(x)``
    BERT, ALBERT (post-LN)  ``J_LN1(z)``   ``J_LN1(z)``        ``I``
    OLMo-2                  ``I``          ``J_post1(F x+b)``  ``I``
    Gemma-2                 ``I``          ``J_post1(·)``      ``J_n1(x)``
    ======================  ============  ==================  ============

and the block Jacobian splits exactly into a path that avoids ``F`` and the **attention path**:

    ``J = J_mlp S + J_mlp L F R = J_skip + J_F``.

The *update* the block adds is ``J − I`` for a pre-norm block (the skip carries the identity) and
``J`` itself for a post-norm block (the closing LayerNorm sees the whole sum), see :func:`reference`.

Everything else here compares subspaces: principal angles (float64, :func:`principal_angles`, tested
against :func:`scipy.linalg.subspace_angles`), their chance distribution for random subspaces of the same
dimensions (:func:`angle_null`), and a stratified permutation test of per-layer rank correlations
(:func:`stratified_spearman`). Shapes: Jacobians ``(P, d, d)`` column convention (``J[i, j] = ∂f_i/∂x_j``),
bases ``(d, k)`` with orthonormal columns, token states as rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from lib import jacobian_closed as jc
from lib import spectra
from lib.alignment_stats import random_subspaces as random_subspaces_rng

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = [
    "Decomposition",
    "angle_null",
    "attention_factors",
    "bootstrap_share",
    "decompose",
    "eigen_subspace",
    "empirical_p",
    "layout",
    "principal_angles",
    "random_subspaces",
    "reference",
    "relative_departure",
    "resampled_norms",
    "singular_subspace",
    "sorted_eig",
    "stratified_spearman",
]

POST_NORM: tuple[str, ...] = ("bert", "albert")
"""Families whose block ends in a LayerNorm over the skip sum (the update is ``J``, not ``J − I``)."""


# -- the closed form, split at F ---------------------------------------------------------------------
def layout(model: SpectralModel) -> str:
    """``"post-norm"`` (BERT, ALBERT) or ``"pre-norm"`` (every other family: the skip bypasses all norms)."""
    return "post-norm" if model.family in POST_NORM else "pre-norm"


def reference(model_or_layout: Any, d: int) -> np.ndarray:
    """The part of ``J`` that is not the block's update: ``I`` for pre-norm, ``0`` for post-norm ``(d, d)``."""
    lay = model_or_layout if isinstance(model_or_layout, str) else layout(model_or_layout)
    return np.eye(d) if lay == "pre-norm" else np.zeros((d, d))


Factors = tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]


def _factors(model: SpectralModel, t: int, X: torch.Tensor, F: torch.Tensor, b: torch.Tensor) -> Factors:
    """``(S, L, R)`` at the rows of ``X`` (model dtype), ``None`` standing for the identity."""
    blk = model.blocks[t]
    fam = model.family
    with torch.no_grad():
        if fam in POST_NORM:
            ln = blk.attention.output.LayerNorm if fam == "bert" else blk.attention.LayerNorm
            Jln = jc.norm_jacobian(ln, X + X @ F.T + b).dense()
            return Jln, Jln, None
        if fam in ("gpt2", "gpt_neo", "llama"):
            pre = blk.input_layernorm if fam == "llama" else blk.ln_1
            return None, None, jc.norm_jacobian(pre, X).dense()
        if fam == "olmo2":
            return None, jc.norm_jacobian(blk.post_attention_layernorm, X @ F.T + b).dense(), None
        if fam == "gemma2":
            pre, post = blk.input_layernorm, blk.post_attention_layernorm
            return None, jc.norm_jacobian(post, pre(X) @ F.T + b).dense(), jc.norm_jacobian(pre, X).dense()
    raise NotImplementedError(f"no attention factors for family {fam!r}")  # pragma: no cover


def attention_factors(model: SpectralModel, t: int, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(S, L, R)`` with ``J_attn(x) = S + L F R`` at every row of ``X`` ``(P, d)`` (module docstring).

    Each factor is ``(P, d, d)`` in the model's dtype and device (identities are expanded, not copied).
    """
    p = next(model.hf_model.parameters())
    X = torch.as_tensor(X).to(device=p.device, dtype=p.dtype)
    P, d = X.shape
    eye = torch.eye(d, dtype=p.dtype, device=p.device).expand(P, d, d)
    S, L, R = _factors(model, t, X, *jc.attention_affine(model, t))
    return tuple(eye if M is None else M for M in (S, L, R))


@dataclass(frozen=True)
class Decomposition:
    """``J = J_skip + J_F`` at ``P`` token states of one block (float64 NumPy, on the host).

    Attributes:
        J: ``(P, d, d)`` block Jacobians. J_F: ``(P, d, d)`` the attention path ``J_mlp L F R``.
        layout: ``"pre-norm"`` or ``"post-norm"`` (what :func:`reference` subtracts).
        write: ``(P, d, d)`` ``J_mlp L``, how a change of the attention core's output reaches the block's
            output (``J_F = write · F R``); ``None`` unless asked for.
    """

    J: np.ndarray
    J_F: np.ndarray
    layout: str
    write: np.ndarray | None = None

    @property
    def update(self) -> np.ndarray:
        """``J − I`` (pre-norm) or ``J`` (post-norm), ``(P, d, d)``."""
        return self.J - reference(self.layout, self.J.shape[-1])


def decompose(model: SpectralModel, t: int, X: Any, *, write: bool = False) -> Decomposition:
    """Block Jacobians of block ``t`` at the rows of ``X`` ``(P, d)`` and their attention-path terms.

    ``write=True`` also keeps ``J_mlp L`` (:attr:`Decomposition.write`).

    ``J_mlp`` is :func:`lib.jacobian_closed.block_jacobians` (``part="mlp"``, at ``u = attn(x)``); the
    attention factors come from :func:`attention_factors`. ``J = J_mlp (S + L F R)`` equals the closed-form
    and the autodiff block Jacobian (tested for every family).
    """
    p = next(model.hf_model.parameters())
    X = torch.as_tensor(X).to(device=p.device, dtype=p.dtype)
    F, b = jc.attention_affine(model, t)
    S, L, R = _factors(model, t, X, F, b)  # None: the identity, whose products are skipped
    with torch.no_grad():
        J_mlp = jc.block_jacobians(model, t, X, "mlp", (F, b))
        W = J_mlp if L is None else J_mlp @ L
        J_F = W @ (F if R is None else F @ R)
        J = (J_mlp if S is None else W if S is L else J_mlp @ S) + J_F
    host = lambda A: A.double().cpu().numpy()  # noqa: E731
    return Decomposition(host(J), host(J_F), layout(model), host(W) if write else None)


def resampled_norms(A: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``‖Σ_p W[b, p] A_p‖_F`` for every weight row ``b``: ``A`` ``(P, ...)``, ``W`` ``(B, P)`` → ``(B,)``.

    The squared norm of a weighted sum is ``wᵀ G w`` with the ``P × P`` Gram matrix ``G = A Aᵀ`` of the
    flattened ``A_p``: ``O(P² d²)`` once, then ``O(P²)`` per row, instead of forming the ``B`` sums.
    """
    flat = np.asarray(A, dtype=np.float64).reshape(len(A), -1)
    return np.sqrt(np.maximum(np.einsum("bp,pq,bq->b", W, flat @ flat.T, W), 0.0))


def bootstrap_share(dec: Decomposition, *, n_boot: int = 200, ci: float = 0.95,
                    seed: int = 0) -> tuple[float, float, float]:
    """``‖mean J_F‖_F / ‖mean update‖_F`` and its percentile bootstrap interval over prompts.

    The size of the mean block update's attention path relative to the whole update (it can exceed 1
    when the path that avoids ``F`` partly cancels it). A resampled mean is ``wᵀ A`` for a weight vector
    ``w`` (multiplicities / P), so its squared norm is ``wᵀ G w`` with the ``P × P`` Gram matrix
    ``G = A Aᵀ``: every resample costs ``O(P²)``, not ``O(P d²)``.
    """
    P = dec.J.shape[0]
    rng = np.random.default_rng(seed)
    W = np.zeros((n_boot + 1, P))
    W[0] = 1.0 / P  # the estimate itself
    np.add.at(W, (1 + np.repeat(np.arange(n_boot), P), rng.integers(0, P, n_boot * P)), 1.0 / P)
    ratio = resampled_norms(dec.J_F, W) / resampled_norms(dec.update, W)
    q = (1 - ci) / 2
    lo, hi = np.quantile(ratio[1:], [q, 1 - q])
    return float(ratio[0]), float(lo), float(hi)


def relative_departure(M: Any, lams: Any | None = None) -> float:
    """``dep(M)/‖M‖_F`` with ``dep(M)² = ‖M‖_F² − Σ|λ_i|²`` (Henrici), from the eigenvalues ``lams`` if given.

    The difference loses accuracy only when ``dep`` is tiny against ``‖M‖_F`` (absolute error ~1e-16 on
    ``dep²/‖M‖²``); chapter 4's Schur form (:func:`lib.nonnormal.henrici`) is the reference for that regime.
    """
    A = spectra.as_float64(M)
    lam = np.linalg.eigvals(A) if lams is None else np.asarray(lams)
    n2 = float(np.sum(A * A))
    return 0.0 if n2 == 0 else float(np.sqrt(max(n2 - float(np.sum(np.abs(lam) ** 2)), 0.0) / n2))


# -- subspaces and principal angles ------------------------------------------------------------------
def _orth(A: np.ndarray) -> np.ndarray:
    """Orthonormal basis of the column span of ``A`` ``(..., d, k)`` (reduced QR, float64)."""
    return np.linalg.qr(np.asarray(A, dtype=np.float64))[0]


def principal_angles(A: Any, B: Any) -> np.ndarray:
    """Principal angles (radians, ascending) between ``span A`` ``(..., d, p)`` and ``span B`` ``(..., d, q)``.

    ``min(p, q)`` angles per pair, batched over leading axes. Cosines from the singular values of
    ``Q_Aᵀ Q_B``; angles below π/4 from the sines (singular values of ``Q_B − Q_A Q_Aᵀ Q_B``), which stay
    accurate for nearly parallel subspaces (Knyazev & Argentati's rule, as SciPy). Float64 throughout.
    """
    QA, QB = _orth(A), _orth(B)
    if QA.shape[-1] < QB.shape[-1]:
        QA, QB = QB, QA  # the sines are computed in the smaller subspace
    M = np.swapaxes(QA, -1, -2) @ QB  # (..., p, q), p ≥ q
    cos = np.clip(np.linalg.svd(M, compute_uv=False), 0.0, 1.0)  # descending
    sin = np.clip(np.linalg.svd(QB - QA @ M, compute_uv=False), 0.0, 1.0)  # descending
    theta_cos = np.arccos(cos)  # ascending
    theta_sin = np.arcsin(sin[..., ::-1])  # ascending
    return np.where(theta_cos < np.pi / 4, theta_sin, theta_cos)


def random_subspaces(d: int, k: int, m: int, seed: int = 0) -> np.ndarray:
    """``m`` uniformly random ``k``-dimensional subspaces of ``R^d``: orthonormal bases ``(m, d, k)``.

    Each is the Q factor of a ``d × k`` standard Gaussian matrix (uniform on the Grassmannian).
    """
    return random_subspaces_rng(d, k, m, np.random.default_rng(seed))


def angle_null(d: int, p: int, q: int, *, m: int = 2000, seed: int = 0) -> np.ndarray:
    """Chance distribution of the smallest principal angle between a random ``p``-dim and a fixed ``q``-dim subspace.

    By rotation invariance the fixed subspace can be the first ``q`` coordinates, so a draw is one random
    ``(d, p)`` basis. Returns ``m`` angles in radians.
    """
    R = random_subspaces(d, p, m, seed)
    E = np.zeros((d, q))
    E[np.arange(q), np.arange(q)] = 1.0
    return principal_angles(R, E)[:, 0]


def empirical_p(observed: Any, null: Any, *, smaller: bool = True) -> np.ndarray:
    """``(1 + #{null at least as extreme}) / (m + 1)`` for each observed value; ``null`` ``(..., m)``.

    ``smaller=True``: small values are extreme (angles); ``False``: large values (γ, ρ).
    """
    obs = np.asarray(observed, dtype=np.float64)[..., None]
    null = np.asarray(null, dtype=np.float64)
    hits = (null <= obs) if smaller else (null >= obs)
    return (1.0 + hits.sum(-1)) / (null.shape[-1] + 1.0)


def sorted_eig(M: Any) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues and (unnormalized) eigenvectors of ``M`` in the book's order (float64 LAPACK).

    Spans of real and imaginary parts do not depend on an eigenvector's scale or phase, so
    :func:`eigen_subspace` needs no normalization (:func:`lib.spectra.eig` normalizes every column).
    """
    lams, V = np.linalg.eig(spectra.as_float64(M))
    order = spectra.sort_order(lams)
    return lams[order], V[:, order]


def eigen_subspace(M: Any | None, k: int, *, eig: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Orthonormal basis of the real span of the ``k`` leading eigenvectors of ``M`` (book order).

    A conjugate pair contributes its real and imaginary parts; if the ``k``-th eigenvalue is the first
    member of a pair, its partner is included, so the result has ``k`` or ``k + 1`` columns (float64).
    ``eig``: the output of :func:`sorted_eig` if already computed (``M`` is then not used).
    """
    lams, V = sorted_eig(M) if eig is None else eig
    scale = np.abs(lams).max()
    cols, j = [], 0
    while j < k:
        v = V[:, j]
        cols.append(v.real)
        if spectra.is_complex(lams[j], scale):
            cols.append(v.imag)
            j += 2  # the partner spans the same real plane
        else:
            j += 1
    Q, R = np.linalg.qr(np.stack(cols, axis=1))
    return Q[:, np.abs(np.diag(R)) > 1e-10 * np.abs(np.diag(R)).max()]


def singular_subspace(M: Any, k: int, side: str = "left", *, svd: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                      ) -> np.ndarray:
    """The ``k`` leading left (output) or right (input) singular vectors of ``M``, ``(d, k)`` float64.

    ``svd``: ``np.linalg.svd(M)`` if already computed.
    """
    U, _, Vh = np.linalg.svd(spectra.as_float64(M)) if svd is None else svd
    if side == "left":
        return U[:, :k]
    if side == "right":
        return Vh[:k].T
    raise ValueError(f"side must be 'left' or 'right', got {side!r}")


# -- does one layer statistic predict another? ----------------------------------------------------------------
def _rank_rows(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(x, axis=-1), axis=-1).astype(np.float64)


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    rx, ry = _rank_rows(x), _rank_rows(y)
    rx = rx - rx.mean(-1, keepdims=True)
    ry = ry - ry.mean(-1, keepdims=True)
    return (rx * ry).sum(-1) / np.sqrt((rx**2).sum(-1) * (ry**2).sum(-1))


def stratified_spearman(x: Any, y: Any, groups: Any, *, n_perm: int = 2000, n_boot: int = 1000,
                        seed: int = 0) -> dict[str, float]:
    """Mean within-group Spearman correlation of ``x`` and ``y``, tested by permuting within groups.

    Within-group ranks keep a difference *between* groups (trained vs random init, one model vs another)
    from posing as a per-layer relation. Returns ``r`` (mean over groups of the within-group Spearman
    coefficient), ``p`` (two-sided permutation p-value, ``(1 + #|r*| ≥ |r|)/(n_perm + 1)``), ``null_lo`` /
    ``null_hi`` (central 95% of the permutation distribution) and ``lo`` / ``hi`` (95% bootstrap interval,
    points resampled within groups). Ties are broken by order (continuous data).
    """
    x, y, g = np.asarray(x, float), np.asarray(y, float), np.asarray(groups)
    rng = np.random.default_rng(seed)
    obs, perm, boot = [], [], []
    for lab in pd.unique(g):
        xs, ys = x[g == lab], y[g == lab]
        n = xs.size
        if n < 3:
            continue
        obs.append(_spearman_rows(xs[None], ys[None])[0])
        pidx = np.argsort(rng.random((n_perm, n)), axis=1)
        perm.append(_spearman_rows(np.broadcast_to(xs, (n_perm, n)), ys[pidx]))
        bidx = rng.integers(0, n, (n_boot, n))
        with np.errstate(invalid="ignore", divide="ignore"):
            boot.append(_spearman_rows(xs[bidx], ys[bidx]))
    r = float(np.mean(obs))
    null = np.mean(perm, axis=0)
    bt = np.nanmean(boot, axis=0)
    return {"r": r, "p": float((1 + np.sum(np.abs(null) >= abs(r) - 1e-12)) / (n_perm + 1)),
            "null_lo": float(np.quantile(null, 0.025)), "null_hi": float(np.quantile(null, 0.975)),
            "lo": float(np.nanquantile(bt, 0.025)), "hi": float(np.nanquantile(bt, 0.975))}
