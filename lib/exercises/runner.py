"""The one convention every exercise checker of the book follows.

A checker takes the student's function, builds a list of :class:`Case` s and hands them to
:func:`run_cases`, which

* runs each case under a time limit (``signal.setitimer`` in the main thread, where the Jupyter kernel
  runs cells; a watchdog thread elsewhere), so an infinite loop is stopped and reported with the line
  it was stuck on;
* prints ``✓``/``✗`` for each case as soon as it finishes, then a summary, and returns ``True`` only if
  every case passed;
* never lets the student's exception escape: it is shown under the case, with the lines of the student's
  own code only (frames inside ``lib`` and installed packages are left out), set apart by ``│`` from the
  checker's own message.

Inside a case, :func:`call` runs the student's function (naming a ``None`` result: "returned None —
missing `return`?"), the ``as_*`` converters read its result and say which shape or type was expected,
and :class:`Wrong` carries a wrong answer's feedback, which names the mistake.
"""

from __future__ import annotations

import ctypes
import math
import os
import signal
import sys
import sysconfig
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_TIME_LIMIT",
    "Case",
    "StudentError",
    "Wrong",
    "as_array",
    "as_bool",
    "as_float",
    "as_int",
    "as_pair",
    "call",
    "run_cases",
    "subscript",
]

DEFAULT_TIME_LIMIT = 10.0
"""Seconds each case may run (the references take milliseconds)."""

_LIB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_INSTALLED = tuple(
    os.path.abspath(p) + os.sep
    for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)


class Wrong(Exception):
    """A wrong answer: the message names the mistake (raised by a case, never by the student's code)."""


class StudentError(Exception):
    """The student's function raised; ``report`` is its message and the student's own lines."""

    def __init__(self, fn_name: str, exc: BaseException):
        super().__init__(f"{fn_name} raised {type(exc).__name__}")
        self.fn_name = fn_name
        self.not_implemented = isinstance(exc, NotImplementedError)
        lines = [f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__]
        lines += _student_lines(traceback.extract_tb(exc.__traceback__))
        self.report = lines


class _TimeLimit(BaseException):
    """Raised into the running case when its time is up (a BaseException: ``except Exception`` in the
    student's code cannot swallow it)."""


@dataclass(frozen=True)
class Case:
    """One check: ``run()`` returns on success and raises :class:`Wrong` (or lets :class:`StudentError`
    through from :func:`call`) on failure."""

    name: str
    run: Callable[[], None]


@dataclass
class _Outcome:
    ok: bool
    detail: str = ""
    student: list[str] = field(default_factory=list)
    stop: str = ""  # why the remaining cases are not run (a time-out, a function not written yet)


_WARNINGS: list[warnings.WarningMessage] = []  # warnings the student's code raised in the current case


def _is_student_file(filename: str) -> bool:
    if filename.startswith("<frozen"):
        return False
    path = os.path.abspath(filename)
    return not path.startswith(_LIB_DIR) and not path.startswith(_INSTALLED)


def _where(filename: str, lineno: int | None, name: str) -> str:
    """``line 4 in my_fn`` (a Jupyter cell has a temporary file name, which is left out)."""
    base = os.path.basename(filename)
    in_cell = "ipykernel_" in filename or filename.startswith("<ipython-input")
    return f"line {lineno} in {name}" + ("" if in_cell else f" ({base})")


def _student_lines(frames: traceback.StackSummary) -> list[str]:
    out = []
    for fr in frames:
        if _is_student_file(fr.filename):
            code = (fr.line or "").strip()
            out.append(f"  {_where(fr.filename, fr.lineno, fr.name)}" + (f":  {code}" if code else ""))
    return out


def _stuck_at(frame: FrameType | None) -> str:
    """The innermost line of the student's code in a live frame stack, for a time-limit message."""
    while frame is not None:
        if _is_student_file(frame.f_code.co_filename):
            summary = traceback.extract_stack(frame, limit=1)[0]
            code = (summary.line or "").strip()
            return f" while at {_where(summary.filename, summary.lineno, summary.name)}" + (f":  {code}" if code else "")
        frame = frame.f_back
    return ""


