"""Chapter 6's models at once (lib.chapters.two_views.TwinViews) and its prose's numbers (lib.page.two_views).

The findings functions turn the chapter's long tables into the glued numbers and the Results-page verdicts;
they are checked here on small synthetic tables whose answers are known, one verdict branch at a time.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import lib
from lib.chapters import two_views as bv
from lib.models.decoder.language import prompts
from lib.page import two_views as bp
from lib.page.claims import VERDICTS

KEYS = ("MiniLM", "decoder")
SERIES = ("trained", "random init, seed 0", "random init, seed 1")


def _per_layer(values: dict[tuple[str, str], dict[str, np.ndarray]], layers: int = 6) -> pd.DataFrame:
    """A tagged long table like ``TwinViews.table``: one row per (key, series, layer)."""
    frames = []
    for (key, series), cols in values.items():
        frames.append(pd.DataFrame({"layer": np.arange(1, layers + 1), **cols}).assign(
            model=key, series=series, random=series != "trained"))
    return pd.concat(frames, ignore_index=True)


# -- the eight models at once --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def decoder_views():
    pair = lib.load_twins("book-decoder", seeds=(0,))
    return bv.analyse_twins({"decoder": pair}, {"decoder": prompts(3)}, k=2, m_null=20)


def test_twin_views_are_keyed_by_the_twins_series(decoder_views):
    views = decoder_views
    assert list(views) == [("decoder", "trained"), ("decoder", "random init, seed 0")]
    assert len(views) == 2
    assert views.model("decoder") is views.twins["decoder"].trained
    assert views.model("decoder", "random init, seed 0") is views.twins["decoder"].twins[0]
    with pytest.raises(KeyError, match="no series 'random 0'"):
        views.model("decoder", "random 0")
    assert views.description == "book-decoder, trained and 1 random-init twins each"
    text = repr(views)
    assert "\n" not in text and len(text) < 200 and "seeds [0]" in text
    share = views.table("share")
    assert set(share.series) == {"trained", "random init, seed 0"}
    assert share.random.tolist() == [False] * 6 + [True] * 6
    assert views["decoder", "trained"].J_first.shape[1] == 3  # every prompt kept by default


def test_analyse_twins_equals_a_serial_analyse(decoder_views):
    """One model per thread gives the numbers of a plain serial call, bit for bit (closed-form Jacobians)."""
    m = decoder_views.model("decoder", "random init, seed 0")
    serial = bv.analyse(m, prompts(3), key="decoder", series="random init, seed 0", k=2, m_null=20, n_first=3)
    threaded = decoder_views["decoder", "random init, seed 0"]
    pd.testing.assert_frame_equal(serial.share, threaded.share)
    pd.testing.assert_frame_equal(serial.gamma, threaded.gamma)
    np.testing.assert_array_equal(serial.Jbar, threaded.Jbar)


def test_autodiff_check_and_context_twins(decoder_views):
    checks = bv.autodiff_check(decoder_views, n_prompts=2)
    assert checks.columns.tolist() == ["model", "layout", "layers", "prompts", "largest relative difference from autodiff"]
    assert checks.layers.tolist() == [6] and checks.prompts.tolist() == [2] and checks.iloc[0, -1] < 1e-4
    ctx, funnel, share_ctx = bv.context_twins(decoder_views, n=2)
    assert len(share_ctx) == 12 and set(share_ctx.series) == {"trained", "random init, seed 0"}
    np.testing.assert_allclose(share_ctx.value + share_ctx.softmax + share_ctx.avoid, 1.0, atol=1e-6)
    assert len(ctx) == 12 and (ctx.rel_first >= ctx.rel_min - 1e-12).all() and (ctx.rel_first <= ctx.rel_max + 1e-12).all()
    assert funnel.prompts.tolist() == [2, 2]
    v = decoder_views["decoder", "trained"]
    J_ctx = bv.context_jacobians(decoder_views.model("decoder"), v, prompts(3), n=1)
    ref = np.eye(v.d)
    first = [np.linalg.norm(J_ctx[t, 0] - v.J_first[t, 0]) / np.linalg.norm(J_ctx[t, 0] - ref) for t in range(6)]
    tr = ctx[~ctx.random].sort_values("layer")
    np.testing.assert_allclose(tr.rel_first, first, rtol=1e-6)  # a float32 model: batched over 2 prompts or 1


# -- section 6.1 ---------------------------------------------------------------------------------------------------
def _share_table(value: float, ctx: bool) -> pd.DataFrame:
    share = value + 0.01 * np.arange(6)
    cols = {"attn": share, "attn_lo": share - 0.02, "attn_hi": share + 0.03, "avoid": 1 - share,
            "size_attn": np.sqrt(share), "size_avoid": np.sqrt(1 - share), "med": np.median(share),
            "med_lo": np.median(share) - 0.05, "med_hi": np.median(share) + 0.05}
    if ctx:
        cols.update(value=share / 2, softmax=share / 2)
    else:
        cols.update(sigma_size=share / 2)
    return cols


def _share(tr: float, rd: float, ctx_tr: float | None = None, ctx_rd: float | None = None,
           keys: tuple[str, ...] = KEYS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(share, share_ctx)`` tables: trained share ``tr`` (per layer ``tr + 0.01 t``), twins ``rd``; in context
    ``ctx_tr``/``ctx_rd`` (default: the same)."""
    ctx_tr, ctx_rd = tr if ctx_tr is None else ctx_tr, rd if ctx_rd is None else ctx_rd
    single = {(key, s): _share_table(tr if s == "trained" else rd, False) for key in keys for s in SERIES}
    ctx = {(key, s): _share_table(ctx_tr if s == "trained" else ctx_rd, True) for key in keys for s in SERIES}
    return _per_layer(single), _per_layer(ctx)


