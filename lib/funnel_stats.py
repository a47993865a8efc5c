"""Bootstrap intervals, depth-trend tests and the verdicts of chapter 4 (sections 4.3, 4.6 and 4.8).

Every statistic of chapter 4 is a function of the mean Jacobian ``J̄_l = (1/P) Σ_p J_l(x_p)`` over
``P`` prompts. Its sampling variability is estimated by the **prompt bootstrap** [ours]: a resample
draws ``P`` prompts with replacement, and its mean is ``w @ stack`` with ``w`` the ``(P,)`` resampling
weights (counts / P), so no Jacobian is ever recomputed (:func:`bootstrap_weights`,
:func:`resampled_means`).

Metrics are vectorised over any leading axes (:func:`spectral_metrics`, :func:`funnel_eranks`):

* ``f_C`` (complex fraction), ``δ_H`` (relative Henrici departure) and ``r_rot`` (antisymmetric energy
  fraction) of the **operator**: the update ``Ā = J̄ − I`` for pre-norm blocks (``update=True``), the
  Jacobian ``J̄`` itself for post-LN blocks (``update=False``: no identity skip survives the final
  LayerNorm, so ``J̄ − I`` is not an update the network performs);
* ``erank`` of ``J̄_l`` (one block alone) and of the cumulative product ``P_l = J̄_{l−1} ⋯ J̄_0`` (the
  funnel): a single-layer collapse is not a compounding funnel, so both are reported.

``δ_H`` here uses ``dep(A)² = ‖A‖_F² − Σ|λ_i(A)|²`` from batched eigenvalues, which is accurate when
``δ_H`` is not tiny (relative error ``≈ ε ‖A‖²/dep²``); :func:`lib.nonnormal.henrici_rel` (complex
Schur) is the reference, and the tests compare both. Values of ``δ_H`` below ``1e-6`` are not
resolved by this form.

:func:`trend_test` turns bootstrap replicates of a per-layer metric into an OLS slope against relative
depth with a percentile interval; :func:`trend_verdict` and :func:`compare_with_twins` decide from the
intervals alone, never from a fixed threshold on a point estimate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lib.spectra import TAU_COMPLEX, as_float64
from lib.parallel import map_matrices

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = [
    "CONTROLS",
    "BootstrapRun",
    "Interval",
    "TrendTest",
    "bootstrap_run",
    "bootstrap_weights",
    "combine_verdicts",
    "compare_with_twins",
    "control_funnels",
    "control_verdict",
    "funnel_verdict",
    "learned_verdict",
    "operator_sign_verdict",
    "power_qualified",
    "sign_pattern_verdict",
    "funnel_eranks",
    "input_rescaling",
    "interval",
    "metric_frame",
    "ols_slope",
    "resampled_means",
    "spectral_metrics",
    "trend_test",
    "trend_verdict",
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

    ``per_prompt`` may be float32 (as :class:`lib.jacobian.JacobianSet` keeps it); the result is float64.
    """
    S = np.asarray(per_prompt)
    W = np.asarray(weights, dtype=np.float64)
    if S.shape[-3] != W.shape[1]:
        raise ValueError(f"{S.shape[-3]} prompts in the stack, {W.shape[1]} weights per resample")
    lead, (P, d, e) = S.shape[:-3], S.shape[-3:]
    flat = S.reshape(-1, P, d * e)  # (M, P, d²)
    out = np.einsum("bp,mpk->bmk", W, flat.astype(np.float64, copy=False), optimize=True)
    return out.reshape((W.shape[0], *lead, d, e))


def _erank_sv(s: np.ndarray) -> np.ndarray:
    p = s**2
    tot = p.sum(-1, keepdims=True)
    p = np.divide(p, tot, out=np.zeros_like(p), where=tot > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        H = -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=-1)
    return np.where(tot[..., 0] > 0, np.exp(H), 0.0)


