"""lib.chapters.real_models, what chapter 3 computes section by section and the words and numbers of its prose.

The page's glue cells call these functions; the tests pin each on hand-made frames (where the answer can be
written down) or on a tiny checkpoint against the lower-level functions they wrap.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import lib
from lib.chapters import real_models as rm
from lib.chapters import real_models_directions as rd
from lib.methods import alignment as als
from lib.models import paper
from lib.page import real_models as rp

TEXTS = ["hello there.", "a longer second sentence, with a comma.", "abc", "the third one is short."]


# -- words -------------------------------------------------------------------------------------------------
def test_layer_list_reads_as_english():
    assert rp.layer_list(()) == "no layer"
    assert rp.layer_list((3,)) == "layer 3"
    assert rp.layer_list((1, 2)) == "layers 1 and 2"
    assert rp.layer_list((1, 2, 4, 5, 6)) == "layers 1, 2, 4, 5 and 6"


@pytest.mark.parametrize("n_trained, n_twins, verdict", [
    (0, (0, 0, 0), "not reproduced"),
    (5, (0, 1, 3), "partly reproduced"),
    (6, (0, 1, 3), "reproduced"),
    (2, (0, 2, 1), "not specific to training"),  # a twin does as well
    (3, (), "partly reproduced"),
])
def test_twin_verdict(n_trained, n_twins, verdict):
    assert rm.twin_verdict(n_trained, n_twins, 6) == verdict


def test_beat_phrase_counts_layers_of_trained_and_twins():
    r = rm.LayerRange(6, 1.0, 2.0, 0.3, 0.8, 2, gamma_beat=(1, 2, 4), rho_beat=(5,))
    c = rm.TwinComparison("simplified", 1.5, (1.2,), "above", 0.6, (0.5,), "above",
                          twin_gamma_beat=(0, 1, 3), twin_rho_beat=(0, 0, 0))
    assert rp.beat_phrase(r, c, "gamma") == "3 of 6 layers (trained) vs 0, 1, 3 (twins)"
    assert rp.beat_phrase(r, c, "rho") == "1 of 6 layers (trained) vs 0, 0, 0 (twins)"
    with pytest.raises(ValueError, match="metric"):
        rp.beat_phrase(r, c, "tilt")


def test_table_formats_give_one_precision_per_quantity():
    cols = ["model", "predicted rate r", "fitted rate (steps 20–50)", "fitted rate 95% CI", "alignment at step 0",
            "alignment at step 60", "mean γₜ / chance", "mean Δγₜ", "mean ρₜ", "γₜ / chance", "ρₜ", "tokens",
            "γₜ / chance 95% CI", "ρₜ 95% CI"]
    fmt = rp.table_formats(cols)
    assert fmt["predicted rate r"] == fmt["fitted rate (steps 20–50)"] == "{:.3f}"  # as the CI text (3 decimals)
    assert fmt["alignment at step 0"] == fmt["alignment at step 60"] == "{:.4f}"
    assert fmt["mean γₜ / chance"] == fmt["γₜ / chance"] == "{:.2f}"  # as "[1.03, 1.16]"
    assert fmt["mean ρₜ"] == fmt["ρₜ"] == "{:.3f}"
    # text (intervals) and counts keep their own form
    assert not {"model", "fitted rate 95% CI", "tokens", "γₜ / chance 95% CI", "ρₜ 95% CI"} & set(fmt)


# -- the prose's numbers, on hand-made frames -------------------------------------------------------------
def _frame(who, gamma_ratio, rho, q_gamma, q_rho):
    """layer_varying-style results for both sources (the same numbers), with the null columns."""
    L = len(gamma_ratio)
    return pd.concat([pd.DataFrame({
        "layer": np.arange(1, L + 1), "variant": f"{who} · {s}", "gamma_ratio": gamma_ratio, "rho": rho,
        "tilt": 0.01, "q_gamma": q_gamma, "q_rho": q_rho,
        "gamma_ratio_null_lo": 0.8, "gamma_ratio_null_hi": 1.25, "rho_null_lo": 0.25, "rho_null_hi": 0.75,
    }) for s in rm.TRAJECTORIES], ignore_index=True)


class _Model:
    def __init__(self, seed=None):
        self.random_init, self.seed, self.label = seed is not None, seed, "M"


def test_gamma_rho_glue_on_hand_made_frames():
    trained = _frame("trained", [1.5, 3.0, 2.0], [0.75, 0.5, 0.875], [0.01, 0.01, 0.5], [0.01, 0.5, 0.01])
    tr = rm.Analysis(_Model(), None, trained, trained, {})
    tws = [rm.Analysis(_Model(s), None, _frame(f"random init s{s}", [1.0, 4.0, 1.0], [0.5, 0.25, 0.5],
                                               [1.0, 0.01, 1.0], [1.0, 1.0, 1.0]), None, {}) for s in (0, 1)]
    g = rp.gamma_rho_glue(tr, tws, "simplified")
    assert g["ratio_range"] == "1.50–3.00" and g["rho_range"] == "0.50–0.88"
    assert (g["g_beat"], g["g_beat_layers"], g["r_beat"], g["r_beat_layers"]) == (2, "layers 1 and 2", 2,
                                                                                     "layers 1 and 3")
    assert g["null_g"] == "0.80–1.25" and g["null_rho"] == "0.25–0.75"
    assert g["tw_ratio_range"] == "1.00–4.00" and g["tw_g_beat"] == "1, 1" and g["tw_r_beat"] == "0, 0"
    assert g["tr_g"] == "2.17" and g["tw_g"] == "2.00, 2.00" and g["g_where"] == "above"
    assert g["tr_r"] == "0.708" and g["r_where"] == "above" and (g["g_above"], g["r_above"]) == (2, 3)
    assert g["means_verdict"].startswith("training raises both means")
    assert g["null_verdict"].endswith("for both γₜ and ρₜ")
    tws[0] = rm.Analysis(_Model(0), None, _frame("random init s0", [1.0] * 3, [0.5] * 3, [0.01] * 3, [1.0] * 3),
                         None, {})
    assert rp.gamma_rho_glue(tr, tws, "simplified")["null_verdict"].endswith("for ρₜ only")


def _profile(who, source, build_up, p, ratio_last, null_last):
    steps = np.arange(4)
    return pd.DataFrame({
        "step": steps, "ratio": [1.0, 1.0, ratio_last, 2.0], "ratio_lo": 0.9, "ratio_hi": 1.2,
        "null_ratio_lo": null_last[0], "null_ratio_hi": null_last[1], "build_up": build_up, "build_up_lo": build_up - 0.01,
        "build_up_hi": build_up + 0.01, "build_up_null_lo": -0.02, "build_up_null_hi": 0.03, "p_build_up": p,
        "variant": f"{who} · {source}", "who": who, "source": source})


def test_build_up_glue_reads_the_trained_row_and_the_twins():
    profiles = pd.concat([
        _profile("trained", "simplified", 0.0154, 0.142, 1.1, (0.73, 1.44)),
        _profile("trained", "real forward pass", 0.05, 0.01, 1.6, (0.8, 1.35)),
        _profile("random init s0", "simplified", -0.0037, 0.6, 1.0, (0.7, 1.4)),
        _profile("random init s1", "simplified", -0.0408, 0.9, 1.0, (0.7, 1.4)),
    ], ignore_index=True)
    sim = rp.build_up_glue(profiles, "simplified", n_layers=3)  # depth L−1 = step 2
    assert sim.values == {"build": "+0.0154 [+0.0054, +0.0254]", "tw_build": "-0.0037, -0.0408",
                          "last_ratio": "1.10 [0.90, 1.20]", "last_null": "0.73–1.44",
                          "build_null": "-0.0200 to +0.0300", "build_p": "0.142"}
    assert sim.last_inside and not sim.beats_null
    real = rp.build_up_glue(profiles, "real forward pass", n_layers=3)
    assert not real.last_inside and real.beats_null and real.values["tw_build"] == ""


# -- what the sections compute, on a tiny checkpoint -------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_pair(tiny_dir, tmp_path_factory):
    """A tiny BERT with a small WordPiece tokenizer (as tests/unit/test_real_models.py builds it) and its
    random-init twin (seed 3)."""
    import json
    import shutil

    from tiny_models import VOCAB

    letters = list("abcdefghijklmnopqrstuvwxyz")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *letters, *(f"##{c}" for c in letters), ".", ","]
    vocab += [f"[unused{i}]" for i in range(VOCAB - len(vocab))]
    folder = tmp_path_factory.mktemp("tok-bert") / "ckpt"
    shutil.copytree(tiny_dir("bert"), folder)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer",
                                                              "do_lower_case": True}))
    return lib.load_model(str(folder)), lib.load_model(str(folder), random_init=True, seed=3)


def test_shared_layer_runs_iterate_each_layer_of_each_model(tiny_pair):
    trained, twin = tiny_pair
    H, S = als.prompt_states(trained, TEXTS)
    x0 = [h[0] for h in H]
    eb = als.eigen_bases(trained.layer_matrices())
    runs = rm.shared_layer_runs([trained, twin], x0, S, steps=12, layers=(0, 1), anchor=4, fit=(4, 10),
                                bases=[eb, None])
    assert [(r.series, r.layer) for r in runs] == [("trained", 1), ("trained", 2), ("random init, seed 3", 1),
                                                   ("random init, seed 3", 2)]
    ts = als.simplified_states(twin.layer(1).attention, x0, steps=12, special=S)
    ref = rm.shared_convergence(ts.select("content"), als.eigen_bases(twin.layer_matrices()).layer(1), anchor=4,
                                 fit=(4, 10))
    pd.testing.assert_frame_equal(runs[3].convergence, ref)
    frame = rm.shared_runs_frame(runs)
    assert len(frame) == sum(len(r.convergence) for r in runs)
    assert frame.groupby(["series", "layer iterated"]).size().size == 4
    table = rp.shared_runs_table(runs, fit=(4, 10))
    assert len(table) == 8 and "fitted rate (steps 4–10)" in table
    assert rp.shared_run_row(table, twin.label, 2)["model"] == "random init, seed 3"


def test_analyse_overview_special_tokens_and_depth_profiles(tiny_pair):
    trained, twin = tiny_pair
    H, S = als.prompt_states(trained, TEXTS)
    eb = als.eigen_bases(trained.layer_matrices())
    tr = rm.analyse(trained, TEXTS, n_null=20, H=H, S=S, bases=eb)
    tw = rm.analyse(twin, TEXTS, n_null=20)
    ref = rm.layer_varying(trained, H, S, eb, n_null=20)
    pd.testing.assert_frame_equal(tr.results, ref.results)
    assert tr.who == "trained" and tw.who == "random init s3" and tr.bases is eb
    over = rp.overview_table([tr, tw])
    assert over.model.tolist() == [trained.label] * 2 + [twin.label] * 2
    assert over.trajectories.tolist() == list(rm.TRAJECTORIES) * 2
    special = rm.special_token_results(tr)
    assert special.variant.tolist() == [f"trained · {s} · [CLS]/[SEP] only" for s in rm.TRAJECTORIES
                                        for _ in range(trained.n_layers)]
    assert (special.tokens == 2 * len(TEXTS)).all()  # [CLS] and [SEP] of every prompt
    profiles = rm.depth_profiles([tr, tw], m=10)
    assert profiles.variant.unique().tolist() == [f"{w} · {s}" for w in ("trained", "random init s3")
                                                  for s in rm.TRAJECTORIES]
    one = rm.fixed_direction_profile(tw.states["real forward pass"].select("content"), tw.bases.v1[-1], m=10)
    got = profiles[profiles.variant == "random init s3 · real forward pass"].drop(columns=["variant", "who", "source"])
    pd.testing.assert_frame_equal(got.reset_index(drop=True), one)


def test_random_albert_spectra_leading_eigenvalues_agree_with_the_full_eig(monkeypatch):
    monkeypatch.setitem(paper.ALBERT_SIZES, "tiny", {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4})
    out = rm.random_albert_spectra(seed=1, full=("tiny",), leading=("tiny",), k=4)
    full, top = out.table.iloc[0], out.table.iloc[1]
    assert out.table.layer.tolist() == ["shared", "shared"] and out.table.d.tolist() == [64, 64]
    assert out.leading == (top.model,) and "random init, seed 1" in top.model
    assert top.gap_ratio == pytest.approx(full.gap_ratio, rel=1e-8)
    assert top.spectral_radius == pytest.approx(full.spectral_radius, rel=1e-10)
    assert 0 <= out.residual < 1e-8


def test_paper_models_table():
    t = rp.paper_models_table()
    assert list(t.columns) == ["hub id", "d", "layers", "shared weights"] and len(t) == len(paper.PAPER_MODELS)
    assert paper.best_device() in ("cpu", "cuda")


# -- issue #25 §6: the own-direction verdicts of LA7/LA8 and the equivalence verdict of LA9 ------------------------
def _tests(who, beat, own_p, foreign_p=None):
    """A hand-made DirectionTests: the same layers and p-values for every statistic."""
    own = rd.OwnDirectionTest(0.1, own_p, 3, 720, True)
    fore = None if foreign_p is None else rd.ForeignDirectionTest(np.ones(6), np.zeros(6), np.zeros(6),
                                                                   np.ones(6), foreign_p, 18, 20_000)
    keys = rd.DIRECTION_STATISTICS
    return rd.DirectionTests(who, who, {k: beat for k in keys}, {k: own for k in keys}, {k: fore for k in keys})


@pytest.mark.parametrize("trained, twins, verdict", [
    (_tests("trained", (1, 2, 3, 4, 5, 6), 0.001, 0.001), [_tests("t0", (), 0.5)], "reproduced"),
    (_tests("trained", (1, 2), 0.001, 0.001), [_tests("t0", (1,), 0.001)], "partly reproduced"),
    # five layers beat the random-subspace null, but other layers' v₁ score as high: the counts alone (the rule
    # before #25) said "partly reproduced"
    (_tests("trained", (1, 2, 4, 5, 6), 0.30, 0.001), [_tests("t0", (), 0.5)], "not reproduced"),
    (_tests("trained", (1, 2, 4, 5, 6), 0.001, 0.20), [_tests("t0", (), 0.5)], "not reproduced"),  # twins' v₁
    (_tests("trained", (1, 2), 0.001, 0.001), [_tests("t0", (1, 2, 3), 0.01)], "not specific to training"),
    # a twin's layers beat the random null as often, but its own directions do not beat its other layers'
    (_tests("trained", (1, 2), 0.001, 0.001), [_tests("t0", (1, 2, 3), 0.4)], "partly reproduced"),
])
def test_direction_verdict(trained, twins, verdict):
    assert rd.direction_verdict([trained, *twins], ("gamma", "tilt"), 6) == verdict


def test_direction_verdict_intersects_the_statistics():
    t = _tests("trained", (1, 2, 3), 0.001, 0.001)
    t.beat["tilt"] = (3, 4)  # γ beats its null in 1-3, Δγ in 3-4: layer 3 alone tilts and lies above chance
    assert t.held(("gamma", "tilt")) == (3,) and t.held(("rho",)) == (1, 2, 3)


@pytest.mark.parametrize("verdicts, combined", [
    (["reproduced", "reproduced"], "reproduced"),
    (["reproduced", "not reproduced"], "partly reproduced"),
    (["not specific to training", "not reproduced"], "not specific to training"),
    (["not reproduced", "not reproduced"], "not reproduced"),
])
def test_combine_verdicts(verdicts, combined):
    assert rm.combine_verdicts(verdicts) == combined


def test_build_up_verdict_reads_no_evidence_as_inconclusive():
    """LA9 before #25: p = 0.142 against the random-subspace null gave "reproduced". Without an equivalence test
    that shows the build-up within its margin it is "inconclusive (underpowered)"."""
    row = pd.Series({"p_build_up": 0.142, "p_equivalent": 0.30})
    assert rm.build_up_status(row) == "inconclusive"
    assert rm.build_up_verdict([rm.build_up_status(row)] * 2) == "inconclusive (underpowered)"
    eq = pd.Series({"p_build_up": 0.142, "p_equivalent": 0.001})
    up = pd.Series({"p_build_up": 0.001, "p_equivalent": 0.9})
    assert [rm.build_up_status(r) for r in (eq, up)] == ["none", "builds up"]
    assert rm.build_up_verdict(["none", "none"]) == "reproduced"
    assert rm.build_up_verdict(["none", "inconclusive"]) == "partly reproduced"
    assert rm.build_up_verdict(["builds up", "none"]) == "partly reproduced"
    assert rm.build_up_verdict(["builds up"] * 2) == "not reproduced"


def test_direction_tests_on_a_tiny_checkpoint(tiny_pair):
    trained, twin = tiny_pair
    tr, tw = rm.analyse(trained, TEXTS, n_null=20), rm.analyse(twin, TEXTS, n_null=20)
    tests = rd.direction_tests(tr, [tw])
    assert [t.who for t in tests] == ["trained", "random init s3"]
    assert tests[1].foreign["gamma"] is None and tests[0].foreign["gamma"].directions == twin.n_layers
    sim = rm.select_source(tr.results, "simplified")
    np.testing.assert_allclose(tests[0].foreign["gamma"].observed, sim.gamma_ratio, rtol=1e-12)
    np.testing.assert_allclose(tests[0].foreign["tilt"].observed, sim.tilt / sim.chance, rtol=1e-10)
    table = rp.direction_table(tests)
    assert len(table) == 2 * len(rd.DIRECTION_STATISTICS) and table["p, own vs twins' v₁"].iloc[-1] == "—"


def test_direction_glue_reads_the_trained_model_and_counts_the_twins():
    tr = _tests("trained", (1, 2, 4), 0.0004, 0.002)
    tr.beat["tilt"] = (2, 4, 5)
    g = rp.direction_glue([tr, _tests("t0", (1,), 0.01), _tests("t1", (1, 2), 0.3)], 6)
    assert (g["own_p_gamma"], g["twin_p_rho"], g["wins_tilt"], g["excess_gamma"]) == ("p < 0.001", "p = 0.002", 3,
                                                                                      "+0.10")
    assert (g["la7_layers"], g["la7_n"], g["la7_twins"]) == ("layers 2 and 4", 2, "1, 0")  # t1 fails its own test
    assert (g["la8_n"], g["la8_twins"], g["la8_verdict"]) == (3, "1, 0", "partly reproduced")


def test_build_up_summary_groups_the_sources_by_status():
    got = rp.build_up_summary({"A": "none", "B": "none", "C": "none", "D": "builds up"})
    assert got == "within its margin of the null (no build-up) in A, B and C; beyond its null in D"
    assert rp.build_up_summary({"A": "inconclusive"}).startswith("neither beyond its null nor shown")


def test_batched_prompt_states_agree_with_one_pass_per_text(tiny_pair):
    """Texts of equal token length share one forward pass (chapter 3's runtime); every state agrees with its own
    one-text pass to float32 rounding, in the texts' order, special masks included."""
    trained, _ = tiny_pair
    texts = [*TEXTS, "hello there.", "abd"]  # two pairs of equal length
    H, S = als.prompt_states(trained, texts)
    Hb, Sb = als.prompt_states(trained, texts, batched=True)
    assert len(Hb) == len(texts) and [h.shape for h in Hb] == [h.shape for h in H]
    for a, b in zip(H, Hb):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-5)
    assert all(bool((a == b).all()) for a, b in zip(S, Sb))
    with pytest.raises(lib.InputError, match="2-D"):
        trained.hidden_states_batch(trained.encode("abc")["input_ids"])


