"""lib.funnel_stats: vectorised metrics against lib.nonnormal, the prompt bootstrap, the trend test and
the verdict rules of chapter 4 (section 4.8)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import lib
from lib import funnel_stats as fs
from lib import jacobian as jac
from lib import nonnormal as nn
from lib.results import VERDICTS


def _stack(L=4, P=12, d=10, seed=0, scale=0.4):
    rng = np.random.default_rng(seed)
    return np.eye(d) + scale * rng.standard_normal((L, P, d, d)) / np.sqrt(d)


def test_spectral_metrics_match_nonnormal():
    J = _stack(L=5, P=1)[:, 0]
    m = fs.spectral_metrics(J)
    for l, Jl in enumerate(J):
        assert m["f_C"][l] == nn.complex_fraction(Jl)
        assert m["delta_H"][l] == pytest.approx(nn.henrici_rel(Jl), rel=1e-9)
        assert m["r_rot"][l] == pytest.approx(nn.rotation_fraction(Jl - np.eye(len(Jl))), rel=1e-12)
        assert m["erank"][l] == pytest.approx(nn.effective_rank(Jl), rel=1e-12)


def test_post_ln_contrast_uses_J_itself():
    """update=False: δ_H and r_rot of J̄ (no identity subtracted); a rotation J = R is all rotation on J,
    and J − I is not."""
    theta = 0.7
    R = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    J = np.kron(np.eye(3), R) @ np.diag([1, 1, 1, 1, 1, 1.0]) + np.triu(np.ones((6, 6)), 3)  # non-normal part
    on_j, on_update = fs.spectral_metrics(J, update=False), fs.spectral_metrics(J, update=True)
    assert on_j["delta_H"] == pytest.approx(nn.henrici(J) / np.linalg.norm(J), rel=1e-9)
    assert on_j["r_rot"] == pytest.approx(nn.rotation_fraction(J), rel=1e-12)
    assert on_update["delta_H"] == pytest.approx(nn.henrici_rel(J), rel=1e-9)
    assert on_j["delta_H"] != pytest.approx(on_update["delta_H"], rel=1e-3)


def test_funnel_eranks_match_cumulative_product():
    J = _stack(L=5, P=3, d=12, scale=1.5)
    got = fs.funnel_eranks(np.moveaxis(J, 1, 0))  # (P, L, d, d) -> (P, L + 1)
    for p in range(3):
        np.testing.assert_allclose(got[p], nn.cumulative_product(J[:, p]).erank, rtol=1e-10)


def test_bootstrap_weights_and_resampled_means():
    W = fs.bootstrap_weights(7, 50, seed=1)
    assert W.shape == (50, 7)
    np.testing.assert_allclose(W.sum(1), 1.0)
    assert np.all(np.round(W * 7) == W * 7)  # counts / n
    np.testing.assert_array_equal(W, fs.bootstrap_weights(7, 50, seed=1))
    per = _stack(L=3, P=7, d=4).astype(np.float32)
    onehot = np.eye(7)[[2, 5]]
    got = fs.resampled_means(per, onehot)
    np.testing.assert_allclose(got[0], per[:, 2], rtol=1e-6)
    np.testing.assert_allclose(got[1], per[:, 5], rtol=1e-6)
    np.testing.assert_allclose(fs.resampled_means(per, np.full((1, 7), 1 / 7))[0], per.astype(np.float64).mean(1),
                               rtol=1e-12)
    assert got.dtype == np.float64
    with pytest.raises(ValueError):
        fs.resampled_means(per, np.ones((2, 6)))


def test_ols_slope_and_trend_directions():
    x = np.arange(1, 7) / 6
    Y = np.stack([2 - 3 * x, 0.5 + 0 * x])
    np.testing.assert_allclose(fs.ols_slope(x, Y), [-3.0, 0.0], atol=1e-12)
    assert fs.ols_slope(x, Y[0]) == pytest.approx(np.polyfit(x, Y[0], 1)[0])
    rng = np.random.default_rng(0)
    falls = fs.trend_test(x, 1 - x, 1 - x + 0.01 * rng.standard_normal((200, 6)))
    flat = fs.trend_test(x, 0 * x, 0.5 * rng.standard_normal((200, 6)))
    rises = fs.trend_test(x, x, x + 0.01 * rng.standard_normal((200, 6)))
    assert (falls.direction, flat.direction, rises.direction) == ("falls", "flat", "rises")
    assert falls.slope.lo < -1 < falls.slope.hi
    assert fs.trend_verdict(falls, [flat, rises]) == "reproduced"
    assert fs.trend_verdict(falls, [flat, falls]) == "not specific to training"
    assert fs.trend_verdict(flat, [flat]) == "not reproduced"
    assert fs.trend_verdict(rises, [flat]) == "not reproduced"  # the wrong sign is no reproduction
    assert fs.trend_verdict(rises, [flat], expected="rises") == "reproduced"


def test_bootstrap_run_and_intervals():
    per = _stack(L=4, P=16, d=8, seed=3)
    r = fs.bootstrap_run(per, n_boot=40, seed=0)
    assert r.boot["f_C"].shape == (40, 4) and r.boot["funnel"].shape == (40, 5) and r.boot["funnel_no_b1"].shape == (40, 4)
    Jm = per.mean(1)
    np.testing.assert_allclose(r.point["funnel_no_b1"], nn.cumulative_product(Jm[1:]).erank, rtol=1e-10)
    iv = r.interval("delta_H", 2)
    assert iv.lo <= iv.hi and iv.point == pytest.approx(nn.henrici_rel(Jm[2]), rel=1e-9)
    assert isinstance(r.trend("r_rot"), fs.TrendTest)
    point_only = fs.bootstrap_run(Jm[:, None], update=False)
    assert point_only.boot is None
    np.testing.assert_allclose(point_only.point["delta_H"], [nn.henrici(J) / np.linalg.norm(J) for J in Jm], rtol=1e-9)
    with pytest.raises(ValueError):
        point_only.interval("f_C")


def test_bootstrap_run_subset_and_level():
    """Resampling a subset gives the same replicates as the full run (same seed), and the run's level is used."""
    per = _stack(L=4, P=16, d=8, seed=5)
    full = fs.bootstrap_run(per, n_boot=25, seed=1)
    part = fs.bootstrap_run(per, n_boot=25, seed=1, resample=("funnel_no_b1",), level=0.8)
    assert set(part.boot) == {"funnel_no_b1"} and part.has_interval("funnel_no_b1") and not part.has_interval("f_C")
    np.testing.assert_array_equal(part.boot["funnel_no_b1"], full.boot["funnel_no_b1"])
    for m in fs.BOOTSTRAP_STATS:
        np.testing.assert_array_equal(part.point[m], full.point[m])
    iv = part.interval("funnel_no_b1")
    assert iv.level == 0.8 and (iv.lo, iv.hi) == tuple(np.quantile(full.boot["funnel_no_b1"][:, -1], [0.1, 0.9]))
    with pytest.raises(ValueError, match="f_C"):
        part.trend("f_C")
    frame = fs.metric_frame({("m", "trained"): part})
    assert frame.lo.isna().all()  # no per-layer metric was resampled
    with pytest.raises(ValueError, match="unknown"):
        fs.bootstrap_run(per, n_boot=5, resample=("funnel_all",))


