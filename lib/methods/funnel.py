"""The funnel's statistics with their prompt-bootstrap replicates, and its non-normality controls (chapter 4,
sections 4.3 and 4.6; any chapter with stacks of per-prompt block Jacobians may use them).

Every statistic is a function of the mean Jacobian ``J̄_l = (1/P) Σ_p J_l(x_p)`` over ``P`` prompts. Its
sampling variability is estimated by the **prompt bootstrap** [ours]: a resample draws ``P`` prompts with
replacement, and its mean is ``w @ stack`` with ``w`` the ``(P,)`` resampling weights (counts / P), so no
Jacobian is ever recomputed (:func:`lib.stats.bootstrap_weights`, :func:`lib.stats.resampled_means`).

* :func:`bootstrap_run` → :class:`BootstrapRun`: the per-layer metrics of
  :func:`lib.linalg.nonnormal.spectral_metrics` (``f_C``, ``δ_H``, ``r_rot`` of the **operator** — the update
  ``Ā = J̄ − I`` for pre-norm blocks, ``update=True``; ``J̄`` itself for post-LN blocks, ``update=False``, where
  no identity skip survives the final LayerNorm — and ``erank`` of each ``J̄_l``) and the funnel's effective
  ranks of the cumulative product ``P_l = J̄_{l−1} ⋯ J̄_0`` from block 1 and from block 2
  (:func:`lib.linalg.nonnormal.funnel_eranks`): a single-layer collapse is not a compounding funnel, so both
  are reported;
* :func:`control_funnels`: the final funnel erank of ``J̄`` and of its two controls (:data:`CONTROLS`,
  :func:`lib.linalg.nonnormal.both_controls`), each resample with its own controls.

Inputs are ``(L, P, d, d)`` single-prompt Jacobians in block order (column convention, float32 is fine); all
arithmetic is float64. The chapter's runs over twins and its verdicts are in :mod:`lib.chapters.jacobian_funnel`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from lib.linalg.nonnormal import both_controls, effective_rank, funnel_eranks, spectral_metrics
from lib.parallel import map_matrices
from lib.stats import Interval, TrendTest, bootstrap_weights, interval, resampled_means, trend_test

__all__ = ["BOOTSTRAP_STATS", "CONTROLS", "RESAMPLE_BYTES", "BootstrapRun", "bootstrap_run", "control_funnels",
           "control_funnels_by_start", "resampled_chunks"]


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
        """:func:`lib.stats.trend_test` of a per-layer metric against relative depth ``(l + 1)/L``."""
        if not self.has_interval(name):
            raise ValueError(f"this run has no bootstrap replicates of {name!r}")
        L = len(self.point[name])
        return trend_test(np.arange(1, L + 1) / L, self.point[name], self.boot[name], level or self.level)


BOOTSTRAP_STATS: tuple[str, ...] = ("f_C", "delta_H", "r_rot", "erank", "funnel", "funnel_no_b1")
"""The statistics of :func:`bootstrap_run`: four per-layer metrics (:func:`lib.linalg.nonnormal.spectral_metrics`)
and two funnels."""


RESAMPLE_BYTES = 256 * 2**20
"""The float64 resampled means held at once (:func:`resampled_chunks`): 200 resamples of MiniLM's six
``384 × 384`` means would take 1.4 GB."""


def resampled_chunks(per: np.ndarray, weights: np.ndarray, max_bytes: int = RESAMPLE_BYTES) -> Iterator[np.ndarray]:
    """:func:`lib.stats.resampled_means` of ``per`` ``(..., P, d, d)`` in consecutive chunks of the rows of
    ``weights`` ``(B, P)``, each chunk's float64 means at most about ``max_bytes`` (at least one resample)."""
    per_resample = 8 * int(np.prod(per.shape[:-3], dtype=np.int64)) * per.shape[-2] * per.shape[-1]
    step = max(1, int(max_bytes // per_resample))
    for i in range(0, len(weights), step):
        yield resampled_means(per, weights[i:i + step])


def _final_only(J: np.ndarray) -> np.ndarray:
    """The funnel's ``(..., L + 1)`` row with only its last entry computed (the others NaN): the final product's
    effective rank, one SVD instead of ``L``."""
    *lead, L, d, _ = J.shape
    P = J[..., 0, :, :]
    for l in range(1, L):
        P = J[..., l, :, :] @ (P / np.sqrt(np.sum(P * P, axis=(-2, -1), keepdims=True)))
    out = np.full((*lead, L + 1), np.nan)
    out[..., -1] = effective_rank(P) if not lead else [effective_rank(M) for M in P.reshape(-1, d, d)]
    return out


def bootstrap_run(per_prompt, *, update: bool = True, n_boot: int = 0, seed: int = 0,
                  level: float = 0.95, resample: Sequence[str] = BOOTSTRAP_STATS,
                  final_only: bool = False) -> BootstrapRun:
    """Every per-layer metric and both funnels of one model, with ``n_boot`` prompt-bootstrap replicates.

    Args:
        per_prompt: ``(L, P, d, d)`` single-prompt Jacobians (float32 is fine).
        update: pre-norm (``True``: ``J̄ − I``) or post-LN contrast (``False``: ``J̄``).
        n_boot: resamples (0: point values only). The same ``seed`` gives the same resamples to every
            model with the same ``P``, so trained models and their twins are resampled alike.
        level: the run's default interval coverage (:attr:`BootstrapRun.level`).
        resample: the statistics that get replicates (all by default). At large ``d`` the per-layer metrics'
            eigensolves are most of the cost: ``("funnel_no_b1",)`` resamples only the primary funnel.
        final_only: the funnels' replicates hold only the final product's effective rank (the other entries
            NaN; one SVD per resample instead of one per block), for a run whose only interval is the final one.
    """
    unknown = set(resample) - set(BOOTSTRAP_STATS)
    if unknown:
        raise ValueError(f"unknown statistics {sorted(unknown)}; choose from {BOOTSTRAP_STATS}")
    per = np.asarray(per_prompt)
    P = per.shape[1]
    Jm = per.astype(np.float64).mean(1)

    def stats(J: np.ndarray, names: Sequence[str] = BOOTSTRAP_STATS, final: bool = False
              ) -> dict[str, np.ndarray]:  # J: (..., L, d, d)
        funnel = _final_only if final else funnel_eranks
        out = spectral_metrics(J, update=update) if set(names) & {"f_C", "delta_H", "r_rot", "erank"} else {}
        if "funnel" in names:
            out["funnel"] = funnel(J)
        if "funnel_no_b1" in names:
            out["funnel_no_b1"] = funnel(J[..., 1:, :, :])
        return {name: out[name] for name in names}

    point = stats(Jm)
    boot = None
    if n_boot and resample:  # one resample per thread: NumPy's LAPACK releases the GIL (lib.parallel)
        reps = [r for means in resampled_chunks(per, bootstrap_weights(P, n_boot, seed))
                for r in map_matrices(lambda J: stats(J, resample, final_only), means)]
        boot = {name: np.stack([r[name] for r in reps]) for name in resample}
    return BootstrapRun(point=point, boot=boot, update=update, n_prompts=P, level=level)


CONTROLS: tuple[str, ...] = ("as measured", "Schur-normal", "shuffled Schur")
"""The funnel variants of :func:`lib.linalg.nonnormal.control_matrices`, in table order."""


def control_funnels(per_prompt, *, first: int = 1, n_boot: int = 0, seed: int = 0) -> dict[str, Interval]:
    """Final funnel erank of ``J̄`` and of its two controls from block ``first + 1`` on, with intervals.

    Each resample's mean Jacobians get their own controls (:func:`lib.linalg.nonnormal.both_controls`, one real
    Schur per layer and resample; the shuffle seed is the layer's index, as in
    :func:`lib.linalg.nonnormal.control_matrices`). Also returns ``"Schur-normal / as measured"``, the ratio of
    final eranks (> 1: removing the non-normality widens the funnel). :func:`control_funnels_by_start` gives
    several starting blocks from one set of Schur forms.

    Args:
        per_prompt: ``(L, P, d, d)``. first: blocks skipped (1: the rows without block 1).
    """
    return control_funnels_by_start(per_prompt, firsts=(first,), n_boot=n_boot, seed=seed)[first]


def control_funnels_by_start(per_prompt, *, firsts: Sequence[int] = (0, 1), n_boot: int = 0, seed: int = 0
                             ) -> dict[int, dict[str, Interval]]:
    """:func:`control_funnels` for every starting block in ``firsts`` (e.g. the full product, ``0``, and the product
    from block 2, ``1``), each layer's controls computed once per resample and shared by the products that use it
    (the same matrices :func:`control_funnels` builds for each start alone). The resamples run one per thread
    (:func:`lib.parallel.map_matrices`).

    Returns:
        ``first → {name: Interval}`` with the names of :data:`CONTROLS`, ``"Schur-normal / as measured"`` and
        ``"shuffled Schur / as measured"`` (the ratios of final eranks, each resample's own).
    """
    per = np.asarray(per_prompt)
    lo = min(firsts)
    per = per[lo:]
    P = per.shape[1]

    def finals(J: np.ndarray) -> np.ndarray:  # (L - lo, d, d) -> (len(firsts), 3)
        pairs = [both_controls(M, seed=lo + l) for l, M in enumerate(J)]
        mats = (J, np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs]))
        return np.array([[_final_only(M[f - lo:])[-1] for M in mats] for f in firsts])  # one SVD per product

    pt = finals(per.astype(np.float64).mean(1))
    bt = (np.stack([f for means in resampled_chunks(per, bootstrap_weights(P, n_boot, seed))
                    for f in map_matrices(finals, means)]) if n_boot else pt[None])
    out = {}
    for i, f in enumerate(firsts):
        out[f] = {name: interval(pt[i, j], bt[:, i, j]) for j, name in enumerate(CONTROLS)}
        out[f]["Schur-normal / as measured"] = interval(pt[i, 1] / pt[i, 0], bt[:, i, 1] / bt[:, i, 0])
        out[f]["shuffled Schur / as measured"] = interval(pt[i, 2] / pt[i, 0], bt[:, i, 2] / bt[:, i, 0])
    return out