# -- LA9's margin and the chapter's prose (#25 §6, §8) ---------------------------------------------------------
def test_depth_profiles_judge_the_build_up_by_the_stated_margin():
    """LA9's margin is one named rule (rm.BUILD_UP_MARGIN, glued into the prose) that depth_profiles passes on:
    isotropic tokens (no build-up) are shown equivalent to none within half a chance level, but not within a
    hundredth of one, where the same data leave the verdict "inconclusive"."""
    from types import SimpleNamespace

    rng = np.random.default_rng(3)
    ts = als.TokenStates.from_trajectories([rng.standard_normal((4, 10, 20)) for _ in range(200)])
    v1 = np.linalg.qr(rng.standard_normal((20, 1)))[0]
    a = SimpleNamespace(who="trained", states={"simplified": ts}, bases=SimpleNamespace(v1=np.stack([v1] * 3)))
    chance = als.baseline_subspace(20, 1)
    wide = rm.depth_profiles([a], m=200).iloc[0]
    assert rm.BUILD_UP_MARGIN == 0.5 and wide.margin == pytest.approx(rm.BUILD_UP_MARGIN * chance)
    assert rm.build_up_status(wide) == "none"
    narrow = rm.depth_profiles([a], m=200, margin_chance=0.01).iloc[0]
    assert narrow.margin == pytest.approx(0.01 * chance)
    assert rm.build_up_status(narrow) == "inconclusive"


