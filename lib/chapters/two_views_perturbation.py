"""Chapter 6's perturbation check (section 6.5): how well each linearization of a block, the in-context and the
single-token Jacobian, predicts the real change of the block's output under a small push of one token.

The error of a Jacobian ``J`` at a push ``δ`` is ``‖Δ − J δ‖ / ‖Δ − R δ‖`` (``Δ`` the real change, ``R`` the skip's
:func:`lib.methods.bridge.reference`); a true linearization's error falls like ``ε = ‖δ‖/‖x‖``.
:func:`perturbation_errors` is the one-block, one-sequence reference; :func:`perturbation_sweep` the vectorised
version over every block and sequence (tested against it); :func:`perturbation_twins` runs it on each trained model
of a :class:`lib.chapters.two_views.TwinViews`. Everything runs in float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from lib.jacobians import sweep as jac
from lib.methods import alignment as als
from lib.methods import bridge as br
from lib.methods.exactness import in_float64
from lib.parallel import map_matrices

if TYPE_CHECKING:
    from lib.chapters.two_views import TwinViews

__all__ = ["perturbation_errors", "perturbation_slopes", "perturbation_summary", "perturbation_sweep",
           "perturbation_twins"]


def perturbation_errors(model: Any, t: int, H: Any, T: int, eps: Sequence[float], *, n_dirs: int = 8,
                        seed: int = 0) -> pd.DataFrame:
    """How well each linearization predicts the real change of block ``t``'s output at position ``T``.

    ``H`` ``(n, d)`` is the input of block ``t`` for one sequence. For random unit directions ``v`` and
    ``δ = ε ‖x‖ v`` (``x = H[T]``, other positions fixed), the real change is
    ``Δ = block(H + δ e_T)[T] − block(H)[T]``; the error of a Jacobian ``J`` is ``‖Δ − J δ‖ / ‖Δ − R δ‖``
    with ``R`` the :func:`lib.methods.bridge.reference` (``I`` pre-norm, ``0`` post-norm): relative to the real change
    of the block's *update*, the part the Jacobian has to predict (the skip's ``δ`` is free).
    Runs in float64 (:func:`lib.methods.exactness.in_float64`) so that roundoff stays far below the linearization error.

    Returns:
        Long format: ``eps``, ``jacobian`` ("in-context" or "single-token"), ``error`` (median over the
        directions), ``error_lo`` / ``error_hi`` (min and max over them).
    """
    rows = []
    with in_float64(model), torch.no_grad():
        H64 = torch.as_tensor(H).to(torch.float64)
        n, d = H64.shape
        x = H64[T]
        Js = {"in-context": jac.in_context_jacobian(model, t, H64, T).double(),
              "single-token": jac.layer_jacobians(model, t, x[None], method="closed")[0].double()}
        layer = model.layer(t)
        base = layer(H64[None])[0, T]
        V = torch.as_tensor(als.random_directions(d, n_dirs, seed))
        R = torch.as_tensor(br.reference(model, d))
        for e in eps:
            delta = float(e) * float(x.norm()) * V  # (n_dirs, d)
            batch = H64.expand(n_dirs, n, d).clone()
            batch[:, T] += delta
            change = layer(batch)[:, T] - base  # (n_dirs, d)
            for name, J in Js.items():
                pred = delta @ J.T
                err = (torch.linalg.norm(change - pred, dim=1) / torch.linalg.norm(change - delta @ R.T, dim=1)).numpy()
                rows.append({"eps": float(e), "jacobian": name, "error": float(np.median(err)),
                             "error_lo": float(err.min()), "error_hi": float(err.max())})
    return pd.DataFrame(rows)


def perturbation_sweep(model: Any, states: Sequence[Any], positions: Sequence[int], eps: Sequence[float], *,
                       layers: Sequence[int] | None = None, n_dirs: int = 8, seed: int = 0) -> pd.DataFrame:
    """:func:`perturbation_errors` of every block in ``layers`` (default: all) at position ``positions[p]`` of
    every sequence ``states[p]`` ``(L+1, n_p, d)``, vectorised: per layer, the in-context and the single-token
    Jacobians of all sequences at once (closed form), and per (layer, sequence) one batched pass of the block
    over every ε and direction, with the MLP run at position ``T`` only (the rows read). The same directions
    (``seed``) as :func:`perturbation_errors` for every (layer, sequence), whose rows it reproduces (tested).

    Returns:
        Long format: ``layer`` (1-based), ``prompt`` (0-based), ``eps``, ``jacobian``, ``error``, ``error_lo``,
        ``error_hi`` (median, min and max over the directions).
    """
    L = model.n_layers
    layers = list(range(L)) if layers is None else list(layers)
    if len(states) != len(positions) or not states:
        raise ValueError(f"need one position per sequence, got {len(states)} sequences and {len(positions)} positions")
    eps_t = torch.as_tensor([float(e) for e in eps], dtype=torch.float64)
    rows = []
    with in_float64(model), torch.no_grad():
        d = model.d_model
        V = torch.as_tensor(als.random_directions(d, n_dirs, seed))  # (D, d)
        R = torch.as_tensor(br.reference(model, d))
        for t in layers:
            Hs = [torch.as_tensor(H[t]).to(torch.float64) for H in states]
            X = torch.stack([H[T] for H, T in zip(Hs, positions)])  # (P, d)
            Js = {"in-context": jac.in_context.in_context_jacobians_closed(model, t, Hs, list(positions)).double(),
                  "single-token": jac.layer_jacobians(model, t, X, method="closed").double()}
            layer = model.layer(t)
            for p, (H, T) in enumerate(zip(Hs, positions)):
                n = H.shape[0]
                x = H[T]
                delta = (eps_t[:, None, None] * float(x.norm()) * V).reshape(-1, d)  # (E·D, d), ε-major
                batch = H.expand(len(delta), n, d).clone()
                batch[:, T] += delta
                with jac._mlp_at_row(model, t, T):  # rows other than T are not computed right, and not read
                    base = layer(H[None])[0, T]
                    change = layer(batch)[:, T] - base
                size = torch.linalg.norm(change - delta @ R.T, dim=1)
                errs = {name: (torch.linalg.norm(change - delta @ J[p].T, dim=1) / size).reshape(len(eps_t), n_dirs)
                        .numpy() for name, J in Js.items()}
                for i, e in enumerate(eps):  # the row order of perturbation_errors
                    for name, err in errs.items():
                        rows.append({"layer": t + 1, "prompt": p, "eps": float(e), "jacobian": name,
                                     "error": float(np.median(err[i])), "error_lo": float(err[i].min()),
                                     "error_hi": float(err[i].max())})
    return pd.DataFrame(rows)


def perturbation_summary(pert: pd.DataFrame) -> pd.DataFrame:
    """Per (model, ε, Jacobian) over every layer and prompt of :func:`perturbation_twins`: ``error`` the median
    of the per-(layer, prompt) medians, ``error_lo`` / ``error_hi`` the smallest and largest error of any
    direction, ``cases`` the (layer, prompt) pairs: the frame :func:`lib.page.two_views.perturbation_chart`
    draws."""
    return (pert.groupby(["model", "eps", "jacobian"], as_index=False)
            .agg(error=("error", "median"), error_lo=("error_lo", "min"), error_hi=("error_hi", "max"),
                 cases=("error", "size")))


def perturbation_slopes(pert: pd.DataFrame, lo: float = 1e-3, hi: float = 1e-1) -> pd.DataFrame:
    """Per (model, layer, prompt) of :func:`perturbation_twins`: ``slope``, the log–log slope of the in-context
    error over ``lo ≤ ε ≤ hi`` (1: the error falls like ε), and ``single``, the single-token error at ε = ``lo``."""
    s = pert[(pert.eps >= lo) & (pert.eps <= hi)]
    rows = []
    for (key, t, p), g in s.groupby(["model", "layer", "prompt"]):
        c = g[g.jacobian == "in-context"]
        single = g[(g.jacobian == "single-token") & (g.eps == lo)].error
        rows.append({"model": key, "layer": t, "prompt": p,
                     "slope": float(np.polyfit(np.log(c.eps), np.log(c.error), 1)[0]),
                     "single": float(single.iloc[0])})
    return pd.DataFrame(rows)


def perturbation_twins(views: TwinViews, eps: Sequence[float], n_prompts: int = 8, n_dirs: int = 8,
                       layers: Sequence[int] | None = None) -> pd.DataFrame:
    """:func:`perturbation_sweep` of every block (or ``layers``, 0-based) of each trained model at the last token
    of its first ``n_prompts`` prompts, ``n_dirs`` random directions per ε, tagged with ``model``; one model
    per core."""
    def one(key: str) -> pd.DataFrame:
        m, v = views.model(key), views[key, "trained"]
        texts = views.texts[key][:n_prompts]
        return perturbation_sweep(m, v.states[: len(texts)], [jac.last_token_index(m, s) for s in texts], eps,
                                  layers=layers, n_dirs=n_dirs).assign(model=key)

    return pd.concat(map_matrices(one, list(views.twins)), ignore_index=True)
