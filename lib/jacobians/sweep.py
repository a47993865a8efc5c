"""Block Jacobians of the residual stream (chapter 4, section 4.2), batched with ``torch.func``.

Protocols:

* **single-token** (the paper's, [secondary] detail): ``J_l = ∂f_l(x)/∂x`` at the last token's
  residual ``x = h_l[T]``, with block ``l`` run on a length-1 sequence (no cache, position 0);
* **in-context** [ours]: the diagonal block ``∂h_{l+1}[T]/∂h_l[T]`` of the real sequence, the other
  positions held fixed (closed form in :mod:`lib.jacobians.in_context`, autodiff as the fallback);
* **sub-blocks** [ours]: the attention sub-block ``x ↦ u`` and the MLP sub-block ``u ↦ f`` separately,
  with ``J_l = J_mlp(u) J_attn(x)`` (the chain rule; tested).

Every Jacobian is column convention, ``J[i, j] = ∂f_i/∂x_j``, and comes back as float64. The forward
passes run in the model's own dtype on the model's own device (CPU or CUDA, same code); means are
accumulated in float64 on that device.

Batching (``method="autodiff"``): for a batch of prompts ``X`` (P, d), the single-token blocks act on
each row separately, so ``∂(Σ_p f(x_p))_i / ∂x_{p,j} = J_p[i, j]``. Reverse mode (``jacrev``) therefore
gets all P Jacobians from d vectorised backward passes over the batch; forward mode (``jvp`` under
``vmap``) from d vectorised forward passes with the same tangent ``e_j`` for every prompt. Both are
chunked over prompts and over tangent directions to bound memory.

**Closed form** (``method="closed"``, the default for single-token Jacobians): on one token the
attention core is affine and every block is norms, ``F = O V``, an elementwise MLP and skips, so
:mod:`lib.jacobians.single_token` forms the Jacobian from those factors without autodiff (exact, not an
approximation; tested against ``method="autodiff"``, which differentiates the real modules).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from lib.errors import InputError
from lib.jacobians import in_context, single_token
from lib.memory import require
from lib.models.spectral_model import on_layer_device
from lib.parallel import available_cores, map_matrices
from lib.progress import progress as progress_bar

if TYPE_CHECKING:
    from lib.models import SpectralModel, Twins

__all__ = [
    "METHODS",
    "SIDE_BY_SIDE_MAX_D",
    "JacobianSet",
    "TwinJacobians",
    "autograd_difference",
    "batched_jacobians",
    "block_fn",
    "in_context_jacobian",
    "in_context_stack",
    "in_context_twins",
    "last_token_index",
    "mlp_width",
    "layer_jacobian",
    "layer_jacobians",
    "residual_inputs",
    "side_by_side_workers",
    "sub_block_fns",
    "sweep",
    "sweep_twins",
]

Fn = Callable[[torch.Tensor], torch.Tensor]

METHODS: tuple[str, ...] = ("closed", "autodiff")
"""How :func:`layer_jacobians` forms single-token Jacobians: closed form (:mod:`lib.jacobians.single_token`) or autodiff."""


def _param(model: SpectralModel) -> torch.Tensor:
    return next(model.hf_model.parameters())


def _first(out: torch.Tensor | tuple | list) -> torch.Tensor:
    return out[0] if isinstance(out, (tuple, list)) else out


def block_fn(model: SpectralModel, t: int) -> Fn:
    """The whole block ``t`` on single tokens: rows ``(B, d) -> (B, d)`` (length-1 sequences)."""
    layer = model.layer(t)

    def f(X: torch.Tensor) -> torch.Tensor:
        return layer(X[:, None, :])[:, 0, :]

    return f


def _rope0(model: SpectralModel, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    pos = torch.zeros(h.shape[0], 1, dtype=torch.long, device=h.device)
    return model.base.rotary_emb(h, pos)


def sub_block_fns(model: SpectralModel, t: int) -> tuple[Fn, Fn]:
    """``(attn, mlp)``: the two residual sub-blocks of block ``t`` on single tokens, ``(B, d) -> (B, d)``.

    ``attn`` maps the block input ``x`` to the mid-block residual ``u`` (for post-LN families ``u``
    is after the first LayerNorm); ``mlp`` maps ``u`` to the block output, so that
    ``block(x) = mlp(attn(x))``. Each includes its own skip connection and norms.
    """
    fam = model.family
    blk = model.blocks[t]

    def seq(h: torch.Tensor) -> torch.Tensor:
        return h[:, None, :].to(_param(model).dtype)

    if fam in ("bert", "albert"):
        def attn(X: torch.Tensor) -> torch.Tensor:
            return _first(blk.attention(seq(X), None))[:, 0, :]

        if fam == "bert":
            def mlp(U: torch.Tensor) -> torch.Tensor:
                return blk.feed_forward_chunk(seq(U))[:, 0, :]
        else:
            def mlp(U: torch.Tensor) -> torch.Tensor:
                u = seq(U)
                return blk.full_layer_layer_norm(blk.ff_chunk(u) + u)[:, 0, :]
    elif fam in ("gpt2", "gpt_neo"):
        def attn(X: torch.Tensor) -> torch.Tensor:
            h = seq(X)
            return (h + _first(blk.attn(blk.ln_1(h), attention_mask=None)))[:, 0, :]

        def mlp(U: torch.Tensor) -> torch.Tensor:
            u = seq(U)
            return (u + blk.mlp(blk.ln_2(u)))[:, 0, :]
    elif fam in ("llama", "olmo2", "gemma2"):
        a = blk.self_attn

        def attn(X: torch.Tensor) -> torch.Tensor:
            h = seq(X)
            if fam == "llama":
                return (h + _first(a(blk.input_layernorm(h), _rope0(model, h), None)))[:, 0, :]
            if fam == "olmo2":
                return (h + blk.post_attention_layernorm(_first(a(h, _rope0(model, h), None))))[:, 0, :]
            z = _first(a(blk.input_layernorm(h), _rope0(model, h), None))
            return (h + blk.post_attention_layernorm(z))[:, 0, :]

        def mlp(U: torch.Tensor) -> torch.Tensor:
            u = seq(U)
            if fam == "llama":
                return (u + blk.mlp(blk.post_attention_layernorm(u)))[:, 0, :]
            if fam == "olmo2":
                return (u + blk.post_feedforward_layernorm(blk.mlp(u)))[:, 0, :]
            return (u + blk.post_feedforward_layernorm(blk.mlp(blk.pre_feedforward_layernorm(u))))[:, 0, :]
    else:  # pragma: no cover - every supported family is handled above
        raise NotImplementedError(f"sub-blocks of family {fam!r}")
    return attn, mlp


def batched_jacobians(
    f: Fn, X: torch.Tensor, *, mode: str = "rev", chunk_size: int | None = None
) -> torch.Tensor:
    """Jacobians ``(P, d_out, d_in)`` of a row-wise map ``f: (P, d) -> (P, d_out)`` at every row of ``X``.

    ``f`` must act on each row independently (true for single-token blocks). ``mode="rev"``: d
    vmapped backward passes of the whole batch; ``"fwd"``: d vmapped forward-mode passes.
    ``chunk_size`` bounds how many tangent directions run at once (``None``: all).
    """
    with torch.no_grad():  # the transforms still differentiate; no graph to the parameters
        return _batched_jacobians(f, X, mode, chunk_size)


def _batched_jacobians(f: Fn, X: torch.Tensor, mode: str, chunk_size: int | None) -> torch.Tensor:
    if mode == "rev":
        def g(Z: torch.Tensor) -> torch.Tensor:
            return f(Z).sum(0)

        J = torch.func.jacrev(g, chunk_size=chunk_size)(X)  # (d_out, P, d_in)
        return J.permute(1, 0, 2)
    if mode == "fwd":
        d = X.shape[-1]
        eye = torch.eye(d, dtype=X.dtype, device=X.device)

        def col(e: torch.Tensor) -> torch.Tensor:
            return torch.func.jvp(f, (X,), (e.expand_as(X),))[1]  # (P, d_out) = J_p e

        J = torch.vmap(col, chunk_size=chunk_size)(eye)  # (d_in, P, d_out)
        return J.permute(1, 2, 0)
    raise ValueError(f"mode must be 'rev' or 'fwd', got {mode!r}")


def available_bytes_for_jacobians(device: torch.device, d: int) -> int:
    """How many ``(d, d)`` Jacobians (float64 result + float32 work) fit in memory on ``device``."""
    from lib.memory import available_bytes

    return available_bytes(device) // (12 * d * d)


def mlp_width(model: SpectralModel) -> int:
    """``d_ff``, the MLP's hidden width (``intermediate_size``, GPT-2's ``n_inner``, else ``4d``)."""
    cfg = model.config
    return int(getattr(cfg, "intermediate_size", 0) or getattr(cfg, "n_inner", 0) or 4 * model.d_model)


def _auto_chunks(model: SpectralModel, P: int, d: int, budget_mb: float) -> tuple[int, int | None]:
    """Prompts per batch and tangent chunk so that the widest activation stays under ``budget_mb``."""
    width = max(d, mlp_width(model))
    bytes_per = torch.finfo(_param(model).dtype).bits // 8
    per_prompt = 6 * d * width * bytes_per / 2**20  # d tangents × a few live (width)-sized activations
    prompts = max(1, min(P, int(budget_mb // max(per_prompt, 1e-9))))
    tangent = None
    if per_prompt > budget_mb:  # even one prompt with all d tangents is too wide: chunk the tangents
        tangent = max(1, int(d * budget_mb / per_prompt))
    return prompts, tangent


@on_layer_device
def layer_jacobians(
    model: SpectralModel, t: int, X: torch.Tensor | np.ndarray, *, part: str = "block", mode: str = "rev",
    budget_mb: float = 512.0,
    method: str = "closed",
) -> torch.Tensor:
    """Single-token Jacobians of block ``t`` at every row of ``X`` (P, d): float64 ``(P, d, d)``.

    Args:
        part: ``"block"`` (the whole block), ``"attn"`` or ``"mlp"`` (the sub-blocks; the MLP one is
            evaluated at the mid-block residual ``u = attn(x)``).
        mode: ``"rev"`` or ``"fwd"`` (``method="autodiff"`` only; same result).
        budget_mb: rough bound on the activation memory of one vectorised call.
        method: ``"closed"`` (default, :mod:`lib.jacobians.single_token`) or ``"autodiff"`` (``torch.func``
            over the real modules, vectorised over the d tangents and the batch).

    The result lives on the model's device.

    Example:
        >>> import lib
        >>> from lib.models.decoder.language import prompts
        >>> m = lib.load_model("book-decoder")
        >>> X, _ = residual_inputs(m, prompts(3))  # the last token's residual entering every block
        >>> J = layer_jacobians(m, 0, X[0])
        >>> J.shape, J.dtype
        (torch.Size([3, 128, 128]), torch.float64)
    """
    p = model.param(t)  # the device that holds block t (one of several when the model is sharded)
    X = torch.as_tensor(X).to(device=p.device, dtype=p.dtype)
    if X.dim() != 2 or X.shape[1] != model.d_model or X.shape[0] == 0:
        raise InputError(f"X must have shape (P, {model.d_model}) with P ≥ 1, got {tuple(X.shape)}")
    P_all, d_all = X.shape
    fits = max(1, available_bytes_for_jacobians(p.device, d_all))
    require(
        12 * P_all * d_all * d_all + int(budget_mb * 2**20),
        f"{P_all} Jacobians of size {d_all}×{d_all} (float64 result + float32 work)",
        f"About {fits} prompts fit per call: pass fewer rows of X at a time, or use a GPU with more memory.",
        device=p.device,
    )
    if part not in ("block", "attn", "mlp"):
        raise InputError(f"part must be 'block', 'attn' or 'mlp', got {part!r}")
    if method not in METHODS:
        raise InputError(f"method must be one of {METHODS}, got {method!r}")
    P, d = X.shape
    per_batch, tangent = _auto_chunks(model, P, d, budget_mb)
    out = torch.empty(P, d, d, dtype=torch.float64, device=p.device)
    if method == "closed":
        affine = single_token.attention_affine(model, t)  # once per layer, reused by every chunk
        for s in range(0, P, per_batch):
            out[s : s + per_batch].copy_(single_token.block_jacobians(model, t, X[s : s + per_batch], part, affine))
        return out
    if part == "block":
        f = block_fn(model, t)
    else:
        attn, mlp = sub_block_fns(model, t)
        f = attn if part == "attn" else mlp
        if part == "mlp":
            with torch.no_grad():
                X = attn(X)
    for s in range(0, P, per_batch):
        out[s : s + per_batch] = batched_jacobians(f, X[s : s + per_batch], mode=mode, chunk_size=tangent).double()
    return out


def layer_jacobian(model: SpectralModel, t: int, x: torch.Tensor | np.ndarray) -> torch.Tensor:
    """The ``(d, d)`` float64 Jacobian of block ``t`` (norms and skips included) at one residual ``x`` (d,)."""
    x = torch.as_tensor(x)
    if x.dim() != 1:
        raise InputError(f"x must be one residual vector of shape ({model.d_model},), got {tuple(x.shape)}")
    return layer_jacobians(model, t, x[None])[0]


def autograd_difference(model: SpectralModel, t: int, x: torch.Tensor | np.ndarray) -> float:
    """Relative Frobenius difference between :func:`layer_jacobian` (closed form) and a plain
    ``torch.autograd.functional.jacobian`` of the real block at one residual ``x`` (d,).

    The check of section 4.2: one prompt, one block, the two computations side by side (about 1e-7 in
    float32: rounding, not a difference of method).

    Example:
        >>> import lib
        >>> from lib.models.decoder.language import prompts
        >>> m = lib.load_model("book-decoder")
        >>> X, _ = residual_inputs(m, prompts(1))
        >>> autograd_difference(m, 2, X[2, 0]) < 1e-5
        True
    """
    x = torch.as_tensor(x)
    J_closed = layer_jacobian(model, t, x)
    f = block_fn(model, t)
    J_loop = torch.autograd.functional.jacobian(lambda v: f(v[None])[0], x.float()).detach().double()
    return float((J_closed - J_loop).norm() / J_loop.norm())


# The module that takes the MLP's input, per family. Everything from it to the block's output acts on each
# position alone, so row T of the output needs the MLP at row T only: the block's residual add broadcasts a
# one-row MLP output over the sequence (the other rows come out wrong, and are never read).
_MLP_INPUT_MODULE = {"bert": "intermediate", "albert": "ffn", "gpt2": "mlp", "gpt_neo": "mlp", "llama": "mlp",
                     "olmo2": "mlp", "gemma2": "mlp"}


@contextlib.contextmanager
def _mlp_at_row(model: SpectralModel, t: int, T: int) -> Iterator[None]:
    """While active, block ``t``'s MLP runs on position ``T`` only (rows other than ``T`` are invalid)."""
    name = _MLP_INPUT_MODULE.get(model.family)
    if name is None:  # an unknown family: run the whole MLP (slower, same result)
        yield
        return
    hook = getattr(model.blocks[t], name).register_forward_pre_hook(lambda _m, args: (args[0][..., T : T + 1, :], *args[1:]))
    try:
        yield
    finally:
        hook.remove()


