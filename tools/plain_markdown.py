"""The chapters' MyST markdown rendered for notebook front ends that read plain Markdown.

Colab, VS Code, the site's download of a chapter, and Jupyter without jupyterlab-myst render a markdown cell
as CommonMark with inline HTML: ``{eval}`name```, ``{term}``, ``{ref}``, ``:::{admonition}``, ``{exercise}``
and ``$$ ... $$ (label)`` would show as literal text. :func:`render_notebook` rewrites every markdown cell of
a chapter into what those front ends understand, from what the site's build knows (:class:`SiteIndex`):

* numbers in the prose (``{eval}`name```) become the value the build glued under ``name`` (the same text
  the site shows, :func:`value_text`), each in a ``<span>`` whose tooltip says it is the built value; a
  figure reference (``fig_<name>``) becomes "Fig. 3.2", linked to the figure on the site;
* ``{ref}`` becomes its text (explicit, or the section's title), ``{term}`` the term, ``{eq}`` "(1)",
  ``{numref}`` "Fig. 3.2", ``{prf:ref}`` "Proposition 2.1", ``{cite}`` the site's citation label: each a
  link to the site when its address is known (:attr:`SiteIndex.site_url`), plain text otherwise; a link to
  another page of the book (``notation.md``) likewise;
* admonitions, exercises and propositions become boxes (a ``<div>`` with a coloured left border whose
  body stays Markdown), solutions ``<details>`` closed until clicked; a ``{solution-start}`` …
  ``{solution-end}`` region, which spans code cells, opens with a closed box of its text and ends with a
  line that closes it; a proof is "*Proof.*" … "∎";
* a labelled display equation ``$$ ... $$ (label)`` gets the site's number as ``\\tag{1}``; ``(label)=``
  targets and ``%`` comments go.

Code (fenced code blocks, inline code) is never changed. A construct the renderer does not know raises
:class:`RenderError` naming the chapter and line, so a new directive cannot reach a reader raw.
"""

from __future__ import annotations

import copy
import html
import re
from ast import literal_eval
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nbformat import NotebookNode

__all__ = ["BUILT_VALUE_TITLE", "HEADER_TAG", "RenderError", "SiteIndex", "Target", "Value", "render_markdown",
           "render_notebook", "value_text", "values_from_glue"]

HEADER_TAG = "plain-notebook-header"
"""The tag of the first cell :func:`render_notebook` adds (what the notebook is)."""
BUILT_VALUE_TITLE = "computed when the book was built"
"""The tooltip of every built value in the prose (after the glue name)."""
FIGREF_MIME = "application/vnd.spectral-book.figref+json"  # lib.page.figures.FIGREF_MIME (tools import no lib)

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,}|:{3,})\s*(?P<info>.*?)\s*$")
_DIRECTIVE = re.compile(r"^\{(?P<name>[\w:.-]+)\}\s*(?P<arg>.*)$")
_OPTION = re.compile(r"^:(?P<key>[\w-]+):\s*(?P<value>.*)$")
_TARGET = re.compile(r"^\s*\((?P<label>[^()\s]+)\)=\s*$")
_COMMENT = re.compile(r"^\s*%")
_EQ_END = re.compile(r"^(?P<tex>.*?)\$\$\s*(?:\((?P<label>[^()\s]+)\))?\s*$")
_ROLE_OR_CODE = re.compile(r"\{(?P<role>[\w:.-]+)\}(?P<tick>`+)(?P<content>.+?)(?P=tick)|(?P<code>`+)")
_EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)
_MD_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<href>[^)\s]+)\)")
_ESCAPE = re.compile(r"([\\`*_\[\]|$])")

#: The box of each admonition class (and the book's other boxes): the colour of its left border.
BOX_COLORS = {"note": "#1f77b4", "tip": "#2ca02c", "hint": "#2ca02c", "important": "#c77c02", "warning": "#d62728",
              "caution": "#d62728", "attention": "#d62728", "danger": "#d62728", "error": "#d62728",
              "seealso": "#1f77b4", "admonition": "#5a6b7d", "exercise": "#6f42c1", "proposition": "#17becf"}
_NAMED_ADMONITIONS = {"note", "tip", "hint", "important", "warning", "caution", "attention", "danger", "error",
                      "seealso"}
_PROOF_KINDS = {"theorem", "lemma", "proposition", "corollary", "definition", "remark", "conjecture",
                "example", "property", "observation", "criterion", "algorithm", "axiom", "assumption"}


class RenderError(ValueError):
    """A construct without a plain-Markdown rendering, or a reference the build does not know."""


