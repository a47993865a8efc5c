"""Altair set-up and the figures that several chapters share.

Every figure in the book says which model made it: pass ``model=`` (a model label such as
``"all-MiniLM-L6-v2 (trained)"``) and the chart's title carries it as a subtitle.
"""

from __future__ import annotations

import re
import textwrap
import uuid
from collections.abc import Sequence
from functools import cache

import altair as alt
import numpy as np
import pandas as pd

from lib.config import in_book_build

__all__ = [
    "BOOK_THEME",
    "BOTTOM_LEGEND",
    "EIGEN_COLORS",
    "LABEL_PX",
    "NULL_COLOR",
    "OFFLINE_RENDERER",
    "OTHER_COLORS",
    "RANDOM_COLOR",
    "RANDOM_COLORS",
    "SUBTITLE_CHARS",
    "TITLE_PX",
    "TRAINED_COLOR",
    "TWIN_BAND_OPACITY",
    "configure_renderer",
    "eigenvalue_chart",
    "line_chart",
    "model_color",
    "model_kind",
    "model_palette",
    "other_colors",
    "series_color",
    "side_by_side",
    "titled",
    "toy_label",
    "twin_band",
    "twin_band_label",
    "twin_band_layers",
    "unit_circle",
    "vega_bundle_script",
]

BOTTOM_LEGEND = alt.Legend(orient="bottom")
"""A legend under the chart (the book's charts keep the column's width for the plot)."""

OFFLINE_RENDERER = "spectral-offline"


@cache
def vega_bundle_script() -> str:
    """JavaScript defining ``vega``, ``vegaLite`` and ``vegaEmbed`` with no network, for Altair.

    Made from ``vl_convert.javascript_bundle()`` (which sets ``window.vegaEmbed`` etc.) wrapped in a
    function, followed by the ``window.VEGA_DEBUG`` version record that Altair's HTML output checks
    before it would fetch the libraries from a CDN.
    """
    import vl_convert as vlc

    bundle = vlc.javascript_bundle(vl_version=alt.VEGALITE_VERSION.rsplit(".", 1)[0])
    record = (
        "window.VEGA_DEBUG = Object.assign(window.VEGA_DEBUG || {}, {"
        f'vega_version: "{alt.VEGA_VERSION}", '
        f'vegalite_version: "{alt.VEGALITE_VERSION}", '
        f'vegaembed_version: "{alt.VEGAEMBED_VERSION}"}});\n'
    )
    return "(function () {\n" + bundle + "\n})();\n" + record


class _OfflineHtmlRenderer:
    """Altair renderer for JupyterLab without network: HTML output that carries its own Vega.

    The first chart of a kernel session inlines :func:`vega_bundle_script` (about 0.9 MB) in its
    output; later charts find ``vegaEmbed`` already defined in the page. JupyterLab 4 cannot render
    Vega-Lite 6 mimetype output natively, and Altair's plain ``html`` renderer would fetch the
    libraries from a CDN.
    """

    def __init__(self) -> None:
        self.sent = False

    def __call__(self, spec: dict, **kwargs: object) -> dict[str, str]:
        from altair.utils.html import spec_to_html

        html = spec_to_html(
            spec,
            mode="vega-lite",
            vega_version=alt.VEGA_VERSION,
            vegaembed_version=alt.VEGAEMBED_VERSION,
            vegalite_version=alt.VEGALITE_VERSION,
            output_div=f"altair-viz-{uuid.uuid4().hex}",
            fullhtml=False,
            template="universal",  # loads nothing when VEGA_DEBUG records the versions
        )
        if not self.sent:
            html = f"<script type=\"text/javascript\">{vega_bundle_script()}</script>\n{html}"
            self.sent = True
        return {"text/html": html}


alt.renderers.register(OFFLINE_RENDERER, _OfflineHtmlRenderer())

