"""Chapter 6's steering at matched saturation (claims TV6 and TV7): its chart, its numbers and its tables.

The inputs are :func:`lib.chapters.two_views.steering_twins`'s table (``steer``, the book's α grid) and
:func:`lib.chapters.two_views_saturation.saturation_twins`'s :class:`~lib.chapters.two_views_saturation.Saturation`
(the edit's size against the norm it meets, the twins re-steered at matched size, the fixed points).
"""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from lib.chapters.two_views_saturation import Saturation, ceiling_verdict, collapse_verdict
from lib.page.plotting import model_palette, titled
from lib.page.tables import value_range
from lib.page.two_views import Findings, series_order

__all__ = ["SATURATION_QUANTITIES", "SKIPPED_NAMES", "ceiling_table", "ratio_table", "saturation_chart", "saturation_findings",
           "saturation_long"]

SATURATION_QUANTITIES: dict[str, str] = {"tokens": "tokens leaving block L: mean a(x, u)",
                                         "J_write": "J̄ view: a(W̄u, u)"}
"""The two alignments of the saturation chart: column → label."""


def saturation_long(steer: pd.DataFrame, sat: Saturation) -> pd.DataFrame:
    """Every edit (the grid's α > 0 and the twins' matched α's) with its saturation ratio, in long form:
    ``model``, ``weights``, ``alpha``, ``ratio`` (geometric mean over prompts), ``quantity`` (a label of
    :data:`SATURATION_QUANTITIES`), ``value``, ``lo``, ``hi``."""
    s = sat.summary
    grid = steer[steer.alpha > 0].merge(s[s.matched.isna()][["model", "weights", "alpha", "ratio"]],
                                        on=["model", "weights", "alpha"])
    extra = sat.matched.merge(s[s.matched.notna()][["model", "weights", "alpha", "ratio"]],
                              on=["model", "weights", "alpha"])
    both = pd.concat([grid, extra], ignore_index=True)
    parts = [both[["model", "weights", "alpha", "ratio"]].assign(
        quantity=label, value=both[col], lo=both[f"{col}_lo"], hi=both[f"{col}_hi"])
        for col, label in SATURATION_QUANTITIES.items()]
    return pd.concat(parts, ignore_index=True)


def saturation_chart(df: pd.DataFrame, *, model: str) -> alt.TopLevelMixin:
    """Token alignment and a(W̄u, u) against the edit's size over the norm input it meets (log axis): a panel per
    model and quantity (a row per quantity, a column per model where the page is wide enough), one line per weights, bands the 95% prompt-bootstrap intervals
    (``df``: :func:`saturation_long`)."""
    domain, colours = model_palette(series_order(df.weights))
    base = alt.Chart().encode(
        x=alt.X("ratio:Q", title="‖edit‖ / ‖input of the norm it meets‖ (log)", scale=alt.Scale(type="log")),
        color=alt.Color("weights:N", title=None, scale=alt.Scale(domain=domain, range=colours),
                        legend=alt.Legend(orient="bottom", columns=3, title=None, symbolOpacity=1)),
        detail="weights:N")
    line = base.mark_line(point=True).encode(
        y=alt.Y("value:Q", title="|cos| with u", scale=alt.Scale(domain=[0, 1])),
        tooltip=["weights:N", "quantity:N", alt.Tooltip("alpha:Q", format=".3g"),
                 alt.Tooltip("ratio:Q", format=".3g"), alt.Tooltip("value:Q", format=".3f"),
                 alt.Tooltip("lo:Q", format=".3f"), alt.Tooltip("hi:Q", format=".3f")])
    band = base.mark_area(opacity=0.2).encode(y="lo:Q", y2="hi:Q")
    # one wrapped facet (a panel per model and quantity, a row per quantity), not a row × column grid: on a phone
    # the book's charts.js can then stack the panels in one column
    models = list(pd.unique(df.model))
    panels = [f"{m} · {q}" for q in SATURATION_QUANTITIES.values() for m in models]
    data = df.sort_values("ratio").assign(panel=lambda d: d.model + " · " + d.quantity)
    chart = alt.layer(band, line, data=data).properties(width=250, height=120).facet(
        facet=alt.Facet("panel:N", title=None, sort=panels,  # model and quantity on two lines of the header
                        header=alt.Header(labelAnchor="start", labelFontWeight="bold",
                                          labelExpr="split(datum.value, ' · ')")),
        columns=len(models))
    return titled(chart, "The O-edit at matched saturation: alignments against the edit's size", model,
                  "Token alignment with u and the Jacobian view's a(W̄u, u) against the edit's size over the input "
                  "of the norm it meets, per model and weights, with 95% prompt-bootstrap bands.")