@on_layer_device
def in_context_jacobian(model: SpectralModel, t: int, H: torch.Tensor | np.ndarray, T: int | None = None, *,
                        method: str | None = None) -> torch.Tensor:
    """In-context diagonal block ``∂h_{t+1}[T] / ∂h_t[T]`` (other positions fixed): float64 ``(d, d)``.

    ``method="closed"`` (the default where :func:`lib.jacobians.in_context.supports` the model: every family
    of :mod:`lib.models.families` but BERT-style checkpoints with relative position embeddings):
    :func:`lib.jacobians.in_context.in_context_jacobian_closed`, the attention core's Jacobian at ``T`` (query
    path, and the key and value paths of ``T`` itself) composed with the norms, skips and MLP in closed
    form. ``method="autodiff"`` (the default otherwise): ``d`` vectorised backward passes of the real block
    on the whole sequence, with the MLP run at position ``T`` only (:data:`_MLP_INPUT_MODULE`; attention is
    the only part that mixes positions). The two agree to roundoff (tested on every family).

    Args:
        H: the input of block ``t`` for one sequence, ``(n, d)``.
        T: the position (default: the last).
        method: ``"closed"``, ``"autodiff"`` or ``None`` (closed where supported, else autodiff).
    Raises:
        InputError: an unknown method, or ``"closed"`` for a model without a closed form.
    """
    if method is None:
        method = "closed" if in_context.supports(model) else "autodiff"
    if method not in METHODS:
        raise InputError(f"method must be one of {METHODS}, got {method!r}")
    if method == "closed":
        return in_context.in_context_jacobian_closed(model, t, H, T)
    p = model.param(t)
    H = torch.as_tensor(H).to(device=p.device, dtype=p.dtype)
    n = H.shape[0]
    T = n - 1 if T is None else T % n
    layer = model.layer(t)

    def f(x: torch.Tensor) -> torch.Tensor:
        Hx = torch.cat([H[:T], x[None], H[T + 1 :]], dim=0)
        return layer(Hx[None])[0, T]

    with torch.no_grad(), _mlp_at_row(model, t, T):
        return torch.func.jacrev(f)(H[T]).double()


