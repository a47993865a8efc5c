"""Benchmark of :func:`lib.linalg.cumulative.cumulative_effective_rank` (not a test).

Baseline: :func:`lib.linalg.nonnormal.cumulative_product`, the dense float64 §4.4 loop (a full NumPy SVD
of the ``d × d`` product at every step, truncation by that SVD). Inputs: ``L`` residual-style
blocks ``J_l = I + A_l`` with non-normal, rank-graded updates (``A_l = 0.6 · G D H / d``, ``D`` a
decaying diagonal), like mean block Jacobians. Kernels:

* ``cumulative_erank_d1024_k128``: truncated at ``k = d/8`` (the §4.4 default). Fast path: one
  SVD of ``J_0`` (the randomized finder is tried first and rejected by its probe, since ``I + A``
  has a flat spectrum), then ``O(d² k)`` per step.
* ``cumulative_erank_d1024_full``: no truncation (``k = d``): one product and ``svdvals`` per step.
* ``cumulative_scaling``: time against d at ``k = d/8`` for both, with fitted exponents (reference
  ~ L d³; fast ~ d³ once + L d² k = ~d³ at fixed k/d, but with a much smaller constant).

Run: ``python -m benchmarks.bench_cumulative`` or :func:`run`.
"""

from __future__ import annotations

import numpy as np
import torch

from benchmarks import compare, fit_exponent, format_table
from lib.linalg import nonnormal
from lib.linalg.cumulative import cumulative_effective_rank


def residual_blocks(L: int, d: int, seed: int = 0) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    decay = np.exp(-np.arange(d) / (d / 6))
    out = np.empty((L, d, d))
    for i in range(L):
        G = rng.standard_normal((d, d)) / np.sqrt(d)
        H = rng.standard_normal((d, d)) / np.sqrt(d)
        out[i] = np.eye(d) + 1.2 * (G * decay) @ H
    return torch.from_numpy(out)


def bench_one(J: torch.Tensor, k: int | None, repeats: int) -> dict:
    Jn = J.cpu().numpy()  # the reference is NumPy (CPU) whatever the device
    cumulative_effective_rank(J[:2], k=k)  # warm-up
    r = compare(lambda: cumulative_effective_rank(J, k=k), lambda: nonnormal.cumulative_product(Jn, k=k),
                repeats=repeats, device=J.device)
    got, ref = r.pop("out"), r.pop("baseline_out")
    err = float(np.max(np.abs(got.erank.cpu().numpy() - ref.erank) / ref.erank))
    L, d = J.shape[0], J.shape[-1]
    return {"size": f"L={L}, d={d}, k={got.k}", "L": L, "d": d, "k": got.k, **r, "erank_rel_err": err,
            "first_truncation": got.first_truncation, "final_erank": float(got.erank[-1])}


def run(quick: bool = False, with_4096: bool = False, verbose: bool = True, device: str = "cpu") -> dict:
    """Headline kernels at d = 1024 (quick: d = 512, L = 4) and the d sweep at k = d/8.

    ``device="cuda"``: the fast kernel runs on the GPU (float64); the reference stays NumPy on CPU.
    """
    d, L, reps = (512, 4, 2) if quick else (1024, 12, 3)
    J = residual_blocks(L, d).to(device)
    out = {
        f"cumulative_erank_d{d}_k{d // 8}": bench_one(J, d // 8, reps),
        f"cumulative_erank_d{d}_full": bench_one(J, None, reps),
    }
    sizes = [256, 512, 1024] if quick else [256, 512, 1024, 2048]
    if with_4096:
        sizes.append(4096)
    rows = []
    for dd in sizes:
        r = bench_one(residual_blocks(4, dd, seed=dd).to(device), dd // 8, 1)
        rows.append({"d": dd, "k": dd // 8, "fast_s": r["time_s"], "reference_s": r["baseline_s"],
                     "ratio": r["ratio"], "peak_mb": r["peak_mb"], "erank_rel_err": r["erank_rel_err"]})
    ds = [r["d"] for r in rows]
    out["cumulative_scaling"] = {
        "rows": rows, "L": 4,
        "exponent_fast": fit_exponent(ds, [r["fast_s"] for r in rows]),
        "exponent_reference": fit_exponent(ds, [r["reference_s"] for r in rows]),
    }
    if verbose:
        print(report(out))
    return out


def report(out: dict) -> str:
    rows = [dict(kernel=k, **v) for k, v in out.items() if isinstance(v, dict) and "time_s" in v]
    t1 = format_table("cumulative-product erank vs lib.linalg.nonnormal.cumulative_product (full SVD per step)", rows, [
        ("kernel", "kernel", "s"), ("size", "size", "s"), ("time_s", "fast s", ".2f"), ("baseline_s", "ref s", ".2f"),
        ("ratio", "ratio", ".1f"), ("erank_rel_err", "erank rel err", ".1e"), ("first_truncation", "first trunc.", "s"),
        ("peak_mb", "peak MB", ".0f")])
    sc = out["cumulative_scaling"]
    t2 = format_table(f"scaling with d (L = {sc['L']}, k = d/8)", sc["rows"], [
        ("d", "d", "d"), ("fast_s", "fast s", ".3f"), ("reference_s", "ref s", ".3f"), ("ratio", "ratio", ".1f"),
        ("erank_rel_err", "erank rel err", ".1e"), ("peak_mb", "peak MB", ".0f")])
    fit = f"fitted exponents: fast ~ d^{sc['exponent_fast']:.2f}, reference ~ d^{sc['exponent_reference']:.2f}"
    return "\n".join([t1, "", t2, fit])


if __name__ == "__main__":
    run()
