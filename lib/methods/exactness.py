"""Exactness checks a reader can re-run on their own model: the book's formulas against the model's real modules.

Every analysis of the book reads a checkpoint through formulas, not through its forward pass; these three checks
show, on the reader's own model, that the formulas are the model's own computation (``make report`` opens with
them). Each runs the model in float64 (:func:`in_float64`) and returns a relative Frobenius error
``‖ours − reference‖ / ‖reference‖``:

* :func:`ft_forward_error`: ``F_t = O_t V_t`` (:meth:`lib.models.SpectralModel.layer_matrices`) against the
  attention of block ``t``'s own forward pass at uniform attention. On one token every head's softmax puts
  weight 1 on the only key, so the attention output must be ``F_t x + O_t b_V + b_O`` at the value
  projection's input ``x`` (read with forward hooks on the real modules);
* :func:`block_jacobian_error`: the closed-form single-token block Jacobian (:mod:`lib.jacobians.single_token`)
  against autodiff of the real block (``torch.func.jacrev``);
* :func:`in_context_error`: the closed-form in-context Jacobian ``∂h_{t+1}[T]/∂h_t[T]``
  (:mod:`lib.jacobians.in_context`) against autodiff of the real block on the whole sequence (``None`` for a
  model without a closed form, which the book then differentiates by autodiff anyway).

The points are real: the residual of each prompt's last token entering block ``t``, and that prompt's whole
stream for the in-context check. :func:`exactness_checks` runs all three on a few layers and prompts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from lib.errors import InputError
from lib.jacobians import in_context
from lib.jacobians.sweep import in_context_jacobian, last_token_index, layer_jacobians

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = ["CHECKS", "TOLERANCE", "block_jacobian_error", "check_layers", "exactness_checks", "ft_forward_error",
           "in_context_error", "in_float64"]

TOLERANCE = 1e-5
"""Largest relative error that counts as exact [ours]: far above float64 roundoff (about 1e-15) and above the
float32 step that Hugging Face's RMSNorm keeps even in a float64 model (about 1e-7), far below what a wrong
formula gives (a missing factor or a transposed matrix moves the error to order 1)."""

CHECKS: dict[str, str] = {
    "F_t": "Fₜ = OₜVₜ vs the attention's forward pass at uniform attention (one token)",
    "block Jacobian": "closed-form single-token block Jacobian vs autodiff of the real block",
    "in-context Jacobian": "closed-form in-context Jacobian vs autodiff of the real block in its sentence",
}
"""The checks by name, each with what it compares (the rows of :func:`exactness_checks`)."""


@contextlib.contextmanager
def in_float64(model: SpectralModel) -> Iterator[SpectralModel]:
    """Run ``model`` in float64 for the duration of a ``with`` block (float32 → float64 → float32 is exact; a
    bfloat16 model comes back as it was too, every bfloat16 being a float64)."""
    hf = model.hf_model
    dtype = next(hf.parameters()).dtype
    hf.to(torch.float64)
    try:
        yield model
    finally:
        hf.to(dtype)


def _rel(ours: torch.Tensor, ref: torch.Tensor) -> float:
    return float((ours.double() - ref.double()).norm() / ref.double().norm())


def ft_forward_error(model: SpectralModel, t: int, x: torch.Tensor | np.ndarray) -> float:
    """Relative error of ``F_t x + O_t b_V + b_O`` against block ``t``'s real attention output on one token.

    Args:
        t: the block (0-based).
        x: one residual ``(d,)``, the block's input; the model's own modules (norms before the attention
            included) make the value projection's input from it.
    Returns:
        ``‖attention output − (F_t x_v + O_t b_V + b_O)‖ / ‖attention output‖`` with ``x_v`` the value
        projection's input, read by a forward hook (the model should be in float64: :func:`in_float64`).
    """
    t = model.check_layer(t)
    x = torch.as_tensor(x)
    if x.shape != (model.d_model,):
        raise InputError(f"x must be one residual of shape ({model.d_model},), got {tuple(x.shape)}")
    p = next(model.hf_model.parameters())
    layer = model.layer(t)
    seen: dict[str, torch.Tensor] = {}
    vmod, omod = model.adapter.value_module(layer.module), model.adapter.output_module(layer.module)
    hooks = [vmod.register_forward_hook(lambda _m, a, _o: seen.__setitem__("in", a[0].detach())),
             omod.register_forward_hook(lambda _m, _a, o: seen.__setitem__("out", o.detach()))]
    try:
        with torch.no_grad():
            layer(x.to(device=p.device, dtype=p.dtype)[None, None, :])
    finally:
        for h in hooks:
            h.remove()
    w = layer.attention
    xin = seen["in"].double().reshape(-1).cpu()
    expected = w.layer_matrix().cpu() @ xin
    if w.b_V is not None:
        expected = expected + w.O.cpu() @ w.b_V.cpu()
    if w.b_O is not None:
        expected = expected + w.b_O.cpu()
    return _rel(expected, seen["out"].reshape(-1).cpu())


def block_jacobian_error(model: SpectralModel, t: int, X: torch.Tensor | np.ndarray) -> float:
    """Largest relative error, over the rows of ``X`` ``(P, d)``, of the closed-form block Jacobian of block ``t``
    against autodiff of the real block (:func:`lib.jacobians.sweep.layer_jacobians`, both methods)."""
    closed = layer_jacobians(model, t, X, method="closed")
    auto = layer_jacobians(model, t, X, method="autodiff")
    return max(_rel(c, a) for c, a in zip(closed, auto))


def in_context_error(model: SpectralModel, t: int, H: torch.Tensor | np.ndarray, T: int) -> float | None:
    """Relative error of the closed-form in-context Jacobian of block ``t`` at position ``T`` of the stream
    ``H`` ``(n, d)`` (block ``t``'s input) against autodiff; ``None`` for a model without a closed form
    (:func:`lib.jacobians.in_context.supports`)."""
    if not in_context.supports(model):
        return None
    closed = in_context_jacobian(model, t, H, T, method="closed")
    auto = in_context_jacobian(model, t, H, T, method="autodiff")
    return _rel(closed, auto)


def check_layers(n_layers: int) -> list[int]:
    """The blocks the report checks [ours]: the first, the middle and the last (0-based, without repeats).

    Example:
        >>> check_layers(6), check_layers(1)
        ([0, 3, 5], [0])
    """
    return sorted({0, n_layers // 2, n_layers - 1})


def exactness_checks(model: SpectralModel, texts: Sequence[str], *, layers: Sequence[int] | None = None,
                     progress: bool = False) -> pd.DataFrame:
    """The three checks on ``layers`` (default :func:`check_layers`) at every text's last token, in float64.

    Returns:
        One row per check and layer: ``check`` (a :data:`CHECKS` name), ``layer`` (1-based), ``relative error``
        (the largest over the texts; NaN where the model has no closed form to check) and ``exact``
        (error ≤ :data:`TOLERANCE`; ``None`` where NaN).
    """
    from lib.progress import progress as progress_bar

    texts = list(texts)
    if not texts:
        raise InputError("exactness_checks needs at least one text")
    layers = check_layers(model.n_layers) if layers is None else [model.check_layer(t) for t in layers]
    rows = []
    with in_float64(model):
        states = model.hidden_states(texts)
        last = [last_token_index(model, s) for s in texts]
        for t in progress_bar(layers, desc="exactness checks", disable=not progress):
            X = torch.stack([h[t, T] for h, T in zip(states, last)])
            ctx = [in_context_error(model, t, h[t], T) for h, T in zip(states, last)]
            errors = {"F_t": max(ft_forward_error(model, t, x) for x in X),
                      "block Jacobian": block_jacobian_error(model, t, X),
                      "in-context Jacobian": np.nan if None in ctx else max(ctx)}
            rows += [(name, t + 1, err) for name, err in errors.items()]
    frame = pd.DataFrame(rows, columns=["check", "layer", "relative error"])
    frame["exact"] = [None if np.isnan(e) else bool(e <= TOLERANCE) for e in frame["relative error"]]
    return frame