def in_context_stack(model: SpectralModel, states: Sequence[torch.Tensor | np.ndarray],
                     positions: Sequence[int]) -> np.ndarray:
    """In-context diagonal blocks ``∂h_{t+1}[T]/∂h_t[T]`` of every block (other positions fixed), for several
    sequences at once (chapter 6).

    Args:
        states: per sequence, its residual stream ``(L+1, n, d)`` (:meth:`hidden_states`).
        positions: per sequence, the position ``T``.
    Returns:
        float64 ``(L, len(states), d, d)``: per block, all sequences at once in closed form
        (:func:`lib.jacobians.in_context.in_context_jacobians_closed`), or, for a model without one, autodiff
        (:func:`in_context_jacobian`) sequence by sequence.
    """
    L, d = model.n_layers, model.d_model
    out = np.zeros((L, len(states), d, d))
    for t in range(L):
        if in_context.supports(model):
            out[t] = in_context.in_context_jacobians_closed(model, t, [H[t] for H in states], positions).cpu().numpy()
        else:
            for p, (H, T) in enumerate(zip(states, positions)):
                out[t, p] = in_context_jacobian(model, t, H[t], T, method="autodiff").cpu().numpy()
    return out


def last_token_index(model: SpectralModel, text: str) -> int:
    """The last non-special position of ``text`` (the book's notation page, ``book/notation.md``: "last token")."""
    special = model.encode(text)["special"]
    idx = torch.nonzero(~special).flatten()
    if idx.numel() == 0:
        raise ValueError(f"{text!r} has no non-special token")
    return int(idx[-1])