def test_share_findings_numbers_and_verdicts():
    f = bp.share_findings(*_share(0.8, 0.2), "some models")
    assert f.numbers["sh_tr_MiniLM"] == "0.80–0.85"
    assert f.numbers["sh_ci_decoder"] == "0.78–0.88"
    m = np.median(0.8 + 0.01 * np.arange(6))
    assert f.numbers["sh_med_tr_decoder"] == f"{m:.2f} [{m - 0.05:.2f}, {m + 0.05:.2f}]"
    assert f.numbers["sz_tr_MiniLM"] == f"{np.sqrt(0.8):.2f}–{np.sqrt(0.85):.2f}"
    half = lib.page.tables.value_range((0.8 + 0.01 * np.arange(6)) / 2)
    assert f.numbers["cxs_val_MiniLM"] == half and f.numbers["cxs_soft_decoder"] == half
    assert f.claim["models"] == "some models" and f.claim["verdict"] == "reproduced"
    assert (f"MiniLM single token: ⟨J̄_A, Ū⟩/‖Ū‖² median {m:.2f} [{m - 0.05:.2f}, {m + 0.05:.2f}] trained, "
            f"twins' medians {np.median(0.2 + 0.01 * np.arange(6)):.2f} → reproduced") in f.claim["measured"]
    assert bp.share_findings(*_share(0.8, 0.9), "m").claim["verdict"] == "not specific to training"
    assert bp.share_findings(*_share(0.3, 0.9), "m").claim["verdict"] == "not reproduced"