def _chapter_3_prose() -> str:
    """Chapter 3's markdown without its code cells."""
    from conftest import ROOT

    text = (ROOT / "book" / "03_real_models.md").read_text(encoding="utf-8")
    return re.sub(r"```\{code-cell\}.*?\n```\n", "", text, flags=re.DOTALL)


def _paragraph(prose: str, start: str, end: str = "\n\n") -> str:
    i = prose.index(start)
    return prose[i:prose.index(end, i + len(start))]


def test_chapter_3_states_its_verdict_margins_as_glued_rules():
    """LA5's ±margin and LA9's equivalence margin, level and interval are verdict rules: tagged [ours] in the prose
    and glued from the numbers the verdicts use, never typed ("half the chance level", "p < 0.05", "90%")."""
    prose = _chapter_3_prose()
    la5 = _paragraph(prose, "**The verdict rule of LA5** [ours]")
    assert "{eval}`la5_margin`" in la5
    la9 = _paragraph(prose, "**An absence needs a test that could see a presence.**")
    assert "**The margin** [ours]" in la9
    for name in ("la9_margin_chance", "alpha", "tost_level", "sim_margin"):
        assert f"{{eval}}`{name}`" in la9, name
    for typed in ("half the chance level", "0.05", "90%", "5%"):
        assert typed not in la9, typed


