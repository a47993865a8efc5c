"""``lib``: spectral kernels and model adapters for the book *Spectral dynamics of transformers*.

Conventions (the book's notation page, ``book/notation.md``, is their single source): column vectors,
``y = W x``; tokens stored as rows ``(..., n, d)``; float64 for every eigen/Schur/SVD result;
eigenvalues sorted by modulus, descending.

Entry points:

* :func:`lib.load_model` loads a supported checkpoint (or the offline alias ``"minilm"``) and
  returns a :class:`lib.models.SpectralModel` with ``layer_matrices()``, ``head_matrices(t)``,
  ``hidden_states(texts)`` and ``layer(t)``.
* :mod:`lib.linalg.spectra` sorts and normalizes eigenpairs, gap ratios and alignments.
* :mod:`lib.page` holds everything a page shows: the Altair theme, figures, charts and widgets. The
  computing modules import neither Altair nor ipywidgets.
"""

from __future__ import annotations

from lib.config import BOOK_BUILD_ENV, REAL_MODELS_ENV, in_book_build, real_models_enabled
from lib.errors import (
    CheckpointError,
    InputError,
    InputTypeError,
    LayerIndexError,
    ModelNotAvailableError,
    ModelTooLargeError,
    RealModelRunError,
    ReportError,
    SpectralBookError,
    UnsafeCheckpointError,
    UnsupportedModelError,
)
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
    "ReportError",
    "SpectralBookError",
    "SpectralModel",
    "Twins",
    "UnsafeCheckpointError",
    "UnsupportedModelError",
    "BOOK_BUILD_ENV",
    "REAL_MODELS_ENV",
    "in_book_build",
    "load_model",
    "load_twins",
    "real_models_enabled",
]
