"""The README's map of ``lib``: every module, what it holds, its layer and the chapters that use it.

``python -m tools.module_map`` prints the map as Markdown; ``--write`` puts it into ``README.md`` between the
markers :data:`BEGIN` and :data:`END` (``tests/unit/test_readme.py`` checks that the README holds exactly this
output, so the map cannot go stale: after moving, adding or splitting a module, run ``--write``). Nothing is
imported from ``lib``; its files and the chapters' code cells are parsed:

* *holds* is the first paragraph of the module's docstring (reST roles and literals as Markdown code);
* *layer* is the module's layer in :data:`tools.import_graph.LAYERS`, counted from 1 at the bottom;
* *ch* lists the pages whose code cells use the module, directly or through the modules they use (a name
  imported from a package counts for the module that defines it, not for everything the package hands on):
  chapters by number (``book/03_real_models.md`` is 3), other pages by name; a package counts wherever one of
  its modules does.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

from tools.import_graph import LAYERS, ROOT, _imports, _module_name, layer_of

__all__ = ["BEGIN", "END", "Module", "read_modules", "page_uses", "render", "replace_block", "main"]

BEGIN = "<!-- module map: made by `python -m tools.module_map --write` from the docstrings; do not edit -->"
END = "<!-- end of the module map -->"

_CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)
_ROLE = re.compile(r":[\w:]+:`~?([\w.]+)`")


def _role_target(m: re.Match) -> str:
    """What a reST role names: ``:func:`~lib.stats.boot``` is ``boot``, ``:mod:`lib.config``` is its path."""
    return m.group(1).rpartition(".")[2] if "~" in m.group(0) else m.group(1)


class Module:
    """One module of ``lib``: its dotted ``name``, its file, whether it is a package's ``__init__``."""

    def __init__(self, name: str, path: Path):
        self.name, self.path = name, path
        self.is_package = path.name == "__init__.py"
        self.tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    @property
    def label(self) -> str:
        """How the map names it: ``linalg/spectra``, a package as ``models/decoder/``, the root as ``lib``."""
        rel = self.name.split(".")[1:]
        return "lib" if not rel else "/".join(rel) + ("/" if self.is_package else "")

    @property
    def holds(self) -> str:
        """The first paragraph of the docstring in Markdown ("" without one)."""
        doc = ast.get_docstring(self.tree) or ""
        text = " ".join(doc.split("\n\n", 1)[0].split())
        text = _ROLE.sub(lambda m: f"``{_role_target(m)}``", text)
        text = text.replace("``", "`").replace("|", "\\|")
        text = text.removeprefix(f"`{self.name}`: ")  # a package's docstring opens with its own name
        return text[:1].upper() + text[1:]


def read_modules(package: Path) -> dict[str, Module]:
    """Every module of the package folder ``package`` (``ROOT / "lib"``) by dotted name, parsed."""
    found = (Module(_module_name(p, package.parent), p) for p in sorted(package.rglob("*.py")))
    return {m.name: m for m in found}


def _resolve(mods: dict[str, Module], mod: str, name: str | None, depth: int = 0) -> str | None:
    """The module of ``lib`` that ``from mod import name`` (``import mod``: ``name`` is ``None``) reaches."""
    if name is not None and f"{mod}.{name}" in mods:
        return f"{mod}.{name}"
    while mod and mod not in mods:  # lib.models.loading.x -> lib.models.loading
        mod = mod.rpartition(".")[0]
    if not mod:
        return None
    here = mods[mod]
    if name is not None and here.is_package and depth < 20:  # a name the package hands on
        for src, names in _imports(here.tree, mod, True):
            if name in names:
                return _resolve(mods, src, name, depth + 1) or mod
    return mod


def _uses(mods: dict[str, Module], tree: ast.Module, here: str, is_package: bool) -> set[str]:
    """The modules of ``lib`` the code ``tree`` imports; ``lib.x.y`` after ``import lib`` counts for ``y``."""
    out: set[str] = set()
    for src, names in _imports(tree, here, is_package):
        for name in names or [None]:
            if (m := _resolve(mods, src, name)) is not None:
                out.add(m)
    if "lib" in out and not here.startswith("lib"):  # import lib; lib.load_model(...): the defining module
        out.discard("lib")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == "lib":
                out.add(_resolve(mods, "lib", node.attr) or "lib")
    return out


