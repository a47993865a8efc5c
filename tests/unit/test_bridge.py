"""Chapter 6 (lib.methods.bridge, lib.chapters.two_views): the closed form split at F, principal angles, nulls, in-context Jacobians."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.stats
import torch
from conftest import FAMILIES
from tiny_models import block_inputs, fp64_tolerance

import lib
from lib.chapters import two_views as bv
from lib.chapters import two_views_perturbation as bvp
from lib.methods.exactness import in_float64
from lib.jacobians import in_context as jcx
from lib.jacobians import sweep as jac
from lib.linalg import nonnormal as nn
from lib.methods import bridge as br
from lib.methods import steering


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


def test_share_estimate_and_degenerate_interval():
    """The size row of the estimate is ‖mean J_F‖/‖mean update‖; the bootstrap interval brackets it and
    collapses when every prompt is the same (what ``bootstrap_share`` checked before the shares)."""
    rng = np.random.default_rng(0)
    J, JF = rng.standard_normal((5, 4, 4)), rng.standard_normal((5, 4, 4))
    dec = br.Decomposition(J, JF, "post-norm")
    W = bv.share_weights(5, 300)
    tab = bv.share_table([br.resampled_shares(dec.update, {"attn": dec.J_F}, W)])
    est, lo, hi = tab.size_attn.iloc[0], tab.size_attn_lo.iloc[0], tab.size_attn_hi.iloc[0]
    assert est == pytest.approx(np.linalg.norm(JF.mean(0)) / np.linalg.norm(J.mean(0)), rel=1e-12)
    assert lo < est < hi
    assert tab.attn.iloc[0] == pytest.approx(np.sum(JF.mean(0) * J.mean(0)) / np.sum(J.mean(0) ** 2), rel=1e-12)
    same = br.Decomposition(np.repeat(J[:1], 5, 0), np.repeat(JF[:1], 5, 0), "pre-norm")
    t2 = bv.share_table([br.resampled_shares(same.update, {"attn": same.J_F}, bv.share_weights(5, 50))])
    e2, l2, h2 = t2.size_attn.iloc[0], t2.size_attn_lo.iloc[0], t2.size_attn_hi.iloc[0]
    assert l2 == pytest.approx(e2) and h2 == pytest.approx(e2)
    assert e2 == pytest.approx(np.linalg.norm(JF[0]) / np.linalg.norm(J[0] - np.eye(4)))
    assert t2.attn_lo.iloc[0] == pytest.approx(t2.attn.iloc[0]) == t2.attn_hi.iloc[0]


def test_projection_shares_add_up_where_the_size_ratio_does_not():
    """Two orthogonal halves of an update: each path's size ratio is 0.71 ("over half" for both, the old
    statistic), its projection share ½. Shares always sum to 1, and pass 1 when the paths cancel."""
    d = 5
    A, B = np.zeros((1, d, d)), np.zeros((1, d, d))
    A[0, 0, 0], B[0, 1, 2] = 1.0, 1.0
    one = np.ones((1, 1))
    out = br.resampled_shares(A + B, {"attn": A, "avoid": B}, one)
    assert out["attn"][0] == pytest.approx(0.5) and out["avoid"][0] == pytest.approx(0.5)
    assert out["size_attn"][0] == pytest.approx(np.sqrt(0.5)) == out["size_avoid"][0]
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((2, 6, d, d))
    W = rng.random((9, 6))
    out = br.resampled_shares(A + B, {"attn": A, "avoid": B}, W)
    np.testing.assert_allclose(out["attn"] + out["avoid"], 1.0, rtol=1e-12)
    means = np.tensordot(W, A, axes=1), np.tensordot(W, A + B, axes=1)
    np.testing.assert_allclose(out["attn"], np.sum(means[0] * means[1], axis=(1, 2))
                               / np.sum(means[1] ** 2, axis=(1, 2)), rtol=1e-12)
    np.testing.assert_allclose(br.resampled_inner(A, A, W), br.resampled_norms(A, W) ** 2, rtol=1e-12)
    cancel = br.resampled_shares(A[:1], {"attn": 2 * A[:1], "avoid": -A[:1]}, one)
    assert cancel["attn"][0] == pytest.approx(2.0) and cancel["avoid"][0] == pytest.approx(-1.0)


def test_share_table_resamples_the_median_over_layers_jointly():
    """The median over layers of each resample: the same prompts resampled in every layer."""
    rng = np.random.default_rng(2)
    W = bv.share_weights(7, 200, seed=3)
    Us = rng.standard_normal((3, 7, 4, 4))
    boots = [br.resampled_shares(U, {"attn": 0.3 * U + 0.1 * rng.standard_normal(U.shape)}, W) for U in Us]
    tab = bv.share_table(boots)
    assert tab.layer.tolist() == [1, 2, 3]
    per_resample = np.median(np.stack([b["attn"] for b in boots]), axis=0)
    assert tab.med.iloc[0] == pytest.approx(np.median(tab.attn)) == per_resample[0]
    np.testing.assert_allclose([tab.med_lo.iloc[0], tab.med_hi.iloc[0]],
                               np.quantile(per_resample[1:], [0.025, 0.975]), rtol=1e-12)
    assert (tab.med == tab.med.iloc[0]).all() and np.allclose(W[0], 1 / 7) and np.allclose(W.sum(1), 1)


@pytest.mark.parametrize("family", FAMILIES)
def test_in_context_decomposition_against_autodiff(tiny64, family):
    """In context the attention core's Jacobian A replaces F: J is the closed form bit for bit, J − J_A is
    autodiff of the block with the attention output detached, and on a one-token sequence A = F, so the
    attention path and its value path are the single-token J_F."""
    model = tiny64(family)
    H = model.hidden_states_ids(torch.arange(6) + 3)
    t, T = 1, 4
    dec = br.decompose_in_context(model, t, [H[t]], [T])
    np.testing.assert_array_equal(dec.J, jcx.in_context_jacobians_closed(model, t, [H[t]], [T]).numpy())

    def f(x):
        Hx = H[t].clone()
        Hx[T] = x
        return model.layer(t)(Hx[None])[0, T]

    def hook(_m, _a, out):
        return (out[0].detach(),) + tuple(out[1:]) if isinstance(out, tuple) else out.detach()

    handle = _attention_output_module(model, t).register_forward_hook(hook)
    try:
        avoid = torch.autograd.functional.jacobian(f, H[t][T]).numpy()
    finally:
        handle.remove()
    full = torch.autograd.functional.jacobian(f, H[t][T]).numpy()
    tol = 1e-6 if family == "gpt_neo" else fp64_tolerance(family)
    assert np.linalg.norm((dec.J[0] - dec.J_F[0]) - avoid) / np.linalg.norm(full) < tol
    assert np.linalg.norm(dec.J_F[0] - dec.J_value[0]) > 1e-4 * np.linalg.norm(full)  # softmax paths matter here
    one = br.decompose_in_context(model, t, [H[t][T : T + 1]], [0])
    single = br.decompose(model, t, H[t][T : T + 1])
    scale = np.linalg.norm(single.J_F)
    assert np.linalg.norm(one.J_F - single.J_F) / scale < tol and np.linalg.norm(one.J_value - single.J_F) / scale < tol


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


def test_spearman_null_is_the_exact_permutation_law():
    from itertools import permutations

    values, prob = br.spearman_null(6)
    r = np.array([scipy.stats.spearmanr(np.arange(6), q).statistic for q in permutations(range(6))])
    u, c = np.unique(np.round(r, 12), return_counts=True)
    np.testing.assert_allclose(values, u, atol=1e-12)
    np.testing.assert_allclose(prob, c / 720, rtol=1e-12)
    assert br.two_sided_p(1.0, (values, prob)) == pytest.approx(2 / 720)  # the two perfect orderings
    assert br.two_sided_p(-values[1], (values, prob)) == pytest.approx(12 / 720)  # the next: r = ±0.943
    v3, p3 = br.spearman_null(6, 3)  # the mean of three groups: against Monte Carlo
    draws = np.random.default_rng(0).choice(values, size=(40000, 3), p=prob).mean(1)
    assert abs(np.mean(np.abs(draws) >= 0.5 - 1e-12) - br.two_sided_p(0.5, (v3, p3))) < 0.005
    assert p3.sum() == pytest.approx(1.0) and v3[0] == pytest.approx(-1.0)
    rng = np.random.default_rng(4)
    x, y = rng.random(18), rng.random(18)
    res = br.stratified_spearman(x, y, np.repeat(np.arange(3), 6))
    assert res["p"] == pytest.approx(float(br.two_sided_p(res["r"], (v3, p3))))


def _values_next(null):
    """The largest |r| short of a perfect ordering."""
    return np.unique(np.abs(null[0]))[-2]


def test_six_layers_under_bh_over_twelve_tests_pass_only_a_perfect_ordering():
    """The test section 6.3 ran: one trained model's six layers, Benjamini–Hochberg over twelve tests. The
    best ordering short of perfect (r = 0.943, p = 12/720) fails even with the other eleven at p = 1."""
    null = br.spearman_null(6)
    p = np.ones(12)
    p[0] = br.two_sided_p(-_values_next(null), null)
    assert not br.bh_reject(p)[0]
    p[0] = br.two_sided_p(1.0, null)
    assert br.bh_reject(p)[0]


def test_bh_reject_is_benjamini_hochberg_batched():
    from lib.stats import benjamini_hochberg

    P = np.random.default_rng(5).random((200, 12)) ** 3
    np.testing.assert_array_equal(br.bh_reject(P), np.array([benjamini_hochberg(row) <= 0.05 for row in P]))
    assert not br.bh_reject(np.full((2, 4), 0.9)).any()


def test_spearman_power_has_the_size_of_the_test_and_finds_planted_correlations():
    """Known answers: with one test (no correction) and nothing planted, the rejection rate is the exact size
    P(p ≤ 0.05) of the six-point permutation test; planted correlations are found more often with three
    variants than with one, and a strong ρ = 0.8 at six layers under BH over twelve is found under half the
    time (the chapter's trained design)."""
    values, prob = br.spearman_null(6)
    size = prob[br.two_sided_p(values, (values, prob)) <= 0.05].sum()
    pw0 = br.spearman_power([(6, 1)], [0.0], reps=20000, seed=1)[0, 0]
    assert abs(pw0 - size) < 4 * np.sqrt(size * (1 - size) / 20000)
    designs = ([(6, 1)] * 3 + [(6, 3)] * 3) * 2
    pw = br.spearman_power(designs, [0.0, 0.8, 0.99], reps=1500)
    assert pw[0].max() < 0.02
    assert pw[1, 0] < 0.5 < pw[1, 3] and pw[2, 0] > 0.8
    one = br.spearman_power(designs, [0.8], planted=[0], reps=1500)
    assert one[0, 0] < pw[1, 0] and one[0, 1:].max() < 0.02  # alone, an effect is harder to find


# -- one token or the whole context ---------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_in_context_stack_against_autograd(tiny64, family):
    """Against autograd of the plain block (no MLP-at-one-row shortcut), at an inner position."""
    model = tiny64(family)
    H = model.hidden_states_ids(torch.arange(6) + 3)
    J = jac.in_context_stack(model, [H], [4])
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
    df = bvp.perturbation_errors(model, 1, H, 4, eps, n_dirs=4)
    ctx = df[df.jacobian == "in-context"].error.to_numpy()
    single = df[df.jacobian == "single-token"].error.to_numpy()
    slope = np.polyfit(np.log(eps), np.log(ctx), 1)[0]
    assert 0.8 < slope < 1.2  # the linearization error is O(ε): the Jacobian is right
    assert single.min() > 10 * ctx.max()  # the single-token Jacobian has an error that does not vanish
    assert next(model.hf_model.parameters()).dtype == torch.float64  # dtype restored


def test_float64_context_restores_dtype(tiny_dir):
    model = lib.load_model(str(tiny_dir("llama")))
    with in_float64(model):
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
        with steering.maybe_steer(model, u, alpha, radius=float(lib.linalg.spectra.spectral_radius(
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
