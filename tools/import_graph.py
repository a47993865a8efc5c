"""The import graph of ``lib``: its depth, the imports that run back up, and the largest modules.

``python -m tools.import_graph`` reads every ``lib/**/*.py`` (the code is parsed, never run) and prints

* ``depth``: the number of floors of the graph once its cycles are collapsed (a module imports only what
  stands on a lower floor; floor 1 imports nothing of ``lib``);
* ``upward imports``: every import of an enclosing package by a module inside it (``lib.progress`` importing
  ``lib``: the package's ``__init__`` stands above everything it gathers, so such an import reaches back up
  and pulls in the whole package);
* ``against the layers``: every import of a module in a higher layer of :data:`LAYERS` (``lib``'s concerns,
  from the environment switches at the bottom to the exercises at the top) by one in a lower layer;
* ``cycles``: the groups of modules that import each other, directly or not;
* the modules over ``--max-lines`` lines (default 850).

A package counts as its ``__init__``; ``from lib import x`` is an import of ``lib.x`` when ``x`` is a
module, else of ``lib``. Imports under ``if TYPE_CHECKING:`` are left out (they never run).
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["LAYERS", "Graph", "layer_of", "read_graph", "main"]

#: ``lib``'s layers by concern, bottom first: a module may import its own layer and those below it, never one
#: above. A module belongs to the layer of the longest prefix that names it; the package root ``lib`` is the
#: public face at the top (nothing inside ``lib`` imports it).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("lib.config", "lib.errors"),                      # environment switches and the library's errors
    ("lib.memory", "lib.parallel", "lib.progress"),    # plumbing
    ("lib.stats", "lib.linalg"),                       # arrays in, arrays out
    ("lib.models",),                                   # families, loading, the spectral model, twins, prompts
    ("lib.jacobians", "lib.theory"),                   # block Jacobians; toys and the simplified layer
    ("lib.methods",),                                  # what two chapters or more measure
    ("lib.chapters",),                                 # one analysis module per chapter
    ("lib.page",),                                     # what a page shows: theme, tables, prose, charts, widgets
    ("lib.exercises",),                                # the checkers
    ("lib",),                                          # the public face
)


def layer_of(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> int | None:
    """The index in ``layers`` of the longest prefix naming ``module`` (``None`` if none does)."""
    best: tuple[int, int] | None = None
    for i, prefixes in enumerate(layers):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[1]):
                best = (i, len(p))
    return None if best is None else best[0]


class Graph:
    """Modules (dotted names) and the imports between them: ``edges[a]`` is the set ``a`` imports."""

    def __init__(self, lines: dict[str, int], edges: dict[str, set[str]]):
        self.lines = lines
        self.edges = edges

    def reaches(self, src: str) -> set[str]:
        """Every module ``src`` imports, directly or not."""
        seen: set[str] = set()
        stack = list(self.edges.get(src, ()))
        while stack:
            m = stack.pop()
            if m not in seen:
                seen.add(m)
                stack.extend(self.edges.get(m, ()))
        return seen

    def upward(self) -> list[tuple[str, str]]:
        """The imports ``(a, b)`` of an enclosing package ``b`` by a module ``a`` inside it. Sorted."""
        return sorted((a, b) for a, bs in self.edges.items() for b in bs if a.startswith(b + "."))

    def against_layers(self, layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[tuple[str, str]]:
        """The imports ``(a, b)`` of a module ``b`` in a higher layer than ``a`` (enclosing packages aside). Sorted."""
        out = []
        for a, bs in self.edges.items():
            for b in bs:
                la, lb = layer_of(a, layers), layer_of(b, layers)
                if la is not None and lb is not None and lb > la and not a.startswith(b + "."):
                    out.append((a, b))
        return sorted(out)

    def cycles(self) -> list[list[str]]:
        """The groups (two or more modules) that reach each other, each sorted; sorted by first member."""
        groups = {frozenset({m} | {n for n in self.reaches(m) if m in self.reaches(n)}) for m in self.lines}
        return sorted(sorted(g) for g in groups if len(g) > 1)

    def floors(self) -> dict[str, int]:
        """Each module's floor once cycles are collapsed: 1 + the highest floor it imports (1 for none)."""
        memo: dict[str, int] = {}
        cyc = {m: frozenset(self.reaches(m) & {n for n in self.lines if m in self.reaches(n)} | {m})
               for m in self.lines}

        def floor(m: str) -> int:
            if m not in memo:
                memo[m] = 0  # a guard for the collapsed cycle itself
                below = {b for a in cyc[m] for b in self.edges.get(a, ()) if b not in cyc[m]}
                memo[m] = 1 + max((floor(b) for b in below), default=0)
                for a in cyc[m]:
                    memo[a] = memo[m]
            return memo[m]

        return {m: floor(m) for m in self.lines}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(tree: ast.Module, here: str, is_package: bool) -> Iterable[tuple[str, list[str]]]:
    """``(module, names)`` for each import outside ``if TYPE_CHECKING:`` blocks, relative ones resolved."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for b in node.body for n in ast.walk(b))
    pkg = here if is_package else here.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            yield base, [a.name for a in node.names]


def read_graph(package: Path) -> Graph:
    """The import graph of the package folder ``package`` (e.g. ``ROOT / "lib"``), among its own modules."""
    root = package.parent
    files = {_module_name(p, root): p for p in sorted(package.rglob("*.py"))}
    lines = {m: len(p.read_text().splitlines()) for m, p in files.items()}
    edges: dict[str, set[str]] = {m: set() for m in files}
    for m, p in files.items():
        for mod, names in _imports(ast.parse(p.read_text()), m, p.name == "__init__.py"):
            targets = [f"{mod}.{n}" for n in names if f"{mod}.{n}" in files] or [mod]
            for t in targets:
                while t and t not in files:  # lib.models.loading.x -> lib.models.loading
                    t = t.rpartition(".")[0]
                if t and t != m:
                    edges[m].add(t)
    return Graph(lines, edges)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", type=Path, default=ROOT / "lib")
    ap.add_argument("--max-lines", type=int, default=850)
    args = ap.parse_args(argv)
    g = read_graph(args.package)
    floors = g.floors()
    up, against, cycles = g.upward(), g.against_layers(), g.cycles()
    print(f"{len(g.lines)} modules, {sum(g.lines.values())} lines; depth {max(floors.values())} floors; "
          f"{len(up)} upward imports; {len(against)} against the layers; {len(cycles)} import cycles")
    for a, b in up:
        print(f"  upward: {a} imports its enclosing package {b}")
    for a, b in against:
        print(f"  against the layers: {a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})")
    for c in cycles:
        print(f"  cycle: {', '.join(c)}")
    for m, n in sorted(g.lines.items(), key=lambda kv: -kv[1]):
        if n > args.max_lines:
            print(f"  over {args.max_lines} lines: {m} {n}")


if __name__ == "__main__":
    main()