@dataclass(frozen=True)
class Target:
    """Where a reference points on the site, and what the site shows for it.

    ``doc`` is the page (``"book/01_power_method"``), ``anchor`` the fragment (``""`` for the page's top),
    ``text`` the site's text for the reference ("1. The power method ...", "(1)", "Proposition 2.1").
    """

    doc: str
    anchor: str
    text: str


@dataclass(frozen=True)
class Value:
    """A built value of the prose: the text the site shows, and for a figure reference its target."""

    text: str
    figure: str | None = None


@dataclass
class SiteIndex:
    """What the build knows that a plain notebook needs: the site's address, its references, its numbers.

    Attributes:
        site_url: the published site's address ending in ``/`` (``""``: unknown, references stay text).
        labels: ``{ref}`` targets (text: the section's title).
        terms: glossary terms by lower-cased name (text: the term as the glossary writes it).
        equations: ``{eq}`` labels (text: "(1)"). proofs: ``{prf:ref}`` labels ("Proposition 2.1").
        exercises: exercise labels (text: "1.1"). figures: figure targets (text: "Fig. 3.2").
        citations: BibTeX keys (text: the site's label, "LA26", shown in brackets). pages: document name -> title.
    """

    site_url: str = ""
    labels: dict[str, Target] = field(default_factory=dict)
    terms: dict[str, Target] = field(default_factory=dict)
    equations: dict[str, Target] = field(default_factory=dict)
    proofs: dict[str, Target] = field(default_factory=dict)
    exercises: dict[str, Target] = field(default_factory=dict)
    figures: dict[str, Target] = field(default_factory=dict)
    citations: dict[str, Target] = field(default_factory=dict)
    pages: dict[str, str] = field(default_factory=dict)

    def url(self, target: Target) -> str | None:
        """The site's address of ``target``, or ``None`` when the site's address is unknown."""
        if not self.site_url:
            return None
        return f"{self.site_url.rstrip('/')}/{target.doc}.html" + (f"#{target.anchor}" if target.anchor else "")

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form (:meth:`from_json` reads it back)."""
        tables = {k: {n: [t.doc, t.anchor, t.text] for n, t in getattr(self, k).items()} for k in _TABLES}
        return {"site_url": self.site_url, "pages": dict(self.pages), **tables}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SiteIndex:
        tables = {k: {n: Target(*t) for n, t in data.get(k, {}).items()} for k in _TABLES}
        return cls(site_url=data.get("site_url", ""), pages=dict(data.get("pages", {})), **tables)


_TABLES = ("labels", "terms", "equations", "proofs", "exercises", "figures", "citations")


def value_text(plain: str) -> str:
    """The text the site shows for a glued ``text/plain`` (myst-nb's ``format_plain_text``: a literal's
    quotes dropped)."""
    try:
        return str(literal_eval(plain))
    except (SyntaxError, ValueError):
        return plain


def values_from_glue(glue: Mapping[str, Mapping[str, Any]]) -> dict[str, Value]:
    """The built values of one chapter from myst-nb's glue data (``_build/jupyter_execute/<doc>.glue.json``:
    name -> display output with ``data``)."""
    out = {}
    for name, output in glue.items():
        data = output.get("data", {})
        if "text/plain" not in data:
            continue
        text = data["text/plain"]
        text = "".join(text) if isinstance(text, list) else text
        ref = data.get(FIGREF_MIME)
        out[name] = Value(value_text(text), ref["target"] if ref else None)
    return out


@dataclass
class _Context:
    """What one chapter's rendering reads: where, the index, the values, and an open solution region."""

    doc: str
    index: SiteIndex
    values: Mapping[str, Value]
    where: str
    line: int = 0
    region: str | None = None  # the exercise label of an open {solution-start}

    def fail(self, message: str) -> RenderError:
        return RenderError(f"{self.where}, line {self.line}: {message}")


def _link(ctx: _Context, text: str, target: Target | None) -> str:
    """``text`` linked to ``target`` on the site, or ``text`` alone."""
    url = ctx.index.url(target) if target is not None else None
    return f"[{text}]({url})" if url else text


def _escape(text: str) -> str:
    """``text`` as literal Markdown (no emphasis, link, table cell or math from its characters)."""
    return _ESCAPE.sub(r"\\\1", html.escape(text, quote=False))


def _lookup(ctx: _Context, table: str, key: str, role: str) -> Target:
    try:
        return getattr(ctx.index, table)[key]
    except KeyError:
        raise ctx.fail(f"{{{role}}}`{key}`: the build has no such target") from None


