"""Toy layer matrices and attention weights with a prescribed spectrum [ours].

Everything is float64 and column convention (``y = F x``). A toy ``F`` is built as
``F = S Λ S⁻¹`` with ``Λ`` real block-diagonal (a ``1×1`` block per real eigenvalue, a
``[[a, −b], [b, a]]`` block per conjugate pair ``a ± ib``) and ``S`` a random matrix with a chosen
condition number, so ``F`` is generally non-normal, like trained layer matrices.

:func:`weights_from_matrix` wraps such an ``F`` in :class:`~lib.models.weights.AttentionWeights`
(``O V = F`` exactly, random ``Q`` and ``K``), so the same simulator runs on toys and real layers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch

from lib.models.weights import AttentionWeights

__all__ = [
    "KINDS",
    "bipartite_scores",
    "bipartite_state",
    "block_matrix",
    "bulk_eigenvalues",
    "matrix_with_spectrum",
    "random_tokens",
    "spectrum_for",
    "toy_matrix",
    "weights_from_matrix",
    "with_direction",
]

Kind = Literal["real", "negative", "complex", "tie", "opposite", "near_tie", "jordan"]
KINDS: tuple[str, ...] = ("real", "negative", "complex", "tie", "opposite", "near_tie", "jordan")


def _dims(eigs: Sequence[complex]) -> int:
    """Real dimension taken by a list of eigenvalues (a complex entry stands for its conjugate pair)."""
    return sum(2 if abs(complex(z).imag) > 0 else 1 for z in eigs)


def block_matrix(eigs: Sequence[complex]) -> np.ndarray:
    """Real block-diagonal matrix whose eigenvalues are ``eigs`` (complex entries add their conjugate).

    Returns:
        float64 ``(m, m)`` with ``m`` = number of real entries + 2 × number of complex entries.
    """
    m = _dims(eigs)
    L = np.zeros((m, m))
    i = 0
    for z in eigs:
        z = complex(z)
        if abs(z.imag) > 0:
            L[i : i + 2, i : i + 2] = [[z.real, -z.imag], [z.imag, z.real]]
            i += 2
        else:
            L[i, i] = z.real
            i += 1
    return L


def _conditioned(d: int, cond: float, rng: np.random.Generator) -> np.ndarray:
    """Random ``(d, d)`` matrix ``U diag(s) Wᵀ`` with singular values log-spaced in ``[1, cond]``."""
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    W, _ = np.linalg.qr(rng.standard_normal((d, d)))
    s = np.geomspace(1.0, cond, d) if d > 1 else np.ones(1)
    return (U * rng.permutation(s)) @ W.T


def matrix_with_spectrum(
    eigs: Sequence[complex], *, seed: int = 0, cond: float = 3.0, jordan: Sequence[int] = ()
) -> np.ndarray:
    """``F = S Λ S⁻¹`` with the given eigenvalues (complex entries add their conjugate).

    Args:
        eigs: eigenvalues; a complex entry ``a + ib`` (``b ≠ 0``) stands for the pair ``a ± ib``.
        seed: seed of the basis ``S``.
        cond: condition number of ``S`` (1 gives a normal ``F``; larger is more non-normal).
        jordan: positions ``k`` (in the real block layout) that get a 1 at ``Λ[k, k+1]``, coupling two
            equal real eigenvalues into a Jordan block.

    Returns:
        float64 ``(d, d)``.
    """
    L = block_matrix(eigs)
    for k in jordan:
        L[k, k + 1] = 1.0
    rng = np.random.default_rng(seed)
    S = _conditioned(L.shape[0], cond, rng)
    return S @ np.linalg.solve(S.T, L.T).T  # S Λ S⁻¹ without forming the inverse


def bulk_eigenvalues(m: int, radius: float, rng: np.random.Generator, complex_share: float = 0.5) -> list[complex]:
    """Random eigenvalues filling ``m`` real dimensions, with largest modulus exactly ``radius``.

    The first entry is real with modulus ``radius`` (sign random); the rest have moduli uniform in
    ``[0, 0.9 radius]`` and are complex pairs with probability ``complex_share``.
    """
    if m <= 0:
        return []
    if radius == 0:  # a zero bulk: complex "pairs" of modulus 0 would collapse to one real dimension
        return [0.0] * m
    out: list[complex] = [radius * rng.choice([-1.0, 1.0])]
    left = m - 1
    while left > 0:
        mod = 0.9 * radius * rng.uniform()
        if left >= 2 and rng.uniform() < complex_share:
            ang = rng.uniform(0.05, np.pi - 0.05)
            out.append(mod * np.exp(1j * ang))
            left -= 2
        else:
            out.append(mod * rng.choice([-1.0, 1.0]))
            left -= 1
    return out


def spectrum_for(
    kind: Kind, d: int, *, gap: float = 0.5, theta: float = math.pi / 3, near: float = 0.97, seed: int = 0
) -> list[complex]:
    """The eigenvalue list behind :func:`toy_matrix` (complex entries stand for their pair).

    ``|λ_1| = 1`` always. ``gap`` is the modulus of the first eigenvalue after the dominant block
    (``|λ_2|`` for ``real``/``negative``, ``|λ_3|`` for the others), so for ``real``, ``negative`` and
    ``complex`` it is exactly the gap ratio of :func:`lib.linalg.spectra.gap_ratio`.

    Kinds: ``real`` (λ₁ = 1), ``negative`` (λ₁ = −1), ``complex`` (λ₁,₂ = e^{±iθ}), ``tie``
    (λ₁ = λ₂ = 1, semisimple), ``opposite`` (λ₁ = 1, λ₂ = −1), ``near_tie`` (λ₁ = 1, λ₂ = ``near``),
    ``jordan`` (a 2×2 Jordan block at 1).
    """
    if not 0 <= gap < 1:
        raise ValueError(f"gap must lie in [0, 1), got {gap}")
    top: list[complex] = {
        "real": [1.0],
        "negative": [-1.0],
        "complex": [complex(math.cos(theta), math.sin(theta))],
        "tie": [1.0, 1.0],
        "opposite": [1.0, -1.0],
        "near_tie": [1.0, near],
        "jordan": [1.0, 1.0],
    }[kind]
    if kind == "complex" and not 0 < theta < math.pi:
        raise ValueError(f"theta must lie in (0, π) for a complex pair, got {theta}")
    rng = np.random.default_rng(seed + 10_000)
    return top + bulk_eigenvalues(d - _dims(top), gap, rng)


def toy_matrix(
    kind: Kind = "real",
    d: int = 48,
    *,
    gap: float = 0.5,
    theta: float = math.pi / 3,
    near: float = 0.97,
    seed: int = 0,
    cond: float = 3.0,
) -> np.ndarray:
    """A ``(d, d)`` float64 layer matrix of the given kind (see :func:`spectrum_for`), ``|λ_1| = 1``."""
    eigs = spectrum_for(kind, d, gap=gap, theta=theta, near=near, seed=seed)
    return matrix_with_spectrum(eigs, seed=seed, cond=cond, jordan=(0,) if kind == "jordan" else ())


def weights_from_matrix(
    F: np.ndarray | torch.Tensor,
    n_heads: int = 4,
    *,
    seed: int = 0,
    qk_gain: float = 1.0,
    qk: Literal["random", "aligned"] = "random",
    causal: bool = False,
    qk_bias: bool = False,
) -> AttentionWeights:
    """Toy :class:`AttentionWeights` with ``O V = F`` exactly.

    ``V`` is a random orthogonal ``d × d`` matrix (``d_h = d / H``) and ``O = F Vᵀ``, so each head's
    ``F_h = O_h V_h = F V_hᵀ V_h`` is ``F`` restricted to a random ``d_h``-dimensional subspace.
    ``Q`` and ``K`` have i.i.d. ``N(0, qk_gain²/d)`` entries, so with tokens of norm ``sqrt(d)`` the scores
    ``<q, k>/sqrt(d_h)`` are of order ``qk_gain²``. ``qk="aligned"`` sets ``K = Q``, which makes every
    head's ``Qᵀ_h K_h`` positive semi-definite (tokens attend most to tokens like themselves).

    Args:
        F: ``(d, d)`` layer matrix.
        n_heads: H; must divide d.
        seed: seed of V, Q, K.
        qk_gain: scale of Q and K (attention sharpness grows like ``qk_gain²``).
        qk: ``"random"`` or ``"aligned"``.
        causal: the causal flag of the returned weights.
        qk_bias: add random Q/K biases (they only shape the attention).
    """
    F64 = torch.as_tensor(np.asarray(F, dtype=np.float64) if not isinstance(F, torch.Tensor) else F.double())
    d = F64.shape[0]
    if F64.shape != (d, d):
        raise ValueError(f"F must be square (d, d), got {tuple(F64.shape)}")
    if n_heads < 1 or d % n_heads:
        raise ValueError(f"n_heads = {n_heads} must divide d = {d}")
    dh = d // n_heads
    g = torch.Generator().manual_seed(seed)
    V, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    O = F64 @ V.T
    Q = torch.randn(d, d, generator=g, dtype=torch.float64) * (qk_gain / math.sqrt(d))
    K = Q.clone() if qk == "aligned" else torch.randn(d, d, generator=g, dtype=torch.float64) * (qk_gain / math.sqrt(d))
    bq = torch.randn(d, generator=g, dtype=torch.float64) * 0.1 if qk_bias else None
    bk = torch.randn(d, generator=g, dtype=torch.float64) * 0.1 if qk_bias else None
    return AttentionWeights(
        Q=Q, K=K, V=V, O=O, b_Q=bq, b_K=bk, b_V=None, b_O=None,
        n_heads=n_heads, n_kv_heads=n_heads, head_dim=dh, score_scale=1.0 / math.sqrt(dh), causal=causal,
    )


def random_tokens(
    n: int, d: int, *, seed: int = 0, halfspace: np.ndarray | None = None, batch: tuple[int, ...] = ()
) -> np.ndarray:
    """Isotropic Gaussian tokens ``(*batch, n, d)``, float64.

    Args:
        halfspace: optional vector ``w``; tokens with ``<w, x> < 0`` are flipped so that every token
            lies in the half-space ``<w, x> > 0`` (the assumption of the consensus proposition, with
            ``w`` the left principal eigenvector).
    """
    X = np.random.default_rng(seed).standard_normal((*batch, n, d))
    if halfspace is not None:
        s = np.sign(X @ np.asarray(halfspace, dtype=np.float64))
        X = X * np.where(s == 0, 1.0, s)[..., None]
    return X


def bipartite_state(v: np.ndarray, signs: Sequence[int], radius: float | None = None) -> np.ndarray:
    """Tokens ``x_j = r s_j v`` (``(n, d)`` float64) for signs ``s_j = ±1``; ``r`` defaults to ``sqrt(d)``."""
    v = np.asarray(v, dtype=np.float64)
    r = math.sqrt(v.size) if radius is None else radius
    return r * np.asarray(signs, dtype=np.float64)[:, None] * (v / np.linalg.norm(v))[None, :]


def bipartite_scores(weights: AttentionWeights, v: np.ndarray, radius: float | None = None) -> np.ndarray:
    """Per-head ``c_h = r² · score_scale · (Q_h v)ᵀ(K_h v)`` (chapter 2, section 2.5), float64 ``(H,)``.

    Biases are ignored (the condition of chapter 2's bipartite proposition assumes none).
    """
    v = torch.as_tensor(np.asarray(v, dtype=np.float64) / np.linalg.norm(v))
    r = math.sqrt(v.numel()) if radius is None else radius
    H, dh = weights.n_heads, weights.head_dim
    q = (weights.Q.double() @ v).reshape(H, dh)
    k = (weights.K.double() @ v).reshape(H, dh)
    return (r**2 * weights.score_scale * (q * k).sum(-1)).numpy()


def with_direction(F: np.ndarray, v: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Conjugate ``F`` by the Householder reflection ``R`` that maps unit ``v`` to unit ``u``: ``R F R``.

    The spectrum is unchanged and every eigenvector ``x`` becomes ``R x``, so an eigenvector ``v`` of
    ``F`` becomes ``u``. Used to point ``v_1`` along a chosen direction (e.g. near the all-ones vector,
    which LayerNorm's centring removes).
    """
    v = np.asarray(v, dtype=np.float64) / np.linalg.norm(v)
    u = np.asarray(u, dtype=np.float64) / np.linalg.norm(u)
    w = v - u
    if np.linalg.norm(w) < 1e-15:
        return np.array(F, dtype=np.float64)
    w /= np.linalg.norm(w)
    R = np.eye(v.size) - 2.0 * np.outer(w, w)
    return R @ np.asarray(F, dtype=np.float64) @ R
