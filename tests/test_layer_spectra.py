"""The eigenvalue-density facts chapter 0 states about random layer matrices."""

from __future__ import annotations

import numpy as np
import pytest

from lib.errors import InputError
from lib.layer_spectra import ginibre_product_inner_fraction, inner_fraction


def _eigvals(m: int, d: int = 400, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    M = np.eye(d)
    for _ in range(m):
        M = M @ rng.standard_normal((d, d)) / np.sqrt(d)
    return np.linalg.eigvals(M)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_inner_fraction_matches_the_product_law(m):
    """Half the radius holds r^(2/m) of the eigenvalues: 1/4 for one Gaussian matrix (a uniform disc),
    1/2 for a product of two (chapter 0 once said such a product 'fills a disc almost uniformly')."""
    got = inner_fraction(np.stack([_eigvals(m, seed=s) for s in range(3)]), 0.5)
    assert got == pytest.approx(ginibre_product_inner_fraction(m, 0.5), abs=0.04)


def test_a_product_of_two_is_not_a_uniform_disc():
    got = inner_fraction(_eigvals(2), 0.5)
    assert abs(got - ginibre_product_inner_fraction(1, 0.5)) > 0.15


def test_inner_fraction_per_row_radius_and_bad_input():
    lams = np.array([[1.0, 0.5, 0.2, 0.9], [10.0, 6.0, 4.0, 1.0]])
    assert inner_fraction(lams, 0.5) == pytest.approx(4 / 8)  # 0.5, 0.2 | 4.0, 1.0
    with pytest.raises(InputError):
        inner_fraction(lams, 0.0)
    with pytest.raises(InputError):
        ginibre_product_inner_fraction(0)