def spectral_metrics(Js, *, update: bool = True, tau: float = TAU_COMPLEX) -> dict[str, np.ndarray]:
    """``f_C``, ``delta_H``, ``r_rot`` and ``erank`` of every matrix in a stack ``(..., d, d)`` (float64).

    Args:
        Js: block Jacobians (column convention), any leading shape.
        update: ``True`` (pre-norm): the operator is ``J − I``; ``False`` (post-LN contrast): ``J`` itself.
            ``f_C`` is shift-invariant, so only ``delta_H`` and ``r_rot`` depend on it. ``erank`` is always
            of ``J`` (what a perturbation passes through).

    Returns:
        arrays of shape ``Js.shape[:-2]``. Definitions as :func:`lib.nonnormal.complex_fraction`,
        :func:`lib.nonnormal.henrici_rel` (normalised by the operator's own norm) and
        :func:`lib.nonnormal.rotation_fraction`.
    """
    J = as_float64(Js)
    d = J.shape[-1]
    A = J - np.eye(d) if update else J
    lam = np.linalg.eigvals(A)
    scale = np.abs(lam).max(-1, keepdims=True)
    f_c = np.mean(np.abs(lam.imag) > tau * scale, axis=-1)
    f_c = np.where(scale[..., 0] > 0, f_c, 0.0)
    nrm2 = np.sum(A * A, axis=(-2, -1))
    dep2 = np.clip(nrm2 - np.sum(np.abs(lam) ** 2, axis=-1), 0.0, None)
    safe = np.where(nrm2 > 0, nrm2, 1.0)
    delta_h = np.where(nrm2 > 0, np.sqrt(dep2 / safe), 0.0)
    K = (A - np.swapaxes(A, -1, -2)) / 2
    r_rot = np.where(nrm2 > 0, np.sum(K * K, axis=(-2, -1)) / safe, 0.0)
    erank = _erank_sv(np.linalg.svd(J, compute_uv=False))
    return {"f_C": f_c, "delta_H": delta_h, "r_rot": r_rot, "erank": erank}


def funnel_eranks(Js) -> np.ndarray:
    """Effective rank of the untruncated cumulative product after every block, batched.

    Args:
        Js: ``(..., L, d, d)`` Jacobians in block order.
    Returns:
        ``(..., L + 1)``: entry 0 is ``d`` (the identity), entry ``l`` is ``erank(J_{l−1} ⋯ J_0)``;
        equal to :func:`lib.nonnormal.cumulative_product` ``(Js).erank`` for each leading index.
    """
    J = as_float64(Js)
    *lead, L, d, _ = J.shape
    P = np.broadcast_to(np.eye(d), (*lead, d, d)).copy()
    out = [np.full(tuple(lead), float(d))]
    for l in range(L):
        P = J[..., l, :, :] @ P
        nrm = np.sqrt(np.sum(P * P, axis=(-2, -1), keepdims=True))
        if np.any(nrm == 0):
            raise FloatingPointError("the cumulative product became exactly zero")
        P = P / nrm
        out.append(_erank_sv(np.linalg.svd(P, compute_uv=False)))
    return np.stack(out, axis=-1)


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


def trend_verdict(trained: TrendTest, twins: Sequence[TrendTest], expected: str = "falls") -> str:
    """Verdict on "the metric ``expected`` (falls/rises) with depth, and that is learned".

    ``"reproduced"``: the trained slope's interval excludes 0 on the expected side and no twin's does;
    ``"not specific to training"``: the trained one does and so does some twin's; ``"not reproduced"``:
    the trained slope's interval does not exclude 0 on the expected side.
    """
    if expected not in ("falls", "rises"):
        raise ValueError(f"expected must be 'falls' or 'rises', got {expected!r}")
    if trained.direction != expected:
        return "not reproduced"
    if any(t.direction == expected for t in twins):
        return "not specific to training"
    return "reproduced"


def compare_with_twins(trained: Interval, twins: Sequence[Interval]) -> str:
    """Where a trained value sits against its random-init twins, from the intervals only.

    Returns ``"lower"`` if the trained interval lies entirely below every twin's interval, ``"higher"``
    if entirely above every twin's, else ``"overlaps"``.
    """
    if all(trained.hi < t.lo for t in twins):
        return "lower"
    if all(trained.lo > t.hi for t in twins):
        return "higher"
    return "overlaps"


