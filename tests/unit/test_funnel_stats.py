"""Chapter 4's statistics: the vectorised metrics (lib.linalg.nonnormal) against their Schur references, the prompt
bootstrap and the controls (lib.methods.funnel), the trend test, the frames and verdict rules
(lib.chapters.jacobian_funnel, section 4.8) and the page's tables (lib.page.jacobian_funnel)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import torch

from lib import stats
from lib.chapters import jacobian_funnel as fs
from lib.jacobians import sweep as jac
from lib.linalg import nonnormal as nn
from lib.methods import funnel, topology
from lib.page import jacobian_funnel as fp
from lib.page.claims import VERDICTS


def _stack(L=4, P=12, d=10, seed=0, scale=0.4):
    rng = np.random.default_rng(seed)
    return np.eye(d) + scale * rng.standard_normal((L, P, d, d)) / np.sqrt(d)


def test_spectral_metrics_match_nonnormal():
    J = _stack(L=5, P=1)[:, 0]
    m = nn.spectral_metrics(J)
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
    on_j, on_update = nn.spectral_metrics(J, update=False), nn.spectral_metrics(J, update=True)
    assert on_j["delta_H"] == pytest.approx(nn.henrici(J) / np.linalg.norm(J), rel=1e-9)
    assert on_j["r_rot"] == pytest.approx(nn.rotation_fraction(J), rel=1e-12)
    assert on_update["delta_H"] == pytest.approx(nn.henrici_rel(J), rel=1e-9)
    assert on_j["delta_H"] != pytest.approx(on_update["delta_H"], rel=1e-3)


def test_funnel_eranks_match_cumulative_product():
    J = _stack(L=5, P=3, d=12, scale=1.5)
    got = nn.funnel_eranks(np.moveaxis(J, 1, 0))  # (P, L, d, d) -> (P, L + 1)
    for p in range(3):
        np.testing.assert_allclose(got[p], nn.cumulative_product(J[:, p]).erank, rtol=1e-10)


def test_bootstrap_weights_and_resampled_means():
    W = stats.bootstrap_weights(7, 50, seed=1)
    assert W.shape == (50, 7)
    np.testing.assert_allclose(W.sum(1), 1.0)
    assert np.all(np.round(W * 7) == W * 7)  # counts / n
    np.testing.assert_array_equal(W, stats.bootstrap_weights(7, 50, seed=1))
    per = _stack(L=3, P=7, d=4).astype(np.float32)
    onehot = np.eye(7)[[2, 5]]
    got = stats.resampled_means(per, onehot)
    np.testing.assert_allclose(got[0], per[:, 2], rtol=1e-6)
    np.testing.assert_allclose(got[1], per[:, 5], rtol=1e-6)
    np.testing.assert_allclose(stats.resampled_means(per, np.full((1, 7), 1 / 7))[0], per.astype(np.float64).mean(1),
                               rtol=1e-12)
    assert got.dtype == np.float64
    with pytest.raises(ValueError):
        stats.resampled_means(per, np.ones((2, 6)))


def test_ols_slope_and_trend_directions():
    x = np.arange(1, 7) / 6
    Y = np.stack([2 - 3 * x, 0.5 + 0 * x])
    np.testing.assert_allclose(stats.ols_slope(x, Y), [-3.0, 0.0], atol=1e-12)
    assert stats.ols_slope(x, Y[0]) == pytest.approx(np.polyfit(x, Y[0], 1)[0])
    rng = np.random.default_rng(0)
    falls = stats.trend_test(x, 1 - x, 1 - x + 0.01 * rng.standard_normal((200, 6)))
    flat = stats.trend_test(x, 0 * x, 0.5 * rng.standard_normal((200, 6)))
    rises = stats.trend_test(x, x, x + 0.01 * rng.standard_normal((200, 6)))
    assert (falls.direction, flat.direction, rises.direction) == ("falls", "flat", "rises")
    assert falls.slope.lo < -1 < falls.slope.hi
    assert fs.trend_verdict(falls, [flat, rises]) == "reproduced"
    assert fs.trend_verdict(falls, [flat, falls]) == "not specific to training"
    assert fs.trend_verdict(flat, [flat]) == "not reproduced"
    assert fs.trend_verdict(rises, [flat]) == "not reproduced"  # the wrong sign is no reproduction
    assert fs.trend_verdict(rises, [flat], expected="rises") == "reproduced"


def test_bootstrap_run_and_intervals():
    per = _stack(L=4, P=16, d=8, seed=3)
    r = funnel.bootstrap_run(per, n_boot=40, seed=0)
    assert r.boot["f_C"].shape == (40, 4) and r.boot["funnel"].shape == (40, 5) and r.boot["funnel_no_b1"].shape == (40, 4)
    Jm = per.mean(1)
    np.testing.assert_allclose(r.point["funnel_no_b1"], nn.cumulative_product(Jm[1:]).erank, rtol=1e-10)
    iv = r.interval("delta_H", 2)
    assert iv.lo <= iv.hi and iv.point == pytest.approx(nn.henrici_rel(Jm[2]), rel=1e-9)
    assert isinstance(r.trend("r_rot"), stats.TrendTest)
    point_only = funnel.bootstrap_run(Jm[:, None], update=False)
    assert point_only.boot is None
    np.testing.assert_allclose(point_only.point["delta_H"], [nn.henrici(J) / np.linalg.norm(J) for J in Jm], rtol=1e-9)
    with pytest.raises(ValueError):
        point_only.interval("f_C")


def test_bootstrap_run_subset_and_level():
    """Resampling a subset gives the same replicates as the full run (same seed), and the run's level is used."""
    per = _stack(L=4, P=16, d=8, seed=5)
    full = funnel.bootstrap_run(per, n_boot=25, seed=1)
    part = funnel.bootstrap_run(per, n_boot=25, seed=1, resample=("funnel_no_b1",), level=0.8)
    assert set(part.boot) == {"funnel_no_b1"} and part.has_interval("funnel_no_b1") and not part.has_interval("f_C")
    np.testing.assert_array_equal(part.boot["funnel_no_b1"], full.boot["funnel_no_b1"])
    for m in funnel.BOOTSTRAP_STATS:
        np.testing.assert_array_equal(part.point[m], full.point[m])
    iv = part.interval("funnel_no_b1")
    assert iv.level == 0.8 and (iv.lo, iv.hi) == tuple(np.quantile(full.boot["funnel_no_b1"][:, -1], [0.1, 0.9]))
    with pytest.raises(ValueError, match="f_C"):
        part.trend("f_C")
    frame = fs.metric_frame({("m", "trained"): part})
    assert frame.lo.isna().all()  # no per-layer metric was resampled
    with pytest.raises(ValueError, match="unknown"):
        funnel.bootstrap_run(per, n_boot=5, resample=("funnel_all",))