def test_share_verdicts_are_per_model_and_protocol_never_an_and():
    """MiniLM's twins carry little, the decoder's twins all of it: the decoder is "not specific to training"
    even where MiniLM is "reproduced" (today's AND over models called both "reproduced")."""
    share, ctx = _share(0.8, 0.2, ctx_tr=0.3, ctx_rd=0.05)
    dec = share.model == "decoder"
    share.loc[dec & share.random, ["med", "med_lo", "med_hi"]] = [0.98, 0.97, 0.99]
    f = bp.share_findings(share, ctx, "m")
    assert (f.numbers["sh_v_MiniLM"], f.numbers["sh_v_decoder"]) == ("reproduced", "not specific to training")
    assert (f.numbers["cxs_v_MiniLM"], f.numbers["cxs_v_decoder"]) == ("not reproduced", "not reproduced")
    assert f.claim["verdict"] == "partly reproduced"
    assert "decoder single token" in f.claim["measured"] and "→ not specific to training" in f.claim["measured"]
    # an interval that reaches below one half is not "most", whatever the estimate
    low = _share(0.8, 0.2)
    low[0].loc[~low[0].random, "med_lo"] = 0.49
    assert bp.share_findings(*low, "m").numbers["sh_v_MiniLM"] == "not reproduced"


def test_combined_verdict():
    assert bv.combined_verdict(["reproduced"] * 4) == "reproduced"
    assert bv.combined_verdict(["reproduced", "not reproduced"]) == "partly reproduced"
    assert bv.combined_verdict(["not specific to training", "not reproduced"]) == "not specific to training"
    assert bv.combined_verdict(["not reproduced", "not reproduced"]) == "not reproduced"
    with pytest.raises(ValueError, match="no verdicts"):
        bv.combined_verdict([])


def test_share_both_marks_the_protocols():
    both = bv.share_both(*_share(0.8, 0.2))
    assert list(pd.unique(both.protocol)) == list(bv.SHARE_PROTOCOLS)
    single = both[both.protocol == "single token"]
    np.testing.assert_array_equal(single.value, single.attn)  # alone, A = F: all of it is the value path
    assert (single.softmax == 0).all() and both[both.protocol == "in context"].sigma_size.isna().all()


# -- section 6.2 ---------------------------------------------------------------------------------------------------
def _angles(q_trained: float, q_random: float) -> pd.DataFrame:
    frames = []
    for key in KEYS:
        for s in SERIES:
            for target in bv.ANGLE_TARGETS:
                q = np.full(6, q_trained if s == "trained" else q_random)
                q[0] = 0.5  # layer 1 never aligned
                frames.append(pd.DataFrame({"layer": np.arange(1, 7), "target": target, "theta": 60.0 + np.arange(6),
                                            "chance_lo": 70.0, "q": q}).assign(model=key, series=s,
                                                                                random=s != "trained"))
    return pd.concat(frames, ignore_index=True)


def test_angle_summary_counts_layers_and_pools_the_twins():
    s = bv.angle_summary(_angles(0.01, 0.5))
    assert set(s.series) == {"trained", "random init (2 seeds)"}
    row = s[(s.model == "MiniLM") & (s.series == "trained")].iloc[0]
    assert (row.layers_aligned, row.n, row.theta_min, row.theta_median) == (5, 6, 60.0, 62.5)
    assert s[s.series != "trained"].n.unique().tolist() == [12]


def _layers(q_trained: float, q_random: float) -> pd.DataFrame:
    """One joint test per layer (:func:`lib.chapters.two_views_angles.angle_layers`): layer 1 never aligned."""
    q = {s: np.r_[0.5, np.full(5, q_trained if s == "trained" else q_random)] for s in SERIES}
    return _per_layer({(key, s): {"p_joint": q[s], "q_joint": q[s]} for key in KEYS for s in SERIES})


def _ctx(theta: float = 50.0) -> pd.DataFrame:
    return _per_layer({(key, s): {"theta_ctx": theta + np.arange(6)} for key in KEYS for s in SERIES})


