"""The README's map of ``lib`` lists every module, and only modules that exist."""

from __future__ import annotations

import re

from conftest import ROOT


def _lib_modules() -> set[str]:
    lib = ROOT / "lib"
    names = {p.stem for p in lib.glob("*.py") if p.stem != "__init__"}
    names |= {f"{p.parent.name}/" for p in lib.glob("*/__init__.py")}
    names |= {f"page/{p.stem}" for p in (lib / "page").glob("*.py") if p.stem != "__init__"}
    return names


def _readme_table() -> set[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("`lib`, by what it holds:", 1)[1].split("\n\n", 2)[1]
    first_cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {name for cell in first_cells for name in re.findall(r"`([\w/]+)`", cell)}


def test_every_lib_module_is_in_the_readme_map():
    listed, present = _readme_table(), _lib_modules()
    assert not present - listed, f"lib modules missing from README's map: {sorted(present - listed)}"
    assert not listed - present, f"README's map lists modules that do not exist: {sorted(listed - present)}"
