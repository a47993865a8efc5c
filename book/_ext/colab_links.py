"""Sphinx extension: the Colab launch button opens the chapter's notebook, not its MyST source.

The book theme's Colab button links ``blob/<branch>/<page><source suffix>``, which for a chapter is its
``.md`` source: Colab cannot open it. The publishing workflow pushes a Colab notebook of every chapter
(:mod:`tools.colab`: the chapter after a first cell that installs the book) to the branch named by the
config value ``colab_notebooks_branch``; this extension points each chapter's Colab button there
(``blob/<that branch>/<page>.ipynb``) and removes the button from pages without such a notebook. With
the value empty, no page has a Colab button. ``tools/book_config.py`` registers the extension and sets
the branch together with the launch buttons.
"""

from __future__ import annotations

import re
from typing import Any

from sphinx.application import Sphinx

_CHAPTER = re.compile(r"(^|/)\d\d_[^/]*$")
_COLAB = re.compile(r"^(?P<base>https?://[^/]+/github/[^/]+/[^/]+)/blob/[^/]+/.+$")


def colab_url(url: str, pagename: str, branch: str) -> str | None:
    """The Colab address of page ``pagename``'s notebook on ``branch``, from the theme's ``url``; ``None``
    where that page has no Colab notebook (not a chapter, or no branch)."""
    m = _COLAB.match(url)
    if not branch or not m or not _CHAPTER.search(pagename):
        return None
    return f"{m['base']}/blob/{branch}/{pagename}.ipynb"


def point_colab_at_notebooks(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any],
                             doctree: Any) -> None:
    branch = app.config.colab_notebooks_branch
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        kept = []
        for button in group.get("buttons", []):
            if button.get("text") == "Colab":
                url = colab_url(button.get("url", ""), pagename, branch)
                if url is None:
                    continue
                button = {**button, "url": url}
            kept.append(button)
        group["buttons"] = kept
    context["header_buttons"] = [g for g in context.get("header_buttons", [])
                                 if g.get("label") != "launch-buttons" or g["buttons"]]


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("colab_notebooks_branch", "", "html", types=[str])
    app.connect("html-page-context", point_colab_at_notebooks, priority=600)  # after the theme's (501)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