def test_control_funnels_match_nonnormal():
    per = _stack(L=4, P=5, d=12, seed=4, scale=1.0)
    got = fs.control_funnels(per, first=1)
    ref = nn.funnel_variants(None, controls={k: M[1:] for k, M in nn.control_matrices(per.mean(1)).items()})
    for name in fs.CONTROLS:
        assert got[name].point == pytest.approx(ref[name].erank[-1], rel=1e-10)
    assert got["Schur-normal / as measured"].point == pytest.approx(got["Schur-normal"].point / got["as measured"].point)
    booted = fs.control_funnels(per, first=1, n_boot=5)
    assert booted["as measured"].point == got["as measured"].point and booted["as measured"].lo <= booted["as measured"].hi


def test_both_controls_equal_the_separate_ones():
    M = _stack(L=1, P=1, d=15, seed=6, scale=1.2)[0, 0]
    sn, sh = nn.both_controls(M, seed=3)
    np.testing.assert_allclose(sn, nn.schur_normal(M), atol=1e-12)
    np.testing.assert_allclose(sh, nn.shuffled_schur(M, seed=3), atol=1e-12)


def _iv(p, lo, hi):
    return fs.Interval(p, lo, hi)


def test_funnel_and_control_verdicts():
    """The decoder's case: a trained product *wider* than its twins is no funnel, and a Schur-normal widening
    of it is no reproduction of FG4."""
    twins = [_iv(24, 23, 25), _iv(27, 26, 28)]
    assert fs.compare_with_twins(_iv(118, 116, 120), twins) == "higher"
    assert fs.funnel_verdict(_iv(118, 116, 120), twins) == "not reproduced"
    assert fs.funnel_verdict(_iv(10, 9, 11), twins) == "reproduced"
    assert fs.funnel_verdict(_iv(24, 20, 26), twins) == "not reproduced"  # overlaps a twin
    assert fs.control_verdict(_iv(1.05, 1.04, 1.07), "not reproduced") == "not reproduced"
    assert fs.control_verdict(_iv(3.0, 2.0, 4.0), "reproduced") == "reproduced"
    assert fs.control_verdict(_iv(1.1, 0.9, 1.3), "reproduced") == "not reproduced"