@dataclass
class BootstrapRun:
    """Point values and prompt-bootstrap replicates of one model's chapter-4 statistics.

    Attributes:
        point: metric name → ``(L,)`` values from all prompts (``f_C``, ``delta_H``, ``r_rot``, ``erank``
            of each ``J̄_l``), plus ``"funnel"`` ``(L + 1,)`` (cumulative product from block 1) and
            ``"funnel_no_b1"`` ``(L,)`` (from block 2: entry 0 is ``d``).
        boot: the same names → ``(B, …)`` replicates (``None`` when run without a bootstrap).
        update: whether ``delta_H``/``r_rot`` are of ``J̄ − I`` (pre-norm) or of ``J̄`` (post-LN contrast).
        n_prompts: P.
        level: the default coverage of :meth:`interval` and :meth:`trend` (few replicates support only a
            lower level: with ``B`` of them the 2.5% and 97.5% percentiles are about the extremes).
    """

    point: dict[str, np.ndarray]
    boot: dict[str, np.ndarray] | None
    update: bool
    n_prompts: int
    level: float = 0.95

    def has_interval(self, name: str) -> bool:
        """Whether ``name`` was resampled."""
        return self.boot is not None and name in self.boot

    def interval(self, name: str, index: int = -1, level: float | None = None) -> Interval:
        """Bootstrap interval of ``point[name][index]`` (for the funnel, ``-1`` is the final product)."""
        if not self.has_interval(name):
            raise ValueError(f"this run has no bootstrap replicates of {name!r}")
        return interval(float(self.point[name][index]), self.boot[name][:, index], level or self.level)

    def trend(self, name: str, level: float | None = None) -> TrendTest:
        """:func:`trend_test` of a per-layer metric against relative depth ``(l + 1)/L``."""
        if not self.has_interval(name):
            raise ValueError(f"this run has no bootstrap replicates of {name!r}")
        L = len(self.point[name])
        return trend_test(np.arange(1, L + 1) / L, self.point[name], self.boot[name], level or self.level)


BOOTSTRAP_STATS: tuple[str, ...] = ("f_C", "delta_H", "r_rot", "erank", "funnel", "funnel_no_b1")
"""The statistics of :func:`bootstrap_run`: four per-layer metrics (:func:`spectral_metrics`) and two funnels."""


def bootstrap_run(per_prompt, *, update: bool = True, n_boot: int = 0, seed: int = 0,
                  level: float = 0.95, resample: Sequence[str] = BOOTSTRAP_STATS) -> BootstrapRun:
    """Every per-layer metric and both funnels of one model, with ``n_boot`` prompt-bootstrap replicates.

    Args:
        per_prompt: ``(L, P, d, d)`` single-prompt Jacobians (float32 is fine).
        update: pre-norm (``True``: ``J̄ − I``) or post-LN contrast (``False``: ``J̄``).
        n_boot: resamples (0: point values only). The same ``seed`` gives the same resamples to every
            model with the same ``P``, so trained models and their twins are resampled alike.
        level: the run's default interval coverage (:attr:`BootstrapRun.level`).
        resample: the statistics that get replicates (all by default). At large ``d`` the per-layer metrics'
            eigensolves are most of the cost: ``("funnel_no_b1",)`` resamples only the primary funnel.
    """
    unknown = set(resample) - set(BOOTSTRAP_STATS)
    if unknown:
        raise ValueError(f"unknown statistics {sorted(unknown)}; choose from {BOOTSTRAP_STATS}")
    per = np.asarray(per_prompt)
    L, P = per.shape[:2]
    Jm = per.astype(np.float64).mean(1)

    def stats(J: np.ndarray, names: Sequence[str] = BOOTSTRAP_STATS) -> dict[str, np.ndarray]:  # J: (..., L, d, d)
        out = spectral_metrics(J, update=update) if set(names) & {"f_C", "delta_H", "r_rot", "erank"} else {}
        if "funnel" in names:
            out["funnel"] = funnel_eranks(J)
        if "funnel_no_b1" in names:
            out["funnel_no_b1"] = funnel_eranks(J[..., 1:, :, :])
        return {name: out[name] for name in names}

    point = stats(Jm)
    boot = None
    if n_boot and resample:  # one resample per thread: NumPy's LAPACK releases the GIL (lib.parallel)
        reps = map_matrices(lambda J: stats(J, resample), resampled_means(per, bootstrap_weights(P, n_boot, seed)))
        boot = {name: np.stack([r[name] for r in reps]) for name in resample}
    return BootstrapRun(point=point, boot=boot, update=update, n_prompts=P, level=level)


CONTROLS: tuple[str, ...] = ("as measured", "Schur-normal", "shuffled Schur")
"""The funnel variants of :func:`lib.nonnormal.control_matrices`, in table order."""


