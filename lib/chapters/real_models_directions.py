"""Is it the layer's *own* direction? Chapter 3's tests of LA7 and LA8 (section 3.3) [ours].

γ_t and ρ_t beating a random-subspace null (:func:`lib.chapters.real_models.layer_varying`) do not say that the
tokens tilt toward *their layer's* ``v_{1,t}``: anisotropic states score high against any trained direction. Two
more nulls ask that, per statistic (:data:`DIRECTION_STATISTICS`: γ_t / chance, Δγ_t / chance, ρ_t):

* the other layers' directions: :func:`cross_layer_maps` (or :func:`cross_layer`) puts the tokens crossing layer
  ``t`` against the basis of every layer ``s``, a ``(T, S)`` map whose diagonal is the layer's own statistic;
  :func:`own_direction_test` is a permutation test of the diagonal's sum (row and column effects cancel) and
  :func:`diagonal_wins` counts the rows the diagonal wins;
* the random-init twins' directions: :func:`foreign_direction_test` puts each layer's own statistic against the
  same tokens on every layer's ``v₁`` of every twin, layer by layer and pooled over layers.

:func:`direction_tests` runs the three tests on a trained model and its twins (:class:`DirectionTests`), and
:func:`direction_verdict` turns them into a claim's verdict. Token states are :class:`lib.methods.alignment.TokenStates`
``(T+1, N, d)`` and bases :class:`lib.methods.alignment.EigenBases` or ``(S, d, k)`` zero-padded arrays. The page's
table and prose of these tests are :func:`lib.page.real_models.direction_table` and
:func:`lib.page.real_models.direction_glue`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import NamedTuple

import numpy as np

from lib.chapters.real_models import ALPHA, FDR, Analysis, layers_where, select_source
from lib.linalg import spectra
from lib.methods.alignment import EigenBases, TokenStates, basis_dims, chance_levels
from lib.stats import empirical_p

__all__ = [
    "DIRECTION_STATISTICS",
    "CrossLayerMaps",
    "DirectionTests",
    "ForeignDirectionTest",
    "OwnDirectionTest",
    "cross_layer",
    "cross_layer_maps",
    "diagonal_wins",
    "direction_tests",
    "direction_verdict",
    "foreign_direction_test",
    "own_direction_test",
]

# -- cross-layer maps: every layer's tokens against every layer's direction ---------------------------------------
def cross_layer(
    ts: TokenStates, bases: np.ndarray | EigenBases, *, relative_to_chance: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """γ and ρ of layer ``t``'s input/output against the direction of *every* layer ``s``.

    Args:
        ts: token states ``(T+1, N, d)``.
        bases: :class:`EigenBases` (its ``v1``) or ``(S, d, k)`` zero-padded bases.
        relative_to_chance: divide column ``s`` of γ by the chance level ``c_{d, k_s}`` of the basis it
            uses (a plane catches more than a line, so raw entries of different ``k_s`` do not compare).

    Returns:
        ``(gamma, rho)``, each ``(T, S)``: entry ``[t, s]`` uses ``B_s``. The diagonal is ``(γ_t, ρ_t)``
        (or ``γ_t / c_{d,k_t}``); the off-diagonal entries are the "``v_1`` of another layer" null.
    """
    g_out, _, rho = _cross_means(ts, bases)
    if relative_to_chance:
        g_out = g_out / chance_levels(ts.d, basis_dims(bases))[None, :]
    return g_out, rho


def _cross_means(ts: TokenStates, bases: np.ndarray | EigenBases) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean output and input alignment and ρ of every layer ``t``'s tokens against every basis ``s``: ``(T, S)`` each."""
    B = bases.v1 if isinstance(bases, EigenBases) else spectra.as_float64(bases)
    X = ts.states
    proj = np.linalg.norm(np.einsum("tnd,sdk->tsnk", X, B), axis=-1) / np.linalg.norm(X, axis=-1)[:, None, :]
    a_in, a_out = proj[:-1], proj[1:]  # (T, S, N)
    return a_out.mean(-1), a_in.mean(-1), (a_out > a_in).mean(-1)


