"""The claims registry and the Results page's table (no build needed)."""

from __future__ import annotations

import re
import sys

import pytest
from conftest import ROOT, toc_pages

from lib.page import claims

sys.path.insert(0, str(ROOT / "book" / "_ext"))
from claims_table import claims_markdown  # noqa: E402


def test_claim_ids_are_unique_and_chapters_exist():
    ids = [c.id for c in claims.CLAIMS]
    assert len(ids) == len(set(ids))
    pages = set(toc_pages())
    for c in claims.CLAIMS:
        assert f"book/{c.chapter}" in pages, f"{c.id}: chapter {c.chapter} is not in _toc.yml"


def test_every_claim_is_glued_and_labelled_by_its_chapter():
    """The chapter calls glue_claim for its claims (each id quoted in it) and carries each claim's label."""
    for c in claims.CLAIMS:
        text = (ROOT / "book" / f"{c.chapter}.md").read_text(encoding="utf-8")
        assert f"({c.label})=" in text, f"{c.chapter} has no target ({c.label})="
        # glued by a direct call or in a loop over the ids (the built page's test checks the values themselves)
        assert "glue_claim(" in text and re.search(rf"[\"']{c.id}[\"']", text), f"{c.chapter} never glues {c.id}"


def test_glue_claim_rejects_unknown_ids_verdicts_and_empty_values():
    with pytest.raises(KeyError, match="known"):
        claims.glue_claim("XX1", models="m", measured="x", verdict="reproduced")
    with pytest.raises(ValueError, match="unknown verdict"):
        claims.glue_claim("LA1", models="m", measured="x", verdict="sort of")
    with pytest.raises(ValueError, match="empty measured"):
        claims.glue_claim("LA1", models="m", measured=" ", verdict="reproduced")


def test_verdict_if_checks_its_vocabulary():
    assert claims.verdict_if(True) == "reproduced"
    assert claims.verdict_if(False, otherwise="not specific to training") == "not specific to training"
    with pytest.raises(ValueError):
        claims.verdict_if(True, when_held="yes")


def test_claims_table_has_one_row_per_claim_pasting_from_its_chapter():
    for source in ("li2026power", "fernando2026residual", "ours"):
        lines = claims_markdown(source)
        rows = [c for c in claims.CLAIMS if c.source == source]
        assert sum(line.startswith("* - ") for line in lines) == len(rows) + 1  # + header row
        text = "\n".join(lines)
        for c in rows:
            for field in ("models", "measured", "verdict"):
                # the ':s' format spec is needed: without it myst-nb's text role cuts 'doc::key' at its last colon
                assert f"{{glue:text}}`{c.chapter}.md::{c.key(field)}:s`" in text
            assert f"{{ref}}`chapter {int(c.chapter[:2])} <{c.label}>`" in text  # a section title may hold TeX
    with pytest.raises(ValueError):
        claims_markdown("nobody2026")


def test_every_claim_has_a_short_line_and_the_books_own_are_questions():
    for c in claims.CLAIMS:
        assert 3 <= len(c.short.split()) <= 13, f"{c.id}: {c.short!r} is not a line of about ten words"
        assert c.short.endswith("?") == (c.source == "ours"), f"{c.id}: only the book's own rows are questions"


def test_verdict_slugs_answers_and_counts():
    slugs = [claims.verdict_slug(v) for v in claims.VERDICTS]
    assert len(set(slugs)) == len(slugs) and all(s.replace("-", "").isalnum() for s in slugs)
    assert set(claims.ANSWERS) == set(claims.VERDICTS)
    with pytest.raises(ValueError, match="unknown verdict"):
        claims.verdict_slug("sort of")
    ours = claims.claim("TV1")
    assert claims.answer(ours, "reproduced") == "yes" and claims.answer(ours, "not reproduced") == "no"
    assert claims.answer(claims.claim("LA1"), "partly reproduced") == "partly reproduced"
    fg = [c.id for c in claims.CLAIMS if c.source == "fernando2026residual"]
    verdicts = {i: ("reproduced" if k % 3 else "not reproduced") for k, i in enumerate(fg)}
    counts = claims.verdict_counts(verdicts, "fernando2026residual")
    assert sum(counts.values()) == len(fg) and list(counts) == ["reproduced", "not reproduced"]
    with pytest.raises(KeyError, match=fg[0]):
        claims.verdict_counts({i: "reproduced" for i in fg[1:]}, "fernando2026residual")


def test_model_tags_name_what_the_glued_text_names():
    assert claims.model_tags("toy matrices, d = 48, 4 softmax heads") == ["toys"]
    assert claims.model_tags("ALBERT v2 base configs at random initialization (seed 0)") == ["ALBERT configs"]
    assert claims.model_tags("all-MiniLM-L6-v2 (220 prompts) and book-decoder (64 prompts), each with 3 "
                             "random-init twins") == ["MiniLM", "decoder", "twins"]
    assert claims.model_tags("GPT-2") == []
