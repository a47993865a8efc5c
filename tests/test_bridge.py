"""Chapter 6 (lib.bridge, lib.bridge_views): the closed form split at F, principal angles, nulls, in-context Jacobians."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.stats
import torch
from conftest import FAMILIES
from tiny_models import block_inputs, fp64_tolerance

import lib
from lib import bridge as br
from lib import bridge_views as bv
from lib import jacobian as jac
from lib import nonnormal as nn
from lib import steering


def _attention_output_module(model, t):
    """The module whose output is the attention core's ``F n + b`` (or a tuple starting with it)."""
    blk = model.blocks[t]
    return {"bert": lambda: blk.attention.output.dense, "albert": lambda: blk.attention.dense,
            "gpt2": lambda: blk.attn, "gpt_neo": lambda: blk.attn}.get(model.family, lambda: blk.self_attn)()


def _detached_attention_jacobian(model, t, X):
    """Autodiff Jacobian of block ``t`` with the attention core's output detached: the path that avoids F."""
    def hook(_m, _a, out):
        if isinstance(out, tuple):
            return (out[0].detach(),) + tuple(out[1:])
        return out.detach()

    handle = _attention_output_module(model, t).register_forward_hook(hook)
    try:
        return jac.layer_jacobians(model, t, X, method="autodiff")
    finally:
        handle.remove()


# -- the closed form split at F ---------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_decomposition_matches_autodiff_every_family(tiny64, family):
    """J = J_skip + J_F equals autodiff of the real block, and J − J_F equals autodiff with the attention
    output detached (an independent definition of "the path that avoids F")."""
    model = tiny64(family)
    X = block_inputs(model)
    dec = br.decompose(model, 1, X)
    J_ad = jac.layer_jacobians(model, 1, X, method="autodiff").numpy()
    skip_ad = _detached_attention_jacobian(model, 1, X).numpy()
    scale = np.linalg.norm(J_ad)
    assert np.linalg.norm(dec.J - J_ad) / scale < fp64_tolerance(family)
    assert np.linalg.norm((dec.J - dec.J_F) - skip_ad) / scale < fp64_tolerance(family)
    assert np.linalg.norm(dec.J_F) > 1e-3 * scale  # the attention path is not trivially zero


@pytest.mark.parametrize("family", ["bert", "llama", "gemma2"])
def test_attention_factors_rebuild_the_attention_sub_block(tiny64, family):
    model = tiny64(family)
    X = block_inputs(model)
    S, L, R = br.attention_factors(model, 1, X)
    F = model.layer(1).attention.layer_matrix()
    ref = jac.layer_jacobians(model, 1, X, part="attn", method="autodiff")
    assert torch.linalg.norm(S + L @ F @ R - ref) / torch.linalg.norm(ref) < fp64_tolerance(family)


def test_layout_and_reference(tiny64):
    assert br.layout(tiny64("bert")) == "post-norm" and br.layout(tiny64("llama")) == "pre-norm"
    np.testing.assert_array_equal(br.reference("pre-norm", 3), np.eye(3))
    np.testing.assert_array_equal(br.reference("post-norm", 3), np.zeros((3, 3)))


def test_bootstrap_share_estimate_and_degenerate_interval():
    rng = np.random.default_rng(0)
    J, JF = rng.standard_normal((5, 4, 4)), rng.standard_normal((5, 4, 4))
    dec = br.Decomposition(J, JF, "post-norm")
    est, lo, hi = br.bootstrap_share(dec, n_boot=300)
    assert est == pytest.approx(np.linalg.norm(JF.mean(0)) / np.linalg.norm(J.mean(0)), rel=1e-12)
    assert lo < est < hi
    same = br.Decomposition(np.repeat(J[:1], 5, 0), np.repeat(JF[:1], 5, 0), "pre-norm")
    e2, l2, h2 = br.bootstrap_share(same, n_boot=50)
    assert l2 == pytest.approx(e2) and h2 == pytest.approx(e2)
    assert e2 == pytest.approx(np.linalg.norm(JF[0]) / np.linalg.norm(J[0] - np.eye(4)))


# -- principal angles and their chance distribution ------------------------------------------------------------
@pytest.mark.parametrize("d,p,q", [(10, 1, 3), (10, 3, 1), (30, 4, 4), (7, 2, 5), (384, 2, 9)])
def test_principal_angles_match_scipy(d, p, q):
    rng = np.random.default_rng(d + p + q)
    A, B = rng.standard_normal((d, p)), rng.standard_normal((d, q))
    np.testing.assert_allclose(br.principal_angles(A, B), np.sort(scipy.linalg.subspace_angles(A, B)), atol=1e-12)