def _role(ctx: _Context, role: str, content: str) -> str:
    """The plain rendering of one role."""
    m = _EXPLICIT.match(content)
    explicit, key = (m["text"], m["target"].strip()) if m else (None, content.strip())
    if role == "eval":
        if key not in ctx.values:
            raise ctx.fail(f"{{eval}}`{key}`: the build glued no value under that name")
        value = ctx.values[key]
        if value.figure is not None:
            return _link(ctx, _escape(value.text), ctx.index.figures.get(value.figure))
        title = html.escape(f"{key}: {BUILT_VALUE_TITLE}", quote=True)
        return f'<span title="{title}">{_escape(value.text)}</span>'
    if role == "ref":
        target = _lookup(ctx, "labels", key, role)
        return _link(ctx, explicit if explicit is not None else _escape(target.text), target)
    if role == "term":
        target = _lookup(ctx, "terms", key.lower(), role)
        return _link(ctx, explicit if explicit is not None else key, target)
    if role == "eq":
        target = _lookup(ctx, "equations", key, role)
        return _link(ctx, explicit if explicit is not None else target.text, target)
    if role == "numref":
        target = ctx.index.figures.get(key) or _lookup(ctx, "labels", key, role)
        number = target.text.removeprefix("Fig. ")
        text = target.text if explicit is None else explicit.replace("%s", number).replace("{number}", number)
        return _link(ctx, text, target)
    if role == "prf:ref":
        target = _lookup(ctx, "proofs", key, role)
        return _link(ctx, explicit if explicit is not None else target.text, target)
    if role in ("cite", "cite:p", "cite:t"):
        parts = [_lookup(ctx, "citations", k.strip(), role) for k in key.split(",")]
        return "\\[" + ", ".join(_link(ctx, _escape(t.text), t) for t in parts) + "\\]"  # the site's [LA26]
    if role == "math":
        return f"${content}$"
    if role in ("sup", "sub"):
        return f"<{role}>{_escape(content)}</{role}>"
    raise ctx.fail(f"no plain rendering for the role {{{role}}}")


def _page_link(ctx: _Context, text: str, href: str) -> str:
    """A Markdown link to another page of the book (``notation.md``, ``../book/x.md#y``) on the site."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", href) or href.startswith("#"):
        return f"[{text}]({href})"
    path, _, anchor = href.partition("#")
    base = ctx.doc.rsplit("/", 1)[0] + "/" if "/" in ctx.doc else ""
    parts: list[str] = []
    for part in (base + re.sub(r"\.(md|ipynb)$", "", path)).split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    doc = "/".join(parts)
    if doc not in ctx.index.pages:
        raise ctx.fail(f"the link [{text}]({href}) goes to no page of the book")
    return _link(ctx, text, Target(doc, anchor, ctx.index.pages[doc]))


def render_inline(ctx: _Context, text: str) -> str:
    """Roles and page links of one run of text rendered; inline code kept as it is."""
    out, pos = [], 0
    while True:
        m = _ROLE_OR_CODE.search(text, pos)
        if m is None:
            out.append(_links(ctx, text[pos:]))
            return "".join(out)
        out.append(_links(ctx, text[pos:m.start()]))
        if m["role"]:
            out.append(_role(ctx, m["role"], m["content"]))
            pos = m.end()
        else:  # a code span: copy it up to its closing run of backticks (or the rest, if none)
            tick = m["code"]
            close = re.compile(rf"(?<!`){tick}(?!`)").search(text, m.end())
            end = close.end() if close else m.end()
            out.append(text[m.start():end])
            pos = end


def _links(ctx: _Context, text: str) -> str:
    return _MD_LINK.sub(lambda m: _page_link(ctx, m["text"], m["href"]), text)


def _options(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    """A directive's options (``:key: value`` lines, or a ``---`` YAML block) and the rest of its body."""
    opts: dict[str, str] = {}
    i = 0
    if lines and lines[0].strip() == "---":
        end = next((j for j in range(1, len(lines)) if lines[j].strip() == "---"), None)
        if end is not None:
            for raw in lines[1:end]:
                key, _, value = raw.partition(":")
                if key.strip():
                    opts[key.strip()] = value.strip()
            i = end + 1
    else:
        while i < len(lines) and (m := _OPTION.match(lines[i].strip())):
            opts[m["key"]] = m["value"]
            i += 1
    return opts, lines[i:]