def residual_inputs(model: SpectralModel, texts: Sequence[str], *, progress: bool = False,
                    batched: bool = False) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Run the model once per text and collect the residual stream.

    ``batched=True`` runs the texts together, padded, with an attention mask
    (:meth:`lib.models.SpectralModel.hidden_states_padded`: equal to the one-text passes to rounding, not bitwise).

    Returns:
        ``(X, states)``: ``X`` is float64 ``(L + 1, P, d)``, the last token's residual entering
        every block (entry ``L`` is the output of the last block); ``states`` is the list of
        per-text ``(L + 1, n, d)`` streams (for the all-token statistics of the topology section).
    """
    if batched:
        states = model.hidden_states_padded([model.encode(s)["input_ids"] for s in texts])
    else:
        states = model.hidden_states(list(texts), progress=progress)
    last = [last_token_index(model, s) for s in texts]
    X = torch.stack([h[:, T] for h, T in zip(states, last)], dim=1)
    return X, states


@dataclass
class JacobianSet:
    """Block Jacobians of one model over one prompt set (float64 NumPy, on the CPU).

    Attributes:
        mean: ``J̄_l``, shape ``(L, d, d)``.
        per_prompt: ``J_l`` per prompt ``(L, P, d, d)`` in float32 (``None`` unless kept).
        parts: optional means of the sub-block Jacobians, ``{"attn": (L, d, d), "mlp": (L, d, d)}``.
        label: the model's label; n_prompts: P.
    """

    mean: np.ndarray
    label: str
    n_prompts: int
    per_prompt: np.ndarray | None = None
    parts: dict[str, np.ndarray] = field(default_factory=dict)


def sweep(
    model: SpectralModel,
    X: torch.Tensor,
    *,
    layers: Sequence[int] | None = None,
    keep_per_prompt: bool = False,
    parts: bool = False,
    progress: bool = True,
    mode: str = "rev",
) -> JacobianSet:
    """Single-token Jacobians of every block at the prompts' last-token residuals.

    Args:
        X: ``(L + 1, P, d)`` (or ``(L, P, d)``) residuals from :func:`residual_inputs`.
        keep_per_prompt: also return every prompt's ``J_l`` (float32, ``L·P·d²`` numbers).
        parts: also average the attention and MLP sub-block Jacobians.
    """
    layers = list(range(model.n_layers)) if layers is None else list(layers)
    P, d = X.shape[1], X.shape[2]
    if P == 0:
        raise InputError("no prompts: X has P = 0 rows; pass at least one prompt's residuals")
    n_means = 3 if parts else 1  # the block's mean, plus the attention and MLP means
    host = n_means * len(layers) * d * d * 8 + (len(layers) * P * d * d * 4 if keep_per_prompt else 0)
    require(
        host,
        f"a Jacobian sweep over {len(layers)} layers × {P} prompts at d = {d}"
        + (" keeping every prompt's Jacobian" if keep_per_prompt else ""),
        "Pass keep_per_prompt=False (only the means are kept), fewer layers, or fewer prompts.",
    )
    mean = np.zeros((len(layers), d, d))
    per = np.zeros((len(layers), P, d, d), dtype=np.float32) if keep_per_prompt else None
    part_means = {k: np.zeros((len(layers), d, d)) for k in ("attn", "mlp")} if parts else {}
    for i, t in enumerate(progress_bar(layers, desc=f"Jacobians ({model.label})", disable=not progress)):
        J = layer_jacobians(model, t, X[t], mode=mode)
        mean[i] = J.mean(0).cpu().numpy()
        if per is not None:
            per[i] = J.to(torch.float32).cpu().numpy()
        for k in part_means:
            part_means[k][i] = layer_jacobians(model, t, X[t], part=k, mode=mode).mean(0).cpu().numpy()
        del J
    return JacobianSet(mean=mean, label=model.label, n_prompts=P, per_prompt=per, parts=part_means)


@dataclass
class TwinJacobians:
    """:func:`sweep` of a model and of each of its random-init twins, on the same prompts.

    Attributes:
        twins: the :class:`lib.models.Twins` swept.
        inputs: series label (``"trained"``, ``"random init, seed 0"``, …; :meth:`Twins.series`) → the
            ``(L + 1, P, d)`` last-token residuals of :func:`residual_inputs`.
        jacobians: the same labels → that model's :class:`JacobianSet`.
    """

    twins: Twins
    inputs: dict[str, torch.Tensor]
    jacobians: dict[str, JacobianSet]

    @property
    def series(self) -> list[str]:
        """The series labels, trained first."""
        return list(self.jacobians)

    @property
    def twin_series(self) -> list[str]:
        """The random-init twins' labels, in seed order."""
        return self.series[1:]

    def __getitem__(self, series: str) -> JacobianSet:
        return self.jacobians[series]


