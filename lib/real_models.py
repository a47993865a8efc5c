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
* :func:`estimate_seconds` / :func:`time_warning`: a calibrated estimate of the run time, and a warning
  before a long CPU run.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

import lib
from lib import dynamics, spectra
from lib.alignment_stats import TokenStates
from lib.layer_spectra import summary_table

__all__ = [
    "ALBERT_SIZES",
    "MODEL_LIST_ENV",
    "PAPER_MODELS",
    "ModelSpec",
    "albert_config_dir",
    "eigvals_table",
    "summary_from_eigvals",
    "estimate_seconds",
    "is_shared",
    "prompt_states",
    "random_albert",
    "selected_models",
    "simplified_states",
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
    except lib.SpectralBookError as exc:
        return f"⚠ {name} could not be loaded ({type(exc).__name__}): {exc}"
    except Exception as exc:  # noqa: BLE001 - any failure becomes a message on the page
        return f"⚠ {name} could not be loaded (unexpected {type(exc).__name__}): {exc}"


_CONFIG_ROOT: Path | None = None


def albert_config_dir(size: str) -> Path:
    """A folder holding only the ``config.json`` of ALBERT v2 ``size`` (created once per process)."""
    global _CONFIG_ROOT
    from transformers import AlbertConfig

    if size not in ALBERT_SIZES:
        raise ValueError(f"ALBERT size must be one of {sorted(ALBERT_SIZES)}, got {size!r}")
    if _CONFIG_ROOT is None:
        _CONFIG_ROOT = Path(tempfile.mkdtemp(prefix="spectral-book-albert-"))
    folder = _CONFIG_ROOT / f"albert-{size}-v2 config"
    if not (folder / "config.json").is_file():
        h = ALBERT_SIZES[size]["hidden_size"]
        AlbertConfig(**ALBERT_SIZES[size], embedding_size=128, intermediate_size=4 * h).save_pretrained(folder)
    return folder


def random_albert(size: str, seed: int = 0) -> lib.SpectralModel:
    """ALBERT v2 ``size`` at random initialization (seeded), offline. Its label names the size and seed."""
    return lib.load_model(str(albert_config_dir(size)), random_init=True, seed=seed)


# -- spectra ------------------------------------------------------------------------------------------
def is_shared(model: Any) -> bool:
    """Whether every layer runs the same block (ALBERT v2: one shared layer)."""
    return len({id(b) for b in model.blocks}) == 1


def unique_layer_matrices(model: Any) -> torch.Tensor:
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


# -- token trajectories ---------------------------------------------------------------------------------
def prompt_states(model: Any, texts: Sequence[str]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
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