def test_control_funnels_match_nonnormal():
    per = _stack(L=4, P=5, d=12, seed=4, scale=1.0)
    got = funnel.control_funnels(per, first=1)
    ref = nn.funnel_variants(None, controls={k: M[1:] for k, M in nn.control_matrices(per.mean(1)).items()})
    for name in funnel.CONTROLS:
        assert got[name].point == pytest.approx(ref[name].erank[-1], rel=1e-10)
    assert got["Schur-normal / as measured"].point == pytest.approx(got["Schur-normal"].point / got["as measured"].point)
    booted = funnel.control_funnels(per, first=1, n_boot=5)
    assert booted["as measured"].point == got["as measured"].point and booted["as measured"].lo <= booted["as measured"].hi


def test_both_controls_equal_the_separate_ones():
    M = _stack(L=1, P=1, d=15, seed=6, scale=1.2)[0, 0]
    sn, sh = nn.both_controls(M, seed=3)
    np.testing.assert_allclose(sn, nn.schur_normal(M), atol=1e-12)
    np.testing.assert_allclose(sh, nn.shuffled_schur(M, seed=3), atol=1e-12)


def _iv(p, lo, hi):
    return stats.Interval(p, lo, hi)


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


def test_power_qualified_turns_an_underpowered_null_into_inconclusive():
    planted, power = [0.08, 0.16, 0.32], [0.05, 0.22, 0.84]
    assert topology.power_qualified("not reproduced", planted, power) == "inconclusive (underpowered)"
    assert topology.power_qualified("not reproduced", planted, power, at_r=0.3) == "not reproduced"
    assert topology.power_qualified("reproduced", planted, power) == "reproduced"  # only a null result is qualified
    with pytest.raises(ValueError):
        topology.power_qualified("not reproduced", [0.1], [0.2, 0.3])


# -- the chapter's computations, moved out of the page (issue #17) ------------------------------------------------
class _Set:
    """A stand-in for lib.jacobians.sweep.JacobianSet: per-prompt Jacobians, their mean and sub-block means."""

    def __init__(self, per, parts=None):
        self.per_prompt = per.astype(np.float32)
        self.mean = per.astype(np.float64).mean(1)
        self.parts = parts or {}


def _twin_sets(L=4, P=10, d=8):
    """A trained model (strong structure) and two twins, as series label → set."""
    return {"trained": _Set(_stack(L=L, P=P, d=d, seed=0, scale=1.2)),
            "random init, seed 0": _Set(_stack(L=L, P=P, d=d, seed=1)),
            "random init, seed 1": _Set(_stack(L=L, P=P, d=d, seed=2))}


def _header_is_words(label: str) -> bool:
    import re

    return not re.search(r"[A-Za-z0-9]_[A-Za-z0-9]", str(label))