def test_angle_findings_numbers_and_verdicts():
    f = bp.angle_findings(_angles(0.01, 0.5), _layers(0.01, 0.5), _ctx(), "m", 8)
    assert f.numbers["al_MiniLM_0_tr"] == "5 of 6" and f.numbers["al_decoder_3_rd"] == "0 of 12"
    assert f.numbers["al_tot_tr"] == "10 of 12" and f.numbers["al_tot_rd"] == "0 of 24"
    assert f.numbers["al_MiniLM_tr"] == "5 of 6" and f.numbers["al_decoder_rd"] == "0 of 12"
    assert f.numbers["ml_theta_min"] == "60°" and f.numbers["ml_chance"] == "70–70°"
    assert f.numbers["al_close"] == "no layer" and f.numbers["al_close_kept"] == "0 of 0"
    assert f.claim["models"] == "m; K = 8" and f.claim["verdict"] == "reproduced"
    assert "MiniLM 5 of 6, decoder 5 of 6 layers trained, 0 of 24 at random init" in f.claim["measured"]
    assert "top-8 eigenvectors alone: MiniLM 5 of 6" in f.claim["measured"]
    ok = _layers(0.01, 0.01)
    assert bp.angle_findings(_angles(0.01, 0.01), ok, _ctx(), "m", 8).claim["verdict"] == "not specific to training"
    assert bp.angle_findings(_angles(0.5, 0.01), _layers(0.5, 0.01), _ctx(), "m", 8).claim["verdict"] == "not reproduced"


def test_angle_findings_count_layers_not_layer_subspace_pairs():
    """A layer aligned with all four subspaces is one aligned layer: the old count made the trained models'
    5 of 6 layers per subspace "40 of 48 (layer, subspace) pairs"; by layer, 10 of 12. And only the joint
    test counts: a layer aligned with each subspace alone but not jointly is not counted."""
    f = bp.angle_findings(_angles(0.01, 0.5), _layers(0.5, 0.5), _ctx(), "m", 8)
    assert f.numbers["al_tot_tr"] == "0 of 12" and f.claim["verdict"] == "not reproduced"
    assert f.numbers["al_MiniLM_0_tr"] == "5 of 6"  # each subspace's own test stays as it was


def test_near_parallel_layers_are_named_from_the_numbers_with_their_in_context_angles():
    """The prose's "two decoder layers, 2 and 3" and "does not survive in context" come from the tables."""
    ang = _angles(0.01, 0.5)
    eig = (ang.target == bv.ANGLE_TARGETS[0]) & (ang.model == "decoder")
    ang.loc[eig & ~ang.random & ang.layer.isin([2, 3]), "theta"] = [3.0, 18.0]
    ang.loc[eig & ang.random & (ang.layer == 4), "theta"] = 20.0
    ctx = _ctx()
    ctx.loc[(ctx.model == "decoder") & ~ctx.random & (ctx.layer == 3), "theta_ctx"] = 25.0
    f = bp.angle_findings(ang, _layers(0.01, 0.5), ctx, "m", 8)
    assert f.numbers["al_close"] == "the decoder's layers 2 and 3, at 3° and 18°"
    assert f.numbers["al_close_ctx"] == "51° and 25°" and f.numbers["al_close_kept"] == "1 of 2"
    assert f.numbers["al_close_rd"] == "2 of 24" and f.numbers["al_close_deg"] == "30°"
    assert f.numbers["al_close_n"] == "2 of 12" and f.numbers["al_close_fate"] == "partly survives in context"


# -- section 6.3 ---------------------------------------------------------------------------------------------------
def _rates(related: bool) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    vals = {}
    for key in KEYS:
        for s in SERIES:
            gap = rng.random(6)
            y = np.exp(-3 * gap) if related else rng.random(6) + 0.1
            vals[key, s] = {"gap_ratio": gap, "radius_J": y, "delta_H": y, "erank": y}
    return _per_layer(vals)


def test_rate_tests_rank_within_variants():
    rt = bv.rate_tests(_rates(related=True))
    assert rt.columns.tolist() == ["model", "series", "J̄ property", "variants", "r", "p", "null_lo", "null_hi",
                                   "lo", "hi", "q"]
    assert len(rt) == 12 and rt.variants.tolist() == [1, 1, 1, 2, 2, 2] * 2
    np.testing.assert_allclose(rt.r, -1.0)  # a decreasing function of the gap ratio in every variant
    assert (rt.q <= rt.p.max() * 12).all()
    pd.testing.assert_frame_equal(rt, bv.rate_tests(_rates(related=True)))  # seeded


