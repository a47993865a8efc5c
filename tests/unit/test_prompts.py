"""The shared prompt set: size, variety, reproducible sampling, bad arguments."""

from __future__ import annotations

import pytest

from lib.errors import InputError
from lib.models.prompts import PROMPTS, load_prompts, prompts


def test_at_least_200_distinct_nonempty_sentences():
    assert isinstance(PROMPTS, tuple) and len(PROMPTS) >= 200
    assert all(isinstance(p, str) and p == p.strip() and p for p in PROMPTS)
    assert len(set(PROMPTS)) == len(PROMPTS)
    assert all(p[-1] in ".?!" for p in PROMPTS)


def test_varied_in_length_and_form():
    words = [len(p.split()) for p in PROMPTS]
    assert min(words) <= 2 and max(words) >= 25
    assert sum(p.endswith("?") for p in PROMPTS) >= 10
    assert sum(any(ch.isdigit() for ch in p) for p in PROMPTS) >= 3


def test_sampling_is_reproducible_and_nested():
    a, b = prompts(50, seed=3), prompts(50, seed=3)
    assert a == b and len(set(a)) == 50 and set(a) <= set(PROMPTS)
    assert prompts(20, seed=3) == a[:20]
    assert prompts(50, seed=4) != a
    assert prompts() == list(PROMPTS)
    assert prompts(0) == []


@pytest.mark.parametrize("bad, exc", [(-1, ValueError), (len(PROMPTS) + 1, ValueError), (2.5, TypeError), (True, TypeError)])
def test_bad_n(bad, exc):
    with pytest.raises(exc, match="n must"):
        prompts(bad)


def test_tokenizer_marks_cls_and_sep_as_special(minilm):
    enc = minilm.encode(PROMPTS[0])
    assert enc["tokens"][0] == "[CLS]" and enc["tokens"][-1] == "[SEP]"
    assert enc["special"].tolist() == [True] + [False] * (len(enc["tokens"]) - 2) + [True]


def test_load_prompts_reads_a_readers_file_one_prompt_per_line(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("  First prompt.\n\nSecond one, with spaces  \n\n", encoding="utf-8")
    assert load_prompts(path) == ["First prompt.", "Second one, with spaces"]
    assert load_prompts(str(path)) == ["First prompt.", "Second one, with spaces"]
    assert load_prompts(None) == list(PROMPTS)


def test_load_prompts_refuses_a_missing_or_empty_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_prompts(tmp_path / "nope.txt")
    with pytest.raises(InputError, match="not found"):
        load_prompts(tmp_path)  # a folder is not a prompts file
    (tmp_path / "empty.txt").write_text("\n  \n", encoding="utf-8")
    with pytest.raises(InputError, match="holds no prompt"):
        load_prompts(tmp_path / "empty.txt")
