"""The published site's real decoders (issue 27 §3), by hub id through the loopback stand-in hub.

The publishing workflow runs ``make report`` on small real decoders (``tests/hub_standin.py``'s
``REAL_DECODERS``: SmolLM2, OLMo-2, Gemma-2). Here each id is served as a tiny checkpoint with its real config's
shape features (tied embeddings, QK-norm and output norms, attention and final-logit soft-capping, alternating
sliding-window layers; Gemma-2 gated, fetched with a token given access), and ``tools.report`` runs the exactness
checks, chapter 4 and chapter 6 (the stand-in in the decoder's place) on it from the command line, as the workflow
does: the book's formulas must match the model's own modules, and both chapters must reach their verdicts.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT
from hub_standin import GEMMA_TOKEN, REAL_DECODERS, HubStandin, build_real_decoder_checkpoints

from tools import report

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The stand-in serving the three real decoders' ids, Gemma-2 gated and open to :data:`GEMMA_TOKEN`."""
    repos = build_real_decoder_checkpoints(tmp_path_factory.mktemp("real-decoders"))
    with HubStandin(repos, gated=["google/gemma-2-2b"], tokens=[GEMMA_TOKEN]) as standin:
        yield standin


@pytest.fixture(scope="module")
def stories(tmp_path_factory):
    """Six stories of the decoder's grammar (the chapter's own prompts, fewer: the workflow passes PROMPTS too)."""
    from lib.models.decoder.language import prompts

    path = tmp_path_factory.mktemp("real-decoder-prompts") / "stories.txt"
    path.write_text("\n".join(prompts(6)) + "\n", encoding="utf-8")
    return path


def _text(page) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("hub_id", list(REAL_DECODERS))
def test_chapters_4_and_6_report_on_a_real_decoders_stand_in(hub, stories, tmp_path, hub_id):
    env = dict(os.environ, HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "hf-home"), HF_HUB_OFFLINE="0",
               TRANSFORMERS_OFFLINE="0", HF_HUB_DISABLE_TELEMETRY="1", OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), HF_TOKEN=GEMMA_TOKEN)
    start = len(hub.log)
    proc = subprocess.run([sys.executable, "-m", "tools.report", "--model", hub_id, "--chapters",
                           "04_jacobian_funnel", "06_two_views", "--prompts", str(stories), "--out", str(tmp_path / "out")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert any(r.repo_id == hub_id and r.is_file_download for r in hub.log[start:])
    pages = tmp_path / "out" / report.model_slug(hub_id) / "book"
    assert "all three are exact" in _text(pages / "exactness.html")  # soft-capping, QK-norm, tied embeddings
    chapter = _text(pages / "04_jacobian_funnel.html")
    family = REAL_DECODERS[hub_id]
    assert "d = 32, 4 layers; Jacobians of it and 3 twins on 6 prompts with 200 resamples" in chapter, family
    two_views = _text(pages / "06_two_views.html")  # the stand-in in the decoder's place, MiniLM in the other
    assert "d = 32, 4 layers; Jacobians of it and 3 twins on 6 prompts" in two_views, family
    assert "all-MiniLM-L6-v2 and " in two_views
    # OLMo-2's and Gemma-2's edit meets a norm of the attention's output: one line, and that part is skipped
    assert ("Skipped at matched saturation" in two_views) == (family != "llama"), family
    results = (pages / "results.html").read_text(encoding="utf-8")
    for claim in ("FG3", "FG4", "FG7", "TV1", "TV2", "TV3", "TV4", "TV5", "TV6", "TV7"):
        assert re.search(rf'>{claim}</a>.*?<td class="verdict verdict-[a-z-]+">', results, re.S), claim
