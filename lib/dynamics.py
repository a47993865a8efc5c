"""The simplified transformer layer as a discrete-time dynamical system (chapter 1, section 1.2).

One layer ``t`` maps the token states ``x_i(t) ∈ R^d`` (rows of ``X``, shape ``(..., n, d)``) to
``x_i(t+1)``::

    s^h_ij   = β · score_scale · <Q_h x_i + b_Q^h, K_h x_j + b_K^h>       (+ −∞ where masked)
    A^h      = softmax_j(s^h)                      (or uniform over the visible keys)
    y_i      = Σ_h O_h V_h Σ_j A^h_ij x_j           (+ O b_V + b_O only if keep_vo_bias)
    x_i(t+1) = N(y_i)   or   N(x_i(t) + y_i) with a residual

with ``N`` one of

* ``"l2"``: ``N_r(y) = r · y / ‖y‖`` [paper: the experiments use L2 normalization];
* ``"layernorm"``: ``N_r(P y)`` with ``P = I − 11ᵀ/d``. With ``r = sqrt(d)`` this is LayerNorm
  without affine parameters and with ``ε = 0`` [ours, exact algebra];
* ``"none"``: the identity.

Provenance: the FFN is dropped [paper]; dropping the value/output biases by default, keeping the
Q/K biases, the radius ``r = sqrt(d)`` and the sharpness multiplier ``β`` are [ours]. This layer is a
*reconstruction* of the paper's simplified model; its exact form may differ.

Conventions: weights are column convention (``y = W x``), tokens are rows, so a matrix is applied as
``X @ W.T``. Everything runs in float64 torch. The work per layer is about ``2 n² H d_h`` for the
scores and the attention-weighted values plus ``4 n d H d_h`` for the four projections; nothing
loops over tokens or heads in Python.

The weights are :class:`lib.models.weights.AttentionWeights` (toy ones from :mod:`lib.toys`, or a
real layer's ``model.layer(t).attention``); any object with an ``.attention`` attribute is unwrapped.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np
import torch

from lib.models.weights import AttentionWeights

__all__ = [
    "NORMS",
    "attention_matrices",
    "layer_step",
    "normalize",
    "simulate",
    "visibility_mask",
]

Norm = Literal["l2", "layernorm", "none"]
Attention = Literal["softmax", "uniform"]
NORMS: tuple[str, ...] = ("l2", "layernorm", "none")


def _as_weights(w: Any) -> AttentionWeights:
    """Accept an :class:`AttentionWeights` or anything with an ``.attention`` attribute (a model layer)."""
    if isinstance(w, AttentionWeights):
        return w
    inner = getattr(w, "attention", None)
    if isinstance(inner, AttentionWeights):
        return inner
    raise TypeError(
        f"expected AttentionWeights (or a layer object with an .attention attribute), got {type(w).__name__}; "
        "build toy weights with lib.toys.weights_from_matrix(F)"
    )


def _t64(x: Any) -> torch.Tensor:
    """float64 CPU tensor; keeps the autograd graph, so Jacobians of a step can be taken."""
    if isinstance(x, torch.Tensor):
        return x.to(dtype=torch.float64, device="cpu")
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        x = x.copy()  # torch refuses to wrap read-only memory (e.g. np.broadcast_to views)
    return torch.as_tensor(x, dtype=torch.float64)


SMALL_WORK = 4_000_000
"""Below this many multiply-adds per layer, run on one thread (thread start-up dominates tiny matmuls,
and on a busy 2-core machine two spinning threads made toy runs 30× slower)."""


@contextlib.contextmanager
def _threads_for(X: torch.Tensor, w: AttentionWeights) -> Iterator[None]:
    n, d = X.shape[-2], X.shape[-1]
    hd = w.n_heads * w.head_dim
    work = (X.numel() // max(n * d, 1)) * (2 * n * n * hd + 4 * n * d * hd)
    before = torch.get_num_threads()
    if work < SMALL_WORK and before > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def visibility_mask(n: int, *, causal: bool = False, window: int | None = None) -> torch.Tensor:
    """Boolean ``(n, n)`` mask, ``True`` where query ``i`` may attend to key ``j``.

    Causal: ``j ≤ i``. A sliding window of length ``w`` keeps ``i − j < w`` (causal) or
    ``|i − j| < w`` (non-causal). Every row keeps at least the diagonal.
    """
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    mask = torch.ones(n, n, dtype=torch.bool)
    if causal:
        mask &= j <= i
    if window is not None:
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        mask &= (i - j).abs() < window
    return mask


def normalize(Y: torch.Tensor, norm: Norm = "l2", radius: float | None = None) -> torch.Tensor:
    """Apply the normalization ``N`` to every row of ``Y`` (shape ``(..., n, d)``).

    Args:
        Y: float64 token states.
        norm: ``"l2"`` (``r y/‖y‖``), ``"layernorm"`` (``r P y/‖P y‖``, ``P`` the centring) or ``"none"``.
        radius: ``r``; defaults to ``sqrt(d)`` (the norm of a unit-gain LayerNorm output).
    """
    if norm == "none":
        return Y
    r = math.sqrt(Y.shape[-1]) if radius is None else float(radius)
    if norm == "layernorm":
        Y = Y - Y.mean(dim=-1, keepdim=True)
    elif norm != "l2":
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    return r * Y / torch.linalg.vector_norm(Y, dim=-1, keepdim=True)


def _heads(W: torch.Tensor, b: torch.Tensor | None, X: torch.Tensor, H: int, dh: int) -> torch.Tensor:
    """Project ``X (..., n, d)`` with ``W (H·d_h, d)`` (+ bias) and split heads: ``(..., H, n, d_h)``."""
    Z = X @ W.T
    if b is not None:
        Z = Z + b
    return Z.unflatten(-1, (H, dh)).transpose(-2, -3)


def attention_matrices(
    weights: Any,
    X: Any,
    *,
    attention: Attention = "softmax",
    beta: float | torch.Tensor = 1.0,
    causal: bool | None = None,
) -> torch.Tensor:
    """Per-head attention matrices ``A^h`` of one layer at state ``X``.

    Args:
        weights: one layer's :class:`AttentionWeights`.
        X: ``(..., n, d)`` token states.
        attention: ``"softmax"`` or ``"uniform"`` (every visible key gets the same weight).
        beta: sharpness multiplier on the scores (``β = 0`` is uniform attention) [ours]; a float, or
            a tensor of shape ``X.shape[:-2]`` with one value per batch entry.
        causal: override the weights' own ``causal`` flag.

    Returns:
        ``(..., H, n, n)`` float64, rows summing to 1.
    """
    w = _as_weights(weights)
    X = _t64(X)
    n = X.shape[-2]
    H, dh = w.n_heads, w.head_dim
    mask = visibility_mask(n, causal=w.causal if causal is None else causal, window=w.window)
    if attention == "uniform":
        A = mask.to(torch.float64)
        A = A / A.sum(-1, keepdim=True)
        return A.expand(*X.shape[:-2], H, n, n)
    if attention != "softmax":
        raise ValueError(f"attention must be 'softmax' or 'uniform', got {attention!r}")
    q = _heads(_t64(w.Q), None if w.b_Q is None else _t64(w.b_Q), X, H, dh)
    k = _heads(_t64(w.K), None if w.b_K is None else _t64(w.b_K), X, H, dh)
    # Scale the (n, d_h) queries, not the (n, n) scores, and skip the mask when nothing is hidden:
    # two fewer passes over the H·n² scores.
    b = torch.as_tensor(beta, dtype=torch.float64)
    if b.ndim:  # one sharpness per batch entry: (...,) → (..., 1, 1, 1) against q's (..., H, n, d_h)
        b = b[..., None, None, None]
    s = (q * (float(w.score_scale) * b)) @ k.transpose(-1, -2)
    if not bool(mask.all()):
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1)


def _layer_step(
    weights: Any,
    X: Any,
    *,
    norm: Norm = "l2",
    radius: float | None = None,
    residual: bool = False,
    attention: Attention = "softmax",
    beta: float | torch.Tensor = 1.0,
    causal: bool | None = None,
    keep_vo_bias: bool = False,
) -> torch.Tensor:
    w = _as_weights(weights)
    X = _t64(X)
    if X.shape[-1] != w.d_model:
        raise ValueError(f"tokens have d = {X.shape[-1]} but the weights have d = {w.d_model}")
    H, dh = w.n_heads, w.head_dim
    O = _t64(w.O)
    if attention == "uniform":
        # Every head shares one row-stochastic A, so y = F (A X) and one d×d product suffices.
        A = attention_matrices(w, X, attention="uniform", causal=causal)[..., 0, :, :]  # (..., n, n)
        Y = (A @ X) @ (O @ _t64(w.V)).T
    else:
        A = attention_matrices(w, X, attention=attention, beta=beta, causal=causal)  # (..., H, n, n)
        v = _heads(_t64(w.V), None, X, H, dh)  # (..., H, n, d_h)
        Y = (A @ v).transpose(-2, -3).flatten(-2) @ O.T  # (..., n, H·d_h) @ (H·d_h, d)
    if keep_vo_bias:
        # Rows of A sum to 1, so the value bias passes through attention unchanged: O b_V + b_O.
        if w.b_V is not None:
            Y = Y + O @ _t64(w.b_V)
        if w.b_O is not None:
            Y = Y + _t64(w.b_O)
    if residual:
        Y = X + Y
    return normalize(Y, norm, radius)


def layer_step(weights: Any, X: Any, **kw: Any) -> torch.Tensor:
    """One layer of the simplified dynamics: ``X (..., n, d) → X' (..., n, d)``, float64.

    Keyword arguments as in :func:`simulate` (``norm``, ``radius``, ``residual``, ``attention``,
    ``beta``, ``causal``, ``keep_vo_bias``); see the module docstring for the map.
    """
    w = _as_weights(weights)
    X = _t64(X)
    with _threads_for(X, w):
        return _layer_step(w, X, **kw)


def simulate(
    weights: Any | Sequence[Any],
    x0: Any,
    steps: int | None = None,
    *,
    norm: Norm = "l2",
    radius: float | None = None,
    residual: bool = False,
    attention: Attention = "softmax",
    beta: float | torch.Tensor = 1.0,
    causal: bool | None = None,
    keep_vo_bias: bool = False,
    normalize_input: bool = True,
) -> torch.Tensor:
    """Run the simplified layer and return the whole trajectory.

    Args:
        weights: shared weights (one :class:`AttentionWeights`, ``F_t = F`` for every t: the ALBERT
            case), or a sequence of per-layer weights (layer t uses ``weights[t]``), e.g.
            ``[model.layer(t).attention for t in range(model.n_layers)]``.
        x0: initial tokens ``(..., n, d)`` (extra leading axes are independent batches).
        steps: number of layers T. Required for shared weights; defaults to ``len(weights)`` for a
            sequence, and may not exceed it.
        norm: ``"l2"`` (default, [paper]), ``"layernorm"`` (``N_r(P y)``) or ``"none"``.
        radius: ``r`` of the normalization, default ``sqrt(d)`` [ours].
        residual: add the input before normalizing (``N(x + y)``) [ours: off by default].
        attention: ``"softmax"`` or ``"uniform"`` (full attention: every head averages the visible
            tokens with equal weights).
        beta: sharpness multiplier on all scores (1 = the weights as given, 0 = uniform) [ours]; a
            float, or a tensor with one value per batch entry (shape ``x0.shape[:-2]``).
        causal: override the weights' causal flag (``None`` keeps it).
        keep_vo_bias: keep the value/output biases (makes the step affine) [ours: off by default].
        normalize_input: apply ``N`` to ``x0`` first (the initial state is the rescaled input).

    Returns:
        float64 tensor ``(T+1, ..., n, d)``; entry 0 is the (normalized) input, entry t+1 the output
        of layer t.

    Example:
        With uniform attention every token gets ``F`` times the mean token: the power method, so all
        tokens end on ``±v₁(F)`` (MiniLM's first layer shared by 200 steps; its ``λ₁`` is real):

        >>> import lib, torch
        >>> from lib import spectra
        >>> att = lib.load_model("minilm").layer(0).attention
        >>> x0 = torch.randn(5, 384, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        >>> X = simulate(att, x0, steps=200, attention="uniform")
        >>> X.shape
        torch.Size([201, 5, 384])
        >>> spectra.alignment(X[-1], spectra.principal(att.layer_matrix()).vector).round(6)
        array([1., 1., 1., 1., 1.])
    """
    if isinstance(weights, Sequence) and not isinstance(weights, (str, bytes)):
        layers = [_as_weights(w) for w in weights]
        if not layers:
            raise ValueError("weights is an empty sequence")
        if steps is None:
            steps = len(layers)
        if steps > len(layers):
            raise ValueError(f"steps = {steps} exceeds the {len(layers)} per-layer weights given")
    else:
        if steps is None:
            raise ValueError("steps is required with shared weights")
        layers = [_as_weights(weights)] * steps
    if steps < 0:
        raise ValueError(f"steps must be non-negative, got {steps}")
    X = _t64(x0)
    if X.ndim < 2:
        raise ValueError(f"x0 must have shape (..., n, d), got {tuple(X.shape)}")
    if normalize_input:
        X = normalize(X, norm, radius)
    out = torch.empty((steps + 1, *X.shape), dtype=torch.float64)
    out[0] = X
    kw = dict(norm=norm, radius=radius, residual=residual, attention=attention, beta=beta, causal=causal,
              keep_vo_bias=keep_vo_bias)
    with _threads_for(X, layers[0]) if layers else contextlib.nullcontext():
        for t in range(steps):
            X = _layer_step(layers[t], X, **kw)
            out[t + 1] = X
    return out