def _ci(r: pd.Series, col: str, fmt: str = ".3f") -> str:
    return f"{r[col]:{fmt}} [{r[col + '_lo']:{fmt}}, {r[col + '_hi']:{fmt}}]"


def _ratio(r: pd.Series) -> str:
    return f"{r.ratio:.3g} [{r.ratio_lo:.3g}, {r.ratio_hi:.3g}]"


SKIPPED_NAMES: tuple[str, ...] = ("sr_{}_tr", "sr_{}_radius", "sr_{}_radius_rd", "sr_{}_rd", "sr_{}_match",
                                  "sm_{}_tokens_rd", "sm_{}_tokens_lo", "sm_{}_J_write_rd", "sm_{}_J_sv_rd",
                                  "fp_{}_0", "fp_{}_rd")
"""The names :func:`saturation_findings` glues per model key, "not measured" for a key the saturation analysis left
out (:func:`lib.chapters.two_views_saturation.saturation_words`)."""


def saturation_findings(steer: pd.DataFrame, sat: Saturation, models: str, a_max: float) -> tuple[Findings, Findings]:
    """Claims TV6 (the Jacobian view collapses at saturation) and TV7 (the tokens' ceiling is the fixed point).

    Glued, per model key: ``sr_<key>_tr`` the trained model's ratio at ``a_max`` with its interval,
    ``sr_<key>_radius`` / ``_radius_rd`` the unit of α, ``|λ₁(F_L)|``, trained / twins' range, ``sr_<key>_rd`` the twins' ratios at ``a_max`` (range of geometric means),
    ``sr_<key>_match`` the twins' matched α's; at those: ``sm_<key>_tokens_rd``, ``sm_<key>_J_write_rd``
    (upper ends of the intervals), ``sm_<key>_J_sv_rd``, ``sm_<key>_tokens_lo`` (lowest lower end); per fixed
    point (post-norm models): ``fp_<key>_<i>`` the trained model's predicted ceiling under the ``i``-th
    :data:`lib.chapters.two_views_saturation.NORM_VARIANTS`, ``fp_<key>_rd`` the twins' range.
    """
    s, mt, ce = sat.summary, sat.matched, sat.ceilings
    numbers: dict[str, Any] = {}
    measured6, measured7 = [], []
    for key in pd.unique(steer.model):
        if key not in set(s.model):  # left out at matched saturation (saturation_words): its names say so
            numbers.update({name.format(key): "not measured" for name in SKIPPED_NAMES})
            measured6.append(f"{key}: not measured at matched saturation (a block the analysis does not know)")
            continue
        sk = s[(s.model == key) & s.matched.isna()]
        tr = sk[~sk.random]
        numbers[f"sr_{key}_tr"] = _ratio(tr[tr.alpha == a_max].iloc[0])
        numbers[f"sr_{key}_radius"] = f"{tr.radius.iloc[0]:.2f}"
        numbers[f"sr_{key}_radius_rd"] = value_range(sk[sk.random].groupby("weights").radius.first(), ".2f")
        numbers[f"sr_{key}_rd"] = value_range(sk[sk.random & (sk.alpha == a_max)].ratio, ".3g")
        m = mt[(mt.model == key) & (mt.matched == a_max)]
        numbers[f"sr_{key}_match"] = value_range(m.alpha, ".2g")
        numbers[f"sm_{key}_tokens_rd"] = value_range(m.tokens, ".3f")
        numbers[f"sm_{key}_tokens_lo"] = f"{m.tokens_lo.min():.3f}"
        numbers[f"sm_{key}_J_write_rd"] = value_range(m.J_write_hi, ".3f")
        numbers[f"sm_{key}_J_sv_rd"] = value_range(m.J_sv, ".3f")
        trow = steer[(steer.model == key) & ~steer.random & (steer.alpha == a_max)].iloc[0]
        judged = "" if key in sat.post_norm else " (pre-norm: the skip bypasses the norm; not judged)"
        measured6.append(f"{key}{judged}: edit/norm input at α = {a_max:g} {numbers[f'sr_{key}_tr']} trained, "
                         f"{numbers[f'sr_{key}_rd']} twins (matched at twin α {numbers[f'sr_{key}_match']}); "
                         f"a(W̄u, u) upper end {trow.J_write_hi:.3f} trained, {numbers[f'sm_{key}_J_write_rd']} "
                         "twins at matched size")
        c = ce[ce.model == key]
        for i, label in enumerate(pd.unique(c.norms)):
            numbers[f"fp_{key}_{i}"] = f"{c[~c.random & (c.norms == label)].predicted.iloc[0]:.3f}"
        numbers[f"fp_{key}_rd"] = value_range(c[c.random & (c.norms == c.norms.iloc[0])].predicted, ".3f")
        if key in sat.post_norm:
            ablated = "; ".join(f"{label} {numbers[f'fp_{key}_{i}']}" for i, label in enumerate(pd.unique(c.norms))
                                if i > 0)
            measured7.append(f"{key}: tokens at saturation {_ci(trow, 'tokens')} trained, "
                             f"{numbers[f'sm_{key}_tokens_rd']} twins at matched size; fixed point "
                             f"{numbers[f'fp_{key}_0']} trained, {numbers[f'fp_{key}_rd']} twins; "
                             f"trained block with {ablated}")
    post = sat.post_norm
    tv6 = Findings(numbers, {"models": models, "measured": "; ".join(measured6),
                             "verdict": collapse_verdict(steer, mt, post, a_max)})
    tv7 = Findings({}, {"models": models, "measured": "; ".join(measured7),
                        "verdict": ceiling_verdict(steer, mt, ce, post, a_max)})
    return tv6, tv7


