"""Benchmark of :func:`lib.linalg.topk_eig.topk_eig` against ``torch.linalg.eig`` per matrix (not a test).

Kernels (k = 8 leading eigenpairs, float64, interleaved medians, eigenvalues checked against the
baseline's, sorted by the book's convention, to ``1e-8 · |λ_1|``):

* ``topk_eig_d1024``: 24 trained-like matrices, d = 1024: a Ginibre bulk (radius 1) plus 8
  planted outlying eigenvalues (real and complex, |λ| from 1.3 to 3) in a non-normal basis, the
  shape of spectrum that trained layer matrices and mean Jacobians have (a few outliers).
* ``topk_eig_d1024_gaussian``: 24 plain Gaussian matrices ``G/sqrt(d)``: the hard case, no
  outliers, the top eigenvalues sit on the edge of the circular law with tiny gaps.
* ``topk_eig_minilm``: MiniLM's 6 layer matrices ``F = OV`` (d = 384).
* ``eigvals_stack_d1024``: *all* eigenvalues of 8 Gaussian matrices, d = 1024, float64 on the host:
  :func:`lib.linalg.spectra.eigvals` (one matrix per core, :mod:`lib.parallel`) against a loop of
  ``np.linalg.eigvals`` with BLAS allowed every core (what one would write); values compared.
* ``schur_stack_d128``: the real Schur forms of 96 residual-like matrices, d = 128 (chapter 4's controls: one per
  layer and bootstrap resample), one matrix per core: :func:`lib.linalg.schur.real_schur` (the GIL released)
  against ``scipy.linalg.schur`` in the same thread pool (its wrapper holds the GIL); values bitwise equal.
* ``eig_scaling``: time against d (256 … 2048; 4096 with ``with_4096``) for both methods on 2
  trained-like matrices, with the fitted exponents (dense ``eig`` ~ d³; the Krylov method
  ~ (matvecs) · d², reported per matrix-vector product).

Run: ``python -m benchmarks.bench_eig`` or :func:`run`.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import torch
from threadpoolctl import threadpool_limits

from benchmarks import compare, fit_exponent, format_table
from lib.linalg import spectra
from lib.linalg.spectra import sort_order
from lib.linalg.topk_eig import topk_eig
from lib.linalg.schur import real_schur
from lib.parallel import available_cores, map_matrices
from lib.theory import toys

K = 8
PLANTED = [3.0, -2.6, complex(2.2, 0.9), 1.9, complex(-1.5, 1.0), 1.3]  # 8 eigenvalues with the pairs


def trained_like(L: int, d: int, seed: int = 0) -> torch.Tensor:
    """``L`` non-normal matrices: a radius-1 Ginibre bulk plus the planted outliers (float64)."""
    rng = np.random.default_rng(seed)
    out = np.empty((L, d, d))
    for i in range(L):
        P = toys.block_matrix(PLANTED)
        j = P.shape[0]
        D = np.zeros((d, d))
        D[:j, :j] = P
        D[j:, j:] = rng.standard_normal((d - j, d - j)) / np.sqrt(d)
        D[:j, j:] = 0.5 * rng.standard_normal((j, d - j)) / np.sqrt(d)
        S = np.linalg.qr(rng.standard_normal((d, d)))[0] @ (np.eye(d) + 0.3 * np.triu(rng.standard_normal((d, d)), 1) / np.sqrt(d))
        out[i] = S @ D @ np.linalg.inv(S)
    return torch.from_numpy(out)


def gaussian(L: int, d: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((L, d, d)) / np.sqrt(d))


def _dense_topk(A: torch.Tensor) -> np.ndarray:
    """The baseline: ``torch.linalg.eig`` (float64 LAPACK) per matrix, sorted by the book's order."""
    out = []
    for a in A:
        w = torch.linalg.eig(a)[0].cpu().numpy()
        out.append(w[sort_order(w)][:K])
    return np.stack(out)