def test_bootstrap_twins_gives_every_series_the_same_resamples():
    sets = _twin_sets()
    runs = fs.bootstrap_twins(sets, update=True, n_boot=6, seed=2)
    assert list(runs) == list(sets)
    for s, r in runs.items():
        ref = funnel.bootstrap_run(sets[s].per_prompt, update=True, n_boot=6, seed=2)
        np.testing.assert_array_equal(r.boot["funnel"], ref.boot["funnel"])
    part = fs.bootstrap_twins(sets, update=False, n_boot=4, resample=("funnel_no_b1",))
    assert all(set(r.boot) == {"funnel_no_b1"} and not r.update for r in part.values())
    alone = fs.bootstrap_twins(sets, update=False, n_boot=4, resample=("funnel_no_b1",), twins=False,
                               final_only=True)
    assert np.isnan(alone["trained"].boot["funnel_no_b1"][:, :-1]).all()
    np.testing.assert_allclose(alone["trained"].boot["funnel_no_b1"][:, -1], part["trained"].boot["funnel_no_b1"][:, -1],
                               rtol=1e-10)
    assert [r.boot is None for r in alone.values()] == [False] + [True] * (len(sets) - 1)


def test_resampled_chunks_are_the_resampled_means_in_pieces():
    per = _stack(L=3, P=5, d=4, seed=2)
    W = stats.bootstrap_weights(5, 7, seed=1)
    whole = stats.resampled_means(per, W)
    ref = np.einsum("bp,lpij->blij", W, per.astype(np.float64))  # the definition, written out
    np.testing.assert_allclose(whole, ref, rtol=1e-12, atol=1e-14)
    pieces = list(funnel.resampled_chunks(per, W, max_bytes=2 * 3 * 4 * 4 * 8))  # two resamples a chunk
    assert [len(c) for c in pieces] == [2, 2, 2, 1]
    np.testing.assert_allclose(np.concatenate(pieces), whole, rtol=1e-13, atol=1e-15)  # BLAS order per chunk size


def test_depth_frame_holds_points_intervals_and_baselines():
    runs = fs.bootstrap_twins(_twin_sets(), update=True, n_boot=8)
    points = {s: funnel.bootstrap_run(_twin_sets()[s].per_prompt, update=False) for s in ("trained",)}
    df = fs.depth_frame({"A": runs, "B": points}, {"A": 0.9, "B": 0.8})
    assert len(df) == 4 * 3 + 4 and set(df.model) == {"A", "B"}
    row = df[(df.model == "A") & (df.series == "random init, seed 1") & (df.layer == 3)].iloc[0]
    iv = runs["random init, seed 1"].interval("r_rot", 2)
    assert (row.r_rot, row.r_rot_lo, row.r_rot_hi, row.depth) == (iv.point, iv.lo, iv.hi, 0.75)
    assert df[df.model == "B"].f_C_lo.isna().all() and (df[df.model == "B"].baseline == 0.8).all()


def test_depth_trends_and_their_verdicts_equal_the_rules():
    runs = fs.bootstrap_twins(_twin_sets(), update=True, n_boot=10)
    trends = fs.depth_trends(runs)
    assert set(trends) == {(m, s) for m in fs.DEPTH_METRICS for s in runs}
    for m in fs.DEPTH_METRICS:
        assert trends[m, "trained"].slope == runs["trained"].trend(m).slope
    verdicts = fs.trend_verdicts(trends)
    for m, v in verdicts.items():
        assert v == fs.trend_verdict(trends[m, "trained"], [trends[m, s] for s in runs if s != "trained"])
    frame = fs.trend_frame(trends)
    assert set(frame.metric) == {fs.METRIC_LABELS[m] for m in fs.DEPTH_METRICS}
    table = fp.trend_table(frame)
    assert all(_header_is_words(c) for c in table.columns)
    assert table["95% interval"].iloc[0] == f"[{frame.lo.iloc[0]:+.3f}, {frame.hi.iloc[0]:+.3f}]"


def test_smallest_moduli_and_sub_block_tables():
    from lib.linalg.spectra import eigvals

    sets = _twin_sets()
    tab = fs.smallest_moduli(sets)
    assert list(tab.columns) == ["block", *sets] and list(tab.block) == [1, 2, 3, 4]
    assert tab["trained"].iloc[2] == pytest.approx(np.abs(eigvals(sets["trained"].mean[2])).min())
    for s in sets.values():
        s.parts = {"attn": s.mean, "mlp": s.mean[::-1].copy()}
    frame = fs.sub_block_frame(sets)
    assert set(frame.weights) == {"trained", "random init (2 seeds)"} and set(frame.sub_block) == {"attention", "MLP"}
    m = nn.spectral_metrics(sets["random init, seed 0"].mean[::-1])
    row = frame[(frame.series == "random init, seed 0") & (frame.sub_block == "MLP") & (frame.layer == 1)].iloc[0]
    assert row.delta_H == pytest.approx(m["delta_H"][0])
    table = fp.sub_block_table(frame)
    assert len(table) == 8 and all(_header_is_words(c) for c in table.columns)
    assert list(table.columns)[2:] == ["δ_H, trained", "δ_H, random init (2 seeds)", "rotation fraction, trained",
                                       "rotation fraction, random init (2 seeds)"]


