"""Chapter 6's steering at matched saturation [ours]: how large the O-edit is against the norm it meets, and
where its tokens land as α → ∞.

The O-edit of the last block (:mod:`lib.methods.steering`) adds ``Δ_i = α u (wᵀ o_i)`` to the output of the
attention's output projection at token ``i`` (``o_i`` the concatenated head outputs, which the edit does not
change). That sum meets a norm: the attention LayerNorm ``LN₁(x + attn + Δ)`` of a post-norm block (BERT),
the MLP's pre-norm of the residual ``r = x + attn + Δ`` of a pre-norm block (Llama). Its **saturation ratio**
is ``‖Δ_i‖ / ‖z_i‖`` with ``z_i`` that norm's input without the edit (:func:`edit_ratios`): ``α`` is counted in
units of ``|λ₁(F_L)|``, which differs between a trained model and its random-init twins, so one α is not one
saturation. :func:`matched_alphas` gives each twin the α at which its ratio equals the trained model's.

As ``α → ∞`` the norm sees only ``±u`` (the sign of ``wᵀ o_i``), so every token leaves the block at one of two
**fixed points** (:func:`fixed_points`): for a post-norm block ``y± = LN₂(h± + MLP(h±))`` with
``h± = LN₁(±u)``, set by the block's LayerNorm gains and biases and its MLP; for a pre-norm block the skip
carries ``±α u`` past the norm, so ``y±`` lies along ``u`` (alignment 1). :func:`ceiling` averages
``a(y_{sign(wᵀo_i)}, u)`` over the tokens, the token alignment a saturated edit converges to, and
:func:`unit_norms` sets the block's LayerNorm gains to 1 and biases to 0 (the ablation).

Shapes: token states as rows ``(n, d)``; ``u`` unit ``(d,)``; float64 for every number returned.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from lib.linalg import spectra
from lib.methods import bridge as br
from lib.methods import steering
from lib.parallel import map_matrices
from lib.stats import bootstrap_weights

if TYPE_CHECKING:
    from lib.chapters.two_views import TwinViews
    from lib.models import SpectralModel

__all__ = ["CEILING_TOL", "COLLAPSE", "NORM_VARIANTS", "SATURATION_FAMILIES", "Saturation", "ceiling", "ceiling_cause", "ceiling_verdict",
           "collapse_verdict",
           "collapses", "edit_ratios",
           "fixed_points", "geometric_interval", "matched_alphas", "ratio_summary", "saturation_twins",
           "saturation_words", "unit_norms"]

NORM_VARIANTS: dict[str, tuple[bool, bool, bool]] = {
    "as trained": (False, False, True), "LN₁ gains 1, biases 0": (True, False, True),
    "LN₂ gains 1, biases 0": (False, True, True), "both LayerNorms gains 1, biases 0": (True, True, True),
    "MLP removed": (False, False, False)}
"""The fixed points :func:`saturation_twins` computes: label → (ablate ``LN₁``, ablate ``LN₂``, keep the MLP)."""


SATURATION_FAMILIES: tuple[str, ...] = ("bert", "llama")
"""The block families whose norms the saturation analysis knows (:func:`_norms`): BERT's post-LayerNorm block and
Llama's pre-norm block. Another family's edit meets other norms (OLMo-2's and Gemma-2's normalise the attention's
output itself), which :func:`edit_ratios` and :func:`fixed_points` do not model."""


def saturation_words(views: TwinViews, words: Mapping[str, str]) -> tuple[dict[str, str], str]:
    """The entries of ``words`` (model key → steering word) whose trained model is of :data:`SATURATION_FAMILIES`,
    and one line naming the others, which :func:`saturation_twins` then leaves out ("" when none is)."""
    kept = {key: w for key, w in words.items() if views.model(key).family in SATURATION_FAMILIES}
    left = [f"{views.model(key).label} ({views.model(key).family})" for key in words if key not in kept]
    note = (f"Skipped at matched saturation: {', '.join(left)}; the saturation analysis knows the BERT and Llama "
            "blocks only (its steering on the book's grid above stands)." if left else "")
    return kept, note


def _norms(model: SpectralModel, t: int) -> tuple[torch.nn.Module, torch.nn.Module | None]:
    """``(norm the edit meets, the block's closing norm or None)`` of block ``t`` (BERT or Llama families)."""
    blk = model.blocks[t]
    if model.family == "bert":
        return blk.attention.output.LayerNorm, blk.output.LayerNorm
    if model.family == "llama":
        return blk.post_attention_layernorm, None
    raise ValueError(f"{model.family}: the saturation analysis knows the BERT and Llama blocks only")


@torch.no_grad()
def edit_ratios(model: SpectralModel, u: Any, alphas: Sequence[float], states: Sequence[Any]) -> pd.DataFrame:
    """The O-edit's size against the norm input it meets, per prompt and relative strength ``alpha``.

    ``states``: the ``P`` per-prompt residual streams ``(L+1, n, d)``; entry ``L−1`` is run once through the
    unedited last block, recording ``o_i`` (input of the output projection) and ``z_i`` (input of the norm
    the edit meets, :func:`_norms`). Since ``Δ_i = α u (wᵀ o_i)`` with the absolute ``α`` of
    :func:`lib.methods.steering.prepare_edit`, ``‖Δ_i‖ / ‖z_i‖ = α |wᵀ o_i| / ‖z_i‖`` for every ``alpha``
    from that one pass.

    Returns:
        Long format: ``alpha`` (relative, as given), ``prompt`` (0..P−1), ``ratio`` (mean over the prompt's
        tokens of ``‖Δ_i‖ / ‖z_i‖``), ``plus`` (fraction of its tokens with ``wᵀ o_i > 0``).
    """
    t = model.n_layers - 1
    u = steering.as_direction(u, model.d_model).vector
    norm, _ = _norms(model, t)
    out_proj = model.adapter.output_module(model.blocks[t])
    seen: dict[str, torch.Tensor] = {}
    hooks = [out_proj.register_forward_pre_hook(lambda _m, a: seen.__setitem__("o", a[0].detach())),
             norm.register_forward_pre_hook(lambda _m, a: seen.__setitem__("z", a[0].detach()))]
    try:
        per = []
        for H in states:
            model.layer(t)(torch.as_tensor(H[t]))
            o, z = (spectra.as_float64(seen[k]).reshape(-1, seen[k].shape[-1]) for k in ("o", "z"))
            per.append((o, np.linalg.norm(z, axis=1)))
    finally:
        for h in hooks:
            h.remove()
    unit = steering.prepare_edit(model, u, 1.0)  # absolute α and w of relative α = 1 (α is linear in it)
    rows = []
    for alpha in alphas:
        scale = unit.alpha * float(alpha)  # absolute α (0: no edit)
        for p, (o, zn) in enumerate(per):
            c = o @ unit.w
            rows.append({"alpha": float(alpha), "prompt": p, "ratio": float(np.mean(scale * np.abs(c) / zn)),
                         "plus": float(np.mean(c > 0))})
    return pd.DataFrame(rows)


def geometric_interval(r: Any, *, n_boot: int = 200, seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """Geometric mean of the positive per-prompt values ``r`` ``(P,)`` and its prompt-bootstrap percentile interval.

    The ratios span orders of magnitude, so they are averaged in logs; the resamples are
    :func:`lib.stats.bootstrap_weights` ``(n_boot, P)``. Returns ``(mean, lo, hi)``.
    """
    r = np.asarray(r, dtype=np.float64)
    if r.ndim != 1 or not np.all((r > 0) & np.isfinite(r)):
        raise ValueError("r must be a 1-d array of positive finite values")
    logs = np.log(r)
    boot = bootstrap_weights(len(logs), n_boot, seed) @ logs
    a = (1 - level) / 2
    lo, hi = np.quantile(boot, [a, 1 - a])
    return float(np.exp(logs.mean())), float(np.exp(lo)), float(np.exp(hi))


def ratio_summary(ratios: pd.DataFrame) -> pd.DataFrame:
    """Per ``model``, ``weights``, ``alpha`` and ``matched`` of a tagged :func:`edit_ratios` table (with
    ``radius``): ``ratio`` (geometric mean over prompts), ``ratio_lo``/``ratio_hi`` (:func:`geometric_interval`),
    ``ratio_min``/``ratio_max`` (per prompt), ``random``, ``radius``. α = 0 (no edit) gives ratios of 0."""
    rows = []
    for (key, series, alpha, m), g in ratios.groupby(["model", "weights", "alpha", "matched"], dropna=False,
                                                     sort=False):
        mean, lo, hi = geometric_interval(g.ratio) if alpha > 0 else (0.0, 0.0, 0.0)
        rows.append({"model": key, "weights": series, "random": series != "trained", "alpha": alpha, "matched": m,
                     "ratio": mean, "ratio_lo": lo, "ratio_hi": hi, "ratio_min": g.ratio.min(),
                     "ratio_max": g.ratio.max(), "radius": g.radius.iloc[0]})
    return pd.DataFrame(rows)


def matched_alphas(trained: float, twin: float, alphas: Sequence[float]) -> list[float]:
    """The twin's relative α at which its ratio equals the trained model's at each of ``alphas``.

    ``trained`` and ``twin``: each model's ratio per unit of relative α (the ratio is linear in α,
    :func:`edit_ratios`), so the twin's α is ``alpha · trained / twin``.
    """
    if trained <= 0 or twin <= 0:
        raise ValueError(f"ratios per unit α must be positive, got {trained} and {twin}")
    return [float(a) * trained / twin for a in alphas]


@contextlib.contextmanager
def unit_norms(model: SpectralModel, *, first: bool = True, second: bool = True) -> Iterator[None]:
    """Set the last block's LayerNorm gains to 1 and biases to 0 (``first``: the norm the edit meets,
    ``second``: the closing norm of a post-norm block) for the duration of a ``with`` block; restored after."""
    t = model.n_layers - 1
    mods = [m for m, on in zip(_norms(model, t), (first, second)) if on and m is not None]
    saved = [{k: p.detach().clone() for k, p in m.named_parameters(recurse=False)} for m in mods]
    try:
        with torch.no_grad():
            for m in mods:
                m.weight.fill_(1.0)
                if getattr(m, "bias", None) is not None:
                    m.bias.zero_()
        yield
    finally:
        with torch.no_grad():
            for m, s in zip(mods, saved):
                for k, p in m.named_parameters(recurse=False):
                    p.copy_(s[k])


@torch.no_grad()
def fixed_points(model: SpectralModel, u: Any, *, mlp: bool = True) -> np.ndarray:
    """The last block's outputs as ``α → ∞`` for tokens pushed to ``+u`` and to ``−u``: ``(2, d)`` float64.

    Post-norm (BERT): ``LN₁`` sees only ``±u`` (its other inputs vanish against ``α u``), so the block returns
    ``y± = LN₂(h± + MLP(h±))``, ``h± = LN₁(±u)``. Pre-norm (Llama): the residual ``r = ±α u + O(1)`` passes the
    skip, and the MLP adds a bounded vector, so ``y±/‖y±‖ → ±u``: returned as ``±u``. ``mlp=False`` (post-norm
    only) leaves the MLP out: ``y± = LN₂(h±)``.
    """
    t = model.n_layers - 1
    u = steering.as_direction(u, model.d_model).vector
    if model.family == "llama":
        return np.stack([u, -u])
    blk = model.blocks[t]
    ln1, _ = _norms(model, t)
    p = next(blk.parameters())
    pm = torch.as_tensor(np.stack([u, -u]), dtype=p.dtype, device=p.device)
    h = ln1(pm)
    return spectra.as_float64(blk.output(blk.intermediate(h), h) if mlp else blk.output.LayerNorm(h))


def ceiling(y: np.ndarray, u: Any, plus: Any, counts: Any) -> float:
    """The token alignment a saturated edit converges to: ``a(y₊, u)`` for the tokens pushed to ``+u`` and
    ``a(y₋, u)`` for the rest, pooled over tokens as chapter 6's ``tokens`` (``plus``, ``counts``: per prompt,
    the fraction of tokens pushed to ``+u`` and the number of tokens; ``y``: :func:`fixed_points`)."""
    u = np.asarray(u, dtype=np.float64)
    a = np.abs(y @ u) / (np.linalg.norm(y, axis=1) * np.linalg.norm(u))
    plus, counts = np.asarray(plus, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    return float((counts * (plus * a[0] + (1 - plus) * a[1])).sum() / counts.sum())


@dataclass
class Saturation:
    """What :func:`saturation_twins` measured.

    Attributes:
        ratios: per model, α and prompt (:func:`edit_ratios`), tagged ``model``, ``weights``, ``random``,
            ``radius`` and ``matched`` (NaN on the book's grid; for a twin's matched α, the grid α it is matched to).
        summary: per model and α: ``ratio`` (geometric mean over prompts), ``ratio_lo``/``ratio_hi`` (its
            95% prompt-bootstrap interval), ``ratio_min``/``ratio_max`` (per prompt), ``matched``, ``radius``
            (``|λ₁(F_L)|``, the unit of the relative α).
        matched: :func:`lib.chapters.two_views.steering_views_at` of every twin at its matched α's, tagged
            like :func:`lib.chapters.two_views.steering_twins` plus ``matched``.
        ceilings: per model and :data:`NORM_VARIANTS` label (``norms``): ``predicted`` (:func:`ceiling`).
        post_norm: the model keys whose block is post-norm (:func:`lib.methods.bridge.layout`).
    """

    ratios: pd.DataFrame
    summary: pd.DataFrame
    matched: pd.DataFrame
    ceilings: pd.DataFrame
    post_norm: list[str]


def saturation_twins(views: TwinViews, words: Mapping[str, str], alphas: Sequence[float], n: int,
                     match: Sequence[float]) -> Saturation:
    """:func:`edit_ratios` of every model of the keys of ``words`` on its first ``n`` prompts at ``alphas``; every
    twin re-steered at the α's where its ratio matches its trained model's at each of ``match`` (grid values); the
    fixed-point ceilings of every model under each of :data:`NORM_VARIANTS` (pre-norm models: the as trained only,
    their limit does not depend on the norm). One model per core. Keys whose block the analysis does not know are
    refused by :func:`_norms`: leave them out with :func:`saturation_words`."""
    from lib.chapters.two_views import steering_views_at, twin_label
    from lib.jacobians import sweep as jac

    def direction(key: str, m: Any) -> np.ndarray:
        return steering.word_direction(m, words[key]).vector

    def ratios(item: tuple[tuple[str, str], Any]) -> pd.DataFrame:
        (key, series), v = item
        m = views.model(key, series)
        r = edit_ratios(m, direction(key, m), [*alphas, 1.0], v.states[:n])
        radius = steering.prepare_edit(m, direction(key, m), 1.0).radius
        return r.assign(model=key, weights=series, random=series != "trained", radius=radius)

    items = [it for it in views.items() if it[0][0] in words]
    r = pd.concat(map_matrices(ratios, items), ignore_index=True)
    unit = {(k, s): geometric_interval(g.ratio)[0] for (k, s), g in r[r.alpha == 1.0].groupby(["model", "weights"])}
    r = r[r.alpha.isin([float(a) for a in alphas])].assign(matched=np.nan)

    def resteer(item: tuple[tuple[str, str], Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
        (key, series), v = item
        m = views.model(key, series)
        at = matched_alphas(unit[(key, "trained")], unit[(key, series)], match)
        texts = views.texts[key][:n]
        X_last = torch.stack([h[m.n_layers - 1, jac.last_token_index(m, s)] for h, s in zip(v.states[:n], texts)])
        u = direction(key, m)
        sv = steering_views_at(m, u, at, X_last, v.states[:n]).assign(matched=[float(a) for a in match])
        rr = edit_ratios(m, u, at, v.states[:n]).assign(matched=np.repeat([float(a) for a in match], n))
        tag = {"model": key, "weights": series, "random": True, "radius": float(r[(r.model == key) & (
            r.weights == series)].radius.iloc[0])}
        return v.tag(sv).assign(weights=series), rr.assign(**tag)

    twins = [it for it in items if it[0][1] != "trained"]
    done = map_matrices(resteer, twins)
    matched = pd.concat([d[0] for d in done], ignore_index=True)
    matched["series"] = twin_label(matched.assign(series=matched.weights))
    r = pd.concat([r, *[d[1] for d in done]], ignore_index=True)

    summary = ratio_summary(r)

    crow = []
    for (key, series), v in items:
        m = views.model(key, series)
        u = direction(key, m)
        g = r[(r.model == key) & (r.weights == series) & (r.alpha == float(max(alphas))) & r.matched.isna()]
        counts = [int(H.shape[1]) for H in v.states[:n]]
        variants = NORM_VARIANTS if m.family == "bert" else {"as trained": (False, False, True)}
        for label, (first, second, mlp) in variants.items():
            with unit_norms(m, first=first, second=second):
                y = fixed_points(m, u, mlp=mlp)
            crow.append({"model": key, "weights": series, "random": series != "trained", "norms": label,
                         "predicted": ceiling(y, u, g.plus.to_numpy(), counts)})
    post = [k for k in words if br.layout(views.model(k)) == "post-norm"]
    return Saturation(r, summary, matched, pd.DataFrame(crow), post)


COLLAPSE = 0.5
"""A Jacobian view has collapsed when its number is under this fraction of its unedited (or largest) value."""
CEILING_TOL = 0.02
"""How far a fixed point's alignment may sit from the measured token level and still predict it."""


def ceiling_cause(ceilings: pd.DataFrame, key: str) -> str:
    """Which part of the trained last block sets its lower ceiling, as a clause: "which the trained MLP sets, not
    the LayerNorm gains", or what the numbers say instead.

    Rule [ours]: a part *sets* the ceiling when taking it out (:data:`NORM_VARIANTS`: the MLP removed; either or both
    LayerNorms at gains 1 and biases 0) raises the trained block's fixed point to the twins' (within
    :data:`CEILING_TOL` of the lowest twin's). ``ceilings``: :attr:`Saturation.ceilings`, the model ``key``'s rows
    with every variant for the trained weights and "as trained" for the twins.
    """
    c = ceilings[ceilings.model == key]
    trained = c[~c.random].set_index("norms").predicted
    twins_lo = float(c[c.random & (c.norms == "as trained")].predicted.min())
    reaches = {label: float(v) >= twins_lo - CEILING_TOL for label, v in trained.items() if label != "as trained"}
    mlp = reaches.pop("MLP removed")
    norms = any(reaches.values())
    if mlp and not norms:
        return "which the trained MLP sets, not the LayerNorm gains"
    if norms and not mlp:
        return "which the trained LayerNorm gains set, not the MLP"
    if mlp and norms:
        return "which the trained MLP and the LayerNorm gains each set (taking out either one lifts it)"
    return "which neither the trained MLP nor the LayerNorm gains sets alone (taking out either one leaves it low)"


def collapses(rows: pd.DataFrame, top: pd.Series) -> bool:
    """Whether the Jacobian view of one model has collapsed at the edit ``top`` (one row of
    :func:`lib.chapters.two_views.steering_views_at`'s table; ``rows``: the same model's rows on the grid, with
    α = 0): the upper end of a(W̄u, u)'s interval under :data:`COLLAPSE` times the lower end at α = 0, and
    |⟨s₁, u⟩| under :data:`COLLAPSE` times its largest value over the grid."""
    at0 = rows[rows.alpha == 0].iloc[0]
    return bool(top.J_write_hi < COLLAPSE * at0.J_write_lo and top.J_sv < COLLAPSE * rows.J_sv.max())


def _top(steer: pd.DataFrame, matched: pd.DataFrame, key: str, series: str, a_max: float) -> pd.Series:
    """The row of ``key``/``series`` at the largest saturation: the trained model at ``a_max``, a twin at its α
    matched to the trained model's ratio there."""
    if series == "trained":
        return steer[(steer.model == key) & (steer.weights == series) & (steer.alpha == a_max)].iloc[0]
    return matched[(matched.model == key) & (matched.weights == series) & (matched.matched == a_max)].iloc[0]


def collapse_verdict(steer: pd.DataFrame, matched: pd.DataFrame, keys: Sequence[str], a_max: float) -> str:
    """Claim TV6's rule [ours]: for each of ``keys`` (the post-norm models, whose edit meets a LayerNorm on
    every path), "not reproduced" if a trained model's Jacobian view does not collapse at ``a_max``
    (:func:`collapses`); else "not specific to training" if every twin's collapses at its matched α,
    "reproduced" if none does, "partly reproduced" in between."""
    if not keys:
        return "not reproduced"
    twins = []
    for key in keys:
        rows = steer[steer.model == key]
        if not collapses(rows[rows.weights == "trained"], _top(steer, matched, key, "trained", a_max)):
            return "not reproduced"
        twins += [collapses(rows[rows.weights == s], _top(steer, matched, key, s, a_max))
                  for s in pd.unique(rows[rows.random].weights)]
    return "not specific to training" if all(twins) else "reproduced" if not any(twins) else "partly reproduced"


def ceiling_verdict(steer: pd.DataFrame, matched: pd.DataFrame, ceilings: pd.DataFrame, keys: Sequence[str],
                    a_max: float) -> str:
    """Claim TV7's rule [ours]: for each of ``keys``, the trained model's tokens saturate *lower* than its twins'
    at matched saturation (the upper end of its interval at ``a_max`` under the lower end of every twin's at the
    matched α), and the fixed point of :func:`ceiling` ("as trained") lies within :data:`CEILING_TOL` of the
    measured level in every model (trained and twins). "reproduced" if both hold, "partly reproduced" if one,
    "not reproduced" if neither."""
    lower, predicted = [], []
    for key in keys:
        series = list(pd.unique(steer[steer.model == key].weights))
        tops = {s: _top(steer, matched, key, s, a_max) for s in series}
        lower.append(all(tops["trained"].tokens_hi < tops[s].tokens_lo for s in series if s != "trained"))
        for s in series:
            c = ceilings[(ceilings.model == key) & (ceilings.weights == s) & (ceilings.norms == "as trained")]
            predicted.append(abs(float(c.predicted.iloc[0]) - float(tops[s].tokens)) <= CEILING_TOL)
    held = [bool(keys) and all(lower), bool(keys) and all(predicted)]
    return "reproduced" if all(held) else "partly reproduced" if any(held) else "not reproduced"
