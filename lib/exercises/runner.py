"""The one convention every exercise checker of the book follows.

A checker takes the student's function, builds a list of :class:`Case` s and hands them to
:func:`run_cases`, which

* runs the cases where they can be killed: on Linux and other POSIX systems but macOS, in turn in one forked
  child process (:func:`os.fork`, once per checker call; each case's outcome, a few strings, comes back
  through a pipe as it finishes, so nothing the student returns has to be picklable) that is killed
  (``SIGKILL``) when a case's time is up, so no ``except:`` or ``except BaseException`` in the student's code
  can hold the limit off, and a crash of the student's code (``os._exit``, a segfault) is reported, not
  suffered; a hung case costs only its own points: the checker prints ✗ "did not return within N s" with
  the line it was stuck on, skips its other cases and returns ``False``, and the notebook goes on. The
  child uses one torch thread (the parent's OpenMP pool does not survive a fork) and its changes (caches,
  a student's side effects) are lost with it. Where
  ``fork`` is missing or unsafe (Windows; macOS, whose system libraries are not fork-safe) the case runs in
  a watched thread instead, which is stopped if it can be and otherwise left behind when its time is up;
* prints ``✓``/``✗`` for each case as soon as it finishes (with what the student's code printed, which a
  child process captures and hands back), then a summary, and returns ``True`` only if every case passed;
* never lets the student's exception escape: it is shown under the case, with the lines of the student's
  own code only (frames inside ``lib`` and installed packages are left out), set apart by ``│`` from the
  checker's own message;
* turns off, while the student's function runs, the functions of the book's library that the exercise asks
  the student to write (``off=`` names them, e.g. ``"lib.linalg.power.power_method"``): each raises
  :class:`LibraryOff` ("lib.linalg.power.power_method is off while this exercise is checked: write your own")
  however the student reached it (``lib.linalg.power.power_method``, ``from lib.linalg.power import power_method``, an
  alias), because its code object itself is swapped; everything is restored when the call returns, raises
  or runs out of time.

Inside a case, :func:`call` runs the student's function (naming a ``None`` result: "returned None —
missing `return`?"), the ``as_*`` converters read its result and say which shape or type was expected,
and :class:`Wrong` carries a wrong answer's feedback, which names the mistake.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import inspect
import io
import math
import os
import pickle
import select
import signal
import struct
import sys
import sysconfig
import threading
import time
import traceback
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import numpy as np

from lib.config import in_book_build

__all__ = [
    "DEFAULT_TIME_LIMIT",
    "Case",
    "LibraryOff",
    "StudentError",
    "Wrong",
    "as_array",
    "as_bool",
    "as_float",
    "as_int",
    "as_pair",
    "call",
    "recording",
    "run_cases",
    "subscript",
]

DEFAULT_TIME_LIMIT = 10.0
"""Seconds each case may run (the references take milliseconds)."""

FORK = hasattr(os, "fork") and sys.platform != "darwin"
"""Whether a case runs in a forked child process that can be killed (else in a watched thread)."""

_GRACE = 1.0  # seconds a timed-out child gets to say where it was stuck before it is killed

_LIB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_INSTALLED = tuple(
    os.path.abspath(p) + os.sep
    for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)


class Wrong(Exception):
    """A wrong answer: the message names the mistake (raised by a case, never by the student's code)."""


class LibraryOff(Exception):
    """Raised by a library function that the exercise being checked asks the student to write."""


class StudentError(Exception):
    """The student's function raised; ``report`` is its message and the student's own lines;
    ``library_off`` the :class:`LibraryOff` message if the student called a function that is off."""

    def __init__(self, fn_name: str, exc: BaseException):
        super().__init__(f"{fn_name} raised {type(exc).__name__}")
        self.fn_name = fn_name
        self.not_implemented = isinstance(exc, NotImplementedError)
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, LibraryOff):
            cause = cause.__cause__ or cause.__context__
        self.library_off = str(cause) if cause is not None else ""
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


