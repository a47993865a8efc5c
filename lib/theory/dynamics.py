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

The weights are :class:`lib.models.weights.AttentionWeights` (toy ones from :mod:`lib.theory.toys`, or a
real layer's ``model.layer(t).attention``); any object with an ``.attention`` attribute is unwrapped.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from lib.linalg import power, spectra
from lib.models.weights import AttentionWeights
from lib.theory import toys

__all__ = [
    "NORMS",
    "alignment_curves",
    "attention_matrices",
    "bipartite_survival",
    "bipartite_threshold_scan",
    "consensus_curves",
    "consensus_jacobian_radius",
    "consensus_rates",
    "layer_step",
    "normalize",
    "shared_run",
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
        "build toy weights with lib.theory.toys.weights_from_matrix(F)"
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
        >>> from lib.linalg import spectra
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


# -- the experiments of chapters 1 and 2, on toy weights ---------------------------------------------------
def alignment_curves(
    weights: Any, X0: Any, steps: int, directions: Mapping[str, Any], variants: Mapping[str, Mapping[str, Any]],
    *, power_method_of: Any | None = None,
) -> pd.DataFrame:
    """Mean alignment of the tokens with each direction, layer by layer, for variants of the layer.

    Args:
        weights: shared weights (e.g. :func:`lib.theory.toys.weights_from_matrix`).
        X0: initial tokens ``(n, d)``.
        steps: layers T.
        directions: name → ``(d,)`` direction (e.g. ``{"v₁": v1}``).
        variants: name → keyword arguments of :func:`simulate` (``{}`` is the default layer;
            ``{"attention": "uniform"}``, ``{"norm": "layernorm"}``, ``{"residual": True}``...).
        power_method_of: a ``(d, d)`` matrix ``F``: first adds the variant ``"power method (mean token)"``,
            the power method on ``F`` from the mean of the tokens ``X0`` (not normalized).

    Returns:
        Long format: ``t``, ``direction``, ``mean alignment`` (:func:`lib.linalg.power.alignment_frame`) and
        ``variant``, in the order of ``variants``.
    """
    frames = []
    if power_method_of is not None:
        x = power.power_method(power_method_of, np.asarray(X0, dtype=np.float64).mean(0), steps)
        frames.append(power.alignment_frame(x, directions).assign(variant="power method (mean token)"))
    for name, kw in variants.items():
        X = simulate(weights, X0, steps, **kw).numpy()
        frames.append(power.alignment_frame(X, directions).assign(variant=name))
    return pd.concat(frames, ignore_index=True)


def shared_run(F: Any, steps: int, *, heads: int = 4, n_tokens: int = 10, x0: Any | None = None, seed: int = 0,
               **kw: Any) -> np.ndarray:
    """Tokens ``(steps+1, n, d)`` (NumPy) of the shared-weight dynamics with toy weights ``O V = F``.

    The weights are :func:`lib.theory.toys.weights_from_matrix` ``(F, heads, seed=seed)``; the start is ``x0``, or
    ``n_tokens`` random tokens (seed ``seed``). Other keywords go to :func:`simulate`.
    """
    w = toys.weights_from_matrix(F, heads, seed=seed)
    X0 = toys.random_tokens(n_tokens, np.shape(F)[0], seed=seed) if x0 is None else x0
    return simulate(w, X0, steps, **kw).numpy()


def consensus_curves(gaps: Sequence[float], *, d: int, steps: int, seed: int = 0, **run_kw: Any) -> pd.DataFrame:
    """The least and the mean alignment of the tokens with ``v₁`` under shared weights, for toy matrices
    :func:`lib.theory.toys.toy_matrix` ``("real", d, gap=g, seed=seed)``, one run per gap ratio ``g``.

    Returns:
        Long format: ``t``, ``|λ₂/λ₁|`` (the gap ratio as text), ``statistic`` (``"min over tokens"``,
        ``"mean over tokens"``) and ``alignment with v₁``.
    """
    frames = []
    for gap in gaps:
        F = toys.toy_matrix("real", d, gap=gap, seed=seed)
        a = spectra.alignment(shared_run(F, steps, seed=seed, **run_kw), spectra.principal(F).vector)
        frames.append(pd.DataFrame({"t": np.arange(steps + 1), "|λ₂/λ₁|": str(gap), "min over tokens": a.min(1),
                                    "mean over tokens": a.mean(1)}))
    return pd.concat(frames, ignore_index=True).melt(id_vars=["t", "|λ₂/λ₁|"], var_name="statistic",
                                                     value_name="alignment with v₁")


def consensus_rates(gaps: Sequence[float], seeds: Sequence[int], *, d: int, steps: int, **run_kw: Any) -> pd.DataFrame:
    """The fitted per-layer convergence factor of the shared-weight dynamics against the gap ratio.

    For each gap ratio and seed: the toy :func:`lib.theory.toys.toy_matrix` ``("real", d, gap, seed)``, the run
    :func:`shared_run` with that seed, the largest distance over tokens ``max_i sin∠(x_i(t), v₁)``, its
    :func:`lib.linalg.power.window_ratio` (the fit between 1e-2 and 1e-12) and the first layer where every token's
    alignment exceeds 0.999.

    Returns:
        One row per run: ``gap ratio |λ₂/λ₁|``, ``seed``, ``fitted per-layer factor``,
        ``layers to alignment > 0.999`` (NaN where the run does not get there within ``steps``).
    """
    rows = []
    for gap in gaps:
        for seed in seeds:
            F = toys.toy_matrix("real", d, gap=gap, seed=seed)
            X = shared_run(F, steps, seed=seed, **run_kw)
            dist = power.distance_to_subspace(X, spectra.principal(F).vector[:, None]).max(1)
            reached = power.first_below(dist, math.sqrt(1 - 0.999**2))
            rows.append({"gap ratio |λ₂/λ₁|": gap, "seed": seed, "fitted per-layer factor": power.window_ratio(dist),
                         "layers to alignment > 0.999": np.nan if reached is None else reached})
    return pd.DataFrame(rows)


def bipartite_threshold_scan(F: Any, v: Any, signs: Sequence[int], scores: Sequence[float], *,
                             seed: int = 1) -> pd.DataFrame:
    """One single-head layer from the bipartite state ``x_j = r s_j v`` for each bipartite score ``c``.

    The head is :func:`lib.theory.toys.weights_from_matrix` ``(F, 1, qk="aligned", seed=seed)`` with its gain set so
    that its score :func:`lib.theory.toys.bipartite_scores` is ``c``.

    Returns:
        Columns ``c`` and ``largest token change ‖Δxᵢ‖`` (``max_i ‖x_i(1) − x_i(0)‖``: ``2r`` when a group
        flips, float64 rounding when the state is a fixed point).
    """
    c_unit = toys.bipartite_scores(toys.weights_from_matrix(F, 1, qk="aligned", seed=seed), v)[0]
    X = toys.bipartite_state(v, signs)
    rows = []
    for c in scores:
        w = toys.weights_from_matrix(F, 1, qk="aligned", seed=seed, qk_gain=np.sqrt(c / c_unit))
        step = np.linalg.norm(layer_step(w, X).numpy() - X, axis=1).max()
        rows.append({"c": c, "largest token change ‖Δxᵢ‖": float(step)})
    return pd.DataFrame(rows)


def bipartite_survival(
    F: Any, v: Any, signs: Sequence[int], *, heads: Sequence[int] = (1, 2, 4, 8),
    qk: Sequence[str] = ("aligned", "random"), qk_gain: float = 3.0, runs: int = 20, noise: float = 1e-3,
    steps: int = 200, seed: int = 0, weight_seed: int = 1,
) -> pd.DataFrame:
    """How often a perturbed bipartite state on ``v`` is still bipartite after ``steps`` shared layers.

    ``runs`` perturbations of size ``noise`` (seed ``seed``) of :func:`lib.theory.toys.bipartite_state` are run with
    toy weights (:func:`lib.theory.toys.weights_from_matrix` with ``qk`` and ``qk_gain``, seed ``weight_seed``); a
    run is still bipartite when every token's ``|cos(x_i, v)| > 0.99`` and both signs remain.

    Returns:
        One row per (``Q, K``, ``heads``): ``share of runs still bipartite`` and ``heads with cₕ < 0``
        (heads whose bipartite score is negative: they attend to the other group).
    """
    X = toys.bipartite_state(v, signs)
    eps = noise * np.random.default_rng(seed).standard_normal((runs, *X.shape))
    rows = []
    for kind in qk:
        for h in heads:
            w = toys.weights_from_matrix(F, h, qk=kind, qk_gain=qk_gain, seed=weight_seed)
            s = power.signed_alignment(simulate(w, X + eps, steps)[-1].numpy(), v)
            kept = np.mean([(np.abs(r) > 0.99).all() and (r > 0).any() and (r < 0).any() for r in s])
            rows.append({"Q, K": kind, "heads": h, "share of runs still bipartite": kept,
                         "heads with cₕ < 0": int((toys.bipartite_scores(w, v) < 0).sum())})
    return pd.DataFrame(rows)


def consensus_jacobian_radius(weights: Any, v: Any, n_tokens: int, **step_kw: Any) -> float:
    """Spectral radius of the autograd Jacobian of one layer at the consensus ``x_i = sqrt(d) v`` (all ``i``).

    Args:
        weights: one layer's weights.
        v: a unit ``(d,)`` real eigenvector of the layer matrix (used as given).
        n_tokens: n, the number of tokens (the Jacobian is ``(n d) × (n d)``).
        step_kw: keyword arguments of :func:`layer_step` (e.g. ``residual=True``).
    """
    v = np.asarray(v, dtype=np.float64)
    d = v.shape[0]
    x = torch.tensor(np.tile(np.sqrt(d) * v, (n_tokens, 1)))
    J = torch.autograd.functional.jacobian(lambda X: layer_step(weights, X, **step_kw), x)
    return float(np.abs(np.linalg.eigvals(J.reshape(n_tokens * d, -1).numpy())).max())
