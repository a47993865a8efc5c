"""Block Jacobians of lib.jacobians.sweep: autodiff against references on every family (checks J1, J2, J8, J10)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import FAMILIES
from tiny_models import block_inputs, fp64_tolerance

import lib
from lib.errors import InputError
from lib.jacobians import sweep as jac
from lib.linalg.spectra import eigvals
from lib.parallel import available_cores, one_thread


@pytest.mark.parametrize("family", FAMILIES)
def test_against_finite_differences_J1(tiny64, family):
    model = tiny64(family)
    x = block_inputs(model, P=1)[0]
    t = 1
    J = jac.layer_jacobian(model, t, x).cpu().numpy()
    f = jac.block_fn(model, t)
    # Hugging Face's RMSNorm computes in float32 even in a float64 model, so those families get the
    # fp32 step and tolerance of J1; the LayerNorm families are fp64 throughout.
    rms = family in ("llama", "olmo2", "gemma2")
    eps = (1e-3 if rms else 1e-6) * float(x.norm())
    with torch.no_grad():
        fd = np.stack(
            [((f((x + eps * e)[None]) - f((x - eps * e)[None]))[0] / (2 * eps)).numpy() for e in torch.eye(len(x), dtype=x.dtype)],
            axis=1,
        )
    assert np.linalg.norm(J - fd) / np.linalg.norm(J) < (1e-3 if rms else 1e-6)


@pytest.mark.parametrize("family", FAMILIES)
def test_batched_matches_autograd_loop_and_modes(tiny_dir, family):
    model = lib.load_model(str(tiny_dir(family)))  # fp32, as the chapter runs it
    X = block_inputs(model, P=4)
    f = jac.block_fn(model, 1)
    rev = jac.layer_jacobians(model, 1, X)
    fwd = jac.layer_jacobians(model, 1, X, mode="fwd")
    tiny_budget = jac.layer_jacobians(model, 1, X, budget_mb=1e-4)  # forces prompt and tangent chunking
    for p in range(len(X)):
        ref = torch.autograd.functional.jacobian(lambda v: f(v[None])[0], X[p].float()).detach().double()
        scale = ref.norm()
        assert (rev[p] - ref).norm() / scale < 1e-5
        assert (fwd[p] - ref).norm() / scale < 1e-5
        assert (tiny_budget[p] - ref).norm() / scale < 1e-5
    assert rev.dtype == torch.float64 and rev.shape == (4, model.d_model, model.d_model)


@pytest.mark.parametrize("family", FAMILIES)
def test_sub_blocks_compose_to_block(tiny64, family):
    model = tiny64(family)
    X = block_inputs(model, P=2)
    attn, mlp = jac.sub_block_fns(model, 1)
    with torch.no_grad():
        np.testing.assert_allclose(mlp(attn(X)).numpy(), jac.block_fn(model, 1)(X).numpy(), rtol=1e-10, atol=1e-10)  # same ops
    JA = jac.layer_jacobians(model, 1, X, part="attn")
    JM = jac.layer_jacobians(model, 1, X, part="mlp")
    J = jac.layer_jacobians(model, 1, X)
    assert torch.linalg.norm(JM @ JA - J) / torch.linalg.norm(J) < fp64_tolerance(family)


@pytest.mark.parametrize("family", FAMILIES)
def test_closed_form_equals_autodiff_of_the_modules(tiny64, family):
    """lib.jacobians.single_token is exact: block, attention and MLP Jacobians equal autodiff of the real modules (fp64)."""
    model = tiny64(family)
    X = block_inputs(model, P=3)
    for part in ("block", "attn", "mlp"):
        closed = jac.layer_jacobians(model, 1, X, part=part)
        auto = jac.layer_jacobians(model, 1, X, part=part, method="autodiff")
        assert torch.linalg.norm(closed - auto) / torch.linalg.norm(auto) < fp64_tolerance(family), part


@pytest.mark.parametrize("family", FAMILIES)
def test_norm_jacobians_are_diagonal_minus_low_rank(tiny64, family):
    """Every norm module of every family: the structured Jacobian equals jacrev of the module (fp64)."""
    from lib.jacobians.single_token import norm_jacobian

    model = tiny64(family)
    X = block_inputs(model, P=2)
    norms = [m for m in model.blocks[1].modules() if "norm" in type(m).__name__.lower()]
    assert norms
    for norm in norms:
        if norm.weight.shape[-1] != model.d_model:  # OLMo-2's q/k norms act on heads, not on the residual
            continue
        want = torch.stack([torch.func.jacrev(norm)(x) for x in X])
        got = norm_jacobian(norm, X).dense()
        assert torch.linalg.norm(got - want) / torch.linalg.norm(want) < fp64_tolerance(family), type(norm).__name__


def test_unknown_method_is_refused(tiny64):
    with pytest.raises(InputError, match="method must be one of"):
        jac.layer_jacobians(tiny64("gpt2"), 1, block_inputs(tiny64("gpt2"), P=1), method="fast")


@pytest.mark.parametrize("family", ["llama", "gpt2", "bert"])
def test_single_token_attention_is_ov_path_J2(tiny64, family):
    """One token attends only to itself: the attention sub-block is ``x + O(V n(x) + b_V) + b_O``."""
    model = tiny64(family)
    x = block_inputs(model, P=1)
    layer = model.layer(1)
    F = layer.attention.layer_matrix()
    blk = model.blocks[1]
    JA = jac.layer_jacobians(model, 1, x, part="attn")[0]
    torch.set_grad_enabled(False)
    if family == "bert":  # post-LN: u = LN(z), z = x + F x + const
        ln = blk.attention.output.LayerNorm
        z = x[0] + x[0] @ F.T + _const(layer)
        Jln = torch.func.jacrev(ln)(z)
        ref = Jln @ (torch.eye(len(F), dtype=F.dtype) + F)
    else:
        norm = blk.input_layernorm if family == "llama" else blk.ln_1
        ref = torch.eye(len(F), dtype=F.dtype) + F @ torch.func.jacrev(norm)(x[0])
    torch.set_grad_enabled(True)
    assert torch.linalg.norm(JA - ref) / torch.linalg.norm(ref) < fp64_tolerance(family)


def _const(layer):
    a = layer.attention
    c = torch.zeros(a.O.shape[0], dtype=torch.float64)
    if a.b_V is not None:
        c = c + a.O @ a.b_V
    if a.b_O is not None:
        c = c + a.b_O
    return c


@pytest.mark.parametrize("family", ["llama", "gemma2", "gpt_neo"])
def test_in_context_length_one_equals_single_token(tiny64, family):
    model = tiny64(family)
    x = block_inputs(model, P=1)
    np.testing.assert_allclose(
        jac.in_context_jacobian(model, 1, x).numpy(), jac.layer_jacobian(model, 1, x[0]).numpy(), rtol=0, atol=fp64_tolerance(family)
    )


def test_in_context_against_finite_differences(tiny64):
    model = tiny64("gpt2")  # fp64 throughout (GPT-Neo upcasts q·k to float32, RMSNorm families their norms)
    H = model.hidden_states_ids(torch.arange(6) + 3)[1]
    J = jac.in_context_jacobian(model, 1, H, T=4).numpy()
    layer = model.layer(1)
    eps = 1e-6
    cols = []
    for e in torch.eye(H.shape[1], dtype=H.dtype):
        Hp, Hm = H.clone(), H.clone()
        Hp[4] += eps * e
        Hm[4] -= eps * e
        with torch.no_grad():
            cols.append(((layer(Hp) - layer(Hm))[4] / (2 * eps)).numpy())
    fd = np.stack(cols, axis=1)
    assert np.linalg.norm(J - fd) / np.linalg.norm(J) < 1e-6


def test_linearization_slope_J10(tiny64):
    model = tiny64("gpt2")  # fp64 throughout, so roundoff stays far below the linearization error
    x = block_inputs(model, P=1)[0]
    J = jac.layer_jacobian(model, 1, x)
    f = jac.block_fn(model, 1)
    v = torch.randn(len(x), generator=torch.Generator().manual_seed(0), dtype=x.dtype)
    v = v / v.norm()
    eps = np.array([1e-4, 1e-3, 1e-2]) * float(x.norm())
    errs = []
    for e in eps:
        with torch.no_grad():
            d = f((x + e * v)[None])[0] - f(x[None])[0] - e * (J @ v)
        errs.append(float(d.norm() / (e * (J @ v).norm())))
    slope = np.polyfit(np.log(eps), np.log(errs), 1)[0]
    assert 0.8 < slope < 1.2


def test_minilm_post_ln_zero_eigenvalues_J8(minilm):
    X, _ = jac.residual_inputs(minilm, ["the dog runs near the river .", "a girl reads one old book ."])
    for t in (0, 3, 5):
        J = jac.layer_jacobians(minilm, t, X[t]).cpu().numpy()
        for Jp in J:
            lam = np.abs(eigvals(Jp))
            assert np.sum(lam < 1e-4 * lam.max()) >= 2
        lam = np.abs(eigvals(J.mean(0)))
        assert np.sum(lam < 1e-4 * lam.max()) >= 1


def test_sweep_shapes(tiny_dir):
    model = lib.load_model(str(tiny_dir("llama")))
    X = torch.stack([model.hidden_states_ids(torch.arange(5) + i)[:, -1] for i in range(3)], dim=1)
    res = jac.sweep(model, X, keep_per_prompt=True, parts=True, progress=False)
    L, d = model.n_layers, model.d_model
    assert res.mean.shape == (L, d, d) and res.per_prompt.shape == (L, 3, d, d)
    np.testing.assert_allclose(res.mean, res.per_prompt.astype(np.float64).mean(1), rtol=1e-5, atol=1e-6)
    assert set(res.parts) == {"attn", "mlp"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma2"])
def test_cuda_jacobians_stay_on_device(tiny_dir, family):
    """Both methods run on the model's device and agree with the CPU result."""
    cpu = lib.load_model(str(tiny_dir(family)), dtype=torch.float64)
    gpu = lib.load_model(str(tiny_dir(family)), dtype=torch.float64, device="cuda")
    X = block_inputs(cpu, P=2)
    want = jac.layer_jacobians(cpu, 1, X)
    for method in jac.METHODS:
        J = jac.layer_jacobians(gpu, 1, X.cuda(), method=method)
        assert J.device.type == "cuda"
        assert torch.linalg.norm(J.cpu() - want) / torch.linalg.norm(want) < fp64_tolerance(family)