def test_chapter_3_types_no_count_the_computation_gives():
    """Counts of twins, layers, sizes and checkpoints, and the FDR level, are glued (#25 §8); the exercises, which
    set the reader a task with its own parameters, are not read."""
    prose = _chapter_3_prose().split("\n## Exercises\n")[0]
    words = r"(?:two|three|four|five|six|seven|eight|nine|\d+)"
    typed = re.findall(rf"\b{words}\s+(?:twins|checkpoints|sizes)\b|\bof its {words}\s+layers\b|FDR 5%(?! <)", prose)
    assert not typed, typed


def test_chapter_3_takeaway_reads_the_real_pass_from_its_tests():
    """The Takeaway's last line said the tilt is "absent from MiniLM's real residual stream" while Δγₜ beat its
    own null in some layers there: it now quotes that count and LA7's rule on the real pass."""
    takeaway = _paragraph(_chapter_3_prose(), ":::{admonition} Takeaway", "\n:::\n")
    assert "absent from" not in takeaway
    assert "{eval}`tk_so`" in takeaway  # rp.takeaway's line, tested above with t_beat and the real pass's LA7
    from conftest import ROOT

    source = (ROOT / "book" / "03_real_models.md").read_text(encoding="utf-8")
    assert '"t_beat": real_t_beat' in source and '"la7": real_la7["MiniLM"]' in source


