"""Chapter 6's per-model measurements [ours]: both views of every layer, the in-context Jacobian, steering.

:func:`analyse` runs one model over one prompt set and returns per-layer tables for the chapter's six
results (the statistics themselves live in :mod:`lib.methods.bridge`). Protocol (chapter 4's): for each prompt,
one forward pass records the residual ``x = h_t[T]`` entering block ``t`` at the last token ``T``; the
single-token Jacobians at those ``x`` are averaged into ``J̄_t``; ``F_t = O_t V_t``. The token states of
γ/ρ are every content token of the same prompts (real forward pass, as chapter 3's "real" source).
Float64 for every eigen-, singular- and Schur decomposition; Jacobians in column convention.

The chapter runs eight models at once: :func:`analyse_twins` measures every model of a set of
:class:`lib.models.Twins` (one model per core) into a :class:`TwinViews`, whose ``table`` gives the long
tables the charts (:mod:`lib.page.two_views`) draw; :func:`context_twins`, :func:`perturbation_twins` and
:func:`steering_twins` do the same for sections 6.5–6.6. Each ``*_findings`` function turns a section's tables
into the numbers its prose states and its claim's verdict (a :class:`Findings`), and :func:`readable` gives
the tables the reader sees their column labels.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from lib import stats
from lib.jacobians import in_context as jcx
from lib.jacobians import sweep as jac
from lib.linalg import nonnormal as nn
from lib.linalg import spectra
from lib.linalg.cumulative import erank_from_singular_values
from lib.methods import alignment as als
from lib.methods import bridge as br
from lib.methods import steering
from lib.methods.topology import power_qualified
from lib.page.tables import interval_text, value_range
from lib.parallel import map_matrices
from lib.stats import benjamini_hochberg, bootstrap_weights

if TYPE_CHECKING:
    from lib.models import SpectralModel, Twins

__all__ = ["ANGLE_DRAWS", "ANGLE_TARGETS", "CONTEXT_PATHS", "Findings", "GAMMA_VIEWS", "JView", "ModelViews",
           "RATE_EFFECTS", "RATE_PREDICTED", "RATE_PROPERTIES", "RATE_STRONG", "SHARE_MOST", "SHARE_PROTOCOLS",
           "STEERING_QUANTITIES", "TwinViews", "analyse", "analyse_twins", "angle_findings", "angle_summary",
           "autodiff_check", "combined_verdict", "context_decomposition", "context_findings", "context_jacobians",
           "context_table", "context_twins", "float64", "gamma_findings", "gamma_summary", "in_context_stack",
           "perturbation_errors", "perturbation_twins", "rate_findings", "rate_power", "rate_tests", "readable",
           "share_both", "share_findings", "share_table", "share_verdict", "share_weights", "steering_findings",
           "steering_long", "steering_twins", "steering_views", "steering_views_at"]

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
        J_first: ``(L, n, d, d)`` single-token Jacobians of the first ``n`` prompts (result 5).
        Jbar, F: ``(L, d, d)``. eb_F: :class:`lib.methods.alignment.EigenBases` of F; jv: :class:`JView` of J̄.
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
    X, states = jac.residual_inputs(model, texts)
    L, d = model.n_layers, model.d_model
    F = spectra.as_float64(model.layer_matrices())
    lay = br.layout(model)
    ref = br.reference(lay, d)
    Jbar = np.zeros((L, d, d))
    J_first = np.zeros((L, min(n_first, len(texts)), d, d))
    v1, k1 = np.zeros((L, d, 2)), np.zeros(L, dtype=int)
    targets: dict[str, list[np.ndarray]] = {t: [] for t in ANGLE_TARGETS}
    rate_rows = []
    W_share = share_weights(len(texts), n_boot, seed)  # the same resamples of the prompts for every layer
    shares, sigma_F = [], []
    for t in range(L):
        dec = br.decompose(model, t, X[t])
        shares.append(br.resampled_shares(dec.update, {"attn": dec.J_F, "avoid": dec.update - dec.J_F}, W_share))
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
        Jbar=Jbar, F=F, eb_F=eb_F, jv=jv, J_first=J_first, states=states, specials=specials,
    )


# -- result 5: one token or the whole context ------------------------------------------------------------------
def in_context_stack(model: Any, states: Sequence[Any], positions: Sequence[int]) -> np.ndarray:
    """In-context diagonal blocks ``∂h_{t+1}[T]/∂h_t[T]`` of every block (other positions fixed).

    Args:
        states: per sequence, its residual stream ``(L+1, n, d)`` (:meth:`hidden_states`).
        positions: per sequence, the position ``T``.
    Returns:
        float64 ``(L, len(states), d, d)``: per block, all sequences at once in closed form
        (:func:`lib.jacobians.in_context.in_context_jacobians_closed`), or, for a model without one, autodiff
        (:func:`lib.jacobians.sweep.in_context_jacobian`) sequence by sequence.
    """
    L, d = model.n_layers, model.d_model
    out = np.zeros((L, len(states), d, d))
    for t in range(L):
        if jcx.supports(model):
            out[t] = jcx.in_context_jacobians_closed(model, t, [H[t] for H in states], positions).cpu().numpy()
        else:
            for p, (H, T) in enumerate(zip(states, positions)):
                out[t, p] = jac.in_context_jacobian(model, t, H[t], T, method="autodiff").cpu().numpy()
    return out


def context_jacobians(model: Any, views: ModelViews, texts: Sequence[str], n: int | None = None) -> np.ndarray:
    """:func:`in_context_stack` at the last token of the first ``n`` prompts of ``views`` (default: all of
    ``views.J_first``): ``(L, n, d, d)``, at the same states as the single-token ``views.J_first[:, :n]``."""
    kept = views.J_first.shape[1]
    n = kept if n is None else n
    if not 1 <= n <= kept:
        raise ValueError(f"n must be in 1..{kept} (the prompts whose single-token Jacobians were kept), got {n}")
    return in_context_stack(model, views.states[:n], [jac.last_token_index(model, s) for s in texts[:n]])


CONTEXT_PATHS: tuple[str, ...] = ("attn", "value", "softmax", "avoid")
"""The in-context paths whose projection shares add up to 1 (:func:`context_decomposition`)."""


def context_decomposition(model: Any, views: ModelViews, texts: Sequence[str], n: int | None = None, *,
                          n_boot: int = 200, seed: int = 0) -> tuple[np.ndarray, pd.DataFrame]:
    """The in-context Jacobians of :func:`context_jacobians` and result 1 in context, in one pass.

    Per layer, :func:`lib.methods.bridge.decompose_in_context` at the last token of the first ``n`` prompts. In a
    sentence the attention core's Jacobian ``A`` takes the place of ``F``; its value path
    ``Σ_h a_{T,h} O_h V_h`` is the part that runs through the token's own value (``F`` with each head
    weighted by the token's attention to itself), the rest the softmax's query and key paths.

    Returns:
        ``(J_ctx, share)``: ``J_ctx`` ``(L, n, d, d)`` as :func:`context_jacobians` (bit for bit), and the
        :func:`share_table` of the paths :data:`CONTEXT_PATHS`: ``attn`` (through ``A``), ``value``,
        ``softmax`` (``attn = value + softmax``) and ``avoid`` (the path that avoids attention), whose
        shares add up to 1, with their sizes ``size_*``.
    """
    kept = views.J_first.shape[1]
    n = kept if n is None else n
    if not 1 <= n <= kept:
        raise ValueError(f"n must be in 1..{kept} (the prompts whose single-token Jacobians were kept), got {n}")
    states = views.states[:n]
    positions = [jac.last_token_index(model, s) for s in texts[:n]]
    L, d = model.n_layers, model.d_model
    J_ctx = np.zeros((L, n, d, d))
    W = share_weights(n, n_boot, seed)
    boots = []
    for t in range(L):
        dec = br.decompose_in_context(model, t, [H[t] for H in states], positions)
        J_ctx[t] = dec.J
        up = dec.update
        paths = dict(zip(CONTEXT_PATHS, (dec.J_F, dec.J_value, dec.J_F - dec.J_value, up - dec.J_F)))
        boots.append(br.resampled_shares(up, paths, W))
    return J_ctx, share_table(boots)


def context_table(views: ModelViews, J_ctx: np.ndarray, k: int = 8) -> pd.DataFrame:
    """Per layer: ``rel_diff`` (median over prompts of ‖J_ctx − J_single‖_F / ‖update of J_ctx‖_F, with its
    min and max, and ``rel_first``, its value for the first prompt), spectral radii, complex fractions and
    the result-2 angle (top-k eigenvectors) of both means."""
    L, n, d, _ = J_ctx.shape
    ref = br.reference(views.layout, d)
    J_single = views.J_first[:, :n]
    rows = []
    for t in range(L):
        Js, Jc = J_single[t], J_ctx[t]
        rel = np.linalg.norm(Jc - Js, axis=(1, 2)) / np.linalg.norm(Jc - ref, axis=(1, 2))
        (ls, Vs), (lc, Vc) = br.sorted_eig(Js.mean(0)), br.sorted_eig(Jc.mean(0))  # one eig per mean
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
    out.attrs["erank_single"] = _funnel_erank(J_single.mean(1))
    out.attrs["erank_ctx"] = _funnel_erank(J_ctx.mean(1))
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


@contextlib.contextmanager
def float64(model: Any) -> Iterator[Any]:
    """Run ``model`` in float64 for the duration of a ``with`` block (float32 → float64 → float32 is exact)."""
    hf = model.hf_model
    dtype = next(hf.parameters()).dtype
    hf.to(torch.float64)
    try:
        yield model
    finally:
        hf.to(dtype)


def perturbation_errors(model: Any, t: int, H: Any, T: int, eps: Sequence[float], *, n_dirs: int = 8,
                        seed: int = 0) -> pd.DataFrame:
    """How well each linearization predicts the real change of block ``t``'s output at position ``T``.

    ``H`` ``(n, d)`` is the input of block ``t`` for one sequence. For random unit directions ``v`` and
    ``δ = ε ‖x‖ v`` (``x = H[T]``, other positions fixed), the real change is
    ``Δ = block(H + δ e_T)[T] − block(H)[T]``; the error of a Jacobian ``J`` is ``‖Δ − J δ‖ / ‖Δ − R δ‖``
    with ``R`` the :func:`lib.methods.bridge.reference` (``I`` pre-norm, ``0`` post-norm): relative to the real change
    of the block's *update*, the part the Jacobian has to predict (the skip's ``δ`` is free).
    Runs in float64 (:func:`float64`) so that roundoff stays far below the linearization error.

    Returns:
        Long format: ``eps``, ``jacobian`` ("in-context" or "single-token"), ``error`` (median over the
        directions), ``error_lo`` / ``error_hi`` (min and max over them).
    """
    rows = []
    with float64(model), torch.no_grad():
        H64 = torch.as_tensor(H).to(torch.float64)
        n, d = H64.shape
        x = H64[T]
        Js = {"in-context": jac.in_context_jacobian(model, t, H64, T).double(),
              "single-token": jac.layer_jacobians(model, t, x[None], method="closed")[0].double()}
        layer = model.layer(t)
        base = layer(H64[None])[0, T]
        V = torch.as_tensor(als.random_directions(d, n_dirs, seed))
        R = torch.as_tensor(br.reference(model, d))
        for e in eps:
            delta = float(e) * float(x.norm()) * V  # (n_dirs, d)
            batch = H64.expand(n_dirs, n, d).clone()
            batch[:, T] += delta
            change = layer(batch)[:, T] - base  # (n_dirs, d)
            for name, J in Js.items():
                pred = delta @ J.T
                err = (torch.linalg.norm(change - pred, dim=1) / torch.linalg.norm(change - delta @ R.T, dim=1)).numpy()
                rows.append({"eps": float(e), "jacobian": name, "error": float(np.median(err)),
                             "error_lo": float(err.min()), "error_hi": float(err.max())})
    return pd.DataFrame(rows)


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


def steering_long(steer: pd.DataFrame, quantities: dict[str, str]) -> pd.DataFrame:
    """:func:`steering_views_at` tables (tagged with ``model``, ``series``, ``weights``) in the long form of
    :func:`lib.page.two_views.steering_chart`: one row per quantity, labelled by ``quantities`` (column → label),
    with ``lo``/``hi`` where the quantity has an interval (NaN otherwise)."""
    parts = []
    for col, label in quantities.items():
        part = steer[["model", "series", "weights", "alpha"]].assign(quantity=label, value=steer[col])
        has = f"{col}_lo" in steer
        parts.append(part.assign(lo=steer[f"{col}_lo"] if has else np.nan, hi=steer[f"{col}_hi"] if has else np.nan))
    return pd.concat(parts, ignore_index=True)


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


def autodiff_check(views: TwinViews, layer: int = 2, n_prompts: int = 2) -> pd.DataFrame:
    """The closed form of section 6.1 against autodiff of the real block, for each trained model.

    Block ``layer`` (0-based) at the last token of the first ``n_prompts`` prompts; one row per model with
    the relative Frobenius difference ‖J − J_autodiff‖/‖J_autodiff‖ over the stacked prompts.
    """
    rows = []
    for key in views.twins:
        m = views.model(key)
        X, _ = jac.residual_inputs(m, views.texts[key][:n_prompts])
        dec = br.decompose(m, layer, X[layer])
        J_ad = jac.layer_jacobians(m, layer, X[layer], method="autodiff").numpy()
        rows.append({"model": m.label, "layout": dec.layout, "layer": layer + 1,
                     "relative difference from autodiff": np.linalg.norm(dec.J - J_ad) / np.linalg.norm(J_ad)})
    return pd.DataFrame(rows)


# -- what the prose says: the numbers of each section and its row of the Results page ----------------------------
@dataclass(frozen=True)
class Findings:
    """The numbers one section of chapter 6 writes into its prose, and its claim's row of the Results page.

    Attributes:
        numbers: glue name → value (formatted text or int), read by the prose's ``{eval}`name```.
        claim: ``models``, ``measured`` and ``verdict`` for :func:`lib.page.claims.glue_claim` (the chapter
            calls it with the claim's id, which the Results page's test looks for in the chapter).
    """

    numbers: dict[str, Any]
    claim: dict[str, str] = field(default_factory=dict)

    def glue(self) -> dict[str, str]:
        """Glue every number (:func:`lib.page.prose.glue`) and return :attr:`claim`, for
        ``glue_claim("TV1", **findings.glue())``."""
        from lib.page.prose import glue

        for name, value in self.numbers.items():
            glue(name, value, display=False)
        return self.claim


def _twin_label(df: pd.DataFrame) -> str:
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


def _median_ci(r: pd.Series) -> str:
    return f"{r.med:.2f} [{r.med_lo:.2f}, {r.med_hi:.2f}]"


def share_findings(share: pd.DataFrame, share_ctx: pd.DataFrame, models: str) -> Findings:
    """Section 6.1 (claim TV1): the attention path's projection share of the update, per model key, on a
    single token (``share``, ``TwinViews.table("share")``) and in context (``share_ctx``, the third table of
    :func:`context_twins`).

    Glued per key, single token: ``sh_tr_<key>`` (range over layers of the trained share), ``sh_ci_<key>``
    (its intervals' extent), ``sh_med_tr_<key>`` (median over layers with its interval), ``sh_rd_<key>`` /
    ``sh_med_rd_<key>`` (the twins' per-layer range and their medians' range), ``sz_tr_<key>`` /
    ``sz_av_<key>`` (sizes ‖J̄_F‖/‖Ū‖ and ‖Ū − J̄_F‖/‖Ū‖, ranges over layers); in context the same with
    ``cx`` for ``sh`` (``cxs_tr_<key>``, ``cxs_ci_<key>``, ``cxs_med_tr_<key>``, ``cxs_rd_<key>``,
    ``cxs_med_rd_<key>``, ``cxz_tr_<key>``, ``cxz_av_<key>``) and the value path's and softmax paths'
    shares ``cxs_val_<key>``, ``cxs_soft_<key>``, ``cxs_val_rd_<key>``; the verdicts ``sh_v_<key>`` and
    ``cxs_v_<key>`` (:func:`share_verdict`). The claim's verdict is :func:`combined_verdict` of the four.
    """
    numbers: dict[str, Any] = {}
    parts, verdicts = [], []
    for key in pd.unique(share.model):
        for tag, tab, name in (("sh", share, "single token"), ("cxs", share_ctx, "in context")):
            z = "sz" if tag == "sh" else "cxz"
            tr = tab[(tab.model == key) & ~tab.random]
            rd = tab[(tab.model == key) & tab.random]
            first, twins = tr.iloc[0], rd.groupby("series").first()
            numbers[f"{tag}_tr_{key}"] = value_range(tr.attn)
            numbers[f"{tag}_ci_{key}"] = f"{tr.attn_lo.min():.2f}–{tr.attn_hi.max():.2f}"
            numbers[f"{tag}_med_tr_{key}"] = _median_ci(first)
            numbers[f"{tag}_rd_{key}"] = value_range(rd.attn)
            numbers[f"{tag}_med_rd_{key}"] = value_range(twins.med)
            numbers[f"{z}_tr_{key}"] = value_range(tr.size_attn)
            numbers[f"{z}_av_{key}"] = value_range(tr.size_avoid)
            if tag == "cxs":
                numbers[f"cxs_val_{key}"] = value_range(tr.value)
                numbers[f"cxs_soft_{key}"] = value_range(tr.softmax)
                numbers[f"cxs_val_rd_{key}"] = value_range(rd.value)
            v = share_verdict(first, twins)
            numbers[f"{tag}_v_{key}"] = v
            verdicts.append(v)
            parts.append(f"{key} {name}: ⟨J̄_A, Ū⟩/‖Ū‖² median {_median_ci(first)} trained, twins' medians "
                         f"{value_range(twins.med)} → {v}")
    return Findings(numbers, {"models": models, "measured": "; ".join(parts) + " (A = Fₜ single token, the "
                              "attention core's Jacobian in context)", "verdict": combined_verdict(verdicts)})


def angle_summary(angles: pd.DataFrame) -> pd.DataFrame:
    """Section 6.2 per (model, Jacobian subspace, trained or pooled twins): ``layers_aligned`` (closer than
    chance at FDR 5%), ``n`` (layers, over every seed), ``theta_min``, ``theta_median`` and ``chance_5pct``
    (median of the per-layer 5% chance quantiles), all in degrees."""
    s = (angles.assign(aligned=angles.q < 0.05)
         .groupby(["model", "target", "random"], as_index=False)
         .agg(layers_aligned=("aligned", "sum"), n=("aligned", "size"), theta_min=("theta", "min"),
              theta_median=("theta", "median"), chance_5pct=("chance_lo", "median")))
    s["layers_aligned"] = s.layers_aligned.astype(int)
    s = s.assign(series=np.where(s.random, _twin_label(angles), "trained")).drop(columns="random")
    return s[["model", "target", "series", "layers_aligned", "n", "theta_min", "theta_median", "chance_5pct"]]


def angle_findings(angles: pd.DataFrame, models: str, k: int) -> Findings:
    """Section 6.2 (claim TV2): how often ``v₁(F_t)`` is closer than chance to a Jacobian subspace.

    Glued: ``al_<key>_<i>_tr`` / ``_rd`` ("a of n" layers for subspace ``i`` of :data:`ANGLE_TARGETS`),
    ``al_tot_tr`` / ``al_tot_rd`` (all pairs), ``ml_theta_min`` and ``ml_chance`` (MiniLM's best angle and
    its chance quantiles), ``dec_th_l2`` / ``dec_th_l3`` (the trained decoder's eigenvector angles in layers
    2 and 3). The claim: not reproduced if under half the trained pairs are aligned, reproduced if the
    trained share beats the twins' by more than 0.2, else not specific to training.
    """
    summary = angle_summary(angles)
    twin = _twin_label(angles)

    def aligned(key: str, target: str, random: bool) -> tuple[int, int]:
        s = summary[(summary.model == key) & (summary.target == target)
                    & (summary.series == (twin if random else "trained"))].iloc[0]
        return int(s.layers_aligned), int(s.n)

    keys = list(pd.unique(angles.model))
    numbers: dict[str, Any] = {}
    for key in keys:
        for i, target in enumerate(ANGLE_TARGETS):
            numbers[f"al_{key}_{i}_tr"] = "{} of {}".format(*aligned(key, target, False))
            numbers[f"al_{key}_{i}_rd"] = "{} of {}".format(*aligned(key, target, True))
    tot_tr, n_tr = (sum(aligned(key, t, False)[j] for key in keys for t in ANGLE_TARGETS) for j in (0, 1))
    tot_rd, n_rd = (sum(aligned(key, t, True)[j] for key in keys for t in ANGLE_TARGETS) for j in (0, 1))
    frac_tr, frac_rd = tot_tr / n_tr, tot_rd / n_rd
    numbers["al_tot_tr"] = f"{tot_tr} of {n_tr}"
    numbers["al_tot_rd"] = f"{tot_rd} of {n_rd}"
    ang_tr = angles[~angles.random]
    ml = angles[angles.model == "MiniLM"]
    numbers["ml_theta_min"] = f"{ang_tr[ang_tr.model == 'MiniLM'].theta.min():.0f}°"
    numbers["ml_chance"] = f"{ml.chance_lo.min():.0f}–{ml.chance_lo.max():.0f}°"
    dec_eig = ang_tr[(ang_tr.model == "decoder") & (ang_tr.target == ANGLE_TARGETS[0])].set_index("layer").theta
    numbers["dec_th_l2"] = f"{dec_eig[2]:.0f}°"
    numbers["dec_th_l3"] = f"{dec_eig[3]:.0f}°"
    eig_tr = {key: aligned(key, ANGLE_TARGETS[0], False) for key in keys}
    measured = ("; ".join(f"{key}: v₁(Fₜ) closer than chance (FDR 5%) to J̄ₜ's top-{k} eigenvectors in "
                          f"{eig_tr[key][0]} of {eig_tr[key][1]} layers" for key in keys)
                + f"; all four subspaces: {tot_tr} of {n_tr} (layer, subspace) pairs trained, {tot_rd} of "
                  f"{n_rd} at random init")
    verdict = ("not reproduced" if frac_tr < 0.5 else "reproduced" if frac_tr > frac_rd + 0.2
               else "not specific to training")
    return Findings(numbers, {"models": models + f"; K = {k}", "measured": measured, "verdict": verdict})


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


def _design_label(n: int, variants: int) -> str:
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
            rows.append({"effect": float(e), "design": _design_label(*dg), "n": dg[0], "variants": dg[1],
                         "power_all": float(pa), "power_one": float(po), "reps": reps})
    return pd.DataFrame(rows)


def rate_findings(rates: pd.DataFrame, rt: pd.DataFrame, power: pd.DataFrame, models: str) -> Findings:
    """Section 6.3 (claim TV3): ``rt`` from :func:`rate_tests`, ``power`` from :func:`rate_power`.

    Glued: ``dec_rho1`` (ρ(J̄) of the trained decoder's block 1), ``rt_sig_tr`` / ``rt_sig_rd`` (tests
    significant at FDR 5%), ``rt_n`` (trained tests), ``rt_r_tr`` / ``rt_r_rd`` (ranges of r), ``rt_null``
    (the nulls' central 95%), ``rt_best`` (the trained test with the smallest p: its property, model, r, interval,
    p and q), ``rt_dir`` (trained coefficients with the predicted sign, :data:`RATE_PREDICTED`), ``rt_p_perfect``
    / ``rt_p_next`` (the two smallest p-values six layers can give), ``rt_bh_lone`` (the p a lone rejection
    needs), ``rt_pw_tr_<e>`` / ``rt_pw_rd_<e>`` / ``rt_pw1_tr_<e>`` / ``rt_pw1_rd_<e>`` (power, all planted or one,
    trained design and twins' design, at ``e`` = 10 × the effect, whose value is ``rt_e_<e>``), ``rt_reps`` (replicates per
    effect) and ``rt_strong`` (:data:`RATE_STRONG`).

    The verdict: "reproduced" if every trained test is significant, "partly reproduced" if some are; with
    none, "not reproduced" only if the trained design's power at :data:`RATE_STRONG` (every test planted) is
    at least 0.8, else "inconclusive (underpowered)" (:func:`lib.methods.topology.power_qualified`).
    """
    tr, rd = rt[rt.series == "trained"], rt[rt.series == "random init"]
    sig_tr, sig_rd = int((tr.q < 0.05).sum()), int((rd.q < 0.05).sum())
    dec1 = rates[(rates.model == "decoder") & ~rates.random & (rates.layer == 1)].radius_J.iloc[0]
    best = tr.loc[tr.p.idxmin()]
    sign = np.sign(tr.r) == tr["J̄ property"].map(RATE_PREDICTED)
    n_layers = int(rates.layer.max())
    values, prob = br.spearman_null(n_layers, 1)
    p_sorted = np.unique(br.two_sided_p(values, (values, prob)))
    numbers: dict[str, Any] = {
        "dec_rho1": f"{dec1:.0f}", "rt_sig_tr": sig_tr, "rt_sig_rd": sig_rd, "rt_n": len(tr),
        "rt_r_tr": f"{tr.r.min():+.2f} to {tr.r.max():+.2f}", "rt_r_rd": f"{rd.r.min():+.2f} to {rd.r.max():+.2f}",
        "rt_null": f"{rt.null_lo.min():+.2f} to {rt.null_hi.max():+.2f}",
        "rt_best": (f"{best.model}'s {best['J̄ property']}, r = {best.r:+.2f} (95% interval {best.lo:+.2f} to "
                    f"{best.hi:+.2f}, p = {best.p:.3f}, q = {best.q:.2f})"),
        "rt_dir": f"{int(sign.sum())} of {len(tr)}", "rt_p_perfect": f"{p_sorted[0]:.4f}",
        "rt_p_next": f"{p_sorted[1]:.3f}", "rt_bh_lone": f"{0.05 / len(rt):.4f}", "rt_strong": f"{RATE_STRONG:.1f}"}
    tr_design, rd_design = _design_label(n_layers, 1), _design_label(n_layers, int(rd.variants.max()))
    numbers["rt_reps"] = int(power.reps.iloc[0])
    for e, g in power.groupby("effect"):
        tag = f"{round(10 * e)}"
        numbers[f"rt_e_{tag}"] = f"{e:.1f}"
        numbers[f"rt_pw_tr_{tag}"] = f"{g[g.design == tr_design].power_all.iloc[0]:.2f}"
        numbers[f"rt_pw1_tr_{tag}"] = f"{g[g.design == tr_design].power_one.iloc[0]:.2f}"
        numbers[f"rt_pw_rd_{tag}"] = f"{g[g.design == rd_design].power_all.iloc[0]:.2f}"
        numbers[f"rt_pw1_rd_{tag}"] = f"{g[g.design == rd_design].power_one.iloc[0]:.2f}"
    strong = power[power.design == tr_design]
    pw_strong = float(strong.set_index("effect").power_all.get(RATE_STRONG, np.nan))
    verdict = "not reproduced" if sig_tr == 0 else "partly reproduced" if sig_tr < len(tr) else "reproduced"
    verdict = power_qualified(verdict, strong.effect, strong.power_all, at_r=RATE_STRONG)
    measured = (f"within-variant Spearman of gap ratio with ρ(J̄), δ_H, erank(J̄): {tr.r.min():+.2f} "
                f"to {tr.r.max():+.2f} trained ({int(sign.sum())} of {len(tr)} with the predicted sign; "
                f"strongest {best['J̄ property']} in {best.model}, r = {best.r:+.2f}, p = {best.p:.3f}), "
                f"{sig_tr} of {len(tr)} significant at FDR 5% (permutation null 95%: {rt.null_lo.min():+.2f} to "
                f"{rt.null_hi.max():+.2f}); power at a planted ρ = {RATE_STRONG:.1f} with {n_layers} layers: "
                f"{pw_strong:.2f}; random init {sig_rd} of {len(rd)} (r {rd.r.min():+.2f} to {rd.r.max():+.2f})")
    return Findings(numbers, {"models": models, "measured": measured, "verdict": verdict})


GAMMA_VIEWS: tuple[str, str] = ("Fₜ: v₁", "J̄ₜ: v₁")
"""The two bases of section 6.4 (the ``view`` column of ``ModelViews.gamma``)."""


def gamma_summary(gam: pd.DataFrame) -> pd.DataFrame:
    """Section 6.4 per (model, trained or pooled twins, view): the range of γ_t over its chance level, the
    layers whose γ_t / ρ_t beat their null at FDR 5%, the range of ρ_t and the number of layers."""
    return (gam.assign(g_sig=gam.q_gamma < 0.05, r_sig=gam.q_rho < 0.05, ratio=gam.gamma / gam.chance,
                       series=np.where(gam.random, _twin_label(gam), "trained"))
            .groupby(["model", "series", "view"], as_index=False)
            .agg(gamma_over_chance_min=("ratio", "min"), gamma_over_chance_max=("ratio", "max"),
                 gamma_above_null=("g_sig", "sum"), rho_min=("rho", "min"), rho_max=("rho", "max"),
                 rho_above_null=("r_sig", "sum"), layers=("layer", "size")))


def gamma_findings(gam: pd.DataFrame, d: Mapping[str, int], models: str) -> Findings:
    """Section 6.4 (claim TV4): γ_t and ρ_t against ``v₁(F_t)`` and against ``v₁(J̄_t)``.

    Glued: ``ch_ml_<k>`` / ``ch_dec_<k>`` (chance levels for k = 1, 2 at the width ``d[key]``), per key and
    view (F, J): ``g4_<key>_<F|J>_ratio`` (γ/chance range), ``_g`` and ``_r`` ("a of n" layers above the null,
    trained), ``_g_rd`` and ``_r_rd`` (twins); ``g4_<key>_Jwins`` (layers where J̄'s direction gives the larger
    ratio); ``g4_sigF`` / ``g4_sigJ`` (trained layers with γ_t or ρ_t above the null) and their ``_rd``. The
    claim needs the J̄ view ahead by at least two layers, and ahead of the twins.
    """
    g4 = gamma_summary(gam)
    twin = _twin_label(gam)
    numbers: dict[str, Any] = {}
    for key in d:
        for k in (1, 2):
            numbers[f"ch_{'ml' if key == 'MiniLM' else 'dec'}_{k}"] = f"{als.baseline_subspace(d[key], k):.4f}"

    def row(key: str, series: str, view: str) -> pd.Series:
        return g4[(g4.model == key) & (g4.series == series) & (g4.view == view)].iloc[0]

    for key in d:
        for view, tag in zip(GAMMA_VIEWS, ("F", "J")):
            r, rr = row(key, "trained", view), row(key, twin, view)
            numbers[f"g4_{key}_{tag}_ratio"] = f"{r.gamma_over_chance_min:.2f}–{r.gamma_over_chance_max:.2f}"
            numbers[f"g4_{key}_{tag}_g"] = f"{int(r.gamma_above_null)} of {int(r.layers)}"
            numbers[f"g4_{key}_{tag}_r"] = f"{int(r.rho_above_null)} of {int(r.layers)}"
            numbers[f"g4_{key}_{tag}_g_rd"] = f"{int(rr.gamma_above_null)} of {int(rr.layers)}"
            numbers[f"g4_{key}_{tag}_r_rd"] = f"{int(rr.rho_above_null)} of {int(rr.layers)}"
        tr = gam[(gam.model == key) & ~gam.random]
        ratio = {v: (tr[tr.view == v].gamma / tr[tr.view == v].chance).to_numpy() for v in GAMMA_VIEWS}
        wins = int((ratio[GAMMA_VIEWS[1]] > ratio[GAMMA_VIEWS[0]]).sum())
        numbers[f"g4_{key}_Jwins"] = f"{wins} of {len(ratio[GAMMA_VIEWS[0]])}"
    either = "q_gamma < 0.05 or q_rho < 0.05"
    sig = {v: int(gam[(~gam.random) & (gam.view == v)].eval(either).sum()) for v in GAMMA_VIEWS}
    sig_rd = {v: int(gam[gam.random & (gam.view == v)].eval(either).sum()) for v in GAMMA_VIEWS}
    n_tr = int(((~gam.random) & (gam.view == GAMMA_VIEWS[0])).sum())
    n_rd = int((gam.random & (gam.view == GAMMA_VIEWS[0])).sum())
    F, J = GAMMA_VIEWS
    numbers.update(g4_sigF=f"{sig[F]} of {n_tr}", g4_sigJ=f"{sig[J]} of {n_tr}",
                   g4_sigF_rd=f"{sig_rd[F]} of {n_rd}", g4_sigJ_rd=f"{sig_rd[J]} of {n_rd}")
    j_better = sig[J] >= sig[F] + 2  # at least two layers more of the twelve [ours]
    measured = ("; ".join(f"{key}: γₜ/chance {row(key, 'trained', F).gamma_over_chance_min:.2f}–"
                          f"{row(key, 'trained', F).gamma_over_chance_max:.2f} (F view) vs "
                          f"{row(key, 'trained', J).gamma_over_chance_min:.2f}–"
                          f"{row(key, 'trained', J).gamma_over_chance_max:.2f} (J̄ view)" for key in d)
                + f"; layers with γₜ or ρₜ above the random-subspace null (FDR 5%): F view {sig[F]} of "
                  f"{n_tr}, J̄ view {sig[J]} of {n_tr} trained; twins {sig_rd[F]} and {sig_rd[J]} of {n_rd}")
    verdict = ("not reproduced" if not j_better else
               "not specific to training" if sig_rd[J] / n_rd >= sig[J] / n_tr else "reproduced")
    return Findings(numbers, {"models": models, "measured": measured, "verdict": verdict})


def context_twins(views: TwinViews, n: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Section 6.5, and result 1 in context, for every model, one model per core (closed form, no
    forward-mode AD; :func:`context_decomposition`).

    Returns ``(ctx, funnel, share)``: ``ctx`` the :func:`context_table` of every model, tagged; ``funnel`` one
    row per model with ``prompts`` and the whole funnel's effective rank from the single-token and in-context
    mean Jacobians; ``share`` the in-context share table of every model, tagged.
    """
    def one(item: tuple[tuple[str, str], ModelViews]) -> tuple[pd.DataFrame, dict[str, Any], pd.DataFrame]:
        (key, series), v = item
        J_ctx, share = context_decomposition(views.model(key, series), v, views.texts[key], n=n)
        ct = context_table(v, J_ctx, k=views.k)
        return v.tag(ct), {"model": key, "series": series, "prompts": J_ctx.shape[1],
                           "funnel erank, single-token": ct.attrs["erank_single"],
                           "funnel erank, in-context": ct.attrs["erank_ctx"]}, v.tag(share)

    parts = map_matrices(one, list(views.items()))
    return (pd.concat([c for c, _, _ in parts], ignore_index=True), pd.DataFrame([a for _, a, _ in parts]),
            pd.concat([sh for _, _, sh in parts], ignore_index=True))


def perturbation_twins(views: TwinViews, eps: Sequence[float], layer: int = 2) -> pd.DataFrame:
    """:func:`perturbation_errors` of block ``layer`` (0-based) of each trained model at its first prompt's
    last token, tagged with ``model``."""
    parts = []
    for key in views.twins:
        m, v = views.model(key), views[key, "trained"]
        T = jac.last_token_index(m, views.texts[key][0])
        parts.append(perturbation_errors(m, layer, v.states[0][layer], T, eps).assign(model=key))
    return pd.concat(parts, ignore_index=True)


def _slope(df: pd.DataFrame) -> float:
    """Log–log slope of the error over 1e-3 ≤ ε ≤ 1e-1 (1: a right Jacobian's error falls like ε)."""
    s = df[(df.eps >= 1e-3) & (df.eps <= 1e-1)]
    return float(np.polyfit(np.log(s.eps), np.log(s.error), 1)[0])


def context_findings(ctx: pd.DataFrame, funnel: pd.DataFrame, pert: pd.DataFrame, models: str) -> Findings:
    """Section 6.5 (claim TV5): the single-token against the in-context Jacobian.

    Glued per key: ``pt_slope_<key>`` (the in-context error's slope), ``pt_single_<key>`` / ``pt_ctx_<key>``
    (errors at ε = 1e-3), ``cx_tr_<key>`` / ``cx_rd_<key>`` (ranges of the relative difference),
    ``cx_th_<key>`` (the eigenvector angles both ways), ``cx_er_<key>`` (the funnel's erank both ways);
    ``cx_fc_diff`` (largest change of a complex fraction), ``cx_median``, and ``ex_rel_first`` (the trained
    decoder's first-prompt differences per layer, the answer of exercise 6.3). The claim holds when the
    median difference is under 0.2.
    """
    numbers: dict[str, Any] = {}
    for key in pd.unique(ctx.model):
        p = pert[pert.model == key]
        pc, ps = p[p.jacobian == "in-context"], p[p.jacobian == "single-token"]
        numbers[f"pt_slope_{key}"] = f"{_slope(pc):.2f}"
        numbers[f"pt_single_{key}"] = f"{ps[ps.eps == 1e-3].error.iloc[0]:.2f}"
        numbers[f"pt_ctx_{key}"] = f"{pc[pc.eps == 1e-3].error.iloc[0]:.1e}"
        c = ctx[ctx.model == key]
        tr_c = c[~c.random]
        numbers[f"cx_tr_{key}"] = value_range(tr_c.rel_diff)
        numbers[f"cx_rd_{key}"] = value_range(c[c.random].rel_diff)
        numbers[f"cx_th_{key}"] = (f"{tr_c.theta_single.min():.0f}–{tr_c.theta_single.max():.0f}° single-token vs "
                                   f"{tr_c.theta_ctx.min():.0f}–{tr_c.theta_ctx.max():.0f}° in-context")
        f_ = funnel[(funnel.model == key) & (funnel.series == "trained")].iloc[0]
        numbers[f"cx_er_{key}"] = f"{f_['funnel erank, single-token']:.1f} vs {f_['funnel erank, in-context']:.1f}"
    numbers["cx_fc_diff"] = f"{(ctx.fC_single - ctx.fC_ctx).abs().max():.2f}"
    numbers["cx_median"] = f"{ctx.rel_diff.median():.2f}"
    first = ctx[(ctx.model == "decoder") & ~ctx.random].sort_values("layer").rel_first
    numbers["ex_rel_first"] = ", ".join(f"{r:.3f}" for r in first)
    keys = list(pd.unique(ctx.model))

    def single_at(key: str) -> float:
        p = pert[(pert.model == key) & (pert.jacobian == "single-token") & (pert.eps == 1e-3)]
        return float(p.error.iloc[0])

    measured = ("; ".join(f"{key}: ‖J_ctx − J_single‖/‖J_ctx − R‖ "
                          f"{value_range(ctx[(ctx.model == key) & ~ctx.random].rel_diff)} trained, "
                          f"{value_range(ctx[(ctx.model == key) & ctx.random].rel_diff)} random init" for key in keys)
                + "; finite-perturbation error slope of the in-context Jacobian "
                + ", ".join(f"{_slope(pert[(pert.model == key) & (pert.jacobian == 'in-context')]):.2f}"
                            for key in keys)
                + ", single-token error at ε = 1e-3: "
                + ", ".join(f"{single_at(key):.2f}" for key in keys))
    verdict = "reproduced" if bool(ctx.rel_diff.median() < 0.2) else "not reproduced"
    return Findings(numbers, {"models": models, "measured": measured, "verdict": verdict})


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
    steer["series"] = np.where(steer.random, _twin_label(steer.assign(series=steer.weights)), "trained")
    return steer


def steering_findings(steer: pd.DataFrame, models: str, alphas: Sequence[float]) -> Findings:
    """Section 6.6 (claim TV6): the O-edit seen by both views.

    Glued per key and column of :data:`STEERING_QUANTITIES` (and ``share``): ``st_<key>_<col>`` at the
    largest α, ``_5``, ``_20``, ``_0`` at α = 5, 20, 0, ``_rd`` (the twins' range at the largest α); with
    intervals: ``st_<key>_tokens_ci``, ``_tokens_5_ci``, ``_J_write_0_ci``, ``_J_write_ci``; and
    ``st_saturating`` / ``st_twins_saturating`` (models whose token interval stays under 0.95 at the largest
    α). The claim is reproduced when, in every saturating model, a(W̄u, u) at α = 0 predicts the level (within
    0.05) and the Jacobian view decouples at the largest α; partly when it only decouples.
    """
    tr = steer[~steer.random]
    a_max = max(alphas)

    def at(key: str, alpha: float, col: str) -> float:
        return float(tr[(tr.model == key) & (tr.alpha == alpha)][col].iloc[0])

    def ci(key: str, alpha: float, col: str) -> str:
        r = tr[(tr.model == key) & (tr.alpha == alpha)].iloc[0]
        return f"{r[col]:.3f} [{r[col + '_lo']:.3f}, {r[col + '_hi']:.3f}]"

    def twin_range(key: str, alpha: float, col: str) -> str:
        return value_range(steer[steer.random & (steer.model == key) & (steer.alpha == alpha)][col])

    keys = list(pd.unique(steer.model))
    numbers: dict[str, Any] = {}
    for key in keys:
        for col in ("spectral", "J_sv", "J_write", "tokens", "share"):
            numbers[f"st_{key}_{col}"] = f"{at(key, a_max, col):.3f}"
            numbers[f"st_{key}_{col}_5"] = f"{at(key, 5, col):.3f}"
            numbers[f"st_{key}_{col}_20"] = f"{at(key, 20, col):.3f}"
            numbers[f"st_{key}_{col}_0"] = f"{at(key, 0, col):.3f}"
            numbers[f"st_{key}_{col}_rd"] = twin_range(key, a_max, col)
        numbers[f"st_{key}_tokens_ci"] = ci(key, a_max, "tokens")
        numbers[f"st_{key}_tokens_5_ci"] = ci(key, 5, "tokens")
        numbers[f"st_{key}_J_write_0_ci"] = ci(key, 0, "J_write")
        numbers[f"st_{key}_J_write_ci"] = ci(key, a_max, "J_write")
    top = steer[steer.alpha == a_max]
    saturating = [key for key in keys if at(key, a_max, "tokens_hi") < 0.95]  # the whole interval below 0.95
    twins_saturating = [key for key in keys if (top[top.random & (top.model == key)].tokens_hi < 0.95).all()]
    level_ok = all(abs(at(key, 0, "J_write") - at(key, a_max, "tokens")) < 0.05 for key in saturating)
    decouples = all(at(key, a_max, "J_write_hi") < 0.5 * at(key, 0, "J_write_lo")
                    and at(key, a_max, "J_sv") < 0.5 * tr[tr.model == key].J_sv.max() for key in saturating)
    numbers["st_saturating"] = ", ".join(saturating) if saturating else "none"
    numbers["st_twins_saturating"] = ", ".join(twins_saturating) if twins_saturating else "none"
    measured = "; ".join(f"{key} at α = {a_max}: F view {at(key, a_max, 'spectral'):.3f}, tokens "
                         f"{ci(key, a_max, 'tokens')} (twins {twin_range(key, a_max, 'tokens')}), "
                         f"J̄ view a(W̄u, u) {ci(key, 0, 'J_write')} at α = 0 → {ci(key, a_max, 'J_write')}, "
                         f"|⟨s₁, u⟩| max {tr[tr.model == key].J_sv.max():.3f} → {at(key, a_max, 'J_sv'):.3f}"
                         for key in keys)
    verdict = ("not reproduced" if not saturating else "reproduced" if level_ok and decouples
               else "partly reproduced" if decouples else "not reproduced")
    return Findings(numbers, {"models": models, "measured": measured, "verdict": verdict})


# -- tables for the reader: words, not column names ---------------------------------------------------------------
_LABELS: dict[str, dict[str, str]] = {
    "share": {"model": "model", "series": "weights", "protocol": "protocol", "layer": "layer",
              "attn": "attention path: ⟨J̄_A, Ū⟩ / ‖Ū‖²", "ci": "95% CI", "value": "of it, own value path",
              "softmax": "of it, softmax paths", "avoid": "the rest: ⟨Ū − J̄_A, Ū⟩ / ‖Ū‖²",
              "size_attn": "‖J̄_A‖ / ‖Ū‖",
              "size_avoid": "‖Ū − J̄_A‖ / ‖Ū‖", "sigma_size": "σ₁(J̄_F) / σ₁(Ū)"},
    "angles": {"model": "model", "target": "Jacobian subspace", "series": "weights",
               "layers_aligned": "layers closer than chance (FDR 5%)", "n": "layers (all seeds)",
               "theta_min": "smallest θ₁ (°)", "theta_median": "median θ₁ (°)",
               "chance_5pct": "5% quantile of chance (°)"},
    "rates": {"model": "model", "series": "weights", "J̄ property": "J̄ property", "variants": "variants",
              "r": "Spearman r (within variants)", "ci": "95% CI", "null": "permutation null, central 95%",
              "p": "p", "q": "q (BH)"},
    "power": {"effect": "planted ρ", "design": "test", "power_all": "power, ρ planted in every test",
              "power_one": "power, ρ planted in this test alone"},
    "gamma": {"model": "model", "series": "weights", "view": "basis",
              "gamma_over_chance": "γₜ / chance (range)", "gamma_above_null": "layers with γₜ above null",
              "rho": "ρₜ (range)", "rho_above_null": "layers with ρₜ above null", "layers": "layers (all seeds)"},
    "context": {"model": "model", "series": "weights", "layer": "layer",
                "rel_diff": "relative difference (median over prompts)", "radius_single": "ρ(J̄), single token",
                "radius_ctx": "ρ(J̄), in context", "fC_single": "complex fraction, single token",
                "fC_ctx": "complex fraction, in context", "theta_single": "θ₁ to v₁(Fₜ), single token (°)",
                "theta_ctx": "θ₁ to v₁(Fₜ), in context (°)"},
    "funnel": {"model": "model", "series": "weights", "prompts": "prompts",
               "funnel erank, single-token": "funnel erank, single token",
               "funnel erank, in-context": "funnel erank, in context"},
    "steering": {"model": "model", "weights": "weights", "alpha": "α|c| / |λ₁|",
                 "spectral": "|⟨v₁(F_L′), u⟩|", "J_sv": "|⟨s₁(Ū_L), u⟩|", "J_write": "a(W̄u, u)",
                 "share": "‖J̄_F‖ / ‖Ū‖", "tokens": "tokens: mean a(x, u)"},
}


def _signed_interval(lo: Any, hi: Any, fmt: str = ".3f") -> list[str]:
    """``"lo to hi"`` per pair (an en dash between signed numbers, "-1.000–-0.363", reads as a minus)."""
    return [t if t == "–" else t.replace("–", " to ") for t in interval_text(lo, hi, fmt)]


def readable(df: pd.DataFrame, kind: str) -> pd.DataFrame:
    """A chapter-6 table with the reader's column labels, in the order of the page.

    ``kind`` is one of ``"share"``, ``"angles"``, ``"rates"``, ``"power"``, ``"gamma"``, ``"context"``, ``"funnel"``,
    ``"steering"``; intervals become one ``"lo–hi"`` text column (:func:`lib.page.tables.interval_text`), ranges
    (``*_min`` / ``*_max``) one ``"min–max"`` column. The data are not changed, only selected and renamed.
    """
    if kind not in _LABELS:
        raise ValueError(f"kind must be one of {sorted(_LABELS)}, got {kind!r}")
    df = df.copy()
    if kind == "share":  # signed: a share below 0 is a path that cancels part of the others
        df["ci"] = _signed_interval(df.attn_lo, df.attn_hi)
    elif kind == "rates":  # signed: "-0.771 to 0.829", not "-0.771–0.829"
        df["ci"], df["null"] = _signed_interval(df.lo, df.hi), _signed_interval(df.null_lo, df.null_hi)
    elif kind == "gamma":
        df["gamma_over_chance"] = interval_text(df.gamma_over_chance_min, df.gamma_over_chance_max, ".2f")
        df["rho"] = interval_text(df.rho_min, df.rho_max)
    labels = _LABELS[kind]
    return df[list(labels)].rename(columns=labels)