class CrossLayerMaps(NamedTuple):
    """:func:`cross_layer_maps`: entry ``[t, s]`` is a statistic of the tokens crossing layer ``t`` against basis ``s``.

    Attributes:
        gamma: ``(T, S)`` γ over the chance level ``c_{d,k_s}`` of basis ``s``.
        rho: ``(T, S)`` ρ (strict increase of the alignment across layer ``t``).
        tilt: ``(T, S)`` Δγ = γ − γ^in over the same chance level.
    """

    gamma: np.ndarray
    rho: np.ndarray
    tilt: np.ndarray


def cross_layer_maps(ts: TokenStates, bases: np.ndarray | EigenBases) -> CrossLayerMaps:
    """γ / chance, ρ and Δγ / chance of every layer ``t``'s tokens against every basis ``s`` (one einsum).

    ``bases`` is an :class:`EigenBases` (its ``v1``) or ``(S, d, k)`` zero-padded bases, which may come from
    another model (a twin's ``v1``: the twin-direction null of :func:`foreign_direction_test`).
    """
    g_out, g_in, rho = _cross_means(ts, bases)
    chance = chance_levels(ts.d, basis_dims(bases))[None, :]
    return CrossLayerMaps(g_out / chance, rho, (g_out - g_in) / chance)


class OwnDirectionTest(NamedTuple):
    """:func:`own_direction_test`: does each layer's own direction beat the other layers' directions?

    Attributes:
        excess: mean of the diagonal of the map minus the mean of its off-diagonal entries.
        p: one-sided permutation p-value of the diagonal's sum among all assignments of the ``T`` columns to
            the ``T`` rows (exact when every permutation is enumerated, else ``(1 + #≥)/(n + 1)``).
        wins: rows whose diagonal entry is the row's largest (:func:`diagonal_wins`).
        permutations: how many permutations the p-value counts (``T!`` when exact).
        exact: whether every permutation was enumerated.
    """

    excess: float
    p: float
    wins: int
    permutations: int
    exact: bool


