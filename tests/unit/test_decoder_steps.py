"""The book decoder's saved training steps (lib.models.decoder.steps, written by lib.models.decoder.train) and
chapter 4's statistics over them (lib.chapters.jacobian_funnel_training, lib.page.jacobian_funnel_training)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import torch

import lib
from lib.chapters import jacobian_funnel_training as ft
from lib.errors import ModelNotAvailableError
from lib.methods.funnel import BootstrapRun, bootstrap_run
from lib.models.decoder import steps as ds
from lib.models.decoder import train as dt
from lib.models.decoder.language import prompts
from lib.page import jacobian_funnel_training as fpt


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.base.state_dict().items()}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_saved_steps_are_the_scripts_steps():
    steps = ds.saved_steps()
    assert steps == dt.HPARAMS["checkpoint_steps"] and steps[0] == 0
    assert steps[-1] == dt.HPARAMS["steps"] == ds.steps_log()["hparams"]["steps"]
    for s in steps:
        assert ds.step_path(s).stat().st_size < 6 * 2**20  # fp32 of about 1.2 M parameters


def test_step_zero_is_the_seeded_initialization():
    """The weights before the first update are a fresh seeded init of the same config: the chapter's twin of seed 0
    (``torch.manual_seed(0)``, as the training script seeds its model)."""
    step0 = ds.load_step(0)
    twin0 = lib.load_model("book-decoder", random_init=True, seed=0)
    assert _same(_weights(step0), _weights(twin0))
    assert not _same(_weights(step0), _weights(lib.load_model("book-decoder", random_init=True, seed=1)))
    assert step0.name == f"book-decoder, step 0 of {ds.saved_steps()[-1]}"


def test_the_saved_run_is_a_sibling_of_the_committed_model():
    """Same seeds and script: the same logged losses at the first steps, a held-out loss within the script's
    documented tolerance for other float rounding (1e-2 nats), and distinct weights at every saved step."""
    run, committed = ds.steps_log(), lib.models.decoder.training_log()
    assert run["loss"][:3] == committed["loss"][:3]
    assert abs(run["heldout_loss"] - committed["heldout_loss"]) < 1e-2
    steps = ds.saved_steps()
    weights = [_weights(ds.load_step(s)) for s in (steps[0], steps[1], steps[-1])]
    assert not _same(weights[0], weights[1]) and not _same(weights[1], weights[2])
    assert all(torch.isfinite(v).all() for w in weights for v in w.values())


def test_a_step_without_a_file_is_refused_with_the_saved_ones():
    with pytest.raises(ModelNotAvailableError, match="saved"):
        ds.load_step(7)


def test_saving_a_checkpoint_draws_no_random_number(tmp_path):
    """The intermediate files leave the training run unchanged: writing one consumes no random number, and
    the file holds the state dict exactly, under the keys of ``save_pretrained``."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    m = lib.load_model("book-decoder", with_lm_head=True).hf_model
    torch.manual_seed(123)
    before = torch.get_rng_state()
    path = tmp_path / "steps" / dt.step_file(5)
    dt.save_weights(m, path, 5)
    assert torch.equal(torch.get_rng_state(), before)
    assert path.name == "step_0005.safetensors"
    back = load_file(str(path))
    sd = m.state_dict()
    assert back.keys() == sd.keys() and all(torch.equal(back[k], sd[k]) for k in sd)
    with safe_open(str(path), "pt") as fh:
        assert fh.metadata() == {"format": "pt", "step": "5"}


# --- the statistics over training -------------------------------------------------------------------------------


def _run(erank_b1: float, slope: float, spread: float = 0.5, L: int = 4, B: int = 40, seed: int = 0) -> BootstrapRun:
    """A synthetic run: block 1's erank, both funnels ending at ``erank_b1 + 1``, every depth metric a line of
    the given slope; each replicate shifted by a uniform draw of half-width ``spread`` (in units of 0.1 for slopes)."""
    rng = np.random.default_rng(seed)
    depth = np.arange(1, L + 1) / L
    point = {"erank": np.r_[erank_b1, np.full(L - 1, 20.0)], "funnel": np.r_[30.0, np.full(L, erank_b1 + 1)],
             "funnel_no_b1": np.r_[30.0, np.full(L - 1, erank_b1 + 1)]}
    for m in ("f_C", "delta_H", "r_rot"):
        point[m] = 0.5 + slope * depth
    boot = {}
    for k, v in point.items():
        shift = rng.uniform(-spread, spread, (B, 1))
        boot[k] = v[None] + (0.1 * shift * depth if k in ("f_C", "delta_H", "r_rot") else shift)
    return BootstrapRun(point=point, boot=boot, update=True, n_prompts=10)


