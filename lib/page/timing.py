"""How long a page's computations took, glued for its prose ("Jacobians: {eval}`t_jac` s").

One context manager replaces the stopwatch cells (a hidden cell that starts a clock before a computation and
another that glues the time after it)::

    with Stopwatch("t_jac"):  # glues the block's seconds as t_jac
        mini_jac = jac.sweep_twins(mini_twins, texts)

At the end of the block the wall-clock seconds are glued (:func:`lib.page.prose.glue`) under the name, as the
whole number the prose quotes (the string ``"12"``); a block that raises glues nothing. Without a name the
stopwatch only measures (``with Stopwatch() as t: ...``, then ``t.seconds``). A page's own total spans all its
cells, so it is a stopwatch started in the setup cell and stopped at the end::

    PAGE_TIME = Stopwatch("t_total")  # running from here
    ...
    PAGE_TIME.stop()                  # glues t_total (PAGE_TIME.seconds holds them)

Times are wall clock (:func:`time.perf_counter`): what the reader waits, on a machine as busy as it was.
"""

from __future__ import annotations

from time import perf_counter
from types import TracebackType
from typing import Self

from lib.page.prose import glue

__all__ = ["Stopwatch"]


class Stopwatch:
    """Wall-clock seconds since the stopwatch started (at construction, or again on entering a ``with``).

    Args:
        name: the glue name of the seconds (see the module docstring); ``None`` measures without gluing.

    Example:
        >>> with Stopwatch() as t:
        ...     _ = sum(range(1000))
        >>> 0 <= t.seconds < 60 and t.stopped
        True
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self._start = perf_counter()
        self._stop: float | None = None

    @property
    def seconds(self) -> float:
        """The seconds from start to stop; while running, up to now."""
        return (self._stop if self._stop is not None else perf_counter()) - self._start

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` has run (the block ended)."""
        return self._stop is not None

    def stop(self) -> None:
        """Stop (once: a second call changes nothing) and glue the whole seconds under ``name`` if it has one.

        Returns nothing, so that a cell ending in ``stop()`` shows no output in the lab."""
        if self._stop is None:
            self._stop = perf_counter()
            if self.name is not None:
                glue(self.name, f"{self.seconds:.0f}")

    def __enter__(self) -> Self:
        self._start, self._stop = perf_counter(), None
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.stop()
        else:  # a failed block has no runtime to quote
            self._stop = perf_counter()

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else "running"
        return f"Stopwatch({self.name!r}, {self.seconds:.1f} s, {state})"
