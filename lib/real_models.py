"""Real-model experiments (chapter 3): the paper's model list, the switch, safe loading, data collection.

* :data:`PAPER_MODELS` lists the checkpoints of the paper [paper: the families and the four ALBERT
  sizes; v2, cased/uncased and the GPT sizes are our choice, see ``conventions.md``].
* :func:`selected_models` is the one switch: nothing unless ``SPECTRAL_BOOK_REAL_MODELS=1``
  (:func:`lib.real_models_enabled`); then the paper's list, or the comma-separated ids in
  ``SPECTRAL_BOOK_CH3_MODELS`` if that is set (to run a subset).
* :func:`try_load` returns the model, or a message string that a page can print before moving on.
* :func:`random_albert` builds a random-initialised ALBERT v2 of any of the four sizes offline (only a
  ``config.json`` is written; no weights are downloaded): the architecture-only control.
* :func:`prompt_states` and :func:`simplified_states` collect token trajectories as
  :class:`lib.alignment_stats.TokenStates`, from the real forward pass or from the simplified
  FFN-free layer of :mod:`lib.dynamics` (a thin wrapper that batches prompts of equal length).
* :func:`shared_run_rows` / :func:`shared_run_row`: the summary of iterating one shared layer
  (predicted and fitted rates, alignment) and the lookup of one run's principal target.
* :func:`layer_varying` computes γ_t / ρ_t with intervals, chance levels and each layer's own null test
  (random subspaces of the layer's basis dimension, BH across layers) for the simplified model and the
  real forward pass; :func:`layer_range`, :func:`overview_row` and
  :func:`compare_to_twins` reduce its tables to the numbers a page reports (trained vs random init).
* :func:`run_paper_model` runs the whole analysis of one of the paper's checkpoints and returns data,
  or a message if the checkpoint cannot be loaded or analysed; with ``strict=True`` (chapter 3 with the
  switch on: the publishing build) it raises :class:`lib.errors.RealModelRunError` instead.
* :func:`estimate_seconds` / :func:`time_warning`: a calibrated estimate of the run time, and a warning
  before a long CPU run.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd
import torch

import lib
from lib import alignment_stats as als
from lib import dynamics, spectra
from lib.alignment_stats import EigenBases, TokenStates
from lib.errors import RealModelRunError
from lib.layer_spectra import summary_table
from lib.power import fitted_ratio

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = [
    "ALBERT_SIZES",
    "FDR",
    "MODEL_LIST_ENV",
    "NULL_TEST_COLUMNS",
    "PAPER_MODELS",
    "TRAJECTORIES",
    "LayerRange",
    "LayerVarying",
    "ModelSpec",
    "PaperModelRun",
    "TwinComparison",
    "albert_config",
    "albert_config_dir",
    "compare_to_twins",
    "eigen_bases_table",
    "eigvals_table",
    "estimate_seconds",
    "is_shared",
    "layer_range",
    "layer_varying",
    "overview_row",
    "prompt_states",
    "random_albert",
    "run_paper_model",
    "select_source",
    "selected_models",
    "shared_run_row",
    "shared_run_rows",
    "short_label",
    "simplified_states",
    "summary_from_eigvals",
    "time_warning",
    "try_load",
    "unique_layer_matrices",
]

MODEL_LIST_ENV = "SPECTRAL_BOOK_CH3_MODELS"
"""Optional comma-separated hub ids that replace the paper's list when the real-model switch is on."""


@dataclass(frozen=True)
class ModelSpec:
    """One checkpoint of the paper's set and the sizes needed for a time estimate (public configs)."""

    hub_id: str
    d: int
    n_layers: int
    shared: bool
    params_m: float  # parameters of the base model, millions (for the forward-pass estimate)


