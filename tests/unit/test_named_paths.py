"""Every test file the repository names (such as ``tests/unit/test_readme.py`` or ``tests/hub_standin.py``),
and every test named after one (``tests/unit/test_readme.py::test_every_lib_module_is_in_the_readme_map``),
exists: moving or renaming a test cannot leave a stale pointer in the README, the chapters, ``lib``'s
docstrings, the benchmarks or the CI files."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from conftest import ROOT

#: Folders that are not the project's own text (builds, caches; and every hidden folder but CI's two)
SKIP = {"_build", "node_modules", "test-artifacts", "__pycache__"}
CI = {".github", ".ci"}
SUFFIXES = {".py", ".md", ".yml", ".yaml", ".toml", ".sh", ".css", ".js", ".cfg", ".txt", ""}
NAMED = re.compile(r"(?<![\w/.])(tests/[\w/]*\w\.py)(?:::(\w+))?")


def _files() -> Iterator[Path]:
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIP and (not d.startswith(".") or d in CI))
        for name in sorted(files):
            if Path(name).suffix in SUFFIXES:
                yield Path(folder) / name


def test_every_named_test_file_and_test_exists():
    stale = []
    for path in _files():
        for name, test in NAMED.findall(path.read_text(encoding="utf-8", errors="replace")):
            target = ROOT / name
            if not target.is_file():
                stale.append(f"{path.relative_to(ROOT)}: {name}")
            elif test and not re.search(rf"^\s*def {test}\(", target.read_text(encoding="utf-8"), re.M):
                stale.append(f"{path.relative_to(ROOT)}: {name}::{test}")
    assert not stale, "names of tests that do not exist:\n" + "\n".join(stale)


def test_every_test_file_stands_in_its_folder():
    """``tests/`` holds the shared helpers; each test file is in ``unit/``, ``pages/`` or ``browser/``."""
    loose = sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    assert not loose, f"move these into tests/unit, tests/pages or tests/browser (README, Layout): {loose}"
    assert {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and not p.name.startswith((".", "_"))} == {
        "unit", "pages", "browser"}
