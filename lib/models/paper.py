"""The paper's checkpoints (chapter 3): the list, the switch that selects them, safe loading, a cost estimate.

* :data:`PAPER_MODELS` lists the checkpoints of the paper as :class:`ModelSpec` (hub id, width ``d``, layers,
  shared weights, parameters) [paper: the families and the four ALBERT sizes; v2, cased/uncased and the GPT
  sizes are ours: the paper does not name them; chapter 3, section 3.5].
* :func:`selected_models` is the one switch: nothing unless ``SPECTRAL_BOOK_REAL_MODELS=1``
  (:func:`lib.config.real_models_enabled`); then the paper's list, or the comma-separated ids in
  ``SPECTRAL_BOOK_CH3_MODELS`` (:data:`MODEL_LIST_ENV`) if that is set (to run a subset).
* :func:`try_load` returns the model, or the message string of :func:`load_failure_message` that a page can
  print before moving on.
* :func:`random_albert` builds a random-initialised ALBERT v2 of any of the four sizes (:data:`ALBERT_SIZES`)
  offline (only a ``config.json`` is written, by :func:`albert_config_dir`; no weights are downloaded): the
  architecture-only control.
* :func:`estimate_seconds` / :func:`time_warning`: a run time calibrated on this machine, and a warning before a
  long CPU run; :func:`jacobian_estimate` does the same for a chapter's Jacobian sweep (chapters 4 and 6), and
  refuses one whose per-prompt Jacobians would not fit in memory; :func:`bootstrap_resamples` chooses chapter 4's
  prompt-bootstrap resamples from the work they cost (:data:`BOOTSTRAP_BUDGET`); :func:`best_device` picks the device of the forward passes (every eig stays on the CPU).

Chapter 3's analysis of a loaded checkpoint is :func:`lib.chapters.real_models.run_paper_model`.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from lib.config import real_models_enabled
from lib.errors import SpectralBookError
from lib.models.loading import load_model

if TYPE_CHECKING:
    from lib.models.spectral_model import SpectralModel

__all__ = [
    "ALBERT_SIZES",
    "BOOK_RESAMPLES",
    "BOOTSTRAP_BUDGET",
    "LEAST_RESAMPLES",
    "MODEL_LIST_ENV",
    "PAPER_MODELS",
    "ModelSpec",
    "albert_config",
    "albert_config_dir",
    "best_device",
    "bootstrap_decompositions",
    "bootstrap_resamples",
    "estimate_seconds",
    "forward_estimate",
    "jacobian_estimate",
    "load_failure_message",
    "random_albert",
    "resamples_for_shape",
    "selected_models",
    "time_warning",
    "try_load",
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
"""ALBERT v2 sizes (the four of the paper, in v2 [ours]); every size has ``embedding_size = 128`` and FFN ``4 d``."""


# -- the switch and loading ---------------------------------------------------------------------------
def selected_models() -> list[str]:
    """Hub ids the chapter should load: ``[]`` offline (the default), else the paper's set or the override."""
    if not real_models_enabled():
        return []
    override = os.environ.get(MODEL_LIST_ENV, "").strip()
    if override:
        return [name.strip() for name in override.split(",") if name.strip()]
    return [m.hub_id for m in PAPER_MODELS]