def _power(power_at_strong: float) -> pd.DataFrame:
    """A :func:`rate_power` table whose trained design has ``power_at_strong`` at ρ = 0.8."""
    rows = []
    for design, n_var in (("6 layers × 1 variant", 1), ("6 layers × 2 variants", 2)):
        for e in bv.RATE_EFFECTS:
            pw = power_at_strong if e == bv.RATE_STRONG else e / 2
            rows.append({"effect": e, "design": design, "n": 6, "variants": n_var, "power_all": pw,
                         "power_one": pw / 2, "reps": 100})
    return pd.DataFrame(rows)


def test_rate_findings_numbers_and_verdicts():
    rates = _rates(related=True)
    rates.loc[(rates.model == "decoder") & ~rates.random & (rates.layer == 1), "radius_J"] = 41.6
    rt = bv.rate_tests(rates)
    f = bp.rate_findings(rates, rt, _power(0.3), "m")
    assert f.numbers["dec_rho1"] == "42" and f.numbers["rt_n"] == 6
    assert f.numbers["rt_sig_tr"] + f.numbers["rt_sig_rd"] > 0
    assert f.claim["verdict"] in ("reproduced", "partly reproduced")
    assert f.numbers["rt_p_perfect"] == f"{2 / 720:.4f}" and f.numbers["rt_p_next"] == f"{12 / 720:.3f}"
    assert f.numbers["rt_bh_lone"] == f"{0.05 / 12:.4f}" and f.numbers["rt_pw_tr_8"] == "0.30"
    assert f.numbers["rt_dir"] == "4 of 6"  # r = −1 everywhere: the predicted sign for ρ(J̄) and δ_H only
    assert "_" not in f.claim["measured"]  # the Results page's plain text names δ_H in words (issue 28)
    null = _rates(related=False)
    rt0 = bv.rate_tests(null)
    assert bp.rate_findings(null, rt0, _power(0.9), "m").claim["verdict"] == "not reproduced"


def test_an_absence_from_an_underpowered_test_is_inconclusive():
    """Nothing significant with six layers, and a test that finds a planted ρ = 0.8 less than 80% of the
    time: "inconclusive (underpowered)", not "not reproduced" (today's verdict)."""
    null = _rates(related=False)
    rt = bv.rate_tests(null)
    assert (rt[rt.series == "trained"].q >= 0.05).all()
    f = bp.rate_findings(null, rt, bv.rate_power(rt, 6, reps=400), "m")
    assert f.claim["verdict"] == "inconclusive (underpowered)"
    assert float(f.numbers["rt_pw_tr_8"]) < 0.5 and "power at a planted ρ = 0.8" in f.claim["measured"]


def test_rate_power_has_both_designs_and_scenarios():
    rt = bv.rate_tests(_rates(related=False))
    pw = bv.rate_power(rt, 6, effects=(0.0, 0.9), reps=500)
    assert set(pw.design) == {"6 layers × 1 variant", "6 layers × 2 variants"} and len(pw) == 4
    assert (pw[pw.effect == 0.0][["power_all", "power_one"]] < 0.03).all().all()  # FDR control under the null
    one = pw[pw.design == "6 layers × 2 variants"].set_index("effect")
    assert one.power_all[0.9] > one.power_one[0.9] > 0.3  # more power with every test planted, and with two twins
    single = pw[pw.design == "6 layers × 1 variant"].set_index("effect")
    assert single.power_all[0.9] < one.power_all[0.9]


# -- section 6.4 ---------------------------------------------------------------------------------------------------
def _gamma(q_F: float, q_J: float, q_random: float) -> pd.DataFrame:
    frames = []
    for key in KEYS:
        for s in SERIES:
            for view, q in zip(bv.GAMMA_VIEWS, (q_F, q_J)):
                qq = np.full(6, q if s == "trained" else q_random)
                frames.append(pd.DataFrame({"layer": np.arange(1, 7), "view": view, "gamma": 0.1 * (1 + np.arange(6)),
                                            "chance": 0.1 if view == bv.GAMMA_VIEWS[0] else 0.05, "rho": 0.5,
                                            "q_gamma": qq, "q_rho": 0.5}).assign(model=key, series=s,
                                                                                 random=s != "trained"))
    return pd.concat(frames, ignore_index=True)


