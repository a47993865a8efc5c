"""lib.real_models: the switch, loading that never raises, ALBERT configs, batching, time estimates."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import lib
from lib import alignment_stats as als
from lib import dynamics, real_models as rm
from lib.layer_spectra import LayerSpectra


def test_switch_off_selects_nothing(monkeypatch):
    monkeypatch.delenv("SPECTRAL_BOOK_REAL_MODELS", raising=False)
    monkeypatch.setenv(rm.MODEL_LIST_ENV, "openai-community/gpt2")
    assert rm.selected_models() == []


def test_switch_on_selects_paper_set_or_override(monkeypatch):
    monkeypatch.setenv("SPECTRAL_BOOK_REAL_MODELS", "1")
    monkeypatch.delenv(rm.MODEL_LIST_ENV, raising=False)
    ids = rm.selected_models()
    assert ids[:4] == [f"albert/albert-{s}-v2" for s in ("base", "large", "xlarge", "xxlarge")]
    assert {"google-bert/bert-base-uncased", "openai-community/gpt2", "EleutherAI/gpt-neo-125m"} <= set(ids)
    monkeypatch.setenv(rm.MODEL_LIST_ENV, " openai-community/gpt2 , albert/albert-base-v2,")
    assert rm.selected_models() == ["openai-community/gpt2", "albert/albert-base-v2"]


def test_try_load_returns_a_message_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    msg = rm.try_load("albert/albert-xxlarge-v2-does-not-exist")
    assert isinstance(msg, str) and msg.startswith("⚠ albert/albert-xxlarge-v2-does-not-exist could not be loaded")
    assert "HF_HUB_OFFLINE" in msg and "SPECTRAL_BOOK_REAL_MODELS" in msg
    assert "not a checkpoint directory" in rm.try_load("./no/such/dir")


def test_try_load_returns_model(tiny_dir):
    m = rm.try_load(str(tiny_dir("albert")))
    assert isinstance(m, lib.SpectralModel) and rm.is_shared(m)
    assert rm.unique_layer_matrices(m).shape == (1, 32, 32)
    g = rm.try_load(str(tiny_dir("gpt2")))
    assert not rm.is_shared(g) and rm.unique_layer_matrices(g).shape == (2, 32, 32)


@pytest.mark.parametrize("size, d, L, H", [("base", 768, 12, 12), ("large", 1024, 24, 16), ("xlarge", 2048, 24, 16), ("xxlarge", 4096, 12, 64)])
def test_albert_configs_match_conventions(size, d, L, H):
    cfg = json.loads((rm.albert_config_dir(size) / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]) == (d, L, H)
    assert cfg["embedding_size"] == 128 and cfg["intermediate_size"] == 4 * d and cfg["model_type"] == "albert"
    assert cfg.get("num_hidden_groups", 1) == 1 and cfg.get("inner_group_num", 1) == 1


def test_random_albert_base_is_shared_and_labelled():
    m = rm.random_albert("base", seed=1)
    assert m.label == "albert-base-v2 config (random init, seed 1)"
    assert (m.d_model, m.n_layers, m.n_heads) == (768, 12, 12) and rm.is_shared(m)
    F = rm.unique_layer_matrices(m)
    assert F.shape == (1, 768, 768) and F.dtype == torch.float64
    with pytest.raises(ValueError, match="ALBERT size"):
        rm.albert_config_dir("huge")


def test_eigvals_table_matches_layer_spectra():
    F = np.random.default_rng(0).standard_normal((3, 30, 30))
    lams, table = rm.eigvals_table(F, "toy")
    ref = LayerSpectra(F, "toy").table
    np.testing.assert_allclose(lams, LayerSpectra(F, "toy").eigvals, rtol=1e-10)
    for col in ("spectral_radius", "gap_ratio", "abs_gap"):
        np.testing.assert_allclose(table[col], ref[col], rtol=1e-10)
    assert table.lambda1_complex.tolist() == ref.lambda1_complex.tolist()
    assert table.lambda1.tolist() == ref.lambda1.tolist() and table.layer.tolist() == [1, 2, 3]


def test_simplified_states_batching_matches_per_prompt_simulation(tiny_dir):
    m = lib.load_model(str(tiny_dir("bert")))
    weights = [m.layer(t).attention for t in range(m.n_layers)]
    rng = np.random.default_rng(0)
    x0 = [rng.standard_normal((n, 32)) for n in (3, 5, 3, 4)]
    ts = rm.simplified_states(weights, x0, label="tiny")
    for p, x in enumerate(x0):
        ref = dynamics.simulate(weights, torch.as_tensor(x)).numpy()
        np.testing.assert_allclose(ts.states[:, ts.prompt == p], ref, rtol=1e-12, atol=1e-13)
    shared = rm.simplified_states(weights[0], x0[:2], steps=7)
    assert shared.steps == 7 and shared.n_prompts == 2 and shared.label == ""


def test_prompt_states_marks_special_tokens(minilm):
    H, S = rm.prompt_states(minilm, ["Hello there.", "A longer second sentence, with a comma."])
    assert [h.shape[0] for h in H] == [7, 7] and all(h.dtype == torch.float64 for h in H)
    assert [int(s.sum()) for s in S] == [2, 2] and [h.shape[1] for h in H] == [s.numel() for s in S]
    ts = als.TokenStates.from_trajectories(H, S)
    assert ts.select("special").states.shape[1] == 4


def test_time_estimate_and_warning(monkeypatch):
    monkeypatch.setattr(rm, "_RATES", {"eig_s": 0.05, "flop_s": 1e-10})
    small = rm.estimate_seconds(rm.PAPER_MODELS[:1])
    big = rm.estimate_seconds(rm.PAPER_MODELS[3:4])
    assert 0 < small < big
    monkeypatch.setattr(rm.torch.cuda, "is_available", lambda: False)
    with pytest.warns(UserWarning, match="estimated .* min"):
        msg = rm.time_warning([m.hub_id for m in rm.PAPER_MODELS])
    assert "CPU only" in msg
    assert rm.time_warning(["unknown/model"]) == "No model of the paper's set selected."


def test_summary_from_leading_eigenvalues_matches_the_full_table():
    """The top few eigenvalues (e.g. from lib.topk_eig) give the same summary as the full spectrum."""
    import numpy as np
    import pandas as pd
    import pytest

    import lib
    from lib import real_models as rm
    from lib.topk_eig import topk_eig

    F = np.random.default_rng(3).standard_normal((2, 60, 60))
    lams, full = rm.eigvals_table(F, "toy")
    top = topk_eig(F, 4)
    part = rm.summary_from_eigvals(top.eigvals.numpy(), "toy", d=60)
    pd.testing.assert_frame_equal(full.drop(columns="lambda1"), part.drop(columns="lambda1"), rtol=1e-9)
    with pytest.raises(lib.InputError, match="3 leading"):
        rm.summary_from_eigvals(lams[:, :2], "toy", d=60)
