"""Benchmark of :mod:`lib.jacobian` (not a test): batched block Jacobians against the naive loop.

For MiniLM (d = 384) and a random-init GPT-2-small-shaped config (d = 768, 12 heads), block 1's
single-token Jacobians at ``P`` residual vectors are computed

* by :func:`lib.jacobian.layer_jacobians` (``torch.func.jacrev`` over the batch, vectorised over the
  d output directions, chunked to a memory budget), and
* by the baseline: a Python loop over prompts of ``torch.autograd.functional.jacobian`` (its default,
  one backward pass per output coordinate).

Reported: wall time of each, their ratio (target ≥ 10× on CPU), the largest relative difference
(target ≤ 1e-5), the *floor* (one forward pass over a batch of ``d·P`` single-token inputs, the cost
of evaluating the block as often as the Jacobian needs) and the ratio to it, and the peak RSS growth (sampled as in ``bench_dynamics``).

Run: ``python -m benchmarks.bench_jacobian`` (prints a table) or call :func:`run` (returns a dict).
"""

from __future__ import annotations

import time

import torch

import lib
from benchmarks.bench_dynamics import _PeakRSS
from lib import jacobian as jac


def _gpt2_small_random():
    """A random-init GPT-2-small-shaped model (d = 768, 12 heads, 2 layers suffice for one block) on disk."""
    import tempfile

    from transformers import AutoModel, GPT2Config

    folder = tempfile.mkdtemp(prefix="bench-gpt2-")
    torch.manual_seed(0)
    AutoModel.from_config(GPT2Config(n_embd=768, n_layer=2, n_head=12, vocab_size=1000, n_positions=64)).save_pretrained(folder)
    return lib.load_model(folder)


def _inputs(model, P: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    xs = [model.hidden_states_ids(torch.randint(5, 900, (9,), generator=g))[1, -1] for _ in range(P)]
    return torch.stack(xs)


def bench_one(model, P: int, t: int = 1, repeats: int = 1) -> dict:
    X = _inputs(model, P)
    d = model.d_model
    f = jac.block_fn(model, t)
    jac.layer_jacobians(model, t, X[:1])  # warm-up
    with _PeakRSS() as mem:
        t0 = time.perf_counter()
        for _ in range(repeats):
            J = jac.layer_jacobians(model, t, X)
        fast = (time.perf_counter() - t0) / repeats
    t0 = time.perf_counter()
    ref = torch.stack([
        torch.autograd.functional.jacobian(lambda v: f(v[None])[0], x.float()).detach().double() for x in X
    ])
    slow = time.perf_counter() - t0
    rel = float(((J - ref).flatten(1).norm(dim=1) / ref.flatten(1).norm(dim=1)).max())
    with torch.no_grad():
        batch = X.float().repeat_interleave(d, 0)
        t0 = time.perf_counter()
        f(batch)
        floor = time.perf_counter() - t0
    return {
        "size": f"d={d}, P={P}", "d": d, "prompts": P, "time_s": fast, "baseline_s": slow, "ratio": slow / fast,
        "max_rel_diff": rel, "floor_s": floor, "ratio_to_floor": fast / floor, "peak_mb": mem.peak / 2**20,
    }


def run(prompts: int = 16) -> dict:
    """Both cases; returns ``{"jacobian_minilm": {...}, "jacobian_d768": {...}}``."""
    return {
        "jacobian_minilm": bench_one(lib.load_model("minilm"), prompts),
        "jacobian_d768": bench_one(_gpt2_small_random(), prompts),
    }


def _table(res: dict) -> str:
    head = f"{'case':18s} {'size':14s} {'batched s':>10s} {'loop s':>9s} {'speed-up':>9s} {'rel diff':>9s} {'floor s':>8s} {'×floor':>7s} {'peak MB':>8s}"
    lines = [head, "-" * len(head)]
    for k, r in res.items():
        lines.append(f"{k:18s} {r['size']:14s} {r['time_s']:10.2f} {r['baseline_s']:9.2f} {r['ratio']:8.1f}× "
                     f"{r['max_rel_diff']:9.1e} {r['floor_s']:8.3f} {r['ratio_to_floor']:7.1f} {r['peak_mb']:8.0f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(_table(run()))