def test_gamma_summary_and_findings():
    gam = _gamma(0.5, 0.01, 0.5)
    g4 = bv.gamma_summary(gam)
    row = g4[(g4.model == "decoder") & (g4.series == "trained") & (g4.view == bv.GAMMA_VIEWS[1])].iloc[0]
    assert (row.gamma_above_null, row.layers) == (6, 6)
    np.testing.assert_allclose([row.gamma_over_chance_min, row.gamma_over_chance_max], [2, 12])
    f = bp.gamma_findings(gam, {"MiniLM": 384, "decoder": 128}, "m")
    assert f.numbers["ch_ml_1"] == f"{lib.methods.alignment.baseline_subspace(384, 1):.4f}"
    assert f.numbers["g4_decoder_J_ratio"] == "2.00–12.00" and f.numbers["g4_MiniLM_F_g"] == "0 of 6"
    assert f.numbers["g4_MiniLM_Jwins"] == "6 of 6"
    assert (f.numbers["g4_sigF"], f.numbers["g4_sigJ"], f.numbers["g4_sigJ_rd"]) == ("0 of 12", "12 of 12", "0 of 24")
    assert f.claim["verdict"] == "reproduced"
    assert bp.gamma_findings(_gamma(0.5, 0.01, 0.01), {"MiniLM": 384, "decoder": 128}, "m").claim["verdict"] \
        == "not specific to training"
    assert bp.gamma_findings(_gamma(0.01, 0.01, 0.5), {"MiniLM": 384, "decoder": 128}, "m").claim["verdict"] \
        == "not reproduced"


# -- section 6.5 ---------------------------------------------------------------------------------------------------
    named = bp.gamma_findings(gam, {"MiniLM": 384, "decoder": 128}, "m", prompts={"MiniLM": 8, "decoder": 24})
    assert "MiniLM (8 prompts): γₜ/chance" in named.claim["measured"]
    assert "decoder (24 prompts): γₜ/chance" in named.claim["measured"]
    assert "prompts)" not in f.claim["measured"]


def _context(rel: float):
    vals = {}
    for key in KEYS:
        for s in SERIES:
            r = rel * (1 + 0.1 * np.arange(6))
            vals[key, s] = {"rel_diff": r, "rel_min": r / 2, "rel_max": 2 * r, "rel_first": r * 1.1,
                            "radius_single": 1.0, "radius_ctx": 1.2, "fC_single": 0.2, "fC_ctx": 0.25,
                            "theta_single": 10.0 + np.arange(6), "theta_ctx": 50.0 + np.arange(6)}
    ctx = _per_layer(vals)
    funnel = pd.DataFrame([{"model": key, "series": s, "prompts": 4, "funnel erank, single-token": 3.0,
                            "funnel erank, in-context": 5.04} for key in KEYS for s in SERIES])
    eps = np.array([1e-4, 1e-3, 1e-2, 1e-1])
    pert = pd.concat([pd.DataFrame({"eps": eps, "jacobian": "in-context", "error": 2 * eps}).assign(model=key)
                      for key in KEYS] + [pd.DataFrame({"eps": eps, "jacobian": "single-token", "error": 0.5})
                                          .assign(model=key) for key in KEYS], ignore_index=True)
    return ctx, funnel, pert


