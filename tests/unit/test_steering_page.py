"""Chapter 5's page helpers (lib.chapters.steering_lab's checks and controls, lib.page.steering_lab' figures and tables).

What the chapter once computed in its own cells (``first_alpha``, ``at``, ``ppl_ci``, the edit check, the
layer and V-edit controls) lives in ``lib`` and is checked here against direct computations; the figures
carry the book's style (one colour per series, the baseline's legend entry, a description, Unicode), and the
tables show readable, HTML-escaped labels with one number format per quantity.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
from chart_specs import nodes as _nodes

import lib
from lib import parallel
from lib.chapters import steering_lab as sl
from lib.linalg import spectra
from lib.methods import steering
from lib.page import steering_lab as sp

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def dec():
    return lib.load_model("book-decoder", with_lm_head=True)


@pytest.fixture(scope="module")
def lab_d(dec):
    from lib.models.decoder import language

    return sl.Lab(dec, language.prompts(4), prompt="the sailor watches")


@pytest.fixture(scope="module")
def grid_d(lab_d, dec):
    dirs = [steering.word_direction(dec, "boat"), steering.random_direction(dec.d_model, seed=0)]
    return sl.sweep(lab_d, dirs, alphas=(0, 5, 100))


# -- the chapter's helpers ----------------------------------------------------------------------------------
def test_concept_texts_are_the_chapters_sentences():
    """The same sentences the chapter drew in its own cell before (one generator, topic first)."""
    from lib.models.decoder import language

    rng = np.random.default_rng(0)
    sea = [language.sentence(rng, "sea")[0] for _ in range(10)]
    other = [language.sentence(rng, t)[0] for t in ("farm", "forest", "town") for _ in range(4)]
    assert sl.concept_texts("sea", ("farm", "forest", "town")) == (sea, other)


def test_first_alpha_needs_every_direction():
    df = pd.DataFrame({"direction": ["a"] * 3 + ["b"] * 3, "alpha": [0, 5, 10] * 2,
                       "m": [0.1, 0.995, 0.999, 0.1, 0.5, 0.995]})
    assert sl.first_alpha(df, "m", 0.99) == 10.0  # a gets there at 5, b only at 10
    assert math.isnan(sl.first_alpha(df, "m", 0.999))  # b never does


def _flu(eig, act, alphas=(0, 1, 2, 5, 10, 20, 50, 100, 1000)):
    return pd.DataFrame([{"alpha": float(a), "method": m, "value": v}
                         for a, e, c in zip(alphas, eig, act) for m, v in (("eigen-edit", e), ("activation addition", c))])


def test_retention_points_read_the_curves_not_a_typed_alpha():
    # MiniLM's measured curves (chapter 5): the eigen-edit is ahead up to α = 50, both are below 0.1 from 20 on;
    # the page used to say "from α = 50 on neither keeps much" and "the eigen-edit keeps more at small α"
    eig = [1, 0.568, 0.399, 0.215, 0.130, 0.079, 0.043, 0.028, 0.012]
    act = [1, 0.187, 0.107, 0.063, 0.049, 0.042, 0.038, 0.036, 0.035]
    assert sl.retention_points(_flu(eig, act)) == {"eigen_ahead_until": 50.0, "both_lost_from": 20.0}
    assert sp.retention_finding(_flu(eig, act)) == ("the eigen-edit keeps more up to edit strength 50, and from 20 "
                                                    "on both keep less than 0.1 of them")
    # a curve that dips below the level and comes back does not count as lost there
    bumpy = [1, 0.05, 0.2, 0.09, 0.08, 0.07, 0.06, 0.05, 0.04]
    assert sl.retention_points(_flu(bumpy, act))["both_lost_from"] == 5.0
    # behind from the start, never lost
    r = sl.retention_points(_flu([1] + [0.01] * 8, [1] + [0.5] * 8))
    assert math.isnan(r["eigen_ahead_until"]) and math.isnan(r["both_lost_from"])


def test_value_at_and_its_error():
    df = pd.DataFrame({"direction": ["a", "a"], "alpha": [0.0, 5.0], "rank": [3.0, 1.0]})
    assert sl.value_at(df, "a", 5, "rank") == 1.0
    with pytest.raises(lib.InputError, match="no run of 'b'"):
        sl.value_at(df, "b", 5, "rank")


def test_ppl_text_and_target_ranks():
    row = pd.Series({"ppl": 93.6, "ppl_lo": 65.2, "ppl_hi": 139.4, "aa_ppl": 7.0, "aa_ppl_lo": 6.0, "aa_ppl_hi": 8.0})
    assert sl.ppl_text(row) == "94 (95% CI 65–139)"
    assert sl.ppl_text(row, "aa_") == "7 (95% CI 6–8)"
    z = np.array([[0.0, 2.0, 1.0], [5.0, 1.0, 1.0]])
    assert sl.target_ranks(z, 2).tolist() == [2, 2]  # ties count in the target's favour
    assert sl.target_ranks(z, 1).tolist() == [1, 2]


def test_check_edit_is_rank_one_and_restores(dec):
    u = steering.word_direction(dec, "boat")
    r = sl.check_edit(dec, u, alpha=10)
    assert r["restored"] is True and r["rank1_error"] < 1e-5
    assert r["method"] == "pinv" and 0 < r["c"] < 1  # grouped-query attention: the fallback
    assert r["alignment_after"] > 0.95 > r["alignment_before"]
    assert r["gap_after"] < r["gap_before"]
    assert r["alpha_abs"] == pytest.approx(10 * r["radius"] / abs(r["c"]))


def test_layer_and_v_controls_are_lab_runs(lab_d, dec):
    u = steering.word_direction(dec, "boat")
    ctrl = sl.layer_control([(lab_d, u)], alpha=100, layers=(2, -1))
    assert ctrl.layer.tolist() == [3, dec.n_layers]
    assert ctrl.final_real.iloc[1] == pytest.approx(lab_d.run(u, 100, text=False)["final_real"])
    v = sl.v_control([(lab_d, u)], alpha=100)
    assert v.matrix.tolist() == ["O", "V"]
    assert v.cos_y_u.iloc[0] == pytest.approx(1.0)  # the O-edit writes u itself
    assert v.cos_y_u.iloc[1] < 0.99  # grouped-query: y is only u's projection
    assert (v.final_real_lo <= v.final_real).all() and (v.final_real <= v.final_real_hi).all()
    run = lab_d.run(u, 100, text=False, matrix="V")
    assert v.final_real.iloc[1] == pytest.approx(run["final_real"])


def test_v_anatomy_and_uniform_control(lab_d, dec):
    u = steering.word_direction(dec, "boat")
    anat = sl.v_anatomy(lab_d, u, alpha=100)
    with steering.steer(dec, u, 100, matrix="V") as edit:
        pass
    assert anat["b_norm"] == pytest.approx(float(np.linalg.norm(edit.w)))
    assert anat["fit_error"] < 1e-3 and anat["kappa"] >= 1.0
    uni = sl.uniform_attention_control(lab_d, u, alpha=100)
    assert set(uni) == {"O", "V"} and all(0 <= v <= 1 for v in uni.values())


def test_sign_variant_by_hand(lab_d, dec):
    u = steering.word_direction(dec, "boat")
    got = sl.sign_variant(lab_d, u, 100)
    outs = lab_d.head_outputs(-1)
    o_bar = np.concatenate(outs).mean(0)
    w = o_bar / np.linalg.norm(o_bar)
    V = spectra.as_float64(dec.layer(-1).attention.V)
    assert got["c"] == pytest.approx(float(w @ V @ u.vector), rel=1e-9)
    assert got["sign_agreement"] == pytest.approx(float((np.concatenate(outs) @ w > 0).mean()))
    assert got["z_cos"] == pytest.approx(abs(V.T @ w @ u.vector) / np.linalg.norm(V.T @ w))
    with steering.steer(dec, u, 100, w=w):
        z = lab_d.logits(lab_d.real_states(-1))
    assert got["top1"] == float(np.mean(z.argmax(1) == u.token_id))
    assert "ppl" not in got
    with_ppl = sl.sign_variant(lab_d, u, 100, heldout=lab_d.texts[:2])
    assert with_ppl["ppl"] > 1 and with_ppl["c"] == got["c"]
    with pytest.raises(lib.InputError, match="word direction"):
        sl.sign_variant(lab_d, steering.random_direction(dec.d_model), 100)


def test_real_model_sweep_on_the_book_decoder(dec):
    """§5.8's sweep (its real checkpoints need the network; the function is the same on any LM-head model)."""
    grid = sl.real_model_sweep(dec, "boat", texts=["the dog", "a cat sees"], prompt="the dog", alphas=(0, 10))
    s = grid["summary"]
    assert s.direction.tolist() == ["word: boat"] * 2 + ["random (seed 0)"] * 2
    assert {"rank", "top1", "final_real"} <= set(s.columns)