def bench_topk(name: str, A: torch.Tensor, repeats: int) -> dict:
    topk_eig(A[:1], K)  # warm-up (allocations, LAPACK threads)
    r = compare(lambda: topk_eig(A, K), lambda: _dense_topk(A), repeats=repeats, device=A.device)
    res, ref = r.pop("out"), r.pop("baseline_out")
    got = res.eigvals.cpu().numpy()
    err = float((np.abs(got - ref).max(axis=1) / np.abs(ref[:, 0])).max())
    L, d = A.shape[0], A.shape[-1]
    return {"size": f"L={L}, d={d}, k={K}", "L": L, "d": d, "k": K, **r,
            "eig_rel_err": err, "eig_ok": err <= 1e-8, "max_residual": float(res.residuals.max()),
            "converged": bool(res.converged.all()), "matvecs_per_matrix": float(res.matvecs.double().mean()),
            "cycles": res.cycles, "method": res.method, "name": name}


def bench_stack_eigvals(A: np.ndarray, repeats: int) -> dict:
    """All eigenvalues of a host stack: :func:`lib.linalg.spectra.eigvals` vs a serial loop (BLAS on every core)."""
    cores = available_cores()

    def loop() -> list[np.ndarray]:
        with threadpool_limits(cores):
            return [np.linalg.eigvals(M) for M in A]

    spectra.eigvals(A[:2])  # warm-up (thread pool, LAPACK workspaces)
    r = compare(lambda: spectra.eigvals(A), loop, repeats=repeats)
    got, ref = r.pop("out"), r.pop("baseline_out")
    err = max(float(np.abs(g - w[sort_order(w)]).max() / np.abs(w).max()) for g, w in zip(got, ref))
    L, d = A.shape[0], A.shape[-1]
    return {"size": f"L={L}, d={d}", "L": L, "d": d, "cores": cores, **r, "eig_rel_err": err, "eig_ok": err <= 1e-10}


