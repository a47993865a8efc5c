"""The statistics every chapter shares: the prompt bootstrap, percentile intervals, empirical p-values, the TOST
equivalence test, Benjamini–Hochberg and depth-trend slopes (arrays in, arrays out; float64).

* Resampling is over **prompts** (tokens of one prompt are not independent): :func:`bootstrap_weights` (the
  mean Jacobians of chapters 4 and 6), :func:`bootstrap_draws` / :func:`bootstrap_ratio` (token-weighted means
  of chapters 1, 3 and 6) and :func:`bootstrap_pooled` (pooled means of chapter 5) each resample the prompts with
  replacement from ``numpy.random.default_rng(seed)``; :func:`resampled_means` applies weights to a stack.
* :class:`Interval` / :func:`interval`: a point estimate with its percentile interval; :class:`TrendTest` /
  :func:`trend_test`: the OLS slope against depth with the interval of the replicates' slopes.
* :func:`empirical_p`: one-sided p-values against a null's draws, never 0; :func:`benjamini_hochberg`: FDR-adjusted
  p-values across layers; :func:`equivalence_test`: TOST on bootstrap draws; :func:`min_p_joint`: one test from
  several dependent ones (their smallest p, against the same draws' joint null).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "Equivalence",
    "Interval",
    "TrendTest",
    "benjamini_hochberg",
    "bootstrap_draws",
    "bootstrap_pooled",
    "bootstrap_ratio",
    "bootstrap_weights",
    "empirical_p",
    "equivalence_test",
    "interval",
    "min_p_joint",
    "ols_slope",
    "resampled_means",
    "trend_test",
]


def bootstrap_weights(n: int, n_boot: int, seed: int = 0) -> np.ndarray:
    """``(n_boot, n)`` prompt-bootstrap weights: multinomial counts of ``n`` draws with replacement, / ``n``.

    Each row sums to 1, so ``weights @ stack`` is the mean over one resample.
    """
    if n < 1 or n_boot < 1:
        raise ValueError(f"need n ≥ 1 and n_boot ≥ 1, got n={n}, n_boot={n_boot}")
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(np.float64) / n


def resampled_means(per_prompt, weights: np.ndarray) -> np.ndarray:
    """Means over bootstrap resamples: ``per_prompt`` ``(..., P, d, d)``, ``weights`` ``(B, P)`` → ``(B, ..., d, d)``.

    ``per_prompt`` may be float32 (as :class:`lib.jacobians.sweep.JacobianSet` keeps it); the result is float64.
    """
    S = np.asarray(per_prompt)
    W = np.asarray(weights, dtype=np.float64)
    if S.shape[-3] != W.shape[1]:
        raise ValueError(f"{S.shape[-3]} prompts in the stack, {W.shape[1]} weights per resample")
    lead, (P, d, e) = S.shape[:-3], S.shape[-3:]
    flat = S.reshape(-1, P, d * e)  # (M, P, d²)
    out = np.empty((W.shape[0], flat.shape[0], d * e))
    for m in range(flat.shape[0]):  # one matrix product per leading index: BLAS, and one float64 copy at a time
        out[:, m] = W @ flat[m].astype(np.float64, copy=False)
    return out.reshape((W.shape[0], *lead, d, e))


@dataclass(frozen=True)
class Interval:
    """A point estimate with a percentile bootstrap interval at ``level``."""

    point: float
    lo: float
    hi: float
    level: float = 0.95

    def fmt(self, spec: str = ".2f") -> str:
        """``"0.81 [0.78, 0.84]"``."""
        return f"{self.point:{spec}} [{self.lo:{spec}}, {self.hi:{spec}}]"


def interval(point: float, boot, level: float = 0.95) -> Interval:
    """Percentile interval of the bootstrap replicates ``boot`` ``(B,)`` around ``point``."""
    b = np.asarray(boot, dtype=np.float64)
    a = (1 - level) / 2
    lo, hi = np.quantile(b, [a, 1 - a])
    return Interval(float(point), float(lo), float(hi), level)


def ols_slope(x, Y) -> np.ndarray:
    """Least-squares slope of ``Y`` ``(..., n)`` against ``x`` ``(n,)`` along the last axis."""
    x = np.asarray(x, dtype=np.float64)
    xc = x - x.mean()
    Y = np.asarray(Y, dtype=np.float64)
    return (Y - Y.mean(-1, keepdims=True)) @ xc / np.sum(xc * xc)


@dataclass(frozen=True)
class TrendTest:
    """OLS slope of a per-layer metric against relative depth, with a prompt-bootstrap interval.

    ``direction`` is ``"falls"`` (interval below 0), ``"rises"`` (above 0) or ``"flat"`` (contains 0).
    """

    slope: Interval

    @property
    def direction(self) -> str:
        if self.slope.hi < 0:
            return "falls"
        if self.slope.lo > 0:
            return "rises"
        return "flat"

    def fmt(self, spec: str = "+.3f") -> str:
        s = self.slope
        return f"slope {s.point:{spec}} [{s.lo:{spec}}, {s.hi:{spec}}]"


def trend_test(depth, point, boot, level: float = 0.95) -> TrendTest:
    """Trend of a metric against depth: ``point`` ``(L,)`` from all prompts, ``boot`` ``(B, L)`` replicates.

    The interval is the percentile interval of the replicates' OLS slopes (prompts resampled, layers
    kept: the replicates carry the correlation between layers that share prompts).
    """
    return TrendTest(interval(float(ols_slope(depth, point)), ols_slope(depth, boot), level))


def bootstrap_draws(
    sums: np.ndarray, counts: np.ndarray, *, n_boot: int = 1000, seed: int = 0
) -> np.ndarray:
    """Token-weighted means ``Σ_p w_p sums_p / Σ_p w_p counts_p`` of ``n_boot`` resamples of the prompts.

    ``w_p`` is the multiplicity of prompt ``p`` in a resample drawn with replacement
    (``numpy.random.default_rng(seed)``); :func:`bootstrap_ratio` takes its quantiles from the same draws.

    Args:
        sums: ``(..., P)`` per-prompt sums of the per-token quantity.
        counts: ``(P,)`` tokens per prompt.

    Returns:
        ``(..., n_boot)`` float64 (NaN for a resample with no token).
    """
    sums, counts = np.asarray(sums, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    P = counts.size
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, P, size=(n_boot, P))
    weights = np.zeros((n_boot, P))
    np.add.at(weights, (np.arange(n_boot)[:, None], draws), 1.0)  # multiplicity of each prompt
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sums @ weights.T) / (weights @ counts)


def bootstrap_ratio(
    sums: np.ndarray, counts: np.ndarray, *, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token-weighted mean ``Σ_p sums_p / Σ_p counts_p`` and its percentile bootstrap interval over prompts.

    Args:
        sums: ``(..., P)`` per-prompt sums of the per-token quantity.
        counts: ``(P,)`` tokens per prompt.
        n_boot: bootstrap resamples (prompts drawn with replacement, :func:`bootstrap_draws`).
        ci: coverage of the interval.
        seed: seed of ``numpy.random.default_rng``.

    Returns:
        ``(estimate, lo, hi)``, each of shape ``sums.shape[:-1]``.
    """
    sums, counts = np.asarray(sums, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    est = sums.sum(-1) / counts.sum()
    if n_boot <= 0:
        return est, np.full_like(est, np.nan), np.full_like(est, np.nan)
    boot = bootstrap_draws(sums, counts, n_boot=n_boot, seed=seed)
    q = (1 - ci) / 2
    lo, hi = np.nanquantile(boot, [q, 1 - q], axis=-1)
    return est, lo, hi


def empirical_p(observed: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """One-sided empirical p-value of each ``observed[t]`` among ``draws[t]`` (``(T,)`` and ``(T, m)``):
    ``(1 + #{draws ≥ observed}) / (m + 1)``, never 0 (the observed value counts as one draw)."""
    draws = np.asarray(draws, dtype=np.float64)
    ge = (draws >= np.asarray(observed, dtype=np.float64)[:, None]).sum(axis=1)
    return (1.0 + ge) / (draws.shape[1] + 1.0)


class Equivalence(NamedTuple):
    """:func:`equivalence_test`: two one-sided tests (TOST) of ``|difference| < margin``.

    Attributes:
        difference: the estimate minus the reference. lo, hi: its ``1 − 2α`` bootstrap interval.
        margin: the equivalence margin δ. p: the TOST p-value, the larger of the two one-sided p-values;
            ``p < α`` means "equivalent within ±δ". alpha: the level.
    """

    difference: float
    lo: float
    hi: float
    margin: float
    p: float
    alpha: float

    @property
    def equivalent(self) -> bool:
        """Whether both one-sided tests reject, i.e. the ``1 − 2α`` interval lies inside ``(−δ, δ)``."""
        return self.p < self.alpha


def equivalence_test(estimate: float, boot: np.ndarray, reference: float, margin: float, *,
                     alpha: float = 0.05) -> Equivalence:
    """TOST [ours]: is ``estimate − reference`` within ``±margin``, judged by the bootstrap draws ``boot`` of the estimate?

    The one-sided p-values are the bootstrap shares of draws at or beyond each bound,
    ``p₋ = (1 + #{boot − reference ≤ −δ})/(n + 1)`` and ``p₊ = (1 + #{boot − reference ≥ δ})/(n + 1)``; the TOST p is
    ``max(p₋, p₊)``, and ``p < α`` exactly when the percentile ``1 − 2α`` interval lies inside ``(−δ, δ)`` (up to
    the ``1/(n + 1)`` granularity). A difference too uncertain for its margin stays "not equivalent": absence
    of evidence is not evidence of absence.

    Raises:
        ValueError: ``margin <= 0`` or no finite bootstrap draw.
    """
    if not margin > 0:
        raise ValueError(f"the equivalence margin must be positive, got {margin}")
    b = np.asarray(boot, dtype=np.float64)
    b = b[np.isfinite(b)] - reference
    if b.size == 0:
        raise ValueError("no finite bootstrap draw")
    n = b.size
    p_lo = (1 + int((b <= -margin).sum())) / (n + 1)
    p_hi = (1 + int((b >= margin).sum())) / (n + 1)
    lo, hi = np.quantile(b, [alpha, 1 - alpha])
    return Equivalence(float(estimate - reference), float(lo), float(hi), float(margin), float(max(p_lo, p_hi)),
                       alpha)


def benjamini_hochberg(p: Sequence[float]) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (NaNs stay NaN)."""
    p = np.asarray(p, dtype=np.float64)
    out = np.full_like(p, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    if len(ok) == 0:
        return out
    q = p[ok]
    order = np.argsort(q)
    m = len(q)
    adj = q[order] * m / np.arange(1, m + 1)
    adj = np.minimum.accumulate(adj[::-1])[::-1]
    res = np.empty(m)
    res[order] = np.minimum(adj, 1.0)
    out[ok] = res
    return out


def bootstrap_pooled(sums: Any, counts: Any = None, *, n_boot: int = 2000, level: float = 0.95,
                     seed: int = 0, transform: Any = None) -> tuple[float, float]:
    """Percentile bootstrap interval over prompts of a pooled mean ``Σ sums / Σ counts``.

    Args:
        sums: per-prompt sums ``(P,)`` (e.g. the summed alignment of a prompt's tokens, or 1/0 hits).
        counts: per-prompt counts ``(P,)`` (tokens); ``None`` means one per prompt (a plain mean).
        transform: applied to each resampled pooled mean (``np.exp`` for a perplexity from losses).

    Returns:
        ``(lo, hi)``; vectorised: one ``(n_boot, P)`` index draw from ``default_rng(seed)``.
    """
    x = np.asarray(sums, dtype=np.float64)
    n = np.ones_like(x) if counts is None else np.asarray(counts, dtype=np.float64)
    idx = np.random.default_rng(seed).integers(0, x.size, size=(n_boot, x.size))
    stat = x[idx].sum(1) / n[idx].sum(1)
    if transform is not None:
        stat = transform(stat)
    q = (1 - level) / 2
    lo, hi = np.quantile(stat, [q, 1 - q])
    return float(lo), float(hi)


# -- chapter 6, TV2: one test per layer over several dependent subspaces (min-p with its joint null) ------------
def min_p_joint(observed: Any, null: Any, *, smaller: bool = True) -> float:
    """Tippett's min-p over ``k`` dependent tests, calibrated by their joint null (single-step Westfall–Young).

    Several statistics of one unit (the angles of one direction to ``k`` subspaces of the same layer) are
    one test, not ``k``: counting each would count the same evidence ``k`` times. The combined statistic is
    the smallest of the ``k`` marginal p-values; its null distribution comes from the same ``m`` draws,
    each of which gives all ``k`` statistics at once (one random direction against every subspace), so the
    dependence between the ``k`` tests is kept. ``k`` copies of one test cost nothing (the combined p is
    the marginal p); ``k`` independent tests give about Šidák's ``1 − (1 − p_min)^k``.

    Args:
        observed: ``(k,)`` statistics. null: ``(m, k)`` joint draws under the null hypothesis.
        smaller: ``True`` when small values are extreme (angles), ``False`` when large ones are.
    Returns:
        the combined p-value: with the observation pooled among the draws (``m + 1`` exchangeable values under
        the null), each value's marginal p-value is its rank in its test over ``m + 1`` (the observation's is
        ``(1 + #{draws at least as extreme}) / (m + 1)``), and the combined p is the share of the ``m + 1``
        values whose smallest marginal p is at most the observation's; never 0.
    """
    obs = np.asarray(observed, dtype=np.float64)
    N = np.asarray(null, dtype=np.float64)
    if N.ndim != 2 or obs.shape != N.shape[1:]:
        raise ValueError(f"observed must be (k,) and null (m, k), got {obs.shape} and {N.shape}")
    pool = np.vstack([obs[None], N]) if smaller else -np.vstack([obs[None], N])  # (m + 1, k), row 0 observed
    S = np.sort(pool, axis=0)
    ranks = np.stack([np.searchsorted(S[:, i], pool[:, i], side="right") for i in range(pool.shape[1])], 1)
    s = ranks.min(1)  # (m + 1,): each value's smallest marginal rank
    return float((s <= s[0]).sum() / len(s))
