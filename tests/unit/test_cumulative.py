"""lib.linalg.cumulative: the fast cumulative-product erank equals the dense float64 reference.

The reference is :func:`lib.linalg.nonnormal.cumulative_product` (full SVD and truncation at every step,
residual-jacobian §4.4).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lib.linalg import nonnormal
from lib.linalg.cumulative import cumulative_effective_rank, erank_from_singular_values


def _jacobian_like(L, d, seed, scale=0.6):
    """Residual-style blocks ``I + A_l`` with non-normal, rank-graded updates."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(L):
        G = rng.standard_normal((d, d)) / np.sqrt(d)
        decay = np.diag(np.exp(-np.arange(d) / (d / 6)))
        out.append(np.eye(d) + scale * G @ decay @ rng.standard_normal((d, d)) / np.sqrt(d) * 2)
    return np.stack(out)


def _funnel(L, d, seed):
    """Contracting blocks: the product's erank falls quickly (the funnel)."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.standard_normal((d, d)) / np.sqrt(d) @ np.diag(np.linspace(1, 0.05, d)) for _ in range(L)])


@pytest.mark.parametrize("maker", [_jacobian_like, _funnel])
def test_untruncated_equals_reference(maker):
    J = maker(7, 60, seed=1)
    ref = nonnormal.cumulative_product(J)
    got = cumulative_effective_rank(J)
    assert got.k == 60 and got.erank.shape == (8,) and got.log_scale.shape == (7,)
    np.testing.assert_allclose(got.erank.numpy(), ref.erank, rtol=1e-10)
    np.testing.assert_allclose(got.log_scale.numpy(), ref.log_scale, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.factor[0].numpy(), ref.P, atol=1e-12)


@pytest.mark.parametrize("maker", [_jacobian_like, _funnel])
def test_truncated_exact_equals_reference(maker):
    J = maker(6, 64, seed=2)
    for k in (1, 5, 16, 40):
        ref = nonnormal.cumulative_product(J, k=k)
        got = cumulative_effective_rank(J, k=k, randomized=False)
        np.testing.assert_allclose(got.erank.numpy(), ref.erank, rtol=1e-9)
        np.testing.assert_allclose(got.log_scale.numpy(), ref.log_scale, rtol=1e-9, atol=1e-12)
        B, Vh = got.factor
        np.testing.assert_allclose((B @ Vh).numpy(), ref.P, atol=1e-9)


def test_randomized_first_truncation():
    d, k = 96, 8
    J = _funnel(5, d, seed=3)
    # Exact when J_0 has rank <= k + oversampling.
    rng = np.random.default_rng(3)
    J_low = J.copy()
    J_low[0] = rng.standard_normal((d, 12)) @ rng.standard_normal((12, d)) / d
    ref = nonnormal.cumulative_product(J_low, k=k)
    got = cumulative_effective_rank(J_low, k=k, randomized=True, seed=0)
    assert got.first_truncation == "randomized"
    np.testing.assert_allclose(got.erank.numpy(), ref.erank, rtol=1e-9)
    again = cumulative_effective_rank(J_low, k=k, randomized=True, seed=0)
    assert torch.equal(got.erank, again.erank)  # the seed fixes the result
    # A flat spectrum (here, and for residual Jacobians I + A) fails the probe: exact path.
    for JJ in (J, _jacobian_like(3, d, seed=3)):
        ref = nonnormal.cumulative_product(JJ, k=k)
        got = cumulative_effective_rank(JJ, k=k, randomized=True, seed=0)
        assert got.first_truncation == "exact (randomized check failed)"
        np.testing.assert_allclose(got.erank.numpy(), ref.erank, rtol=1e-9)
    # k > d/4: always exact.
    assert cumulative_effective_rank(J, k=40).first_truncation == "exact"
    assert cumulative_effective_rank(J).first_truncation == "none"


def test_rescale_off_same_erank_and_dtypes_devices():
    J = _jacobian_like(5, 40, seed=4)
    a = cumulative_effective_rank(torch.from_numpy(J), k=10, randomized=False)
    b = cumulative_effective_rank(torch.from_numpy(J), k=10, randomized=False, rescale=False)
    np.testing.assert_allclose(a.erank.numpy(), b.erank.numpy(), rtol=1e-12)
    np.testing.assert_allclose(np.cumsum(a.log_scale.numpy()), b.log_scale.numpy(), rtol=1e-10)
    J32 = torch.from_numpy(J).float()
    c = cumulative_effective_rank(J32)
    assert c.erank.dtype == torch.float64 and c.erank.device == J32.device
    np.testing.assert_allclose(c.erank.numpy(), nonnormal.cumulative_product(J32.double().numpy()).erank, rtol=1e-10)
    if torch.cuda.is_available():
        g = cumulative_effective_rank(J32.cuda(), k=10, randomized=False)
        assert g.erank.device.type == "cuda" and g.factor[0].device.type == "cuda"
        np.testing.assert_allclose(g.erank.cpu().numpy(), a.erank.numpy(), rtol=1e-6)


def test_edge_cases():
    # d = 1: erank is 1 at every step.
    got = cumulative_effective_rank(np.array([[[2.0]], [[-0.5]]]))
    np.testing.assert_allclose(got.erank.numpy(), [1.0, 1.0, 1.0])
    # Identity blocks keep erank = d (untruncated) or k (truncated).
    eye = np.stack([np.eye(10)] * 3)
    np.testing.assert_allclose(cumulative_effective_rank(eye).erank.numpy(), 10.0)
    np.testing.assert_allclose(cumulative_effective_rank(eye, k=4, randomized=False).erank.numpy(), 4.0)
    # A zero block annihilates the product: reported, as in the reference.
    with pytest.raises(FloatingPointError):
        cumulative_effective_rank(np.stack([np.eye(5), np.zeros((5, 5))]))
    with pytest.raises(ValueError):
        cumulative_effective_rank(eye, k=11)
    with pytest.raises(ValueError):
        cumulative_effective_rank(np.eye(3))


def test_erank_from_singular_values_matches_nonnormal():
    rng = np.random.default_rng(5)
    for M in (rng.standard_normal((30, 30)), np.diag([3.0, 1.0, 0.0, 0.0]), np.ones((6, 6))):
        s = torch.linalg.svdvals(torch.from_numpy(M))
        assert abs(float(erank_from_singular_values(s)) - nonnormal.effective_rank(M)) < 1e-12
    assert float(erank_from_singular_values(torch.zeros(4))) == 0.0


def test_truncation_can_raise_the_final_erank():
    """Chapter 4, exercise 4: σ = (1, 1, 0.01) then diag(1, 1, 1000); truncating to k = 2 gives erank 2, the
    untruncated product about 1.2 (the fast kernel agrees with the reference on it)."""
    Js = np.stack([np.diag([1.0, 1.0, 0.01]), np.diag([1.0, 1.0, 1000.0])])
    full = cumulative_effective_rank(Js).erank.numpy()[-1]
    trunc = cumulative_effective_rank(Js, k=2, randomized=False).erank.numpy()[-1]
    assert trunc == pytest.approx(2.0) and full < 1.3 and trunc > full
    assert trunc == pytest.approx(nonnormal.cumulative_product(Js, k=2).erank[-1])