def test_controls_curves_and_funnel_tables():
    sets = _twin_sets(L=4, P=6, d=10)
    runs = fs.bootstrap_twins(sets, update=True, n_boot=5)
    by_start = fs.twin_control_funnels(sets, n_boot=5)
    ctrl = by_start[1]
    for first in (0, 1):  # one set of Schur forms for both products: the same as each start alone
        ref = funnel.control_funnels(sets["trained"].per_prompt, first=first, n_boot=5)
        assert by_start[first]["trained"] == ref
    twin = ctrl["random init, seed 0"]["Schur-normal"]
    assert twin.lo == twin.hi == twin.point  # the twins get point values only
    curves = fs.funnel_curves({"m": (runs, sets["trained"].mean)})
    assert set(curves["product"]) == set(fs.PRODUCTS)
    tr = curves[(curves.series == "trained") & (curves["product"] == fs.PRODUCTS[0])]
    np.testing.assert_allclose(tr.erank, runs["trained"].point["funnel"])
    sn = curves[curves["product"] == fs.PRODUCTS[2]].sort_values("blocks")
    cm = nn.control_matrices(sets["trained"].mean)
    np.testing.assert_allclose(sn.erank, nn.cumulative_product(cm["Schur-normal"][1:]).erank)
    assert sn.blocks.iloc[0] == 1  # the product from block 2 starts after block 1
    frame = fs.block_erank_frame(runs)
    assert len(frame) == 12 and frame.lo.notna().all()
    table = fp.block_erank_table(runs)
    assert table.iloc[0]["product 2..t, trained"] == "–"
    assert table.iloc[1]["erank J̄ₜ, trained"] == runs["trained"].interval("erank", 1).fmt(".1f")
    mini = fs.bootstrap_twins(sets, update=False, n_boot=5, resample=("funnel_no_b1",))
    mctrl = funnel.control_funnels(sets["trained"].mean[:, None], first=1)
    final = fp.final_funnel_table(("dec", runs, ctrl), ("mini", mini, mctrl))
    assert list(final.model) == ["dec"] * 3 + ["mini"] * 3
    assert final.iloc[0]["blocks 2–6 (co-primary)"] == ctrl["trained"]["as measured"].fmt(".1f")
    assert final.iloc[4]["Schur-normal, 2–6"] == "–"
    assert final.iloc[0]["all 6 blocks (co-primary)"] == runs["trained"].interval("funnel").fmt(".1f")
    assert final.iloc[3]["blocks 2–6 (co-primary)"] == mini["trained"].interval("funnel_no_b1").fmt(".1f")


def test_input_norms_and_per_prompt_erank():
    X = {"trained": torch.ones(3, 5, 4) * torch.tensor([1.0, 4.0, 9.0])[:, None, None],
         "random init, seed 0": torch.ones(3, 5, 4) * 0.5, "random init, seed 1": torch.ones(3, 5, 4) * 1.5}
    norms = fs.input_norms(X)
    np.testing.assert_allclose(norms["trained"], [2.0, 8.0])  # ‖(1, 1, 1, 1)‖ = 2
    per = _stack(L=3, P=4, d=6, scale=1.0)
    got = fs.per_prompt_final_erank(per)
    np.testing.assert_allclose(got, [nn.cumulative_product(per[:, p]).erank[-1] for p in range(4)])


def _run(point: dict, spread: dict | None = None) -> funnel.BootstrapRun:
    """A run whose replicates of each name in ``spread`` lie uniformly within ± that spread of the point."""
    boot = None if spread is None else {k: point[k] + np.linspace(-w, w, 201)[:, None] for k, w in spread.items()}
    return funnel.BootstrapRun(point=point, boot=boot, update=True, n_prompts=48)