def test_use_one_thread_sets_one_thread():
    before = torch.get_num_threads()
    try:
        parallel.use_one_thread()
        assert torch.get_num_threads() == 1
        from threadpoolctl import threadpool_info

        assert all(p["num_threads"] == 1 for p in threadpool_info())
    finally:
        parallel._THREAD_LIMITS.pop().restore_original_limits()
        torch.set_num_threads(before)


# -- tables -------------------------------------------------------------------------------------------------------
def _headers(html: str) -> list[str]:
    from bs4 import BeautifulSoup

    return [th.get_text("", strip=True).replace("\u200b", "") for th in BeautifulSoup(html, "html.parser").select("th")]


def _no_code_names(heads: list[str]) -> None:
    """As tests/pages/test_book_charts.py checks the built site: no ``word_word`` header."""
    code = [h for h in heads if re.search(r"[A-Za-z0-9]_[A-Za-z0-9]", h) and not re.search(r"[₀-₉]|\{", h)]
    assert not code, code


def test_labels_with_angle_brackets_are_escaped_on_both_axes(monkeypatch):
    """The bug of chapter 5's table: a header ``|<v₁', u>|`` was written into the HTML as it was, and the
    browser read it as a tag. Row labels (a table of quantities) and column labels are both escaped."""
    monkeypatch.setitem(sp.QUANTITIES, "c", ("|<v₁', u>| after", "{:.3f}"))
    checks = [{"model": "m <1>", "direction": "word: a", "method": "solve", "c": 0.5, "radius": 1.0,
               "alpha_abs": 2.0, "alignment_before": 0.1, "alignment_after": 0.99, "gap_before": 0.9,
               "gap_after": 0.1, "rank1_error": 1e-7, "restored": True}]
    html = sp.edit_table(checks).to_html()
    assert "<v₁" not in html and "&lt;v₁" in html and "m &lt;1&gt;" in html
    assert "|<v₁', u>| after" in _headers(html)
    table = sp.sweep_table(pd.DataFrame({"c": [0.5]}), ["c"]).to_html()
    assert "<v₁" not in table and "|<v₁', u>| after" in _headers(table)