# -- one colour for trained weights, one family for random init, in every chapter ----------------------------
# Okabe & Ito's colour-blind-safe palette: blue against orange/vermillion/purple stays apart under
# deuteranopia, protanopia and tritanopia (tests/unit/test_plotting.py simulates each).
TRAINED_COLOR = "#0072B2"
"""Trained weights, in every chart of the book (Okabe–Ito blue)."""
RANDOM_COLORS = ("#E69F00", "#D55E00", "#8C510A")
"""Random-init twins, seed by seed (Okabe–Ito orange and vermillion, then brown; repeated beyond three), where a
chart must tell the seeds apart. Most charts draw the twins as one band (:func:`twin_band`) in :data:`RANDOM_COLOR`."""
RANDOM_COLOR = RANDOM_COLORS[0]
"""The random-init twins together: one band over the seeds (:func:`twin_band`), one legend entry."""
TWIN_BAND_OPACITY = 0.3
"""Opacity of a twin band's fill (its median line and outline are opaque)."""
OTHER_COLORS = ("#009E73", "#56B4E9", "#CC79A7", "#000000", "#999999")
"""Any other series of a chart that also shows models (toys, real checkpoints): Okabe–Ito's other colours."""
EIGEN_COLORS = ("#000000", "#009E73", "#999999")
"""Eigenvalue clouds: λ₁ (black), complex (green) and real (grey) eigenvalues, apart from the model colours."""
NULL_COLOR = "#9E9E9E"
"""Null bands, chance levels and other references drawn behind the data."""
_TRAINED = re.compile(r"\btrained\b", re.I)
_RANDOM = re.compile(r"\brandom(?:[- ]init\b|[- ]initiali[sz]\w*|\s+(?:twin|seed)\b|\s+\d+\b)", re.I)


def model_kind(label: object) -> str | None:
    """``"trained"``, ``"random"`` (a random-init twin) or ``None`` for a series label such as
    ``"all-MiniLM-L6-v2 (trained)"``, ``"random init, seed 1"``, ``"random 2"`` or ``"toy F"``."""
    text = str(label)
    if _RANDOM.search(text):
        return "random"
    return "trained" if _TRAINED.search(text) else None


def twin_band_label(n_seeds: int) -> str:
    """The legend's name of the random-init twins drawn as one band: ``"random init, 3 seeds"``."""
    if n_seeds < 1:
        raise ValueError(f"a twin band needs at least one seed, got {n_seeds}")
    return f"random init, {n_seeds} seed{'s' if n_seeds > 1 else ''}"


def twin_band(df: pd.DataFrame, *, keys: Sequence[str], values: Sequence[str], field: str = "series") -> pd.DataFrame:
    """``df`` with its random-init twins (rows whose ``field`` is a random-init label, :func:`model_kind`) collapsed
    into one band: per combination of ``keys`` (x, panel), one row labelled :func:`twin_band_label` whose columns
    ``<v>_min`` / ``<v>_max`` are the least and greatest of the seeds' ``v`` and ``v`` itself their median, for each
    ``v`` of ``values``; other columns keep the first seed's value. Rows of other series are kept as they are
    (``<v>_min``/``<v>_max`` NaN). A column ``band`` (bool) tells the band's rows apart; ``n_seeds`` counts the
    seeds of each band row.

    So a chart draws trained weights as a line (or points) in :data:`TRAINED_COLOR` and its twins as one
    :data:`RANDOM_COLOR` band with one legend entry, instead of one near-identical orange line per seed.
    """
    missing = [c for c in (field, *keys, *values) if c not in df.columns]
    if missing:
        raise ValueError(f"twin_band: columns {missing} not in the frame (has {list(df.columns)})")
    is_twin = np.array([model_kind(v) == "random" for v in df[field]], dtype=bool)
    rest = df[~is_twin].assign(band=False, n_seeds=1)
    for v in values:
        rest[f"{v}_min"] = np.nan
        rest[f"{v}_max"] = np.nan
    twins = df[is_twin]
    if twins.empty:
        return rest.reset_index(drop=True)
    label = twin_band_label(twins[field].nunique())
    keys = list(keys)
    others = [c for c in df.columns if c not in (field, *keys, *values)]
    agg: dict = {c: "first" for c in others}
    for v in values:
        agg[v] = "median"
    grouped = twins.groupby(keys, sort=False, dropna=False) if keys else twins.groupby(np.zeros(len(twins)))
    band = grouped.agg(agg)
    for v in values:
        band[f"{v}_min"] = grouped[v].min()
        band[f"{v}_max"] = grouped[v].max()
    band["n_seeds"] = grouped[field].nunique()
    band = (band.reset_index() if keys else band.reset_index(drop=True)).assign(band=True)
    band[field] = label
    return pd.concat([rest, band[list(rest.columns)]], ignore_index=True)