def _evidence(trained_falls: bool, funnel_found: str, coupled: bool, full_found: str | None = None):
    """Evidence with known answers: a falling or flat trend, a trained product from block 2 (``funnel_found``) and
    over every block (``full_found``, default the same) narrower or wider than the twins', with Schur-normal
    widening it (ratio 3), sub-block and block couplings significant (early negative, late positive, opposite
    sub-block signs) or not."""
    full_found = funnel_found if full_found is None else full_found
    x = np.arange(1, 7) / 6
    rng = np.random.default_rng(0)

    def trend(slope):
        return stats.trend_test(x, slope * x, slope * x + 0.001 * rng.standard_normal((50, 6)))

    twins = ["random init, seed 0", "random init, seed 1"]
    trends = {}
    for m in fs.DEPTH_METRICS:
        trends[m, "trained"] = trend(-1.0 if trained_falls else 0.0)
        for s in twins:
            trends[m, s] = trend(0.0)
    prog = {"reproduced": 10.0, "not reproduced": 118.0}[funnel_found]
    full = {"reproduced": 3.3, "not reproduced": 60.0}[full_found]
    runs = {s: _run({"f_C": np.full(6, 0.85), "erank": np.r_[3.0 if s == "trained" else 48.0, np.full(5, 100.0)],
                     "funnel": np.r_[128.0, np.full(6, full if s == "trained" else 20.0 + i)],
                     "funnel_no_b1": np.r_[128.0, np.full(5, prog if s == "trained" else 24.0 + 3 * i)]},
                    {"funnel": 1.0, "funnel_no_b1": 1.0})
            for i, s in enumerate(["trained", *twins])}
    ratio = _iv(3.0, 2.0, 4.0)
    ctrl = {"trained": {"as measured": _iv(prog, prog - 1, prog + 1), "Schur-normal": _iv(3 * prog, 2 * prog, 4 * prog),
                        "shuffled Schur": _iv(2 * prog, prog, 3 * prog), "Schur-normal / as measured": ratio},
            twins[0]: {"as measured": _iv(24, 24, 24)}, twins[1]: {"as measured": _iv(27, 27, 27)}}
    ctrl_full = {"trained": {"as measured": _iv(full, full - 1, full + 1), "Schur-normal": _iv(3 * full, 2 * full, 4 * full),
                             "shuffled Schur": _iv(2 * full, full, 3 * full), "Schur-normal / as measured": ratio}}
    q_sig = np.r_[0.01, np.full(4, 0.5), 0.01] if coupled else np.full(6, 0.5)
    r_blk = np.r_[-0.3, np.zeros(4), 0.3]
    coup = pd.DataFrame([{"weights": s, "layer": l + 1, "depth": x[l], "r_s": r_blk[l] if s == "trained" else 0.0,
                          "q": q_sig[l] if s == "trained" else 0.5} for s in ["trained", *twins] for l in range(6)])
    sub = pd.DataFrame([{"weights": s, "sub_block": b, "layer": l + 1, "r_s": (r_blk[l] if b == "attention"
                                                                             else -r_blk[l]) if s == "trained" else 0,
                         "q": q_sig[l] if s == "trained" else 0.5}
                        for s in ["trained", *twins] for b in ("attention", "MLP") for l in range(6)])
    power = pd.DataFrame({"effect": [0.1, 0.2], "r_s_mean": [0.08, 0.16], "power": [0.2, 0.4],
                          "power_bh": [0.1, 0.22]})
    return fs.FunnelEvidence(trends=trends, runs=runs, controls=ctrl, controls_full=ctrl_full, coupling=coup,
                             sub_blocks=sub, power=power, d=128, ginibre=0.926)


def test_claim_verdicts_follow_the_evidence():
    """The verdict table of section 4.8 (once a dict literal on the page): each claim from its rule."""
    none = fs.claim_verdicts(_evidence(trained_falls=False, funnel_found="not reproduced", coupled=False))
    assert none == {"FG1": "not reproduced", "FG2": "not reproduced", "FG3": "not reproduced",
                    "FG4": "not reproduced", "FG5": "inconclusive (underpowered)",
                    "FG6": "inconclusive (underpowered)", "FG7": "not reproduced"}
    every = fs.claim_verdicts(_evidence(trained_falls=True, funnel_found="reproduced", coupled=True))
    assert every == {c: "reproduced" for c in ("FG1", "FG2", "FG3", "FG4", "FG5", "FG6", "FG7")}
    for v in (none, every):
        assert set(v.values()) <= set(VERDICTS)
    counts = fs.verdict_counts(none)
    assert counts == {"claims": 7, "reproduced": 0, "not reproduced": 5, "not specific to training": 0,
                      "inconclusive (underpowered)": 2}
    with pytest.raises(ValueError, match="not testable offline"):
        fs.verdict_counts({**none, "FG7": "not testable offline"})


def test_a_single_block_bottleneck_is_half_of_the_funnel_not_none_of_it():
    """The decoder's case: the full product far narrower than the twins' and widened by the Schur-normal control,
    the product from block 2 wider than theirs. FG3 and FG4 hold on the abstract's reading and fail on the
    progressive one: partly reproduced (the old rule scored only blocks 2–6: not reproduced), and FG7 may not
    turn that learned bottleneck into "not reproduced"."""
    ev = _evidence(trained_falls=False, funnel_found="not reproduced", full_found="reproduced", coupled=False)
    v = fs.claim_verdicts(ev)
    assert v["FG3"] == v["FG4"] == "partly reproduced"
    assert v["FG7"] == "partly reproduced"
    fr = fs.funnel_readings_verdicts(*((r["trained"], r["twins"], r["ratio"]) for r in fs.funnel_readings(ev).values()))
    assert fr["FG3"] == {"full product": "reproduced", "blocks 2–L": "not reproduced", "union": "partly reproduced"}
    assert fr["FG4"] == {"full product": "reproduced", "blocks 2–L": "not reproduced", "union": "partly reproduced"}
    table = fp.funnel_readings_table(ev)
    assert list(table.FG3) == ["reproduced", "not reproduced", "partly reproduced"]
    assert table.iloc[0]["trained vs twins"] == "lower" and table.iloc[1]["trained vs twins"] == "higher"
    assert table.iloc[0]["trained"] == "3.3 [2.3, 4.2]" and "[paper]" in table.iloc[0]["reading"]
    assert "[secondary]" in table.iloc[1]["reading"]
    # the twins' intervals count too: a trained value inside a twin's interval is no bottleneck
    wide = fs.funnel_readings_verdicts((_iv(3.3, 2.3, 4.3), [_iv(20, 4, 30)], _iv(3, 2, 4)),
                                       (_iv(118, 116, 120), [_iv(24, 23, 25)], _iv(1, 0.9, 1.1)))
    assert wide["FG3"]["union"] == "not reproduced" and wide["FG4"]["union"] == "not reproduced"


