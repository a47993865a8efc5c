"""Chapter 5's second checker, ``check_sign_variant`` (exercise 5.3): the chapter's own solution passes, and
each plausible wrong answer is rejected with feedback that names it. (``check_steering_w``, exercise 5.1, is
tested in tests/unit/test_exercises.py.)"""

from __future__ import annotations

import numpy as np
import pytest
from test_exercises import rejects, solution

import lib
from lib import exercises as ex
from lib.chapters import steering_lab as sl
from lib.methods import steering

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def lab():
    from lib.models.decoder import language

    dec = lib.load_model("book-decoder", with_lm_head=True)
    return sl.Lab(dec, language.prompts(8), prompt="the sailor watches")


@pytest.fixture(autouse=True, scope="module")
def _solution_read():
    """Read here, not in a checker's child process (where it would count against the case's time limit)."""
    solution("05_steering_lab.md", "my_sign_variant")


def good(lab, u, alpha):
    return solution("05_steering_lab.md", "my_sign_variant")["my_sign_variant"](lab, u, alpha)


def test_the_chapters_solution_passes(lab, capsys):
    assert ex.check_sign_variant(good) is True  # on the checker's own lab, as in the chapter
    out = capsys.readouterr().out
    assert "All good." in out and out.count("✓") == 3
    assert ex.check_sign_variant(good, lab, verbose=False) is True  # and on any other decoder lab


def _variant(lab, u, alpha, w, *, inside=True):
    outs = lab.head_outputs(-1)
    with steering.steer(lab.model, u, alpha, w=w) as edit:
        if inside:
            z = lab.logits(lab.real_states(-1))
    if not inside:
        z = lab.logits(lab.real_states(-1))
    ranks = sl.target_ranks(z, u.token_id)
    return edit.c, steering.sign_agreement(edit, outs), float(np.mean(ranks == 1))


def _o_bar(lab):
    return np.concatenate(lab.head_outputs(-1)).mean(0)


def test_rejects_the_top1_rate_measured_after_the_with_block(lab, capsys):
    def outside(lab, u, alpha):
        o = _o_bar(lab)
        return _variant(lab, u, alpha, o / np.linalg.norm(o), inside=False)

    rejects(capsys, ex.check_sign_variant, outside, lab, message="is the unedited model's")


def test_rejects_a_w_that_is_not_unit(lab, capsys):
    rejects(capsys, ex.check_sign_variant, lambda lab, u, a: _variant(lab, u, a, _o_bar(lab)), lab,
            message="w must have unit norm")


def test_rejects_the_mean_of_per_prompt_means(lab, capsys):
    def per_prompt(lab, u, alpha):
        o = np.mean([x.mean(0) for x in lab.head_outputs(-1)], axis=0)
        return _variant(lab, u, alpha, o / np.linalg.norm(o))

    rejects(capsys, ex.check_sign_variant, per_prompt, lab, message="averaged the per-prompt means")


def test_rejects_the_default_w(lab, capsys):
    def default(lab, u, alpha):
        outs = lab.head_outputs(-1)
        with steering.steer(lab.model, u, alpha) as edit:
            z = lab.logits(lab.real_states(-1))
        return edit.c, steering.sign_agreement(edit, outs), float(np.mean(sl.target_ranks(z, u.token_id) == 1))

    rejects(capsys, ex.check_sign_variant, default, lab, message="is the default w's")


def test_names_a_missing_return_a_wrong_shape_and_a_raised_error(lab, capsys):
    def no_return(lab, u, alpha):
        _variant(lab, u, alpha, _o_bar(lab) / np.linalg.norm(_o_bar(lab)))

    rejects(capsys, ex.check_sign_variant, no_return, lab, message="returned None")
    rejects(capsys, ex.check_sign_variant, lambda lab, u, a: (1.0, 0.5), lab, message="return the triple")

    def raises(lab, u, alpha):
        return lab.head_outputs(-1)[99]

    out = rejects(capsys, ex.check_sign_variant, raises, lab, message="IndexError")
    assert "line" in out  # the student's own line is shown