def subscript(k: int) -> str:
    """``k`` in subscript digits, for names like ``v₁₂``."""
    return str(k).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


# -- the library functions an exercise asks the student to write, off while the student's code runs ------------------
_OFF: tuple[tuple[str, Any], ...] = ()  # (public name, function) for the checker now running
_SWAPPED: dict[Any, Any] = {}  # function -> its own code object, while swapped


def _off_template(*args: Any, **kwargs: Any) -> Any:
    raise __import__("lib.exercises.runner", fromlist=["LibraryOff"]).LibraryOff("MESSAGE")


def _resolve(name: str) -> Any:
    """The function called ``name`` (``"lib.linalg.power.power_method"``): a plain Python function, or the one a
    decorator wraps (``__wrapped__``), whose code is then the one swapped."""
    module, _, attr = name.rpartition(".")
    fn = getattr(importlib.import_module(module), attr)
    while getattr(fn, "__closure__", None) and hasattr(fn, "__wrapped__"):  # a decorator's wrapper (SciPy's)
        fn = fn.__wrapped__
    if not hasattr(fn, "__code__") or fn.__closure__:
        raise TypeError(f"{name} is not a plain module-level function; it cannot be turned off")
    return fn


def _off_code(name: str, fn: Any) -> Any:
    message = f"{name} is off while this exercise is checked: write your own"
    code = _off_template.__code__
    return code.replace(co_consts=tuple(message if c == "MESSAGE" else c for c in code.co_consts),
                        co_name=fn.__code__.co_name, co_qualname=fn.__code__.co_qualname,
                        co_filename=fn.__code__.co_filename)


@contextlib.contextmanager
def _library_off(functions: Sequence[tuple[str, Any]]) -> Iterator[None]:
    """Swap each function's code for one that raises :class:`LibraryOff` (every reference to the function
    object, wherever it is bound, is affected), and swap it back on the way out, whatever happens."""
    mine = []
    try:
        for name, fn in functions:
            if fn not in _SWAPPED:
                _SWAPPED[fn] = fn.__code__
                mine.append(fn)
                fn.__code__ = _off_code(name, fn)
        yield
    finally:
        for fn in reversed(mine):
            fn.__code__ = _SWAPPED.pop(fn)


_RECORDING: dict[str, tuple[Any, list[dict[str, Any]], inspect.Signature]] = {}


