"""Interactive explorers of the shared-weight dynamics (chapter 1).

Two front ends share one computation, :func:`explore_run`:

* :func:`widget_explorer`: ipywidgets sliders that re-run the simulator live (needs a kernel:
  JupyterLab);
* :func:`static_explorer`: an Altair chart over a precomputed grid whose sliders are bound to Vega
  parameters, so the exploration also works on the static site without a kernel.

What is explored [ours]: a toy ``F`` (d = 32) with ``|λ₁| = 1``, the modulus ``gap`` of the next
eigenvalue, and the angle ``θ`` of the principal eigenvalue (0°: real positive, 180°: real negative,
in between: a complex pair ``e^{±iθ}``); ``heads`` attention heads with sharpness ``β`` (0 = uniform);
the simplified layer with L2 normalization and no residual.
"""

from __future__ import annotations

import itertools
import math

import altair as alt
import numpy as np
import pandas as pd
import torch

from lib.errors import InputError
from lib.linalg import power, spectra
from lib.page.plotting import OTHER_COLORS, titled
from lib.theory import dynamics, toys

__all__ = ["GRID", "check_explorer_args", "explore_run", "explorer_chart", "static_explorer", "widget_explorer"]

D, N_TOKENS, STEPS, SEED = 32, 12, 30, 0
GRID: dict[str, list[float]] = {
    "gap": [0.1, 0.3, 0.5, 0.7, 0.9],
    "theta": [0, 45, 90, 135, 180],
    "heads": [1, 2, 4, 8],
    "beta": [0, 1, 2, 3, 4],
}
"""Slider values of the static explorer (θ in degrees)."""


def _matrix(gap: float, theta_deg: float, seed: int) -> np.ndarray:
    if theta_deg <= 0:
        return toys.toy_matrix("real", D, gap=gap, seed=seed)
    if theta_deg >= 180:
        return toys.toy_matrix("negative", D, gap=gap, seed=seed)
    return toys.toy_matrix("complex", D, gap=gap, theta=math.radians(theta_deg), seed=seed)


def _runs(gap: float, theta_deg: float, heads_list, beta_list, steps: int, seed: int) -> list[pd.DataFrame]:
    """One :func:`explore_run` table per (heads, β), sharing the matrix, its eigenvectors and the weights."""
    F = _matrix(gap, theta_deg, seed)
    P = spectra.principal(F)
    X0 = toys.random_tokens(N_TOKENS, D, seed=seed)
    t = np.arange(steps + 1)
    out = []
    betas = torch.tensor([float(b) for b in beta_list], dtype=torch.float64)
    X0b = np.repeat(X0[None], len(beta_list), axis=0)  # one batch entry per β
    for heads in heads_list:
        w = toys.weights_from_matrix(F, int(heads), seed=seed)
        XX = dynamics.simulate(w, X0b, steps, beta=betas).numpy()  # (T+1, n_β, n, d)
        for j in range(len(beta_list)):
            X = XX[:, j]
            err = power.distance_to_subspace(X, P.basis).mean(axis=1)
            out.append(pd.DataFrame({
                "t": t,
                "err": err,
                "pred": err[0] * P.gap_ratio**t,
                "cos": power.signed_alignment(X[:, 0], P.basis[:, 0]),
            }))
    return out


def check_explorer_args(gap: float, theta_deg: float, heads: int, beta: float, steps: int) -> None:
    """Refuse slider values outside the explorer's ranges with one clear message.

    Ranges: ``0 ≤ gap < 1``; ``0 ≤ θ ≤ 180`` degrees (0: real ``λ₁``, 180: negative ``λ₁``);
    ``heads`` a divisor of ``d = 32``; ``β ≥ 0`` (0: uniform attention); ``steps ≥ 1``.
    """
    problems = []
    if not (math.isfinite(gap) and 0 <= gap < 1):
        problems.append(f"gap must lie in [0, 1), got {gap}")
    if not (math.isfinite(theta_deg) and 0 <= theta_deg <= 180):
        problems.append(f"the angle θ must lie in [0, 180] degrees, got {theta_deg}")
    if int(heads) != heads or heads < 1 or D % int(heads):
        problems.append(f"heads must divide d = {D} (1, 2, 4, 8, 16, 32), got {heads}")
    if not (math.isfinite(beta) and beta >= 0):
        problems.append(f"attention sharpness β must be ≥ 0, got {beta}")
    if int(steps) != steps or steps < 1:
        problems.append(f"steps must be a positive integer, got {steps}")
    if problems:
        raise InputError("; ".join(problems))


def explore_run(gap: float, theta_deg: float, heads: int, beta: float, *, steps: int = STEPS, seed: int = SEED) -> pd.DataFrame:
    """One simulation of the explorer's toy: a DataFrame with one row per step.

    Columns: ``t``; ``err``, the mean distance ``sin∠`` of the tokens to the dominant subspace (``v₁``, or
    the rotation plane of a complex pair); ``pred``, the prediction ``err₀ · gap^t``; ``cos``, the signed
    cosine of token 0 with the first basis vector ``b₁`` of that subspace (it flips sign for a negative
    ``λ₁`` and oscillates for a complex pair).
    """
    check_explorer_args(gap, theta_deg, heads, beta, steps)
    return _runs(gap, theta_deg, [heads], [beta], steps, seed)[0]


