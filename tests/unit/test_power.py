"""The power method and its convergence measurements (check C3 of power-method §8)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lib.linalg import power, spectra
from lib.theory import toys


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("gap", [0.3, 0.7, 0.9])
def test_converges_within_predicted_steps(seed, gap):
    """C3: alignment with v_1 > 1 − 1e-6 after about log(1e-6)/log(ratio) steps."""
    F = toys.toy_matrix("real", 32, gap=gap, seed=seed, cond=2.0)
    x0 = np.random.default_rng(seed).standard_normal(32)
    T = power.steps_needed(gap, 1e-6)
    # the constant in e_t ≈ C g^t is the start's off-v1 content in the eigenbasis; allow 10 steps of slack
    slack = int(np.ceil(np.log(1e-3) / np.log(gap)))
    X = power.power_method(F, x0, T + slack)
    v1 = spectra.principal(F).vector
    assert spectra.alignment(X[-1], v1) > 1 - 1e-6
    assert np.allclose(np.linalg.norm(X, axis=-1), 1.0)


def reference_power(F, x, steps):
    out = [x / np.linalg.norm(x)]
    for _ in range(steps):
        y = F @ out[-1]
        out.append(y / np.linalg.norm(y))
    return np.array(out)


def test_matches_reference_and_batches():
    F = toys.toy_matrix("complex", 12, seed=1)
    X0 = np.random.default_rng(0).standard_normal((3, 12))
    got = power.power_method(F, X0, 15, radius=2.0)
    for m in range(3):
        np.testing.assert_allclose(got[:, m], 2.0 * reference_power(F, X0[m], 15), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("gap", [0.5, 0.8])
def test_fitted_rate_is_gap_ratio(gap):
    F = toys.toy_matrix("real", 24, gap=gap, seed=3, cond=2.0)
    X = power.power_method(F, np.ones(24), 80)
    df = power.convergence_table(F, X)
    assert power.fitted_ratio(df.measured, start=20) == pytest.approx(gap, rel=0.03)


def test_negative_eigenvalue_flips_sign():
    F = toys.toy_matrix("negative", 16, gap=0.3, seed=0)
    v1 = spectra.principal(F).vector
    s = power.signed_alignment(power.power_method(F, np.ones(16), 60), v1)
    assert np.all(np.abs(s[-10:]) > 1 - 1e-9)
    assert np.all(s[-10:][1:] * s[-10:][:-1] < 0)  # alternates every step


def test_complex_pair_rotates_in_plane():
    theta = 0.9
    F = toys.toy_matrix("complex", 16, gap=0.3, theta=theta, seed=0)
    P = spectra.principal(F)
    X = power.power_method(F, np.ones(16), 80)
    assert spectra.subspace_alignment(X[-1], P.basis) > 1 - 1e-9
    a = spectra.alignment(X[-20:], P.basis[:, 0])
    assert a.max() - a.min() > 0.1  # the 1-D alignment never settles
    dist = power.distance_to_subspace(X, P.basis)
    assert dist[-1] < 1e-10


def test_steps_needed():
    assert power.steps_needed(0.5, 1e-3) == 10
    # tol an exact power of the ratio: reaching it counts (floating-point log would round 10 up to 11)
    assert power.steps_needed(0.1, 1e-10) == 10
    assert power.steps_needed(0.5, 0.5**10) == 10
    assert power.steps_needed(0.0) == 0
    with pytest.raises(ValueError):
        power.steps_needed(1.0)


# -- the measurements behind chapter 1's figures ------------------------------------------------------------------
def test_convergence_runs_and_fitted_ratios():
    x0 = np.random.default_rng(0).standard_normal(24)
    Fs = [toys.toy_matrix("real", 24, gap=g, seed=3, cond=2.0) for g in (0.5, 0.8)]
    runs = power.convergence_runs(Fs, x0, 60)
    assert len(runs) == 2 * 61 and list(runs.columns) == ["t", "measured", "predicted", "gap_ratio"]
    first = power.convergence_table(Fs[0], power.power_method(Fs[0], x0, 60))
    pd.testing.assert_frame_equal(runs.iloc[:61], first)
    fits = power.fitted_ratios(runs, start=10)
    assert fits.name == "fitted ratio" and len(fits) == 2
    np.testing.assert_allclose(fits.to_numpy(), fits.index.to_numpy(), rtol=0.03)


@pytest.mark.parametrize(("kind", "k"), [("real", 1), ("negative", 1), ("complex", 2), ("opposite", 2), ("tie", 2)])
def test_dominant_basis(kind, k):
    """Orthonormal, of the dimension of the tied top eigenvalues, and invariant: F maps its span into itself."""
    F = toys.toy_matrix(kind, 16, gap=0.5, seed=2)
    B = power.dominant_basis(F)
    assert B.shape == (16, k)
    np.testing.assert_allclose(B.T @ B, np.eye(k), atol=1e-10)
    FB = F @ B
    np.testing.assert_allclose(FB - B @ (B.T @ FB), 0, atol=1e-9)
    if kind in ("real", "negative", "complex"):
        np.testing.assert_array_equal(B, spectra.principal(F).basis)


def test_mode_curves_show_each_failure_mode():
    x0 = np.random.default_rng(1).standard_normal(16)
    for kind in ("real", "negative", "complex", "opposite"):
        m = power.mode_curves(toys.toy_matrix(kind, 16, gap=0.3, theta=np.pi / 5, seed=0), x0, 60)
        assert list(m.columns) == ["t", "signed cos with b₁", "alignment with dominant subspace"]
        assert m["alignment with dominant subspace"].iloc[-1] > 1 - 1e-9  # the subspace always wins
        s = m["signed cos with b₁"].to_numpy()[-4:]
        if kind == "real":
            assert np.all(np.abs(s - s[0]) < 1e-9)
        elif kind == "negative":
            assert np.all(s[1:] * s[:-1] < 0)


def test_alignment_and_distance_frames():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5, 3, 8))
    e = np.eye(8)
    al = power.alignment_frame(X, {"e1": e[0], "e2": e[1]})
    assert list(al.columns) == ["t", "direction", "mean alignment"] and len(al) == 10
    np.testing.assert_allclose(al["mean alignment"].iloc[:5], spectra.alignment(X, e[0]).mean(1))
    one = power.alignment_frame(X[:, 0], {"e1": e[0]}, value="a")  # one vector per step
    np.testing.assert_allclose(one["a"], spectra.alignment(X[:, 0], e[0]))
    dist = power.distance_frame(X, {"plane": e[:, :2], "line": e[:, :1]})
    assert list(dist.columns) == ["t", "measure", "mean sin∠"]
    np.testing.assert_allclose(dist["mean sin∠"].iloc[5:], power.distance_to_subspace(X, e[:, :1]).mean(1))
    pm = power.plane_measures(X, e[:, :2])
    assert set(pm.measure) == {"planar alignment a₂", "alignment with b₁"}
    assert (pm["mean over tokens"] <= 1 + 1e-12).all()


def test_first_below_and_window_ratio():
    e = 0.5 ** np.arange(60.0)
    e[:3] = 1.0  # a transient
    assert power.first_below(e, 1e-2) == 7 and power.first_below(e, 1e-30) is None
    assert power.first_below(e, 2.0) == 0  # below the level from the start
    assert power.window_ratio(e) == pytest.approx(0.5, rel=1e-9)
    e[45:] = 1e-13 * np.random.default_rng(0).uniform(1, 2, 15)  # a rounding floor: left out of the fit
    assert power.window_ratio(e) == pytest.approx(0.5, rel=1e-9)
