"""The book build, per chapter: wall time and peak memory of executing each notebook (not a test).

Every page of ``_toc.yml`` that is a notebook (a MyST markdown file with a ``kernelspec``) is
executed the way the build executes it (``jupytext`` → ``nbclient``, kernel ``python3``, working
directory ``book/``, ``SPECTRAL_BOOK_BUILD=1``, offline), each in its own subprocess. The parent
polls the subprocess *tree* (the runner and its kernel) every 50 ms with psutil and records the
peak of the summed resident set. Regressions in a chapter's run time or memory show here without a
full ``jupyter-book`` build; the build's own execution table is on the site's About page.

Each chapter is set beside its budget (``BUDGET_S``: the seconds its Run All may take on a quiet 2-core
machine, from the issues; 60 s for a page not listed): ``baseline_s`` is the budget and ``ratio`` the
measured time over it, so a ratio above 1 is a chapter over its budget. This is a benchmark, not a test:
a run time depends on the machine and on what else runs on it, so no test asserts one.

Run: ``python -m benchmarks.bench_book`` (all chapters) or :func:`run`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from benchmarks import format_table

ROOT = Path(__file__).resolve().parents[1]

BUDGET_S = {"03_real_models": 180, "04_jacobian_funnel": 240, "05_steering_lab": 120, "06_two_views": 60}
"""Seconds each chapter's Run All may take on a quiet 2-core machine (the issues' budgets); others: 60."""
DEFAULT_BUDGET_S = 60


def notebook_pages() -> list[Path]:
    """The notebook pages of the table of contents, in order."""
    from lib.page.build_info import is_notebook, toc_pages

    pages = [ROOT / f"{page}.md" for page in toc_pages(ROOT)]
    return [p for p in pages if is_notebook(p)]


def _execute(path: str, timeout: int) -> None:
    """Child process: execute one MyST notebook as the build does (raises on a failing cell)."""
    import jupytext
    from nbclient import NotebookClient

    nb = jupytext.read(path)
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(Path(path).parent)}}).execute()


def time_chapter(page: Path, timeout: int = 900) -> dict:
    env = dict(os.environ, SPECTRAL_BOOK_BUILD="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONHASHSEED="0")
    cmd = [sys.executable, "-m", "benchmarks.bench_book", "--execute", str(page), "--timeout", str(timeout)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ps = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            rss = ps.memory_info().rss + sum(c.memory_info().rss for c in ps.children(recursive=True))
            peak = max(peak, rss)
        except psutil.Error:
            pass
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    log = proc.stdout.read() if proc.stdout else ""
    budget = BUDGET_S.get(page.stem, DEFAULT_BUDGET_S)
    row = {"size": page.stem, "time_s": wall, "baseline_s": budget, "ratio": wall / budget, "peak_mb": peak / 2**20,
           "status": "ok" if proc.returncode == 0 else "failed"}
    if proc.returncode != 0:
        row["error"] = log.strip().splitlines()[-1][:300] if log.strip() else f"exit code {proc.returncode}"
    return row


def run(quick: bool = False, verbose: bool = True, timeout: int = 900) -> dict:
    """Execute every notebook chapter (``quick``: only the first two) and time it."""
    pages = notebook_pages()
    if quick:
        pages = pages[:2]
    out = {f"book_{p.stem}": time_chapter(p, timeout) for p in pages}
    if verbose:
        print(report(out))
    return out


def report(out: dict) -> str:
    rows = [dict(kernel=k, **v) for k, v in out.items()]
    return format_table("book chapters: execution wall time against the budget, and peak RSS (runner + kernel)", rows, [
        ("kernel", "chapter", "s"), ("time_s", "wall s", ".1f"), ("baseline_s", "budget s", ".0f"),
        ("ratio", "wall/budget", ".2f"), ("peak_mb", "peak MB", ".0f"), ("status", "status", "s")])


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--execute", help="execute one notebook (child mode)")
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args()
    if args.execute:
        _execute(args.execute, args.timeout)
    else:
        run(timeout=args.timeout)
