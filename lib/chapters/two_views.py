"""Chapter 6's per-model measurements [ours]: both views of every layer, the in-context Jacobian, steering.

:func:`analyse` runs one model over one prompt set and returns per-layer tables for the chapter's six
results (the statistics themselves live in :mod:`lib.methods.bridge`). Protocol (chapter 4's): for each prompt,
one forward pass records the residual ``x = h_t[T]`` entering block ``t`` at the last token ``T``; the
single-token Jacobians at those ``x`` are averaged into ``J̄_t``; ``F_t = O_t V_t``. The token states of
γ/ρ are every content token of the same prompts (real forward pass, as chapter 3's "real" source).
Float64 for every eigen-, singular- and Schur decomposition; Jacobians in column convention.

The chapter runs eight models at once: :func:`analyse_twins` measures every model of a set of
:class:`lib.models.Twins` (one model per core) into a :class:`TwinViews`, whose ``table`` gives the long
tables the charts draw; :func:`context_twins`, :func:`perturbation_twins` and :func:`steering_twins` do the
same for sections 6.5–6.6. The per-section frames (:func:`share_both`, :func:`angle_summary`, :func:`rate_tests`,
:func:`rate_power`, :func:`gamma_summary`) and verdict rules (:data:`SHARE_MOST`, :func:`share_verdict`,
:func:`combined_verdict`, :data:`RATE_STRONG`) live here too. What the page shows of them lives in
:mod:`lib.page.two_views`: the charts, the numbers each section's prose states with its claim's verdict (a
:class:`lib.page.two_views.Findings`) and the tables with the reader's column labels (``readable``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from lib import stats
from lib.jacobians import sweep as jac
from lib.linalg import nonnormal as nn
from lib.linalg import spectra
from lib.linalg.cumulative import erank_from_singular_values
from lib.methods import alignment as als
from lib.methods import bridge as br
from lib.methods import steering
from lib.methods.topology import power_qualified
from lib.parallel import map_matrices
from lib.stats import benjamini_hochberg, bootstrap_weights

if TYPE_CHECKING:
    from lib.models import SpectralModel, Twins

__all__ = ["ANGLE_DRAWS", "ANGLE_TARGETS", "CONTEXT_PATHS", "GAMMA_VIEWS", "RATE_EFFECTS", "RATE_PREDICTED",
           "RATE_PROPERTIES", "RATE_STRONG", "SHARE_MOST", "SHARE_PROTOCOLS", "STEERING_QUANTITIES", "JView",
           "ContextPass", "ModelViews", "TwinViews", "analyse", "analyse_twins", "angle_summary", "angle_verdict",
           "TWO_VIEWS_CPU_RATE", "TWO_VIEWS_MEMORY_FACTOR", "TWO_VIEWS_SPEEDUP", "autodiff_check",
           "combined_verdict", "cpu_decoder_work", "context_decomposition", "context_jacobians",
           "context_table", "context_twins", "context_verdict", "design_label", "gamma_summary",
           "gamma_verdict", "rate_power",
           "rate_tests", "rate_verdict", "share_both", "share_table", "share_verdict", "share_weights",
           "steering_saturating", "steering_twins", "steering_views",
           "steering_views_at", "twin_label"]

ANGLE_TARGETS: tuple[str, ...] = ("eigenvectors of J̄", "left singular vectors", "right singular vectors",
                                  "funnel image")
"""The subspaces of the Jacobian view that ``v₁(F_t)`` is compared with (result 2)."""


@dataclass
class ModelViews:
    """Everything chapter 6 measures on one model (one row per layer in each table; ``layer`` is 1-based).

    Attributes:
        label, key, series: the model's label, its family key ("MiniLM", "decoder") and the series
            ("trained", "random 0", ...). layout: "pre-norm" or "post-norm". d: the width. n_prompts: P.
        share: result 1, single token (:func:`share_table`): ``attn`` = ⟨J̄_F, Ū⟩/‖Ū‖² (the attention path's
            projection share of the mean update) and ``avoid`` = 1 − ``attn`` (the path that avoids F), each with
            ``_lo``/``_hi`` (bootstrap over prompts); their sizes ``size_attn`` = ‖J̄_F‖/‖Ū‖ and ``size_avoid``;
            ``med``/``med_lo``/``med_hi`` (the median of ``attn`` over layers); ``sigma_size`` = σ₁(J̄_F)/σ₁(Ū).
        angles: result 2, long format: ``target``, ``k`` (its dimension), ``k_F``, ``theta`` (degrees, the
            smallest principal angle), ``chance_lo`` (5% quantile of the null, degrees), ``p``, ``q`` (BH per target).
        rates: result 3: ``gap_ratio`` of F, ``radius_J`` = ρ(J̄), ``delta_H`` = dep(Ū)/‖Ū‖_F
            (:func:`lib.methods.bridge.relative_departure`), ``erank`` of J̄.
        gamma: result 4, long format: ``view`` ("Fₜ: v₁" or "J̄ₜ: v₁"), ``k``, ``gamma``, ``gamma_lo``,
            ``gamma_hi``, ``chance`` (baseline_subspace(d, k)), ``rho``, ``rho_lo``, ``rho_hi``, the nulls'
            95% quantiles ``gamma_null_hi``, ``rho_null_hi`` (random k-dim subspaces), p-values ``p_gamma``,
            ``p_rho`` and their Benjamini–Hochberg ``q_*`` across layers.
        J_first: ``(L, n, d, d)`` single-token Jacobians of the first ``n`` prompts (result 5), kept in the
            model's dtype (float32: they are computed in it, so nothing is lost; half the memory of float64).
        Jbar, F: ``(L, d, d)``. eb_F: :class:`lib.methods.alignment.EigenBases` of F; jv: :class:`JView` of J̄.
        eig_J: per layer, :func:`lib.methods.bridge.sorted_eig` of ``J̄_t`` (reused by :func:`context_table`).
    """

    label: str
    key: str
    series: str
    layout: str
    d: int
    n_prompts: int
    share: pd.DataFrame
    angles: pd.DataFrame
    rates: pd.DataFrame
    gamma: pd.DataFrame
    Jbar: np.ndarray
    F: np.ndarray
    eb_F: als.EigenBases
    jv: JView
    J_first: np.ndarray
    states: list = field(repr=False, default_factory=list)
    specials: list = field(repr=False, default_factory=list)
    eig_J: list = field(repr=False, default_factory=list)

    def tag(self, df: pd.DataFrame) -> pd.DataFrame:
        """``df`` with ``model`` (the family key), ``series`` and ``random`` columns added."""
        return df.assign(model=self.key, series=self.series, random=self.series != "trained")


ANGLE_DRAWS = 2000
"""Draws of each chance distribution of principal angles (result 2); cached per ``(d, p, q)``."""

_NULL_CACHE: dict[tuple[int, int, int, int], np.ndarray] = {}


def _angle_null(d: int, p: int, q: int, m: int) -> np.ndarray:
    key = (d, p, q, m)
    if key not in _NULL_CACHE:
        _NULL_CACHE[key] = np.degrees(br.angle_null(d, p, q, m=m, seed=d + 7 * p + 13 * q))
    return _NULL_CACHE[key]


@dataclass(frozen=True)
class JView:
    """The Jacobian view's leading directions per layer (padded like :class:`lib.methods.alignment.EigenBases`).

    Attributes:
        v1: ``(L, d, 2)`` the leading eigen-direction of ``J̄_t`` (a plane for a complex pair); k1: ``(L,)``.
        targets: for each name of :data:`ANGLE_TARGETS`, the ``L`` bases ``(d, k or k+1)``.
    """

    v1: np.ndarray
    k1: np.ndarray
    targets: dict[str, list[np.ndarray]]


def _angle_table(eb_F: als.EigenBases, jv: JView, m_null: int) -> pd.DataFrame:
    d = eb_F.v1.shape[1]
    rows = []
    for target, bases in jv.targets.items():
        for t, B in enumerate(bases):
            kF = int(eb_F.k1[t])
            theta = float(np.degrees(br.principal_angles(eb_F.v1[t][:, :kF], B)[0]))
            null = _angle_null(d, kF, B.shape[1], m_null)
            rows.append({"layer": t + 1, "target": target, "k": B.shape[1], "k_F": kF, "theta": theta,
                         "chance_lo": float(np.quantile(null, 0.05)), "chance_median": float(np.median(null)),
                         "p": float(br.empirical_p(theta, null))})
    df = pd.DataFrame(rows)
    df["q"] = np.nan
    for _, idx in df.groupby("target").groups.items():
        df.loc[idx, "q"] = benjamini_hochberg(df.loc[idx, "p"].to_numpy())
    return df


def _gamma_table(ts: als.TokenStates, bases: dict[str, tuple[np.ndarray, np.ndarray]], *, n_boot: int, m_null: int,
                 seed: int) -> pd.DataFrame:
    frames = []
    for view, (B, k) in bases.items():
        res = als.gamma_rho(ts, B, n_boot=n_boot, seed=seed)
        g0, r0 = als.null_draws(ts, B, m=m_null, seed=seed)  # random subspaces of each layer's own k
        res = res.assign(view=view, k=k, chance=als.chance_levels(ts.d, k),
                         gamma_null_hi=np.quantile(g0, 0.95, axis=1), rho_null_hi=np.quantile(r0, 0.95, axis=1),
                         p_gamma=stats.empirical_p(res.gamma.to_numpy(), g0), p_rho=stats.empirical_p(res.rho.to_numpy(), r0))
        res["q_gamma"] = benjamini_hochberg(res.p_gamma.to_numpy())
        res["q_rho"] = benjamini_hochberg(res.p_rho.to_numpy())
        frames.append(res)
    return pd.concat(frames, ignore_index=True)


def share_weights(n: int, n_boot: int, seed: int = 0) -> np.ndarray:
    """``(n_boot + 1, n)`` weights for :func:`lib.methods.bridge.resampled_shares`: row 0 the mean (``1/n``), then
    ``n_boot`` prompt-bootstrap resamples (:func:`lib.stats.bootstrap_weights`)."""
    return np.vstack([np.full(n, 1.0 / n), bootstrap_weights(n, n_boot, seed)])


def share_table(boots: Sequence[Mapping[str, np.ndarray]], level: float = 0.95) -> pd.DataFrame:
    """Result 1's per-layer table from :func:`lib.methods.bridge.resampled_shares` of every layer.

    Every layer's arrays must come from the same weights (:func:`share_weights`: row 0 the estimate, then
    the resamples), so that a statistic over layers is resampled jointly: ``med`` is the median over layers
    of the ``attn`` share, with ``med_lo``/``med_hi`` its percentile interval at ``level``.

    Returns:
        one row per layer (``layer`` 1-based): for each array name ``c`` of ``boots``, ``c`` (the estimate)
        and ``c_lo``/``c_hi``; and ``med``, ``med_lo``, ``med_hi`` (the same on every row).
    """
    a = (1 - level) / 2
    rows = []
    for t, b in enumerate(boots):
        row: dict[str, float] = {"layer": t + 1}
        for name, v in b.items():
            lo, hi = np.quantile(v[1:], [a, 1 - a])
            row.update({name: float(v[0]), f"{name}_lo": float(lo), f"{name}_hi": float(hi)})
        rows.append(row)
    med = np.median(np.stack([b["attn"] for b in boots]), axis=0)  # (B + 1,): per resample, over layers
    lo, hi = np.quantile(med[1:], [a, 1 - a])
    return pd.DataFrame(rows).assign(med=float(med[0]), med_lo=float(lo), med_hi=float(hi))


def analyse(model: Any, texts: Sequence[str], *, key: str, series: str, k: int = 8, n_first: int = 2,
            n_boot: int = 200, m_null: int = 1000, seed: int = 0) -> ModelViews:
    """Both views of every layer of ``model`` on ``texts`` (results 1–4; the Jacobians for result 5).

    Per layer: one float64 eig of ``F_t`` (:func:`lib.methods.alignment.eigen_bases`), one eig and one SVD of
    ``J̄_t``, one SVD of the update (pre-norm), of ``J̄_F`` and of the cumulative product.

    Args:
        key, series: names for the tables ("MiniLM", "trained").
        k: dimension of the Jacobian-view subspaces of result 2 (top-k eigen-/singular/funnel directions).
        n_first: how many prompts keep their per-prompt Jacobians (for the in-context comparison).
        n_boot: bootstrap resamples over prompts. m_null: random subspaces per γ/ρ null (result 4); the angle
            nulls of result 2 use :data:`ANGLE_DRAWS`.
    """
    X, states = jac.residual_inputs(model, texts, batched=True)  # one padded pass per 64 prompts
    L, d = model.n_layers, model.d_model
    F = spectra.as_float64(model.layer_matrices())
    lay = br.layout(model)
    ref = br.reference(lay, d)
    Jbar = np.zeros((L, d, d))
    dtype = torch.empty(0, dtype=next(model.hf_model.parameters()).dtype).numpy().dtype  # exact: J is computed in it
    J_first = np.zeros((L, min(n_first, len(texts)), d, d), dtype=dtype)
    v1, k1 = np.zeros((L, d, 2)), np.zeros(L, dtype=int)
    targets: dict[str, list[np.ndarray]] = {t: [] for t in ANGLE_TARGETS}
    rate_rows = []
    W_share = share_weights(len(texts), n_boot, seed)  # the same resamples of the prompts for every layer
    shares, sigma_F = [], []
    for t in range(L):
        dec = br.decompose(model, t, X[t])
        shares.append(br.resampled_shares(dec.update, {"attn": dec.J_F, "avoid": {"update": 1, "attn": -1}}, W_share))
        Jbar[t], JF = dec.J.mean(0), dec.J_F.mean(0)
        sigma_F.append(np.linalg.norm(JF, 2))
        J_first[t] = dec.J[: J_first.shape[1]]
        del dec
    # the float64 eigen- and singular decompositions of every layer, one layer per core (lib.parallel)
    eigs = map_matrices(br.sorted_eig, Jbar)
    svds = map_matrices(np.linalg.svd, Jbar)
    P = np.eye(d)
    sigma_size = []
    for t, (eig, svd) in enumerate(zip(eigs, svds)):
        U = Jbar[t] - ref
        s_U = svd[1][0] if lay == "post-norm" else np.linalg.norm(U, 2)
        sigma_size.append(sigma_F[t] / s_U)
        rate_rows.append({"layer": t + 1, "radius_J": float(np.abs(eig[0][0])),
                          "delta_H": br.relative_departure(U, eig[0] - np.diag(ref)),
                          "erank": float(erank_from_singular_values(torch.from_numpy(svd[1])))})
        B1 = br.eigen_subspace(Jbar[t], 1, eig=eig)
        k1[t] = B1.shape[1]
        v1[t, :, : k1[t]] = B1
        P = Jbar[t] @ P
        P = P / np.linalg.norm(P)
        targets[ANGLE_TARGETS[0]].append(br.eigen_subspace(Jbar[t], k, eig=eig))
        targets[ANGLE_TARGETS[1]].append(br.singular_subspace(Jbar[t], k, "left", svd=svd))
        targets[ANGLE_TARGETS[2]].append(br.singular_subspace(Jbar[t], k, "right", svd=svd))
        targets[ANGLE_TARGETS[3]].append(br.singular_subspace(P, k, "left"))
    eb_F = als.eigen_bases(F)
    jv = JView(v1, k1, targets)
    rates = pd.DataFrame(rate_rows).assign(gap_ratio=eb_F.gap_ratio, depth=lambda f: f.layer / L)
    specials = [model.encode(s)["special"] for s in texts]
    ts = als.TokenStates.from_trajectories(states, specials, label=model.label).select("content")
    gamma = _gamma_table(ts, {"Fₜ: v₁": (eb_F.v1, eb_F.k1), "J̄ₜ: v₁": (jv.v1, jv.k1)}, n_boot=n_boot,
                         m_null=m_null, seed=seed)
    return ModelViews(
        label=model.label, key=key, series=series, layout=lay, d=d, n_prompts=len(texts),
        share=share_table(shares).assign(sigma_size=sigma_size), angles=_angle_table(eb_F, jv, ANGLE_DRAWS), rates=rates, gamma=gamma,
        Jbar=Jbar, F=F, eb_F=eb_F, jv=jv, J_first=J_first, states=states, specials=specials, eig_J=list(eigs),
    )


# -- result 5: one token or the whole context ------------------------------------------------------------------
def context_jacobians(model: Any, views: ModelViews, texts: Sequence[str], n: int | None = None) -> np.ndarray:
    """:func:`lib.jacobians.sweep.in_context_stack` at the last token of the first ``n`` prompts of ``views``
    (default: all of ``views.J_first``): ``(L, n, d, d)``, at the same states as the single-token
    ``views.J_first[:, :n]``."""
    kept = views.J_first.shape[1]
    n = kept if n is None else n
    if not 1 <= n <= kept:
        raise ValueError(f"n must be in 1..{kept} (the prompts whose single-token Jacobians were kept), got {n}")
    return jac.in_context_stack(model, views.states[:n], [jac.last_token_index(model, s) for s in texts[:n]])


CONTEXT_PATHS: tuple[str, ...] = ("attn", "value", "softmax", "avoid")
"""The in-context paths whose projection shares add up to 1 (:func:`context_decomposition`)."""


@dataclass(frozen=True)
class ContextPass:
    """What section 6.5 keeps of the in-context Jacobians of one model (:func:`context_decomposition`): the
    per-prompt Jacobians are reduced layer by layer and never held for every layer at once.

    Attributes:
        mean: ``(L, d, d)`` the in-context mean Jacobians ``J̄_ctx`` (float64).
        rel: ``(L, n)`` per layer and prompt, ‖J_ctx − J_single‖_F / ‖J_ctx − R‖_F (section 6.5's difference).
    """

    mean: np.ndarray
    rel: np.ndarray


def context_decomposition(model: Any, views: ModelViews, texts: Sequence[str], n: int | None = None, *,
                          n_boot: int = 200, seed: int = 0) -> tuple[ContextPass, pd.DataFrame]:
    """The in-context Jacobians of :func:`context_jacobians` and result 1 in context, in one pass.

    Per layer, :func:`lib.methods.bridge.decompose_in_context` at the last token of the first ``n`` prompts. In a
    sentence the attention core's Jacobian ``A`` takes the place of ``F``; its value path
    ``Σ_h a_{T,h} O_h V_h`` is the part that runs through the token's own value (``F`` with each head
    weighted by the token's attention to itself), the rest the softmax's query and key paths. Each layer's
    ``n`` Jacobians are reduced at once (their mean, their difference from the single-token ones, the Gram
    matrices of the shares), so memory holds one layer's, not ``L × n``.

    Returns:
        ``(ctx, share)``: ``ctx`` a :class:`ContextPass` (the means of :func:`context_jacobians`' Jacobians, bit
        for bit, and the per-prompt relative differences), and the :func:`share_table` of the paths
        :data:`CONTEXT_PATHS`: ``attn`` (through ``A``), ``value``, ``softmax`` (``attn = value + softmax``) and
        ``avoid`` (the path that avoids attention), whose shares add up to 1, with their sizes ``size_*``.
    """
    kept = views.J_first.shape[1]
    n = kept if n is None else n
    if not 1 <= n <= kept:
        raise ValueError(f"n must be in 1..{kept} (the prompts whose single-token Jacobians were kept), got {n}")
    states = views.states[:n]
    positions = [jac.last_token_index(model, s) for s in texts[:n]]
    L, d = model.n_layers, model.d_model
    ref = br.reference(views.layout, d)
    mean, rel = np.zeros((L, d, d)), np.zeros((L, n))
    W = share_weights(n, n_boot, seed)
    # softmax = attn − value and avoid = update − attn: combinations, not formed (bridge.resampled_shares)
    paths = {"attn": None, "value": None, "softmax": {"attn": 1, "value": -1}, "avoid": {"update": 1, "attn": -1}}
    boots = []
    for t in range(L):
        dec = br.decompose_in_context(model, t, [H[t] for H in states], positions)
        mean[t] = dec.J.mean(0)
        rel[t] = (np.linalg.norm(dec.J - views.J_first[t, :n], axis=(1, 2))
                  / np.linalg.norm(dec.J - ref, axis=(1, 2)))
        boots.append(br.resampled_shares(dec.update, {**paths, "attn": dec.J_F, "value": dec.J_value}, W))
        del dec
    return ContextPass(mean, rel), share_table(boots)


def context_table(views: ModelViews, ctx: ContextPass, k: int = 8) -> pd.DataFrame:
    """Per layer: ``rel_diff`` (median over prompts of ‖J_ctx − J_single‖_F / ‖update of J_ctx‖_F, with its
    min and max, and ``rel_first``, its value for the first prompt), spectral radii, complex fractions and
    the result-2 angle (top-k eigenvectors) of both means (the single-token one's eigendecomposition is
    ``views.eig_J`` when ``ctx`` ran on every prompt)."""
    L, n = ctx.rel.shape
    single = views.J_first[:, :n].mean(1, dtype=np.float64)  # (L, d, d)
    every = n == views.n_prompts and len(views.eig_J) == L
    rows = []
    for t in range(L):
        rel = ctx.rel[t]
        ls, Vs = views.eig_J[t] if every else br.sorted_eig(single[t])
        lc, Vc = br.sorted_eig(ctx.mean[t])
        kF = int(views.eb_F.k1[t])
        vF = views.eb_F.v1[t][:, :kF]
        theta = {name: float(np.degrees(br.principal_angles(vF, br.eigen_subspace(None, k, eig=e))[0]))
                 for name, e in (("single", (ls, Vs)), ("ctx", (lc, Vc)))}
        rows.append({"layer": t + 1, "rel_diff": float(np.median(rel)), "rel_min": float(rel.min()),
                     "rel_max": float(rel.max()), "rel_first": float(rel[0]),
                     "radius_single": float(np.abs(ls[0])), "radius_ctx": float(np.abs(lc[0])),
                     "fC_single": nn.complex_fraction(ls), "fC_ctx": nn.complex_fraction(lc),
                     "theta_single": theta["single"], "theta_ctx": theta["ctx"]})
    out = pd.DataFrame(rows)
    out.attrs["erank_single"] = _funnel_erank(single)
    out.attrs["erank_ctx"] = _funnel_erank(ctx.mean)
    return out


def _funnel_erank(Js: np.ndarray) -> float:
    """Effective rank of the whole funnel ``J_{L−1} ⋯ J_0`` of ``Js`` ``(L, d, d)``: the last entry of
    :func:`lib.linalg.nonnormal.cumulative_product` (no truncation), rescaled to unit Frobenius norm at every step
    as there, with one singular-value decomposition (values only) at the end instead of one per step."""
    P = np.eye(Js.shape[-1])
    for J in Js:
        P = J @ P
        P /= np.linalg.norm(P)
    return nn.effective_rank(P)


# -- result 6: steering through both lenses -----------------------------------------------------------------------
def steering_views(model: Any, u: Any, alphas: Sequence[float], texts: Sequence[str]) -> pd.DataFrame:
    """:func:`steering_views_at` on ``texts`` (one forward pass each, before any edit)."""
    X, states = jac.residual_inputs(model, texts)
    return steering_views_at(model, u, alphas, X[model.n_layers - 1], states)


def steering_views_at(model: Any, u: Any, alphas: Sequence[float], X_last: Any, states: Sequence[Any], *,
                      n_boot: int = 200, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """The chapter-5 O-edit of the last layer seen by both views, for each relative strength ``alpha``.

    The edit changes only the last block, so its inputs do not depend on it: ``X_last`` ``(P, d)`` are the
    last-token inputs of the last block (where ``J̄_L`` is taken) and ``states`` the ``P`` per-sequence
    residual streams ``(L+1, n, d)`` (the same prompts) whose entry ``L−1`` is run through the edited block.

    Per ``alpha`` (0: no edit): ``spectral`` = ``|⟨v₁(F_L′), u⟩|`` (planar for a complex pair: the F view's
    promise); ``J_sv`` = ``|⟨s₁, u⟩|`` with ``s₁`` the top left singular vector of the mean update ``Ū_L``;
    ``J_write`` = ``a(W̄ u, u)`` with ``W̄`` the mean of ``J_mlp L``
    (:attr:`lib.methods.bridge.Decomposition.write`): where the block's output moves when the attention core's
    output moves along ``u``, the Jacobian view's prediction of the direction the edit writes (its value at
    ``alpha = 0`` uses only the unedited block); ``share`` = ‖J̄_F‖/‖Ū_L‖; ``tokens`` = the mean ``a(x, u)``
    over every token leaving the last block (chapter 5's real-pass measure, before any final norm).

    ``J_write``, ``share`` and ``tokens`` are means over prompts (or a function of them), so each gets a
    prompt-bootstrap percentile interval at ``level`` (columns ``<name>_lo``, ``<name>_hi``; ``n_boot``
    resamples of the ``P`` prompts, :func:`lib.stats.bootstrap_weights`, the same for every
    ``alpha`` and for every model with the same ``P`` and ``seed``). ``spectral`` does not depend on the
    prompts; ``J_sv`` (a decomposition of a mean per resample) is a point value.
    """
    t = model.n_layers - 1
    d = model.d_model
    u = steering.as_direction(u, d).vector
    radius = float(spectra.spectral_radius(model.layer(t).attention.layer_matrix()))
    inputs = [torch.as_tensor(H[t]) for H in states]
    P = len(inputs)
    if len(X_last) != P:
        raise ValueError(f"X_last has {len(X_last)} prompts and states {P}: they must be the same prompts")
    W = bootstrap_weights(P, n_boot, seed)  # (B, P)
    a = (1 - level) / 2

    def band(name: str, values: np.ndarray) -> dict[str, float]:
        lo, hi = np.quantile(values, [a, 1 - a])
        return {f"{name}_lo": float(lo), f"{name}_hi": float(hi)}

    rows = []
    for alpha in alphas:
        with steering.maybe_steer(model, u, alpha, radius=radius), torch.no_grad():
            rep = steering.spectral_report(model.layer(t).attention.layer_matrix(), u)
            dec = br.decompose(model, t, X_last, write=True)
            outs = [spectra.as_float64(model.layer(t)(H)) for H in inputs]
        Ubar = dec.update.mean(0)
        s1 = np.linalg.svd(Ubar)[0][:, 0]
        Wu_p = dec.write @ u  # (P, d): per prompt, where the block writes a push along u
        Wu = np.vstack([Wu_p.mean(0), W @ Wu_p])  # row 0: all prompts; then one row per resample
        write = np.abs(Wu @ u) / np.linalg.norm(Wu, axis=1)
        Wm = np.vstack([np.full(P, 1.0 / P), W])  # row 0: all prompts; then one row per resample
        share = br.resampled_norms(dec.J_F, Wm) / br.resampled_norms(dec.update, Wm)
        sums = np.array([np.sum(np.abs(o @ u) / np.linalg.norm(o, axis=1)) for o in outs])  # per prompt
        counts = np.array([len(o) for o in outs], dtype=np.float64)
        tokens = np.concatenate([[sums.sum() / counts.sum()], (W @ sums) / (W @ counts)])  # pooled over tokens
        rows.append({"alpha": float(alpha), "spectral": rep["spectral_alignment"], "J_sv": float(abs(s1 @ u)),
                     "J_write": float(write[0]), **band("J_write", write[1:]),
                     "share": float(share[0]), **band("share", share[1:]),
                     "tokens": float(tokens[0]), **band("tokens", tokens[1:])})
    return pd.DataFrame(rows)


# -- the chapter's eight models at once ----------------------------------------------------------------------------
@dataclass(repr=False, eq=False)
class TwinViews(Mapping):
    """:class:`ModelViews` of several models and their random-init twins, keyed by ``(key, series)``.

    ``key`` names a model family ("MiniLM", "decoder": the keys of ``twins``), ``series`` is
    :meth:`lib.models.Twins.series` of the model ("trained", "random init, seed 0", ...): model identity
    comes from the :class:`lib.models.Twins`, never from parsing labels.

    Attributes:
        twins: per key, the trained model and its twins. texts: per key, the prompts every model of that
            key ran on. views: the measurements. k: the dimension of the Jacobian-view subspaces.
    """

    twins: dict[str, Twins]
    texts: dict[str, list[str]]
    views: dict[tuple[str, str], ModelViews]
    k: int

    def __getitem__(self, key: tuple[str, str]) -> ModelViews:
        return self.views[key]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self.views)

    def __len__(self) -> int:
        return len(self.views)

    def __repr__(self) -> str:
        parts = [f"{key}: {pair.name} trained + random init seeds {list(pair.seeds)}"
                 for key, pair in self.twins.items()]
        prompts = ", ".join(f"{len(t)} {key}" for key, t in self.texts.items())
        return f"TwinViews({'; '.join(parts)}; prompts: {prompts}; K = {self.k}; {len(self)} models measured)"

    def model(self, key: str, series: str = "trained") -> SpectralModel:
        """The model of family ``key`` and ``series``; ``KeyError`` naming the series there are."""
        pair = self.twins[key]
        for m in pair:
            if pair.series(m) == series:
                return m
        raise KeyError(f"{key!r} has no series {series!r}: {[pair.series(m) for m in pair]}")

    def table(self, attr: str) -> pd.DataFrame:
        """One long table of a per-model attribute (``"share"``, ``"angles"``, ...) over every model, tagged
        with ``model`` (the key), ``series`` and ``random`` (:meth:`ModelViews.tag`)."""
        return pd.concat([v.tag(getattr(v, attr)) for v in self.views.values()], ignore_index=True)

    @property
    def description(self) -> str:
        """``"all-MiniLM-L6-v2 and book-decoder, trained and 3 random-init twins each"``."""
        names = " and ".join(p.name for p in self.twins.values())
        counts = sorted({len(p.twins) for p in self.twins.values()})
        return f"{names}, trained and {'/'.join(map(str, counts))} random-init twins each"


def analyse_twins(twins: Mapping[str, Twins], texts: Mapping[str, Sequence[str]], *, k: int = 8,
                  m_null: int = 1000, n_first: int | None = None) -> TwinViews:
    """:func:`analyse` of every model of every :class:`lib.models.Twins`, one model per core.

    Args:
        twins: per key ("MiniLM"), a trained model and its random-init twins.
        texts: per key, the prompts (the same for a model and its twins).
        k, m_null: as :func:`analyse`. n_first: prompts whose single-token Jacobians are kept (default: all,
            for the in-context comparison of :func:`context_twins`).

    The models run side by side (:func:`lib.parallel.map_matrices`); each is computed as in a serial loop
    (closed-form Jacobians, no forward-mode AD), so the results do not depend on the number of cores.
    """
    items = [((key, pair.series(m)), m) for key, pair in twins.items() for m in pair]

    def one(item: tuple[tuple[str, str], Any]) -> ModelViews:
        (key, series), m = item
        ts = list(texts[key])
        return analyse(m, ts, key=key, series=series, k=k, m_null=m_null,
                       n_first=len(ts) if n_first is None else n_first)

    views = dict(zip([name for name, _ in items], map_matrices(one, items)))
    return TwinViews(dict(twins), {key: list(texts[key]) for key in twins}, views, k)


def autodiff_check(views: TwinViews, n_prompts: int = 8, layers: Sequence[int] | None = None) -> pd.DataFrame:
    """The closed form of section 6.1 against autodiff of the real block, for each trained model.

    Every block (or ``layers``, 0-based) at the last token of the first ``n_prompts`` prompts (the states of
    section 6.0's pass), one model per core. One row per model: ``layout``, ``layers``, ``prompts`` and the
    largest over the layers of the relative Frobenius difference ‖J − J_autodiff‖/‖J_autodiff‖ over the
    stacked prompts.
    """
    def one(key: str) -> dict[str, Any]:
        m, v = views.model(key), views[key, "trained"]
        texts = views.texts[key][:n_prompts]
        ts = range(m.n_layers) if layers is None else layers
        worst = 0.0
        for t in ts:
            X = torch.stack([h[t, jac.last_token_index(m, s)] for h, s in zip(v.states, texts)])
            J = br.decompose(m, t, X).J
            J_ad = jac.layer_jacobians(m, t, X, method="autodiff").numpy()
            worst = max(worst, float(np.linalg.norm(J - J_ad) / np.linalg.norm(J_ad)))
        return {"model": m.label, "layout": br.layout(m), "layers": len(ts), "prompts": len(texts),
                "largest relative difference from autodiff": worst}

    return pd.DataFrame(map_matrices(one, list(views.twins)))


# -- each section's frames and verdict rules (what the prose says of them: lib.page.two_views) -------------------
def twin_label(df: pd.DataFrame) -> str:
    """``"random init (3 seeds)"``: the pooled twins of a table with ``random`` and ``series`` columns."""
    return f"random init ({df[df.random].series.nunique()} seeds)"


SHARE_MOST = 0.5
"""Result 1's threshold [ours]: the attention path carries *most* of the update when its projection share,
median over layers, is above one half with its whole 95% interval."""


SHARE_PROTOCOLS: tuple[str, str] = ("single token", "in context")
"""The two protocols of result 1 (the ``protocol`` column of :func:`share_both`)."""


def share_both(share: pd.DataFrame, share_ctx: pd.DataFrame) -> pd.DataFrame:
    """Result 1's two tables in one long table with a ``protocol`` column (:data:`SHARE_PROTOCOLS`).

    On a single token the attention core is ``F`` itself, so the whole attention path is the value path:
    ``value`` = ``attn`` and ``softmax`` = 0 there; ``sigma_size`` exists only on a single token (NaN in
    context).
    """
    single = share.assign(protocol=SHARE_PROTOCOLS[0], value=share.attn, softmax=0.0)
    return pd.concat([single, share_ctx.assign(protocol=SHARE_PROTOCOLS[1])], ignore_index=True)


def share_verdict(trained: pd.Series, twins: pd.DataFrame) -> str:
    """One model's verdict on "the attention path carries most of the update" (claim TV1, one protocol).

    ``trained``: a row of the share table (``med_lo`` the lower end of the median's interval); ``twins``: one
    row per twin. "not reproduced" unless the trained interval lies above :data:`SHARE_MOST`; then "not
    specific to training" if every twin's does too, else "reproduced".
    """
    if not trained.med_lo > SHARE_MOST:
        return "not reproduced"
    return "not specific to training" if bool((twins.med_lo > SHARE_MOST).all()) else "reproduced"


def combined_verdict(verdicts: Sequence[str]) -> str:
    """One Results-page verdict from several (per model and protocol), never an AND [ours]: all equal, that
    one; some "reproduced" among others, "partly reproduced"; otherwise "not specific to training" if any
    says so (the effect is seen, but as strongly at random init), else "not reproduced"."""
    vs = set(verdicts)
    if not vs:
        raise ValueError("no verdicts to combine")
    if len(vs) == 1:
        return vs.pop()
    if "reproduced" in vs:
        return "partly reproduced"
    return "not specific to training" if "not specific to training" in vs else "not reproduced"


def angle_summary(angles: pd.DataFrame) -> pd.DataFrame:
    """Section 6.2 per (model, Jacobian subspace, trained or pooled twins): ``layers_aligned`` (closer than
    chance at FDR 5%), ``n`` (layers, over every seed), ``theta_min``, ``theta_median`` and ``chance_5pct``
    (median of the per-layer 5% chance quantiles), all in degrees."""
    s = (angles.assign(aligned=angles.q < 0.05)
         .groupby(["model", "target", "random"], as_index=False)
         .agg(layers_aligned=("aligned", "sum"), n=("aligned", "size"), theta_min=("theta", "min"),
              theta_median=("theta", "median"), chance_5pct=("chance_lo", "median")))
    s["layers_aligned"] = s.layers_aligned.astype(int)
    s = s.assign(series=np.where(s.random, twin_label(angles), "trained")).drop(columns="random")
    return s[["model", "target", "series", "layers_aligned", "n", "theta_min", "theta_median", "chance_5pct"]]


def angle_verdict(frac_trained: float, frac_twins: float) -> str:
    """Claim TV2's rule [ours] from the fractions of layers where ``v₁(F_t)`` is closer than chance to at least
    one of the Jacobian's subspaces at FDR 5% (one test per layer, :func:`lib.chapters.two_views_angles.angle_layers`),
    trained and pooled twins: "not reproduced" if under one half of the trained layers are, "reproduced" if
    the trained fraction beats the twins' by more than 0.2, else "not specific to training"."""
    return ("not reproduced" if frac_trained < 0.5 else "reproduced" if frac_trained > frac_twins + 0.2
            else "not specific to training")


RATE_PROPERTIES: tuple[tuple[str, str], ...] = (("radius_J", "ρ(J̄)"), ("delta_H", "δ_H"), ("erank", "erank(J̄)"))
"""The properties of ``J̄_t`` that section 6.3 tests against ``F_t``'s gap ratio (column, label)."""


def rate_tests(rates: pd.DataFrame) -> pd.DataFrame:
    """Section 6.3: does ``F_t``'s gap ratio rank the layers like a property of ``J̄_t``?

    For each model key, trained and random init, and each of :data:`RATE_PROPERTIES`: the within-variant
    Spearman test of :func:`lib.methods.bridge.stratified_spearman` (variants = series; seeds ``0, 1, ...`` in row
    order), then Benjamini–Hochberg across all rows (``q``). Columns: ``model``, ``series`` ("trained" or
    "random init"), ``J̄ property``, ``variants``, ``r``, ``p``, ``null_lo``, ``null_hi``, ``lo``, ``hi``, ``q``.
    """
    kind = np.where(rates.random, "random init", "trained")
    rows = []
    for key in pd.unique(rates.model):
        for k in ("trained", "random init"):
            s = rates[(rates.model == key) & (kind == k)]
            for col, name in RATE_PROPERTIES:
                r = br.stratified_spearman(s.gap_ratio, s[col], s.series, seed=len(rows))
                rows.append({"model": key, "series": k, "J̄ property": name, "variants": s.series.nunique(), **r})
    rt = pd.DataFrame(rows)
    rt["q"] = benjamini_hochberg(rt.p.to_numpy())
    return rt


RATE_PREDICTED: dict[str, int] = {"ρ(J̄)": -1, "δ_H": -1, "erank(J̄)": 1}
"""The sign of the rank correlation with ``F_t``'s gap ratio that the power-method picture predicts: a small
gap ratio with a large spectral radius, a strong non-normality, a low effective rank."""

RATE_EFFECTS: tuple[float, ...] = (0.5, 0.7, 0.8, 0.9)
"""Planted Spearman correlations of section 6.3's power analysis."""

RATE_STRONG = 0.8
"""The effect the test must see for an absence to count [ours: a strong rank correlation, ρ = 0.8]."""


def design_label(n: int, variants: int) -> str:
    """``"6 layers × 3 variants"``: the ``design`` of a :func:`rate_power` row (``n`` layers per variant)."""
    return f"{n} layers × {variants} variant{'s' if variants > 1 else ''}"


def rate_power(rt: pd.DataFrame, layers: int, *, effects: Sequence[float] = RATE_EFFECTS, reps: int = 2000,
               seed: int = 0) -> pd.DataFrame:
    """Power of section 6.3's family of tests (:func:`rate_tests`: the same designs, Benjamini–Hochberg over
    all of them at 5%), by :func:`lib.methods.bridge.spearman_power`.

    Two scenarios per planted Spearman correlation ``effect``: ``power_all``, every test of the family
    carries it (the power-method picture in full); ``power_one``, only one test of that design does and
    the others are null. One row per (effect, design): ``effect``, ``design`` ("6 layers × 1 variant"),
    ``n``, ``variants``, ``power_all``, ``power_one`` and ``reps`` (replicates per effect).
    """
    designs = [(int(layers), int(v)) for v in rt.variants]
    every = br.spearman_power(designs, effects, reps=reps, seed=seed)
    rows = []
    for dg in sorted(set(designs)):
        i = designs.index(dg)
        one = br.spearman_power(designs, effects, planted=[i], reps=reps, seed=seed + 1)[:, i]
        for e, pa, po in zip(effects, every[:, i], one):
            rows.append({"effect": float(e), "design": design_label(*dg), "n": dg[0], "variants": dg[1],
                         "power_all": float(pa), "power_one": float(po), "reps": reps})
    return pd.DataFrame(rows)


def rate_verdict(n_significant: int, n_tests: int, power: pd.DataFrame, design: str) -> str:
    """Claim TV3's rule: "reproduced" if all ``n_tests`` trained tests of :func:`rate_tests` are significant at
    FDR 5%, "partly reproduced" if ``n_significant`` of them are; with none, "not reproduced" only if the
    trained ``design``'s power at :data:`RATE_STRONG` (every test planted; ``power`` from :func:`rate_power`)
    is at least 0.8, else "inconclusive (underpowered)" (:func:`lib.methods.topology.power_qualified`)."""
    strong = power[power.design == design]
    verdict = ("not reproduced" if n_significant == 0 else "partly reproduced" if n_significant < n_tests
               else "reproduced")
    return power_qualified(verdict, strong.effect, strong.power_all, at_r=RATE_STRONG)


GAMMA_VIEWS: tuple[str, str] = ("Fₜ: v₁", "J̄ₜ: v₁")
"""The two bases of section 6.4 (the ``view`` column of ``ModelViews.gamma``)."""


def gamma_summary(gam: pd.DataFrame) -> pd.DataFrame:
    """Section 6.4 per (model, trained or pooled twins, view): the range of γ_t over its chance level, the
    layers whose γ_t / ρ_t beat their null at FDR 5%, the range of ρ_t and the number of layers."""
    return (gam.assign(g_sig=gam.q_gamma < 0.05, r_sig=gam.q_rho < 0.05, ratio=gam.gamma / gam.chance,
                       series=np.where(gam.random, twin_label(gam), "trained"))
            .groupby(["model", "series", "view"], as_index=False)
            .agg(gamma_over_chance_min=("ratio", "min"), gamma_over_chance_max=("ratio", "max"),
                 gamma_above_null=("g_sig", "sum"), rho_min=("rho", "min"), rho_max=("rho", "max"),
                 rho_above_null=("r_sig", "sum"), layers=("layer", "size")))


def gamma_verdict(sig_F: int, sig_J: int, sig_J_twins: int, n_trained: int, n_twins: int) -> str:
    """Claim TV4's rule [ours] from the layers whose γ_t or ρ_t beats the random-subspace null at FDR 5%:
    "not reproduced" unless the J̄ view (``sig_J`` of the ``n_trained`` trained layers) is ahead of the F view
    (``sig_F``) by at least two layers (of the twelve); then "not specific to training" if the twins' J̄ view
    (``sig_J_twins`` of ``n_twins``) does as well in proportion, else "reproduced"."""
    if not sig_J >= sig_F + 2:
        return "not reproduced"
    return "not specific to training" if sig_J_twins / n_twins >= sig_J / n_trained else "reproduced"


def context_twins(views: TwinViews, n: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Section 6.5, and result 1 in context, for every model, one model per core (closed form, no
    forward-mode AD; :func:`context_decomposition`).

    Returns ``(ctx, funnel, share)``: ``ctx`` the :func:`context_table` of every model, tagged; ``funnel`` one
    row per model with ``prompts`` and the whole funnel's effective rank from the single-token and in-context
    mean Jacobians; ``share`` the in-context share table of every model, tagged.
    """
    def one(item: tuple[tuple[str, str], ModelViews]) -> tuple[pd.DataFrame, dict[str, Any], pd.DataFrame]:
        (key, series), v = item
        cp, share = context_decomposition(views.model(key, series), v, views.texts[key], n=n)
        ct = context_table(v, cp, k=views.k)
        return v.tag(ct), {"model": key, "series": series, "prompts": cp.rel.shape[1],
                           "funnel erank, single-token": ct.attrs["erank_single"],
                           "funnel erank, in-context": ct.attrs["erank_ctx"]}, v.tag(share)

    parts = map_matrices(one, list(views.items()))
    return (pd.concat([c for c, _, _ in parts], ignore_index=True), pd.DataFrame([a for _, a, _ in parts]),
            pd.concat([sh for _, _, sh in parts], ignore_index=True))


def context_verdict(rel_diff: pd.Series) -> str:
    """Claim TV5's rule [ours]: "reproduced" when the single-token Jacobian is close to the in-context one, the
    median of ``rel_diff`` (:func:`context_table`, over every model and layer) under 0.2, else "not
    reproduced"."""
    return "reproduced" if bool(rel_diff.median() < 0.2) else "not reproduced"


STEERING_QUANTITIES: dict[str, str] = {
    "spectral": "F view: |⟨v₁(F_L′), u⟩|", "J_sv": "J̄ view: |⟨s₁(Ū_L), u⟩|",
    "J_write": "J̄ view: a(W̄u, u), where the block writes u", "tokens": "tokens leaving block L: mean a(x, u)"}
"""The four numbers per edit of section 6.6: column of :func:`steering_views_at` → label."""


def steering_twins(views: TwinViews, words: Mapping[str, str], alphas: Sequence[float], n: int) -> pd.DataFrame:
    """:func:`steering_views_at` for every model on its first ``n`` prompts, one model per core.

    Each model steers towards its own embedding of ``words[key]`` (:func:`lib.methods.steering.word_direction`).
    Tagged with ``model``, ``random``, ``weights`` (the model's series: "trained", "random init, seed 0", ...)
    and ``series`` ("trained" or the pooled twins, "random init (3 seeds)").
    """
    def one(item: tuple[tuple[str, str], ModelViews]) -> pd.DataFrame:
        (key, series), v = item
        m = views.model(key, series)
        texts = views.texts[key][:n]
        X_last = torch.stack([h[m.n_layers - 1, jac.last_token_index(m, s)] for h, s in zip(v.states[:n], texts)])
        sv = steering_views_at(m, steering.word_direction(m, words[key]), alphas, X_last, v.states[:n])
        return v.tag(sv).assign(weights=series)

    steer = pd.concat(map_matrices(one, list(views.items())), ignore_index=True)
    steer["series"] = np.where(steer.random, twin_label(steer.assign(series=steer.weights)), "trained")
    return steer


def steering_saturating(steer: pd.DataFrame, alpha: float) -> tuple[list[str], list[str]]:
    """The model keys of :func:`steering_twins` (in table order) whose tokens saturate at ``alpha``: the whole
    prompt-bootstrap interval of ``tokens`` below 0.95, for the trained model and for every one of its twins."""
    keys = list(pd.unique(steer.model))
    top = steer[steer.alpha == alpha]
    tr = top[~top.random]
    trained = [key for key in keys if float(tr[tr.model == key].tokens_hi.iloc[0]) < 0.95]
    twins = [key for key in keys if (top[top.random & (top.model == key)].tokens_hi < 0.95).all()]
    return trained, twins


# -- the chapter's cost on a small real decoder (the published site's report) -----------------------------------
TWO_VIEWS_CPU_RATE = 10e9
"""Closed-form FLOPs (:func:`lib.jacobians.single_token.flops`) of the decoder place's model and twins per CPU second
of the whole chapter, measured on the book's machine with a random-initialised model of SmolLM2-135M's shape in the
decoder's place (d = 576, MLP width 1536, 30 layers, three twins) and MiniLM with its three twins in the other, on
16 grammar stories: about 270 CPU-s for the chapter (168 s of wall time), 2.7 · 10¹² FLOPs [ours]. Every part of
the chapter is counted (MiniLM's included), so the rate holds for decoders of about that size, not for the book's
small models."""

TWO_VIEWS_SPEEDUP = 1.6
"""The chapter's CPU time over its wall time in the same measurement, on the book's machine's 2 cores: its parts run
one model per core, and the decoder's model and twins dominate [ours]. :func:`cpu_decoder_work` keeps it on more
cores (an upper bound on the time)."""

TWO_VIEWS_MEMORY_FACTOR = 4.0
"""The chapter's peak memory over that of the per-prompt single-token Jacobians it keeps for section 6.5 (float32,
``(1 + twins) · L · P · d²``), in the same measurement: 10.3 GB (9.6 GiB, the kernel's peak resident memory) at
2.5 GB of kept Jacobians [ours]."""


def cpu_decoder_work(models: Sequence[tuple[str, int, int, int]] | None = None, prompts: int = 16,
                     twins: int = 3) -> pd.DataFrame:
    """This chapter with each of ``models`` (``(hub id, d, MLP width, layers)``, default
    :data:`lib.chapters.jacobian_funnel.CPU_DECODERS`) and ``twins`` random-init twins in the decoder's place, MiniLM
    and its twins in the other, on ``prompts`` prompts each, on CPUs [ours]: the kept per-prompt Jacobians (GB,
    float32), the peak memory (:data:`TWO_VIEWS_MEMORY_FACTOR` times that), the CPU minutes at
    :data:`TWO_VIEWS_CPU_RATE` and the wall minutes at :data:`TWO_VIEWS_SPEEDUP`. The counts (prompts, resamples,
    null draws) are the book's: nothing in the chapter follows the model's cost.

    Example:
        >>> row = cpu_decoder_work([("x", 100, 200, 10)], prompts=10, twins=1).iloc[0]
        >>> float(row["per-prompt Jacobians (GB)"])  # 2 models · 10 layers · 10 prompts · 100² · 4 bytes
        0.008
    """
    from lib.chapters.jacobian_funnel import CPU_DECODERS
    from lib.jacobians.single_token import flops

    if prompts < 1 or twins < 0:
        raise ValueError(f"need prompts ≥ 1 and twins ≥ 0, got prompts={prompts}, twins={twins}")
    rows = []
    for name, d, d_ff, L in CPU_DECODERS if models is None else models:
        n = 1 + twins
        kept = n * L * prompts * d * d * 4 / 1e9
        cpu_min = n * flops(d, d_ff, prompts=prompts, layers=L) / TWO_VIEWS_CPU_RATE / 60
        rows.append({"model": name, "d": d, "layers": L, "per-prompt Jacobians (GB)": kept,
                     "peak memory (GB)": TWO_VIEWS_MEMORY_FACTOR * kept, "CPU min": cpu_min,
                     "wall min": cpu_min / TWO_VIEWS_SPEEDUP})
    return pd.DataFrame(rows)