def twin_band_layers(x: alt.X, value: str, colour: alt.Color, *, field: str = "series", y_scale: alt.Scale | object = alt.Undefined,
                     x_offset: alt.XOffset | object = alt.Undefined, detail: str | None = None,
                     fmt: str = ".3f") -> list[alt.Chart]:
    """The layers that draw the band rows of :func:`twin_band` (``datum.band``): for a quantitative ``x`` a
    filled area from ``<value>_min`` to ``<value>_max`` and the seeds' median as a line; for a discrete ``x``
    (with the series as ``x_offset``) a bar over the same range, outlined, with a tick at the median. Data-less
    (the caller's :func:`alt.layer` brings the data); ``field``: the series column (tooltip); ``detail``: a field that splits the area (e.g. a product).
    The twins' bars never hide the trained marks: draw these layers first."""
    band = alt.Chart().transform_filter("datum.band")
    lo, hi = f"{value}_min", f"{value}_max"
    tips = [alt.Tooltip(f"{field}:N"),
            alt.Tooltip(f"{value}:Q", format=fmt, title="median over the seeds"),
            alt.Tooltip(f"{lo}:Q", format=fmt, title="least seed"), alt.Tooltip(f"{hi}:Q", format=fmt, title="greatest seed")]
    extra = {"detail": alt.Detail(f"{detail}:N")} if detail else {}
    discrete = getattr(x, "type", None) in ("ordinal", "nominal") or str(getattr(x, "shorthand", "")).endswith((":O", ":N"))
    if discrete:
        area = band.mark_bar(fillOpacity=TWIN_BAND_OPACITY, stroke=RANDOM_COLOR, strokeWidth=1.5).encode(
            x=x, xOffset=x_offset, y=alt.Y(f"{lo}:Q", scale=y_scale), y2=f"{hi}:Q", color=colour,
            tooltip=tips, **extra)
        mid = band.mark_tick(thickness=2).encode(x=x, xOffset=x_offset, y=alt.Y(f"{value}:Q", scale=y_scale),
                                                 color=colour, **extra)
    else:
        area = band.mark_area(opacity=TWIN_BAND_OPACITY).encode(
            x=x, y=alt.Y(f"{lo}:Q", scale=y_scale), y2=f"{hi}:Q", color=colour, tooltip=tips, **extra)
        mid = band.mark_line(strokeWidth=1.5).encode(x=x, y=alt.Y(f"{value}:Q", scale=y_scale), color=colour,
                                                     **extra)
    return [area, mid]


def model_palette(labels: Sequence[object]) -> tuple[list[str], list[str]]:
    """``(domain, range)`` of a colour scale over ``labels`` (order kept, duplicates dropped): trained series
    in :data:`TRAINED_COLOR`, the random-init twins in :data:`RANDOM_COLORS` in order, the others in
    :data:`OTHER_COLORS`."""
    domain = [str(x) for x in dict.fromkeys(labels)]
    n_random = n_other = 0
    colours = []
    for label in domain:
        kind = model_kind(label)
        if kind == "trained":
            colours.append(TRAINED_COLOR)
        elif kind == "random":
            colours.append(RANDOM_COLORS[n_random % len(RANDOM_COLORS)])
            n_random += 1
        else:
            colours.append(OTHER_COLORS[n_other % len(OTHER_COLORS)])
            n_other += 1
    return domain, colours


def model_color(field: str, labels: Sequence[object], *, title: str | None = None,
                legend: alt.Legend | None | object = alt.Undefined) -> alt.Color:
    """A nominal colour encoding of ``field`` whose scale follows :func:`model_palette` over ``labels``
    (the values the chart draws, in legend order). Every chart that tells trained from random init uses it."""
    domain, colours = model_palette(labels)
    return alt.Color(f"{field}:N", title=title, scale=alt.Scale(domain=domain, range=colours), legend=legend)


