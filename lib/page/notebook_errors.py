"""One clear message instead of a 40-line traceback for a reader's mistakes in a notebook.

:func:`install` registers an IPython handler. When a cell raises an error that ``lib`` raised on
purpose (any :class:`lib.errors.SpectralBookError`, e.g. an unknown model id or a matrix that is
not square, or a ``ValueError``/``TypeError``/``IndexError``/``KeyError`` raised by a ``lib``
function checking its arguments), the cell shows the error's type and message only, plus one line
saying where to look.
Every other exception keeps IPython's full traceback. The cell still *fails* (the kernel reports an
error), so a book build with such a cell still stops.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lib.errors import SpectralBookError

_LIB_DIR = Path(__file__).resolve().parents[1]  # lib/, this module stands in lib/page/
_CHECKED = (ValueError, TypeError, IndexError, KeyError)

__all__ = ["install", "short_traceback"]


def short_traceback(evalue: BaseException) -> list[str]:
    """The lines shown for a reader error: ``Type: message`` and a pointer to the docs."""
    return [
        f"\x1b[31m{type(evalue).__name__}\x1b[0m: {evalue}",
        "(raised by lib on purpose: check the values in this cell; run `%xmode Verbose` then the cell again for the full traceback)",
    ]


def _raised_in_lib(tb: Any) -> bool:
    """Whether the innermost frame of a traceback is in ``lib`` (an argument check, not a bug deeper down)."""
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    if last is None:
        return False
    return Path(last.tb_frame.f_code.co_filename).resolve().is_relative_to(_LIB_DIR)


def _is_reader_error(evalue: BaseException, tb: Any) -> bool:
    return isinstance(evalue, SpectralBookError) or (isinstance(evalue, _CHECKED) and _raised_in_lib(tb))


def _handler(shell: Any, etype: type, evalue: BaseException, tb: Any, tb_offset: int | None = None) -> Any:
    if _is_reader_error(evalue, tb) and shell.InteractiveTB.mode != "Verbose":
        stb = short_traceback(evalue)
        shell._showtraceback(etype, evalue, stb)
        return stb
    return shell.showtraceback((etype, evalue, tb), tb_offset=tb_offset)


def install() -> bool:
    """Register the handler in the running IPython kernel; ``False`` outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a requirement
        return False
    shell = get_ipython()
    if shell is None:
        return False
    shell.set_custom_exc((SpectralBookError, *_CHECKED), _handler)
    return True