SIDE_BY_SIDE_MAX_D = 1024
"""Widest model whose twins :func:`sweep_twins` runs side by side, one model per core [ours]: the book's models
(``d ≤ 384``) on the CPU gain about 1.7× on two cores (chapter 4's sweeps: 9.2 s → 5.5 s); a wider one runs one model at a time, so that only one
model's transient memory is live, as the memory guards of :func:`sweep` assume."""


def side_by_side_workers(twins: Twins) -> int:
    """Threads for running a model and its twins side by side (:func:`lib.parallel.map_matrices`): one per core
    when every model is on the CPU, unsharded and at most :data:`SIDE_BY_SIDE_MAX_D` wide; else 1. Each model is
    computed as in a serial loop (closed forms and reverse-mode autodiff, per thread), so the values do not
    depend on this number."""
    small = all(m.d_model <= SIDE_BY_SIDE_MAX_D and m.device_map is None and m.param().device.type == "cpu"
                for m in twins)
    return available_cores() if small else 1


def sweep_twins(twins: Twins, texts: Sequence[str], *, parts: bool = False, keep_per_prompt: bool = True,
                progress: bool = True) -> TwinJacobians:
    """:func:`residual_inputs` and :func:`sweep` for the trained model and every twin, on the same ``texts``, the
    models side by side where they are small (:func:`side_by_side_workers`).

    Args:
        twins: from :func:`lib.load_twins`. texts: the prompts (the same for every model).
        parts, keep_per_prompt: as :func:`sweep`. progress: one bar over the models.
    """
    def one(model: SpectralModel) -> tuple[torch.Tensor, JacobianSet]:
        X, _ = residual_inputs(model, texts)
        return X, sweep(model, X, parts=parts, keep_per_prompt=keep_per_prompt, progress=False)

    return _each_model(twins, one, f"Jacobians ({twins.name})" if progress else None)


