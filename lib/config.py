"""The environment switches of the book, read at call time (the bottom floor of ``lib``: imports nothing of it).

* ``SPECTRAL_BOOK_BUILD=1``: the code runs inside ``make book`` (silent progress bars, the site's renderer);
* ``SPECTRAL_BOOK_REAL_MODELS=1``: the one switch for the papers' real checkpoints (off by default, so every
  chapter runs offline on the models that ship with the project).
"""

from __future__ import annotations

import os

__all__ = ["BOOK_BUILD_ENV", "REAL_MODELS_ENV", "in_book_build", "real_models_enabled"]

REAL_MODELS_ENV = "SPECTRAL_BOOK_REAL_MODELS"
BOOK_BUILD_ENV = "SPECTRAL_BOOK_BUILD"


def in_book_build() -> bool:
    """Whether the code runs inside ``make book`` (``SPECTRAL_BOOK_BUILD=1``), not in JupyterLab or a script."""
    return os.environ.get(BOOK_BUILD_ENV) == "1"


def real_models_enabled() -> bool:
    """The one switch for real checkpoints: ``SPECTRAL_BOOK_REAL_MODELS=1`` in the environment.

    Off by default, so every chapter runs offline on the models that ship with the project.
    """
    return os.environ.get(REAL_MODELS_ENV, "0") == "1"