def test_learned_verdict_is_no_fuller_than_the_effects_it_qualifies():
    assert fs.learned_verdict(["not reproduced", "partly reproduced", "inconclusive (underpowered)"]) == \
        "partly reproduced"
    assert fs.learned_verdict(["reproduced", "partly reproduced"]) == "reproduced"
    assert fs.learned_verdict(["partly reproduced", "not specific to training"]) == "partly reproduced"
    assert fs.learned_verdict(["not reproduced", "inconclusive (underpowered)"]) == "not reproduced"


def test_claim_measurements_quote_the_numbers_the_verdicts_use():
    from lib.page.claims import CLAIMS

    ev = _evidence(trained_falls=False, funnel_found="not reproduced", coupled=False)
    v = fs.claim_verdicts(ev)
    m = fp.claim_measurements(ev, v)
    assert set(m) == set(v)
    assert m["FG1"].startswith("complex fraction 0.85 (Ginibre 0.93); trained slope ") and "(flat); twins flat, flat" in m["FG1"]
    assert m["FG3"].startswith("full product [paper]: trained 60.0 [59.0, 61.0] of 128 vs twins 21.0–22.0 "
                               "(higher: not reproduced; erank J̄₁ 3.0, twins 48.0)")
    assert m["FG3"].endswith("[secondary]: trained 118.0 [117.0, 119.0] vs twins 27.0–30.0 (higher: not reproduced)")
    assert m["FG4"].startswith("Schur-normal / as measured: full product 3.00 [2.00, 4.00] (not reproduced;")
    assert m["FG4"].endswith("(not reproduced: no narrowing there to remove)")
    assert "0 of 12 sub-block couplings" in m["FG5"] and "(twins 0 of 24)" in m["FG5"]
    assert m["FG5"].endswith("power 22% at Spearman r ≈ 0.16") and "0 of 6 layers" in m["FG6"]
    assert m["FG7"].startswith("verdicts FG1–FG6: FG1 not reproduced,")
    # the Results page shows these as plain text: symbols in words, not code (f_C, δ_H, r_rot, r_S; issue 28)
    assert not [x for x in m.values() if re.search(r"[^\W\d]_[^\W\d_]", x)], m
    frame = fp.verdict_frame(CLAIMS, v, m)
    assert list(frame.claim) == [f"FG{i}" for i in range(1, 8)]
    assert list(frame.columns) == ["claim", "paper's claim", "measured (book-decoder)", "verdict"]


def test_paper_model_work_is_the_closed_forms_flop_count():
    from lib.jacobians.single_token import flops

    tab = fs.paper_model_work(prompts=10, rate=1e12)
    row = tab.iloc[0]
    name, d, d_ff, L, _ = fs.PAPER_MODELS[0]
    assert row.model == name and row["Jacobian work, 10 prompts (PFLOP)"] == flops(d, d_ff, 10, L) / 1e15
    assert row["at 1 TFLOP/s per GPU (min, assumed rate)"] == pytest.approx(flops(d, d_ff, 10, L) / 1e12 / 60)
    assert all(_header_is_words(c) for c in tab.columns)


def test_a_model_larger_than_one_gpu_is_sharded_and_its_layers_share_the_time():
    """The 70B-class row: 141 GB of bf16 weights need 4 GPUs of 80 GB (64 GB usable each, less 17.7 GB for a batch
    of 64 float32 Jacobians and one float64 mean at d = 8192: 46.3 GB), and the time at the assumed rate is the work
    over 4 GPUs' rates; an 8B model fits one GPU."""
    from lib.jacobians.single_token import flops

    tab = fs.paper_model_work(prompts=10, rate=1e12).set_index("model")
    big = tab.loc["meta-llama/Llama-3.1-70B"]
    assert big["GPUs of 80 GB"] == 4 and tab.loc["meta-llama/Llama-3.1-8B", "GPUs of 80 GB"] == 1
    assert big["at 1 TFLOP/s per GPU (min, assumed rate)"] == pytest.approx(flops(8192, 28672, 10, 80) / 1e12 / 60 / 4)
    assert fs.gpus_needed(64.0, 1024) == 2  # 64 GB of weights: over 80 % of one 80 GB GPU
    with pytest.raises(ValueError, match="does not fit"):
        fs.gpus_needed(1.0, 65536)


def test_leading_eigenvalues_tell_a_real_outlier_from_a_near_pair():
    """Known spectra: block 1 has a real λ₁ = 5 and next |λ| = 2 (ratio 0.4); block 2 a conjugate pair 3 ± 4i
    (|λ₁| = 5) and next |λ| = 4.875 (ratio 0.975, the third eigenvalue)."""
    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    A = np.diag([5.0, 2.0, 1.0, 0.5, 0.2, 0.1])
    B = np.zeros((6, 6))
    B[:2, :2] = [[3.0, 4.0], [-4.0, 3.0]]
    B[2:, 2:] = np.diag([4.875, 1.0, 0.5, 0.1])
    tab = fs.leading_eigenvalues(np.stack([Q @ A @ Q.T, Q @ B @ Q.T]), [0, 1])
    assert list(tab.block) == [1, 2] and list(tab.pair) == [False, True]
    np.testing.assert_allclose(tab.modulus, [5.0, 5.0])
    np.testing.assert_allclose(tab.next_ratio, [0.4, 0.975])
    assert list(tab.next_index) == [2, 3]