BOOK_THEME = "spectral-book"
LABEL_PX = 11
"""Tick and legend labels, in px (the book theme's; Vega's default is 10)."""
TITLE_PX = 12
"""Axis, legend and facet titles and facet headers, in px (Vega's default is 11, facet headers 10)."""
SUBTITLE_CHARS = 96
"""Subtitle lines are wrapped at this many characters (about 560 px at Vega's 11 px subtitle font), so
that a long list of models cannot widen a chart beyond the page's text column."""


@alt.theme.register(BOOK_THEME, enable=True)
def _book_theme() -> alt.theme.ThemeConfig:
    """Vega-Lite's defaults, except that labels naming models are never cut short: legend labels
    have no length limit (Vega's default of 160 px cut "… (random init, seed 1)" to "… (random init,
    se…", so the seeds were indistinguishable), axis labels get 320 px instead of 180, and the labels of
    a discrete x axis (layer numbers, head counts: all short) stand upright instead of turned 90°.

    For a screen reader a chart is one image whose text alternative is its description (:func:`titled`; Vega
    puts it on the chart's ``role="graphics-document"`` box), with its title and legends: the marks are hidden
    from assistive technology (``mark.aria: false``). Vega would otherwise give every point, bar and rule its
    own label (thousands on a page of eigenvalue clouds, in raw column names and twelve-digit numbers), and a
    layer left with no data in one panel of a faceted chart an unnamed ``graphics-symbol`` (axe's
    svg-img-alt). Most figures also give their numbers in a table behind a click.

    Text is a size a reader takes in at a glance: tick and legend labels :data:`LABEL_PX` (Vega's default is 10 px),
    axis, legend and facet titles :data:`TITLE_PX` (11 px). The site draws each chart at its own size (never scaled
    down: a chart too wide for a phone scrolls in its box or is re-laid out, ``book/_static/charts.js``), so these
    are the sizes on the screen; ``tests/browser/test_screens.py`` measures them."""
    return {"config": {"mark": {"aria": False},
                       "legend": {"labelLimit": 0, "titleLimit": 0, "labelFontSize": LABEL_PX, "titleFontSize": TITLE_PX},
                       "axis": {"labelLimit": 320, "labelFontSize": LABEL_PX, "titleFontSize": TITLE_PX},
                       "header": {"labelFontSize": TITLE_PX, "titleFontSize": TITLE_PX},
                       "axisXDiscrete": {"labelAngle": 0}}}


def configure_renderer() -> str:
    """Choose Altair's renderer for where the code runs, and return its name.

    * In the book build (``SPECTRAL_BOOK_BUILD=1``) charts use the ``html`` renderer; the site ships
      the Vega scripts itself (``book/_ext/offline_assets.py``), so pages work offline.
    * Elsewhere (JupyterLab) the :data:`OFFLINE_RENDERER`, whose first chart carries the scripts.
    """
    name = "html" if in_book_build() else OFFLINE_RENDERER
    alt.renderers.enable(name)
    alt.data_transformers.disable_max_rows()
    return name


def titled(chart: alt.TopLevelMixin, title: str, model: str, description: str | None = None) -> alt.TopLevelMixin:
    """Give ``chart`` a title, a subtitle naming the model that produced it, and a description.

    The subtitle is wrapped at word boundaries into lines of at most :data:`SUBTITLE_CHARS`
    characters (a chart comparing several models names them all). The ``description`` (default:
    ``"<title>, for <model>."``) is what Vega gives the chart as its ARIA label, i.e. what a screen
    reader announces.
    """
    lines = textwrap.wrap(f"model: {model}", SUBTITLE_CHARS, break_on_hyphens=False)
    text = description or f"{title.rstrip('.')}, for {model}."
    return chart.properties(title=alt.TitleParams(title, subtitle=lines, anchor="start"), description=text)