def _recorded(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    original, calls, signature = _RECORDING[name]
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    calls.append(dict(bound.arguments))
    return original(*args, **kwargs)


def _record_template(*args: Any, **kwargs: Any) -> Any:
    return __import__("lib.exercises.runner", fromlist=["_recorded"])._recorded("MESSAGE", args, kwargs)


@contextlib.contextmanager
def recording(name: str) -> Iterator[list[dict[str, Any]]]:
    """The arguments of every call of the library function ``name`` made meanwhile (each a dict of its bound
    arguments, defaults applied), however it was reached: its code is swapped, as for a function that is off,
    for one that records the call and then runs a copy of the original."""
    fn = _resolve(name)
    original = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    original.__kwdefaults__ = fn.__kwdefaults__
    calls: list[dict[str, Any]] = []
    _RECORDING[name] = (original, calls, inspect.signature(fn))
    code, template = fn.__code__, _record_template.__code__
    fn.__code__ = template.replace(co_consts=tuple(name if c == "MESSAGE" else c for c in template.co_consts),
                                   co_name=code.co_name, co_qualname=code.co_qualname)
    try:
        yield calls
    finally:
        fn.__code__ = code
        _RECORDING.pop(name, None)


def _restore_library() -> None:
    """Give every swapped function its code back (a watched thread left behind may still hold them)."""
    for fn, code in list(_SWAPPED.items()):
        fn.__code__ = code
        _SWAPPED.pop(fn, None)


def _fn_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def call(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, with the student's exception wrapped in :class:`StudentError` and a ``None`` result
    named; warnings raised meanwhile (e.g. NumPy's overflow) are kept for the case's feedback."""
    name = _fn_name(fn)
    try:
        with warnings.catch_warnings(record=True) as caught, _library_off(_OFF):
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


def as_float(value: Any, what: str, finite: bool = True) -> float:
    """One real number (Python, NumPy or a 0-d/1-element array or tensor); NaN and ±inf only if not ``finite``."""
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
    if finite and not math.isfinite(x):
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


def _timed_out(limit: float, where: str, note: str = "") -> _Outcome:
    return _Outcome(False, f"did not return within {limit:g} s{where} — an infinite loop?{note}",
                    stop="this case ran out of time")


def _run_here(case: Case) -> _Outcome:
    """Run one case in this process and thread, with no time limit."""
    _WARNINGS.clear()
    try:
        case.run()
    except StudentError as err:
        if err.library_off:
            return _Outcome(False, err.library_off, stop="the library's own version is off")
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


def _send(fd: int, message: dict[str, Any]) -> None:
    data = pickle.dumps(message)
    data = struct.pack("<Q", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def _child(cases: list[Case], fd: int) -> None:
    """In the forked child: run the cases in turn, sending back each one's outcome and what was printed meanwhile,
    until one stops the rest; on ``SIGUSR1`` (the parent's "time is up"), send where the student's code was
    instead. The caller ``os._exit`` s."""
    gc.freeze()  # the parent's objects (sockets of the kernel...) are never finalised here
    out = io.StringIO()
    sys.stdout = sys.stderr = out

    def where(signum: int, frame: FrameType | None) -> None:
        _send(fd, {"where": _stuck_at(frame), "printed": out.getvalue()})
        os._exit(0)

    signal.signal(signal.SIGUSR1, where)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # the kernel's interrupt ends the child at once
    if "torch" in sys.modules:  # the parent's OpenMP thread pool does not survive a fork: one thread here
        sys.modules["torch"].set_num_threads(1)
    for case in cases:
        outcome = _run_here(case)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})  # an outcome is sent whole
        _send(fd, {"outcome": outcome, "printed": out.getvalue()})
        out.seek(0)
        out.truncate()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
        if outcome.stop:
            break


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"killed by signal {sig} ({signal.Signals(sig).name})" if sig in signal.Signals._value2member_map_ \
            else f"killed by signal {sig}"
    return f"exit status {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"status {status}"


def _messages(data: bytearray) -> Iterator[dict[str, Any]]:
    """Take every complete message off the front of ``data``."""
    while len(data) >= 8 and len(data) >= 8 + (n := struct.unpack("<Q", data[:8])[0]):
        message = pickle.loads(bytes(data[8:8 + n]))
        del data[:8 + n]
        yield message


def _run_forked(cases: list[Case], limit: float) -> Iterator[tuple[_Outcome, str]]:
    """Run the cases in one forked child, in turn; each has ``limit`` s from the end of the one before (and a
    second more to say where it was stuck). The child is killed when a case runs out of time, when the caller
    stops listening, and at the end."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "this process is multi-threaded" (3.12+)
        pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        try:
            os.close(r)
            _child(cases, w)
        finally:
            os._exit(0)
    os.close(w)
    data, asked, done = bytearray(), False, 0
    deadline = time.monotonic() + limit
    try:
        while done < len(cases):
            for message in _messages(data):
                if "outcome" not in message:  # where it was stuck, after SIGUSR1
                    yield _timed_out(limit, message.get("where", "")), message.get("printed", "")
                    return
                done += 1
                deadline = time.monotonic() + limit
                yield message["outcome"], message["printed"]
                if message["outcome"].stop:
                    return
            if done == len(cases):
                return
            left = deadline - time.monotonic()
            if left <= 0:
                if asked:
                    yield _timed_out(limit, ""), ""  # stuck where Python could not say (in C code)
                    return
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGUSR1)
                asked, deadline = True, time.monotonic() + _GRACE
                continue
            if select.select([r], [], [], left)[0]:
                chunk = os.read(r, 1 << 16)
                if chunk:
                    data += chunk
                    continue
                # the child has exited before its last case (every message it sent was read above)
                status = os.waitpid(pid, 0)[1]
                pid = 0
                yield _Outcome(False, f"the process running your function ended ({_describe(status)}) before the "
                                      "case finished: does your code call os._exit or crash Python?",
                               stop="the process running it ended"), ""
                return
    finally:
        os.close(r)
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _run_watched(case: Case, limit: float) -> _Outcome:
    """Run one case in a thread (where ``fork`` is not available): after ``limit`` s the thread is stopped if
    it is in Python code, and otherwise left behind (a daemon), so the checker returns either way."""
    box: dict[str, _Outcome] = {}

    def target() -> None:
        with contextlib.suppress(_TimeLimit):
            box["out"] = _run_here(case)

    worker = threading.Thread(target=target, daemon=True, name=f"checker: {case.name}")
    worker.start()
    worker.join(limit)
    if "out" in box:
        return box["out"]
    where = _stuck_at(sys._current_frames().get(worker.ident))
    for _ in range(10):  # an `except:` in the student's loop may swallow a few of these
        if not worker.is_alive():
            break
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(_TimeLimit))
        worker.join(0.1)
    note = "" if not worker.is_alive() else " (it could not be stopped and runs on in the background: restart " \
                                            "the kernel if the notebook slows down)"
    return _timed_out(limit, where, note)


def _outcomes(cases: list[Case], limit: float | None) -> Iterator[tuple[_Outcome, str]]:
    """Each case's outcome, in turn, and what the student's code printed if a child process captured it."""
    if limit is None:
        yield from ((_run_here(case), "") for case in cases)
    elif FORK:
        yield from _run_forked(cases, limit)
    else:
        yield from ((_run_watched(case, limit), "") for case in cases)


def run_cases(title: str, fn: Any, cases: list[Case], verbose: bool = True,
              time_limit: float | None = DEFAULT_TIME_LIMIT, off: Sequence[str] = ()) -> bool:
    """Run every case of one checker, printing each result as it finishes; ``True`` iff all passed.

    ``fn`` is the student's function (only used to name it, and to refuse a value passed instead of a
    function); ``time_limit`` is in seconds per case (``None``: no limit, in this process); ``off`` names
    the library functions that are off while the student's function runs (see the module docstring).
    """
    global _OFF
    say = print if verbose else (lambda *a, **k: None)
    if not callable(fn):
        say(f"{title}: ✗ expected your function itself, e.g. {title}(my_function), got {_kind(fn)}", flush=True)
        return False
    say(f"{title}({_fn_name(fn)}): {len(cases)} checks", flush=True)
    previous, _OFF = _OFF, tuple((name, _resolve(name)) for name in off)
    try:
        return _run_all(cases, time_limit, say)
    finally:
        _OFF = previous
        _restore_library()


def _run_all(cases: list[Case], time_limit: float | None, say: Callable[..., None]) -> bool:
    passed, shown = 0, None
    outcomes = _outcomes(cases, time_limit)
    t0 = time.perf_counter()
    for i, (case, (out, printed)) in enumerate(zip(cases, outcomes)):
        if printed:
            sys.stdout.write(printed)
        passed += out.ok
        if i == 0 and out.stop and out.stop.startswith("until ") and in_book_build():
            # the site shows the unfilled template: one line instead of a list of failed checks
            say(f"  they run once {out.stop.removeprefix('until ')} (the solution below passes them all)", flush=True)
            outcomes.close()
            return False
        line = f"  {'✓' if out.ok else '✗'} {case.name}" + ("" if out.ok else f": {out.detail}")
        if time.perf_counter() - t0 > 2.0:
            line += f"  [{time.perf_counter() - t0:.1f} s]"
        t0 = time.perf_counter()
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
    outcomes.close()  # a child process still running is killed
    say(f"  {passed}/{len(cases)} checks passed." + (" All good." if passed == len(cases) else ""), flush=True)
    return passed == len(cases)
