"""Benchmark of :mod:`lib.jacobians.sweep` (not a test): single-token block Jacobians against the naive loop.

Models: MiniLM (d = 384), a random-init GPT-2-small-shaped config (d = 768, 12 heads, d_ff = 3072)
and a random-init Llama-shaped config (d = 2048, 16 heads, 4 KV heads, d_ff = 5632, SwiGLU). For
block 1 at ``P`` residual vectors, one run measures side by side:

* the kernel, :func:`lib.jacobians.sweep.layer_jacobians` with its default ``method="closed"``
  (:mod:`lib.jacobians.single_token`: the Jacobian formed from its factors, no autodiff);
* the baseline: a Python loop over prompts of ``torch.autograd.functional.jacobian`` (its default,
  one backward pass per output coordinate), the straightforward way (target ≥ 10× on CPU, results
  equal to 1e-5 relative);
* ``method="autodiff"`` (``torch.func.jacrev`` over the batch, vectorised over the d tangents);
* the *floor*: one forward pass over a batch of ``d·P`` single-token inputs (evaluating the block as
  often as a tangent-by-tangent Jacobian needs; target: the kernel within 3× of it);
* the achieved rate: the closed form's matrix-product FLOPs (``P·(2 d² d_ff + 2 d³)``) over its time,
  as a fraction of the rate of its dominant product ``(d × d_ff)(d_ff × d)`` timed alone on the device.

Kernel and baseline run interleaved (:func:`benchmarks.compare`, median of the repeats, peak memory
of the kernel). A scaling sweep times the closed and autodiff kernels on Llama-shaped configs for
d = 256 … 2048 (4096 with ``--with-4096``) and fits the exponent of time against d (expect ~d³:
the ``d × d_ff × d`` product per prompt with ``d_ff ∝ d``).

Run: ``python -m benchmarks --only bench_jacobian`` (writes ``results.json``) or
``python -m benchmarks.bench_jacobian`` (prints the tables).
"""

from __future__ import annotations

import tempfile
import time

import torch

import lib
from benchmarks import compare, fit_exponent, format_table, sync
from lib.jacobians import single_token
from lib.jacobians import sweep as jac


def _random_model(config, device: str = "cpu"):
    """Save a random-init model of ``config`` and load it through :func:`lib.load_model`."""
    from transformers import AutoModel

    folder = tempfile.mkdtemp(prefix="bench-jac-")
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder)
    return lib.load_model(folder, device=device)


def gpt2_small(device: str = "cpu"):
    """GPT-2-small-shaped (d = 768, 12 heads), 2 layers (block 1 is measured)."""
    from transformers import GPT2Config

    return _random_model(GPT2Config(n_embd=768, n_layer=2, n_head=12, vocab_size=1000, n_positions=64), device)


def llama_shaped(d: int = 2048, device: str = "cpu"):
    """Llama-shaped (SwiGLU, RMSNorm, GQA with 4 KV heads, d_ff = 2.75 d), 2 layers, d_h = 128 (64 below d = 1024)."""
    from transformers import LlamaConfig

    dh = 128 if d >= 1024 else 64
    return _random_model(LlamaConfig(hidden_size=d, intermediate_size=int(2.75 * d), num_hidden_layers=2,
                                     num_attention_heads=d // dh, num_key_value_heads=4, head_dim=dh,
                                     vocab_size=1000, max_position_embeddings=64), device)


