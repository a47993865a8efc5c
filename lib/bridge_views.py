"""Chapter 6's per-model measurements [ours]: both views of every layer, the in-context Jacobian, steering.

:func:`analyse` runs one model over one prompt set and returns per-layer tables for the chapter's six
results (the statistics themselves live in :mod:`lib.bridge`). Protocol (chapter 4's): for each prompt,
one forward pass records the residual ``x = h_t[T]`` entering block ``t`` at the last token ``T``; the
single-token Jacobians at those ``x`` are averaged into ``J̄_t``; ``F_t = O_t V_t``. The token states of
γ/ρ are every content token of the same prompts (real forward pass, as chapter 3's "real" source).
Float64 for every eigen-, singular- and Schur decomposition; Jacobians in column convention.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from lib import alignment_stats as als
from lib import bridge as br
from lib import jacobian as jac
from lib import jacobian_context as jcx
from lib import nonnormal as nn
from lib import spectra, steering
from lib.cumulative import erank_from_singular_values
from lib.funnel_stats import bootstrap_weights
from lib.parallel import map_matrices
from lib.topology import benjamini_hochberg

__all__ = ["ANGLE_TARGETS", "JView", "ModelViews", "analyse", "context_jacobians", "context_table", "float64",
           "in_context_stack",
           "perturbation_errors", "steering_long", "steering_views", "steering_views_at"]

ANGLE_TARGETS: tuple[str, ...] = ("eigenvectors of J̄", "left singular vectors", "right singular vectors",
                                  "funnel image")
"""The subspaces of the Jacobian view that ``v₁(F_t)`` is compared with (result 2)."""


@dataclass
class ModelViews:
    """Everything chapter 6 measures on one model (one row per layer in each table; ``layer`` is 1-based).

    Attributes:
        label, key, series: the model's label, its family key ("MiniLM", "decoder") and the series
            ("trained", "random 0", ...). layout: "pre-norm" or "post-norm". d: the width. n_prompts: P.
        share: result 1: ``share`` = ‖J̄_F‖_F/‖Ū‖_F with ``lo``/``hi`` (bootstrap over prompts) and
            ``sigma_share`` = σ₁(J̄_F)/σ₁(Ū) (the top of the singular spectrum).
        angles: result 2, long format: ``target``, ``k`` (its dimension), ``k_F``, ``theta`` (degrees, the
            smallest principal angle), ``chance_lo`` (5% quantile of the null, degrees), ``p``, ``q`` (BH per target).
        rates: result 3: ``gap_ratio`` of F, ``radius_J`` = ρ(J̄), ``delta_H`` = dep(Ū)/‖Ū‖_F
            (:func:`lib.bridge.relative_departure`), ``erank`` of J̄.
        gamma: result 4, long format: ``view`` ("F_t: v₁" or "J̄_t: v₁"), ``k``, ``gamma``, ``gamma_lo``,
            ``gamma_hi``, ``chance`` (baseline_subspace(d, k)), ``rho``, ``rho_lo``, ``rho_hi``, the nulls'
            95% quantiles ``gamma_null_hi``, ``rho_null_hi`` (random k-dim subspaces), p-values ``p_gamma``,
            ``p_rho`` and their Benjamini–Hochberg ``q_*`` across layers.
        J_first: ``(L, n, d, d)`` single-token Jacobians of the first ``n`` prompts (result 5).
        Jbar, F: ``(L, d, d)``. eb_F: :class:`lib.alignment_stats.EigenBases` of F; jv: :class:`JView` of J̄.
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
    """The Jacobian view's leading directions per layer (padded like :class:`lib.alignment_stats.EigenBases`).

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
                         p_gamma=als.empirical_p(res.gamma.to_numpy(), g0), p_rho=als.empirical_p(res.rho.to_numpy(), r0))
        res["q_gamma"] = benjamini_hochberg(res.p_gamma.to_numpy())
        res["q_rho"] = benjamini_hochberg(res.p_rho.to_numpy())
        frames.append(res)
    return pd.concat(frames, ignore_index=True)


def analyse(model: Any, texts: Sequence[str], *, key: str, series: str, k: int = 8, n_first: int = 2,
            n_boot: int = 200, m_null: int = 1000, seed: int = 0) -> ModelViews:
    """Both views of every layer of ``model`` on ``texts`` (results 1–4; the Jacobians for result 5).

    Per layer: one float64 eig of ``F_t`` (:func:`lib.alignment_stats.eigen_bases`), one eig and one SVD of
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
    share_rows, rate_rows = [], []
    shares, sigma_F = [], []
    for t in range(L):
        dec = br.decompose(model, t, X[t])
        shares.append(br.bootstrap_share(dec, n_boot=n_boot, seed=seed + t))
        Jbar[t], JF = dec.J.mean(0), dec.J_F.mean(0)
        sigma_F.append(np.linalg.norm(JF, 2))
        J_first[t] = dec.J[: J_first.shape[1]]
        del dec
    # the float64 eigen- and singular decompositions of every layer, one layer per core (lib.parallel)
    eigs = map_matrices(br.sorted_eig, Jbar)
    svds = map_matrices(np.linalg.svd, Jbar)
    P = np.eye(d)
    for t, (eig, svd, (est, lo, hi)) in enumerate(zip(eigs, svds, shares)):
        U = Jbar[t] - ref
        s_U = svd[1][0] if lay == "post-norm" else np.linalg.norm(U, 2)
        share_rows.append({"layer": t + 1, "share": est, "lo": lo, "hi": hi, "sigma_share": sigma_F[t] / s_U})
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
    gamma = _gamma_table(ts, {"F_t: v₁": (eb_F.v1, eb_F.k1), "J̄_t: v₁": (jv.v1, jv.k1)}, n_boot=n_boot,
                         m_null=m_null, seed=seed)
    return ModelViews(
        label=model.label, key=key, series=series, layout=lay, d=d, n_prompts=len(texts),
        share=pd.DataFrame(share_rows), angles=_angle_table(eb_F, jv, ANGLE_DRAWS), rates=rates, gamma=gamma,
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
        (:func:`lib.jacobian_context.in_context_jacobians_closed`), or, for a model without one, autodiff
        (:func:`lib.jacobian.in_context_jacobian`) sequence by sequence.
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


def context_table(views: ModelViews, J_ctx: np.ndarray, k: int = 8) -> pd.DataFrame:
    """Per layer: ``rel_diff`` (median over prompts of ‖J_ctx − J_single‖_F / ‖update of J_ctx‖_F, with its
    min and max), spectral radii, complex fractions and the result-2 angle (top-k eigenvectors) of both means."""
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
                     "rel_max": float(rel.max()),
                     "radius_single": float(np.abs(ls[0])), "radius_ctx": float(np.abs(lc[0])),
                     "fC_single": nn.complex_fraction(ls), "fC_ctx": nn.complex_fraction(lc),
                     "theta_single": theta["single"], "theta_ctx": theta["ctx"]})
    out = pd.DataFrame(rows)
    out.attrs["erank_single"] = _funnel_erank(J_single.mean(1))
    out.attrs["erank_ctx"] = _funnel_erank(J_ctx.mean(1))
    return out