def test_context_findings_numbers_and_verdicts():
    f = bp.context_findings(*_context(0.6), "m")
    assert f.numbers["pt_slope_MiniLM"] == "1.00" and f.numbers["pt_single_decoder"] == "0.50"
    assert f.numbers["pt_ctx_MiniLM"] == "2.0e-03"
    assert f.numbers["cx_tr_MiniLM"] == "0.60–0.90" and f.numbers["cx_fc_diff"] == "0.05"
    assert f.numbers["cx_th_decoder"] == "10–15° single-token vs 50–55° in-context"
    assert f.numbers["cx_er_MiniLM"] == "3.0 vs 5.0"
    assert f.numbers["ex_rel_first"] == ", ".join(f"{0.66 * (1 + 0.1 * t):.3f}" for t in range(6))
    assert f.claim["verdict"] == "not reproduced" and "slope of the in-context Jacobian 1.00, 1.00" in f.claim["measured"]
    assert "‖J(in context) − J(single)‖" in f.claim["measured"] and "_" not in f.claim["measured"]  # plain text, typeset
    assert bp.context_findings(*_context(0.1), "m").claim["verdict"] == "reproduced"


# -- section 6.6 ---------------------------------------------------------------------------------------------------
ALPHAS = [0, 1, 5, 20, 100, 1000]


def _steer(tokens_top: float, write_top: float) -> pd.DataFrame:
    rows = []
    for key in KEYS:
        for s in SERIES:
            for a in ALPHAS:
                top = a == 1000 and s == "trained" and key == "MiniLM"
                tok = tokens_top if top else (0.99 if a >= 5 else 0.2)
                write = write_top if top else 0.7
                rows.append({"model": key, "weights": s, "random": s != "trained", "alpha": float(a),
                             "spectral": 1.0 if a >= 5 else 0.3, "J_sv": 0.1 if top else 0.8,
                             "J_write": write, "J_write_lo": write - 0.01, "J_write_hi": write + 0.01,
                             "share": 0.5, "share_lo": 0.4, "share_hi": 0.6,
                             "tokens": tok, "tokens_lo": tok - 0.01, "tokens_hi": min(tok + 0.01, 1.0)})
    steer = pd.DataFrame(rows)
    return steer.assign(series=np.where(steer.random, "random init (2 seeds)", "trained"))


def test_steering_findings_numbers():
    f = bp.steering_findings(_steer(0.7, 0.1), ALPHAS)
    assert f.numbers["st_saturating"] == "MiniLM" and f.numbers["st_twins_saturating"] == "none"
    assert f.numbers["st_MiniLM_tokens_ci"] == "0.700 [0.690, 0.710]"
    assert f.numbers["st_MiniLM_J_write_0_ci"] == "0.700 [0.690, 0.710]"
    assert f.numbers["st_decoder_spectral_5"] == "1.000" and f.numbers["st_MiniLM_tokens_rd"] == "0.99"
    assert not f.claim  # the verdicts (TV6, TV7) compare at matched saturation: test_two_views_saturation


def test_verdict_rules_at_their_thresholds():
    """The rules the findings apply (lib.chapters.two_views), on both sides of each threshold."""
    assert bv.angle_verdict(0.49, 0.0) == "not reproduced"
    assert bv.angle_verdict(0.8, 0.5) == "reproduced"
    assert bv.angle_verdict(0.6, 0.5) == "not specific to training"  # ahead of the twins by 0.2 or less
    assert bv.gamma_verdict(0, 1, 0, 12, 24) == "not reproduced"  # J̄ ahead by one layer only
    assert bv.gamma_verdict(0, 2, 0, 12, 24) == "reproduced"
    assert bv.gamma_verdict(0, 2, 4, 12, 24) == "not specific to training"  # the twins as often, 1/6
    assert bv.context_verdict(pd.Series([0.1, 0.3, 0.19])) == "reproduced"
    assert bv.context_verdict(pd.Series([0.2])) == "not reproduced"  # under 0.2, strictly
    no_power = pd.DataFrame({"design": ["6 layers × 1 variant"], "effect": [bv.RATE_STRONG], "power_all": [0.9]})
    assert bv.rate_verdict(6, 6, no_power, "6 layers × 1 variant") == "reproduced"
    assert bv.rate_verdict(1, 6, no_power, "6 layers × 1 variant") == "partly reproduced"
    assert bv.rate_verdict(0, 6, no_power, "6 layers × 1 variant") == "not reproduced"
    weak = no_power.assign(power_all=0.3)
    assert bv.rate_verdict(0, 6, weak, "6 layers × 1 variant") == "inconclusive (underpowered)"
    assert bv.steering_saturating(_steer(0.7, 0.1), 1000) == (["MiniLM"], [])
    assert bv.steering_saturating(_steer(0.7, 0.1), 5) == ([], [])


