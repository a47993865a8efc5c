"""Sphinx extension: what the site needs, beyond its themes, so that every reader can use it (WCAG 2.1 AA).

``tests/browser/test_site_browser.py`` runs axe-core on every page; this extension mends what it found in the
themes and in docutils' HTML (the charts' own fix is in :mod:`lib.page.plotting`, the width of equations in the
chapters):

* **Templates** (``book/_templates``, put first on the template path): the pydata theme's search button and
  colour-mode switch, whose names did not contain the text they show (WCAG 2.5.3).
* **Bibliography**: docutils writes each reference of a citation list as ``role="doc-biblioentry"``, a role
  that ARIA 1.3 deprecates and that is no list item, so the list (``role="list"``) held no item and its
  backlinks as children (axe: aria-required-children, critical). Each reference becomes ``role="listitem"``.
* **Folded code** (cells tagged ``hide-input``): myst-nb names the button ``aria-label="Toggle hidden content"``
  while it shows "Show code", so its name does not contain its text (axe: label-content-name-mismatch,
  WCAG 2.5.3). The label is dropped: the visible text names the button.
* **accessibility.css**: link colours with 4.5:1 contrast on the tinted boxes (exercises, notes).
* **accessibility.js**: a name for each chart's actions menu, and keyboard access to code that scrolls inside
  a solution once it is opened.
"""

from __future__ import annotations

import re
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config

TEMPLATES = Path(__file__).resolve().parents[1] / "_templates"
_BIBLIOENTRY = re.compile(r'(<div class="citation" id="[^"]*") role="doc-biblioentry">')
_FOLD_LABEL = '<summary aria-label="Toggle hidden content">'


def _templates_first(app: Sphinx, config: Config) -> None:
    config.templates_path.insert(0, str(TEMPLATES))


def _assets(app: Sphinx) -> None:
    if app.builder.format == "html":
        app.add_css_file("accessibility.css")
        app.add_js_file("accessibility.js")


def _bibliography_list_items(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object) -> None:
    """Give each reference of a citation list the role of a list item (see the module's docstring)."""
    if "body" in context:
        context["body"] = _BIBLIOENTRY.sub(r'\1 role="listitem">', context["body"])


def _folded_code_named_by_its_text(app: Sphinx, pagename: str, templatename: str, context: dict,
                                   doctree: object) -> None:
    """Drop myst-nb's fixed label of a folded cell's button, which hid its text (see the module's docstring)."""
    if "body" in context:
        context["body"] = context["body"].replace(_FOLD_LABEL, "<summary>")


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("config-inited", _templates_first)
    app.connect("builder-inited", _assets)
    app.connect("html-page-context", _bibliography_list_items)
    app.connect("html-page-context", _folded_code_named_by_its_text)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
