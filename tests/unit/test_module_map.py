"""``tools.module_map``: the README's map of ``lib`` from a small package and book with a known answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.module_map import BEGIN, END, main, render, replace_block


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


CELL = "```{{code-cell}} ipython3\n{}\n```\n"


def _sample(tmp_path: Path) -> Path:
    return _tree(tmp_path, {
        "lib/__init__.py": '"""``lib``: the root, which hands ``load`` on."""\n'
                           "from lib.models.loading import load\n",
        "lib/config.py": '"""Switches | flags, read at call time\nand wrapped.\n\nNot this paragraph."""\n',
        "lib/stats.py": '"""Shared statistics (see :func:`~lib.stats.boot` and :mod:`lib.config`)."""\n'
                        "from lib import config\n",
        "lib/models/__init__.py": '"""``lib.models``: model adapters."""\n'
                                  "from lib.models.loading import load\n",
        "lib/models/loading.py": '"""Loading checkpoints."""\nfrom lib.stats import x\n',
        "lib/page/__init__.py": "",
        "lib/page/tables.py": '"""Tables for the page."""\n',
        "book/00_first.md": CELL.format("import lib\nm = lib.load()"),
        "book/01_second.md": "---\nkernelspec: {}\n---\n" + CELL.format(
            "---\ntags: [remove-cell]\n---\n%matplotlib inline\nfrom lib.page.tables import t"),
        "book/02_third.md": CELL.format("from lib.models import load"),
        "book/about.md": CELL.format("from lib import config"),
        "book/intro.md": "No code here.\n",
    })


def test_rows_layers_docstrings_and_the_pages_that_use_each_module(tmp_path):
    lines = render(_sample(tmp_path)).splitlines()
    assert lines[0].startswith("Layers, bottom first") and "1 `lib.config`, `lib.errors`" in lines[0]
    rows = {r.split(" | ")[1]: r for r in lines if r.startswith("| ") and "`" in r.split(" | ")[1]}
    assert list(rows) == ["`config`", "`stats`", "`models/`", "`models/loading`", "`page/`", "`page/tables`",
                          "`lib`"]
    # the first paragraph, one line, | escaped; a package's own name dropped; reST roles as code
    assert rows["`config`"] == ("| 1 | `config` | Switches \\| flags, read at call time and wrapped. "
                               "| 0, 2, about |")
    assert rows["`stats`"] == "| 3 | `stats` | Shared statistics (see `boot` and `lib.config`). | 0, 2 |"
    assert rows["`models/`"] == "| 4 | `models/` | Model adapters. | 0, 2 |"
    # lib.load after `import lib` and `from lib.models import load` count for the module that defines load
    assert rows["`models/loading`"] == "| 4 | `models/loading` | Loading checkpoints. | 0, 2 |"
    assert rows["`page/`"] == "| 8 | `page/` | (no docstring) | 1 |"
    assert rows["`page/tables`"] == "| 8 | `page/tables` | Tables for the page. | 1 |"
    assert rows["`lib`"] == "| 10 | `lib` | The root, which hands `load` on. | 0–2, about |"


def test_write_replaces_only_the_block_between_the_markers(tmp_path, capsys):
    root = _sample(tmp_path)
    readme = f"# Title\n\nBefore.\n\n{BEGIN}\nstale\n{END}\n\nAfter.\n"
    (root / "README.md").write_text(readme, encoding="utf-8")
    assert main(["--write", "--root", str(root)]) == 0
    text = (root / "README.md").read_text(encoding="utf-8")
    assert text == f"# Title\n\nBefore.\n\n{BEGIN}\n{render(root)}{END}\n\nAfter.\n"
    assert main(["--write", "--root", str(root)]) == 0 and "already up to date" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="must hold the markers"):
        replace_block("no markers", "x")


def test_a_chapter_cell_that_is_not_python_is_named(tmp_path):
    root = _sample(tmp_path)
    (root / "book" / "03_bad.md").write_text(CELL.format("def (:"), encoding="utf-8")
    with pytest.raises(SystemExit, match="03_bad.md: a code cell does not parse"):
        render(root)