PAPER_MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("albert/albert-base-v2", 768, 12, True, 11.7),
    ModelSpec("albert/albert-large-v2", 1024, 24, True, 17.7),
    ModelSpec("albert/albert-xlarge-v2", 2048, 24, True, 58.7),
    ModelSpec("albert/albert-xxlarge-v2", 4096, 12, True, 222.6),
    ModelSpec("google-bert/bert-base-uncased", 768, 12, False, 109.5),
    ModelSpec("openai-community/gpt2", 768, 12, False, 124.4),
    ModelSpec("EleutherAI/gpt-neo-125m", 768, 12, False, 125.2),
)
"""The paper's models [paper: families and ALBERT sizes; exact variants ours]."""

ALBERT_SIZES: dict[str, dict[str, int]] = {
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16),
    "xlarge": dict(hidden_size=2048, num_hidden_layers=24, num_attention_heads=16),
    "xxlarge": dict(hidden_size=4096, num_hidden_layers=12, num_attention_heads=64),
}
"""ALBERT v2 sizes (``conventions.md``); every size has ``embedding_size = 128`` and FFN ``4 d``."""


# -- the switch and loading ---------------------------------------------------------------------------
def selected_models() -> list[str]:
    """Hub ids the chapter should load: ``[]`` offline (the default), else the paper's set or the override."""
    if not lib.real_models_enabled():
        return []
    override = os.environ.get(MODEL_LIST_ENV, "").strip()
    if override:
        return [name.strip() for name in override.split(",") if name.strip()]
    return [m.hub_id for m in PAPER_MODELS]