def test_sweep_table_headers_formats_and_intervals(grid_d):
    cols = ["direction", "alpha", "c", "spectral_alignment", "sign_agreement", "final_real", "rank", "top1",
            "top1_ci", "rank_actadd", "top1_actadd"]
    sty = sp.sweep_table(grid_d["summary"], cols)
    html = sty.to_html()
    heads = _headers(html)
    assert heads == [sp.QUANTITIES[c][0] for c in cols]
    _no_code_names(heads)
    body = sty.data  # the numbers are not changed, only their display
    assert body.shape == (6, len(cols))
    assert "–" in html  # c is undefined without an edit
    assert re.search(r">\d\.\d{2}–\d\.\d{2}<", html)  # the top-1 interval, two decimals like the rate


def test_quantity_tables_have_readable_row_labels(lab_d, dec):
    u = steering.word_direction(dec, "boat")
    checks = [sl.check_edit(dec, u, alpha=10)]
    html = sp.edit_table(checks).to_html()
    _no_code_names(_headers(html))
    assert "yes" in html and "e-0" in html  # restored; the rank-1 error in scientific notation
    v = sl.v_control([(lab_d, u)], alpha=100)
    vt = sp.v_control_table(v).to_html()
    heads = _headers(vt)
    _no_code_names(heads)
    assert "O-edit" in heads and "V-edit" in heads and sp.QUANTITIES["final_real_ci"][0] in heads
    lt = sp.layer_table(sl.layer_control([(lab_d, u)], alpha=100)).to_html()
    _no_code_names(_headers(lt))


def test_continuations_and_tradeoff_tables(grid_d, lab_d, dec):
    html = sp.continuations_table(grid_d["text"], "word: boat").to_html()
    assert _headers(html) == ["edit strength α|c|/|λ₁|", "greedy continuation"]
    assert html.count("the sailor watches") == 3
    u = steering.word_direction(dec, "boat")
    trade = sl.tradeoff(lab_d, u, lab_d.texts[:2], alphas=(0, 10), strengths=[1.0, 5.0])
    tt = sp.tradeoff_table(trade).to_html()
    _no_code_names(_headers(tt))
    assert "activation addition" in tt and "eigen-edit" in tt


