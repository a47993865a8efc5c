"""Attention weights of one layer in the book's column convention.

``y = W x`` with ``W ∈ R^{out×in}``. Query head ``h`` owns rows ``[h·d_h, (h+1)·d_h)`` of ``Q``, ``K``
and ``V`` and the same columns of ``O``. With grouped-query attention the key and value heads are
already *expanded* here (query head ``h`` reads KV head ``h // (H / n_kv)``), so every matrix below
has ``H`` head blocks and ``F = O @ V`` is ``d × d`` even when ``H·d_h ≠ d`` (Gemma-2).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lib.errors import InputError


def expand_kv(W: torch.Tensor, n_heads: int, n_kv_heads: int, head_dim: int) -> torch.Tensor:
    """Repeat KV head blocks so that query head ``h`` sees KV head ``h // (n_heads // n_kv_heads)``.

    Args:
        W: ``(n_kv·d_h, d)`` key or value weight, or ``(n_kv·d_h,)`` bias.
    Returns:
        ``(H·d_h, d)`` (or ``(H·d_h,)``), matching Hugging Face's ``repeat_kv``.
    """
    if n_heads % n_kv_heads:
        raise InputError(f"n_heads = {n_heads} is not a multiple of n_kv_heads = {n_kv_heads}")
    group = n_heads // n_kv_heads
    blocks = W.reshape(n_kv_heads, head_dim, *W.shape[1:])
    return blocks.repeat_interleave(group, dim=0).reshape(n_heads * head_dim, *W.shape[1:])


@dataclass(frozen=True)
class AttentionWeights:
    """The attention weights of one layer, float64, column convention, KV heads expanded.

    Attributes:
        Q, K, V: ``(H·d_h, d)`` projections (K and V expanded to H heads).
        O: ``(d, H·d_h)`` output projection.
        b_Q, b_K, b_V: ``(H·d_h,)`` biases or ``None``.
        b_O: ``(d,)`` bias or ``None``.
        n_heads: H, the number of query heads.
        n_kv_heads: number of distinct key/value heads in the checkpoint (``H`` without GQA).
        head_dim: ``d_h``.
        score_scale: the factor multiplying ``<q, k>`` (``1/sqrt(d_h)`` for most families, 1 for
            GPT-Neo, ``query_pre_attn_scalar^{-1/2}`` for Gemma-2).
        causal: whether the family masks future positions.
        window: sliding-window length of this layer, or ``None`` for global attention.
        qk_norm: whether the checkpoint normalizes queries and keys (OLMo-2); the simplified
            dynamics do not model it.
    """

    Q: torch.Tensor
    K: torch.Tensor
    V: torch.Tensor
    O: torch.Tensor
    b_Q: torch.Tensor | None
    b_K: torch.Tensor | None
    b_V: torch.Tensor | None
    b_O: torch.Tensor | None
    n_heads: int
    n_kv_heads: int
    head_dim: int
    score_scale: float
    causal: bool
    window: int | None = None
    qk_norm: bool = False

    @property
    def d_model(self) -> int:
        """``d``, the residual width."""
        return int(self.O.shape[0])

    def layer_matrix(self) -> torch.Tensor:
        """``F = O V = Σ_h O_h V_h``, ``(d, d)`` float64."""
        return self.O @ self.V

    def head_matrices(self) -> torch.Tensor:
        """Per-head ``O_h V_h``, shape ``(H, d, d)`` float64; they sum to ``F``."""
        H, dh, d = self.n_heads, self.head_dim, self.d_model
        V_h = self.V.reshape(H, dh, d)  # (H, d_h, d)
        O_h = self.O.reshape(d, H, dh).permute(1, 0, 2)  # (H, d, d_h)
        return O_h @ V_h