def try_load(name: str, **kwargs: Any) -> Any:
    """:func:`lib.models.loading.load_model` that never raises: the model, or a one-paragraph message saying why not.

    The message names the model and keeps the loader's own advice (network, cache, gating, memory), so
    a page can print it and carry on with the next model.
    """
    try:
        return load_model(name, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any failure becomes a message on the page
        return load_failure_message(name, exc)


def load_failure_message(name: str, exc: BaseException) -> str:
    """``"⚠ <name> could not be loaded (<error type>): <message>"``; a type ``lib`` did not raise is "unexpected"."""
    kind = type(exc).__name__ if isinstance(exc, SpectralBookError) else f"unexpected {type(exc).__name__}"
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


def random_albert(size: str, seed: int = 0) -> SpectralModel:
    """ALBERT v2 ``size`` at random initialization (seeded), offline. Its label names the size and seed."""
    return load_model(str(albert_config_dir(size)), random_init=True, seed=seed)


# -- time estimate and device ----------------------------------------------------------------------------------------
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
    eigendecompositions (done in float64 LAPACK on CPU, as the notation page's conventions require, even with a
    GPU), ``2 · params · tokens`` per forward pass, and ``8 · n · d²`` per simplified step per token.
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


def forward_estimate(model: SpectralModel, n_passes: int, *, tokens: int = 16) -> str:
    """One line: the estimated time of ``n_passes`` forward passes of ``model`` over prompts of about ``tokens``
    tokens (``2 · params · tokens`` flops each, at the matmul rate :func:`estimate_seconds` calibrates on this
    machine), with what would shorten it. Memory is checked by :func:`lib.load_model`, before the weights are
    read."""
    params = sum(p.numel() for p in model.hf_model.parameters())
    secs = _calibrate()["flop_s"] * 2 * params * tokens * n_passes
    line = (f"{model.label}: {params / 1e6:.3g}M parameters; {n_passes} forward passes, about {secs / 60:.1f} min "
            "on this machine (a rough estimate)")
    if secs > 600:
        line += "; to shorten it: fewer prompts (a text file in `prompts`), or device = \"cuda\""
    return line + "."


def jacobian_estimate(model: SpectralModel, n_prompts: int, n_twins: int, *, n_boot: int = 0,
                      parts: bool = False) -> str:
    """One line: the estimated time of a single-token Jacobian sweep of ``model`` and ``n_twins`` random-init twins
    on ``n_prompts`` prompts, with ``n_boot`` bootstrap resamples of the per-layer metrics and funnels; refused up
    front (:class:`lib.errors.ModelTooLargeError`, via :func:`lib.memory.require`) when the kept per-prompt
    Jacobians (float32, ``(1 + n_twins) · L · P · d²`` numbers) would not fit in this machine's memory.

    The time scales the calibration of :func:`estimate_seconds`: about ``6 · d³`` flops per prompt and layer for the
    closed-form block Jacobian (three times that with the attention and MLP ``parts``), and the float64 ``d × d``
    decompositions of the ``n_boot + 1`` mean Jacobians counted by :func:`bootstrap_decompositions` (one protocol),
    each at the time of one eig.
    """
    from lib.memory import require

    d, L, n = model.d_model, model.n_layers, 1 + n_twins
    require(n * L * n_prompts * d * d * 4, f"the per-prompt Jacobians of {model.label} and {n_twins} twins "
            f"({L} layers × {n_prompts} prompts at d = {d})",
            "Use fewer prompts (a text file in `prompts`) or fewer `twin_seeds`.")
    r = _calibrate()
    secs = (n * L * r["flop_s"] * 6 * d**3 * n_prompts * (3 if parts else 1)
            + r["eig_s"] * bootstrap_decompositions(d, L, n, protocols=1) * (n_boot + 1))
    line = (f"{model.label}: d = {d}, {L} layers; Jacobians of it and {n_twins} twins on {n_prompts} prompts with "
            f"{n_boot} resamples, about {secs / 60:.1f} min on this machine (a rough estimate)")
    if secs > 600:
        line += "; to shorten it: fewer prompts (a text file in `prompts`) or fewer `twin_seeds`"
    return line + "."


BOOK_RESAMPLES = 200
"""The prompt-bootstrap resamples of chapter 4 on the book's models [ours]: :func:`bootstrap_resamples` gives them
to any model whose work fits :data:`BOOTSTRAP_BUDGET`."""

LEAST_RESAMPLES = 40
"""The fewest prompt-bootstrap resamples :func:`bootstrap_resamples` gives [ours]: with ``B`` resamples a 95%
percentile interval's ends are the ``0.025 · B``-th smallest and largest replicates, at least the first from each
end only when ``B ≥ 40``."""

BOOTSTRAP_BUDGET = 40_000
"""The work chapter 4's prompt bootstrap may take before :func:`bootstrap_resamples` draws fewer than the 200
resamples of the book [ours], in float64 decompositions of a ``512 × 512`` matrix (:func:`bootstrap_decompositions`).
An eig of that size takes about 0.1 s on one core of the book's machine, so the budget is about an hour of one core;
the book's stand-ins use about 1 % of it, a 30-layer model at ``d = 576`` (SmolLM2-135M) with three twins all of it
at 41 resamples."""


def bootstrap_decompositions(d: int, n_layers: int, n_models: int, *, protocols: int = 2) -> float:
    """The float64 decompositions of one prompt-bootstrap resample of chapter 4, in units of one ``512 × 512``
    decomposition (a ``d × d`` one counts ``(d / 512)³``, as LAPACK's work grows; an SVD's values cost less than an
    eig, a real Schur form a little more, the symmetric eigenvalues of ``J Jᵀ`` less: each counts as one).

    Per protocol (single-token; in context) and resample, as chapter 4 calls them: the trained model takes, for each
    of its ``L`` mean Jacobians, an eig and the eigenvalues of ``J Jᵀ`` (:func:`lib.linalg.nonnormal.spectral_metrics`),
    the SVDs of its ``L`` cumulative products from block 1 and ``L − 1`` from block 2
    (:func:`lib.linalg.nonnormal.funnel_eranks`),
    one real Schur form per layer for the non-normality controls and 6 SVDs of their final products
    (:func:`lib.methods.funnel.control_funnels_by_start`, two starts); each of the ``n_models − 1`` twins an eig and
    a symmetric eig per layer and its two funnels' final SVDs. In all ``(2 · n_models + 3) · (L + 1)`` per protocol.
    """
    if min(d, n_layers, n_models, protocols) < 1:
        raise ValueError(f"d, n_layers, n_models and protocols must be positive, got {d}, {n_layers}, {n_models}, "
                         f"{protocols}")
    return protocols * (2 * n_models + 3) * (n_layers + 1) * (d / 512) ** 3


def bootstrap_resamples(model: SpectralModel, n_twins: int, *, wanted: int = BOOK_RESAMPLES,
                        least: int = LEAST_RESAMPLES, budget: float = BOOTSTRAP_BUDGET, protocols: int = 2) -> int:
    """Prompt-bootstrap resamples for chapter 4's sweeps of ``model`` and ``n_twins`` twins [ours]: ``wanted`` when
    ``wanted`` resamples cost at most ``budget`` (:func:`bootstrap_decompositions`), else as many as the budget
    allows, never fewer than ``least``. The count depends only on the model's width and depth, never on a timing,
    so the same model gets the same resamples on every machine (the book's stand-ins: ``wanted``).
    """
    return resamples_for_shape(model.d_model, model.n_layers, n_twins, wanted=wanted, least=least, budget=budget,
                               protocols=protocols)


def resamples_for_shape(d: int, n_layers: int, n_twins: int, *, wanted: int = BOOK_RESAMPLES,
                        least: int = LEAST_RESAMPLES, budget: float = BOOTSTRAP_BUDGET, protocols: int = 2) -> int:
    """:func:`bootstrap_resamples` from a model's width ``d`` and depth alone (for a model not loaded, e.g. from its
    public configuration)."""
    if not 1 <= least <= wanted:
        raise ValueError(f"need 1 ≤ least ≤ wanted, got least={least}, wanted={wanted}")
    per = bootstrap_decompositions(d, n_layers, 1 + n_twins, protocols=protocols)
    return int(min(wanted, max(least, budget // per)))


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


def best_device() -> str:
    """``"cuda"`` when a GPU is visible, else ``"cpu"`` (the forward passes; every eig stays on the CPU)."""
    return "cuda" if torch.cuda.is_available() else "cpu"