def test_combined_and_coupling_verdicts():
    assert fs.combine_verdicts(["reproduced", "reproduced"]) == "reproduced"
    assert fs.combine_verdicts(["reproduced", "not reproduced"]) == "partly reproduced"
    assert fs.combine_verdicts(["not specific to training", "not reproduced"]) == "not specific to training"
    assert fs.combine_verdicts(["not reproduced"] * 2) == "not reproduced"
    depth = np.arange(1, 7) / 6
    r = np.array([-0.3, -0.3, -0.1, 0.0, 0.3, 0.4])
    q = np.array([0.01, 0.2, 0.5, 0.5, 0.3, 0.01])
    assert fs.sign_pattern_verdict(r, q, depth) == "reproduced"
    assert fs.sign_pattern_verdict(r, np.r_[q[:5], 0.5], depth) == "partly reproduced"
    assert fs.sign_pattern_verdict(-r, q, depth) == "not reproduced"  # the opposite pattern
    assert fs.sign_pattern_verdict(r, np.full(6, 0.5), depth) == "not reproduced"
    none, sig = np.full(6, 0.5), np.r_[0.01, np.full(5, 0.5)]
    ra, rm = np.r_[0.3, np.zeros(5)], np.r_[-0.3, np.zeros(5)]
    assert fs.operator_sign_verdict(ra, sig, rm, sig, [none, none]) == "reproduced"
    assert fs.operator_sign_verdict(ra, sig, -rm, sig, [none]) == "partly reproduced"  # same sign
    assert fs.operator_sign_verdict(ra, none, rm, none, [none]) == "not reproduced"
    assert fs.operator_sign_verdict(ra, sig, rm, sig, [np.r_[0.01, 0.01, np.full(4, 0.5)]]) == "not specific to training"
    assert fs.learned_verdict(["not reproduced"] * 6) == "not reproduced"
    assert fs.learned_verdict(["reproduced", "not reproduced"]) == "reproduced"
    assert fs.learned_verdict(["reproduced", "not specific to training"]) == "partly reproduced"
    assert fs.learned_verdict(["not specific to training", "not reproduced"]) == "not specific to training"
    for v in ("reproduced", "partly reproduced", "not reproduced", "not specific to training"):
        assert v in VERDICTS


def test_input_rescaling_on_a_tiny_decoder(tiny_dir):
    """Scale 1 reproduces block 1's mean Jacobian; RMSNorm is scale-invariant, so its Jacobian and hence the
    attention update shrink like 1/c."""
    model = lib.load_model(str(tiny_dir("llama")), dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    X = torch.stack([model.hidden_states_ids(torch.randint(0, 64, (7,), generator=g))[:, -1] for _ in range(3)], dim=1)
    Jbar = np.stack([jac.layer_jacobians(model, t, X[t]).mean(0).numpy() for t in range(model.n_layers)])
    tab = fs.input_rescaling(model, X[0], Jbar, scales=[1.0, 10.0])
    assert tab.erank_J1.iloc[0] == pytest.approx(nn.effective_rank(Jbar[0]), rel=1e-9)
    assert tab.funnel.iloc[0] == pytest.approx(nn.cumulative_product(Jbar).erank[-1], rel=1e-9)
    assert tab.input_norm.iloc[1] == pytest.approx(10 * tab.input_norm.iloc[0])
    J_attn = jac.layer_jacobians(model, 0, 10.0 * X[0], part="attn").mean(0).numpy() - np.eye(model.d_model)
    J_attn1 = jac.layer_jacobians(model, 0, X[0], part="attn").mean(0).numpy() - np.eye(model.d_model)
    assert np.linalg.norm(J_attn) == pytest.approx(np.linalg.norm(J_attn1) / 10, rel=1e-3)


def test_power_qualified_turns_an_underpowered_null_into_inconclusive():
    planted, power = [0.08, 0.16, 0.32], [0.05, 0.22, 0.84]
    assert fs.power_qualified("not reproduced", planted, power) == "inconclusive (underpowered)"
    assert fs.power_qualified("not reproduced", planted, power, at_r=0.3) == "not reproduced"
    assert fs.power_qualified("reproduced", planted, power) == "reproduced"  # only a null result is qualified
    with pytest.raises(ValueError):
        fs.power_qualified("not reproduced", [0.1], [0.2, 0.3])
