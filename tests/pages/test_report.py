"""``make report`` (tools/report.py) end to end: the model-driven chapters re-run on a reader's model, as a site.

On tiny local checkpoints of an encoder (BERT) and a decoder (Llama, grouped-query attention) family, with a
prompts file: the exactness checks hold, every chapter of ``CHAPTERS`` that has a ``parameters`` cell ran on the
model (the others are skipped with a note), the Results page carries the claims of the chapters that ran in the
book's verdict words and colours, and the About page says what ran, where and how long. Once more by hub id
through the loopback stand-in hub (tests/hub_standin.py), with the command line. A misspelt alias and a part
that raises each stop the report with one message.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from tools import report


def _text(page: Path) -> str:
    """The article of a built page as plain text."""
    s = page.read_text(encoding="utf-8")
    s = s[s.find("<article"):s.find("</article>")]
    s = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", s)))
    return re.sub(r" ([,.;:])", r"\1", s)


def test_chapters_is_every_chapter_with_a_parameters_cell():
    """One constant lists the model-driven chapters; a chapter that gains a parameters cell must be added to it."""
    with_cell = {p.stem for p in (ROOT / "book").glob("[0-9][0-9]_*.md") if report.parameter_names(p) is not None}
    assert with_cell <= set(report.CHAPTERS), with_cell - set(report.CHAPTERS)
    assert all((ROOT / "book" / f"{c}.md").is_file() for c in report.CHAPTERS)
    assert {"00_layer_spectra", "03_real_models"} <= with_cell
    assert report.parameter_names(ROOT / "book" / "01_power_method.md") is None
    assert report.parameter_names(report.EXACTNESS) == ["model", "prompts", "n_prompts", "device", "dtype"]


def test_model_slug(tmp_path):
    assert report.model_slug("openai-community/gpt2") == "openai-community--gpt2"
    assert report.model_slug("minilm") == "minilm"
    (tmp_path / "My Model").mkdir()
    assert report.model_slug(f"{tmp_path}/My Model/") == "my-model"  # a folder: its name


def test_a_misspelt_alias_stops_before_anything_runs(tmp_path, capsys):
    assert report.main(["--model", "minilmm", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("make report: ModelNotAvailableError:") and "did you mean 'minilm'?" in err, err
    assert len(err.strip().splitlines()) == 1 and not any(tmp_path.iterdir())


def test_a_missing_prompts_file_stops_before_anything_runs(tmp_path, capsys):
    assert report.main(["--model", "minilm", "--prompts", str(tmp_path / "nope.txt"), "--out", str(tmp_path)]) == 2
    assert "InputError" in capsys.readouterr().err and not any(tmp_path.iterdir())


@pytest.mark.slow
def test_a_part_that_raises_stops_the_report_with_one_error(tmp_path, monkeypatch, tiny_dir):
    page = tmp_path / "broken.md"
    page.write_text("---\njupytext:\n  text_representation:\n    format_name: myst\nkernelspec:\n"
                    "  display_name: Python 3\n  language: python\n  name: python3\n"
                    "---\n\n# Broken\n\n```{code-cell} ipython3\n:tags: [parameters]\n\nmodel = 'minilm'\n```\n\n"
                    "```{code-cell} ipython3\nimport lib\nraise lib.InputError(f'{model} has no such thing')\n```\n",
                    encoding="utf-8")
    monkeypatch.setattr(report, "EXACTNESS", page)
    import lib

    with pytest.raises(lib.ReportError) as err:
        report.build_report(str(tiny_dir("bert")), chapters=(), out=tmp_path / "out")
    message = str(err.value)
    assert message.startswith("Exactness checks could not analyse") and "InputError" in message
    assert "has no such thing" in message and "exactness.ipynb" in message


@pytest.fixture(scope="module")
def prompts_file(tmp_path_factory) -> Path:
    """Six prompts of the decoder's grammar (the tiny decoder's tokenizer knows only its words)."""
    from lib.models.decoder.language import prompts

    path = tmp_path_factory.mktemp("report-prompts") / "prompts.txt"
    path.write_text("\n".join(prompts(6)) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("family", ["bert", "llama"])
def test_report_on_a_tiny_local_checkpoint(tmp_path, tokenized_tiny, prompts_file, family, monkeypatch):
    import lib

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")  # tiny models: threads only contend
    folder = tokenized_tiny[family]
    label = lib.load_model(str(folder)).label
    site = report.build_report(str(folder), prompts=str(prompts_file), out=tmp_path)
    assert site == tmp_path / report.model_slug(str(folder))
    check_site(site, label, str(folder), str(prompts_file))


def check_site(site: Path, label: str, model: str, prompts: str) -> None:
    """What a report's site must show (its pages, the exactness checks, the About page, the Results page)."""
    from lib.page.claims import CLAIMS, VERDICTS, verdict_slug

    assert (site / "index.html").is_file()
    pages = site / "book"

    exact = _text(pages / "exactness.html")
    assert f"On {label}," in exact and "all three are exact" in exact, exact[-600:]

    ran = [c for c in report.CHAPTERS if report.parameter_names(ROOT / "book" / f"{c}.md") is not None]
    about = _text(pages / "about.html")
    assert label in about and model in about and "cpu" in about and prompts in about
    assert "package torch" in about and "Exactness checks" in about
    for chapter in report.CHAPTERS:
        title = report._title(ROOT / "book" / f"{chapter}.md")
        if chapter in ran:
            assert (pages / f"{chapter}.html").is_file()
            assert re.search(re.escape(title) + r" \d+ s", about), (chapter, about)
            assert label in _text(pages / f"{chapter}.html")
        else:
            assert f"{title} skipped: no parameters cell" in about, (chapter, about)
            assert not (pages / f"{chapter}.html").exists()

    results = (pages / "results.html").read_text(encoding="utf-8")
    tested = [c for c in CLAIMS if c.chapter in ran]
    assert tested, "no chapter that ran tests a claim"
    for c in tested:
        row = re.search(rf'<tr><td class="claim-id"><a href="{c.chapter}.html#{c.label}">{c.id}</a>.*?</tr>',
                        results)
        assert row, c.id
        verdict = re.search(r'<td class="verdict verdict-([a-z-]+)">', row.group(0)).group(1)
        assert verdict in {verdict_slug(v) for v in VERDICTS}
    assert label in _text(pages / "results.html")
    target = (pages / f"{tested[0].chapter}.html").read_text(encoding="utf-8")
    assert f'id="{tested[0].label}"' in target  # the claim's link lands on its section