def test_step_statistics_read_the_runs_intervals_and_slopes():
    run = _run(3.0, -0.2)
    st = ft.step_statistics(run)
    assert list(st) == list(ft.STEP_STATISTICS)
    assert st["erank_b1"].point == 3.0 and st["funnel"].point == st["funnel_no_b1"].point == 4.0
    for m in ("f_C", "delta_H", "r_rot"):
        assert st[m].point == pytest.approx(-0.2) and st[m].hi < 0


def test_emergence_frame_places_each_step_against_the_twins():
    twins = {f"random init, seed {s}": _run(40.0 + s, 0.0, seed=s) for s in range(3)}
    runs = {0: _run(41.0, 0.0), 100: _run(20.0, -0.1), 1200: _run(3.0, -0.2)}
    frame = ft.emergence_frame(runs, twins, committed=_run(60.0, 0.3))
    b1 = frame[(frame.statistic == "erank_b1") & (frame.kind == "run")].set_index("step")
    assert list(b1.side) == ["overlaps", "lower", "lower"]
    slope = frame[(frame.statistic == "f_C") & (frame.kind == "run")].set_index("step")
    assert list(slope.side) == ["overlaps", "lower", "lower"]
    assert frame[frame.kind == "twin"].step.isna().all() and set(frame[frame.kind == "twin"].side) == {""}
    comm = frame[frame.kind == "committed"].set_index("statistic")
    assert (comm.step == 1200.0).all() and comm.side["erank_b1"] == "higher" and comm.side["f_C"] == "higher"
    assert ft.emergence_step(frame, "erank_b1") == 100.0


def test_emergence_step_needs_every_later_step_outside():
    def frame(sides):
        return pd.DataFrame({"statistic": "s", "kind": "run", "step": [0.0, 25.0, 50.0, 100.0],
                             "side": sides})

    assert ft.emergence_step(frame(["overlaps", "lower", "overlaps", "lower"]), "s") == 100.0
    assert ft.emergence_step(frame(["higher"] * 4), "s") == 0.0
    assert ft.emergence_step(frame(["overlaps", "higher", "higher", "higher"]), "s") == 25.0
    assert np.isnan(ft.emergence_step(frame(["lower", "lower", "lower", "overlaps"]), "s"))


def test_step_runs_at_step_zero_equal_the_twin_of_seed_zero():
    """The whole pipeline at step 0 gives the numbers of the chapter's twin of seed 0 (same prompts, same
    resamples), and a later step, whose weights are swapped into the same model, those of a fresh load."""
    from lib.jacobians import sweep as jac

    texts, last = prompts(6), ds.saved_steps()[-1]
    got = ft.step_runs([0, last], texts, n_boot=4)
    for step, model in ((0, lib.load_model("book-decoder", random_init=True, seed=0)), (last, ds.load_step(last))):
        X, _ = jac.residual_inputs(model, texts)
        per = jac.sweep(model, X, keep_per_prompt=True, progress=False).per_prompt
        ref = bootstrap_run(per, n_boot=4, final_only=True)  # the steps' funnels are read at the final product
        for k, v in ref.point.items():
            np.testing.assert_array_equal(got.runs[step].point[k], v)
            np.testing.assert_array_equal(got.runs[step].boot[k], ref.boot[k])
        full = bootstrap_run(per, n_boot=4)  # and the final product's replicates are the full curve's last entry
        for k in ("funnel", "funnel_no_b1"):
            np.testing.assert_allclose(got.runs[step].boot[k][:, -1], full.boot[k][:, -1], rtol=1e-9)
        np.testing.assert_allclose(got.norms[step], np.median(np.linalg.norm(X[:2].numpy(), axis=-1), axis=1))


def test_emergence_chart_and_table():
    twins = {f"random init, seed {s}": _run(40.0 + s, 0.0, seed=s) for s in range(3)}
    frame = ft.emergence_frame({0: _run(41.0, 0.0), 1200: _run(3.0, -0.2)}, twins, committed=_run(4.0, 0.1))
    spec = fpt.emergence_chart(frame, title="t", model="m").to_dict()
    assert spec["description"] and len(spec["vconcat"]) == 2
    table = fpt.emergence_table(frame)
    assert list(table["at"]) == ["step 0", "step 1200", "random-init twins", "last step vs twins", "committed model"]
    assert len(table.columns) == 1 + len(ft.STEP_STATISTICS)  # steps as rows: the columns stay few
    assert not [h for h in table.columns if re.search(r"[A-Za-z0-9]_[A-Za-z0-9]", h)]  # headers are words
    first = table.columns[1]
    assert table[first].iloc[3] == "lower" and table[first].iloc[4] == "4.0 [3.5, 4.5]"


def test_section_4_10_says_the_trends_vary_only_when_the_two_runs_verdicts_differ():
    differ = fpt.trend_stability("not specific to training", "not reproduced")
    same = fpt.trend_stability("not reproduced", "not reproduced")
    assert "not a stable property" in differ["head"] and "varies between training runs" in differ["fg7"]
    assert "agree" in same["head"] and "varies" not in " ".join(same.values())
