"""The power method and its convergence measurements (check C3 of power-method §8)."""

from __future__ import annotations

import numpy as np
import pytest

from lib import power, spectra, toys


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
