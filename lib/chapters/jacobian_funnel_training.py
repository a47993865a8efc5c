"""Chapter 7's training test: chapter 4's metrics at the book decoder's saved training steps.

Random-init twins stand in for "before training"; the decoder's own seeded run is the direct test. For each
intermediate checkpoint of :func:`lib.models.decoder.steps.saved_steps` the chapter's pipeline runs unchanged
(:func:`lib.jacobians.sweep.residual_inputs` and :func:`lib.jacobians.sweep.sweep` on the same prompts, then
:func:`lib.methods.funnel.bootstrap_run` with the same resamples: same ``n_boot`` and ``seed``), so every step's
numbers are comparable with the trained model's and the twins' of sections 4.3–4.6.

* :func:`step_runs`: one :class:`lib.methods.funnel.BootstrapRun` per step, and the residual norms entering
  blocks 1 and 2;
* :func:`step_statistics`: the :data:`STEP_STATISTICS` of one run with their bootstrap intervals;
* :func:`emergence_frame`: a long frame of every step's statistics and the twins' values, for the chart;
* :func:`emergence_step`: the first saved step from which a statistic stays outside the twins' intervals;
* :func:`trend_claim_verdict`: section 4.8's rule for FG2 applied to any one run (e.g. a saved step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lib.chapters.jacobian_funnel import compare_with_twins
from lib.methods.funnel import BootstrapRun, bootstrap_run
from lib.stats import Interval

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = ["STEP_STATISTICS", "StepRuns", "emergence_frame", "emergence_step", "step_runs", "step_statistics",
           "trend_claim_verdict"]

STEP_STATISTICS: dict[str, str] = {
    "erank_b1": "block 1: erank of J̄₁",
    "funnel": "funnel over all blocks: final erank",
    "funnel_no_b1": "funnel from block 2: final erank",
    "f_C": "slope of the complex fraction against depth",
    "delta_H": "slope of the Henrici departure against depth",
    "r_rot": "slope of the rotation fraction against depth",
}
"""The statistics followed over training (key → chart title): block 1's own effective rank, the final effective
rank of both funnels (section 4.6), and the depth slopes of the three metrics of section 4.3 (of ``J̄ − I``)."""


@dataclass
class StepRuns:
    """The chapter's statistics at each saved step.

    Attributes:
        runs: step → :class:`lib.methods.funnel.BootstrapRun` (pre-norm: metrics of ``J̄ − I``).
        norms: step → ``(2,)`` median norm over prompts of the residual entering blocks 1 and 2.
    """

    runs: dict[int, BootstrapRun]
    norms: dict[int, np.ndarray]


def step_runs(steps: Sequence[int], texts: Sequence[str], *, n_boot: int, seed: int = 0,
              load: Callable[[int], SpectralModel] | None = None) -> StepRuns:
    """The chapter-4 pipeline at each of ``steps``: residuals, single-token Jacobians, bootstrap.

    Args:
        steps: training steps with a checkpoint (:func:`lib.models.decoder.steps.saved_steps`).
        texts: the chapter's prompts (the same for every step).
        n_boot, seed: as :func:`lib.methods.funnel.bootstrap_run`; the chapter's values give every step the same
            resamples as the trained model and its twins.
        load: ``step → SpectralModel`` (default :func:`lib.models.decoder.steps.load_step`, which reads the
            checkpoint once and swaps each step's weights into it).
    """
    from lib.jacobians.sweep import residual_inputs, sweep
    from lib.models.decoder.steps import load_step

    runs, norms, model = {}, {}, None
    for step in steps:
        model = load(step) if load is not None else load_step(step, into=model)
        X, _ = residual_inputs(model, texts)
        js = sweep(model, X, keep_per_prompt=True, progress=False)
        # the steps' funnels are read at the final product only (step_statistics): one SVD per resample and funnel
        runs[step] = bootstrap_run(js.per_prompt, update=True, n_boot=n_boot, seed=seed, final_only=True)
        norms[step] = np.median(np.linalg.norm(np.asarray(X[:2]), axis=-1), axis=1)
    return StepRuns(runs=runs, norms=norms)


def step_statistics(run: BootstrapRun) -> dict[str, Interval]:
    """The :data:`STEP_STATISTICS` of one run: point values from all prompts, percentile intervals from its
    replicates (``run`` must have resampled every statistic of :data:`lib.methods.funnel.BOOTSTRAP_STATS`)."""
    out = {"erank_b1": run.interval("erank", 0), "funnel": run.interval("funnel", -1),
           "funnel_no_b1": run.interval("funnel_no_b1", -1)}
    for m in ("f_C", "delta_H", "r_rot"):
        out[m] = run.trend(m).slope
    return out


def emergence_frame(runs: dict[int, BootstrapRun], twins: dict[str, BootstrapRun],
                    committed: BootstrapRun | None = None) -> pd.DataFrame:
    """Every step's statistics, the twins' and (optionally) the committed model's, as one long frame.

    Args:
        runs: step → run of the saved training run.
        twins: twin series label → run (the chapter's random-init twins, same prompts and resamples).
        committed: the chapter's trained model, placed at the last step (the saved run's final weights are a
            sibling of it, not the same: :mod:`lib.models.decoder.steps`).

    Returns:
        columns ``statistic`` (key of :data:`STEP_STATISTICS`), ``title``, ``kind`` (``"run"``, ``"twin"`` or
        ``"committed"``), ``series`` (``"training run"``, a twin's label or ``"committed model"``), ``step`` (NaN
        for the twins), ``value``, ``lo``, ``hi``, and ``side``: where the interval lies against the twins'
        (:func:`lib.chapters.jacobian_funnel.compare_with_twins`; empty for the twins).
    """
    twin_stats = {s: step_statistics(r) for s, r in twins.items()}
    rows = []

    def add(kind: str, series: str, step: float, run: BootstrapRun) -> None:
        for key, iv in step_statistics(run).items():
            side = "" if kind == "twin" else compare_with_twins(iv, [t[key] for t in twin_stats.values()])
            rows.append({"statistic": key, "title": STEP_STATISTICS[key], "kind": kind, "series": series,
                         "step": step, "value": iv.point, "lo": iv.lo, "hi": iv.hi, "side": side})

    for step, run in sorted(runs.items()):
        add("run", "training run", float(step), run)
    for s, run in twins.items():
        add("twin", s, np.nan, run)
    if committed is not None:
        add("committed", "committed model", float(max(runs)), committed)
    return pd.DataFrame(rows)


def emergence_step(frame: pd.DataFrame, statistic: str) -> float:
    """The first saved step from which ``statistic``'s interval lies outside every twin's, on the final step's
    side, at every later saved step too; NaN if the final step itself is not outside (nothing emerged)."""
    g = frame[(frame.statistic == statistic) & (frame.kind == "run")].sort_values("step")
    final = g.side.iloc[-1]
    if final not in ("lower", "higher"):
        return float("nan")
    outside = (g.side == final).to_numpy()
    first = len(outside) - int(np.argmin(outside[::-1])) if not outside.all() else 0
    return float(g.step.iloc[first])



def trend_claim_verdict(run: BootstrapRun, twins: dict[str, BootstrapRun]) -> str:
    """Section 4.8's FG2 rule (:func:`lib.chapters.jacobian_funnel.claim_verdicts`) for one run against the twins:
    :func:`lib.chapters.jacobian_funnel.combine_verdicts` of the ``δ_H`` and ``r_rot`` trend verdicts."""
    from lib.chapters.jacobian_funnel import combine_verdicts, depth_trends, trend_verdicts

    tv = trend_verdicts(depth_trends({"trained": run, **twins}), "trained")
    return combine_verdicts([tv["delta_H"], tv["r_rot"]])