def control_funnels(per_prompt, *, first: int = 1, n_boot: int = 0, seed: int = 0) -> dict[str, Interval]:
    """Final funnel erank of ``J̄`` and of its two controls from block ``first + 1`` on, with intervals.

    Each resample's mean Jacobians get their own controls (:func:`lib.nonnormal.both_controls`, one real
    Schur per layer and resample; the shuffle seed is the layer's index, as in
    :func:`lib.nonnormal.control_matrices`). Also returns ``"Schur-normal / as measured"``, the ratio of
    final eranks (> 1: removing the non-normality widens the funnel).

    Args:
        per_prompt: ``(L, P, d, d)``. first: blocks skipped (1: the rows without block 1).
    """
    from lib.nonnormal import both_controls

    per = np.asarray(per_prompt)[first:]
    P = per.shape[1]

    def finals(J: np.ndarray) -> np.ndarray:  # (L', d, d) -> (3,)
        pairs = [both_controls(M, seed=first + l) for l, M in enumerate(J)]
        mats = (J, np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs]))
        return np.array([funnel_eranks(M)[-1] for M in mats])

    pt = finals(per.astype(np.float64).mean(1))
    bt = (np.stack([finals(J) for J in resampled_means(per, bootstrap_weights(P, n_boot, seed))])
          if n_boot else pt[None])
    out = {name: interval(pt[i], bt[:, i]) for i, name in enumerate(CONTROLS)}
    out["Schur-normal / as measured"] = interval(pt[1] / pt[0], bt[:, 1] / bt[:, 0])
    return out


# --- Verdicts of section 4.8: decided from intervals and corrected p-values only -----------------------


def funnel_verdict(trained: Interval, twins: Sequence[Interval]) -> str:
    """FG3 (low-rank funnel, learned): ``"reproduced"`` if the trained final erank lies below every twin's
    interval; ``"not reproduced"`` if it overlaps or lies above (a funnel at most as narrow as random init)."""
    return "reproduced" if compare_with_twins(trained, twins) == "lower" else "not reproduced"


def control_verdict(ratio: Interval, funnel: str) -> str:
    """FG4 (removing non-normality removes the collapse): ``"reproduced"`` if there is a funnel to remove
    (``funnel`` is FG3's verdict, ``"reproduced"``) and the Schur-normal/as-measured erank ratio's interval
    lies above 1; else ``"not reproduced"``."""
    return "reproduced" if funnel == "reproduced" and ratio.lo > 1 else "not reproduced"


def combine_verdicts(verdicts: Sequence[str]) -> str:
    """One verdict for a claim tested by several statistics (e.g. FG2 by ``δ_H`` and ``r_rot``).

    All ``"reproduced"``: reproduced; some: ``"partly reproduced"``; none, but some ``"not specific to
    training"``: that; else ``"not reproduced"``.
    """
    n_rep = sum(v in ("reproduced", "partly reproduced") for v in verdicts)
    if verdicts and all(v == "reproduced" for v in verdicts):
        return "reproduced"
    if n_rep:
        return "partly reproduced"
    if any(v == "not specific to training" for v in verdicts):
        return "not specific to training"
    return "not reproduced"


def sign_pattern_verdict(r_s, q, depth, alpha: float = 0.05) -> str:
    """FG6 (bridges suppressed early and middle, amplified late), from per-layer couplings.

    ``"reproduced"``: a significant negative ``r_S`` (``q < alpha``) at some depth ``≤ 2/3`` *and* a
    significant positive one at some depth ``> 2/3``, and no significant coupling of the opposite sign
    anywhere; ``"partly reproduced"``: only one of the two; ``"not reproduced"``: neither.
    """
    r, q, x = (np.asarray(a, dtype=np.float64) for a in (r_s, q, depth))
    sig = q < alpha
    early, late = x <= 2 / 3, x > 2 / 3
    neg_early, pos_late = bool(np.any(sig & early & (r < 0))), bool(np.any(sig & late & (r > 0)))
    wrong = bool(np.any(sig & early & (r > 0)) or np.any(sig & late & (r < 0)))
    if neg_early and pos_late and not wrong:
        return "reproduced"
    if neg_early or pos_late:
        return "partly reproduced"
    return "not reproduced"


def operator_sign_verdict(r_attn, q_attn, r_mlp, q_mlp, q_twins: Sequence, alpha: float = 0.05) -> str:
    """FG5 (position predicts gain, sign set by the operator type: attention vs MLP sub-block).

    ``"reproduced"``: some layer has significant couplings of opposite sign in the two sub-blocks, and no
    twin has a significant layer; ``"partly reproduced"``: trained couplings significant somewhere but no
    sign split; ``"not specific to training"``: significant somewhere, and as often in some twin;
    ``"not reproduced"``: no significant trained coupling.
    """
    ra, qa, rm, qm = (np.asarray(a, dtype=np.float64) for a in (r_attn, q_attn, r_mlp, q_mlp))
    n_tr = int(np.sum(qa < alpha) + np.sum(qm < alpha))
    if n_tr == 0:
        return "not reproduced"
    if any(int(np.sum(np.asarray(q) < alpha)) >= n_tr for q in q_twins):
        return "not specific to training"
    split = np.any((qa < alpha) & (qm < alpha) & (np.sign(ra) != np.sign(rm)))
    return "reproduced" if split else "partly reproduced"


