"""Chapter 4's page source (``book/04_jacobian_funnel.md``): the statistics it asks for and the claims its prose
may make without a glued number."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = (ROOT / "book" / "04_jacobian_funnel.md").read_text(encoding="utf-8")


def test_intervals_rest_on_at_least_200_resamples():
    """A 95% percentile interval from 30 resamples is about the extremes of the replicates. The chapter takes its
    count from the work (``paper.bootstrap_resamples``): the book's stand-ins (the decoder, d = 128, 6 blocks, and
    MiniLM's shape, three twins each) must get the full 200."""
    from lib.models import paper

    assert re.search(r"^N_BOOT = paper\.bootstrap_resamples\(dec_twins\.trained, len\(TWIN_SEEDS\)\)$", CHAPTER, re.M)
    assert paper.BOOK_RESAMPLES >= 200
    for d, layers in ((128, 6), (384, 6)):
        assert paper.resamples_for_shape(d, layers, 3) == paper.BOOK_RESAMPLES


def test_both_readings_of_the_funnel_enter_the_verdict():
    """The full product (the abstract's claim) and the product from block 2 (progressive narrowing, [secondary])
    are co-primary: the evidence holds both, and the readings table shows both."""
    assert "controls_full=ctrl_by[0]" in CHAPTER and "fp.funnel_readings_table(" in CHAPTER
    assert "[secondary]" in CHAPTER and "[paper]" in CHAPTER


def test_no_unfalsifiable_rescaling_test_and_no_typed_eigenvalue_ordinals():
    """The input-rescaling test could not fail (RMSNorm divides the update by the scale); the λ₁ sentence is
    glued from the computation, not typed ("an outlying λ₁ in each block", "a conjugate pair in block 3")."""
    assert "input_rescaling" not in CHAPTER and "fig_rescaling" not in CHAPTER
    assert "outlying" not in CHAPTER and "conjugate pair in block" not in CHAPTER
    assert "{eval}`mini_lam1`" in CHAPTER and 'glue("mini_lam1"' in CHAPTER


def test_minilm_in_context_product_is_measured_against_the_true_jacobian():
    assert "fs.end_to_end_in_context(" in CHAPTER and "{eval}`e2e_rel`" in CHAPTER