def in_context_twins(twins: Twins, texts: Sequence[str], *, keep_per_prompt: bool = True) -> TwinJacobians:
    """The in-context counterpart of :func:`sweep_twins`: for the trained model and every twin, the in-context
    diagonal blocks ``∂h_{l+1}[T]/∂h_l[T]`` of every block at the last token ``T`` of each text
    (:func:`in_context_stack`, closed form where the family has one), on the same ``texts``, the models side by
    side where they are small (:func:`side_by_side_workers`).

    Returns:
        a :class:`TwinJacobians` whose sets hold ``mean`` ``(L, d, d)`` and (``keep_per_prompt``) ``per_prompt``
        ``(L, P, d, d)`` float32, as :func:`sweep` keeps them, so the same bootstrap and controls apply; ``parts``
        stay empty. ``inputs`` are the last tokens' residuals of :func:`residual_inputs`.
    """
    if not texts:
        raise InputError("no prompts: pass at least one text")

    def one(model: SpectralModel) -> tuple[torch.Tensor, JacobianSet]:
        X, states = residual_inputs(model, texts)
        per = in_context_stack(model, states, [last_token_index(model, s) for s in texts])
        return X, JacobianSet(mean=per.mean(1), label=model.label, n_prompts=len(texts),
                              per_prompt=per.astype(np.float32) if keep_per_prompt else None)

    return _each_model(twins, one)


def _each_model(twins: Twins, one: Callable[[SpectralModel], tuple[torch.Tensor, JacobianSet]],
                progress: str | None = None) -> TwinJacobians:
    """``one(model) -> (inputs, JacobianSet)`` for the trained model and every twin, side by side where they are
    small (:func:`side_by_side_workers`), gathered under the twins' series labels."""
    done = map_matrices(one, list(twins), workers=side_by_side_workers(twins), progress=progress)
    labels = [twins.series(m) for m in twins]
    return TwinJacobians(twins=twins, inputs={s: X for s, (X, _) in zip(labels, done)},
                         jacobians={s: js for s, (_, js) in zip(labels, done)})