# -- figures ------------------------------------------------------------------------------------------------------
def _compiled_legends(chart) -> list[str]:
    """The domains of the ordinal (legend) scales of ``chart``, compiled by Vega-Lite as the browser does."""
    import vl_convert as vlc

    vega = vlc.vegalite_to_vega(chart.to_dict())
    return [str(x) for n in _nodes(vega) if n.get("type") == "ordinal" and isinstance(n.get("domain"), list)
            and "name" in n for x in n["domain"]]


def _texts(spec) -> list[str]:
    """Every title, text, subtitle and description of a spec."""
    keys = ("title", "text", "subtitle", "description")
    return [t for n in _nodes(spec) for k in keys for t in ([n[k]] if isinstance(n.get(k), str) else
                                                           n[k] if isinstance(n.get(k), list) else [])
            if isinstance(t, str)]


def _check_style(chart) -> dict:
    spec = chart.to_dict()
    assert len(spec.get("description", "").split()) >= 8, spec.get("description")
    tex = [t for t in _texts(spec) if re.search(r"\\[a-zA-Z]+|[\^_]\{", t)]
    assert not tex, tex
    return spec


def _colour_scales(spec) -> list[dict]:
    return [n["color"]["scale"] for n in _nodes(spec) if isinstance(n.get("color"), dict)
            and isinstance(n["color"].get("scale"), dict) and "domain" in n["color"]["scale"]]


def test_alpha_chart_has_the_baseline_with_a_legend_entry(grid_d, dec):
    chart = sp.alpha_chart(grid_d["summary"], model=dec)
    spec = _check_style(chart)
    assert sp.BASELINE_LABEL in _compiled_legends(chart)
    for scale in _colour_scales(spec):
        assert dict(zip(scale["domain"], scale["range"])) == {k: sp.SERIES_COLORS[k] for k in scale["domain"]}
    baseline = spectra.baseline_alignment(dec.d_model)
    assert any(d.get("y", {}).get("datum") == pytest.approx(baseline) for d in _nodes(spec))


def test_static_lab_panels_name_the_baseline_and_keep_their_sliders(grid_d, dec):
    chart = sp.static_lab(grid_d, model=dec, alphas=(0, 5, 100))
    spec = _check_style(chart)
    legends = _compiled_legends(chart)
    assert sp.BASELINE_LABEL in legends and sp.REAL in legends and sp.ACTADD in legends
    params = {p["name"]: p for n in _nodes(spec) for p in n.get("params", []) if isinstance(p, dict) and "name" in p}
    assert params["ai"]["bind"]["max"] == 2 and params["dir"]["bind"]["options"] == ["word: boat", "random (seed 0)"]
    filters = [t["filter"] for n in _nodes(spec) for t in n.get("transform", []) if "filter" in t]
    assert "datum.ai == ai && datum.direction == dir" in filters
    for scale in _colour_scales(spec):
        assert scale["range"][scale["domain"].index(sp.BASELINE_LABEL)] == sp.SERIES_COLORS[sp.BASELINE_LABEL]


def test_the_other_figures_carry_the_style(grid_d, lab_d, dec):
    u = steering.word_direction(dec, "boat")
    _check_style(sp.target_chart(grid_d["summary"], model=dec.label))
    v = sl.v_control([(lab_d, u)], alpha=100)
    spec = _check_style(sp.v_control_chart(v))
    assert {"O-edit", "V-edit"} <= set(_compiled_legends(sp.v_control_chart(v)))
    trade = sl.tradeoff(lab_d, u, lab_d.texts[:2], alphas=(0, 10), strengths=[1.0, 5.0])
    chart = sp.tradeoff_chart(trade, model=dec.label, title="t", description="A finding about the trade-off "
                              "of the two methods here.")
    spec = _check_style(chart)
    for scale in _colour_scales(spec):
        assert scale["range"] == [sp.SERIES_COLORS[k] for k in scale["domain"]]
    flu = pd.DataFrame({"alpha": [0.0, 10.0] * 2, "method": ["eigen-edit"] * 2 + ["activation addition"] * 2,
                        "value": [1.0, 0.5, 1.0, 0.6]})
    _check_style(sp.fluency_chart(flu, model=dec.label, title="t", y_title="y",
                                  description="Retention falls with α for both of the methods."))
