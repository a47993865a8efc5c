"""The README's map of ``lib`` lists every module, and only modules that exist; it is ``tools.module_map``'s
output (the docstrings and the layers of today), and the modules named for a chapter are spelled as it is."""

from __future__ import annotations

import re

from conftest import ROOT

from tools.module_map import BEGIN, END, render


def _lib_modules() -> set[str]:
    """Every module of ``lib`` as the map names it: ``stats``, ``linalg/spectra``, a package ``linalg/``."""
    lib = ROOT / "lib"
    names = {p.relative_to(lib).with_suffix("").as_posix() for p in lib.rglob("*.py") if p.stem != "__init__"}
    names |= {f"{p.parent.relative_to(lib).as_posix()}/" for p in lib.rglob("*/__init__.py")}
    return names | {"lib"}


def _readme_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "README.md lost the module map's markers"
    return text.split(BEGIN + "\n", 1)[1].split(END, 1)[0]


def _readme_table() -> set[str]:
    lines = _readme_block().splitlines()
    rows = [line.split(" | ") for line in lines if line.startswith("| ") and "`" in line]
    return {name for row in rows for name in re.findall(r"`([\w/]+)`", row[1])}


def test_every_lib_module_is_in_the_readme_map():
    listed, present = _readme_table(), _lib_modules()
    assert not present - listed, f"lib modules missing from README's map: {sorted(present - listed)}"
    assert not listed - present, f"README's map lists modules that do not exist: {sorted(listed - present)}"


def test_the_readme_map_is_the_tools_output():
    """Docstrings, layers and chapters as they are now; every module says what it holds."""
    block = render(ROOT)
    assert "(no docstring)" not in block, [r for r in block.splitlines() if "(no docstring)" in r]
    assert _readme_block() == block, "README's module map is stale: run `python -m tools.module_map --write`"


def test_chapter_modules_are_named_after_their_chapters():
    """The README's rule: a chapter's analysis module, page module and checkers are ``lib/chapters/<slug>.py``,
    ``lib/page/<slug>.py`` and ``lib/exercises/<slug>.py`` for its page ``book/NN_<slug>.md``; an analysis that
    outgrows one module splits under the same slug (``<slug>_<part>.py``)."""
    slugs = {p.stem[3:] for p in (ROOT / "book").glob("[0-9][0-9]_*.md")}
    for folder, shared in (("chapters", set()), ("exercises", {"runner"})):
        names = {p.stem for p in (ROOT / "lib" / folder).glob("*.py")} - {"__init__"} - shared
        stray = sorted(n for n in names if n not in slugs and not any(n.startswith(s + "_") for s in slugs))
        assert not stray, f"lib/{folder}/ modules named after no chapter: {stray}"