def _funnel_erank(Js: np.ndarray) -> float:
    """Effective rank of the whole funnel ``J_{L−1} ⋯ J_0`` of ``Js`` ``(L, d, d)``: the last entry of
    :func:`lib.nonnormal.cumulative_product` (no truncation), rescaled to unit Frobenius norm at every step
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
    with ``R`` the :func:`lib.bridge.reference` (``I`` pre-norm, ``0`` post-norm): relative to the real change
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
    (:attr:`lib.bridge.Decomposition.write`): where the block's output moves when the attention core's
    output moves along ``u``, the Jacobian view's prediction of the direction the edit writes (its value at
    ``alpha = 0`` uses only the unedited block); ``share`` = ‖J̄_F‖/‖Ū_L‖; ``tokens`` = the mean ``a(x, u)``
    over every token leaving the last block (chapter 5's real-pass measure, before any final norm).

    ``J_write``, ``share`` and ``tokens`` are means over prompts (or a function of them), so each gets a
    prompt-bootstrap percentile interval at ``level`` (columns ``<name>_lo``, ``<name>_hi``; ``n_boot``
    resamples of the ``P`` prompts, :func:`lib.funnel_stats.bootstrap_weights`, the same for every
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
    :func:`lib.page.bridge_plots.steering_chart`: one row per quantity, labelled by ``quantities`` (column → label),
    with ``lo``/``hi`` where the quantity has an interval (NaN otherwise)."""
    parts = []
    for col, label in quantities.items():
        part = steer[["model", "series", "weights", "alpha"]].assign(quantity=label, value=steer[col])
        has = f"{col}_lo" in steer
        parts.append(part.assign(lo=steer[f"{col}_lo"] if has else np.nan, hi=steer[f"{col}_hi"] if has else np.nan))
    return pd.concat(parts, ignore_index=True)