def side_by_side(*charts: alt.TopLevelMixin, vertical: bool = False) -> alt.TopLevelMixin:
    """Charts next to each other (or stacked), each keeping its own colour and opacity legends, with one
    description for the whole figure: the parts' descriptions in order (Vega reads only the top level's)."""
    parts = [c.to_dict().get("description", "") for c in charts]
    joined = alt.vconcat(*charts) if vertical else alt.hconcat(*charts)
    return joined.resolve_scale(color="independent", opacity="independent").properties(
        description=" ".join(f"Panel {i + 1}: {p}" for i, p in enumerate(parts) if p) or None)


def unit_circle(radius: float = 1.0, n: int = 256) -> pd.DataFrame:
    """Points ``(re, im)`` on a circle of the given radius, for overlays on eigenvalue plots."""
    t = np.linspace(0, 2 * np.pi, n)
    return pd.DataFrame({"re": radius * np.cos(t), "im": radius * np.sin(t), "order": np.arange(n)})


def eigenvalue_chart(
    eigvals: np.ndarray,
    *,
    model: str,
    layer_labels: Sequence[str] | None = None,
    normalize: bool = True,
    title: str = "Eigenvalues of Fₜ = Oₜ Vₜ",
    width: int = 172,
    height: int = 178,
    columns: int = 3,
) -> alt.TopLevelMixin:
    """Eigenvalue clouds in the complex plane, one small panel per layer.

    Args:
        eigvals: ``(L, d)`` sorted eigenvalues (complex), one row per layer.
        model: label of the model, shown in the subtitle.
        layer_labels: one label per row (default ``"layer 1"`` … ``"layer L"``, 1-based).
        normalize: divide each layer's eigenvalues by its spectral radius, so that every panel shows
            the unit circle and ``λ_1`` sits on it. Without it every panel has its own axes.
    """
    eigvals = np.atleast_2d(np.asarray(eigvals, dtype=np.complex128))
    L, d = eigvals.shape
    labels = list(layer_labels) if layer_labels is not None else [f"layer {t + 1}" for t in range(L)]
    frames = []
    for t in range(L):
        lam = eigvals[t]
        radius = np.abs(lam).max() if normalize and np.abs(lam).max() > 0 else 1.0
        lam = lam / radius
        kind = np.where(np.arange(d) == 0, "λ₁", np.where(np.abs(lam.imag) > 1e-8, "complex", "real"))
        frames.append(
            pd.DataFrame(
                {
                    "layer": labels[t],
                    "re": lam.real,
                    "im": lam.imag,
                    "modulus": np.abs(lam),
                    "rank": np.arange(1, d + 1),
                    "kind": kind,
                }
            )
        )
    # Dashed ring: the circle |λ| = |λ₁| of each layer (the unit circle once normalized).
    frames += [
        unit_circle(1.0 if normalize else float(np.abs(eigvals[t]).max())).assign(layer=labels[t], kind="circle")
        for t in range(L)
    ]
    data = pd.concat(frames, ignore_index=True)
    axis_title = "/ |λ₁|" if normalize else ""
    base = alt.Chart(data)
    points = (
        base.transform_filter("datum.kind != 'circle'")
        .mark_circle(opacity=0.7)
        .encode(
            x=alt.X("re:Q", title=f"Re λ {axis_title}".strip()),
            y=alt.Y("im:Q", title=f"Im λ {axis_title}".strip()),
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=["λ₁", "complex", "real"], range=list(EIGEN_COLORS)),
                title="eigenvalue",
                legend=alt.Legend(orient="bottom", direction="horizontal"),
            ),
            size=alt.condition("datum.kind == 'λ₁'", alt.value(70), alt.value(14)),
            tooltip=[
                "layer:N",
                "rank:Q",
                alt.Tooltip("re:Q", format=".3f"),
                alt.Tooltip("im:Q", format=".3f"),
                alt.Tooltip("modulus:Q", format=".3f"),
            ],
        )
    )
    ring = (
        base.transform_filter("datum.kind == 'circle'")
        .mark_line(color="#999", strokeDash=[3, 3])
        .encode(x="re:Q", y="im:Q", order="order:Q")
    )
    chart = (
        alt.layer(ring, points)
        .properties(width=width, height=height)
        .facet(facet=alt.Facet("layer:N", sort=labels, title=None), columns=columns)
    )
    if not normalize:  # radii can differ by orders of magnitude: each panel gets its own axes
        chart = chart.resolve_scale(x="independent", y="independent")
    return titled(chart, title, model)


