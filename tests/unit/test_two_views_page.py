"""Chapter 6's page (book/06_two_views.md) says what its numbers say: no number or ordinal typed where the
computation gives one, the share's method shown with the code that runs, and exercise 6.2's question and
solution in agreement."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

CHAPTER = ROOT / "book" / "06_two_views.md"


def _prose() -> str:
    """The chapter's markdown without its code cells (the prose the reader reads)."""
    return re.sub(r"```\{code-cell\}.*?```", "", CHAPTER.read_text(encoding="utf-8"), flags=re.DOTALL)


@pytest.mark.parametrize("typed", [
    "60°",  # "the angles in MiniLM stay above 60°": the smallest angle is glued (ml_theta_min)
    "layers 2 and 3",  # the near-parallel layers are named by the computation (al_close)
    "two decoder layers",
    "every trained layer",  # "in every trained layer and in only a third of the twins'": al_decoder_2_tr/_rd
    "a third of",
    "six layers",  # the layer count, the tests and the orderings are glued (rt_layers, rt_n_all, rt_orderings)
    "twelve",
    "720",
    "about twice",
    "8 random unit directions",  # the perturbation check's directions and block are glued (pt_dirs, pt_block)
    "layer 3 of each",
])
def test_no_number_the_computation_gives_is_typed(typed):
    assert typed not in _prose(), f"typed in chapter 6's prose: {typed!r}"


def test_the_claim_counts_layers_not_layer_subspace_pairs():
    """TV2's count is one test per layer (the four subspaces of a layer overlap); the pairs are not summed."""
    text = CHAPTER.read_text(encoding="utf-8")
    assert "al_tot_tr` (layer" not in text and "{eval}`al_tot_tr` trained layers" in text
    assert "angle_layers(views)" in text and "show_source(min_p_joint)" in text
    assert "bp.angle_findings(angles, layers, ctx, MODELS_TEXT, K)" in text


def test_the_share_and_its_decomposition_are_shown_with_the_code_that_runs():
    text = CHAPTER.read_text(encoding="utf-8")
    assert "show_source(bridge.resampled_shares, bridge.resampled_inner)" in text
    assert r"\pi_F + \pi_{\text{avoid}} = 1" in text


def test_exercise_6_2_question_and_solution_agree():
    """The question asked why 60° was "close for one model and far for the other" while the solution said it
    was far below chance for both; both now read the glued numbers."""
    text = CHAPTER.read_text(encoding="utf-8")
    ex = text[text.index(":label: ex-principal-angles"):text.index(":label: ex-relative-update")]
    assert "close for one model and far for the other" not in ex
    assert "{eval}`ml_theta_min`" in ex and "{eval}`ml_far`" in ex
    assert "{eval}`ml_hits_128`" in ex and "{eval}`ml_hits_384`" in ex
