"""Closed-form in-context Jacobians (lib.jacobians.in_context) against autodiff of the real blocks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import FAMILIES
from tiny_models import SEQ, fp64_tolerance

import lib
from lib.chapters import two_views as bv
from lib.methods.exactness import in_float64
from lib.errors import InputError
from lib.jacobians import in_context as jcx
from lib.jacobians import sweep as jac


def _tolerance(family: str) -> float:
    # GPT-Neo computes q·k and the softmax in float32 even in a float64 model, so autodiff's query and key
    # paths carry float32 roundoff there (the RMSNorm families' tolerance already covers theirs).
    return 1e-6 if family == "gpt_neo" else fp64_tolerance(family)


def _stream(model, n: int = SEQ, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return model.hidden_states_ids(torch.randint(0, model.config.vocab_size, (n,), generator=g))


def _rel(A: torch.Tensor, B: torch.Tensor) -> float:
    return float((A - B).norm() / B.norm())


@pytest.mark.parametrize("family", FAMILIES)
def test_closed_equals_autodiff_every_layer(tiny64, family):
    """Last and middle position of a 9-token sequence (longer than the tiny GPT-Neo/Gemma-2 windows of 4)."""
    model = tiny64(family)
    assert jcx.supports(model)
    hs = _stream(model)
    for t in range(model.n_layers):
        for T in (SEQ - 1, SEQ // 2):
            ref = jac.in_context_jacobian(model, t, hs[t], T, method="autodiff")
            J = jac.in_context_jacobian(model, t, hs[t], T, method="closed")
            assert J.dtype == torch.float64 and J.shape == (model.d_model, model.d_model)
            assert _rel(J, ref) < _tolerance(family), (t, T)


@pytest.mark.parametrize("family", ["gpt_neo", "gemma2"])
def test_sliding_window_shorter_than_sequence(tiny64, family):
    """A local layer (window 4 < 9 tokens): positions outside the window must not enter the closed form."""
    model = tiny64(family)
    windows = [model.layer(t).attention.window for t in range(model.n_layers)]
    local = [t for t, w in enumerate(windows) if w is not None and w < SEQ]
    assert local, windows
    hs = _stream(model, seed=2)
    for t in local:
        ref = jac.in_context_jacobian(model, t, hs[t], method="autodiff")
        assert _rel(jac.in_context_jacobian(model, t, hs[t]), ref) < _tolerance(family)
        far = hs[t].clone()
        far[0] += 10.0  # outside the window of the last position: the Jacobian there does not change
        assert _rel(jcx.in_context_jacobian_closed(model, t, far), ref) < _tolerance(family)


@pytest.mark.parametrize("family", FAMILIES)
def test_key_and_value_paths_of_T_matter(tiny64, family):
    """With only the query path (the keys and values of T held fixed too) the Jacobian is wrong."""
    model = tiny64(family)
    H = _stream(model)[1]
    ref = jac.in_context_jacobian(model, 1, H, SEQ // 2, method="autodiff")
    query_only = jcx.in_context_jacobians_closed(model, 1, [H], [SEQ // 2], key_path=False)[0]
    assert _rel(query_only, ref) > 1e-2


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_batched_over_sequences_of_different_lengths(tiny64, family):
    model = tiny64(family)
    streams = [_stream(model, n, seed=n)[1] for n in (5, 9, 7)]
    positions = [None, 3, -2]
    J = jcx.in_context_jacobians_closed(model, 1, streams, positions)
    assert J.shape == (3, model.d_model, model.d_model)
    for p, (H, T) in enumerate(zip(streams, positions)):
        T = H.shape[0] - 1 if T is None else T
        assert _rel(J[p], jac.in_context_jacobian(model, 1, H, T, method="autodiff")) < _tolerance(family)


def test_in_context_stack_uses_the_closed_form(tiny64):
    model = tiny64("llama")
    hs = _stream(model)
    J = jac.in_context_stack(model, [hs], [SEQ - 1])
    for t in range(model.n_layers):
        ref = jac.in_context_jacobian(model, t, hs[t], method="autodiff").numpy()
        assert np.linalg.norm(J[t, 0] - ref) / np.linalg.norm(ref) < fp64_tolerance("llama")


def test_float32_model_close_to_float64(tiny_dir):
    """The model's own dtype: float32 results within float32 roundoff of the float64 ones."""
    m32 = lib.load_model(str(tiny_dir("bert")))
    hs = _stream(m32)
    J32 = jcx.in_context_jacobian_closed(m32, 1, hs[1])
    with in_float64(m32):
        J64 = jcx.in_context_jacobian_closed(m32, 1, hs[1])
    assert J32.dtype == torch.float64 and _rel(J32, J64) < 1e-4


def test_unsupported_and_bad_arguments(tiny64):
    model = tiny64("bert")
    H = _stream(model)[1]
    with pytest.raises(InputError):
        jac.in_context_jacobian(model, 1, H, method="finite differences")
    with pytest.raises(InputError):
        jcx.in_context_jacobians_closed(model, 1, [H, H], [None])
    model.config.position_embedding_type = "relative_key"
    try:
        assert not jcx.supports(model)
        with pytest.raises(InputError):
            jac.in_context_jacobian(model, 1, H, method="closed")
    finally:
        model.config.position_embedding_type = "absolute"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("family", ["bert", "llama", "olmo2", "gemma2"])
def test_cuda_in_context_stays_on_device(tiny_dir, family):
    cpu = lib.load_model(str(tiny_dir(family)), dtype=torch.float64)
    gpu = lib.load_model(str(tiny_dir(family)), dtype=torch.float64, device="cuda")
    H = _stream(cpu)[1]
    want = jac.in_context_jacobian(cpu, 1, H, SEQ // 2, method="autodiff")
    J = jac.in_context_jacobian(gpu, 1, H.cuda(), SEQ // 2)
    assert J.device.type == "cuda" and _rel(J.cpu(), want) < _tolerance(family)


def test_threads_give_the_serial_values_bitwise(tiny_dir):
    """Chapter 6 maps the in-context Jacobians over models in threads (lib.parallel.map_matrices).

    The map promises the values of a serial loop on one thread (``lib.parallel.one_thread``), not of a loop on
    torch's default threads: on CPUs whose kernels split a reduction across threads those differ by ~1e-14.
    """
    from lib.parallel import map_matrices, one_thread

    models = [lib.load_model(str(tiny_dir(f)), dtype=torch.float64) for f in ("llama", "bert", "gemma2", "gpt2")]
    streams = [_stream(m) for m in models]

    def stack(i):
        return jac.in_context_stack(models[i], [streams[i]], [SEQ // 2])

    with one_thread():
        serial = [stack(i) for i in range(len(models))]
    for got, ref in zip(map_matrices(stack, range(len(models)), workers=2), serial):
        np.testing.assert_array_equal(got, ref)