def _box(title_md: str, body_md: str, color: str, anchor: str = "") -> str:
    """A box that every Markdown front end shows: a ``<div>`` whose title and body stay Markdown."""
    style = (f"border-left: 4px solid {color}; background-color: rgba(127, 127, 127, 0.08); "
             "padding: 0.2em 1em; margin: 1em 0")
    head = f'<div style="{style}">' + (f'<a name="{html.escape(anchor)}"></a>' if anchor else "")
    title = f"\n\n**{title_md}**" if title_md else ""
    return f"{head}{title}\n\n{body_md.strip()}\n\n</div>"


def _details(summary_html: str, body_md: str) -> str:
    """A ``<details>`` block, closed until clicked, whose body stays Markdown."""
    return f"<details>\n<summary><b>{summary_html}</b></summary>\n\n{body_md.strip()}\n\n</details>"


def _summary_text(ctx: _Context, md: str) -> str:
    """Inline Markdown for a ``<summary>`` (HTML: emphasis written as tags, math left to MathJax)."""
    text = render_inline(ctx, md)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*", r"<i>\1</i>", text)


def _exercise_title(ctx: _Context, label: str) -> str:
    target = _lookup(ctx, "exercises", label, "solution")
    return f"Exercise {target.text}"


def _directive(ctx: _Context, name: str, arg: str, body: list[str]) -> str:
    """The plain rendering of one directive with its (unrendered) body lines."""
    opts, rest = _options(body)
    inner = lambda: render_blocks(ctx, rest)  # noqa: E731 - rendered only where the directive shows a body
    if name == "admonition" or name in _NAMED_ADMONITIONS:
        title = render_inline(ctx, arg) if name == "admonition" else name.capitalize()
        classes = opts.get("class", "").split()
        color = next((BOX_COLORS[c] for c in classes if c in BOX_COLORS), BOX_COLORS.get(name, BOX_COLORS["admonition"]))
        if "dropdown" in classes:
            return _details(_summary_text(ctx, arg or name.capitalize()), inner())
        return _box(title, inner(), color)
    if name == "exercise":
        number = opts.get("enumerator", "")
        label = opts.get("label", "")
        if label in ctx.index.exercises:
            site = ctx.index.exercises[label].text
            if number and number != site:
                raise ctx.fail(f"exercise {label} says ':enumerator: {number}' but is Exercise {site} on the site")
            number = site
        if not number:
            raise ctx.fail(f"exercise {label or '(no label)'} has no number (no :enumerator:, not in the build)")
        title = f"Exercise {number}" + (f" ({render_inline(ctx, arg)})" if arg else "")
        return _box(title, inner(), BOX_COLORS["exercise"], label)
    if name == "solution":
        return _details(f"Solution to {_exercise_title(ctx, arg.strip())}", inner())
    if name == "solution-start":
        if ctx.region is not None:
            raise ctx.fail(f"{{solution-start}} {arg} inside the open solution of {ctx.region}")
        ctx.region = arg.strip()
        title = _exercise_title(ctx, ctx.region)
        text = inner()
        note = "*Its code is in the cells below, up to the end of the solution.*"
        return _details(f"Solution to {title}", f"{text}\n\n{note}" if text.strip() else note)
    if name == "solution-end":
        if ctx.region is None:
            raise ctx.fail("{solution-end} without a {solution-start}")
        title, ctx.region = _exercise_title(ctx, ctx.region), None
        return f"<p><i>End of the solution to {title}.</i></p>"
    if name.startswith("prf:"):
        kind = name[4:]
        if kind == "proof":
            return _box("", f"*Proof.* {inner().strip()} ∎", BOX_COLORS["admonition"])
        if kind not in _PROOF_KINDS:
            raise ctx.fail(f"no plain rendering for the directive {{{name}}}")
        label = opts.get("label", "")
        number = ctx.index.proofs[label].text if label in ctx.index.proofs else kind.capitalize()
        title = number + (f" ({render_inline(ctx, arg)})" if arg else "")
        return _box(title, inner(), BOX_COLORS["proposition"], label)
    if name == "nb-exec-table":  # myst-nb's table of the build's execution times: only the site has it
        page = _link(ctx, "the site's page", Target(ctx.doc, "", ctx.index.pages.get(ctx.doc, ctx.doc)))
        return f"*The table of this build's notebook execution times is on {page}.*"
    if name == "math":
        label = opts.get("label", "")
        return _display_math(ctx, "\n".join(rest), label)
    raise ctx.fail(f"no plain rendering for the directive {{{name}}}")


def _display_math(ctx: _Context, tex: str, label: str) -> str:
    """``$$ tex $$`` with the site's number of ``label`` as ``\\tag`` (no number without a label)."""
    tag = ""
    if label:
        target = _lookup(ctx, "equations", label, "eq")
        tag = f"\n\\tag{{{target.text.strip('()')}}}"
    return f"$$\n{tex.strip()}{tag}\n$$"