def test_principal_angles_small_angles_and_batches():
    e = np.eye(6)
    for eps in (1e-12, 1e-9, 1e-5):
        B = (e[:, 0] + eps * e[:, 1])[:, None]
        ref = np.sort(scipy.linalg.subspace_angles(e[:, :1], B))
        np.testing.assert_allclose(br.principal_angles(e[:, :1], B), ref, rtol=1e-6, atol=1e-18)
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((5, 8, 2)), rng.standard_normal((8, 3))
    batched = br.principal_angles(A, B)
    for i in range(5):
        np.testing.assert_allclose(batched[i], np.sort(scipy.linalg.subspace_angles(A[i], B)), atol=1e-12)
    np.testing.assert_allclose(br.principal_angles(A[0], 3 * A[0] @ np.array([[1.0, 2.0], [0.0, 1.0]])), 0, atol=1e-7)


@pytest.mark.parametrize("d,q", [(20, 1), (50, 8), (128, 9)])
def test_angle_null_is_the_beta_law(d, q):
    """For a random line and a fixed q-dim subspace, cos²θ ~ Beta(q/2, (d − q)/2)."""
    theta = br.angle_null(d, 1, q, m=4000, seed=3)
    ks = scipy.stats.kstest(np.cos(theta) ** 2, scipy.stats.beta(q / 2, (d - q) / 2).cdf)
    assert ks.pvalue > 1e-3


def test_random_subspaces_are_orthonormal_and_empirical_p():
    R = br.random_subspaces(12, 3, 5, seed=0)
    np.testing.assert_allclose(np.swapaxes(R, 1, 2) @ R, np.broadcast_to(np.eye(3), (5, 3, 3)), atol=1e-12)
    null = np.arange(1, 100, dtype=float)
    assert br.empirical_p(0.5, null) == pytest.approx(1 / 100)
    assert br.empirical_p(200.0, null, smaller=False) == pytest.approx(1 / 100)
    assert br.empirical_p(50.0, null) == pytest.approx(51 / 100)


def test_eigen_subspace_keeps_conjugate_pairs_together():
    rng = np.random.default_rng(2)
    Q = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    D = np.zeros((6, 6))
    D[:2, :2] = [[3.0, 1.0], [-1.0, 3.0]]  # λ = 3 ± i, the leading pair
    D[2:, 2:] = np.diag([2.0, 1.0, 0.5, 0.1])
    M = Q @ D @ Q.T
    B1 = br.eigen_subspace(M, 1)
    assert B1.shape == (6, 2)
    np.testing.assert_allclose(br.principal_angles(B1, Q[:, :2]), 0, atol=1e-7)
    B3 = br.eigen_subspace(M, 3)
    assert B3.shape == (6, 3)
    np.testing.assert_allclose(br.principal_angles(B3, Q[:, :3]), 0, atol=1e-7)


def test_relative_departure_matches_schur():
    rng = np.random.default_rng(4)
    M = rng.standard_normal((30, 30))
    assert br.relative_departure(M) == pytest.approx(nn.henrici(M) / np.linalg.norm(M), rel=1e-10)
    S = M + M.T
    assert br.relative_departure(S) < 1e-6


# -- the stratified rank test ---------------------------------------------------------------------
def test_stratified_spearman_ignores_differences_between_groups():
    rng = np.random.default_rng(6)
    x = np.tile(np.arange(6.0), 4)
    groups = np.repeat(np.arange(4), 6)
    y_within = x + 0.01 * rng.standard_normal(24)
    res = br.stratified_spearman(x, y_within, groups, n_perm=2000)
    assert res["r"] == pytest.approx(1.0) and res["p"] < 0.01 and res["lo"] > 0.5
    # a relation between groups only: group means of x and y both rise, nothing within
    xb = groups + 0.1 * rng.standard_normal(24)
    yb = groups + 0.1 * rng.standard_normal(24)
    assert scipy.stats.spearmanr(xb, yb).statistic > 0.8
    res_b = br.stratified_spearman(xb, yb, groups, n_perm=2000)
    assert res_b["null_lo"] < res_b["r"] < res_b["null_hi"] and res_b["p"] > 0.05


# -- one token or the whole context ---------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_in_context_stack_against_autograd(tiny64, family):
    """Against autograd of the plain block (no MLP-at-one-row shortcut), at an inner position."""
    model = tiny64(family)
    H = model.hidden_states_ids(torch.arange(6) + 3)
    J = bv.in_context_stack(model, [H], [4])
    for t in range(model.n_layers):
        def f(x, t=t):
            Hx = H[t].clone()
            Hx[4] = x
            return model.layer(t)(Hx[None])[0, 4]

        ref = torch.autograd.functional.jacobian(f, H[t][4]).numpy()
        # the closed form is float64 throughout; GPT-Neo's q·k and softmax run in float32 (autograd's reference)
        tol = 1e-6 if family == "gpt_neo" else fp64_tolerance(family)
        assert np.linalg.norm(J[t, 0] - ref) / np.linalg.norm(ref) < tol
        single = jac.layer_jacobian(model, t, H[t][4]).numpy()
        assert np.linalg.norm(J[t, 0] - single) / np.linalg.norm(ref) > 1e-4  # context matters here


