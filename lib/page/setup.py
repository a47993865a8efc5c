"""The first call of every chapter: :func:`book_setup` (renderer, seeds, short error messages, quiet warnings)."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from lib.page import notebook_errors
from lib.page.figures import set_chapter
from lib.page.plotting import configure_renderer


def book_setup(seed: int = 0, chapter: int | None = None) -> None:
    """First call of every chapter: Altair renderer, seeds, short error messages, quiet warnings.

    A mistake that ``lib`` detects (unknown model, bad matrix, out-of-range value) then shows one
    clear message in the notebook instead of a long traceback (see :mod:`lib.page.notebook_errors`).

    Args:
        seed: seeds NumPy's legacy global generator and torch (chapters still pass explicit
            ``numpy.random.default_rng(seed)`` generators to ``lib``).
        chapter: the chapter's number, from which :func:`lib.page.figures.figure` numbers its figures
            ("Fig. 3.1", "Fig. 3.2", ...); ``None`` leaves the numbering as it is.
    """

    configure_renderer()
    notebook_errors.install()
    if chapter is not None:
        set_chapter(chapter)
    np.random.seed(seed)
    torch.manual_seed(seed)
    np.set_printoptions(precision=4, suppress=True, linewidth=110)
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