@pytest.mark.slow
def test_report_by_hub_id_through_the_loopback_hub(tmp_path):
    """The command line with a hub id: the checkpoint comes from the stand-in hub into a fresh cache (the hub is
    open, as in ``make report``; the real-model switch stays off, so the chapters add no paper checkpoint)."""
    from hub_standin import HubStandin, build_checkpoint

    hub_id = "someone/tiny-bert"
    folder = build_checkpoint("bert", tmp_path / "repo", seed=3)
    with HubStandin({hub_id: folder}) as hub:
        env = dict(os.environ, HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "hf-home"), HF_HUB_OFFLINE="0",
                   TRANSFORMERS_OFFLINE="0", HF_HUB_DISABLE_TELEMETRY="1",
                   OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
        proc = subprocess.run([sys.executable, "-m", "tools.report", "--model", hub_id, "--chapters",
                               "00_layer_spectra", "--out", str(tmp_path / "out")], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=1800, check=False)
        downloads = hub.file_downloads(0)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    site = tmp_path / "out" / "someone--tiny-bert"
    assert proc.stdout.strip().endswith(str(site / "index.html"))
    assert {r.repo_id for r in downloads if r.repo_id} == {hub_id}
    about = _text(site / "book" / "about.html")
    assert f"model {hub_id}" in about and "0. A first look" in about
    assert "all three are exact" in _text(site / "book" / "exactness.html")
    assert (site / "book" / "00_layer_spectra.html").is_file()


def test_a_model_fills_the_place_its_kind_has_in_each_chapter(tiny64):
    """Chapter 4 tests the paper's claims on a pre-norm model beside a post-LN contrast; chapters 5 and 6 put an
    encoder in the first place and a decoder in the second. A report gives its model the place that fits."""
    from tools import report

    bert, llama = tiny64("bert"), tiny64("llama")
    assert [report.model_place(c, bert) for c in report.CHAPTERS] == [
        "model", "model", "second_model", "model", "model"]
    assert [report.model_place(c, llama) for c in report.CHAPTERS] == [
        "model", "model", "model", "second_model", "second_model"]