def power_qualified(verdict: str, planted_r, power, *, at_r: float = 0.2, level: float = 0.8) -> str:
    """A "not reproduced" from a test too weak to see a modest effect becomes "inconclusive (underpowered)".

    Args:
        verdict: the verdict of the test on the data.
        planted_r: ``(E,)`` mean coupling ``r_S`` of each planted effect of a power analysis
            (:func:`lib.topology.planted_power`).
        power: ``(E,)`` the share of replicates in which the test found that planted effect.
        at_r: the effect size the test must be able to see [ours: a modest coupling, |r_S| = 0.2].
        level: the power needed to read a null result as absence (0.8, the usual convention).

    Returns:
        ``verdict`` unchanged unless it is ``"not reproduced"`` and the power at the planted effect nearest
        ``at_r`` is below ``level``.

    Example:
        >>> power_qualified("not reproduced", [0.16, 0.32], [0.22, 0.84])
        'inconclusive (underpowered)'
    """
    if verdict != "not reproduced":
        return verdict
    r, pw = np.asarray(planted_r, dtype=np.float64), np.asarray(power, dtype=np.float64)
    if r.shape != pw.shape or r.size == 0:
        raise ValueError(f"planted_r and power must be equal-length, non-empty; got {r.shape} and {pw.shape}")
    return "inconclusive (underpowered)" if pw[np.argmin(np.abs(r - at_r))] < level else verdict


def learned_verdict(verdicts: Sequence[str]) -> str:
    """FG7 (none of it at random init), from the verdicts of the effects it qualifies.

    Some effect reproduced and none found at random init as well: ``"reproduced"``; both kinds:
    ``"partly reproduced"``; only effects that random init shares: ``"not specific to training"``; no
    effect in the trained model at all: ``"not reproduced"`` (there is nothing learned to compare).
    """
    n_rep = sum(v in ("reproduced", "partly reproduced") for v in verdicts)
    n_ns = sum(v == "not specific to training" for v in verdicts)
    if n_rep and not n_ns:
        return "reproduced"
    if n_rep and n_ns:
        return "partly reproduced"
    return "not specific to training" if n_ns else "not reproduced"


def metric_frame(runs: dict[tuple[str, str], BootstrapRun], metrics: Sequence[str] = ("f_C", "delta_H", "r_rot", "erank"),
                 level: float | None = None) -> pd.DataFrame:
    """Long table of per-layer metrics: ``model``, ``weights``, ``layer``, ``depth``, ``metric``, ``value``,
    ``lo``, ``hi`` (``lo``/``hi`` NaN for runs without a bootstrap; ``level`` None: each run's own)."""
    rows = []
    for (model, weights), r in runs.items():
        for m in metrics:
            L = len(r.point[m])
            for l in range(L):
                iv = r.interval(m, l, level) if r.has_interval(m) else Interval(float(r.point[m][l]), np.nan, np.nan)
                rows.append({"model": model, "weights": weights, "layer": l + 1, "depth": (l + 1) / L, "metric": m,
                             "value": iv.point, "lo": iv.lo, "hi": iv.hi})
    return pd.DataFrame(rows)


def input_rescaling(model: SpectralModel, X0, Jbar, scales: Sequence[float]) -> pd.DataFrame:
    """Block 1's Jacobian with its input rescaled: the test of "small input × pre-norm" for a block-1 collapse.

    For each ``c`` in ``scales``, block 1's single-token Jacobians are recomputed at ``c · x`` for every
    prompt's first-block input ``x`` (rows of ``X0``, ``(P, d)``), averaged, and put in place of ``J̄_1``.

    Returns:
        one row per scale: ``scale``, ``input_norm`` (median ``‖c x‖``), ``erank_J1`` (of the new ``J̄_1``),
        ``update_norm`` (``‖J̄_1 − I‖_F``), ``funnel`` (final erank of the product over all blocks with it).
    """
    import torch

    from lib import jacobian

    X0 = torch.as_tensor(X0)
    base = float(np.median(X0.norm(dim=-1).numpy()))
    Js = as_float64(Jbar).copy()
    rows = []
    for c in scales:
        J1 = jacobian.layer_jacobians(model, 0, c * X0).mean(0).cpu().numpy()
        Js[0] = J1
        m = spectral_metrics(J1)
        rows.append({"scale": float(c), "input_norm": c * base, "erank_J1": float(m["erank"]),
                     "update_norm": float(np.linalg.norm(J1 - np.eye(len(J1)))),
                     "funnel": float(funnel_eranks(Js)[-1])})
    return pd.DataFrame(rows)
