"""Sphinx extension: figures and exercises are numbered per chapter, "Fig. 3.2" and "Exercise 3.1".

The chapters' numbers are in their file names (``book/03_real_models.md`` is chapter 3; chapter 0 exists), not
in a numbered toctree, so Sphinx alone would number figures and exercises through the whole book. After
Sphinx has assigned its numbers (``env-get-updated``), this extension renumbers the figures and the
exercises of every chapter ``N`` as ``(N, 1), (N, 2), ...`` in page order, and its numbered equations as
``(1), (2), ...`` from the top of the page (JupyterLab numbers a notebook's equations from 1, and Sphinx would
number them through the whole book); other pages and other kinds of node (proofs) keep Sphinx's numbers.

JupyterLab numbers a notebook's exercises from 1; a chapter therefore writes each exercise's number as
``:enumerator: 3.1``, which jupyterlab-myst shows and sphinx-exercise is taught to accept here. The build
warns (and fails, being ``-W``) when an exercise has no ``:enumerator:`` or one that is not the number the
site gives it, and when a figure's number, printed by the kernel (:mod:`lib.page.figures`), is not the
site's.

It also keeps the text of a gated solution: sphinx-exercise 1.2.1 drops the body of a ``{solution-start}``
directive when it merges the cells up to ``{solution-end}`` into one solution; the chapters write a coding
solution's explanation there (the one place JupyterLab shows collapsed with it), so :class:`KeepGatedText`
moves that body after the directive, where the merge collects it.
"""

from __future__ import annotations

import re
from collections import Counter

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

logger = logging.getLogger(__name__)

CHAPTER = re.compile(r"^book/(\d{2})_[^/]+$")
RENUMBERED = ("figure", "exercise")
EQUATIONS = "displaymath"


def chapter_of(docname: str) -> int | None:
    """The chapter number of ``book/NN_name``, else ``None``."""
    m = CHAPTER.match(docname)
    return int(m[1]) if m else None


def _figtype(env: BuildEnvironment, node: nodes.Node) -> str | None:
    """The enumerable type a domain gives ``node``, as Sphinx's own numbering finds it (an uncaptioned
    node of the standard domain has none)."""
    for domain in env.domains.values():
        figtype = domain.get_enumerable_node_type(node)
        if domain.name == "std" and figtype and not domain.get_numfig_title(node):
            continue
        if figtype:
            return figtype
    return None


def renumber(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """Replace Sphinx's figure and exercise numbers of every chapter by ``(chapter, k)``, its equation
    numbers by ``(k,)``."""
    for docname in sorted(env.found_docs):
        chapter = chapter_of(docname)
        if chapter is None or docname not in env.all_docs:
            continue
        numbers = env.toc_fignumbers.setdefault(docname, {})
        for figtype in (*RENUMBERED, EQUATIONS):
            numbers.pop(figtype, None)
        counts: Counter[str] = Counter()
        for node in env.get_doctree(docname).findall(nodes.Element):
            figtype = _figtype(env, node)
            if figtype in (*RENUMBERED, EQUATIONS) and node["ids"]:
                counts[figtype] += 1
                prefix = () if figtype == EQUATIONS else (chapter,)
                numbers.setdefault(figtype, {})[node["ids"][0]] = (*prefix, counts[figtype])
    return []


def check_numbers(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Warn where the lab's number of an exercise or figure differs from the site's."""
    chapter = chapter_of(docname)
    if chapter is None:
        return
    from sphinx_exercise.nodes import exercise_enumerable_node

    numbers = app.env.toc_fignumbers.get(docname, {})
    for node in doctree.findall(nodes.Element):
        # by class, not by the std domain's test: after sphinx-exercise's post-transforms an exercise
        # without a title of its own no longer reads as captioned
        figtype = "exercise" if isinstance(node, exercise_enumerable_node) else (
            "figure" if isinstance(node, nodes.figure) else None)
        if figtype is None or not node["ids"]:
            continue
        site = ".".join(map(str, numbers.get(figtype, {}).get(node["ids"][0], ())))
        if figtype == "exercise":
            lab = node.get("spectral_book_enumerator")
            if not lab:
                logger.warning(f"exercise {node['ids'][0]} has no :enumerator: (JupyterLab would number it "
                               f"from 1); write ':enumerator: {site}'", location=node)
            elif lab != site:
                logger.warning(f"exercise {node['ids'][0]} says ':enumerator: {lab}' but is Exercise {site} "
                               "on the site", location=node)
        else:
            lab = node.get("spectral_book_number")
            if lab and lab != site:
                logger.warning(f"figure {node['ids'][0]} is Fig. {lab} in the notebook but Fig. {site} on the "
                               "site (a figure shown twice, or out of page order?)", location=node)


def _accept_enumerator() -> None:
    """Let sphinx-exercise's ``exercise`` directives take jupyterlab-myst's ``:enumerator:`` option and keep it
    on the node (as ``spectral_book_enumerator``) for :func:`check_numbers`."""
    from sphinx_exercise.directive import ExerciseDirective, ExerciseStartDirective
    from sphinx_exercise.nodes import exercise_enumerable_node

    for cls in (ExerciseDirective, ExerciseStartDirective):
        if "enumerator" in cls.option_spec:
            continue
        cls.option_spec = {**cls.option_spec, "enumerator": directives.unchanged_required}
        run = cls.run

        def run_keeping(self, _run=run):  # noqa: ANN001 - a directive method
            result = _run(self)
            for node in result:
                for n in node.findall(exercise_enumerable_node) if isinstance(node, nodes.Node) else ():
                    n["spectral_book_enumerator"] = self.options.get("enumerator", "")
            return result

        cls.run = run_keeping


class KeepGatedText(SphinxTransform):
    """Move the body of every ``{solution-start}`` out of the directive, just after it (before
    sphinx-exercise's ``MergeGatedSolutions``, priority 10, gathers everything up to ``{solution-end}``)."""

    default_priority = 5

    def apply(self, **kwargs: object) -> None:
        from sphinx_exercise.nodes import solution_start_node

        for start in list(self.document.findall(solution_start_node)):
            for section in [c for c in start.children if isinstance(c, nodes.section)]:
                body = list(section.children)
                section.clear()
                index = start.parent.index(start)
                for offset, child in enumerate(body, start=1):
                    start.parent.insert(index + offset, child)


def setup(app: Sphinx) -> dict:
    app.setup_extension("sphinx_exercise")
    _accept_enumerator()
    app.add_transform(KeepGatedText)
    app.connect("env-get-updated", renumber, priority=900)  # after Sphinx's own numbering (500)
    app.connect("doctree-resolved", check_numbers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