def own_direction_test(matrix: np.ndarray, *, n_perm: int = 20_000, seed: int = 0,
                       max_exact: int = 8) -> OwnDirectionTest:
    """Permutation test of "layer ``t``'s own direction beats the other layers' directions" on a ``(T, T)`` map.

    ``matrix[t, s]`` is a statistic of the tokens crossing layer ``t`` against layer ``s``'s direction
    (:func:`cross_layer_maps`). Under the null [ours] the direction a layer is paired with does not matter beyond
    a row effect (how aligned layer ``t``'s tokens are with anything) and a column effect (how much any layer's
    tokens catch direction ``s``: an anisotropic state's dominant direction scores high in every row). A
    permutation uses every row and every column once, so both effects cancel from the sum ``Σ_t M[t, π(t)]``
    and only a *diagonal* advantage can make the identity's sum large. p is the share of permutations whose sum
    is at least the diagonal's (the identity counts as one of them, so ``p ≥ 1/T!``): all ``T!`` for
    ``T ≤ max_exact``, else ``n_perm`` uniform random permutations (seed ``seed``).

    Raises:
        ValueError: the map is not square with at least 2 rows.
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 2:
        raise ValueError(f"need a square matrix with at least 2 rows, got shape {m.shape}")
    T = m.shape[0]
    rows = np.arange(T)
    observed = np.trace(m)
    tol = 1e-12 * max(1.0, float(np.abs(m).max()))  # a permutation that ties the diagonal counts against it
    if T <= max_exact:
        perms = np.array(list(permutations(range(T))))
        ge = int((m[rows, perms].sum(axis=1) >= observed - tol).sum())
        p, n, exact = ge / len(perms), len(perms), True
    else:
        perms = np.argsort(np.random.default_rng(seed).random((n_perm, T)), axis=1)
        ge = int((m[rows, perms].sum(axis=1) >= observed - tol).sum())
        p, n, exact = (1 + ge) / (n_perm + 1), n_perm, False
    off = (m.sum() - observed) / (T * (T - 1))
    return OwnDirectionTest(float(observed / T - off), float(p), diagonal_wins(m), n, exact)


class ForeignDirectionTest(NamedTuple):
    """:func:`foreign_direction_test`: each layer's own direction against directions from other models.

    Attributes:
        observed: ``(T,)`` the statistic against the layer's own direction.
        null_lo, null_hi: ``(T,)`` the lowest and highest value against the foreign directions.
        p_layer: ``(T,)`` per-layer empirical p, ``(1 + #{foreign ≥ own})/(S + 1)`` (``S`` foreign directions:
            at best ``1/(S + 1)``).
        p: one-sided p of the mean over layers, against means whose every layer takes one foreign direction
            drawn at random (``n_draw`` Monte Carlo draws, ``(1 + #≥)/(n + 1)``).
        directions: ``S``. draws: the Monte Carlo draws of the pooled test.
    """

    observed: np.ndarray
    null_lo: np.ndarray
    null_hi: np.ndarray
    p_layer: np.ndarray
    p: float
    directions: int
    draws: int


def foreign_direction_test(observed: np.ndarray, foreign: np.ndarray, *, n_draw: int = 20_000,
                           seed: int = 0) -> ForeignDirectionTest:
    """Test each layer's statistic against the same statistic for ``S`` foreign directions, and the mean over layers.

    ``observed[t]`` is a statistic of the tokens crossing layer ``t`` against its own direction, ``foreign[t, s]``
    the same tokens against direction ``s`` of another model (e.g. every layer's ``v_1`` of every random-init twin,
    :func:`cross_layer_maps` on the twins' bases: the twin-direction null [ours]). Each layer gets an empirical p
    among its ``S`` values; with ``S`` small that p cannot go below ``1/(S + 1)``, so the pooled test asks whether
    the mean over layers beats means in which every layer's own direction is replaced by a foreign one, drawn
    independently per layer (the null: a layer's own direction is one more draw from the foreign ones).
    """
    obs = np.asarray(observed, dtype=np.float64)
    f = np.asarray(foreign, dtype=np.float64)
    if f.ndim != 2 or f.shape[0] != obs.size or f.shape[1] < 1:
        raise ValueError(f"foreign must be (T, S) with T = {obs.size} and S >= 1, got shape {f.shape}")
    T, S = f.shape
    idx = np.random.default_rng(seed).integers(0, S, size=(n_draw, T))
    means = f[np.arange(T), idx].mean(axis=1)
    p = (1 + int((means >= obs.mean()).sum())) / (n_draw + 1)
    return ForeignDirectionTest(obs, f.min(axis=1), f.max(axis=1), empirical_p(obs, f), float(p), S, n_draw)


def diagonal_wins(matrix: np.ndarray) -> int:
    """Rows ``t`` of a square ``(T, T)`` map (e.g. :func:`cross_layer`) whose diagonal entry is at least every
    other entry of the row: the layers for which their *own* direction gives the largest value."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 2:
        raise ValueError(f"need a square matrix with at least 2 rows, got shape {m.shape}")
    return int((np.diag(m) >= m.max(axis=1)).sum())  # "at least every other entry" = "the row's maximum"


# -- one model's tests and the verdict of LA7 and LA8 ----------------------------------------------------------
DIRECTION_STATISTICS: dict[str, str] = {"gamma": "γₜ / chance", "tilt": "Δγₜ / chance", "rho": "ρₜ"}
"""The statistics of the own-direction tests, by results-column stem: γ_t and its tilt Δγ_t over the chance level of
the basis they use, and ρ_t."""


@dataclass(frozen=True)
class DirectionTests:
    """One model's tests of "the tokens tilt toward their layer's *own* ``v_{1,t}``" (:func:`direction_tests`).

    Attributes:
        who: ``"trained"`` or ``"random init s<seed>"``. label: the model's label.
        beat: per statistic (``"gamma"``, ``"tilt"``, ``"rho"``), the 1-based layers beating their own
            random-subspace null at FDR 5% (:func:`lib.methods.alignment.random_null`).
        own: per statistic, :func:`own_direction_test` of the model's cross-layer map.
        foreign: per statistic, :func:`foreign_direction_test` against every layer's ``v₁`` of
            every twin (the trained model only; ``None`` for a twin).
    """

    who: str
    label: str
    beat: dict[str, tuple[int, ...]]
    own: dict[str, OwnDirectionTest]
    foreign: dict[str, ForeignDirectionTest | None]

    def held(self, keys: Sequence[str]) -> tuple[int, ...]:
        """The layers where every statistic of ``keys`` beats its random-subspace null, if the model's own
        directions also beat the other layers' (and, for the trained model, the twins') for each of them; else ``()``."""
        specific = all(self.own[k].p < ALPHA and (self.foreign[k] is None or self.foreign[k].p < ALPHA) for k in keys)
        layers = set.intersection(*(set(self.beat[k]) for k in keys))
        return tuple(sorted(layers)) if specific else ()


def direction_tests(trained: Analysis, twins: Sequence[Analysis], source: str = "simplified", *,
                    seed: int = 0) -> list[DirectionTests]:
    """:class:`DirectionTests` of the trained model (first) and of each twin, on the content tokens of ``source``.

    Three nulls per statistic [ours]: random subspaces of each layer's dimension (layer by layer, the
    :func:`lib.chapters.real_models.layer_varying` results); the other layers' ``v₁`` (the cross-layer map, one
    permutation test per model: anisotropic states can score high against *any* trained direction); and, for the
    trained model, every layer's ``v₁`` of every twin (the same tokens against directions of the same architecture
    without training).
    """
    twin_v1 = np.concatenate([a.bases.v1 for a in twins]) if twins else None
    out = []
    for a in (trained, *twins):
        ts = a.states[source].select("content")
        maps = cross_layer_maps(ts, a.bases)
        foreign = cross_layer_maps(ts, twin_v1) if a is trained and twin_v1 is not None else None
        r = select_source(a.results, source)
        beat = {k: layers_where(r, r[f"q_{k}"] < FDR) for k in DIRECTION_STATISTICS}
        own = {k: own_direction_test(getattr(maps, k), seed=seed) for k in DIRECTION_STATISTICS}
        fore = {k: None if foreign is None else
                foreign_direction_test(np.diag(getattr(maps, k)), getattr(foreign, k), seed=seed)
                for k in DIRECTION_STATISTICS}
        out.append(DirectionTests(a.who, a.model.label, beat, own, fore))
    return out


def direction_verdict(tests: Sequence[DirectionTests], keys: Sequence[str], n_layers: int) -> str:
    """A claim's verdict for one model from its :class:`DirectionTests` (the trained model first, then its twins).

    A layer counts when every statistic of ``keys`` beats its random-subspace null and the model's own directions
    beat the other layers' (and the twins') ``v₁`` (:meth:`DirectionTests.held`); the twins are judged by the
    same rule on their own directions. "not reproduced" (no trained layer counts), "not specific to training" (a
    twin has as many), else "reproduced" (every layer) or "partly reproduced".
    """
    trained, *twins = tests
    n = len(trained.held(keys))
    if n == 0:
        return "not reproduced"
    if twins and max(len(t.held(keys)) for t in twins) >= n:
        return "not specific to training"
    return "reproduced" if n == n_layers else "partly reproduced"