def toy_label(d: int, seed: int | str = 0, extra: str = "") -> str:
    """The subtitle label of a toy figure, e.g. ``"toy matrix, d=48, seed 0"``; ``seed`` may name
    several (``"0-2"`` gives ``"seeds 0-2"``)."""
    seeds = f"seeds {seed}" if isinstance(seed, str) else f"seed {seed}"
    return f"toy matrix, d={d}, {seeds}" + (f", {extra}" if extra else "")


def other_colors(field: str, values: Sequence[object], *, title: str | None = None,
                 legend: alt.Legend | None = BOTTOM_LEGEND) -> alt.Color:
    """A nominal colour encoding of ``field`` over ``values`` (legend order) in the book's colours for
    series that are not models (:data:`~lib.page.plotting.OTHER_COLORS`, repeated beyond five)."""
    domain = [str(v) for v in dict.fromkeys(values)]
    colours = [OTHER_COLORS[i % len(OTHER_COLORS)] for i in range(len(domain))]
    return alt.Color(f"{field}:N", title=title, scale=alt.Scale(domain=domain, range=colours), legend=legend)


def line_chart(
    df: pd.DataFrame, *, x: str, y: str, color: str | None = None, model: str, title: str,
    x_title: str | None = None, y_title: str | None = None, log_y: bool = False, column: str | None = None,
    detail: str | None = None, dash: str | None = None, width: int = 220, height: int = 180, columns: int = 2,
    y_domain: tuple[float, float] | None = None, description: str | None = None, on_top: str | None = None,
) -> alt.TopLevelMixin:
    """Lines of ``y`` against ``x``, optionally coloured (:func:`other_colors`), dashed, split per ``detail``
    and faceted by ``column`` (wrapped after ``columns`` panels). Legends go below the plot, so figures fit
    a book column.

    ``on_top``: one value of ``color`` whose line is drawn last, dashed and thicker, so that a line it
    coincides with cannot hide it (say so in the caption: the legend shows colours only).
    """
    scale = alt.Scale(type="log") if log_y else (alt.Scale(domain=list(y_domain)) if y_domain else alt.Undefined)
    enc = dict(
        x=alt.X(f"{x}:Q", title=x_title or x),
        y=alt.Y(f"{y}:Q", title=y_title if y_title is not None else y, scale=scale,
                axis=alt.Axis(format=".0e") if log_y else alt.Undefined),
        tooltip=[c for c in (x, y, color, detail, dash) if c],
    )
    if color:
        enc["color"] = other_colors(color, df[color], title=color)
    if detail:
        enc["detail"] = alt.Detail(f"{detail}:N")
    if dash:
        enc["strokeDash"] = alt.StrokeDash(f"{dash}:N", title=dash, legend=BOTTOM_LEGEND)
    if on_top is None:
        chart = alt.Chart(df).mark_line().encode(**enc)
    else:
        if not color or on_top not in set(df[color]):
            raise ValueError(f"on_top={on_top!r} is not a value of the colour column {color!r}")
        rest = alt.Chart().transform_filter(alt.datum[color] != on_top).mark_line().encode(**enc)
        top = (alt.Chart().transform_filter(alt.datum[color] == on_top)
               .mark_line(strokeDash=[6, 4], strokeWidth=2.5).encode(**enc))
        chart = alt.layer(rest, top, data=df)
    chart = chart.properties(width=width, height=height)
    if column:
        chart = chart.facet(facet=alt.Facet(f"{column}:N", title=None, sort=list(dict.fromkeys(df[column]))),
                            columns=columns)
    return titled(chart, title, model, description)


def series_color(labels: Sequence[str], colours: Sequence[str], title: str | None = None) -> alt.Color:
    return alt.Color("series:N", title=title, scale=alt.Scale(domain=list(labels), range=list(colours)),
                     legend=alt.Legend(orient="bottom", direction="vertical"))
