"""Two views of one layer (chapter 6) [ours]: the power-method matrix ``F_t = O_t V_t`` inside the block Jacobian.

On a single token the attention core is affine (``n ↦ F n + b``, :mod:`lib.jacobians.single_token`), so the
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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from lib.jacobians import single_token as jc
from lib.linalg import spectra
from lib.methods.alignment import random_subspaces as random_subspaces_rng

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = [
    "Decomposition",
    "angle_null",
    "attention_factors",
    "decompose",
    "decompose_in_context",
    "eigen_subspace",
    "empirical_p",
    "layout",
    "principal_angles",
    "random_subspaces",
    "reference",
    "relative_departure",
    "resampled_inner",
    "resampled_norms",
    "resampled_shares",
    "singular_subspace",
    "bh_reject",
    "sorted_eig",
    "spearman_null",
    "spearman_power",
    "stratified_spearman",
    "two_sided_p",
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
    pre = jc.attention_input_norm(model, model.blocks[t])
    with torch.no_grad():
        o = (X if pre is None else pre(X)) @ F.T + b
        return _factors_at(model, t, X, o, z=X + X @ F.T + b if model.family in POST_NORM else None)


def _factors_at(model: SpectralModel, t: int, X: torch.Tensor, o: torch.Tensor,
                z: torch.Tensor | None = None) -> Factors:
    """``(S, L, R)`` at the residuals ``X`` ``(P, d)`` whose attention core outputs ``o`` ``(P, d)``
    (``F n + b`` on a single token, the real output at ``T`` in context), ``None`` for the identity.
    ``z``: the post-norm LayerNorm's input if already formed (default ``X + o``)."""
    blk = model.blocks[t]
    fam = model.family
    with torch.no_grad():
        if fam in POST_NORM:
            ln = blk.attention.output.LayerNorm if fam == "bert" else blk.attention.LayerNorm
            Jln = jc.norm_jacobian(ln, X + o if z is None else z).dense()
            return Jln, Jln, None
        if fam in ("gpt2", "gpt_neo", "llama"):
            pre = blk.input_layernorm if fam == "llama" else blk.ln_1
            return None, None, jc.norm_jacobian(pre, X).dense()
        if fam == "olmo2":
            return None, jc.norm_jacobian(blk.post_attention_layernorm, o).dense(), None
        if fam == "gemma2":
            pre, post = blk.input_layernorm, blk.post_attention_layernorm
            return None, jc.norm_jacobian(post, o).dense(), jc.norm_jacobian(pre, X).dense()
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
        J: ``(P, d, d)`` block Jacobians. J_F: ``(P, d, d)`` the attention path ``J_mlp L F R`` (in context,
            :func:`decompose_in_context`: ``J_mlp L A R``, with the attention core's Jacobian ``A`` for ``F``).
        layout: ``"pre-norm"`` or ``"post-norm"`` (what :func:`reference` subtracts).
        write: ``(P, d, d)`` ``J_mlp L``, how a change of the attention core's output reaches the block's
            output (``J_F = write · F R``); ``None`` unless asked for.
        J_value: in context only, ``(P, d, d)`` the part of ``J_F`` through the token's own value,
            ``J_mlp L A_value R`` with ``A_value = Σ_h a_{T,h} O_h V_h``; ``None`` on a single token (where
            ``A = F`` and the whole attention path is the value path).
    """

    J: np.ndarray
    J_F: np.ndarray
    layout: str
    write: np.ndarray | None = None
    J_value: np.ndarray | None = None

    @property
    def update(self) -> np.ndarray:
        """``J − I`` (pre-norm) or ``J`` (post-norm), ``(P, d, d)``."""
        return self.J - reference(self.layout, self.J.shape[-1])


def decompose(model: SpectralModel, t: int, X: Any, *, write: bool = False) -> Decomposition:
    """Block Jacobians of block ``t`` at the rows of ``X`` ``(P, d)`` and their attention-path terms.

    ``write=True`` also keeps ``J_mlp L`` (:attr:`Decomposition.write`).

    ``J_mlp`` is :func:`lib.jacobians.single_token.block_jacobians` (``part="mlp"``, at ``u = attn(x)``); the
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


def decompose_in_context(model: SpectralModel, t: int, states: Any, positions: Any) -> Decomposition:
    """:func:`decompose` in context: block ``t`` at position ``T`` of each sequence, the others held fixed.

    In a sentence the attention core is not the affine ``n ↦ F n + b``: its Jacobian at ``T`` is
    ``A = ∂o_T/∂n_T`` (:func:`lib.jacobians.in_context.attention_cores`), the token's own value path
    ``A_value = Σ_h a_{T,h} O_h V_h`` plus the softmax's query and key paths. The split is the single-token
    one with ``A`` for ``F`` and the real output ``o_T`` for ``F n + b``: ``J = J_mlp S + J_mlp L A R``, where
    ``S, L, R`` are taken at ``x = h_t[T]`` and ``o_T`` and ``J_mlp`` at the real mid-block residual
    (``J`` is formed as ``J_mlp (S + L A R)``, as there, and ``J_F`` as ``J − J_mlp S``: one product fewer per
    prompt, at the cost of the model dtype's rounding of ``J`` in ``J_F``).

    Args:
        states: per sequence, the input of block ``t`` ``(n_p, d)``. positions: per sequence, ``T``.
    Returns:
        a :class:`Decomposition` with ``J_F`` the in-context attention path and ``J_value`` its value path
        (float64 NumPy). ``J`` equals :func:`lib.jacobians.in_context.in_context_jacobians_closed` (tested).
    """
    from lib.jacobians import in_context as jcx

    blk = model.blocks[t]
    X, o, A, A_value = jcx.attention_cores(model, t, states, positions, value_path=True)
    S, L, R = _factors_at(model, t, X, o)
    with torch.no_grad():
        J_attn, U = jc.attention_sublayer(model, blk, X, o, A)
        J_mlp = jc.mlp_part(model, blk, U)
        J = J_mlp @ J_attn  # as in_context_jacobians_closed, bit for bit
        W = J_mlp if L is None else J_mlp @ L
        J_A = J - (J_mlp if S is None else W if S is L else J_mlp @ S)  # J minus the path that avoids A
        J_v = W @ (A_value if R is None else A_value @ R)
    host = lambda M: M.double().cpu().numpy()  # noqa: E731
    return Decomposition(host(J), host(J_A), layout(model), None, host(J_v))


def resampled_inner(A: np.ndarray, B: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``⟨Σ_p W[b, p] A_p, Σ_p W[b, p] B_p⟩_F`` for every weight row ``b``: ``A``, ``B`` ``(P, ...)``,
    ``W`` ``(B, P)`` → ``(B,)``, from the ``P × P`` cross-Gram matrix of the flattened ``A_p`` and ``B_p``."""
    a = np.asarray(A, dtype=np.float64).reshape(len(A), -1)
    b = np.asarray(B, dtype=np.float64).reshape(len(B), -1)
    return np.einsum("bp,pq,bq->b", W, a @ b.T, W)


def resampled_shares(update: np.ndarray, paths: dict[str, Any], W: np.ndarray) -> dict[str, np.ndarray]:
    """The projection shares ``⟨Σ w P, Σ w U⟩ / ‖Σ w U‖²`` and the sizes ``‖Σ w P‖ / ‖Σ w U‖`` of paths.

    A share that adds up: when the update is the sum of its paths, ``U = Σ_i P_i``, the shares
    ``⟨P_i, U⟩/‖U‖²`` sum to 1 (two orthogonal halves score ½ each, where the size ratio gives 0.71 each). A
    share above 1 (and one below 0) means that two paths partly cancel; the sizes say by how much.

    A path that is a linear combination of others (``avoid = U − attn``) is given by its coefficients, not
    formed: every inner product is then a combination of the ``P × P`` Gram matrices of the arrays given
    (:func:`resampled_inner`), one per pair, each computed once (tested against the formed paths).

    Args:
        update: ``(P, d, d)`` per-prompt updates ``U_p``. paths: name → ``(P, d, d)`` per-prompt paths, or
            name → ``{"update" or an earlier array path: coefficient}`` (a combination of them).
        W: ``(B, P)`` weights (row ``b`` gives the mean ``Σ_p W[b, p] X_p``; ``1/P`` everywhere: the mean).
    Returns:
        ``{name: (B,) shares}`` and ``{"size_" + name: (B,) sizes}`` for every path, in the order of ``paths``.
    """
    arrays = {"update": np.asarray(update, dtype=np.float64).reshape(len(update), -1)}
    combos: dict[str, dict[str, float]] = {}
    for name, p in paths.items():
        if isinstance(p, dict):
            unknown = set(p) - set(arrays)
            if unknown:
                raise ValueError(f"path {name!r} combines {sorted(unknown)}: not 'update' or an earlier array path")
            combos[name] = {k: float(c) for k, c in p.items()}
        else:
            arrays[name] = np.asarray(p, dtype=np.float64).reshape(len(p), -1)
            combos[name] = {name: 1.0}
    grams: dict[tuple[str, str], np.ndarray] = {}

    def gram(a: str, b: str) -> np.ndarray:  # (P, P) ⟨A_p, B_q⟩, each pair once (the transpose for the other order)
        if (a, b) not in grams:
            if (b, a) in grams:
                return grams[b, a].T
            grams[a, b] = arrays[a] @ arrays[b].T
        return grams[a, b]

    def inner(ca: dict[str, float], cb: dict[str, float]) -> np.ndarray:  # (B,) for two combinations
        G = sum(x * y * gram(a, b) for a, x in ca.items() for b, y in cb.items())
        return np.einsum("bp,pq,bq->b", W, G, W)

    u = {"update": 1.0}
    uu = inner(u, u)
    out: dict[str, np.ndarray] = {}
    for name, c in combos.items():
        out[name] = inner(c, u) / uu
        out[f"size_{name}"] = np.sqrt(np.maximum(inner(c, c), 0.0) / uu)
    return out


def resampled_norms(A: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``‖Σ_p W[b, p] A_p‖_F`` for every weight row ``b``: ``A`` ``(P, ...)``, ``W`` ``(B, P)`` → ``(B,)``.

    The squared norm of a weighted sum is ``wᵀ G w`` with the ``P × P`` Gram matrix ``G = A Aᵀ`` of the
    flattened ``A_p``: ``O(P² d²)`` once, then ``O(P²)`` per row, instead of forming the ``B`` sums.
    """
    flat = np.asarray(A, dtype=np.float64).reshape(len(A), -1)
    return np.sqrt(np.maximum(np.einsum("bp,pq,bq->b", W, flat @ flat.T, W), 0.0))


def relative_departure(M: Any, lams: Any | None = None) -> float:
    """``dep(M)/‖M‖_F`` with ``dep(M)² = ‖M‖_F² − Σ|λ_i|²`` (Henrici), from the eigenvalues ``lams`` if given.

    The difference loses accuracy only when ``dep`` is tiny against ``‖M‖_F`` (absolute error ~1e-16 on
    ``dep²/‖M‖²``); chapter 4's Schur form (:func:`lib.linalg.nonnormal.henrici`) is the reference for that regime.
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
    :func:`eigen_subspace` needs no normalization (:func:`lib.linalg.spectra.eig` normalizes every column).
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
    coefficient), ``p`` (two-sided permutation p-value), ``null_lo`` / ``null_hi`` (central 95% of the
    permutation distribution) and ``lo`` / ``hi`` (95% bootstrap interval, points resampled within groups).
    When every group has the same ``n ≤ 8`` points (chapter 6: six layers), ``p`` and the null's quantiles
    are exact (:func:`spearman_null`, all ``n!`` orderings per group); otherwise ``n_perm`` random
    permutations, ``p = (1 + #|r*| ≥ |r|)/(n_perm + 1)``. Ties are broken by order (continuous data).
    """
    x, y, g = np.asarray(x, float), np.asarray(y, float), np.asarray(groups)
    rng = np.random.default_rng(seed)
    sizes = {int(np.sum(g == lab)) for lab in pd.unique(g)} - {0, 1, 2}
    exact = len(sizes) == 1 and min(sizes) <= _EXACT_N  # the exact permutation null
    obs, perm, boot = [], [], []
    for lab in pd.unique(g):
        xs, ys = x[g == lab], y[g == lab]
        n = xs.size
        if n < 3:
            continue
        obs.append(_spearman_rows(xs[None], ys[None])[0])
        if not exact:
            pidx = np.argsort(rng.random((n_perm, n)), axis=1)
            perm.append(_spearman_rows(np.broadcast_to(xs, (n_perm, n)), ys[pidx]))
        bidx = rng.integers(0, n, (n_boot, n))
        with np.errstate(invalid="ignore", divide="ignore"):
            boot.append(_spearman_rows(xs[bidx], ys[bidx]))
    r = float(np.mean(obs))
    bt = np.nanmean(boot, axis=0)
    if exact:
        values, prob = spearman_null(sizes.pop(), len(obs))
        cdf = np.cumsum(prob)
        p = float(two_sided_p(r, (values, prob)))
        null_lo, null_hi = values[np.searchsorted(cdf, 0.025 - 1e-12)], values[np.searchsorted(cdf, 0.975 - 1e-12)]
    else:
        null = np.mean(perm, axis=0)
        p = float((1 + np.sum(np.abs(null) >= abs(r) - 1e-12)) / (n_perm + 1))
        null_lo, null_hi = np.quantile(null, 0.025), np.quantile(null, 0.975)
    return {"r": r, "p": p, "null_lo": float(null_lo), "null_hi": float(null_hi),
            "lo": float(np.nanquantile(bt, 0.025)), "hi": float(np.nanquantile(bt, 0.975))}


_EXACT_N = 8
"""Up to this many points per group the permutation null is enumerated (8! = 40320 orderings)."""


def spearman_null(n: int, groups: int = 1, *, m: int = 20000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Permutation distribution of the mean within-group Spearman coefficient (``groups`` groups of ``n``).

    The statistic of :func:`stratified_spearman` under the null (no ties, the ``y`` permuted within each
    group). For ``n ≤ 8`` it is exact: ``r = 1 − 6 S/(n(n² − 1))`` with ``S = Σ dᵢ²`` over all ``n!``
    permutations, and the mean over groups comes from convolving the distribution of ``S`` ``groups``
    times. For larger ``n``, ``m`` Monte Carlo draws (each with probability ``1/m``).

    Returns:
        ``(values, probabilities)``, values ascending.
    """
    if n < 3 or groups < 1:
        raise ValueError(f"need n ≥ 3 points per group and at least one group, got n={n}, groups={groups}")
    denom = n * (n * n - 1)
    if n > _EXACT_N:
        rng = np.random.default_rng(seed)
        ranks = np.argsort(rng.random((m, groups, n)), axis=-1)
        S = ((ranks - np.arange(n)) ** 2).sum(-1).mean(-1)
        values = np.sort(1 - 6 * S / denom)
        return values, np.full(m, 1.0 / m)
    from itertools import permutations

    perms = np.array(list(permutations(range(n))))
    S = ((perms - np.arange(n)) ** 2).sum(1)  # even integers 0 … n(n² − 1)/3
    pmf = np.bincount(S, minlength=int(S.max()) + 1) / len(perms)
    total = pmf
    for _ in range(groups - 1):
        total = np.convolve(total, pmf)
    support = np.flatnonzero(total > 0)
    values = 1 - 6 * (support / groups) / denom
    order = np.argsort(values)
    return values[order], total[support][order]


def two_sided_p(r: Any, null: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """``P(|R| ≥ |r|)`` under a discrete null ``(values, probabilities)`` of :func:`spearman_null`, for
    every entry of ``r`` (any shape; a tolerance of 1e-12 keeps an exact tie a tie)."""
    values, prob = null
    a = np.abs(values)
    order = np.argsort(a)
    a, tail = a[order], np.cumsum(prob[order][::-1])[::-1]  # tail[i] = P(|R| ≥ a[i])
    idx = np.searchsorted(a, np.abs(np.asarray(r, dtype=np.float64)) - 1e-12, side="left")
    return np.where(idx < len(a), tail[np.minimum(idx, len(a) - 1)], 0.0)


def bh_reject(p: Any, alpha: float = 0.05) -> np.ndarray:
    """Benjamini–Hochberg at level ``alpha`` along the last axis of ``p`` ``(..., m)``: a boolean array,
    True for the rejected tests (every ``p`` up to the largest ``p₍ₖ₎ ≤ k α / m``)."""
    p = np.asarray(p, dtype=np.float64)
    m = p.shape[-1]
    srt = np.sort(p, axis=-1)
    ok = srt <= alpha * np.arange(1, m + 1) / m
    k = np.where(ok.any(-1), m - 1 - np.argmax(ok[..., ::-1], axis=-1), -1)  # last k where it holds
    thresh = np.where(k >= 0, np.take_along_axis(srt, np.maximum(k, 0)[..., None], -1)[..., 0], -np.inf)
    return p <= thresh[..., None]


def spearman_power(designs: Sequence[tuple[int, int]], effects: Sequence[float], *, planted: Sequence[int] | None = None,
                   alpha: float = 0.05, reps: int = 2000, seed: int = 0) -> np.ndarray:
    """Power of a family of :func:`stratified_spearman` tests, Benjamini–Hochberg across the family [ours].

    A vectorised Monte Carlo: each replicate draws every test's data, ``groups`` groups of ``n`` points
    from a Gaussian copula whose Spearman correlation is the planted effect (Pearson ``2 sin(π ρ/6)``), or
    0 for a test not in ``planted``; computes each test's mean within-group Spearman coefficient, its
    two-sided p-value against the exact permutation null (:func:`spearman_null`, as the test itself for
    ``n ≤ 8``), and applies :func:`bh_reject` across the family. All effects, replicates and tests of one
    design are ranked in one call.

    Args:
        designs: per test, ``(n, groups)`` (6 layers in 1 variant, or in 3 twins: ``(6, 1)``, ``(6, 3)``).
        effects: the planted Spearman correlations ``ρ`` (population values).
        planted: the indices of the tests that carry the effect (default: all).
    Returns:
        ``(len(effects), len(designs))``: the share of replicates in which each test was rejected.
    """
    rng = np.random.default_rng(seed)
    eff = np.asarray(effects, dtype=np.float64)
    on = np.zeros(len(designs), dtype=bool)
    on[list(range(len(designs)) if planted is None else planted)] = True
    p = np.zeros((len(eff), reps, len(designs)))
    for dg in sorted(set(designs)):
        n, g = dg
        idx = [i for i, d_ in enumerate(designs) if d_ == dg]
        r_p = 2 * np.sin(np.pi * eff[:, None] * on[idx][None, :] / 6)[:, None, :, None, None]  # (E, 1, k, 1, 1)
        z = rng.standard_normal((2, len(eff), reps, len(idx), g, n))
        y = r_p * z[0] + np.sqrt(1 - r_p**2) * z[1]
        p[:, :, idx] = two_sided_p(_spearman_rows(z[0], y).mean(-1), spearman_null(n, g))
    return bh_reject(p, alpha).mean(1)
