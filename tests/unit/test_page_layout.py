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
    page = {m.name for m in pkgutil.iter_modules([str(ROOT / "lib" / "page")])}
    assert {"plotting", "figures", "theory_plots", "spectra_plots", "realmodel_plots", "funnel_plots",
            "steering_plots", "bridge_plots", "explorer"} <= page
    stray = [p.name for p in (ROOT / "lib").glob("*.py") if "import altair" in p.read_text(encoding="utf-8")]
    assert not stray, f"modules outside lib/page import Altair: {stray}"
