"""``lib``: spectral kernels and model adapters for the book *Spectral dynamics of transformers*.

Conventions (the book's notation page, ``book/notation.md``, is their single source): column vectors,
``y = W x``; tokens stored as rows ``(..., n, d)``; float64 for every eigen/Schur/SVD result;
eigenvalues sorted by modulus, descending.

Entry points:

* :func:`lib.load_model` loads a supported checkpoint (or the offline alias ``"minilm"``) and
  returns a :class:`lib.models.SpectralModel` with ``layer_matrices()``, ``head_matrices(t)``,
  ``hidden_states(texts)`` and ``layer(t)``.
* :mod:`lib.spectra` sorts and normalizes eigenpairs, gap ratios and alignments.
* :mod:`lib.plotting` configures Altair and draws shared figures.
"""

from __future__ import annotations

import os
import warnings

from lib.errors import (
    CheckpointError,
    InputError,
    InputTypeError,
    LayerIndexError,
    ModelNotAvailableError,
    ModelTooLargeError,
    RealModelRunError,
    SpectralBookError,
    UnsafeCheckpointError,
    UnsupportedModelError,
)
from lib import spectra
from lib.models import OFFLINE_ALIASES, SUPPORTED_FAMILIES, SpectralModel, load_model

__all__ = [
    "OFFLINE_ALIASES",
    "SUPPORTED_FAMILIES",
    "CheckpointError",
    "InputError",
    "InputTypeError",
    "LayerIndexError",
    "ModelNotAvailableError",
    "ModelTooLargeError",
    "RealModelRunError",
    "SpectralBookError",
    "SpectralModel",
    "UnsafeCheckpointError",
    "UnsupportedModelError",
    "book_setup",
    "load_model",
    "real_models_enabled",
    "spectra",
]

REAL_MODELS_ENV = "SPECTRAL_BOOK_REAL_MODELS"


def real_models_enabled() -> bool:
    """The one switch for real checkpoints: ``SPECTRAL_BOOK_REAL_MODELS=1`` in the environment.

    Off by default, so every chapter runs offline on the models that ship with the project.
    """
    return os.environ.get(REAL_MODELS_ENV, "0") == "1"


def book_setup(seed: int = 0) -> None:
    """First call of every chapter: Altair renderer, seeds, short error messages, quiet warnings.

    A mistake that ``lib`` detects (unknown model, bad matrix, out-of-range value) then shows one
    clear message in the notebook instead of a long traceback (see :mod:`lib.notebook_errors`).

    Args:
        seed: seeds NumPy's legacy global generator and torch (chapters still pass explicit
            ``numpy.random.default_rng(seed)`` generators to ``lib``).
    """
    import numpy as np
    import torch

    from lib import notebook_errors
    from lib.plotting import configure_renderer

    configure_renderer()
    notebook_errors.install()
    np.random.seed(seed)
    torch.manual_seed(seed)
    np.set_printoptions(precision=4, suppress=True, linewidth=110)
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
