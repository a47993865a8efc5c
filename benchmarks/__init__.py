"""Benchmarks of the book's spectral kernels (not tests): ``python -m benchmarks`` / ``make bench``.

Every benchmark module exposes ``run(...) -> dict``. The harness (:mod:`benchmarks.__main__`)
treats each top-level entry whose value is a dict with a ``"time_s"`` key as one *kernel row*,
``{"size", "time_s", "baseline_s", "ratio", "peak_mb", ...}``, prints one table per module and
writes all rows to ``benchmarks/results.json``. Other entries (sweeps, fitted exponents) are kept
under ``"details"``.

Shared helpers for the modules written with the harness (``bench_eig``, ``bench_cumulative``,
``bench_book``):

* :func:`compare` times a kernel and its baseline **interleaved in the same run** (the order
  alternates every repeat) and reports the medians and their ratio: on a shared machine the
  absolute times drift, the ratio much less.
* :class:`PeakMemory` measures the peak memory growth of one call: on CUDA the allocator's peak;
  on CPU the kernel's peak resident set (``VmHWM``, reset through ``/proc/self/clear_refs``), exact
  and without sampling; a 2 ms RSS sampling thread where that is not available. Importing this
  package fixes glibc's mmap threshold (:func:`_pin_malloc`) so that freed tensors leave the
  resident set and the peak reflects the call's own allocations.
* :func:`fit_exponent` fits ``time ∝ size^α`` by least squares in log-log.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from typing import Callable

import numpy as np
import torch

__all__ = ["PeakMemory", "compare", "fit_exponent", "format_table", "machine_facts", "sync"]


def _pin_malloc() -> None:
    """Serve every allocation ≥ 128 KiB by mmap and return it on free (glibc ``mallopt``).

    glibc's default threshold adapts upwards after large frees, after which freed tensors stay in
    the heap and the resident set no longer follows the live memory; a fixed threshold makes the
    peak RSS of a call measure what the call allocates. No-op off glibc.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 128 * 1024)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


_pin_malloc()


def sync(device: torch.device | str | None = None) -> None:
    """Wait for queued CUDA work (no-op on CPU), so that wall times include it."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _status_kb(field: str) -> int:
    """A ``/proc/self/status`` memory field in KiB (``VmRSS``: now, ``VmHWM``: peak since reset)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _rss_kb() -> int:
    return _status_kb("VmRSS")


class PeakMemory:
    """Peak memory growth (MB) of the block it wraps: ``with PeakMemory(device) as pm: ...; pm.mb``."""

    def __init__(self, device: torch.device | str | None = None):
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.mb = float("nan")
        self.how = ""

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
            self.how = "cuda max_memory_allocated"
            return self
        self._start = _rss_kb()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # reset VmHWM to the current RSS
            self.how = "VmHWM"
        except OSError:
            self.how = "RSS sampled every 2 ms"
            self._peak, self._stop = self._start, False
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self):
        while not self._stop:
            self._peak = max(self._peak, _rss_kb())
            time.sleep(0.002)

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.mb = (torch.cuda.max_memory_allocated(self.device) - self._start) / 2**20
        elif self.how == "VmHWM":
            self.mb = max(0, _status_kb("VmHWM") - self._start) / 1024
        else:
            self._stop = True
            self._thread.join()
            self.mb = max(0, max(self._peak, _rss_kb()) - self._start) / 1024
        return False


def compare(fast: Callable[[], object], baseline: Callable[[], object], repeats: int = 3,
            device: torch.device | str | None = None) -> dict:
    """Median wall times of ``fast`` and ``baseline``, interleaved, and the peak memory of ``fast``.

    Each repeat runs both, alternating which goes first. The first call of ``fast`` is also its
    memory measurement. Returns ``time_s``, ``baseline_s``, ``ratio`` (baseline / fast),
    ``peak_mb``, ``repeats``, the raw ``times`` and ``baseline_times``, and the last results as
    ``out`` and ``baseline_out`` (removed by the caller before saving).
    """
    tf, tb = [], []
    out = bout = None
    peak = float("nan")
    for r in range(max(1, repeats)):
        order = ("f", "b") if r % 2 == 0 else ("b", "f")
        for which in order:
            if which == "f":
                with PeakMemory(device) as pm:
                    t0 = time.perf_counter()
                    out = fast()
                    sync(device)
                    tf.append(time.perf_counter() - t0)
                if r == 0:
                    peak = pm.mb
            else:
                t0 = time.perf_counter()
                bout = baseline()
                sync(device)
                tb.append(time.perf_counter() - t0)
    f, b = statistics.median(tf), statistics.median(tb)
    return {"time_s": f, "baseline_s": b, "ratio": b / f if f > 0 else float("nan"), "peak_mb": peak,
            "repeats": len(tf), "times": tf, "baseline_times": tb, "out": out, "baseline_out": bout}


def fit_exponent(sizes, times) -> float:
    """Least-squares slope of ``log time`` against ``log size``."""
    return float(np.polyfit(np.log(np.asarray(sizes, float)), np.log(np.asarray(times, float)), 1)[0])


def format_table(title: str, rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """A plain-text table: ``columns`` are ``(key, header, format)``; missing values print as ``-``."""
    heads = [h for _, h, _ in columns]
    cells = []
    for r in rows:
        line = []
        for key, _, fmt in columns:
            v = r.get(key)
            if v is None or (isinstance(v, float) and np.isnan(v)):
                line.append("-")
            else:
                try:
                    line.append(format(v, fmt))
                except (TypeError, ValueError):
                    line.append(str(v))
        cells.append(line)
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(heads)]
    out = [title, "  ".join(h.rjust(w) for h, w in zip(heads, widths)), "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.rjust(w) for c, w in zip(line, widths)) for line in cells]
    return "\n".join(out)


def machine_facts() -> dict:
    """CPU model, core count, memory, load average, library versions and torch threads."""
    import platform

    import scipy

    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    mem_gb = None
    try:
        with open("/proc/meminfo") as f:
            mem_gb = int(next(ln for ln in f if ln.startswith("MemTotal")).split()[1]) / 2**20
    except (OSError, StopIteration):
        pass
    facts = {
        "cpu": cpu, "cores": os.cpu_count(), "memory_gb": mem_gb,
        "load_avg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "torch": torch.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    return facts