def try_load(name: str, **kwargs: Any) -> Any:
    """:func:`lib.load_model` that never raises: the model, or a one-paragraph message saying why not.

    The message names the model and keeps the loader's own advice (network, cache, gating, memory), so
    a page can print it and carry on with the next model.
    """
    try:
        return lib.load_model(name, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any failure becomes a message on the page
        return _load_failure(name, exc)


def _load_failure(name: str, exc: BaseException) -> str:
    """``"⚠ <name> could not be loaded (<error type>): <message>"``; a type ``lib`` did not raise is "unexpected"."""
    kind = type(exc).__name__ if isinstance(exc, lib.SpectralBookError) else f"unexpected {type(exc).__name__}"
    return f"⚠ {name} could not be loaded ({kind}): {exc}"


_CONFIG_ROOT: Path | None = None


def albert_config(size: str, **overrides: Any):
    """The ``AlbertConfig`` of ALBERT v2 ``size`` (embedding 128, ``d_ff = 4d``), with ``overrides``."""
    from transformers import AlbertConfig

    if size not in ALBERT_SIZES:
        raise ValueError(f"ALBERT size must be one of {sorted(ALBERT_SIZES)}, got {size!r}")
    h = ALBERT_SIZES[size]["hidden_size"]
    return AlbertConfig(**{**ALBERT_SIZES[size], "embedding_size": 128, "intermediate_size": 4 * h, **overrides})


def albert_config_dir(size: str) -> Path:
    """A folder holding only the ``config.json`` of ALBERT v2 ``size`` (created once per process)."""
    global _CONFIG_ROOT
    config = albert_config(size)  # validates the size
    if _CONFIG_ROOT is None:
        _CONFIG_ROOT = Path(tempfile.mkdtemp(prefix="spectral-book-albert-"))
    folder = _CONFIG_ROOT / f"albert-{size}-v2 config"
    if not (folder / "config.json").is_file():
        config.save_pretrained(folder)
    return folder


def random_albert(size: str, seed: int = 0) -> lib.SpectralModel:
    """ALBERT v2 ``size`` at random initialization (seeded), offline. Its label names the size and seed."""
    return lib.load_model(str(albert_config_dir(size)), random_init=True, seed=seed)


# -- spectra ------------------------------------------------------------------------------------------
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
    """:func:`lib.layer_spectra.summary_table` plus the width ``d`` (leading eigenvalues suffice)."""
    table = summary_table(lams, label)
    table.insert(2, "d", d)
    return table


def eigen_bases_table(eb: EigenBases, label: str) -> pd.DataFrame:
    """One display row per layer of :class:`lib.alignment_stats.EigenBases`.

    Columns: ``model`` (``label``), ``layer`` (1-based), ``λ1`` (text, 4 decimals), ``λ1 complex``,
    ``gap ratio`` (``|λ_next|/|λ_1|``) and ``span{v1,v2} ratio`` (the rate toward ``span{v_1, v_2}``).
    """
    return pd.DataFrame({"model": label, "layer": np.arange(1, eb.n_layers + 1),
                         "λ1": [f"{z:.4f}" for z in eb.lambda1], "λ1 complex": eb.lambda1_complex,
                         "gap ratio": eb.gap_ratio, "span{v1,v2} ratio": eb.subspace_ratio})


def short_label(label: str) -> str:
    """The part of a model label in parentheses, for table cells (figures keep the full label).

    ``"all-MiniLM-L6-v2 (random init, seed 1)"`` → ``"random init, seed 1"``; a label without
    parentheses comes back unchanged.
    """
    return label.split("(", 1)[-1].rstrip(")")


# -- token trajectories ---------------------------------------------------------------------------------
def prompt_states(model: SpectralModel, texts: Sequence[str]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Real forward passes: the residual stream ``(L+1, n_p, d)`` float64 and the special-token mask of each text."""
    specials = [model.encode(t)["special"] for t in texts]
    return model.hidden_states(list(texts), progress=False), specials


def simplified_states(
    weights: Any,
    x0: Sequence[Any],
    *,
    steps: int | None = None,
    special: Sequence[Any] | None = None,
    label: str = "",
    **simulate_kwargs: Any,
) -> TokenStates:
    """Run :func:`lib.dynamics.simulate` from each prompt's initial tokens and collect :class:`TokenStates`.

    Prompts of equal length are stacked into one batch, so the number of calls is the number of
    distinct lengths, not of prompts.

    Args:
        weights: per-layer weights (a sequence) or one shared layer (then ``steps`` is required).
        x0: one ``(n_p, d)`` initial state per prompt (e.g. ``hidden_states[p][0]``).
        steps: layers or steps to run.
        special: special-token masks, as in :meth:`TokenStates.from_trajectories`.
        label: for tables and subtitles.
        simulate_kwargs: passed to :func:`lib.dynamics.simulate` (``norm``, ``radius``, ``residual``...).
    """
    x0 = [spectra.as_float64(x) for x in x0]
    by_len: dict[int, list[int]] = {}
    for p, x in enumerate(x0):
        by_len.setdefault(x.shape[0], []).append(p)
    trajs: list[Any] = [None] * len(x0)
    for idx in by_len.values():
        batch = torch.as_tensor(np.stack([x0[p] for p in idx]))
        out = dynamics.simulate(weights, batch, steps, **simulate_kwargs)  # (T+1, B, n, d)
        for b, p in enumerate(idx):
            trajs[p] = out[:, b].numpy()
    return TokenStates.from_trajectories(trajs, special, label=label)


# -- shared weights: iterating one layer ----------------------------------------------------------------
def shared_run_rows(
    conv: pd.DataFrame, *, label: str, layer: int, fit: tuple[int, int] = (20, 50), floor: float = 1e-9
) -> list[dict[str, Any]]:
    """Summary of one shared-layer run: one row per target of :func:`lib.alignment_stats.shared_convergence`.

    Args:
        conv: the run's ``shared_convergence`` rows (steps ``0..T``; the principal target first).
        label: the model's label (shortened by :func:`short_label`).
        layer: the iterated layer, 1-based.
        fit: first and last step of the fitted rate (:func:`lib.power.fitted_ratio` of the mean distance).
        floor: distances below it are left out of the fit (round-off level).

    Returns:
        Dicts with ``model``, ``layer iterated``, ``target``, ``predicted rate r`` (the gap or subspace
        ratio), ``fitted rate (steps a–b)`` (and its ``fitted rate 95% CI`` over prompts when ``conv`` was
        computed with ``fit``), ``alignment at step 0`` and ``alignment at step T``.
    """
    start, stop = fit
    rows = []
    for target, g in conv.groupby("target", sort=False):
        g = g.set_index("step")
        rows.append({
            "model": short_label(label), "layer iterated": layer, "target": target,
            "predicted rate r": g.rate.iloc[0],
            f"fitted rate (steps {start}–{stop})": fitted_ratio(
                g.distance.loc[:stop].to_numpy(), start=start, floor=floor),
            **({"fitted rate 95% CI": f"{g.fitted_lo.iloc[0]:.3f}–{g.fitted_hi.iloc[0]:.3f}"}
               if "fitted_lo" in g else {}),
            "alignment at step 0": g.alignment.iloc[0],
            f"alignment at step {int(g.index[-1])}": g.alignment.iloc[-1],
        })
    return rows


def shared_run_row(table: pd.DataFrame, label: str, layer: int) -> pd.Series:
    """The row of the principal target (``v₁``, or the plane of a complex pair) of one run in a table of
    :func:`shared_run_rows`, found by the model's full ``label`` and the 1-based ``layer`` iterated."""
    rows = table[(table.model == short_label(label)) & (table["layer iterated"] == layer)]
    if rows.empty:
        raise KeyError(f"no shared run of {label!r}, layer {layer}")
    return rows.iloc[0]


# -- layer-varying models: γ_t and ρ_t --------------------------------------------------------------------
TRAJECTORIES: tuple[str, str] = ("simplified", "real forward pass")
"""The two trajectory sources of :func:`layer_varying`, in the order its tables list them."""


NULL_TEST_COLUMNS: tuple[str, ...] = (
    "gamma_null_lo", "gamma_null_hi", "gamma_ratio_null_lo", "gamma_ratio_null_hi", "rho_null_lo", "rho_null_hi",
    "p_gamma", "q_gamma", "p_rho", "q_rho",
)
"""The columns of :func:`lib.alignment_stats.random_null` that :func:`layer_varying` copies into its results."""

FDR = 0.05
"""The false discovery rate at which a layer "beats its null" (Benjamini–Hochberg ``q < FDR``)."""


class LayerVarying(NamedTuple):
    """What :func:`layer_varying` returns; unpacks as ``(results, null, states)``.

    Attributes:
        results: rows of :func:`lib.alignment_stats.gamma_rho` (one per layer and source, sources in
            :data:`TRAJECTORIES` order, content tokens) with a ``variant`` column
            ``"trained · <source>"`` or ``"random init s<seed> · <source>"``, and the null-test columns
            :data:`NULL_TEST_COLUMNS` of the layer's own null merged in.
        null: rows of :func:`lib.alignment_stats.random_null`, same layers and variants.
        states: the :class:`TokenStates` of each source (all tokens, special ones included), keyed by source.
    """

    results: pd.DataFrame
    null: pd.DataFrame
    states: dict[str, TokenStates]


def layer_varying(
    model: Any, H: Sequence[Any], S: Sequence[Any], eb: EigenBases, *, seed: int = 0, n_null: int = 1000
) -> LayerVarying:
    """γ_t / ρ_t with bootstrap intervals, chance levels and each layer's own null test, for both
    trajectory sources (reconstructed definitions [ours], :mod:`lib.alignment_stats`).

    Sources: ``"simplified"`` runs every layer's own weights in the FFN-free, L2-normalized layer of
    :mod:`lib.dynamics` (radius ``sqrt(d)``, no residual) from the real embedding output ``H[p][0]``;
    ``"real forward pass"`` is the residual stream ``H`` itself. Statistics use content tokens only.

    Args:
        model: a loaded :class:`lib.SpectralModel` with ``L`` layers.
        H: per prompt, the residual stream ``(L+1, n_p, d)`` (:func:`prompt_states`).
        S: per prompt, the special-token mask ``(n_p,)``.
        eb: :class:`lib.alignment_stats.EigenBases` of the ``L`` layer matrices.
        seed: seed of the bootstrap over prompts and of the random subspaces.
        n_null: random subspaces per layer in the null (:func:`lib.alignment_stats.random_null`).
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


def _layers(r: pd.DataFrame, mask: pd.Series) -> tuple[int, ...]:
    """The 1-based layers of the rows of ``r`` where ``mask`` holds."""
    return tuple(int(x) for x in r.layer[mask])


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
    """

    layers: int
    gamma_ratio_min: float
    gamma_ratio_max: float
    rho_min: float
    rho_max: float
    rho_min_layer: int
    gamma_beat: tuple[int, ...]
    rho_beat: tuple[int, ...]


def layer_range(results: pd.DataFrame, source: str) -> LayerRange:
    """:class:`LayerRange` of the ``source`` rows of ``results`` (:attr:`LayerVarying.results`, or several
    concatenated; their index may repeat)."""
    r = select_source(results, source).reset_index(drop=True)
    return LayerRange(
        layers=len(r),
        gamma_ratio_min=float(r.gamma_ratio.min()), gamma_ratio_max=float(r.gamma_ratio.max()),
        rho_min=float(r.rho.min()), rho_max=float(r.rho.max()),
        rho_min_layer=int(r.layer.iloc[np.argmin(r.rho)]),
        gamma_beat=_layers(r, r.q_gamma < FDR), rho_beat=_layers(r, r.q_rho < FDR),
    )


def overview_row(label: str, results: pd.DataFrame, source: str) -> dict[str, Any]:
    """One model and trajectory source, summarised over layers: a row of the trained-vs-random-init overview.

    Keys: ``model`` (``label``), ``trajectories`` (``source``), ``mean γ_t / chance``, ``mean Δγ_t``,
    ``mean ρ_t``, and ``layers where γ_t beats its null`` / ``layers where ρ_t beats its null`` (FDR 5%,
    as text: the layers, or "none").
    """
    r = select_source(results, source)
    def beat(col: str) -> str:
        layers = _layers(r, r[col] < FDR)
        return ", ".join(map(str, layers)) if layers else "none"
    return {"model": label, "trajectories": source, "mean γ_t / chance": r.gamma_ratio.mean(),
            "mean Δγ_t": r.tilt.mean(), "mean ρ_t": r.rho.mean(),
            "layers where γ_t beats its null": beat("q_gamma"), "layers where ρ_t beats its null": beat("q_rho")}


@dataclass(frozen=True)
class TwinComparison:
    """A trained model against its random-init twins for one trajectory source.

    Attributes:
        source: the trajectory source (one of :data:`TRAJECTORIES`).
        trained_gamma: mean over layers of ``γ_t / c_{d,k_t}``; twin_gamma: the same per twin.
        gamma_where: ``"above"``, ``"within"`` or ``"below"`` the twins' range
            (:func:`lib.alignment_stats.range_position`).
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
        source, tr_g, tw_g, als.range_position(tr_g, tw_g), tr_r, tw_r, als.range_position(tr_r, tw_r),
        gamma_layers_above=above("gamma_ratio"), rho_layers_above=above("rho"),
        trained_gamma_beat=beat(tr, "q_gamma"), twin_gamma_beat=tuple(beat(t, "q_gamma") for t in tws),
        trained_rho_beat=beat(tr, "q_rho"), twin_rho_beat=tuple(beat(t, "q_rho") for t in tws),
    )


# -- one of the paper's checkpoints, end to end ---------------------------------------------------------
@dataclass(frozen=True)
class PaperModelRun:
    """What :func:`run_paper_model` computed for one checkpoint; the page draws the charts.

    Attributes:
        name: the hub id (or folder) asked for. label: the loaded model's label.
        shared: whether one layer is shared (ALBERT).
        spectrum: :func:`eigen_bases_table` of every distinct layer.
        prompts: prompts used by the token experiment (0 if skipped). steps: steps of the shared
            iteration (0 for a layer-varying model).
        convergence: shared model: :func:`lib.alignment_stats.shared_convergence` rows of the iterated
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
    from the embeddings of the first ``shared_prompts`` texts (:func:`lib.alignment_stats.shared_convergence`,
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
        model = lib.load_model(name, device=device, random_init=random_init, seed=seed)
        return _analyse_paper_model(name, model, list(texts), shared_prompts=shared_prompts,
                                    shared_steps=shared_steps, anchor=anchor, seed=seed)
    except Exception as exc:  # noqa: BLE001 - any failure becomes a message, or one clear error if strict
        if model is None:
            message = _load_failure(name, exc)
        else:
            message = f"⚠ {name} was loaded but its analysis failed ({type(exc).__name__}): {exc}"
        if strict:
            raise RealModelRunError(
                f"{message.removeprefix('⚠ ').rstrip('.')}. The real-model switch is on "
                f"({lib.REAL_MODELS_ENV}=1), so the build stops rather than publish the page without this "
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
        conv = als.shared_convergence(ts.select("content"), eb, anchor=anchor)
        return replace(run, prompts=len(H), steps=shared_steps, convergence=conv)
    H, S = prompt_states(model, texts)
    return replace(run, prompts=len(H), layer_varying=layer_varying(model, H, S, eb, seed=seed))


# -- time estimate ----------------------------------------------------------------------------------------
_RATES: dict[str, float] = {}


def _calibrate() -> dict[str, float]:
    """Seconds per unit of work on this machine: ``eig_s`` for one d=512 float64 eig, ``flop_s`` for matmuls."""
    if not _RATES:
        rng = np.random.default_rng(0)
        A = rng.standard_normal((512, 512))
        t0 = time.perf_counter()
        np.linalg.eig(A)
        _RATES["eig_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        A @ A @ A
        _RATES["flop_s"] = (time.perf_counter() - t0) / (2 * 2 * 512**3)
    return _RATES


def estimate_seconds(
    specs: Sequence[ModelSpec], *, n_prompts: int = 200, tokens: int = 16, shared_steps: int = 100,
    shared_prompts: int = 12,
) -> float:
    """A rough run time for the real-model part of the chapter on *this* machine's CPU.

    Calibrated by one small eig and one matmul, then scaled: ``d³`` per distinct layer for the
    eigendecompositions (done in float64 LAPACK on CPU, as the conventions require, even with a GPU),
    ``2 · params · tokens`` per forward pass, and ``8 · n · d²`` per simplified step per token.
    """
    r = _calibrate()
    total = 0.0
    for s in specs:
        layers = 1 if s.shared else s.n_layers
        total += r["eig_s"] * layers * (s.d / 512) ** 3
        total += r["flop_s"] * 2 * s.params_m * 1e6 * n_prompts * tokens
        steps, prompts = (shared_steps, shared_prompts) if s.shared else (s.n_layers, n_prompts)
        total += r["flop_s"] * 8 * s.d**2 * tokens * prompts * steps
    return total


def time_warning(names: Sequence[str]) -> str:
    """A message with the estimated time for ``names``; also issued as a ``UserWarning`` on a CPU-only machine."""
    known = {m.hub_id: m for m in PAPER_MODELS}
    specs = [known[n] for n in names if n in known]
    if not specs:
        return "No model of the paper's set selected."
    secs = estimate_seconds(specs)
    where = "GPU for the forward passes, CPU LAPACK for every eig" if torch.cuda.is_available() else "CPU only"
    msg = (
        f"Real-model run: {len(specs)} checkpoint(s), estimated {secs / 60:.1f} min on this machine ({where}); "
        "the largest share is the float64 eig of ALBERT xxlarge (d = 4096) and its 100-step shared iteration."
    )
    if not torch.cuda.is_available() and secs > 60:
        warnings.warn(msg, UserWarning, stacklevel=2)
    return msg