# -- what the chapter shows and glues --------------------------------------------------------------------------------
def test_readable_tables_have_words_for_headers():
    tables = {"share": bv.share_both(*_share(0.8, 0.2)), "angles": bv.angle_summary(_angles(0.01, 0.5)),
              "rates": bv.rate_tests(_rates(True)), "gamma": bv.gamma_summary(_gamma(0.5, 0.01, 0.5)),
              "context": _context(0.6)[0], "funnel": _context(0.6)[1], "steering": _steer(0.7, 0.1)}
    for kind, df in tables.items():
        out = bp.readable(df, kind)
        code = [h for h in out.columns if re.search(r"[A-Za-z0-9]_[A-Za-z0-9]", h) and not re.search(r"[₀-₉]", h)]
        assert not code, (kind, code)
        assert len(out) == len(df)
    assert bp.readable(tables["share"], "share")["95% CI"].iloc[0] == "0.780 to 0.830"
    with pytest.raises(ValueError, match="kind must be one of"):
        bp.readable(tables["share"], "shares")


def test_findings_glue_every_number_and_return_the_claim(monkeypatch):
    glued = {}
    monkeypatch.setattr("lib.page.prose.glue", lambda name, value, display=False: glued.__setitem__(name, value))
    f = bp.share_findings(*_share(0.8, 0.2), "m")
    assert f.glue() is f.claim and glued == f.numbers
    assert set(f.claim) == {"models", "measured", "verdict"} and f.claim["verdict"] in VERDICTS


def test_readable_rate_intervals_read_lo_to_hi():
    out = bp.readable(bv.rate_tests(_rates(True)), "rates")
    assert all(" to " in t for t in out["95% CI"]) and all(" to " in t for t in out["permutation null, central 95%"])


def test_chapter_6_cpu_decoder_work_known_answers():
    """A 10-layer d = 100 model (MLP width 200) with one twin on 10 prompts: 2 · 10 · 10 · 100² · 4 bytes of kept
    Jacobians, 2 · 10 · 10 · (2 · 100² · 200 + 2 · 100³) closed-form FLOPs at the measured rate; the published
    site's SmolLM2-135M run fits the hosted runner (16 GB, minutes, not hours)."""
    row = bv.cpu_decoder_work([("x", 100, 200, 10)], prompts=10, twins=1).iloc[0]
    kept = 2 * 10 * 10 * 100**2 * 4 / 1e9
    cpu_min = 2 * 10 * 10 * (2 * 100**2 * 200 + 2 * 100**3) / bv.TWO_VIEWS_CPU_RATE / 60
    assert row["per-prompt Jacobians (GB)"] == pytest.approx(kept)
    assert row["peak memory (GB)"] == pytest.approx(bv.TWO_VIEWS_MEMORY_FACTOR * kept)
    assert row["CPU min"] == pytest.approx(cpu_min)
    assert row["wall min"] == pytest.approx(cpu_min / bv.TWO_VIEWS_SPEEDUP)
    smol = bv.cpu_decoder_work().iloc[0]  # the measured shape: 270 CPU-s, 10.3 GB at its peak
    assert smol["model"] == "HuggingFaceTB/SmolLM2-135M"
    assert smol["CPU min"] == pytest.approx(270 / 60, rel=0.05) and smol["peak memory (GB)"] < 16
    with pytest.raises(ValueError, match="prompts ≥ 1"):
        bv.cpu_decoder_work(prompts=0)