def explorer_chart(
    df: pd.DataFrame, *, model: str, title: str, params: tuple = (), where: str | None = None,
    width: int = 215, height: int = 200,
) -> alt.TopLevelMixin:
    """Two panels from :func:`explore_run` rows: the distance to the dominant subspace (log, measured
    and predicted) and the signed cosine of token 0 with ``b₁``.

    The log axis is fixed at ``[1e-16, 1.5]`` so that the sliders do not move it; values below 1e-16 (the
    float64 rounding level, or a prediction that underflows) are left out, not drawn at the floor.

    Args:
        params: Vega parameters (slider bindings) to attach; ``where``: a Vega filter expression that
            selects the rows of one run from a precomputed grid.
    """
    base = alt.Chart(df).properties(width=width, height=height)
    if where:
        base = base.transform_filter(where)
    curves = ["measured", "predicted: err₀ · gapᵗ"]
    err = base.transform_fold(["err", "pred"], as_=["key", "value"]).transform_filter(
        "datum.value >= 1e-16").transform_calculate(
        curve=f"datum.key == 'err' ? '{curves[0]}' : '{curves[1]}'").mark_line(color=OTHER_COLORS[0]).encode(
        x=alt.X("t:Q", title="step t"),
        y=alt.Y("value:Q", scale=alt.Scale(type="log", domain=[1e-16, 1.5]), title="distance to dominant subspace",
                axis=alt.Axis(format=".0e")),
        strokeDash=alt.StrokeDash("curve:N", title=None, scale=alt.Scale(domain=curves),
                                  legend=alt.Legend(orient="bottom")),
    )
    if params:
        err = err.add_params(*params)
    cos = base.mark_line(point=alt.OverlayMarkDef(color=OTHER_COLORS[0]), color=OTHER_COLORS[0]).encode(
        x=alt.X("t:Q", title="step t"),
        y=alt.Y("cos:Q", title="signed cos(token 0, b₁)", scale=alt.Scale(domain=[-1, 1])),
    )
    return titled(alt.hconcat(err, cos), title, model)


def static_explorer(model: str | None = None) -> alt.TopLevelMixin:
    """The kernel-free explorer: every grid point of :data:`GRID` precomputed, sliders bound to Vega params."""
    frames = []
    for gap, theta in itertools.product(GRID["gap"], GRID["theta"]):
        runs = _runs(gap, theta, GRID["heads"], GRID["beta"], STEPS, SEED)
        for df, (heads, beta) in zip(runs, itertools.product(GRID["heads"], GRID["beta"])):
            frames.append(df.assign(g=gap, th=theta, h=heads, b=beta))
    data = pd.concat(frames, ignore_index=True)
    for col in ("err", "pred", "cos"):  # 4 significant digits: a smaller page
        v = data[col].to_numpy(dtype=float)
        mag = 10.0 ** (3 - np.floor(np.log10(np.maximum(np.abs(v), 1e-300))))
        data[col] = np.round(v * mag) / mag
    params = (
        alt.param(name="gap", value=0.5, bind=alt.binding_range(min=0.1, max=0.9, step=0.2, name="gap |λₙₑₓₜ| / |λ₁| ")),
        alt.param(name="theta", value=45, bind=alt.binding_range(min=0, max=180, step=45, name="angle θ of λ₁ (degrees) ")),
        alt.param(name="heads", value=4, bind=alt.binding_radio(options=GRID["heads"], name="heads ")),
        alt.param(name="beta", value=1, bind=alt.binding_range(min=0, max=4, step=1, name="attention sharpness β ")),
    )
    where = "abs(datum.g - gap) < 1e-6 && datum.th == theta && datum.h == heads && datum.b == beta"
    label = model or f"toy matrix, d={D}, seed {SEED}, {N_TOKENS} tokens, softmax attention, L2 norm"
    return explorer_chart(data, model=label, params=params, where=where,
                          title="Explorer: the gap sets the slope; the angle θ of λ₁ sets how the sign turns")


def widget_explorer():  # pragma: no cover - needs a live kernel to be useful
    """ipywidgets version of the explorer (JupyterLab): continuous sliders, re-plotted on every change."""
    import ipywidgets as W
    from IPython.display import display

    sliders = dict(
        gap=W.FloatSlider(value=0.5, min=0.0, max=0.99, step=0.01, description="gap"),
        theta_deg=W.IntSlider(value=45, min=0, max=180, step=5, description="θ (deg)"),
        heads=W.Dropdown(options=[1, 2, 4, 8, 16, 32], value=4, description="heads"),
        beta=W.FloatSlider(value=1.0, min=0.0, max=8.0, step=0.25, description="sharpness β"),
    )
    out = W.Output()

    def redraw(_=None):
        df = explore_run(**{k: s.value for k, s in sliders.items()})
        with out:
            out.clear_output(wait=True)
            display(explorer_chart(df, model=f"toy matrix, d={D}, seed {SEED}", title="Live explorer"))

    for s in sliders.values():
        s.observe(redraw, names="value")
    redraw()
    box = W.VBox([W.HBox(list(sliders.values())[:2]), W.HBox(list(sliders.values())[2:]), out])
    display(box)
    return box