# -- the Takeaway, decided from the numbers (chapter 3's parameters cell) ---------------------------------------
def _la7(verdict: str, n: int, twins: str = "0, 0, 0") -> dict:
    return {"la7_verdict": verdict, "la7_n": n, "la7_twins": twins, "own_p_gamma": "p = 0.001"}


def _takeaway(l1_ok=True, l2_ok=False, l2_complex=True, v1="partly reproduced", v2="partly reproduced",
              g_beat=0, twins2="1, 1, 2"):
    rates = (rp.RateCheck(1, False, "0.800", "0.790", l1_ok, "Fig. 3.3"),
             rp.RateCheck(2, l2_complex, "0.990", "0.500", l2_ok, "Fig. 3.4"))
    la7 = {"MiniLM": _la7(v1, 4), "decoder": _la7(v2, 3, twins2)}
    real = {"ratio_range": "0.95–1.05", "g_beat": g_beat, "t_beat": 3, "la7": "not reproduced"}
    return rp.takeaway(("MiniLM", "decoder"), rates, la7, 6, "Fig. 3.5, Fig. 3.8", real)


def test_takeaway_of_the_stand_ins_places_each_clause_where_todays_numbers_put_it():
    tk = _takeaway()
    assert tk["held"].startswith("iterated, trained layer 1 converges at the predicted rate (0.800 per step vs 0.790")
    assert "In the FFN-free model of both trained models" in tk["held"]
    assert "4 of 6 MiniLM layers and 3 of the decoder's (twins: 0, 0, 0 and 1, 1, 2)" in tk["held"]
    assert tk["not_held"].startswith("in MiniLM's real forward pass γₜ sits at chance (γₜ / chance 0.95–1.05, 0 of 6")
    assert "a complex-λ₁ layer stalls (rate 0.990 vs 0.500, Fig. 3.4)" in tk["not_held"]
    assert "real in the FFN-free model of both models and partly architectural" in tk["so"]
    assert "stays at chance while Δγₜ beats its random-subspace null in 3 of 6 layers" in tk["so"]