def bench_schur_stack(A: np.ndarray, repeats: int) -> dict:
    """Real Schur forms of a host stack in :func:`lib.parallel.map_matrices`: ``real_schur`` vs ``scipy.linalg.schur``."""
    def scipy_schur(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return scipy.linalg.schur(M, output="real")

    map_matrices(real_schur, A[:2])  # warm-up
    r = compare(lambda: map_matrices(real_schur, A), lambda: map_matrices(scipy_schur, A), repeats=repeats)
    got, ref = r.pop("out"), r.pop("baseline_out")
    same = all(np.array_equal(g[0], w[0]) and np.array_equal(g[1], w[1]) for g, w in zip(got, ref))
    L, d = A.shape[0], A.shape[-1]
    return {"size": f"n={L}, d={d}", "L": L, "d": d, "cores": available_cores(), **r, "bitwise": same}


def bench_scaling(sizes, L: int = 2, repeats: int = 1, device: str = "cpu") -> dict:
    rows = []
    for d in sizes:
        A = trained_like(L, d, seed=d).to(device)
        # method="krylov" so that the sweep shows the iterative method at every d ("auto" goes dense
        # for d < 3m, i.e. at d = 256 with k = 8).
        r = compare(lambda: topk_eig(A, K, method="krylov"), lambda: _dense_topk(A), repeats=repeats, device=A.device)
        res = r.pop("out")
        r.pop("baseline_out")
        mv = max(float(res.matvecs.double().mean()), 1.0)
        rows.append({"d": d, "L": L, "topk_s": r["time_s"], "eig_s": r["baseline_s"], "ratio": r["ratio"],
                     "matvecs": mv, "topk_s_per_matvec": r["time_s"] / (L * mv), "peak_mb": r["peak_mb"]})
    ds = [r["d"] for r in rows]
    return {
        "rows": rows,
        "exponent_eig": fit_exponent(ds, [r["eig_s"] for r in rows]),
        "exponent_topk": fit_exponent(ds, [r["topk_s"] for r in rows]),
        "exponent_topk_per_matvec": fit_exponent(ds, [r["topk_s_per_matvec"] for r in rows]),
    }


def run(quick: bool = False, with_4096: bool = False, verbose: bool = True, device: str = "cpu") -> dict:
    """Headline kernels and the d sweep. ``quick``: 3 matrices per stack, 2 repeats, d ≤ 1024.

    ``device="cuda"``: inputs live on the GPU, so both ``topk_eig`` (float32 cycles + float64
    refinement) and the ``torch.linalg.eig`` baseline run there.
    """
    L, reps = (3, 2) if quick else (24, 3)
    out = {
        "topk_eig_d1024": bench_topk("trained-like", trained_like(L, 1024).to(device), reps),
        "topk_eig_d1024_gaussian": bench_topk("gaussian", gaussian(L, 1024).to(device), reps),
    }
    try:
        import lib

        F = lib.load_model("minilm").layer_matrices()
        out["topk_eig_minilm"] = bench_topk("minilm F=OV", torch.as_tensor(F, dtype=torch.float64).to(device), reps)
    except Exception as e:  # the offline model package may be absent
        out["topk_eig_minilm"] = {"status": "failed", "error": f"{type(e).__name__}: {e}"}
    out["eigvals_stack_d1024"] = bench_stack_eigvals(gaussian(4 if quick else 8, 1024, seed=1).numpy(), reps)
    residual = np.eye(128) + gaussian(48 if quick else 96, 128, seed=2).numpy()
    out["schur_stack_d128"] = bench_schur_stack(residual, reps)
    sizes = [256, 512, 1024] if quick else [256, 512, 1024, 2048]
    if with_4096:
        sizes.append(4096)
    try:
        out["eig_scaling"] = bench_scaling(sizes, device=device)
    except Exception as e:  # keep the headline rows if the sweep fails
        out["eig_scaling"] = {"rows": [], "error": f"{type(e).__name__}: {e}"}
    if verbose:
        print(report(out))
    return out


def report(out: dict) -> str:
    rows = [dict(kernel=k, **v) for k, v in out.items()
            if k.startswith("topk_") and isinstance(v, dict) and "time_s" in v]
    t1 = format_table("top-k eigenpairs (k = 8) vs torch.linalg.eig per matrix, float64", rows, [
        ("kernel", "kernel", "s"), ("size", "size", "s"), ("time_s", "topk s", ".2f"), ("baseline_s", "eig s", ".2f"),
        ("ratio", "ratio", ".1f"), ("eig_rel_err", "max rel err", ".1e"), ("max_residual", "max resid", ".1e"),
        ("matvecs_per_matrix", "matvecs", ".0f"), ("peak_mb", "peak MB", ".0f")])
    st = out.get("eigvals_stack_d1024", {})
    t0 = format_table("all eigenvalues of a stack: lib.linalg.spectra.eigvals (one matrix per core) vs a serial loop",
                      [dict(kernel="eigvals_stack_d1024", **st)] if "time_s" in st else [], [
        ("kernel", "kernel", "s"), ("size", "size", "s"), ("cores", "cores", "d"), ("time_s", "parallel s", ".2f"),
        ("baseline_s", "loop s", ".2f"), ("ratio", "ratio", ".2f"), ("eig_rel_err", "max rel err", ".1e")])
    sch = out.get("schur_stack_d128", {})
    t3 = format_table("real Schur forms of a stack, one matrix per core: lib.linalg.schur.real_schur vs scipy.linalg.schur",
                      [dict(kernel="schur_stack_d128", **sch)] if "time_s" in sch else [], [
        ("kernel", "kernel", "s"), ("size", "size", "s"), ("cores", "cores", "d"), ("time_s", "real_schur s", ".2f"),
        ("baseline_s", "scipy s", ".2f"), ("ratio", "ratio", ".2f"), ("bitwise", "bitwise", "s")])
    t1 = "\n".join([t1, "", t0, "", t3])
    sc = out["eig_scaling"]
    if not sc.get("rows"):
        return "\n".join([t1, "", f"scaling sweep failed: {sc.get('error')}"])
    t2 = format_table("scaling with d (2 trained-like matrices)", sc["rows"], [
        ("d", "d", "d"), ("topk_s", "topk s", ".3f"), ("eig_s", "eig s", ".3f"), ("ratio", "ratio", ".1f"),
        ("matvecs", "matvecs", ".0f"), ("topk_s_per_matvec", "s/matvec", ".2e"), ("peak_mb", "peak MB", ".0f")])
    fit = (f"fitted exponents: eig ~ d^{sc['exponent_eig']:.2f}, topk ~ d^{sc['exponent_topk']:.2f}, "
           f"topk per matvec ~ d^{sc['exponent_topk_per_matvec']:.2f}")
    return "\n".join([t1, "", t2, fit])


if __name__ == "__main__":
    run()
