"""Progress bars that suit where the code runs.

In JupyterLab :func:`progress` is ``tqdm.auto`` (a widget bar). In the book build
(``SPECTRAL_BOOK_BUILD=1``) it is a silent plain ``tqdm``: a widget bar would be saved in the static
page as a widget view that cannot render without a kernel, and a text bar as one stderr line per
update; a reader of the static page needs neither.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["progress"]


def progress(iterable: Iterable[Any] | None = None, **kwargs: Any) -> Any:
    """``tqdm(iterable, **kwargs)``: a widget bar in notebooks, silent in the book build."""
    from lib.config import in_book_build

    if in_book_build():
        from tqdm.std import tqdm

        kwargs["disable"] = True
    else:
        from tqdm.auto import tqdm
    return tqdm(iterable, **kwargs)