def _inputs(model, P: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    xs = [model.hidden_states_ids(torch.randint(5, 900, (9,), generator=g))[1, -1] for _ in range(P)]
    p = next(model.hf_model.parameters())
    return torch.stack(xs).to(device=p.device, dtype=p.dtype)


def _timed(fn, device) -> float:
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def matmul_rate(d: int, d_ff: int, device, dtype=torch.float32) -> float:
    """FLOP/s of the kernel's dominant product, ``(d × d_ff) @ (d_ff × d)``, on ``device`` (best of 3)."""
    A = torch.randn(d, d_ff, device=device, dtype=dtype)
    B = torch.randn(d_ff, d, device=device, dtype=dtype)
    A @ B
    best = min(_timed(lambda: A @ B, device) for _ in range(3))
    return 2 * d * d_ff * d / best


def bench_one(model, P: int, t: int = 1, repeats: int = 3) -> dict:
    """Kernel vs loop (interleaved), plus the autodiff kernel and the floor, for one model."""
    X = _inputs(model, P)
    d, device = model.d_model, X.device
    f = jac.block_fn(model, t)
    jac.layer_jacobians(model, t, X[:1])  # warm-up

    def loop():
        return torch.stack([torch.autograd.functional.jacobian(lambda v: f(v[None])[0], x).detach().double() for x in X])

    r = compare(lambda: jac.layer_jacobians(model, t, X), loop, repeats=repeats, device=device)
    J, ref = r.pop("out"), r.pop("baseline_out")
    rel = float(((J - ref).flatten(1).norm(dim=1) / ref.flatten(1).norm(dim=1)).max())
    autodiff = min(_timed(lambda: jac.layer_jacobians(model, t, X, method="autodiff"), device) for _ in range(2))
    with torch.no_grad():
        batch = X.repeat_interleave(d, 0)
        floor = min(_timed(lambda: f(batch), device) for _ in range(2))
    achieved = single_token.flops(d, jac.mlp_width(model), P) / r["time_s"]
    rate = matmul_rate(d, jac.mlp_width(model), device)
    return {"size": f"d={d}, P={P}", "d": d, "prompts": P, **r, "max_rel_diff": rel, "autodiff_s": autodiff,
            "gflops": achieved / 1e9, "matmul_gflops": rate / 1e9, "fraction_of_matmul": achieved / rate,
            "ratio_to_autodiff": autodiff / r["time_s"], "floor_s": floor, "ratio_to_floor": r["time_s"] / floor,
            "device": str(device)}


def bench_scaling(sizes, P: int = 2, device: str = "cpu") -> dict:
    """Closed vs autodiff kernel time against d on Llama-shaped configs, with fitted exponents."""
    rows = []
    for d in sizes:
        model = llama_shaped(d, device)
        X = _inputs(model, P)
        jac.layer_jacobians(model, 1, X[:1])
        closed = min(_timed(lambda: jac.layer_jacobians(model, 1, X), X.device) for _ in range(2))
        auto = _timed(lambda: jac.layer_jacobians(model, 1, X, method="autodiff"), X.device)
        rows.append({"d": d, "prompts": P, "closed_s": closed, "autodiff_s": auto, "ratio": auto / closed})
        del model
    ds = [r["d"] for r in rows]
    return {"rows": rows, "exponent_closed": fit_exponent(ds, [r["closed_s"] for r in rows]),
            "exponent_autodiff": fit_exponent(ds, [r["autodiff_s"] for r in rows])}


def run(quick: bool = False, with_4096: bool = False, verbose: bool = True, device: str = "cpu") -> dict:
    """Headline rows ``jacobian_minilm``, ``jacobian_d768``, ``jacobian_d2048`` and the ``jacobian_scaling`` sweep.

    ``quick``: P = 4 (2 at d = 2048), one repeat, d ≤ 1024 in the sweep.
    """
    P, reps = (4, 1) if quick else (16, 3)
    try:
        minilm = lib.load_model("minilm", device=device)
    except lib.SpectralBookError as e:  # the offline model's package is absent (e.g. on a bare GPU image)
        minilm_row = {"size": f"d=384, P={P}", "status": "failed", "error": f"{type(e).__name__}: {e}"}
    else:
        minilm_row = bench_one(minilm, P, repeats=reps)
    out = {
        "jacobian_minilm": minilm_row,
        "jacobian_d768": bench_one(gpt2_small(device), P, repeats=reps),
        # the loop baseline costs ~10 s per prompt here on one CPU core: fewer prompts, one repeat
        "jacobian_d2048": bench_one(llama_shaped(2048, device), 2 if quick else 4, repeats=1),
    }
    sizes = [256, 512, 1024] if quick else [256, 512, 1024, 2048]
    if with_4096:
        sizes.append(4096)
    out["jacobian_scaling"] = bench_scaling(sizes, device=device)
    if verbose:
        print(report(out))
    return out


def report(out: dict) -> str:
    rows = [dict(kernel=k, **v) for k, v in out.items() if isinstance(v, dict) and "time_s" in v]
    t1 = format_table("single-token block Jacobians: closed form vs the autograd loop (and vs autodiff, the floor)", rows, [
        ("kernel", "kernel", "s"), ("size", "size", "s"), ("time_s", "closed s", ".3f"), ("baseline_s", "loop s", ".2f"),
        ("ratio", "×loop", ".1f"), ("autodiff_s", "autodiff s", ".3f"), ("ratio_to_autodiff", "×autodiff", ".1f"),
        ("floor_s", "floor s", ".3f"), ("ratio_to_floor", "closed/floor", ".2f"), ("max_rel_diff", "rel diff", ".1e"),
        ("gflops", "GFLOP/s", ".1f"), ("fraction_of_matmul", "of matmul", ".2f"), ("peak_mb", "peak MB", ".0f")])
    sc = out["jacobian_scaling"]
    t2 = format_table(f"scaling with d (Llama-shaped, P = {sc['rows'][0]['prompts']})", sc["rows"], [
        ("d", "d", "d"), ("closed_s", "closed s", ".3f"), ("autodiff_s", "autodiff s", ".3f"), ("ratio", "ratio", ".1f")])
    fit = f"fitted exponents: closed ~ d^{sc['exponent_closed']:.2f}, autodiff ~ d^{sc['exponent_autodiff']:.2f}"
    return "\n".join([t1, "", t2, fit])


if __name__ == "__main__":
    run()
