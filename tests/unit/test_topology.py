"""Community pipeline of lib.methods.topology on planted structure (check J9) and against references."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from lib import stats
from lib.methods import topology as tp
from lib.page import jacobian_funnel as fp


@pytest.fixture(scope="module")
def planted():
    """4 planted communities of 30 coordinates; 10 bridge coordinates load on two factors."""
    rng = np.random.default_rng(0)
    d, C = 120, 4
    memb = np.repeat(np.arange(C), d // C)
    F = rng.standard_normal((3000, C))
    X = F[:, memb] + 0.8 * rng.standard_normal((3000, d))
    bridges = np.arange(0, d, 12)[:10]
    for b in bridges:
        X[:, b] = 0.7 * F[:, memb[b]] + 0.7 * F[:, (memb[b] + 1) % C] + 0.8 * rng.standard_normal(3000)
    W, _ = tp.correlation_graph(X, k=20)
    part = tp.signed_leiden(W, seeds=range(5))
    return dict(W=W, memb=memb, bridges=bridges, part=part, d=d, rng=rng)


def test_graph_is_symmetric_topk(planted):
    W = planted["W"]
    assert np.allclose(W, W.T) and np.all(np.diag(W) == 0)
    assert ((W != 0).sum(1) >= 20).all()


def test_leiden_recovers_planted_partition(planted):
    part = planted["part"]
    assert tp.nmi(part.membership, planted["memb"]) > 0.9
    assert part.nmi_mean > 0.9
    assert part.sizes.sum() == planted["d"]


def test_bridges_have_top_participation(planted):
    P = tp.participation(planted["W"], planted["part"].membership)
    top = set(np.argsort(-P)[: len(planted["bridges"])])
    assert len(top & set(planted["bridges"])) >= 8


def test_participation_reference():
    W = np.array([[0, 1, -2, 0], [1, 0, 0, 3], [-2, 0, 0, 1], [0, 3, 1, 0]], dtype=float)
    memb = np.array([0, 0, 1, 1])
    # node 0: strengths 1 (own) and 2 (other) -> 1 - (1/3)^2 - (2/3)^2
    np.testing.assert_allclose(tp.participation(W, memb)[0], 1 - 1 / 9 - 4 / 9)
    np.testing.assert_allclose(tp.participation(W, memb, positive_only=True)[0], 0.0)


def test_coupling_planted_gain_significant(planted):
    P = tp.participation(planted["W"], planted["part"].membership)
    rng = np.random.default_rng(1)
    J = np.eye(planted["d"])
    J[:, planted["bridges"]] *= 2.0  # the planted bridges are amplified, every other unit passes unchanged
    res = tp.coupling(P, tp.unit_gain(J), W=planted["W"], membership=planted["part"].membership, n_perm=500)
    assert res.r_s == pytest.approx(spearmanr(P, tp.unit_gain(J)).statistic, abs=1e-12)
    assert res.r_s > 0 and res.p_gain < 0.01
    Jr = rng.standard_normal((planted["d"],) * 2)
    null = tp.coupling(P, tp.unit_gain(Jr), n_perm=500, seed=2)
    assert null.p_gain > 0.05


def test_community_gain_and_bh():
    J = np.diag(np.r_[np.full(5, 2.0), np.ones(5)])
    tab = tp.community_gain(J, np.r_[np.zeros(5, int), np.ones(5, int)])
    np.testing.assert_allclose(tab.log_gain, [np.log(4 / 2.5), np.log(1 / 2.5)])
    np.testing.assert_allclose(tab.self_gain, [1.0, 0.0])
    p = [0.01, 0.04, 0.03, np.nan]
    np.testing.assert_allclose(stats.benjamini_hochberg(p)[:3], [0.03, 0.04, 0.04])


def test_unit_gain_uses_columns():
    """g(i) = ‖J e_i‖²: the i-th *column* (where a perturbation of unit i goes), not the i-th row."""
    J = np.array([[1.0, 2.0], [0.0, 1.0]])
    np.testing.assert_allclose(tp.unit_gain(J, log_ratio=False), [1.0, 5.0])
    np.testing.assert_allclose(tp.unit_gain(J), np.log(np.array([1.0, 5.0]) / 3.0))


def test_coupling_p_values_are_two_sided(planted):
    """A planted *negative* coupling is as significant as a positive one: p(−g) = p(g) exactly, and small.

    A one-sided p-value (r_null ≥ r) would put the suppressed bridges at p ≈ 1.
    """
    P = tp.participation(planted["W"], planted["part"].membership)
    J = np.eye(planted["d"])
    J[:, planted["bridges"]] *= 0.5  # the planted bridges are suppressed
    g = tp.unit_gain(J)
    kw = dict(W=planted["W"], membership=planted["part"].membership, n_perm=300, seed=5)
    neg, pos = tp.coupling(P, g, **kw), tp.coupling(P, -g, **kw)
    assert neg.r_s < 0 and neg.r_s == pytest.approx(-pos.r_s, abs=1e-12)
    assert neg.p_gain < 0.01 and neg.p_relabel < 0.01
    assert neg.p_gain == pos.p_gain and neg.p_relabel == pos.p_relabel


def test_planted_power_detects_strong_and_not_null_couplings():
    """The power analysis of section 4.7: a strong planted coupling is found, none is found at chance level."""
    pw = tp.planted_power(60, 600, effects=(0.0, 0.8), reps=6, n_perm=200, seed=1).set_index("effect")
    assert pw.loc[0.8, "power"] >= 5 / 6 and pw.loc[0.8, "r_s_mean"] > 0.4
    assert pw.loc[0.0, "power"] <= 2 / 6 and abs(pw.loc[0.0, "r_s_mean"]) < 0.2
    assert (pw.power_bh <= pw.power).all()
    assert pw.nmi_mean.iloc[0] > 0.6  # the pipeline recovers the planted partition


# -- section 4.7 over a model and its twins (moved out of the page) ----------------------------------------------
@pytest.fixture(scope="module")
def decoder_sweep():
    """Section 4.7 on the book decoder and one twin, small: 6 texts, 2 Leiden seeds, 20 permutations."""
    import lib
    from lib.jacobians import sweep as jac
    from lib.models.decoder.language import prompts

    pair = lib.load_twins("book-decoder", seeds=(0,))
    sets = jac.sweep_twins(pair, prompts(4), parts=True, keep_per_prompt=False, progress=False)
    texts = prompts(6, seed=7)
    return pair, sets, texts, tp.topology_sweep(pair, sets.jacobians, texts, k=10, seeds=range(2), n_perm=20)


def test_topology_sweep_is_layer_topology_at_every_layer(decoder_sweep):
    pair, sets, texts, sweep = decoder_sweep
    assert sweep.series == ["trained", "random init, seed 0"] and len(sweep.layers) == 2 * pair.trained.n_layers
    m = pair.twins[0]
    X = tp.token_matrix(m.hidden_states(texts), 3, [m.encode(s)["special"] for s in texts])
    ref = tp.layer_topology(X, sets["random init, seed 0"].mean[3], k=10, seeds=range(2), n_perm=20, seed=3)
    got = sweep.layers["random init, seed 0", 3]
    np.testing.assert_array_equal(got.partition.membership, ref.partition.membership)
    assert got.coupling == ref.coupling
    c = sweep.coupling
    assert list(c.columns[:3]) == ["model", "weights", "layer"] and set(c.model) == {"book-decoder"}
    for _, g in c.groupby("weights"):
        np.testing.assert_allclose(g.q, stats.benjamini_hochberg(g.p_gain.to_numpy()))
    s = sweep.sub_blocks
    assert set(s.sub_block) == {"attention", "MLP"} and len(s) == 2 * 2 * pair.trained.n_layers
    row = s[(s.weights == "trained") & (s.sub_block == "MLP") & (s.layer == 2)].iloc[0]
    res = sweep.layers["trained", 1]
    ref_c = tp.coupling(res.participation, tp.unit_gain(sets["trained"].parts["mlp"][1]), n_perm=20, seed=1)
    assert row.r_s == pytest.approx(ref_c.r_s) and row.p_gain == pytest.approx(ref_c.p_gain)
    for _, g in s.groupby(["weights", "sub_block"]):
        np.testing.assert_allclose(g.q, stats.benjamini_hochberg(g.p_gain.to_numpy()))


def test_topology_tables_have_readable_headers(decoder_sweep):
    import re

    *_, sweep = decoder_sweep
    comm, corr = tp.pooled_community_coupling(sweep)
    assert set(corr) == set(sweep.series) and (comm["size"] >= 5).all()
    trained = comm[comm.weights == "trained"]
    assert corr["trained"].statistic == pytest.approx(spearmanr(trained.boundary, trained.log_gain).statistic)
    op = fp.operator_table(sweep.sub_blocks)
    assert list(op.columns) == ["layer", "trained, attention", "trained, MLP", "random init, seed 0, attention",
                                "random init, seed 0, MLP"]
    power = pd.DataFrame({"effect": [0.1], "r_s_mean": [0.08], "nmi_mean": [0.9], "power": [0.25], "power_bh": [0.1]})
    for tab in (fp.coupling_table(sweep.coupling), op, fp.community_table(comm), fp.power_table(power)):
        assert not [c for c in tab.columns if re.search(r"[A-Za-z0-9]_[A-Za-z0-9]", str(c))], tab.columns
    assert fp.power_table(power).iloc[0].tolist() == ["0.1", "+0.08", "0.90", "25%", "10%"]


def test_operator_table_stars_significant_couplings():
    sub = pd.DataFrame({"weights": ["trained"] * 2, "sub_block": ["attention", "MLP"], "layer": [1, 1],
                        "r_s": [0.25, -0.1], "q": [0.01, 0.5]})
    assert fp.operator_table(sub).iloc[0].tolist() == [1, "+0.25 *", "-0.10"]
