"""Chapter 3's analysis (``book/03_real_models.md``): real models and their random-init twins, section by section.

What the chapter computes, as frames and verdicts; its charts, tables and the words of its prose are
:mod:`lib.page.real_models`, the own-direction tests of LA7 and LA8 :mod:`lib.chapters.real_models_directions`,
the paper's checkpoint list, the real-model switch and safe loading :mod:`lib.models.paper`, and the statistics
chapters 1, 3 and 6 share (token states, eigen-bases, γ_t / ρ_t, their random-subspace nulls)
:mod:`lib.methods.alignment`.

* 3.1, spectra: :func:`is_shared` and :func:`unique_layer_matrices` (``(1, d, d)`` for a shared layer, else
  ``(L, d, d)``), :func:`eigvals_table` / :func:`summary_from_eigvals` (one summary row per layer),
  :func:`eigen_bases_table` and :func:`random_albert_spectra` (ALBERT v2 at random initialization, offline).
* 3.2, one shared layer iterated: :func:`shared_convergence` (distance of the tokens to ``v₁`` or its plane and to
  ``span{v₁, v₂}`` per step, against the power-method prediction ``C r^t``) with :func:`fitted_rate_interval`
  (the fitted rate and its bootstrap interval over prompts); :func:`shared_layer_runs` runs them
  (:class:`SharedRun`) and :func:`shared_runs_frame` stacks them for a chart.
* 3.3, layer-varying models: :func:`layer_varying` computes γ_t / ρ_t with intervals, chance levels and each layer's
  own null test (random subspaces of the layer's basis dimension, BH across layers, :data:`FDR`) for the two
  trajectory sources of :data:`TRAJECTORIES` (the simplified model and the real forward pass); :func:`analyse`
  wraps it per model (:class:`Analysis`), :func:`special_token_results` restricts it to ``[CLS]``/``[SEP]``;
  :func:`layer_range`, :func:`null_range`, :func:`compare_to_twins` and :func:`range_position` reduce its tables
  to the numbers a page reports (trained vs random init). The build-up toward one direction with depth (LA9):
  :func:`fixed_direction_profile` (with its equivalence test) and :func:`depth_profiles`.
* Verdict rules: :func:`twin_verdict`, :func:`build_up_status`, :func:`build_up_verdict` and
  :func:`combine_verdicts` (level :data:`ALPHA`).
* 3.5, the paper's checkpoints: :func:`run_paper_model` runs the whole analysis of one checkpoint and returns
  :class:`PaperModelRun`, or a message if it cannot be loaded or analysed; with ``strict=True`` (chapter 3 with
  the switch on: the publishing build) it raises :class:`lib.errors.RealModelRunError` instead.

Conventions: token states are :class:`lib.methods.alignment.TokenStates` (``(T+1, N, d)`` float64, prompts
concatenated along the token axis); layers are 1-based in every table; a result row's ``variant`` is
``"<who> · <source>"`` with ``who`` ``"trained"`` or ``"random init s<seed>"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd
import torch

from lib.config import REAL_MODELS_ENV
from lib.errors import RealModelRunError
from lib.linalg import spectra
from lib.linalg.power import distance_to_subspace
from lib.methods import alignment as als
from lib.methods.alignment import (
    EigenBases,
    TokenStates,
    baseline_subspace,
    basis_dims,
    prompt_states,
    prompt_sums,
    random_subspaces,
    simplified_states,
    step_alignment,
)
from lib.methods.layer_spectra import summary_table
from lib.models import load_model
from lib.models.paper import MODEL_LIST_ENV, ModelSpec, estimate_seconds, load_failure_message, random_albert
from lib.models.twins import series_label
from lib.stats import bootstrap_draws, bootstrap_ratio, empirical_p, equivalence_test

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = [
    "ALPHA",
    "BUILD_UP_MARGIN",
    "FDR",
    "NULL_TEST_COLUMNS",
    "TRAJECTORIES",
    "AlbertSpectra",
    "Analysis",
    "LayerRange",
    "LayerVarying",
    "NullRange",
    "PaperModelRun",
    "SharedRun",
    "TwinComparison",
    "analyse",
    "build_up_status",
    "build_up_verdict",
    "combine_verdicts",
    "compare_to_twins",
    "depth_profiles",
    "eigen_bases_table",
    "eigvals_table",
    "fit_window",
    "fitted_rate_interval",
    "fixed_direction_profile",
    "is_shared",
    "layer_range",
    "layer_varying",
    "layers_where",
    "null_range",
    "random_albert_spectra",
    "range_position",
    "run_estimate",
    "run_paper_model",
    "select_source",
    "series_label",
    "shared_convergence",
    "shared_layer_runs",
    "shared_runs_frame",
    "special_token_results",
    "summary_from_eigvals",
    "twin_verdict",
    "unique_layer_matrices",
]


# -- spectra (section 3.1) -----------------------------------------------------------------------------------
def is_shared(model: SpectralModel) -> bool:
    """Whether every layer runs the same block (ALBERT v2: one shared layer)."""
    return len({id(b) for b in model.blocks}) == 1


def unique_layer_matrices(model: SpectralModel) -> torch.Tensor:
    """``F_t`` of every *distinct* block: ``(1, d, d)`` for a shared-weight model, else ``(L, d, d)``."""
    return model.layer(0).attention.layer_matrix()[None] if is_shared(model) else model.layer_matrices()


def eigvals_table(F: Any, label: str) -> tuple[np.ndarray, pd.DataFrame]:
    """Eigenvalues only (no eigenvectors, about 3× cheaper) and a per-layer summary table.

    Returns:
        ``(eigvals (L, d) complex128 sorted, table)``; see :func:`summary_from_eigvals` for the table.
    """
    lams = np.atleast_2d(spectra.eigvals(F))
    return lams, summary_from_eigvals(lams, label, d=lams.shape[1])


def summary_from_eigvals(lams: Any, label: str, *, d: int) -> pd.DataFrame:
    """:func:`lib.methods.layer_spectra.summary_table` plus the width ``d`` (leading eigenvalues suffice)."""
    table = summary_table(lams, label)
    table.insert(2, "d", d)
    return table


def eigen_bases_table(eb: EigenBases, label: str) -> pd.DataFrame:
    """One display row per layer of :class:`lib.methods.alignment.EigenBases`.

    Columns: ``model`` (``label``), ``layer`` (1-based), ``λ1`` (text, 4 decimals), ``λ1 complex``,
    ``gap ratio`` (``|λ_next|/|λ_1|``) and ``span{v1,v2} ratio`` (the rate toward ``span{v_1, v_2}``).
    """
    return pd.DataFrame({"model": label, "layer": np.arange(1, eb.n_layers + 1),
                         "λ1": [f"{z:.4f}" for z in eb.lambda1], "λ1 complex": eb.lambda1_complex,
                         "gap ratio": eb.gap_ratio, "span{v1,v2} ratio": eb.subspace_ratio})


class AlbertSpectra(NamedTuple):
    """What :func:`random_albert_spectra` returns.

    Attributes:
        table: one :func:`summary_from_eigvals` row per size (``layer`` is ``"shared"``), in the order computed.
        leading: labels of the sizes of which only the leading ``k`` eigenvalues were computed.
        residual: the largest residual of those leading eigenpairs (:func:`lib.linalg.topk_eig.topk_eig`).
    """

    table: pd.DataFrame
    leading: tuple[str, ...]
    residual: float


def random_albert_spectra(seed: int = 0, *, full: Sequence[str] = ("base", "large", "xlarge"),
                          leading: Sequence[str] = ("xxlarge",), k: int = 4) -> AlbertSpectra:
    """The shared layer's spectrum of ALBERT v2 at random initialization, one size after the other (offline).

    The sizes in ``full`` get all their eigenvalues (float64 LAPACK, :func:`eigvals_table`); those in
    ``leading`` (xxlarge, ``d = 4096``, whose full eig would dominate a CPU build) only the ``k`` leading ones
    by the block Krylov–Schur solver of :func:`lib.linalg.topk_eig.topk_eig` (float64 Rayleigh–Ritz), which is enough
    for the gap ratio (:func:`lib.methods.layer_spectra.summary_table`). Each model is freed before the next loads.
    """
    from lib.linalg.topk_eig import topk_eig

    tables, labels, residual = [], [], 0.0
    for size in full:
        m = random_albert(size, seed=seed)
        tables.append(eigvals_table(unique_layer_matrices(m), m.label)[1].assign(layer="shared"))
        del m
    for size in leading:
        m = random_albert(size, seed=seed)
        top = topk_eig(unique_layer_matrices(m), k)
        tables.append(summary_from_eigvals(top.eigvals.numpy(), m.label, d=m.d_model).assign(layer="shared"))
        labels.append(m.label)
        residual = max(residual, float(top.residuals.max().item()))
        del m
    return AlbertSpectra(pd.concat(tables, ignore_index=True), tuple(labels), residual)


# -- shared weights: iterating one layer (section 3.2) -------------------------------------------------------
def fit_window(distance: np.ndarray, fit: tuple[int, int], floor: float = 1e-9) -> tuple[int, int]:
    """The steps a rate is fitted over: ``fit`` while it holds at least two distances above ``floor``; else the same
    number of steps ending at the last step whose distance is above ``floor`` (starting at step 1 at the earliest).

    A layer whose tokens reach the round-off floor before ``fit[1]`` (a small gap ratio: ``0.3^20 ≈ 3e-11``) has
    converged faster than the window can see; its rate is then read where the distance is still measurable [ours].

    Args:
        distance: ``(T+1,)`` the mean distance per step (step 0 first).
        fit: the first and last step asked for.

    Raises:
        ValueError: fewer than two steps from step 1 on have a distance above ``floor``.
    """
    e = np.asarray(distance, dtype=np.float64)
    start, stop = fit
    above = np.flatnonzero((e > floor) & np.isfinite(e))
    if ((above >= start) & (above <= stop)).sum() >= 2:
        return start, stop
    last = int(above[above <= stop].max()) if (above <= stop).any() else 0
    if last < 2:
        raise ValueError(f"the distance is at the floor ({floor:g}) from step 1 on: no rate can be fitted")
    return max(1, last - (stop - start)), last


def fitted_rate_interval(
    per_prompt: np.ndarray, counts: np.ndarray, fit: tuple[int, int], *, floor: float = 1e-9,
    n_boot: int = 200, ci: float = 0.95, seed: int = 0,
) -> tuple[float, float, float]:
    """Fitted per-step rate of a mean distance curve and its percentile bootstrap interval over prompts.

    The rate is ``exp`` of the least-squares slope of ``log e_t`` over steps ``fit[0]..fit[1]`` (points at or
    below ``floor`` left out), as :func:`lib.linalg.power.fitted_ratio`, with ``e_t`` the token-weighted mean
    distance; each bootstrap resample draws prompts with replacement and refits. Vectorised over resamples.

    Args:
        per_prompt: ``(T+1, P)`` per-prompt sums of the per-token distance.
        counts: ``(P,)`` tokens per prompt.
        fit: first and last step of the fit.

    Returns:
        ``(rate, lo, hi)``.
    """
    sums, counts = np.asarray(per_prompt, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    start, stop = fit
    rng = np.random.default_rng(seed)
    W = np.zeros((n_boot + 1, counts.size))
    W[0] = 1.0  # the estimate itself, then the resamples
    np.add.at(W, (np.arange(1, n_boot + 1)[:, None], rng.integers(0, counts.size, (n_boot, counts.size))), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        e = (sums[start:stop + 1] @ W.T) / (W @ counts)  # (steps, n_boot + 1)
    t = np.arange(start, start + e.shape[0], dtype=np.float64)[:, None]
    keep = (e > floor) & np.isfinite(e)
    y = np.where(keep, np.log(np.where(keep, e, 1.0)), 0.0)
    n, st, sy = keep.sum(0), (keep * t).sum(0), y.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = (n * (keep * t * y).sum(0) - st * sy) / (n * (keep * t * t).sum(0) - st**2)
    slope[n < 2] = np.nan
    if np.isnan(slope[0]):
        raise ValueError("need at least two distances above the floor in the fit window to fit a rate")
    q = (1 - ci) / 2
    lo, hi = np.nanquantile(np.exp(slope[1:]), [q, 1 - q]) if n_boot else (np.nan, np.nan)
    return float(np.exp(slope[0])), float(lo), float(hi)


def shared_convergence(
    ts: TokenStates, eb: EigenBases, *, anchor: int = 20, n_boot: int = 200, seed: int = 0,
    fit: tuple[int, int] | None = None,
) -> pd.DataFrame:
    """Distance of iterated tokens to the principal direction (or plane) and to ``span{v_1, v_2}``, per step.

    For a shared layer (``eb`` of one layer), the power-method picture predicts that the sine of the
    angle between a token and its target shrinks like ``C · r^t`` with ``r = gap_ratio`` (target
    ``v_1``, or the plane of a complex pair) or ``r = subspace_ratio`` (target ``span{v_1, v_2}``)
    [paper: rates set by the gap; form ours, chapter 2]. ``C`` is fitted at step ``anchor`` (after the tokens of
    a prompt have had time to reach consensus), so only the *slope* is a prediction.

    Returns:
        Long format: ``step``, ``target``, ``alignment`` (mean ``a``) with bootstrap ``lo``/``hi`` over
        prompts, ``distance`` (mean sine of the angle to the target, ``sqrt(1 − a²)``), ``predicted`` (``C r^t``),
        ``rate`` (``r``) and ``chance`` (the chance level ``c_{d,k}`` of the target's dimension); with ``fit``
        (first and last step), also ``fitted``, ``fitted_lo``, ``fitted_hi``: the rate fitted to ``distance``
        and its bootstrap interval over prompts (:func:`fitted_rate_interval`), over the steps ``fit_start`` to
        ``fit_stop`` (:func:`fit_window`: ``fit``, or earlier steps where the distance reached the floor first).
    """
    if eb.n_layers != 1:
        raise ValueError("shared_convergence needs the bases of one shared layer (use EigenBases.layer(t))")
    counts = np.bincount(ts.prompt, minlength=ts.n_prompts).astype(np.float64)
    steps = np.arange(ts.steps + 1)
    frames = []
    targets = (
        ("plane of λ₁, λ̄₁" if eb.lambda1_complex[0] else "v₁", eb.v1[0], float(eb.gap_ratio[0]), int(eb.k1[0])),
        ("span{v₁, v₂}", eb.v12[0], float(eb.subspace_ratio[0]), int(eb.k12[0])),
    )
    for name, B, rate, k in targets:
        a = step_alignment(ts, B)  # (T+1, N)
        dist = distance_to_subspace(ts.states, B)  # ‖(I − BBᵀ)x‖/‖x‖, no cancellation near 0
        est, lo, hi = bootstrap_ratio(prompt_sums(a, ts.prompt, ts.n_prompts), counts, n_boot=n_boot, seed=seed)
        dmean = prompt_sums(dist, ts.prompt, ts.n_prompts).sum(-1) / counts.sum()
        a_k = min(anchor, ts.steps)
        frame = pd.DataFrame({
            "step": steps, "target": name, "alignment": est, "lo": lo, "hi": hi, "distance": dmean,
            "predicted": dmean[a_k] * rate ** (steps - a_k), "rate": rate, "chance": baseline_subspace(ts.d, k),
        })
        if fit is not None:
            per_prompt = prompt_sums(dist, ts.prompt, ts.n_prompts)
            window = fit_window(dmean, fit)
            frame["fitted"], frame["fitted_lo"], frame["fitted_hi"] = fitted_rate_interval(
                per_prompt, counts, window, n_boot=n_boot, seed=seed)
            frame["fit_start"], frame["fit_stop"] = window
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


@dataclass(frozen=True)
class SharedRun:
    """One layer of a model iterated as a shared layer (:func:`shared_layer_runs`).

    Attributes:
        series: :func:`series_label` of the model. label: the model's label. layer: the layer, 1-based.
        convergence: its :func:`shared_convergence` rows (with the fitted rates).
    """

    series: str
    label: str
    layer: int
    convergence: pd.DataFrame


def shared_layer_runs(
    models: Sequence[Any], x0: Sequence[Any], special: Sequence[Any], *, steps: int, layers: Sequence[int] = (0, 1),
    anchor: int = 20, fit: tuple[int, int] = (20, 50), bases: Sequence[EigenBases | None] | None = None,
) -> list[SharedRun]:
    """Iterate each of ``layers`` (0-based) of each model ``steps`` times in the simplified model (section 3.2).

    Every run starts from the same token states ``x0`` (one ``(n_p, d)`` array per prompt, e.g. the trained
    model's embeddings) with the special-token masks ``special``, and measures the convergence of the content
    tokens to the layer's principal direction (or plane) and to ``span{v₁, v₂}``
    (:func:`shared_convergence`, constant fitted at step ``anchor``, rates fitted over
    ``fit``). ``bases[i]`` may hold the :class:`EigenBases` of model ``i`` (else they are computed).
    """
    runs = []
    for i, model in enumerate(models):
        eb = bases[i] if bases is not None and bases[i] is not None else als.eigen_bases(model.layer_matrices())
        for t in layers:
            ts = simplified_states(model.layer(t).attention, x0, steps=steps, special=special)
            conv = shared_convergence(ts.select("content"), eb.layer(t), anchor=anchor, fit=fit)
            runs.append(SharedRun(series_label(model), model.label, t + 1, conv))
    return runs


def shared_runs_frame(runs: Sequence[SharedRun]) -> pd.DataFrame:
    """The runs' convergence rows in one frame, with ``series`` and ``layer iterated`` columns (for a chart)."""
    return pd.concat([r.convergence.assign(series=r.series, **{"layer iterated": r.layer}) for r in runs],
                     ignore_index=True)


# -- layer-varying models: γ_t and ρ_t with their nulls (section 3.3) ----------------------------------------
TRAJECTORIES: tuple[str, str] = ("simplified", "real forward pass")
"""The two trajectory sources of :func:`layer_varying`, in the order its tables list them."""

NULL_TEST_COLUMNS: tuple[str, ...] = (
    "gamma_null_lo", "gamma_null_hi", "gamma_ratio_null_lo", "gamma_ratio_null_hi", "rho_null_lo", "rho_null_hi",
    "p_gamma", "q_gamma", "p_rho", "q_rho", "tilt_null_lo", "tilt_null_hi", "p_tilt", "q_tilt",
)
"""The columns of :func:`lib.methods.alignment.random_null` that :func:`layer_varying` copies into its results."""

FDR = 0.05
"""The false discovery rate at which a layer "beats its null" (Benjamini–Hochberg ``q < FDR``)."""


class LayerVarying(NamedTuple):
    """What :func:`layer_varying` returns; unpacks as ``(results, null, states)``.

    Attributes:
        results: rows of :func:`lib.methods.alignment.gamma_rho` (one per layer and source, sources in
            :data:`TRAJECTORIES` order, content tokens) with a ``variant`` column
            ``"trained · <source>"`` or ``"random init s<seed> · <source>"``, and the null-test columns
            :data:`NULL_TEST_COLUMNS` of the layer's own null merged in.
        null: rows of :func:`lib.methods.alignment.random_null`, same layers and variants.
        states: the :class:`TokenStates` of each source (all tokens, special ones included), keyed by source.
    """

    results: pd.DataFrame
    null: pd.DataFrame
    states: dict[str, TokenStates]


def layer_varying(
    model: Any, H: Sequence[Any], S: Sequence[Any], eb: EigenBases, *, seed: int = 0, n_null: int = 1000
) -> LayerVarying:
    """γ_t / ρ_t with bootstrap intervals, chance levels and each layer's own null test, for both
    trajectory sources (reconstructed definitions [ours], :mod:`lib.methods.alignment`).

    Sources: ``"simplified"`` runs every layer's own weights in the FFN-free, L2-normalized layer of
    :mod:`lib.theory.dynamics` (radius ``sqrt(d)``, no residual) from the real embedding output ``H[p][0]``;
    ``"real forward pass"`` is the residual stream ``H`` itself. Statistics use content tokens only.

    Args:
        model: a loaded :class:`SpectralModel` with ``L`` layers.
        H: per prompt, the residual stream ``(L+1, n_p, d)`` (:func:`prompt_states`).
        S: per prompt, the special-token mask ``(n_p,)``.
        eb: :class:`lib.methods.alignment.EigenBases` of the ``L`` layer matrices.
        seed: seed of the bootstrap over prompts and of the random subspaces.
        n_null: random subspaces per layer in the null (:func:`lib.methods.alignment.random_null`).
    """
    weights = [model.layer(t).attention for t in range(model.n_layers)]
    runs = {
        "simplified": simplified_states(weights, [h[0] for h in H], special=S, label=model.label),
        "real forward pass": TokenStates.from_trajectories(H, S, label=model.label),
    }
    who = f"random init s{model.seed}" if model.random_init else "trained"
    res, nulls = [], []
    for source, ts in runs.items():
        content = ts.select("content")
        null = als.random_null(content, eb, m=n_null, seed=seed).assign(variant=f"{who} · {source}")
        r = als.gamma_rho(content, eb, seed=seed).assign(variant=f"{who} · {source}")
        res.append(r.merge(null[["layer", *NULL_TEST_COLUMNS]], on="layer", how="left"))
        nulls.append(null)
    return LayerVarying(pd.concat(res, ignore_index=True), pd.concat(nulls, ignore_index=True), runs)


def select_source(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """The rows of a :func:`layer_varying` table (``results`` or ``null``) of trajectory source ``source``."""
    if source not in TRAJECTORIES:
        raise ValueError(f"source must be one of {TRAJECTORIES}, got {source!r}")
    return frame[frame.variant.str.endswith(source)]


def layers_where(r: pd.DataFrame, mask: pd.Series) -> tuple[int, ...]:
    """The 1-based layers of the rows of ``r`` where ``mask`` holds."""
    return tuple(int(x) for x in r.layer[mask])


@dataclass(frozen=True)
class NullRange:
    """Extremes of a :func:`lib.methods.alignment.random_null` table, over all its rows (layers and variants).

    Attributes:
        rho_lo, rho_hi: the lowest 2.5% and highest 97.5% point of the layers' ρ_t null distributions.
        gamma_ratio_lo, gamma_ratio_hi: the same for γ_t / chance (1 for isotropic states).
    """

    rho_lo: float
    rho_hi: float
    gamma_ratio_lo: float
    gamma_ratio_hi: float


def null_range(null: pd.DataFrame) -> NullRange:
    """:class:`NullRange` of the rows of :func:`lib.methods.alignment.random_null` (each row divided by its own
    chance level)."""
    return NullRange(float(null.rho_null_lo.min()), float(null.rho_null_hi.max()),
                     float(null.gamma_ratio_null_lo.min()), float(null.gamma_ratio_null_hi.max()))


@dataclass(frozen=True)
class LayerRange:
    """Extremes and null-test counts over the layers of one trajectory source (one model, or several pooled).

    Attributes:
        layers: number of rows (layers, times models if pooled).
        gamma_ratio_min, gamma_ratio_max: smallest and largest ``γ_t / c_{d,k_t}`` (each layer's own chance level).
        rho_min, rho_max: smallest and largest ``ρ_t``; rho_min_layer: the (1-based) layer of the smallest
            (the first such row).
        gamma_beat, rho_beat: the rows whose γ_t (ρ_t) beats the layer's own null at FDR 5%
            (``q < FDR``), as 1-based layer numbers.
        tilt_beat: the same for the tilt Δγ_t (``()`` where the results carry no test of the tilt).
    """

    layers: int
    gamma_ratio_min: float
    gamma_ratio_max: float
    rho_min: float
    rho_max: float
    rho_min_layer: int
    gamma_beat: tuple[int, ...]
    rho_beat: tuple[int, ...]
    tilt_beat: tuple[int, ...] = ()


def layer_range(results: pd.DataFrame, source: str) -> LayerRange:
    """:class:`LayerRange` of the ``source`` rows of ``results`` (:attr:`LayerVarying.results`, or several
    concatenated; their index may repeat)."""
    r = select_source(results, source).reset_index(drop=True)
    return LayerRange(
        layers=len(r),
        gamma_ratio_min=float(r.gamma_ratio.min()), gamma_ratio_max=float(r.gamma_ratio.max()),
        rho_min=float(r.rho.min()), rho_max=float(r.rho.max()),
        rho_min_layer=int(r.layer.iloc[np.argmin(r.rho)]),
        gamma_beat=layers_where(r, r.q_gamma < FDR), rho_beat=layers_where(r, r.q_rho < FDR),
        tilt_beat=layers_where(r, r.q_tilt < FDR) if "q_tilt" in r else (),
    )


def range_position(x: float, xs: Sequence[float]) -> str:
    """``"above"`` if ``x > max(xs)``, ``"below"`` if ``x < min(xs)``, else ``"within"`` (ends included)."""
    if len(xs) == 0:
        raise ValueError("xs is empty: need at least one value to compare with")
    return "above" if x > max(xs) else ("below" if x < min(xs) else "within")


@dataclass(frozen=True)
class TwinComparison:
    """A trained model against its random-init twins for one trajectory source.

    Attributes:
        source: the trajectory source (one of :data:`TRAJECTORIES`).
        trained_gamma: mean over layers of ``γ_t / c_{d,k_t}``; twin_gamma: the same per twin.
        gamma_where: ``"above"``, ``"within"`` or ``"below"`` the twins' range
            (:func:`range_position`).
        trained_rho, twin_rho, rho_where: the same for the mean ``ρ_t``.
        gamma_layers_above, rho_layers_above: layers whose trained value lies above all the twins' values
            *of the same layer* (with three twins, chance alone puts a layer there one time in four).
        trained_gamma_beat, twin_gamma_beat: layers beating their own null at FDR 5% (γ_t), trained and per twin.
        trained_rho_beat, twin_rho_beat: the same for ρ_t.
    """

    source: str
    trained_gamma: float
    twin_gamma: tuple[float, ...]
    gamma_where: str
    trained_rho: float
    twin_rho: tuple[float, ...]
    rho_where: str
    gamma_layers_above: tuple[int, ...] = ()
    rho_layers_above: tuple[int, ...] = ()
    trained_gamma_beat: int = 0
    twin_gamma_beat: tuple[int, ...] = ()
    trained_rho_beat: int = 0
    twin_rho_beat: tuple[int, ...] = ()

    @property
    def learned(self) -> bool:
        """Whether training raises both means above every twin."""
        return self.gamma_where == "above" and self.rho_where == "above"


def compare_to_twins(trained: pd.DataFrame, twins: Sequence[pd.DataFrame], source: str) -> TwinComparison:
    """:class:`TwinComparison` of the trained model's :attr:`LayerVarying.results` against each twin's
    (the same prompts, tokens and layers; layers are matched by their number)."""
    tr = select_source(trained, source).set_index("layer")
    tws = [select_source(r, source).set_index("layer") for r in twins]

    def above(col: str) -> tuple[int, ...]:
        if not tws:
            return ()
        top = pd.concat([t[col] for t in tws], axis=1).max(axis=1)
        return tuple(int(x) for x in tr.index[tr[col] > top.reindex(tr.index)])

    def beat(r: pd.DataFrame, col: str) -> int:
        return int((r[col] < FDR).sum()) if col in r else 0

    tr_g, tr_r = float(tr.gamma_ratio.mean()), float(tr.rho.mean())
    tw_g = tuple(float(t.gamma_ratio.mean()) for t in tws)
    tw_r = tuple(float(t.rho.mean()) for t in tws)
    return TwinComparison(
        source, tr_g, tw_g, range_position(tr_g, tw_g), tr_r, tw_r, range_position(tr_r, tw_r),
        gamma_layers_above=above("gamma_ratio"), rho_layers_above=above("rho"),
        trained_gamma_beat=beat(tr, "q_gamma"), twin_gamma_beat=tuple(beat(t, "q_gamma") for t in tws),
        trained_rho_beat=beat(tr, "q_rho"), twin_rho_beat=tuple(beat(t, "q_rho") for t in tws),
    )


@dataclass(frozen=True)
class Analysis:
    """Section 3.3's analysis of one model (:func:`analyse`): γ_t / ρ_t with their nulls, for both sources.

    Attributes:
        model: the :class:`SpectralModel`. bases: its :class:`EigenBases`.
        results, null, states: :func:`layer_varying`'s three parts.
    """

    model: Any
    bases: EigenBases
    results: pd.DataFrame
    null: pd.DataFrame
    states: dict[str, TokenStates]

    @property
    def who(self) -> str:
        """The first part of the rows' ``variant``: ``"trained"`` or ``"random init s<seed>"``."""
        return f"random init s{self.model.seed}" if self.model.random_init else "trained"


def analyse(model: Any, texts: Sequence[str], *, n_null: int = 1000, seed: int = 0, H: Sequence[Any] | None = None,
            S: Sequence[Any] | None = None, bases: EigenBases | None = None, batched: bool = False) -> Analysis:
    """:func:`layer_varying` of ``model`` on ``texts``, reusing its forward passes ``H``, ``S``
    (:func:`prompt_states`, ``batched`` passed on) and eigen-bases where they were computed before."""
    if H is None or S is None:
        H, S = prompt_states(model, texts, batched=batched)
    eb = bases if bases is not None else als.eigen_bases(model.layer_matrices())
    return Analysis(model, eb, *layer_varying(model, H, S, eb, seed=seed, n_null=n_null))


def special_token_results(analysis: Analysis, seed: int = 0) -> pd.DataFrame:
    """γ_t and ρ_t of ``[CLS]``/``[SEP]`` only, per source (:func:`lib.methods.alignment.gamma_rho`), with ``variant``
    ``"<who> · <source> · [CLS]/[SEP] only"``."""
    return pd.concat([als.gamma_rho(ts.select("special"), analysis.bases, seed=seed).assign(
        variant=f"{analysis.who} · {source} · [CLS]/[SEP] only") for source, ts in analysis.states.items()])


# -- build-up toward one direction with depth (section 3.3, LA9) ---------------------------------------------
BUILD_UP_MARGIN = 0.5
"""LA9's equivalence margin δ in units of the chance level ``c_{d,k}`` of the fixed basis [ours]: "no build-up"
means the build-up's excess over its null lies within ``±BUILD_UP_MARGIN · c_{d,k}`` (a verdict rule, stated
in chapter 3's prose)."""


def fixed_direction_profile(
    ts: TokenStates, basis: np.ndarray, *, m: int = 1000, n_boot: int = 1000, seed: int = 0, ci: float = 0.95,
    chunk: int = 100, margin_chance: float = BUILD_UP_MARGIN,
) -> pd.DataFrame:
    """Alignment of the tokens at every depth with one *fixed* basis ``(d, k)``: does it build up with depth?

    Per step ``t = 0..T``: the token-weighted mean ``a(x(t), B)`` with a bootstrap interval over prompts,
    its chance level ``c_{d,k}``, the ratio, and the central ``ci`` range of the same mean against ``m``
    uniformly random ``k``-dimensional subspaces (one set of draws shared by all steps). ``build_up`` is
    the mean per-token change ``a(x(T−1), B) − a(x(0), B)`` from the input of the first layer to the
    input of the last one, with its bootstrap interval over prompts (``build_up_lo`` / ``_hi``; the same
    in every row). The last step is left out of ``build_up`` because a basis taken from the last layer
    is tilted toward by that layer itself. The same change for each random subspace gives the null of
    the build-up (anisotropic states drift with depth whatever the direction): its central ``ci`` range
    ``build_up_null_lo`` / ``_hi`` and the one-sided p-value ``p_build_up`` (:func:`empirical_p`).
    ``chunk`` random subspaces are projected at a time (float32, as in :func:`lib.methods.alignment.null_draws`).

    An absence of build-up is tested, not assumed: the two one-sided tests of :func:`equivalence_test` ask
    whether the build-up's excess over the null's median, ``build_up − median(null)``, lies within
    ``±δ`` with ``δ = margin_chance · c_{d,k}`` (a margin in units of the chance level [ours]), judged by the
    build-up's bootstrap draws over prompts.

    Returns:
        Columns ``step``, ``alignment``, ``lo``, ``hi``, ``k``, ``chance``, ``ratio``, ``ratio_lo``,
        ``ratio_hi``, ``null_ratio_lo``, ``null_ratio_hi``, ``build_up``, ``build_up_lo``, ``build_up_hi``,
        ``build_up_null_lo``, ``build_up_null_hi``, ``p_build_up``; the equivalence test's ``build_up_null_mid``
        (the null's median), ``excess`` (build-up minus it), ``excess_lo`` / ``excess_hi`` (its 90% bootstrap
        interval), ``margin`` (δ) and ``p_equivalent`` (TOST p: below 0.05 means "no build-up beyond the null,
        within ±δ").
    """
    B = spectra.as_float64(basis)
    k = int(basis_dims(B))
    B = B[:, np.linalg.norm(B, axis=0) > 0.5]
    chance = baseline_subspace(ts.d, k)
    counts = np.bincount(ts.prompt, minlength=ts.n_prompts).astype(np.float64)
    a = step_alignment(ts, B)  # (T+1, N)
    est, lo, hi = bootstrap_ratio(prompt_sums(a, ts.prompt, ts.n_prompts), counts, n_boot=n_boot, ci=ci, seed=seed)
    last = max(ts.steps - 1, 0)
    bu_sums = prompt_sums(a[last] - a[0], ts.prompt, ts.n_prompts)
    bu, bu_lo, bu_hi = bootstrap_ratio(bu_sums, counts, n_boot=n_boot, ci=ci, seed=seed)
    bu_boot = bootstrap_draws(bu_sums, counts, n_boot=max(n_boot, 1), seed=seed)  # the same resamples
    X = (ts.states / np.linalg.norm(ts.states, axis=-1, keepdims=True)).astype(np.float32)  # as in null_draws
    rng = np.random.default_rng(seed)
    null = np.empty((ts.steps + 1, m))
    for j in range(0, m, chunk):
        c = min(chunk, m - j)
        Q = random_subspaces(ts.d, k, c, rng).transpose(1, 0, 2).reshape(ts.d, c * k).astype(np.float32)
        P = (X @ Q).reshape(*X.shape[:2], c, k)
        null[:, j : j + c] = np.sqrt(np.einsum("tnck,tnck->tnc", P, P)).mean(axis=1, dtype=np.float64)
    q = (1 - ci) / 2
    n_lo, n_hi = np.quantile(null, [q, 1 - q], axis=1)
    null_bu = null[last] - null[0]  # the same change for each random subspace: (m,)
    bu_null_lo, bu_null_hi = np.quantile(null_bu, [q, 1 - q])
    mid = float(np.median(null_bu))
    eq = equivalence_test(float(bu), bu_boot, mid, margin_chance * chance)
    return pd.DataFrame({
        "step": np.arange(ts.steps + 1), "alignment": est, "lo": lo, "hi": hi, "k": k, "chance": chance,
        "ratio": est / chance, "ratio_lo": lo / chance, "ratio_hi": hi / chance,
        "null_ratio_lo": n_lo / chance, "null_ratio_hi": n_hi / chance,
        "build_up": float(bu), "build_up_lo": float(bu_lo), "build_up_hi": float(bu_hi),
        "build_up_null_lo": bu_null_lo, "build_up_null_hi": bu_null_hi,
        "p_build_up": float(empirical_p(np.array([bu]), null_bu[None])[0]),
        "build_up_null_mid": mid, "excess": eq.difference, "excess_lo": eq.lo, "excess_hi": eq.hi,
        "margin": eq.margin, "p_equivalent": eq.p,
    })


def depth_profiles(analyses: Sequence[Analysis], *, m: int = 1000, seed: int = 0,
                   margin_chance: float = BUILD_UP_MARGIN) -> pd.DataFrame:
    """Section 3.3's build-up test for each model and source: the content tokens' alignment at every depth with
    the model's *last* layer's principal direction (:func:`fixed_direction_profile`, equivalence margin
    ``margin_chance`` chance levels), with ``variant`` (``"<who> · <source>"``), ``who`` and ``source`` columns."""
    profiles = []
    for a in analyses:
        for source, ts in a.states.items():
            prof = fixed_direction_profile(ts.select("content"), a.bases.v1[-1], m=m, seed=seed,
                                           margin_chance=margin_chance)
            profiles.append(prof.assign(variant=f"{a.who} · {source}", who=a.who, source=source))
    return pd.concat(profiles, ignore_index=True)


# -- verdict rules -------------------------------------------------------------------------------------------
ALPHA = 0.05
"""The level of the model-wide tests (own direction against the other layers', against the twins' ``v₁``; TOST)."""


def twin_verdict(n_trained: int, n_twins: Sequence[int], n_layers: int) -> str:
    """A claim's verdict from the null-test counts (layers beating their own null at FDR 5%) of the trained
    model and of each twin: "not reproduced" (no trained layer), "not specific to training" (a twin does as
    well), else "reproduced" (every layer) or "partly reproduced"."""
    if n_trained == 0:
        return "not reproduced"
    if n_twins and max(n_twins) >= n_trained:
        return "not specific to training"
    return "reproduced" if n_trained == n_layers else "partly reproduced"


def build_up_status(row: Any) -> str:
    """One build-up test (a row of :func:`fixed_direction_profile`): ``"builds up"`` (beats
    the random-subspace null, one-sided p < :data:`ALPHA`), ``"none"`` (equivalent to the null within its margin,
    TOST p < :data:`ALPHA`) or ``"inconclusive"`` (neither)."""
    if row.p_build_up < ALPHA:
        return "builds up"
    return "none" if row.p_equivalent < ALPHA else "inconclusive"


def build_up_verdict(statuses: Sequence[str]) -> str:
    """LA9's verdict ("no build-up toward one global direction") from :func:`build_up_status` of every trained model
    and source: "reproduced" if every one is equivalent to its null; "not reproduced" if every one builds up;
    "partly reproduced" if some are equivalent or some build up and others do not; "inconclusive (underpowered)"
    if none builds up and none is shown equivalent."""
    s = list(statuses)
    if not s:
        raise ValueError("no build-up test")
    if all(x == "none" for x in s):
        return "reproduced"
    if all(x == "builds up" for x in s):
        return "not reproduced"
    if all(x == "inconclusive" for x in s):
        return "inconclusive (underpowered)"
    return "partly reproduced"


def combine_verdicts(verdicts: Sequence[str]) -> str:
    """One Results-page verdict from the verdicts of several models: the common one if they agree; else
    "partly reproduced" if any model reproduces the claim (fully or partly), else "not specific to training" if
    any model shows it as much at random initialization, else "not reproduced"."""
    vs = list(verdicts)
    if not vs:
        raise ValueError("no verdict to combine")
    if len(set(vs)) == 1:
        return vs[0]
    if any(v in ("reproduced", "partly reproduced") for v in vs):
        return "partly reproduced"
    return "not specific to training" if "not specific to training" in vs else "not reproduced"


# -- one of the paper's checkpoints, end to end (section 3.5) ------------------------------------------------
@dataclass(frozen=True)
class PaperModelRun:
    """What :func:`run_paper_model` computed for one checkpoint; the page draws the charts.

    Attributes:
        name: the hub id (or folder) asked for. label: the loaded model's label.
        shared: whether one layer is shared (ALBERT).
        spectrum: :func:`eigen_bases_table` of every distinct layer.
        prompts: prompts used by the token experiment (0 if skipped). steps: steps of the shared
            iteration (0 for a layer-varying model).
        convergence: shared model: :func:`shared_convergence` rows of the iterated
            layer, else ``None``.
        layer_varying: layer-varying model: :func:`layer_varying`'s output, else ``None``.
        note: why the token experiment was skipped (no tokenizer), else ``None``.
    """

    name: str
    label: str
    shared: bool
    spectrum: pd.DataFrame
    prompts: int
    steps: int
    convergence: pd.DataFrame | None = None
    layer_varying: LayerVarying | None = None
    note: str | None = None


def run_paper_model(
    name: str, texts: Sequence[str], *, device: str = "cpu", shared_prompts: int = 8, shared_steps: int = 100,
    anchor: int = 20, seed: int = 0, random_init: bool = False, strict: bool = False,
) -> PaperModelRun | str:
    """Load one checkpoint and run chapter 3's analysis on it; a failure is a message, or an error if ``strict``.

    Every distinct layer gets its eigen-bases (float64 LAPACK on CPU). Then, if the checkpoint has a
    tokenizer, a shared-weight model iterates its layer ``shared_steps`` times in the simplified model
    from the embeddings of the first ``shared_prompts`` texts (:func:`shared_convergence`,
    fit anchored at step ``anchor``), and a layer-varying one gets :func:`layer_varying` on all ``texts``.

    ``random_init=True`` loads the same configuration with fresh seeded weights (``seed``): the
    architecture-only twin, which is also what ``benchmarks/bench_paper_set.py`` times offline.

    ``strict=True`` is for a build that must not publish the page without the checkpoint (chapter 3 with
    ``SPECTRAL_BOOK_REAL_MODELS=1``): a checkpoint that cannot be fetched, loaded or analysed raises.

    Returns:
        A :class:`PaperModelRun`, or (not ``strict``) a one-paragraph message (starting ``"⚠ <name>"``) if
        the model could not be loaded or its analysis failed, so that a page can print it and go on.

    Raises:
        RealModelRunError: ``strict`` and the model could not be loaded or analysed; its message is the
            one above (the loader's own advice included) and says how to run a subset instead.
    """
    model = None
    try:
        model = load_model(name, device=device, random_init=random_init, seed=seed)
        return _analyse_paper_model(name, model, list(texts), shared_prompts=shared_prompts,
                                    shared_steps=shared_steps, anchor=anchor, seed=seed)
    except Exception as exc:  # any failure becomes a message, or one clear error if strict
        if model is None:
            message = load_failure_message(name, exc)
        else:
            message = f"⚠ {name} was loaded but its analysis failed ({type(exc).__name__}): {exc}"
        if strict:
            raise RealModelRunError(
                f"{message.removeprefix('⚠ ').rstrip('.')}. The real-model switch is on "
                f"({REAL_MODELS_ENV}=1), so the build stops rather than publish the page without this "
                "checkpoint. Fix the cause, or run a subset of the paper's checkpoints with "
                f"{MODEL_LIST_ENV}=<comma-separated hub ids>."
            ) from exc
        return message


def _analyse_paper_model(
    name: str, model: Any, texts: list[str], *, shared_prompts: int, shared_steps: int, anchor: int, seed: int
) -> PaperModelRun:
    """The body of :func:`run_paper_model` once ``model`` is loaded."""
    eb = als.eigen_bases(unique_layer_matrices(model))
    run = PaperModelRun(name=name, label=model.label, shared=is_shared(model),
                        spectrum=eigen_bases_table(eb, model.label),
                        prompts=0, steps=0)
    if model.tokenizer is None:
        return replace(run, note=f"{model.label}: no tokenizer in the checkpoint, token experiments skipped.")
    if run.shared:
        H, S = prompt_states(model, texts[:shared_prompts])
        ts = simplified_states(model.layer(0).attention, [h[0] for h in H], steps=shared_steps, special=S)
        conv = shared_convergence(ts.select("content"), eb, anchor=anchor)
        return replace(run, prompts=len(H), steps=shared_steps, convergence=conv)
    H, S = prompt_states(model, texts)
    return replace(run, prompts=len(H), layer_varying=layer_varying(model, H, S, eb, seed=seed))


# -- a reader's model: the time it will take, before anything heavy starts --------------------------------------
def run_estimate(model: Any, n_prompts: int, n_twins: int) -> str:
    """One line: the estimated time of this chapter's token analyses for ``model`` and ``n_twins`` random-init twins
    on ``n_prompts`` prompts, calibrated on this machine (:func:`lib.models.paper.estimate_seconds`: forward
    passes, eigendecompositions, simplified steps), with what would shorten it. Memory is checked by
    :func:`lib.load_model` itself, before the weights are read."""
    params_m = sum(p.numel() for p in model.hf_model.parameters()) / 1e6
    spec = ModelSpec(model.label, model.d_model, model.n_layers, False, params_m)
    secs = estimate_seconds([spec] * (1 + n_twins), n_prompts=n_prompts)
    line = (f"{model.label}: {params_m:.1f}M parameters, d = {model.d_model}, {model.n_layers} layers; with "
            f"{n_twins} twins on {n_prompts} prompts, about {secs / 60:.1f} min on this machine (a rough estimate)")
    if secs > 600:
        line += ("; to shorten it: fewer prompts (a text file in `prompts`), fewer `twin_seeds`, or "
                 "device = \"cuda\" with dtype = \"bfloat16\" (the forward passes only; every eig stays on the CPU)")
    return line + "."
