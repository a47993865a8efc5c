"""Full-model sweep of a Llama-3.1-8B-shaped random-init model (not a test; needs a GPU).

The book's residual-stream analysis at the scale of the paper: for every one of the 32 blocks, the
single-token Jacobians at 64 prompts' last-token residuals (:func:`lib.jacobians.sweep.sweep`, closed form)
and the eigenvalues of every layer's mean Jacobian. Target (issue #7): under 5 minutes on one H200.

Shape (Llama-3.1-8B's config): d = 4096, d_ff = 14336, 32 layers, 32 query heads and 8 KV heads of
128, vocabulary 128256, RoPE θ = 500000; weights from a seeded random initialization made directly on
the device (the time of every step here depends on the shapes, not on trained values), in float32 by
default. Prompts: random token ids (length 32), since a random-init model has no use for text.

Reported separately: building the model, the forward passes for the inputs, the Jacobian sweep,
the full spectra of the float64 mean Jacobians (:func:`lib.linalg.spectra.eigvals`: float64 LAPACK on the
host, as every eigenvalue the book shows, one layer per host core), for comparison
``torch.linalg.eigvals`` of one layer on the device, and the leading eigenvalues only
(:func:`lib.linalg.topk_eig.topk_eig`, k = 8, on the device), with the peak memory. The total counts the
inputs, the Jacobians and the full spectra.

Run on a GPU machine: ``python -m benchmarks --device cuda --only bench_sweep``. On the CPU only
``--quick`` runs (a d = 256, 4-layer model of the same shape family), as a check of the script; the
full size needs 32 GB for its float32 weights and is skipped there.
"""

from __future__ import annotations

import time

import torch

from benchmarks import PeakMemory, sync
from lib.jacobians import sweep as jac
from lib.linalg import spectra
from lib.parallel import available_cores

FULL = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
            num_key_value_heads=8, head_dim=128, vocab_size=128256, rope_theta=500000.0, max_position_embeddings=8192)
TOPK_MAX_CYCLES = 200
"""Restart cap of the top-8 side figure (its convergence and residual are reported with it)."""
QUICK = dict(hidden_size=256, intermediate_size=896, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, head_dim=64, vocab_size=1000, rope_theta=500000.0, max_position_embeddings=256)


def build(shape: dict, device: str, dtype: torch.dtype = torch.float32, seed: int = 0):
    """A random-init Llama model of ``shape``, created on ``device``, as a :class:`lib.models.SpectralModel`."""
    from transformers import AutoModel, LlamaConfig

    from lib.models.families import family_for_model_type
    from lib.models.spectral_model import SpectralModel

    config = LlamaConfig(**shape)
    torch.manual_seed(seed)
    with torch.device(device):
        hf = AutoModel.from_config(config, dtype=dtype).eval()
    d, L = shape["hidden_size"], shape["num_hidden_layers"]
    return SpectralModel(hf, config, family_for_model_type("llama"), None,
                         name=f"Llama-3.1-8B-shaped (random init, L={L}, d={d})", random_init=True, seed=seed)


@torch.no_grad()
def residuals(model, prompts: int, length: int = 32, seed: int = 0) -> torch.Tensor:
    """``(L + 1, P, d)`` last-token residuals of ``prompts`` random token sequences (float64, host)."""
    g = torch.Generator().manual_seed(seed)
    device = next(model.hf_model.parameters()).device
    ids = torch.randint(0, model.config.vocab_size, (prompts, length), generator=g)
    return torch.stack([model.hidden_states_ids(x.to(device))[:, -1].double().cpu() for x in ids], dim=1)


def _step(fn, device) -> tuple[object, float]:
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return out, time.perf_counter() - t0


def run(quick: bool = False, verbose: bool = True, device: str = "cpu", prompts: int | None = None) -> dict:
    """The sweep; returns ``{"sweep_llama8b_shaped": {...}}`` (``"status": "skipped"`` on a CPU without ``quick``)."""
    from lib.linalg.topk_eig import topk_eig

    shape = QUICK if quick else FULL
    P = prompts or (8 if quick else 64)
    key = "sweep_llama8b_shaped"
    size = f"L={shape['num_hidden_layers']}, d={shape['hidden_size']}, P={P}"
    if torch.device(device).type == "cpu" and not quick:
        return {key: {"size": size, "status": "skipped", "error": "needs a GPU (32 GB of float32 weights); use --quick on CPU"}}
    dev = torch.device(device)
    with PeakMemory(dev) as pm:
        model, t_build = _step(lambda: build(shape, device), dev)
        X, t_inputs = _step(lambda: residuals(model, P), dev)
        J, t_jac = _step(lambda: jac.sweep(model, X, progress=False), dev)
        _, t_eig = _step(lambda: spectra.eigvals(J.mean), dev)  # (L, d, d) float64 on the host
        means = torch.as_tensor(J.mean, device=dev)
        _, t_eig_dev1 = _step(lambda: torch.linalg.eigvals(means[:1]), dev)
        # Capped restarts, so that this side figure cannot eat the run's time budget if the top of a
        # spectrum has no gap (on a d = 1024 model of this family it took 3 cycles; d = 4096 unmeasured).
        top, t_topk = _step(lambda: topk_eig(means, 8, max_cycles=TOPK_MAX_CYCLES), dev)
    total = t_inputs + t_jac + t_eig
    row = {"size": size, "time_s": total, "baseline_s": None, "ratio": None, "peak_mb": pm.mb,
           "build_s": t_build, "inputs_s": t_inputs, "jacobians_s": t_jac, "eigvals_s": t_eig, "host_cores": available_cores(),
           "eigvals_device_one_layer_s": t_eig_dev1, "topk8_s": t_topk, "topk8_cycles": top.cycles,
           "topk8_converged": bool(top.converged.all()), "topk8_max_residual": float(top.residuals.max()),
           "device": str(dev), "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
           "shape": shape, "prompts": P, "target_s": 300.0}
    if verbose:
        print(report({key: row}))
    return {key: row}


def report(out: dict) -> str:
    lines = []
    for k, r in out.items():
        if r.get("status") == "skipped":
            lines.append(f"{k} ({r['size']}): skipped — {r['error']}")
            continue
        lines += [f"{k} ({r['size']}, {r['device']}{', ' + r['gpu'] if r.get('gpu') else ''})",
                  f"  build (not counted) {r['build_s']:.1f} s · inputs {r['inputs_s']:.1f} s · Jacobians "
                  f"{r['jacobians_s']:.1f} s · all eigenvalues {r['eigvals_s']:.1f} s on {r['host_cores']} host cores "
                  f"(on the device: {r['eigvals_device_one_layer_s']:.1f} s for one layer; top-8 only: {r['topk8_s']:.1f} s, "
                  f"{r['topk8_cycles']} cycles, max residual {r['topk8_max_residual']:.1e})",
                  f"  total {r['time_s']:.1f} s (target {r['target_s']:.0f} s) · peak {r['peak_mb']:.0f} MB"]
    return "\n".join(lines)


if __name__ == "__main__":
    run(quick=not torch.cuda.is_available(), device="cuda" if torch.cuda.is_available() else "cpu")