def _stuck_in_traceback(tb: TracebackType | None) -> str:
    lines = _student_lines(traceback.extract_tb(tb))
    return f" while at {lines[-1].strip()}" if lines else ""


def subscript(k: int) -> str:
    """``k`` in subscript digits, for names like ``v₁₂``."""
    return str(k).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def _fn_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def call(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, with the student's exception wrapped in :class:`StudentError` and a ``None`` result
    named; warnings raised meanwhile (e.g. NumPy's overflow) are kept for the case's feedback."""
    name = _fn_name(fn)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = fn(*args)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - every student error becomes feedback
        raise StudentError(name, exc) from None
    finally:
        _WARNINGS.extend(caught)
    if value is None:
        raise Wrong(f"{name} returned None — missing `return`?")
    return value


def _kind(value: Any) -> str:
    return f"{type(value).__name__}" + (f" of shape {value.shape}" if hasattr(value, "shape") else "")


def as_array(value: Any, shape: tuple[int, ...], what: str, finite: bool = True) -> np.ndarray:
    """The student's result as a float64 array of exactly ``shape``; :class:`Wrong` says what was expected.

    Accepts NumPy arrays, torch tensors, lists of numbers; rejects complex, boolean and non-numeric values
    and (with ``finite``) NaN or infinite entries.
    """
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    try:
        arr = np.asarray(value)
    except Exception:  # noqa: BLE001 - ragged lists and the like
        raise Wrong(f"{what} could not be read as an array (got {type(value).__name__})") from None
    if arr.dtype.kind == "c":
        raise Wrong(f"{what} is complex ({arr.dtype}); expected real float64 values")
    if arr.dtype.kind not in "fiu":
        raise Wrong(f"{what} has dtype {arr.dtype} ({type(value).__name__}); expected real numbers (float64)")
    if arr.shape != shape:
        raise Wrong(f"{what} has shape {arr.shape}; expected shape {shape}")
    arr = arr.astype(np.float64)
    if finite and not np.all(np.isfinite(arr)):
        raise Wrong(f"{what} has NaN or infinite entries")
    return arr


def as_float(value: Any, what: str) -> float:
    """One real number (Python, NumPy or a 0-d/1-element array or tensor)."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    if isinstance(value, (bool, np.bool_)):
        raise Wrong(f"{what} is a bool ({value}); expected a real number")
    arr = np.asarray(value) if isinstance(value, (np.ndarray, np.generic, int, float)) else None
    if arr is None or arr.size != 1:
        raise Wrong(f"{what} should be one real number, got {_kind(value)}")
    if arr.dtype.kind == "c":
        raise Wrong(f"{what} is complex ({arr.item()}); expected a real number")
    if arr.dtype.kind not in "fiu":
        raise Wrong(f"{what} should be one real number, got {_kind(value)}")
    x = float(arr.item())
    if not math.isfinite(x):
        raise Wrong(f"{what} is {x}; expected a finite number")
    return x


def as_int(value: Any, what: str) -> int:
    """An integer (``int`` or a NumPy integer); a float, even a whole one, is refused by name."""
    if isinstance(value, (bool, np.bool_)):
        raise Wrong(f"{what} is a bool ({value}); expected an int")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        raise Wrong(f"{what} is the float {value!r}; expected an int (math.ceil returns one, np.ceil a float)")
    raise Wrong(f"{what} should be an int, got {_kind(value)}")


def as_bool(value: Any, what: str) -> bool:
    """``True`` or ``False`` (Python or NumPy bool)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise Wrong(f"{what} should be True or False, got {value!r} ({_kind(value)})")


def as_pair(value: Any, what: str) -> tuple[Any, Any]:
    """A pair ``(a, b)`` (tuple or list of length 2)."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return value[0], value[1]
    n = f" of length {len(value)}" if isinstance(value, (tuple, list)) else ""
    raise Wrong(f"{what} should be a pair (a, b), got {type(value).__name__}{n}")


def _run_main_thread(case: Case, limit: float) -> None:
    def alarm(signum: int, frame: FrameType | None) -> None:
        raise _TimeLimit

    previous = signal.signal(signal.SIGALRM, alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            case.run()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous)


def _run_in_thread(case: Case, limit: float) -> None:
    box: dict[str, BaseException] = {}

    def target() -> None:
        try:
            case.run()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True, name=f"checker: {case.name}")
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        where = _stuck_at(sys._current_frames().get(worker.ident))
        # stop a pure-Python loop: raise _TimeLimit inside the worker (code stuck in C cannot be stopped)
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(_TimeLimit))
        worker.join(1.0)
        raise _TimeLimit(where)
    if "error" in box:
        raise box["error"]