def test_end_to_end_in_context_jacobian_equals_the_block_product_only_when_causal(tiny64):
    """A causal decoder: no later position feeds back, so the product of the in-context diagonal blocks is the
    true ∂h_L[T]/∂h_0[T] (to the rounding of the recorded states). A bidirectional encoder: the other tokens carry part of the
    perturbation back, and the product misses it."""
    g = torch.Generator().manual_seed(0)
    for family, causal in (("llama", True), ("bert", False)):
        model = tiny64(family)
        H = model.hidden_states_ids(torch.randint(5, 60, (6,), generator=g))
        out = fs.end_to_end_in_context(model, H, T=3)
        rel = np.linalg.norm(out["true"] - out["product"]) / np.linalg.norm(out["true"])
        single = np.stack([jac.in_context_jacobian(model, t, H[t], 3, method="autodiff").cpu().numpy()
                           for t in range(model.n_layers)])
        ref = _product(single)  # the closed form against autodiff: RoPE's float32 tables set the agreement
        assert np.linalg.norm(out["product"] - ref) < 1e-5 * np.linalg.norm(ref)
        # causal: equal up to the recorded states' rounding (RoPE tables in float32); bidirectional: far apart
        assert (rel < 1e-5) if causal else (rel > 0.05), (family, rel)


def _product(Js: np.ndarray) -> np.ndarray:
    P = np.eye(Js.shape[-1])
    for J in Js:
        P = J @ P
    return P


def test_leading_eigenvalue_phrase_never_calls_a_near_tie_an_outlier():
    tab = pd.DataFrame({"block": [1, 3, 6], "modulus": [5.0, 4.0, 3.0], "pair": [False, False, True],
                        "next_index": [2, 2, 3], "next_ratio": [0.4, 0.61, 0.975]})
    assert fp.leading_eigenvalue_phrase(tab) == (
        "λ₁ is real in blocks 1 and 3 and one of a complex conjugate pair in block 6; the next eigenvalue's "
        "modulus is 0.40, 0.61, 0.975 of |λ₁| (blocks 1, 3 and 6)")


# --- Chapter 4 in context: the second Jacobian protocol and its co-primary verdicts (issue 25, section 5) ------


def test_protocol_verdicts_are_co_primary_readings():
    """Known answers of the rule [ours]: reproduced only under every protocol, partly under one, and an effect that
    random init shares is reported as such, never as reproduced."""
    def pv(a, b):
        return fs.protocol_verdicts({"single-token": {"FG1": a}, "in context": {"FG1": b}})["FG1"]

    assert pv("reproduced", "reproduced") == "reproduced"
    assert pv("reproduced", "not reproduced") == "partly reproduced"
    assert pv("not reproduced", "partly reproduced") == "partly reproduced"
    assert pv("partly reproduced", "partly reproduced") == "partly reproduced"
    assert pv("not reproduced", "not specific to training") == "not specific to training"
    assert pv("not reproduced", "not reproduced") == "not reproduced"
    with pytest.raises(ValueError, match="same claims"):
        fs.protocol_verdicts({"single-token": {"FG1": "reproduced"}, "in context": {"FG2": "reproduced"}})
    with pytest.raises(ValueError, match="at least one"):
        fs.protocol_verdicts({})


def test_claim_verdicts_combine_the_in_context_reading():
    """A trend and a funnel seen only in context make FG1–FG4 partly reproduced (the single-token rule alone said
    not reproduced), and FG7 follows; FG5 and FG6 stay the single-token evidence's."""
    st = _evidence(trained_falls=False, funnel_found="not reproduced", coupled=False)
    ic = _evidence(trained_falls=True, funnel_found="reproduced", coupled=False)
    assert fs.jacobian_claim_verdicts(ic) == {c: "reproduced" for c in fs.JACOBIAN_CLAIMS}
    alone, both = fs.claim_verdicts(st), fs.claim_verdicts(st, in_context=ic)
    assert all(alone[c] == "not reproduced" for c in fs.JACOBIAN_CLAIMS)
    assert all(both[c] == "partly reproduced" for c in fs.JACOBIAN_CLAIMS)
    assert both["FG5"] == alone["FG5"] and both["FG6"] == alone["FG6"]
    assert both["FG7"] == "partly reproduced"
    m = fp.claim_measurements(st, both, in_context=ic)
    assert m["FG1"].startswith("single-token (not reproduced): complex fraction ") and (
        ". In context (reproduced): complex fraction " in m["FG1"])
    assert m["FG5"] == fp.claim_measurements(st, both)["FG5"]


