"""Progress bars that suit where the code runs.

In JupyterLab :func:`progress` is ``tqdm.auto`` (a widget bar). In the book build
(``SPECTRAL_BOOK_BUILD=1``) it is a silent plain ``tqdm``: a widget bar would be saved in the static
page as a widget view that cannot render without a kernel, and a text bar as one stderr line per
update; a reader of the static page needs neither.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

__all__ = ["progress"]


def progress(iterable: Iterable[Any] | None = None, **kwargs: Any) -> Any:
    """``tqdm(iterable, **kwargs)``: a widget bar in notebooks, silent in the book build."""
    from lib.plotting import BOOK_BUILD_ENV

    if os.environ.get(BOOK_BUILD_ENV) == "1":
        from tqdm.std import tqdm

        kwargs["disable"] = True
    else:
        from tqdm.auto import tqdm
    return tqdm(iterable, **kwargs)
