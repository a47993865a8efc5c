"""Benchmark of :func:`lib.theory.dynamics.simulate` (not a test).

Times the simplified layer at n = 512 tokens, d = 768, 12 heads, 100 steps (float64, CPU), then sweeps
n and d to check that the cost grows as predicted: per step about ``2 n² H d_h`` multiply-adds for the
scores and the attention-weighted values, plus ``4 n d H d_h`` for the four projections (with
``H d_h = d``: ``≈ 2 n² d + 4 n d²``). Peak memory is the peak resident-set growth of the process during
the run (a sampling thread with psutil; torch allocations are invisible to tracemalloc), next to the
size of the returned trajectory ``(T+1)·n·d·8`` bytes.

Run: ``python -m benchmarks.bench_dynamics`` (prints a table) or call :func:`run` (returns a dict).
"""

from __future__ import annotations

import math
import os
import threading
import time

import numpy as np
import psutil
import torch

from lib.theory import dynamics, toys


def _weights(d: int, heads: int, seed: int = 0):
    F = np.random.default_rng(seed).standard_normal((d, d)) / math.sqrt(d)
    return toys.weights_from_matrix(F, heads, seed=seed)


def _macs(n: int, d: int, heads: int) -> float:
    hd = d  # H·d_h = d for these weights
    return 2.0 * n * n * hd + 4.0 * n * d * hd


class _PeakRSS:
    """Sample the process RSS every 5 ms; ``peak`` is the largest growth over the start value (bytes)."""

    def __enter__(self):
        self.proc = psutil.Process()
        self.start = self.proc.memory_info().rss
        self.peak = 0
        self._stop = False
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()
        return self

    def _loop(self):
        while not self._stop:
            self.peak = max(self.peak, self.proc.memory_info().rss - self.start)
            time.sleep(0.005)

    def __exit__(self, *exc):
        self._stop = True
        self._t.join()
        self.peak = max(self.peak, self.proc.memory_info().rss - self.start)


