"""Claim TV2 by layer (lib.chapters.two_views_angles) and its statistic, the joint min-p (lib.stats.min_p_joint).

Known answers: k copies of one test cost nothing, k independent tests pay Šidák's price, the combined test
has its size under the null, and four identical subspaces make one test of a layer, not four.
"""

from __future__ import annotations

import numpy as np
import pytest

from lib.chapters import two_views_angles as bva
from lib.methods import bridge as br
from lib.stats import min_p_joint


def test_copies_of_one_test_are_one_test():
    rng = np.random.default_rng(0)
    null = rng.random(999)
    for obs in (0.004, 0.03, 0.5):
        p_one = (1 + (null <= obs).sum()) / 1000
        joint = min_p_joint(np.full(4, obs), np.repeat(null[:, None], 4, axis=1))
        assert joint == pytest.approx(p_one)


def test_independent_tests_pay_sidaks_price():
    rng = np.random.default_rng(1)
    k, m = 4, 20000
    null = rng.random((m, k))
    obs = np.array([0.01, 0.5, 0.7, 0.9])
    assert min_p_joint(obs, null) == pytest.approx(1 - (1 - 0.01) ** k, abs=0.005)
    assert min_p_joint(-obs, -null, smaller=False) == pytest.approx(min_p_joint(obs, null))


def test_joint_min_p_has_its_size_under_the_null():
    rng = np.random.default_rng(2)
    z = rng.standard_normal((400, 1001, 3))
    z[..., 1] = 0.7 * z[..., 0] + 0.3 * z[..., 1]  # dependent tests
    p = np.array([min_p_joint(zi[0], zi[1:]) for zi in z])
    assert abs((p <= 0.05).mean() - 0.05) < 0.03
    assert abs((p <= 0.5).mean() - 0.5) < 0.08


def test_min_p_joint_checks_shapes():
    with pytest.raises(ValueError, match=r"\(k,\) and null \(m, k\)"):
        min_p_joint(np.zeros(3), np.zeros((10, 4)))


def test_a_layer_with_four_identical_subspaces_is_one_test():
    """The old count gave a layer whose four Jacobian subspaces coincide four (layer, subspace) pairs; by
    layer it is one test whose p equals that of one subspace."""
    d, q = 64, 4
    rng = np.random.default_rng(3)
    B = np.linalg.qr(rng.standard_normal((d, q)))[0]
    v1 = B[:, :1] + 0.3 * np.linalg.qr(rng.standard_normal((d, 1)))[0]  # close to B
    same = bva.layer_angle_test(v1, {name: B for name in "abcd"}, m=999)
    alone = bva.layer_angle_test(v1, {"a": B}, m=999)
    assert same["p_joint"] == pytest.approx(alone["p_joint"]) == pytest.approx(alone["p_min"])
    assert same["theta_best"] == pytest.approx(np.degrees(br.principal_angles(v1, B)[0]))
    far = bva.layer_angle_test(np.linalg.qr(rng.standard_normal((d, 1)))[0], {"a": B, "b": B}, m=999)
    assert far["p_joint"] > 0.05


def test_the_joint_null_penalises_independent_subspaces():
    """Four unrelated subspaces give four chances: the layer's p is larger than its smallest marginal p."""
    d, q = 64, 4
    rng = np.random.default_rng(4)
    bases = {n: np.linalg.qr(rng.standard_normal((d, q)))[0] for n in "abcd"}
    v1 = bases["a"][:, :1] + 0.9 * np.linalg.qr(rng.standard_normal((d, 1)))[0]
    r = bva.layer_angle_test(v1, bases, m=1999)
    assert r["best"] == "a" and r["p_min"] < r["p_joint"] <= min(1.0, 4 * r["p_min"] + 0.01)