def ratio_table(sat: Saturation) -> pd.DataFrame:
    """The edit's size against the norm input it meets, per model, weights and α, with the reader's labels."""
    s = sat.summary.sort_values(["model", "random", "weights", "alpha"])
    return pd.DataFrame({
        "model": s.model, "weights": s.weights, "α|c| / |λ₁|": s.alpha.map(lambda a: f"{a:.3g}"),
        "matched to trained α": s.matched.map(lambda a: "–" if np.isnan(a) else f"{a:g}"),
        "‖edit‖ / ‖norm input‖ (geometric mean)": s.ratio.map(lambda v: f"{v:.3g}"),
        "95% CI": [f"{lo:.3g}–{hi:.3g}" for lo, hi in zip(s.ratio_lo, s.ratio_hi)],
        "per prompt": [f"{lo:.3g}–{hi:.3g}" for lo, hi in zip(s.ratio_min, s.ratio_max)]}).reset_index(drop=True)


def ceiling_table(sat: Saturation) -> pd.DataFrame:
    """The fixed points' token alignment per model, weights and variant of the last block, with the reader's
    labels."""
    c = sat.ceilings
    return pd.DataFrame({"model": c.model, "weights": c.weights, "last block": c.norms,
                         "fixed point: predicted token alignment": c.predicted.map(lambda v: f"{v:.3f}")})