def render_blocks(ctx: _Context, lines: Sequence[str], first_line: int | None = None) -> str:
    """Render markdown ``lines``: directives (colon or backtick fences), labelled display math, targets,
    comments, and inline roles everywhere but in code."""
    out: list[str] = []
    i, n = 0, len(lines)
    base = ctx.line if first_line is None else first_line
    while i < n:
        line = lines[i]
        ctx.line = base + i
        fence = _FENCE.match(line)
        if fence:
            mark, info = fence["fence"], fence["info"]
            close = next((j for j in range(i + 1, n)
                          if (s := lines[j].strip()) and len(s) >= len(mark) and s == mark[0] * len(s)), None)
            directive = _DIRECTIVE.match(info)
            if directive is None:  # a code block: kept verbatim
                end = n - 1 if close is None else close
                out.extend(lines[i:end + 1])
                i = end + 1
                continue
            if close is None:
                raise ctx.fail(f"the directive {{{directive['name']}}} is never closed")
            start = ctx.line
            ctx.line = start + 1
            if out and out[-1].strip():
                out.append("")  # a block of HTML starts after a blank line, whatever the renderer
            out.append(_directive(ctx, directive["name"], directive["arg"], list(lines[i + 1:close])))
            if close + 1 < n and lines[close + 1].strip():
                out.append("")
            ctx.line = start
            i = close + 1
            continue
        if _TARGET.match(line) or _COMMENT.match(line):
            i += 1
            continue
        if line.lstrip().startswith("$$"):
            first = line.strip()[2:]
            one = _EQ_END.match(first) if first.strip() else None
            if one is not None:  # $$ tex $$ (label) on one line
                out.append(_display_math(ctx, one["tex"], one["label"] or ""))
                i += 1
                continue
            tex = [first] if first.strip() else []
            j = i + 1
            while j < n and (end := _EQ_END.match(lines[j])) is None:
                tex.append(lines[j])
                j += 1
            if j == n:
                raise ctx.fail("a $$ display equation is never closed")
            if end["tex"].strip():
                tex.append(end["tex"])
            out.append(_display_math(ctx, "\n".join(tex), end["label"] or ""))
            i = j + 1
            continue
        out.append(render_inline(ctx, line))
        i += 1
    return "\n".join(out)


def render_markdown(source: str, doc: str, index: SiteIndex, values: Mapping[str, Value],
                    where: str | None = None) -> str:
    """One markdown text (a whole cell) rendered for plain Markdown (see the module docstring).

    Raises:
        RenderError: a directive or role without a rendering, a reference the index lacks, an eval name
            without a value, or a solution region left open.
    """
    ctx = _Context(doc, index, values, where or doc)
    text = render_blocks(ctx, source.splitlines(), 1)
    if ctx.region is not None:
        raise ctx.fail(f"the solution of {ctx.region} is never closed in this text")
    return text


def render_notebook(nb: NotebookNode, doc: str, index: SiteIndex, values: Mapping[str, Value],
                    header: str | None = None) -> NotebookNode:
    """A copy of chapter notebook ``nb`` with every markdown cell rendered; code cells and outputs as they are.

    Args:
        nb: the chapter (read with jupytext, or myst-nb's executed notebook).
        doc: its document name on the site (``"book/01_power_method"``).
        index, values: from the build (:class:`SiteIndex`, :func:`values_from_glue`).
        header: Markdown of a first cell to add (what the notebook is), or ``None``.

    Raises:
        RenderError: as :func:`render_markdown`, with the cell's number.
    """
    out = copy.deepcopy(nb)
    cells = []
    ctx = _Context(doc, index, values, doc)
    for k, cell in enumerate(out.cells):
        if cell.cell_type == "markdown":
            ctx.where = f"{doc}, markdown cell {k}"
            cell.source = render_blocks(ctx, cell.source.splitlines(), 1).strip("\n")
            if not cell.source.strip():
                continue
            cell.metadata.pop("user_expressions", None)
        cells.append(cell)
    if ctx.region is not None:
        raise RenderError(f"{doc}: the solution of {ctx.region} is never closed")
    if header is not None:
        import nbformat

        cells.insert(0, nbformat.v4.new_markdown_cell(header, metadata={"tags": [HEADER_TAG]}))
    out.cells = cells
    for c in out.cells:
        c.pop("id", None)
    for i, c in enumerate(out.cells):
        c["id"] = f"cell-{i:03d}"
    return out
