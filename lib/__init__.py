"""``lib``: spectral kernels and model adapters for the book *Spectral dynamics of transformers*.

Conventions (the book's notation page, ``book/notation.md``, is their single source): column vectors,
``y = W x``; tokens stored as rows ``(..., n, d)``; float64 for every eigen/Schur/SVD result;
eigenvalues sorted by modulus, descending.

Entry points:

* :func:`lib.load_model` loads a supported checkpoint (or the offline alias ``"minilm"``) and
  returns a :class:`lib.models.SpectralModel` with ``layer_matrices()``, ``head_matrices(t)``,
  ``hidden_states(texts)`` and ``layer(t)``.
* :mod:`lib.spectra` sorts and normalizes eigenpairs, gap ratios and alignments.
* :mod:`lib.page` holds everything a page shows: the Altair theme, figures, charts and widgets. The
  computing modules import neither Altair nor ipywidgets.
"""

from __future__ import annotations

import warnings

from lib.config import BOOK_BUILD_ENV, REAL_MODELS_ENV, in_book_build, real_models_enabled
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
from lib.models import OFFLINE_ALIASES, SUPPORTED_FAMILIES, SpectralModel, Twins, load_model, load_twins

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
    "Twins",
    "UnsafeCheckpointError",
    "UnsupportedModelError",
    "BOOK_BUILD_ENV",
    "REAL_MODELS_ENV",
    "book_setup",
    "in_book_build",
    "load_model",
    "load_twins",
    "real_models_enabled",
    "spectra",
]

def book_setup(seed: int = 0, chapter: int | None = None) -> None:
    """First call of every chapter: Altair renderer, seeds, short error messages, quiet warnings.

    A mistake that ``lib`` detects (unknown model, bad matrix, out-of-range value) then shows one
    clear message in the notebook instead of a long traceback (see :mod:`lib.notebook_errors`).

    Args:
        seed: seeds NumPy's legacy global generator and torch (chapters still pass explicit
            ``numpy.random.default_rng(seed)`` generators to ``lib``).
        chapter: the chapter's number, from which :func:`lib.page.figures.figure` numbers its figures
            ("Fig. 3.1", "Fig. 3.2", ...); ``None`` leaves the numbering as it is.
    """
    import numpy as np
    import torch

    from lib import notebook_errors
    from lib.page.figures import set_chapter
    from lib.page.plotting import configure_renderer

    configure_renderer()
    notebook_errors.install()
    if chapter is not None:
        set_chapter(chapter)
    np.random.seed(seed)
    torch.manual_seed(seed)
    np.set_printoptions(precision=4, suppress=True, linewidth=110)
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