def test_takeaway_moves_a_clause_when_the_numbers_change():
    tk = _takeaway(l1_ok=False, l2_ok=True, v2="not reproduced", g_beat=2, twins2="0, 0, 0")
    assert "layer 1 does not converge at the predicted rate" in tk["not_held"]
    assert "layer 2 (complex λ₁) converges at its predicted rate too" in tk["held"]
    assert "FFN-free model of MiniLM the tokens" in tk["held"] and "decoder's (twins" not in tk["held"]
    assert "FFN-free model of decoder the tilt toward a layer's own direction does not count (LA7 not reproduced" \
        in tk["not_held"]
    assert "real forward pass γₜ beats its null in 2 of 6 layers" in tk["held"]
    assert "is real in the FFN-free model of MiniLM only;" in tk["so"]  # its twins count no layer
    assert "beats its null in 2 of 6 layers and Δγₜ" in tk["so"]
    assert "stalls" not in tk["not_held"]


def test_takeaway_with_nothing_held_says_so_and_a_real_layer_2_is_not_called_complex():
    tk = _takeaway(l1_ok=False, l2_complex=False, v1="not reproduced", v2="not specific to training", g_beat=0)
    assert tk["held"] == "nothing of the above."
    assert "iterated, trained layer 2 does not converge at its predicted rate" in tk["not_held"]
    assert "complex" not in tk["not_held"]
    assert "no tilt toward a layer's own direction is shown in the FFN-free model of either model" in tk["so"]


def test_display_name_names_the_stand_ins_and_any_other_model_by_its_label():
    class M:
        label = "bert-base-uncased (trained)"

    assert rp.display_name("minilm", M) == "MiniLM" and rp.display_name("book-decoder", M) == "decoder"
    assert rp.display_name("/my/bert", M) == "bert-base-uncased (trained)"
