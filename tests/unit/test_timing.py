"""lib.page.timing: one stopwatch for the runtimes a page quotes (glued as whole seconds, never on failure).

The clock is replaced by a fake one, so nothing here depends on how fast or busy the machine is.
"""

from __future__ import annotations

import pytest
from conftest import ROOT

from lib.page import prose, timing
from lib.page.timing import Stopwatch


class FakeClock:
    """``perf_counter`` that reads ``now``, moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(timing, "perf_counter", fake)
    return fake


@pytest.fixture
def glued(monkeypatch):
    calls: list[tuple[str, object]] = []
    monkeypatch.setattr(timing, "glue", lambda name, value: calls.append((name, value)))
    return calls


def test_block_glues_its_whole_seconds(clock, glued):
    with Stopwatch("t_jac") as t:
        clock.now += 12.4
        assert not t.stopped and t.seconds == pytest.approx(12.4)
    clock.now += 50  # after the block: the time is frozen
    assert t.stopped and t.seconds == pytest.approx(12.4)
    assert glued == [("t_jac", "12")]


def test_entering_restarts_the_clock(clock, glued):
    t = Stopwatch("t_ctrl")
    clock.now += 30  # between construction and the block: not counted
    with t:
        clock.now += 2.6
    assert glued == [("t_ctrl", "3")]


def test_unnamed_stopwatch_only_measures(clock, glued):
    with Stopwatch() as t:
        clock.now += 0.25
    assert t.seconds == pytest.approx(0.25) and glued == []


def test_failed_block_glues_nothing_and_raises(clock, glued):
    with pytest.raises(ZeroDivisionError), Stopwatch("t_boot") as t:
        clock.now += 1
        _ = 1 / 0
    assert glued == [] and t.stopped


def test_page_total_runs_from_construction_and_stops_once(clock, glued):
    page = Stopwatch("t_total")
    clock.now += 75.5
    assert page.stop() is None and page.seconds == pytest.approx(75.5)
    clock.now += 10
    page.stop()  # a second stop changes nothing and glues nothing more
    assert page.seconds == pytest.approx(75.5)
    assert glued == [("t_total", "76")]
    assert repr(page) == "Stopwatch('t_total', 75.5 s, stopped)"


def test_glued_runtime_reads_in_the_lab(clock, monkeypatch):
    """In a kernel the name is published for the prose's ``{eval}`` (through lib.page.prose.glue)."""
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.setattr(prose, "_published", {})
    monkeypatch.setattr(prose, "_hooked_shells", set())
    shell = InteractiveShell.instance()
    try:
        shell.run_cell("from lib.page.timing import Stopwatch\nwith Stopwatch('t_power'):\n    x = 1")
        assert shell.user_ns["t_power"] == "0"
    finally:
        InteractiveShell.clear_instance()


def test_chapters_time_with_the_stopwatch():
    """No chapter keeps a hand-made stopwatch (``time.time()``/``perf_counter`` and a glue cell)."""
    for chapter in sorted((ROOT / "book").glob("[0-9][0-9]_*.md")):
        text = chapter.read_text(encoding="utf-8")
        for clock_call in ("time.time()", "perf_counter()", "import time\n"):
            assert clock_call not in text, f"{chapter.name}: {clock_call.strip()!r}; use lib.page.timing.Stopwatch"