def _code(page: Path) -> ast.Module:
    """The code cells of a MyST page as one module (cell options, IPython magics and shell lines dropped)."""
    body: list[ast.stmt] = []
    for cell in _CODE_CELL.findall(page.read_text(encoding="utf-8")):
        if cell.startswith("---\n"):  # the cell's YAML options
            cell = cell[4:].split("\n---\n", 1)[-1]
        lines = [ln for ln in cell.splitlines() if not ln.lstrip().startswith(("%", "!", ":"))]
        try:
            body += ast.parse("\n".join(lines), filename=str(page)).body
        except SyntaxError as e:
            raise SystemExit(f"{page}: a code cell does not parse as Python ({e.msg}: {e.text!r})") from None
    return ast.Module(body=body, type_ignores=[])


def page_uses(mods: dict[str, Module], book: Path) -> dict[str, set[str]]:
    """For each module, the pages (``book/*.md`` stems) whose code uses it, directly or not (a package: one of
    its modules)."""
    edges = {m: _uses(mods, mod.tree, m, mod.is_package) - {m} for m, mod in mods.items()}
    used: dict[str, set[str]] = {m: set() for m in mods}
    for page in sorted(book.glob("*.md")):
        seen: set[str] = set()
        stack = list(_uses(mods, _code(page), "", False))
        while stack:
            m = stack.pop()
            if m not in seen:
                seen.add(m)
                stack.extend(edges.get(m, ()))
        for m in seen:
            used[m].add(page.stem)
    for m, mod in mods.items():  # a package is used wherever one of its modules is
        if mod.is_package:
            used[m] |= {p for n in mods if n.startswith(m + ".") or m == "lib" for p in used[n]}
    return used


def _chapters(pages: set[str]) -> str:
    """``{"00_a", "01_b", "02_c", "04_d", "about"}`` -> ``"0–2, 4, about"``; ``"–"`` for none."""
    nums = sorted(int(p[:2]) for p in pages if re.match(r"\d\d_", p))
    runs: list[list[int]] = []
    for n in nums:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    parts = [f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs]
    parts += sorted(p for p in pages if not re.match(r"\d\d_", p))
    return ", ".join(parts) or "–"


def render(root: Path = ROOT) -> str:
    """The map, in Markdown: the layers bottom first, then one row per module (by layer, then by name)."""
    mods = read_modules(root / "lib")
    used = page_uses(mods, root / "book")
    layers = " · ".join(f"{i} {', '.join(f'`{p}`' for p in ps)}" for i, ps in enumerate(LAYERS, 1))
    lines = [f"Layers, bottom first (`tools/import_graph.py`'s `LAYERS`): {layers}.", "",
             "| layer | module | holds | ch |", "|---|---|---|---|"]

    def key(m: str) -> tuple[int, str]:
        layer = layer_of(m)
        return (len(LAYERS) if layer is None else layer, mods[m].label.replace("/", "\0"))

    for m in sorted(mods, key=key):
        layer = layer_of(m)
        number = "?" if layer is None else layer + 1
        holds = mods[m].holds or "(no docstring)"
        lines.append(f"| {number} | `{mods[m].label}` | {holds} | {_chapters(used[m])} |")
    return "\n".join(lines) + "\n"


def replace_block(text: str, block: str) -> str:
    """``text`` with what stands between :data:`BEGIN` and :data:`END` replaced by ``block``."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise SystemExit(f"README.md must hold the markers once each, in order:\n{BEGIN}\n{END}")
    head, rest = text.split(BEGIN, 1)
    return f"{head}{BEGIN}\n{block}{END}{rest.split(END, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="put the map into README.md between its markers")
    ap.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    block = render(args.root)
    if not args.write:
        sys.stdout.write(block)
        return 0
    readme = args.root / "README.md"
    text = readme.read_text(encoding="utf-8")
    new = replace_block(text, block)
    if new != text:
        readme.write_text(new, encoding="utf-8")
    print(f"{readme.name}: module map {'rewritten' if new != text else 'already up to date'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