def test_funnel_erank_is_the_cumulative_products_last_entry():
    rng = np.random.default_rng(3)
    for d in (16, 96):
        Js = np.eye(d) + rng.standard_normal((5, d, d)) / np.sqrt(d)
        assert bv._funnel_erank(Js) == pytest.approx(float(nn.cumulative_product(Js).erank[-1]), rel=1e-12)


def test_perturbation_errors_linear_for_in_context_only(tiny64):
    model = tiny64("gpt2")
    H = model.hidden_states_ids(torch.arange(6) + 3)[1]
    eps = [1e-4, 1e-3, 1e-2]
    df = bv.perturbation_errors(model, 1, H, 4, eps, n_dirs=4)
    ctx = df[df.jacobian == "in-context"].error.to_numpy()
    single = df[df.jacobian == "single-token"].error.to_numpy()
    slope = np.polyfit(np.log(eps), np.log(ctx), 1)[0]
    assert 0.8 < slope < 1.2  # the linearization error is O(ε): the Jacobian is right
    assert single.min() > 10 * ctx.max()  # the single-token Jacobian has an error that does not vanish
    assert next(model.hf_model.parameters()).dtype == torch.float64  # dtype restored


def test_float64_context_restores_dtype(tiny_dir):
    model = lib.load_model(str(tiny_dir("llama")))
    with bv.float64(model):
        assert next(model.hf_model.parameters()).dtype == torch.float64
    assert next(model.hf_model.parameters()).dtype == torch.float32


def test_steering_views_large_edit_aligns_both_views(tiny64):
    model = tiny64("llama")
    u = np.random.default_rng(0).standard_normal(model.d_model)
    u /= np.linalg.norm(u)

    H = [model.hidden_states_ids(torch.arange(5) + i) for i in range(3)]
    X = torch.stack([h[:, -1] for h in H], dim=1)
    W_before = model.blocks[-1].self_attn.o_proj.weight.clone()
    out = bv.steering_views_at(model, u, [0, 1000], X[-2], H)
    assert out.spectral.iloc[1] > 0.99 and out.J_sv.iloc[1] > 0.99
    assert out.spectral.iloc[0] < 0.9
    assert torch.equal(model.blocks[-1].self_attn.o_proj.weight, W_before)  # the edit is undone


def test_steering_views_intervals_over_prompts(tiny64):
    """The token alignment is pooled over every token of every prompt; its bootstrap interval brackets it and
    collapses when every prompt is the same."""
    model = tiny64("llama")
    u = np.random.default_rng(1).standard_normal(model.d_model)
    u /= np.linalg.norm(u)
    H = [model.hidden_states_ids(torch.arange(4 + i) + i) for i in range(4)]  # lengths 4..7: pooling matters
    X = torch.stack([h[-2, -1] for h in H])
    out = bv.steering_views_at(model, u, [0, 5], X, H, n_boot=100)
    t = model.n_layers - 1
    for k, alpha in enumerate([0, 5]):
        with steering.maybe_steer(model, u, alpha, radius=float(lib.spectra.spectral_radius(
                model.layer(t).attention.layer_matrix()))), torch.no_grad():
            o = np.concatenate([model.layer(t)(h[t]).numpy() for h in H])
        pooled = np.mean(np.abs(o @ u) / np.linalg.norm(o, axis=1))
        assert out.tokens.iloc[k] == pytest.approx(pooled, rel=1e-12)
        for name in ("tokens", "J_write", "share"):
            assert out[f"{name}_lo"].iloc[k] <= out[name].iloc[k] <= out[f"{name}_hi"].iloc[k]
            assert out[f"{name}_hi"].iloc[k] > out[f"{name}_lo"].iloc[k]
    same = bv.steering_views_at(model, u, [5], X[:1].expand(3, -1), [H[0]] * 3, n_boot=50)
    for name in ("tokens", "J_write", "share"):
        assert same[f"{name}_hi"].iloc[0] - same[f"{name}_lo"].iloc[0] < 1e-12
    with pytest.raises(ValueError, match="same prompts"):
        bv.steering_views_at(model, u, [0], X[:2], H)


def test_resampled_norms_equal_the_norms_of_the_weighted_sums():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((5, 4, 4))
    W = rng.random((7, 5))
    expected = [np.linalg.norm(np.tensordot(w, A, axes=1)) for w in W]
    np.testing.assert_allclose(br.resampled_norms(A, W), expected, rtol=1e-12)
