"""Chapter 4's runs over twins, its frames and its verdict rules (sections 4.2–4.9).

The statistics come from :mod:`lib.methods.funnel` (:func:`lib.methods.funnel.bootstrap_run`: the per-layer
metrics and both funnels of one model with their prompt-bootstrap replicates; the non-normality controls) and
:mod:`lib.linalg.nonnormal` (the metrics themselves, batched). This module runs them over a model and its
random-init twins with the same resamples (:func:`bootstrap_twins`, :func:`twin_control_funnels`), gathers long
frames for the charts of :mod:`lib.page.jacobian_funnel` (:func:`depth_frame`, :func:`trend_frame`,
:func:`funnel_curves`, :func:`block_erank_frame`, …) and decides section 4.8's verdicts.

:func:`lib.stats.trend_test` turns bootstrap replicates of a per-layer metric into an OLS slope against relative
depth with a percentile interval; :func:`trend_verdict` and :func:`compare_with_twins` decide from the
intervals alone, never from a fixed threshold on a point estimate, and :func:`claim_verdicts` decides FG1–FG7
from a :class:`FunnelEvidence`. Section 4.9's work tables: :func:`paper_model_work` (the paper's models on GPUs)
and :func:`cpu_decoder_work` (small real decoders on CPUs, :data:`CPU_DECODERS`). The page's tables and the Results
page's phrases are in :mod:`lib.page.jacobian_funnel`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lib.linalg.nonnormal import funnel_eranks, spectral_metrics
from lib.methods.funnel import BOOTSTRAP_STATS, BootstrapRun, bootstrap_run, control_funnels_by_start
from lib.methods.topology import power_qualified
from lib.stats import Interval, TrendTest

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = [
    "CPU_DECODERS",
    "DECOMPOSITION_CPU_S",
    "DEPTH_METRICS",
    "FUNNEL_READINGS",
    "JACOBIAN_CLAIMS",
    "JACOBIAN_CPU_RATE",
    "METRIC_LABELS",
    "PAPER_MODELS",
    "PRODUCTS",
    "PROTOCOLS",
    "FunnelEvidence",
    "block_erank_frame",
    "bootstrap_twins",
    "check_roles",
    "claim_verdicts",
    "combine_verdicts",
    "compare_with_twins",
    "control_verdict",
    "cpu_decoder_work",
    "depth_frame",
    "depth_trends",
    "end_to_end_in_context",
    "funnel_curves",
    "funnel_readings",
    "funnel_readings_verdicts",
    "funnel_verdict",
    "input_norms",
    "jacobian_claim_verdicts",
    "leading_eigenvalues",
    "learned_verdict",
    "metric_frame",
    "operator_sign_verdict",
    "paper_model_work",
    "per_prompt_final_erank",
    "protocol_verdicts",
    "sign_pattern_verdict",
    "smallest_moduli",
    "sub_block_frame",
    "trend_frame",
    "trend_verdict",
    "trend_verdicts",
    "twin_control_funnels",
    "verdict_counts",
]


# --- Verdicts of section 4.8: decided from intervals and corrected p-values only -----------------------


def trend_verdict(trained: TrendTest, twins: Sequence[TrendTest], expected: str = "falls") -> str:
    """Verdict on "the metric ``expected`` (falls/rises) with depth, and that is learned".

    ``"reproduced"``: the trained slope's interval excludes 0 on the expected side and no twin's does;
    ``"not specific to training"``: the trained one does and so does some twin's; ``"not reproduced"``:
    the trained slope's interval does not exclude 0 on the expected side.
    """
    if expected not in ("falls", "rises"):
        raise ValueError(f"expected must be 'falls' or 'rises', got {expected!r}")
    if trained.direction != expected:
        return "not reproduced"
    if any(t.direction == expected for t in twins):
        return "not specific to training"
    return "reproduced"


def compare_with_twins(trained: Interval, twins: Sequence[Interval]) -> str:
    """Where a trained value sits against its random-init twins, from the intervals only.

    Returns ``"lower"`` if the trained interval lies entirely below every twin's interval, ``"higher"``
    if entirely above every twin's, else ``"overlaps"``.
    """
    if all(trained.hi < t.lo for t in twins):
        return "lower"
    if all(trained.lo > t.hi for t in twins):
        return "higher"
    return "overlaps"


def funnel_verdict(trained: Interval, twins: Sequence[Interval]) -> str:
    """FG3 (low-rank funnel, learned): ``"reproduced"`` if the trained final erank lies below every twin's
    interval; ``"not reproduced"`` if it overlaps or lies above (a funnel at most as narrow as random init)."""
    return "reproduced" if compare_with_twins(trained, twins) == "lower" else "not reproduced"


def control_verdict(ratio: Interval, funnel: str) -> str:
    """FG4 (removing non-normality removes the collapse): ``"reproduced"`` if there is a funnel to remove
    (``funnel`` is FG3's verdict, ``"reproduced"``) and the Schur-normal/as-measured erank ratio's interval
    lies above 1; else ``"not reproduced"``."""
    return "reproduced" if funnel == "reproduced" and ratio.lo > 1 else "not reproduced"


def combine_verdicts(verdicts: Sequence[str]) -> str:
    """One verdict for a claim tested by several statistics (e.g. FG2 by ``δ_H`` and ``r_rot``).

    All ``"reproduced"``: reproduced; some: ``"partly reproduced"``; none, but some ``"not specific to
    training"``: that; else ``"not reproduced"``.
    """
    n_rep = sum(v in ("reproduced", "partly reproduced") for v in verdicts)
    if verdicts and all(v == "reproduced" for v in verdicts):
        return "reproduced"
    if n_rep:
        return "partly reproduced"
    if any(v == "not specific to training" for v in verdicts):
        return "not specific to training"
    return "not reproduced"


def sign_pattern_verdict(r_s, q, depth, alpha: float = 0.05) -> str:
    """FG6 (bridges suppressed early and middle, amplified late), from per-layer couplings.

    ``"reproduced"``: a significant negative ``r_S`` (``q < alpha``) at some depth ``≤ 2/3`` *and* a
    significant positive one at some depth ``> 2/3``, and no significant coupling of the opposite sign
    anywhere; ``"partly reproduced"``: only one of the two; ``"not reproduced"``: neither.
    """
    r, q, x = (np.asarray(a, dtype=np.float64) for a in (r_s, q, depth))
    sig = q < alpha
    early, late = x <= 2 / 3, x > 2 / 3
    neg_early, pos_late = bool(np.any(sig & early & (r < 0))), bool(np.any(sig & late & (r > 0)))
    wrong = bool(np.any(sig & early & (r > 0)) or np.any(sig & late & (r < 0)))
    if neg_early and pos_late and not wrong:
        return "reproduced"
    if neg_early or pos_late:
        return "partly reproduced"
    return "not reproduced"


def operator_sign_verdict(r_attn, q_attn, r_mlp, q_mlp, q_twins: Sequence, alpha: float = 0.05) -> str:
    """FG5 (position predicts gain, sign set by the operator type: attention vs MLP sub-block).

    ``"reproduced"``: some layer has significant couplings of opposite sign in the two sub-blocks, and no
    twin has a significant layer; ``"partly reproduced"``: trained couplings significant somewhere but no
    sign split; ``"not specific to training"``: significant somewhere, and as often in some twin;
    ``"not reproduced"``: no significant trained coupling.
    """
    ra, qa, rm, qm = (np.asarray(a, dtype=np.float64) for a in (r_attn, q_attn, r_mlp, q_mlp))
    n_tr = int(np.sum(qa < alpha) + np.sum(qm < alpha))
    if n_tr == 0:
        return "not reproduced"
    if any(int(np.sum(np.asarray(q) < alpha)) >= n_tr for q in q_twins):
        return "not specific to training"
    split = np.any((qa < alpha) & (qm < alpha) & (np.sign(ra) != np.sign(rm)))
    return "reproduced" if split else "partly reproduced"


def learned_verdict(verdicts: Sequence[str]) -> str:
    """FG7 (none of it at random init), from the verdicts of the effects it qualifies.

    Each effect's verdict already compares the trained model with its twins, so a reproduced effect is a learned
    one. FG7 can be confirmed only on what was found, and no more fully than that was found:

    * some effect fully reproduced and none found at random init as well: ``"reproduced"``;
    * learned effects that are only partial reproductions (e.g. FG3's full product without its progressive
      reading), or learned effects beside effects that random init shares: ``"partly reproduced"``;
    * only effects that random init shares: ``"not specific to training"``;
    * no effect in the trained model at all: ``"not reproduced"`` (there is nothing learned to compare).
    """
    n_full = sum(v == "reproduced" for v in verdicts)
    n_part = sum(v == "partly reproduced" for v in verdicts)
    n_ns = sum(v == "not specific to training" for v in verdicts)
    if n_full and not n_ns:
        return "reproduced"
    if n_full or n_part:
        return "partly reproduced"
    return "not specific to training" if n_ns else "not reproduced"


FUNNEL_READINGS: dict[str, str] = {
    "full product": "blocks 1–L, the cumulative product as the abstract states it [paper]",
    "blocks 2–L": "from block 2 on: a funnel that narrows layer after layer [secondary]",
}
"""FG3's two co-primary readings [ours: both tested, neither instead of the other]: the product of every block
(a low-rank bottleneck, wherever it forms) and the product without block 1 (progressive narrowing, which a single
collapsing block cannot produce)."""


def funnel_readings_verdicts(full: tuple[Interval, Sequence[Interval], Interval],
                             progressive: tuple[Interval, Sequence[Interval], Interval]) -> dict[str, dict[str, str]]:
    """FG3 and FG4 on each of :data:`FUNNEL_READINGS` and their honest union.

    Args:
        full, progressive: per reading ``(trained, twins, ratio)``: the trained final erank's interval, the
            twins' intervals, and the trained Schur-normal / as-measured ratio's interval.

    Returns:
        ``{"FG3": {...}, "FG4": {...}}``, each with one verdict per reading (:func:`funnel_verdict`,
        :func:`control_verdict`) and ``"union"``: :func:`combine_verdicts` of the two (both reproduced:
        reproduced; one: partly reproduced; neither: not reproduced).
    """
    out: dict[str, dict[str, str]] = {"FG3": {}, "FG4": {}}
    for name, (tr, twins, ratio) in zip(FUNNEL_READINGS, (full, progressive)):
        out["FG3"][name] = funnel_verdict(tr, twins)
        out["FG4"][name] = control_verdict(ratio, out["FG3"][name])
    for per_reading in out.values():
        per_reading["union"] = combine_verdicts([per_reading[r] for r in FUNNEL_READINGS])
    return out


# --- What the chapter's sections compute, as frames and runs over twins (sections 4.2–4.7) ------------------

DEPTH_METRICS: tuple[str, ...] = ("f_C", "delta_H", "r_rot")
"""The per-layer metrics whose trend with depth section 4.3 tests."""

METRIC_LABELS: dict[str, str] = {"f_C": "complex fraction f_C", "delta_H": "Henrici departure δ_H",
                                 "r_rot": "rotation fraction r_rot", "erank": "effective rank"}
"""How tables and charts name the metrics (chart text may hold ``f_C``; table headers use words)."""


def bootstrap_twins(jacobians, *, update: bool, n_boot: int, seed: int = 0,
                    resample: Sequence[str] = BOOTSTRAP_STATS, twins: bool = True,
                    trained: str = "trained", final_only: bool = False,
                    twins_final_only: bool = False) -> dict[str, BootstrapRun]:
    """:func:`lib.methods.funnel.bootstrap_run` for a model and each twin, with the same resamples (same
    ``seed``).

    Args:
        jacobians: series label → :class:`lib.jacobians.sweep.JacobianSet` with ``per_prompt`` kept (for example
            :attr:`lib.jacobians.sweep.TwinJacobians.jacobians`).
        update, n_boot, seed, resample, final_only: as :func:`lib.methods.funnel.bootstrap_run`.
        twins: ``False``: only ``trained`` is resampled, the twins get point values (where only the trained
            model's interval is shown: the post-LN contrast).
        twins_final_only: ``final_only`` for the twins alone (their funnels' intervals are read at the final
            product only, the trained model's block by block).
    """
    return {s: bootstrap_run(js.per_prompt, update=update, n_boot=n_boot if (twins or s == trained) else 0,
                             seed=seed, resample=resample,
                             final_only=final_only or (twins_final_only and s != trained))
            for s, js in jacobians.items()}


def metric_frame(runs: dict[tuple[str, str], BootstrapRun], metrics: Sequence[str] = ("f_C", "delta_H", "r_rot", "erank"),
                 level: float | None = None) -> pd.DataFrame:
    """Long table of per-layer metrics: ``model``, ``weights``, ``layer``, ``depth``, ``metric``, ``value``,
    ``lo``, ``hi`` (``lo``/``hi`` NaN for runs without a bootstrap; ``level`` None: each run's own)."""
    rows = []
    for (model, weights), r in runs.items():
        for m in metrics:
            L = len(r.point[m])
            for l in range(L):
                iv = r.interval(m, l, level) if r.has_interval(m) else Interval(float(r.point[m][l]), np.nan, np.nan)
                rows.append({"model": model, "weights": weights, "layer": l + 1, "depth": (l + 1) / L, "metric": m,
                             "value": iv.point, "lo": iv.lo, "hi": iv.hi})
    return pd.DataFrame(rows)


def depth_frame(panels: dict[str, dict[str, BootstrapRun]], baselines: dict[str, float] | None = None,
                metrics: Sequence[str] = DEPTH_METRICS) -> pd.DataFrame:
    """One row per panel, series and layer, for :func:`lib.page.jacobian_funnel.depth_chart`.

    Args:
        panels: panel title (a model and its operator) → series label →
            :class:`lib.methods.funnel.BootstrapRun`.
        baselines: panel title → a reference level drawn as a dashed line (e.g. the Ginibre ``f_C``).

    Returns:
        columns ``model`` (the panel), ``series``, ``layer`` (1-based), ``depth`` (``(l+1)/L``), optionally
        ``baseline``, and for each metric ``m``: ``m``, ``m_lo``, ``m_hi`` (the run's bootstrap interval at
        its own level; NaN where the run has no replicates of ``m``).
    """
    rows = []
    for panel, runs in panels.items():
        for series, r in runs.items():
            L = len(r.point[metrics[0]])
            for l in range(L):
                row: dict[str, object] = {"model": panel, "series": series, "layer": l + 1, "depth": (l + 1) / L}
                if baselines is not None:
                    row["baseline"] = baselines[panel]
                for m in metrics:
                    iv = r.interval(m, l) if r.has_interval(m) else Interval(float(r.point[m][l]), np.nan, np.nan)
                    row[m], row[f"{m}_lo"], row[f"{m}_hi"] = iv.point, iv.lo, iv.hi
                rows.append(row)
    return pd.DataFrame(rows)


def depth_trends(runs: dict[str, BootstrapRun], metrics: Sequence[str] = DEPTH_METRICS
                 ) -> dict[tuple[str, str], TrendTest]:
    """``(metric, series) → ``:meth:`lib.methods.funnel.BootstrapRun.trend` for every resampled run (section 4.3's
    slopes)."""
    return {(m, s): r.trend(m) for m in metrics for s, r in runs.items()}


def trend_verdicts(trends: dict[tuple[str, str], TrendTest], trained: str = "trained",
                   expected: str = "falls") -> dict[str, str]:
    """:func:`trend_verdict` of each metric of :func:`depth_trends`: the ``trained`` series against all others."""
    out = {}
    for m in dict.fromkeys(m for m, _ in trends):
        twins = [t for (mm, s), t in trends.items() if mm == m and s != trained]
        out[m] = trend_verdict(trends[m, trained], twins, expected)
    return out


def trend_frame(trends: dict[tuple[str, str], TrendTest]) -> pd.DataFrame:
    """The slopes of :func:`depth_trends` for a chart and its table: ``metric`` (words), ``series``,
    ``slope``, ``lo``, ``hi``, ``direction``."""
    return pd.DataFrame([{"metric": METRIC_LABELS.get(m, m), "series": s, "slope": t.slope.point,
                          "lo": t.slope.lo, "hi": t.slope.hi, "direction": t.direction}
                         for (m, s), t in trends.items()])


def smallest_moduli(jacobians: dict[str, object]) -> pd.DataFrame:
    """``min |λ|`` of every mean Jacobian: a column ``block`` (1-based), then one column per entry of
    ``jacobians`` (a label → a :class:`lib.jacobians.sweep.JacobianSet` or an ``(L, d, d)`` stack); models of
    different depths leave NaN below their last block."""
    from lib.linalg.spectra import eigvals

    cols = {}
    for label, js in jacobians.items():
        stack = js if isinstance(js, np.ndarray) else js.mean  # an ndarray has a .mean method too
        cols[label] = pd.Series([float(np.abs(eigvals(J)).min()) for J in stack], dtype=float)
    L = max(len(c) for c in cols.values())
    return pd.DataFrame({"block": range(1, L + 1), **{k: c.reindex(range(L)).to_numpy() for k, c in cols.items()}})


def sub_block_frame(jacobians: dict[str, object], trained: str = "trained") -> pd.DataFrame:
    """``δ_H`` and ``r_rot`` of the update of each sub-block's mean Jacobian (section 4.5), pre-norm.

    Args:
        jacobians: series label → :class:`lib.jacobians.sweep.JacobianSet` swept with ``parts=True``.

    Returns:
        one row per series, sub-block and layer: ``weights`` (``"trained"`` or ``"random init (n seeds)"``),
        ``series``, ``sub_block`` (``"attention"`` / ``"MLP"``), ``layer``, ``delta_H``, ``r_rot``.
    """
    from lib.methods.topology import SUB_BLOCK_NAMES as names

    n_twins = sum(s != trained for s in jacobians)
    rows = []
    for s, js in jacobians.items():
        for part, Jm in js.parts.items():
            m = spectral_metrics(Jm)
            rows += [{"weights": "trained" if s == trained else f"random init ({n_twins} seeds)", "series": s,
                      "sub_block": names.get(part, part), "layer": l + 1, "delta_H": m["delta_H"][l],
                      "r_rot": m["r_rot"][l]} for l in range(len(Jm))]
    return pd.DataFrame(rows)


def twin_control_funnels(jacobians: dict[str, object], *, n_boot: int, trained: str = "trained",
                         firsts: Sequence[int] = (0, 1), seed: int = 0) -> dict[int, dict[str, dict[str, Interval]]]:
    """:func:`lib.methods.funnel.control_funnels_by_start` of every series: intervals (``n_boot`` resamples) for
    ``trained``, point values for the twins (one real Schur form per layer and resample makes the twins'
    intervals expensive).

    Returns:
        first block skipped (``0``: the full product; ``1``: from block 2) → series → controls.
    """
    runs = {s: control_funnels_by_start(js.per_prompt, firsts=firsts, n_boot=n_boot if s == trained else 0,
                                        seed=seed)
            for s, js in jacobians.items()}
    return {f: {s: r[f] for s, r in runs.items()} for f in firsts}


PRODUCTS: tuple[str, ...] = ("blocks 1..l", "blocks 2..l", "blocks 2..l, Schur-normal", "blocks 2..l, shuffled Schur")
"""The cumulative products that the funnel chart draws (the controls for the trained model only)."""


def funnel_curves(panels: dict[str, tuple[dict[str, BootstrapRun], np.ndarray]],
                  trained: str = "trained") -> pd.DataFrame:
    """Every funnel curve of section 4.6's chart.

    Args:
        panels: panel title → ``(runs, Jbar)``: the series' :class:`lib.methods.funnel.BootstrapRun` s and the
            trained model's mean Jacobians ``(L, d, d)``, whose controls
            (:func:`lib.linalg.nonnormal.control_matrices`) give two more curves.

    Returns:
        columns ``model`` (panel), ``series``, ``product`` (one of :data:`PRODUCTS`), ``blocks`` (the last block
        multiplied; 0 is the identity) and ``erank``.
    """
    from lib.linalg.nonnormal import control_matrices, cumulative_product

    rows = []
    for panel, (runs, Jbar) in panels.items():
        for s, r in runs.items():
            rows += [{"model": panel, "series": s, "product": PRODUCTS[0], "blocks": l, "erank": float(e)}
                     for l, e in enumerate(r.point["funnel"])]
            rows += [{"model": panel, "series": s, "product": PRODUCTS[1], "blocks": l + 1, "erank": float(e)}
                     for l, e in enumerate(r.point["funnel_no_b1"])]
        cm = control_matrices(Jbar)
        for name, product in (("Schur-normal", PRODUCTS[2]), ("shuffled Schur", PRODUCTS[3])):
            rows += [{"model": panel, "series": trained, "product": product, "blocks": l + 1, "erank": float(e)}
                     for l, e in enumerate(cumulative_product(cm[name][1:]).erank)]
    return pd.DataFrame(rows)


def block_erank_frame(runs: dict[str, BootstrapRun]) -> pd.DataFrame:
    """The effective rank of each block's own ``J̄_l``: ``series``, ``block`` (1-based), ``erank``, ``lo``, ``hi``
    (bootstrap interval; NaN without replicates)."""
    rows = []
    for s, r in runs.items():
        for l, e in enumerate(r.point["erank"]):
            iv = r.interval("erank", l) if r.has_interval("erank") else Interval(float(e), np.nan, np.nan)
            rows.append({"series": s, "block": l + 1, "erank": iv.point, "lo": iv.lo, "hi": iv.hi})
    return pd.DataFrame(rows)


def input_norms(inputs: dict[str, object], blocks: int = 2) -> dict[str, np.ndarray]:
    """Median residual norm over prompts entering each of the first ``blocks`` blocks, per series
    (``inputs``: series label → ``(L + 1, P, d)`` residuals of :func:`lib.jacobians.sweep.residual_inputs`)."""
    return {s: np.median(np.linalg.norm(np.asarray(X[:blocks]), axis=-1), axis=1) for s, X in inputs.items()}


def leading_eigenvalues(Jbar, blocks: Sequence[int], tau: float = 1e-8) -> pd.DataFrame:
    """How the leading eigenvalue ``λ₁`` of each chosen ``J̄_l`` stands against the rest (section 4.4).

    Args:
        Jbar: ``(L, d, d)`` mean Jacobians. blocks: 0-based indices. tau: ``λ₁`` is complex when
            ``|Im λ₁| > tau · |λ₁|``.

    Returns:
        one row per block: ``block`` (1-based), ``modulus`` ``|λ₁|``, ``pair`` (``λ₁`` one of a complex
        conjugate pair), ``next_index`` (1-based position, in the book's modulus order, of the first eigenvalue
        that is neither ``λ₁`` nor its conjugate) and ``next_ratio`` (its modulus over ``|λ₁|``: near 1, ``λ₁``
        is not an outlier).
    """
    from lib.linalg.spectra import eigvals

    rows = []
    for b in blocks:
        lam = eigvals(np.asarray(Jbar)[b])
        l1 = lam[0]
        pair = bool(abs(l1.imag) > tau * abs(l1))
        nxt = 2 if pair else 1
        rows.append({"block": b + 1, "modulus": float(abs(l1)), "pair": pair, "next_index": nxt + 1,
                     "next_ratio": float(abs(lam[nxt]) / abs(l1))})
    return pd.DataFrame(rows)


def end_to_end_in_context(model: SpectralModel, states, T: int) -> dict[str, np.ndarray]:
    """The true in-context Jacobian ``∂h_L[T]/∂h_0[T]`` of one sequence against the product of its in-context
    diagonal blocks (autodiff; section 4.6's caveat for encoders).

    In a causal decoder no later position feeds back into ``T``, so the product of the diagonal blocks
    ``∂h_{l+1}[T]/∂h_l[T]`` is the true end-to-end Jacobian. In a bidirectional encoder a change of ``h_0[T]``
    also moves the other tokens, which attend back to ``T`` in later blocks; the product of the diagonal blocks
    leaves all those paths out.

    Args:
        states: the sequence's residual stream ``(L + 1, n, d)`` (:meth:`lib.models.SpectralModel.hidden_states`).
        T: the position.

    Returns:
        ``{"true": (d, d), "product": (d, d)}`` float64: ``jacrev`` of the blocks run on the whole sequence with
        only ``h_0[T]`` free, and the product ``∂h_L[T]/∂h_{L−1}[T] ⋯ ∂h_1[T]/∂h_0[T]`` of the diagonal blocks
        (:func:`lib.jacobians.sweep.in_context_jacobian`: each with every other position fixed at its recorded
        state; closed form where the family has one).
    """
    import torch

    from lib.jacobians.sweep import in_context_jacobian

    p = next(model.hf_model.parameters())
    H = torch.as_tensor(np.asarray(states)).to(device=p.device, dtype=p.dtype)
    layers = [model.layer(t) for t in range(model.n_layers)]

    def through(x: torch.Tensor) -> torch.Tensor:
        Hx = torch.cat([H[0, :T], x[None], H[0, T + 1:]], dim=0)[None]
        for layer in layers:
            Hx = layer(Hx)
        return Hx[0, T]

    with torch.no_grad():
        true = torch.func.jacrev(through)(H[0, T]).double().cpu().numpy()
    prod = np.eye(H.shape[-1])
    for t in range(model.n_layers):
        prod = in_context_jacobian(model, t, H[t], T).cpu().numpy() @ prod
    return {"true": true, "product": prod}


def per_prompt_final_erank(per_prompt) -> np.ndarray:
    """The final effective rank of each prompt's own product ``J_{L−1}(x_{L−1}) ⋯ J_0(x_0)``
    (``per_prompt``: ``(L, P, d, d)``), against which the product of the means is compared."""
    return funnel_eranks(np.swapaxes(np.asarray(per_prompt), 0, 1))[:, -1]  # prompts lead: (P, L, d, d)


# --- Section 4.8: the claims' verdicts, from the section's results --------------------------------------------


@dataclass
class FunnelEvidence:
    """What section 4.8 decides from: the pre-norm model's results against its twins.

    Attributes:
        trends: :func:`depth_trends` of the trained model and each twin.
        runs: series label → :class:`lib.methods.funnel.BootstrapRun` (the trained one first), with ``funnel`` and
            ``funnel_no_b1`` resampled for every series.
        controls: :func:`twin_control_funnels` ``[1]``, from block 2 (the progressive reading of FG3).
        controls_full: :func:`twin_control_funnels` ``[0]``, over every block (the full product, FG3's reading of
            the abstract).
        coupling: block couplings of :func:`lib.methods.topology.topology_sweep` (columns ``weights``, ``layer``,
            ``depth``, ``r_s``, ``q``).
        sub_blocks: the sub-block couplings (``weights``, ``sub_block`` ``"attention"``/``"MLP"``, ``layer``,
            ``r_s``, ``q``).
        power: :func:`lib.methods.topology.planted_power`'s table (``r_s_mean``, ``power_bh`` per planted effect).
        d: the model's width. ginibre: the real Ginibre complex fraction at ``d``.
        trained: the trained series' label.
    """

    trends: dict[tuple[str, str], TrendTest]
    runs: dict[str, BootstrapRun]
    controls: dict[str, dict[str, Interval]]
    controls_full: dict[str, dict[str, Interval]]
    coupling: pd.DataFrame
    sub_blocks: pd.DataFrame
    power: pd.DataFrame
    d: int
    ginibre: float
    trained: str = "trained"

    @property
    def twins(self) -> list[str]:
        """The twins' series labels, in order."""
        return [s for s in self.runs if s != self.trained]

    def twin_dirs(self, metric: str) -> str:
        """The twins' trend directions of ``metric`` (``"falls"``, ``"rises"``, …), comma-separated."""
        return ", ".join(self.trends[metric, s].direction for s in self.twins)

    def split(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The trained model's rows of a coupling frame (sorted by layer) and the twins' rows."""
        is_tr = frame.weights == self.trained
        return frame[is_tr].sort_values("layer"), frame[~is_tr]


def funnel_readings(ev: FunnelEvidence) -> dict[str, dict[str, object]]:
    """FG3's two readings (:data:`FUNNEL_READINGS`) as measured: reading → ``trained`` (final erank interval),
    ``twins`` (the twins' intervals, same resamples), ``controls`` (the trained model's
    :func:`lib.methods.funnel.control_funnels`, with the Schur-normal / as-measured ``ratio``)."""
    out = {}
    for name, stat, ctrl in zip(FUNNEL_READINGS, ("funnel", "funnel_no_b1"), (ev.controls_full, ev.controls)):
        out[name] = {"trained": ev.runs[ev.trained].interval(stat),
                     "twins": [ev.runs[s].interval(stat) for s in ev.twins],
                     "controls": ctrl[ev.trained], "ratio": ctrl[ev.trained]["Schur-normal / as measured"]}
    return out


JACOBIAN_CLAIMS: tuple[str, ...] = ("FG1", "FG2", "FG3", "FG4")
"""The claims decided from the mean block Jacobians alone (their spectra, trends and funnels), which therefore
have a reading per Jacobian protocol (:data:`PROTOCOLS`); FG5 and FG6 also need the residual graphs."""

PROTOCOLS: dict[str, str] = {
    "single-token": "each block run on the last token alone (the paper's protocol as summarised [secondary])",
    "in context": "the in-context diagonal block ∂h_{l+1}[T]/∂h_l[T] of the real sentence (chapter 6) [ours]",
}
"""The two Jacobian protocols whose readings of FG1–FG4 are co-primary [ours]: the single-token protocol is the
Jacobian of a different function from the one the token meets in its sentence (chapter 6), so neither stands in
for the other (:func:`protocol_verdicts`)."""


def jacobian_claim_verdicts(ev: FunnelEvidence) -> dict[str, str]:
    """FG1–FG4 (:data:`JACOBIAN_CLAIMS`) from one protocol's evidence: FG1 the trend of ``f_C``
    (:func:`trend_verdict`), FG2 those of ``δ_H`` and ``r_rot`` (:func:`combine_verdicts`), FG3 and FG4 the union of
    their two readings (:func:`funnel_readings_verdicts`)."""
    tv = trend_verdicts(ev.trends, ev.trained)
    rd = funnel_readings(ev)
    fr = funnel_readings_verdicts(*((r["trained"], r["twins"], r["ratio"]) for r in rd.values()))
    return {"FG1": tv["f_C"], "FG2": combine_verdicts([tv["delta_H"], tv["r_rot"]]),
            "FG3": fr["FG3"]["union"], "FG4": fr["FG4"]["union"]}


def protocol_verdicts(by_protocol: dict[str, dict[str, str]]) -> dict[str, str]:
    """One verdict per claim from its co-primary readings under several Jacobian protocols [ours].

    The rule is :func:`combine_verdicts` claim by claim, as for FG3's two readings: reproduced under every protocol,
    reproduced; under some (or partly under any), partly reproduced; under none, but present at random init under
    some, not specific to training; else not reproduced.

    Args:
        by_protocol: protocol (e.g. :data:`PROTOCOLS`) → claim → verdict; every protocol must judge the same claims.

    Raises:
        ValueError: no protocol, or protocols that judge different claims.
    """
    if not by_protocol:
        raise ValueError("need the verdicts of at least one protocol")
    claims = [list(v) for v in by_protocol.values()]
    if any(set(c) != set(claims[0]) for c in claims):
        raise ValueError(f"every protocol must judge the same claims, got {dict(zip(by_protocol, claims))}")
    return {c: combine_verdicts([v[c] for v in by_protocol.values()]) for c in claims[0]}


def claim_verdicts(ev: FunnelEvidence, in_context: FunnelEvidence | None = None) -> dict[str, str]:
    """The verdicts on FG1–FG7 (:data:`lib.page.claims.CLAIMS`), each from a tested rule of this module.

    FG1–FG4 are :func:`jacobian_claim_verdicts` of ``ev`` (single-token) and, with ``in_context`` (the same
    statistics of the in-context Jacobians), :func:`protocol_verdicts` of both readings; FG5 and FG6 come from
    ``ev``'s couplings; FG7 is :func:`learned_verdict` of FG1–FG6.
    """
    v = jacobian_claim_verdicts(ev)
    if in_context is not None:
        v = protocol_verdicts({"single-token": v, "in context": jacobian_claim_verdicts(in_context)})
    pw = ev.power.set_index("effect") if "effect" in ev.power.columns else ev.power
    sub_tr, sub_rd = ev.split(ev.sub_blocks)
    attn, mlp = (sub_tr[sub_tr.sub_block == s].sort_values("layer") for s in ("attention", "MLP"))
    op = operator_sign_verdict(attn.r_s, attn.q, mlp.r_s, mlp.q,
                               [g.q for _, g in sub_rd.groupby(["weights", "sub_block"])])
    block_tr, _ = ev.split(ev.coupling)
    v["FG5"] = power_qualified(op, pw.r_s_mean, pw.power_bh)
    v["FG6"] = power_qualified(sign_pattern_verdict(block_tr.r_s, block_tr.q, block_tr.depth), pw.r_s_mean,
                               pw.power_bh)
    v["FG7"] = learned_verdict([v[c] for c in ("FG1", "FG2", "FG3", "FG4", "FG5", "FG6")])
    return v


def verdict_counts(verdicts: dict[str, str]) -> dict[str, int]:
    """How many of section 4.8's claims got each verdict that :func:`claim_verdicts` gives, plus the total
    under ``"claims"``; ``"reproduced"`` counts partial reproductions too. Any other verdict of
    :data:`lib.page.claims.VERDICTS` raises ``ValueError`` (it would be missing from the counts)."""
    vals = list(verdicts.values())
    counted = ("reproduced", "partly reproduced", "not reproduced", "not specific to training",
               "inconclusive (underpowered)")
    other = sorted(set(vals) - set(counted))
    if other:
        raise ValueError(f"verdict_counts counts only {counted}; got {other}")
    return {"claims": len(vals),
            "reproduced": sum(v in ("reproduced", "partly reproduced") for v in vals),
            "not reproduced": vals.count("not reproduced"),
            "not specific to training": vals.count("not specific to training"),
            "inconclusive (underpowered)": vals.count("inconclusive (underpowered)")}


# --- Section 4.9: the paper's models, sized -----------------------------------------------------------------

PAPER_MODELS: tuple[tuple[str, int, int, int, float], ...] = (
    ("meta-llama/Llama-3.1-8B", 4096, 14336, 32, 16.1),
    ("allenai/OLMo-2-1124-7B", 4096, 11008, 32, 14.6),
    ("google/gemma-2-9b", 3584, 14336, 42, 18.5),
    ("meta-llama/Llama-3.2-1B", 2048, 8192, 16, 2.5),
    ("allenai/OLMo-2-0425-1B", 2048, 8192, 16, 3.0),
    ("google/gemma-2-2b", 2304, 9216, 26, 5.2),
    ("meta-llama/Llama-3.1-70B", 8192, 28672, 80, 141.1),
)
"""The paper's models, their smaller siblings and one 70B-class model larger than any one GPU, from their public
configurations: ``(hub id, d, MLP width, layers, weights in bf16 in GB)``."""

GPU_MEMORY_GB = 80.0
"""Memory of the GPU the work table assumes (one H100 or A100 80 GB) [ours]."""


def gpus_needed(weights_gb: float, d: int, gpu_gb: float = GPU_MEMORY_GB) -> int:
    """GPUs of ``gpu_gb`` that hold the bf16 weights with room for the sweep's work on each: 80 % of every GPU for
    weights, and per GPU one float64 mean Jacobian and a float32 batch of 64 (``d × d`` each) beside them."""
    work_gb = (8 + 64 * 4) * d * d / 1e9
    per_gpu = 0.8 * gpu_gb - work_gb
    if per_gpu <= 0:
        raise ValueError(f"a {d}×{d} Jacobian batch does not fit a {gpu_gb:.0f} GB GPU")
    return max(1, math.ceil(weights_gb / per_gpu))


def paper_model_work(models: Sequence[tuple[str, int, int, int, float]] = PAPER_MODELS, prompts: int = 1000,
                     rate: float = 50e12) -> pd.DataFrame:
    """The closed form's matrix-product work (:func:`lib.jacobians.single_token.flops`) for every layer of each model
    at ``prompts`` prompts, and the minutes it takes at an *assumed* sustained ``rate`` (FLOP/s) per GPU: a scale,
    not a measurement. A model larger than one GPU loads sharded (``lib.load_model(..., device_map="auto")``), each
    GPU holding a run of layers (:func:`gpus_needed`); given the residual inputs of one forward pass, every layer's
    Jacobians are independent, so the GPUs work on their own layers at once and the time divides by their number."""
    from lib.jacobians.single_token import flops

    rows = []
    for name, d, d_ff, L, w in models:
        work = flops(d, d_ff, prompts=prompts, layers=L)
        gpus = gpus_needed(w, d)
        rows.append({"model": name, "d": d, "MLP width": d_ff, "layers": L, "weights (bf16, GB)": w,
                     f"GPUs of {GPU_MEMORY_GB:.0f} GB": gpus,
                     f"Jacobian work, {prompts} prompts (PFLOP)": work / 1e15,
                     f"at {rate / 1e12:.0f} TFLOP/s per GPU (min, assumed rate)": work / rate / 60 / gpus})
    return pd.DataFrame(rows)


CPU_DECODERS: tuple[tuple[str, int, int, int], ...] = (
    ("HuggingFaceTB/SmolLM2-135M", 576, 1536, 30),
    ("HuggingFaceTB/SmolLM2-360M", 960, 2560, 32),
    ("allenai/OLMo-2-0425-1B", 2048, 8192, 16),
    ("google/gemma-2-2b", 2304, 9216, 26),
)
"""Small trained decoders of the paper's families, from their public configurations: ``(hub id, d, MLP width,
layers)``. The published site runs chapter 4 on the first on a hosted CPU runner (:func:`cpu_decoder_work`)."""

DECOMPOSITION_CPU_S = 0.072
"""CPU seconds per float64 decomposition of a ``512 × 512`` matrix in chapter 4's bootstrap
(:func:`lib.models.paper.bootstrap_decompositions`), measured on the book's machine at SmolLM2-135M's shape
(d = 576, 30 layers; 35 CPU-s per resample of four models, one protocol) [ours]."""

JACOBIAN_CPU_RATE = 16e9
"""Closed-form FLOPs (:func:`lib.jacobians.single_token.flops`) per CPU second of chapter 4's two Jacobian sweeps
together (single-token with the attention and MLP sub-blocks, and in context), measured on the book's machine at
SmolLM2-135M's shape (2.6 CPU-s per model and prompt) [ours]."""


def cpu_decoder_work(models: Sequence[tuple[str, int, int, int]] = CPU_DECODERS, prompts: int = 16,
                     twins: int = 3, cores: int = 4) -> pd.DataFrame:
    """Chapter 4 on each model of ``models`` and ``twins`` random-init twins on ``prompts`` prompts, on CPUs: the
    prompt-bootstrap resamples it gets (:func:`lib.models.paper.resamples_for_shape`), the float64 decompositions
    they take (thousands of ``512 × 512`` ones), the memory of the per-prompt Jacobians both protocols keep
    (float32), and the time at this machine's measured rates (:data:`DECOMPOSITION_CPU_S`,
    :data:`JACOBIAN_CPU_RATE`): in CPU minutes, and in minutes on ``cores`` cores, where the bootstrap's
    decompositions run one per core (:func:`lib.parallel.map_matrices`) and the Jacobians on one thread."""
    from lib.jacobians.single_token import flops
    from lib.models.paper import bootstrap_decompositions, resamples_for_shape

    rows = []
    for name, d, d_ff, L in models:
        n = 1 + twins
        B = resamples_for_shape(d, L, twins)
        work = (B + 1) * bootstrap_decompositions(d, L, n)
        boot_s, jac_s = work * DECOMPOSITION_CPU_S, n * flops(d, d_ff, prompts=prompts, layers=L) / JACOBIAN_CPU_RATE
        rows.append({"model": name, "d": d, "layers": L, "resamples": B, "decompositions (thousands)": work / 1e3,
                     "per-prompt Jacobians (GB)": 2 * n * L * prompts * d * d * 4 / 1e9,
                     "CPU min": (boot_s + jac_s) / 60, f"min on {cores} cores": (boot_s / cores + jac_s) / 60})
    return pd.DataFrame(rows)


def check_roles(model: SpectralModel, contrast: SpectralModel) -> None:
    """Refuse, with one message, models in the wrong roles of chapter 4's parameters: ``model`` carries the paper's
    claims, which are about blocks whose skip connection passes the residual through (pre-norm, or a norm on the
    sub-block's output: the update is ``J̄ − I``); ``contrast`` is the post-LayerNorm contrast, whose last norm
    follows the skip (the metrics are of ``J̄`` itself).

    Raises:
        InputError: ``model`` is post-LayerNorm, or ``contrast`` is not.
    """
    from lib.errors import InputError

    if model.adapter.norm_placement == "post":
        raise InputError(f"Chapter 4 tests the paper's claims on a pre-norm model, and {model.label} is "
                         "post-LayerNorm: give it as second_model (the post-LN contrast) and a pre-norm model "
                         "(a decoder such as 'book-decoder') as model.")
    if contrast.adapter.norm_placement != "post":
        raise InputError(f"Chapter 4's second_model is the post-LayerNorm contrast, and {contrast.label} is "
                         f"{contrast.adapter.norm_placement}-norm: give a post-LN encoder (such as 'minilm').")