def test_control_effect_reads_the_paired_ratio():
    assert fp.control_effect(_iv(1.5, 1.2, 1.8)) == "widens it"
    assert fp.control_effect(_iv(0.9, 0.8, 0.95)) == "narrows it"
    assert fp.control_effect(_iv(0.94, 0.84, 1.19)) == "leaves it unchanged within its interval"


def test_controls_of_a_normal_funnel_change_nothing():
    """Known answer: a symmetric J̄ is normal, its real Schur form is diagonal, so neither control can move it and
    both ratios are exactly 1 in every resample; a non-normal stack gives the shuffled ratio as its two eranks'."""
    rng = np.random.default_rng(3)
    G = rng.standard_normal((3, 6, 8, 8))
    sym = np.eye(8) + 0.2 * (G + np.swapaxes(G, -1, -2))  # every prompt symmetric, so every resampled mean too
    out = funnel.control_funnels_by_start(sym, firsts=(0, 1), n_boot=20)
    for f in (0, 1):
        for key in ("Schur-normal / as measured", "shuffled Schur / as measured"):
            iv = out[f][key]
            assert iv.point == pytest.approx(1.0, abs=1e-9) and iv.lo == pytest.approx(1.0, abs=1e-9)
            assert iv.hi == pytest.approx(1.0, abs=1e-9)
    per = _stack(L=3, P=6, d=8)
    c = funnel.control_funnels_by_start(per, firsts=(0,), n_boot=0)[0]
    assert c["shuffled Schur / as measured"].point == pytest.approx(c["shuffled Schur"].point / c["as measured"].point)
    # the final product's erank, one SVD per product, is the curve's last entry
    assert c["as measured"].point == pytest.approx(nn.funnel_eranks(per.mean(1))[-1], rel=1e-12)


def test_protocol_table_puts_each_protocol_in_its_own_column():
    st = _evidence(trained_falls=False, funnel_found="not reproduced", full_found="reproduced", coupled=False)
    ic = _evidence(trained_falls=True, funnel_found="reproduced", coupled=False)
    for ev in (st, ic):
        for f in (ev.controls, ev.controls_full):
            f["trained"]["shuffled Schur / as measured"] = _iv(2.0, 1.5, 2.5)
    tab = fp.protocol_table({"single-token": st, "in context": ic})
    assert list(tab.columns) == ["statistic", "single-token", "in context"]
    row = tab.set_index("statistic")
    assert row.loc["FG3: all six blocks [paper]", "single-token"].endswith("(lower: reproduced)")
    assert row.loc["FG3: blocks 2–6 [secondary]", "single-token"].endswith("(higher: not reproduced)")
    assert row.loc["FG1: slope of the complex fraction", "in context"].endswith("(falls); twins flat, flat")
    assert row.loc["block 1: erank of J̄₁", "in context"] == "3.0; twins 48.0"
    assert row.loc["verdicts", "in context"] == "FG1 reproduced, FG2 reproduced, FG3 reproduced, FG4 reproduced"


def test_in_context_twins_are_the_in_context_stack():
    """The sweep of every twin in context holds, per prompt, the closed-form in-context diagonal block at the last
    token, and its mean; it differs from the single-token Jacobian of the same token (the other positions feed
    attention)."""
    import lib
    from lib.models.decoder.language import prompts

    pair = lib.load_twins("book-decoder", seeds=(0,))
    texts = prompts(2)
    ic = jac.in_context_twins(pair, texts)
    assert ic.series == ["trained", "random init, seed 0"]
    m = pair.trained
    states = m.hidden_states(texts)
    for p, (H, s) in enumerate(zip(states, texts)):
        ref = jac.in_context_jacobian(m, 3, H[3], jac.last_token_index(m, s)).cpu().numpy()
        np.testing.assert_allclose(ic["trained"].per_prompt[3, p], ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ic["trained"].mean, ic["trained"].per_prompt.astype(np.float64).mean(1), atol=1e-5)
    X, _ = jac.residual_inputs(m, texts)
    single = jac.sweep(m, X, progress=False)
    assert np.abs(ic["trained"].mean - single.mean).max() > 1e-2
    with pytest.raises(Exception, match="no prompts"):
        jac.in_context_twins(pair, [])


def test_smallest_moduli_of_models_of_different_depths():
    """Chapter 4 with a reader's model: its depth differs from the contrast's; the shorter column ends in NaN."""
    rng = np.random.default_rng(0)
    tab = fs.smallest_moduli({"deep": rng.standard_normal((3, 4, 4)), "shallow": rng.standard_normal((2, 4, 4))})
    assert list(tab.block) == [1, 2, 3] and np.isnan(tab.shallow.iloc[2]) and tab.deep.notna().all()


def test_check_roles_wants_a_pre_norm_model_and_a_post_ln_contrast(tiny_dir):
    import lib
    from lib.errors import InputError

    llama, bert = lib.load_model(str(tiny_dir("llama"))), lib.load_model(str(tiny_dir("bert")))
    fs.check_roles(llama, bert)  # the chapter's roles: no error
    with pytest.raises(InputError, match="give it as second_model"):
        fs.check_roles(bert, bert)
    with pytest.raises(InputError, match="post-LN encoder"):
        fs.check_roles(llama, llama)
