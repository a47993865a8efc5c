"""Chapter 6's vectorised kernels against their slow references (float64): the padded forward pass, the
shares from derived Gram matrices, the batched perturbation check, the streamed in-context statistics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import lib
from lib.chapters import two_views as bv
from lib.chapters import two_views_perturbation as bvp
from lib.methods.exactness import in_float64
from lib.jacobians import sweep as jac
from lib.methods import bridge as br

FAMILIES = ["bert", "gpt2", "llama"]


@pytest.mark.parametrize("family", FAMILIES)
def test_padded_forward_pass_equals_one_sequence_at_a_time(tiny64, family):
    model = tiny64(family)
    ids = [torch.arange(n) % 50 + 3 for n in (9, 4, 7, 1, 9)]
    padded = model.hidden_states_padded(ids, batch=3)  # two batches, both padded
    for x, H in zip(ids, padded):
        ref = model.hidden_states_ids(x)
        assert H.shape == ref.shape and H.dtype == torch.float64
        torch.testing.assert_close(H, ref, rtol=1e-12, atol=1e-12)


def test_padded_forward_pass_rejects_empty_input(tiny64):
    with pytest.raises(lib.errors.InputError, match="non-empty"):
        tiny64("bert").hidden_states_padded([torch.arange(3), torch.arange(0)])


@pytest.mark.parametrize("name, tol", [("minilm", 1e-12), ("book-decoder", 1e-5)])
def test_residual_inputs_batched_equals_one_text_at_a_time(name, tol):
    """Chapter 6's two models in float64. MiniLM agrees to float64 rounding; the decoder only to float32's,
    because Hugging Face's Llama RMSNorm and softmax compute in float32 even in a float64 model (their
    rounding then depends on the batch shape)."""
    from lib.models.decoder.language import prompts

    model = lib.load_model(name)
    texts = prompts(6)
    with in_float64(model):
        X1, S1 = jac.residual_inputs(model, texts)
        X2, S2 = jac.residual_inputs(model, texts, batched=True)
    torch.testing.assert_close(X2, X1, rtol=tol, atol=tol * float(X1.abs().max()))
    for a, b in zip(S1, S2):
        assert a.shape == b.shape
        torch.testing.assert_close(b, a, rtol=tol, atol=tol * float(a.abs().max()))


def test_shares_from_combined_grams_equal_the_formed_paths():
    """Paths given as combinations (never formed) give the shares and sizes of the formed arrays."""
    rng = np.random.default_rng(0)
    P, d = 7, 5
    U, A, V = (rng.standard_normal((P, d, d)) for _ in range(3))
    W = np.vstack([np.full(P, 1 / P), rng.dirichlet(np.ones(P), size=20)])
    formed = br.resampled_shares(U, {"attn": A, "value": V, "softmax": A - V, "avoid": U - A}, W)
    combined = br.resampled_shares(U, {"attn": A, "value": V, "softmax": {"attn": 1, "value": -1},
                                       "avoid": {"update": 1, "attn": -1}}, W)
    assert list(combined) == list(formed)
    for name in formed:
        np.testing.assert_allclose(combined[name], formed[name], rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="not 'update' or an earlier array path"):
        br.resampled_shares(U, {"avoid": {"update": 1, "attn": -1}}, W)


def test_perturbation_sweep_reproduces_the_one_prompt_reference(tiny64):
    """Every (layer, sequence) row of the vectorised sweep equals perturbation_errors of that layer and sequence."""
    model = tiny64("gpt2")
    seqs = [torch.arange(n) % 50 + 3 for n in (6, 8)]
    states = [model.hidden_states_ids(x) for x in seqs]
    positions = [4, 7]
    eps = [1e-4, 1e-3, 1e-2]
    sweep = bvp.perturbation_sweep(model, states, positions, eps, n_dirs=4)
    assert len(sweep) == model.n_layers * 2 * len(eps) * 2
    for t in range(model.n_layers):
        for p, (H, T) in enumerate(zip(states, positions)):
            ref = bvp.perturbation_errors(model, t, H[t], T, eps, n_dirs=4)
            got = sweep[(sweep.layer == t + 1) & (sweep.prompt == p)]
            for col in ("error", "error_lo", "error_hi"):
                np.testing.assert_allclose(got[col].to_numpy(), ref[col].to_numpy(), rtol=1e-6)
    summary = bvp.perturbation_summary(sweep.assign(model="gpt2"))
    assert (summary.cases == model.n_layers * 2).all()
    slopes = bvp.perturbation_slopes(sweep.assign(model="gpt2"), lo=1e-4, hi=1e-2)
    assert len(slopes) == model.n_layers * 2 and slopes.slope.between(0.8, 1.2).all()


def test_streamed_context_pass_equals_the_stacked_jacobians():
    """context_decomposition's means and per-prompt differences equal those of the full (L, n, d, d) stack."""
    from lib.models.decoder.language import prompts

    pair = lib.load_twins("book-decoder", seeds=(0,))
    texts = prompts(3)
    views = bv.analyse_twins({"decoder": pair}, {"decoder": texts}, k=2, m_null=20)
    v, m = views["decoder", "trained"], views.model("decoder")
    cp, share = bv.context_decomposition(m, v, texts)
    J_ctx = bv.context_jacobians(m, v, texts)  # (L, n, d, d), the slow reference
    np.testing.assert_array_equal(cp.mean, J_ctx.mean(1))
    ref = np.eye(v.d)
    rel = np.linalg.norm(J_ctx - v.J_first, axis=(2, 3)) / np.linalg.norm(J_ctx - ref, axis=(2, 3))
    np.testing.assert_allclose(cp.rel, rel, rtol=1e-12)
    np.testing.assert_allclose(share.value + share.softmax + share.avoid, 1.0, atol=1e-9)
    table = bv.context_table(v, cp, k=2)  # the single-token eigendecomposition reused: every prompt ran
    redo = bv.context_table(v, bv.ContextPass(cp.mean, cp.rel), k=2)
    pd.testing.assert_frame_equal(table, redo)
    assert v.J_first.dtype == np.float32 and np.array_equal(v.J_first.mean(1, dtype=np.float64), v.Jbar)