def test_flop_count_of_the_closed_form():
    from lib.jacobians.single_token import flops

    assert flops(4096, 14336) == 2 * 4096**2 * 14336 + 2 * 4096**3
    assert flops(8, 16, prompts=3, layers=2) == 6 * (2 * 64 * 16 + 2 * 512)


def test_mlp_width_per_family(tiny64):
    assert jac.mlp_width(tiny64("gpt2")) == 4 * 32  # n_inner unset: 4d
    assert jac.mlp_width(tiny64("llama")) == 64 and jac.mlp_width(tiny64("bert")) == 64


def test_side_by_side_only_for_small_unsharded_cpu_models():
    """One model at a time where two models' transient memory could exceed what the memory guards checked for one:
    a wide model, a sharded one, or one on a GPU."""
    from types import SimpleNamespace

    def model(d=128, device_map=None, device="cpu"):
        return SimpleNamespace(d_model=d, device_map=device_map,
                               param=lambda: SimpleNamespace(device=torch.device(device)))

    assert jac.side_by_side_workers([model(), model(jac.SIDE_BY_SIDE_MAX_D)]) == available_cores()
    assert jac.side_by_side_workers([model(), model(jac.SIDE_BY_SIDE_MAX_D + 1)]) == 1
    assert jac.side_by_side_workers([model(device_map={"": "cpu"}), model()]) == 1
    assert jac.side_by_side_workers([model(device="meta"), model()]) == 1