def _run_one(case: Case, limit: float | None) -> _Outcome:
    _WARNINGS.clear()
    try:
        if limit is None:
            case.run()
        elif (threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
              and signal.getitimer(signal.ITIMER_REAL)[0] == 0):
            _run_main_thread(case, limit)
        else:
            _run_in_thread(case, limit)
    except _TimeLimit as stop:
        where = stop.args[0] if stop.args else _stuck_in_traceback(stop.__traceback__)
        return _Outcome(False, f"stopped after {limit:g} s{where} — an infinite loop?",
                        stop="this case ran out of time")
    except StudentError as err:
        if err.not_implemented:
            return _Outcome(False, f"not implemented yet ({err.fn_name} raised NotImplementedError)",
                            stop=f"until {err.fn_name} is written")
        return _Outcome(False, f"{err.fn_name} raised an error:", err.report)
    except Wrong as wrong:
        detail = str(wrong)
        noted = sorted({f"{w.category.__name__}: {w.message}" for w in _WARNINGS})
        if noted:
            detail += f" (your code warned: {'; '.join(noted)})"
        return _Outcome(False, detail)
    except Exception as exc:  # noqa: BLE001 - a bug of the checker itself is reported, never raised
        return _Outcome(False, f"the checker itself failed ({type(exc).__name__}: {exc}); please report this")
    return _Outcome(True)


def run_cases(title: str, fn: Any, cases: list[Case], verbose: bool = True,
              time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Run every case of one checker, printing each result as it finishes; ``True`` iff all passed.

    ``fn`` is the student's function (only used to name it, and to refuse a value passed instead of a
    function); ``time_limit`` is in seconds per case (``None``: no limit).
    """
    say = print if verbose else (lambda *a, **k: None)
    if not callable(fn):
        say(f"{title}: ✗ expected your function itself, e.g. {title}(my_function), got {_kind(fn)}", flush=True)
        return False
    say(f"{title}({_fn_name(fn)}): {len(cases)} checks", flush=True)
    passed, shown = 0, None
    for i, case in enumerate(cases):
        t0 = time.perf_counter()
        out = _run_one(case, time_limit)
        passed += out.ok
        line = f"  {'✓' if out.ok else '✗'} {case.name}" + ("" if out.ok else f": {out.detail}")
        if time.perf_counter() - t0 > 2.0:
            line += f"  [{time.perf_counter() - t0:.1f} s]"
        if out.student and out.student == shown:
            line += " the same error as above"
        say(line, flush=True)
        if out.student and out.student != shown:  # the student's own error, set apart from the checker's words
            for student_line in out.student:
                say(f"      │ {student_line}", flush=True)
            shown = out.student
        if out.stop and i + 1 < len(cases):  # no point waiting for every case again
            rest = len(cases) - i - 1
            say(f"  … {rest} more check{'s' if rest > 1 else ''} not run ({out.stop})", flush=True)
            break
    say(f"  {passed}/{len(cases)} checks passed." + (" All good." if passed == len(cases) else ""), flush=True)
    return passed == len(cases)
