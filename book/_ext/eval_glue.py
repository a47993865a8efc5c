"""Sphinx extension: the ``{eval}`name``` role of the site reads the value the same page glued.

The chapters write computed numbers in their prose as ``{eval}`name``` (see :mod:`lib.page.prose`). In
JupyterLab, jupyterlab-myst asks the running kernel for ``name``. On the site, myst-nb's own ``eval``
role would do the same, but only in its ``inline`` execution mode, which evaluates each expression when the
renderer reaches it, in page order: the *Takeaway* box at the top of every chapter quotes numbers that
code further down computes, so inline mode cannot render it [ours]. This role keeps the notebooks'
ordinary execution and resolves ``name`` from the values the page glued with :func:`lib.page.prose.glue`,
exactly as ``{glue:text}`name``` does (plain text, a string's quotes dropped); an unknown name is a
warning, which fails the ``-W`` build. Only a bare name is accepted (myst-nb's ``nb_eval_name_regex``),
so the role never means something different on the two surfaces.

A glued figure reference (:class:`lib.page.figures.FigureRef`, glued as ``fig_<name>`` by
:func:`lib.page.figures.figure`) becomes a ``{numref}`` to its figure: a link whose text is Sphinx's own
"Fig. 3.2", where the lab shows the same text from the kernel.
"""

from __future__ import annotations

from docutils import nodes
from myst_nb.core.variables import RetrievalError
from myst_nb.ext.glue.roles import PasteTextRole
from myst_nb.ext.glue.utils import glue_warning, retrieve_glue_data
from sphinx import addnodes
from sphinx.application import Sphinx

from lib.page.figures import FIGREF_MIME
from lib.page.prose import NAME_PATTERN


class EvalGlueRole(PasteTextRole):
    """``{eval}`name```: the text/plain value glued under ``name`` in the same document."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        if not NAME_PATTERN.fullmatch(self.text):
            msg = f"{{eval}} takes one glued name matching {NAME_PATTERN.pattern}, not {self.text!r}"
            return [], [glue_warning(msg, self.document, self.line)]
        try:
            ref = retrieve_glue_data(self.document, self.text).data.get(FIGREF_MIME)
        except RetrievalError:
            ref = None  # the parent class reports it
        if ref is None:
            return super().run()
        xref = addnodes.pending_xref("", nodes.inline(ref["target"], ref["target"]), refdomain="std",
                                     reftype="numref", reftarget=ref["target"], refexplicit=False,
                                     refwarn=True, refdoc=self.document.settings.env.docname)
        self.set_source_info(xref)
        return [xref], []


def _register(app: Sphinx) -> None:
    # after every extension's setup(): myst-nb registers its own kernel-evaluating ``eval`` role there
    app.add_role("eval", EvalGlueRole(), override=True)


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _register)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