def test_in_context_twins_side_by_side_equal_one_model_at_a_time(monkeypatch):
    from lib.models.decoder.language import prompts

    pair = lib.load_twins("book-decoder", seeds=(0,))
    texts = prompts(3)
    got = jac.in_context_twins(pair, texts)
    monkeypatch.setattr(jac, "side_by_side_workers", lambda twins: 1)
    ref = jac.in_context_twins(pair, texts)
    for s in ref.series:
        np.testing.assert_array_equal(got[s].per_prompt, ref[s].per_prompt)
        np.testing.assert_array_equal(got[s].mean, ref[s].mean)
        torch.testing.assert_close(got.inputs[s], ref.inputs[s], rtol=0, atol=0)


def test_autograd_difference_and_sweep_twins():
    """Section 4.2's check on a real prompt, and the twins' sweep equals a sweep of each model on the same prompts."""
    from lib.models.decoder.language import prompts

    pair = lib.load_twins("book-decoder", seeds=(0, 1))
    texts = prompts(3)
    X, _ = jac.residual_inputs(pair.trained, texts[:1])
    assert jac.autograd_difference(pair.trained, 2, X[2, 0]) < 1e-5
    assert jac.side_by_side_workers(pair) == available_cores()  # the models run side by side
    got = jac.sweep_twins(pair, texts, parts=True, progress=False)
    assert got.series == ["trained", "random init, seed 0", "random init, seed 1"]
    assert got.twin_series == got.series[1:] and got.twins is pair
    for model in pair:
        label = pair.series(model)
        with one_thread():  # the setting each of the map's workers computes under
            Xm, _ = jac.residual_inputs(model, texts)
            ref = jac.sweep(model, Xm, keep_per_prompt=True, parts=True, progress=False)
        torch.testing.assert_close(got.inputs[label], Xm, rtol=0, atol=0)
        np.testing.assert_array_equal(got[label].mean, ref.mean)
        np.testing.assert_array_equal(got[label].per_prompt, ref.per_prompt)
        np.testing.assert_array_equal(got[label].parts["mlp"], ref.parts["mlp"])
