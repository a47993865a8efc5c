"""``lib``'s computing modules import neither Altair nor ipywidgets: what a page draws lives in ``lib.page``."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

from conftest import ROOT

import lib


def test_computing_modules_import_no_plotting_or_widgets():
    names = sorted(m.name for m in pkgutil.walk_packages(lib.__path__, "lib.")
                   if not m.name.startswith("lib.page") and not m.name.startswith("lib.models.decoder.train"))
    code = ("import sys\n" + "".join(f"import {n}\n" for n in names)
            + "print(sorted(m for m in ('altair', 'ipywidgets', 'vl_convert') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"importing {len(names)} computing modules loaded {out.stdout.strip()}"


def test_the_page_package_holds_every_chart_module():
    """One page module per chapter, named by its slug, beside the shared page modules; Altair nowhere else."""
    page = {m.name for m in pkgutil.iter_modules([str(ROOT / "lib" / "page")])}
    slugs = {p.stem.split("_", 1)[1] for p in (ROOT / "book").glob("0*_*.md")}
    assert {"plotting", "figures", "explorer", "setup", "tables", "prose", "claims", "source"} | slugs <= page, \
        f"lib/page lacks {sorted(({'plotting', 'figures', 'explorer'} | slugs) - page)}"
    stray = [str(p.relative_to(ROOT)) for p in (ROOT / "lib").rglob("*.py")
             if "page" not in p.relative_to(ROOT / "lib").parts and "import altair" in p.read_text(encoding="utf-8")]
    assert not stray, f"modules outside lib/page import Altair: {stray}"