def time_simulate(n: int, d: int, heads: int, steps: int, repeats: int = 1) -> dict:
    """Best-of-``repeats`` wall time of ``simulate`` and peak RSS growth for one configuration."""
    w = _weights(d, heads)
    X0 = torch.randn(n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    dynamics.simulate(w, X0[: min(n, 8)], 1)  # warm-up
    best, cpu, peak = float("inf"), float("inf"), 0
    for _ in range(repeats):
        with _PeakRSS() as mem:
            t0, c0 = time.perf_counter(), time.process_time()
            out = dynamics.simulate(w, X0, steps)
            best = min(best, time.perf_counter() - t0)
            cpu = min(cpu, time.process_time() - c0)
        peak = max(peak, mem.peak)
        del out
    macs = _macs(n, d, heads) * steps
    return {"n": n, "d": d, "heads": heads, "steps": steps, "seconds": best, "cpu_seconds": cpu,
            "per_step_ms": 1e3 * best / steps,
            "peak_rss_mb": peak / 2**20, "trajectory_mb": (steps + 1) * n * d * 8 / 2**20,
            "gmacs": macs / 1e9, "gmac_per_s": macs / best / 1e9}


def _fit_cost(rows: list[dict]) -> tuple[float, float]:
    """Least-squares fit of CPU seconds per step ≈ a·MACs + b·H·n² (matmul work + per-score work:
    scaling, softmax's exp and sum). Returns ``(a, b)`` in seconds per MAC and per score entry."""
    A = np.array([[r["gmacs"] * 1e9 / r["steps"], r["heads"] * r["n"] ** 2] for r in rows])
    y = np.array([r["cpu_seconds"] / r["steps"] for r in rows])
    coef, *_ = np.linalg.lstsq(A / A.max(0), y, rcond=None)
    a, b = coef / A.max(0)
    for r, pred in zip(rows, A @ np.array([a, b])):
        r["model_ratio"] = (r["cpu_seconds"] / r["steps"]) / pred
    return float(a), float(b)


def _model(r: dict, a: float, b: float) -> float:
    return a * r["gmacs"] * 1e9 / r["steps"] + b * r["heads"] * r["n"] ** 2


def _exponent(xs, ts) -> float:
    return float(np.polyfit(np.log(xs), np.log(ts), 1)[0])


def run(steps: int = 100, sweep_steps: int = 10, sweep_threads: int = 1, verbose: bool = True) -> dict:
    """The headline run (n=512, d=768, 12 heads, ``steps`` steps) plus the n and d sweeps.

    The headline uses torch's default thread count. The sweeps run on ``sweep_threads`` threads
    (default 1), so that their CPU time measures the work even when other jobs share the machine (on a
    busy 2-core machine two torch threads mostly wait for each other), and the exponents are fitted to
    that CPU time. Returns a dict with ``main`` (one row), ``sweep_n`` and ``sweep_d`` (rows), the
    fitted exponents of time in n and in d, the exponents the cost model ``2n²d + 4nd²`` predicts over
    the same ranges, and the load average at the start (a sign of contention).
    """
    load = os.getloadavg()
    main = time_simulate(512, 768, 12, steps)
    before = torch.get_num_threads()
    torch.set_num_threads(sweep_threads)
    try:
        sweep_n = [time_simulate(n, 768, 12, sweep_steps, repeats=2) for n in (64, 128, 256, 512, 1024)]
        sweep_d = [time_simulate(512, d, 12, sweep_steps, repeats=2) for d in (192, 384, 768, 1536)]
    finally:
        torch.set_num_threads(before)
    a, b = _fit_cost(sweep_n + sweep_d)
    res = {
        "main": main, "sweep_n": sweep_n, "sweep_d": sweep_d,
        "seconds_per_gmac": a * 1e9, "ns_per_score_entry": b * 1e9,
        "exponent_n": _exponent([r["n"] for r in sweep_n], [r["cpu_seconds"] for r in sweep_n]),
        "exponent_n_predicted": _exponent([r["n"] for r in sweep_n], [_model(r, a, b) for r in sweep_n]),
        "exponent_d": _exponent([r["d"] for r in sweep_d], [r["cpu_seconds"] for r in sweep_d]),
        "exponent_d_predicted": _exponent([r["d"] for r in sweep_d], [_model(r, a, b) for r in sweep_d]),
        "torch_threads": torch.get_num_threads(), "sweep_threads": sweep_threads, "torch": torch.__version__,
        "load_average_at_start": load, "cpu_count": os.cpu_count(),
    }
    if verbose:
        _print(res)
    return res


def _print(res: dict) -> None:
    m = res["main"]
    print(f"simulate: n={m['n']}, d={m['d']}, {m['heads']} heads, {m['steps']} steps, float64, "
          f"{res['torch_threads']} threads: {m['seconds']:.2f} s wall ({m['per_step_ms']:.1f} ms/step), "
          f"{m['cpu_seconds']:.2f} s CPU, "
          f"peak RSS +{m['peak_rss_mb']:.0f} MB (trajectory {m['trajectory_mb']:.0f} MB), {m['gmac_per_s']:.1f} GMAC/s")
    print(f"load average at start {res['load_average_at_start'][0]:.1f} on {res['cpu_count']} cores; "
          f"sweeps on {res['sweep_threads']} thread(s), CPU time per step")
    print(f"{'n':>6} {'d':>6} {'wall ms/step':>13} {'cpu ms/step':>12} {'GMAC/step':>10} {'GMAC per cpu s':>15} "
          f"{'cpu/model':>10} {'peak MB':>8}")
    for r in res["sweep_n"] + res["sweep_d"]:
        print(f"{r['n']:>6} {r['d']:>6} {r['per_step_ms']:>13.2f} {1e3 * r['cpu_seconds'] / r['steps']:>12.2f} "
              f"{r['gmacs'] / r['steps']:>10.3f} {r['gmacs'] / r['cpu_seconds']:>15.2f} {r['model_ratio']:>10.2f} "
              f"{r['peak_rss_mb']:>8.0f}")
    print(f"cost model: cpu s/step = {res['seconds_per_gmac']:.3f} s per GMAC (2n²d + 4nd²) "
          f"+ {res['ns_per_score_entry']:.2f} ns per score entry (H·n²)")
    print(f"CPU time ∝ n^{res['exponent_n']:.2f} (the fitted two-term model predicts n^{res['exponent_n_predicted']:.2f} over this range); "
          f"CPU time ∝ d^{res['exponent_d']:.2f} (predicted d^{res['exponent_d_predicted']:.2f})")


if __name__ == "__main__":
    run()
