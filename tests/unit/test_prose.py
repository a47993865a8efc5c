"""lib.page.prose: glue for the site and publish for JupyterLab, never over a chapter's own variable."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

from lib.page import prose


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch):
    monkeypatch.setattr(prose, "_published", {})
    monkeypatch.setattr(prose, "_hooked_shells", set())


def test_publish_binds_and_republishes():
    ns: dict = {}
    prose.publish("n_layers", 6, ns)
    assert ns["n_layers"] == 6
    prose.publish("n_layers", 7, ns)  # re-running a glue cell in the lab
    assert ns["n_layers"] == 7


def test_publish_refuses_a_chapter_variable():
    d = [1.0]
    ns = {"d": d}
    with pytest.raises(prose.GlueNameError, match="already defines"):
        prose.publish("d", "384", ns)
    assert ns["d"] is d
    prose.publish("d", d, ns)  # the very same object is fine


@pytest.mark.parametrize("name", ["1x", "_x", "a-b", "a.b", "x::y", ""])
def test_publish_refuses_non_identifiers(name):
    with pytest.raises(prose.GlueNameError, match="identifier"):
        prose.publish(name, 1, {})


def test_check_published_names_rebound_and_deleted():
    ns: dict = {}
    prose.publish("gap", "0.53", ns)
    prose.publish("radius", "1.2", ns)
    prose.check_published(ns)
    ns["gap"] = "0.9"
    del ns["radius"]
    with pytest.raises(prose.GlueNameError, match="gap, radius"):
        prose.check_published(ns)


def test_glue_in_a_shell_publishes_glues_and_checks_after_each_cell(capsys):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_cell("from lib.page.prose import glue\nglue('n_fro', 5)")
        assert shell.user_ns["n_fro"] == 5
        assert shell.run_cell("n_fro + 1").result == 6
        assert shell.run_cell("glue('glue', 1)").error_in_exec is not None  # clobbers the function
        rebound = shell.run_cell("n_fro = 4")
        assert "n_fro were rebound" in capsys.readouterr().out + str(rebound.error_in_exec)
    finally:
        InteractiveShell.clear_instance()


def test_glue_outside_ipython_only_checks_the_name():
    prose.glue("plain_value", 3)
    with pytest.raises(prose.GlueNameError):
        prose.glue("not a name", 3)


CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.md"))


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_prose_numbers_read_in_both_surfaces(chapter):
    """Numbers in prose are ``{eval}`name``` with a bare name, glued by lib.page.prose, never saved into the file."""
    text = chapter.read_text(encoding="utf-8")
    assert "{glue" not in text, f"{chapter.name}: a {{glue...}} role shows as raw text in JupyterLab; use {{eval}}"
    assert "from myst_nb import glue" not in text, f"{chapter.name}: import glue from lib.page.prose"
    bad = [n for n in re.findall(r"\{eval\}`([^`]*)`", text) if not prose.NAME_PATTERN.fullmatch(n)]
    assert not bad, f"{chapter.name}: {{eval}} takes a bare name: {bad}"
    header = text.split("\n---\n", 1)[0]
    assert "cell_metadata_filter: -user_expressions" in header, (
        f"{chapter.name}: saving in JupyterLab would write jupyterlab-myst's user_expressions into the file"
    )


def test_a_glued_claim_can_be_quoted_in_the_lab():
    """Chapter 4's Takeaway quotes ``{eval}`claim_FG3_verdict```: the lab showed a NameError, because
    glue_claim glued for the site only."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_cell("from lib.page.claims import glue_claim\n"
                       "glue_claim('FG3', models='m', measured='x', verdict='partly reproduced')")
        assert shell.run_cell("claim_FG3_verdict").result == "partly reproduced"
    finally:
        InteractiveShell.clear_instance()


def test_glued_returns_the_published_values_in_order_and_names_the_missing():
    ns: dict = {}
    prose.publish("f_tr", "0.61–0.70", ns)
    prose.publish("f_rd", "0.55", ns)
    assert prose.glued("f_rd", "f_tr") == ["0.55", "0.61–0.70"]
    with pytest.raises(KeyError, match="never glued: f_x, f_y"):
        prose.glued("f_tr", "f_x", "f_y")
