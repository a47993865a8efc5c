"""``tools.import_graph``: floors, upward imports and cycles of a small package with a known answer."""

from __future__ import annotations

from pathlib import Path

from tools.import_graph import layer_of, read_graph


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_floors_upward_imports_and_cycles(tmp_path):
    pkg = _package(tmp_path, {
        "pkg/__init__.py": "from pkg import top\n",
        "pkg/base.py": "import numpy\n",                        # floor 1: nothing of pkg
        "pkg/mid.py": "from pkg.base import x\n",               # floor 2
        "pkg/top.py": "from . import mid\nfrom .sub import leaf\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/leaf.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import top\n"
            "from ..base import y\n"),                          # the TYPE_CHECKING import never runs
        "pkg/loop.py": "import pkg\n",                          # upward, and a cycle with the root
    })
    pkg.joinpath("__init__.py").write_text("from pkg import top, loop\n")
    g = read_graph(pkg)
    assert g.edges["pkg.top"] == {"pkg.mid", "pkg.sub.leaf"}
    assert g.edges["pkg.sub.leaf"] == {"pkg.base"}
    floors = g.floors()
    assert (floors["pkg.base"], floors["pkg.mid"], floors["pkg.sub.leaf"], floors["pkg.top"]) == (1, 2, 2, 3)
    assert floors["pkg"] == floors["pkg.loop"] == 4
    assert g.upward() == [("pkg.loop", "pkg")]
    assert g.cycles() == [["pkg", "pkg.loop"]]


def test_the_book_library_reads(tmp_path):
    """The real ``lib`` parses, and every module is placed on a floor."""
    from tools.import_graph import ROOT

    g = read_graph(ROOT / "lib")
    assert "lib.parallel" in g.lines and set(g.floors()) == set(g.lines)


def test_lib_keeps_its_layers():
    """``lib`` as the README draws it: no import reaches back up (to an enclosing package or a higher layer of
    :data:`tools.import_graph.LAYERS`), no cycle, and no module over 850 lines but the cohesive steering edit."""
    from tools.import_graph import ROOT

    g = read_graph(ROOT / "lib")
    assert g.upward() == []
    assert g.against_layers() == []
    assert g.cycles() == []
    assert {m for m, n in g.lines.items() if n > 850} <= {"lib.methods.steering"}
    assert all(layer_of(m) is not None for m in g.lines)
