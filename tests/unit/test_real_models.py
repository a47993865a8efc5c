"""lib.chapters.real_models: the switch, loading that never raises, ALBERT configs, batching, time estimates."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import lib
from lib.chapters import real_models as rm
from lib.methods import alignment as als
from lib.methods.layer_spectra import LayerSpectra
from lib.models import paper
from lib.page import real_models as rp
from lib.theory import dynamics


def test_switch_off_selects_nothing(monkeypatch):
    monkeypatch.delenv("SPECTRAL_BOOK_REAL_MODELS", raising=False)
    monkeypatch.setenv(paper.MODEL_LIST_ENV, "openai-community/gpt2")
    assert paper.selected_models() == []


def test_switch_on_selects_paper_set_or_override(monkeypatch):
    monkeypatch.setenv("SPECTRAL_BOOK_REAL_MODELS", "1")
    monkeypatch.delenv(paper.MODEL_LIST_ENV, raising=False)
    ids = paper.selected_models()
    assert ids[:4] == [f"albert/albert-{s}-v2" for s in ("base", "large", "xlarge", "xxlarge")]
    assert {"google-bert/bert-base-uncased", "openai-community/gpt2", "EleutherAI/gpt-neo-125m"} <= set(ids)
    monkeypatch.setenv(paper.MODEL_LIST_ENV, " openai-community/gpt2 , albert/albert-base-v2,")
    assert paper.selected_models() == ["openai-community/gpt2", "albert/albert-base-v2"]


def test_try_load_returns_a_message_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    msg = paper.try_load("albert/albert-xxlarge-v2-does-not-exist")
    assert isinstance(msg, str) and msg.startswith("⚠ albert/albert-xxlarge-v2-does-not-exist could not be loaded")
    assert "HF_HUB_OFFLINE" in msg and "SPECTRAL_BOOK_REAL_MODELS" in msg
    assert "not a checkpoint directory" in paper.try_load("./no/such/dir")


def test_try_load_returns_model(tiny_dir):
    m = paper.try_load(str(tiny_dir("albert")))
    assert isinstance(m, lib.SpectralModel) and rm.is_shared(m)
    assert rm.unique_layer_matrices(m).shape == (1, 32, 32)
    g = paper.try_load(str(tiny_dir("gpt2")))
    assert not rm.is_shared(g) and rm.unique_layer_matrices(g).shape == (2, 32, 32)


@pytest.mark.parametrize("size, d, L, H", [("base", 768, 12, 12), ("large", 1024, 24, 16), ("xlarge", 2048, 24, 16), ("xxlarge", 4096, 12, 64)])
def test_albert_configs_match_conventions(size, d, L, H):
    cfg = json.loads((paper.albert_config_dir(size) / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]) == (d, L, H)
    assert cfg["embedding_size"] == 128 and cfg["intermediate_size"] == 4 * d and cfg["model_type"] == "albert"
    assert cfg.get("num_hidden_groups", 1) == 1 and cfg.get("inner_group_num", 1) == 1


def test_random_albert_base_is_shared_and_labelled():
    m = paper.random_albert("base", seed=1)
    assert m.label == "albert-base-v2 config (random init, seed 1)"
    assert (m.d_model, m.n_layers, m.n_heads) == (768, 12, 12) and rm.is_shared(m)
    F = rm.unique_layer_matrices(m)
    assert F.shape == (1, 768, 768) and F.dtype == torch.float64
    with pytest.raises(ValueError, match="ALBERT size"):
        paper.albert_config_dir("huge")


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
    ts = als.simplified_states(weights, x0, label="tiny")
    for p, x in enumerate(x0):
        ref = dynamics.simulate(weights, torch.as_tensor(x)).numpy()
        np.testing.assert_allclose(ts.states[:, ts.prompt == p], ref, rtol=1e-12, atol=1e-13)
    shared = als.simplified_states(weights[0], x0[:2], steps=7)
    assert shared.steps == 7 and shared.n_prompts == 2 and shared.label == ""


def test_prompt_states_marks_special_tokens(minilm):
    H, S = als.prompt_states(minilm, ["Hello there.", "A longer second sentence, with a comma."])
    assert [h.shape[0] for h in H] == [7, 7] and all(h.dtype == torch.float64 for h in H)
    assert [int(s.sum()) for s in S] == [2, 2] and [h.shape[1] for h in H] == [s.numel() for s in S]
    ts = als.TokenStates.from_trajectories(H, S)
    assert ts.select("special").states.shape[1] == 4


def test_time_estimate_and_warning(monkeypatch):
    monkeypatch.setattr(paper, "_RATES", {"eig_s": 0.05, "flop_s": 1e-10})
    small = paper.estimate_seconds(paper.PAPER_MODELS[:1])
    big = paper.estimate_seconds(paper.PAPER_MODELS[3:4])
    assert 0 < small < big
    monkeypatch.setattr(paper.torch.cuda, "is_available", lambda: False)
    with pytest.warns(UserWarning, match="estimated .* min"):
        msg = paper.time_warning([m.hub_id for m in paper.PAPER_MODELS])
    assert "CPU only" in msg
    assert paper.time_warning(["unknown/model"]) == "No model of the paper's set selected."


def test_summary_from_leading_eigenvalues_matches_the_full_table():
    """The top few eigenvalues (e.g. from lib.linalg.topk_eig) give the same summary as the full spectrum."""
    import numpy as np
    import pandas as pd
    import pytest

    import lib
    from lib.chapters import real_models as rm
    from lib.linalg.topk_eig import topk_eig

    F = np.random.default_rng(3).standard_normal((2, 60, 60))
    lams, full = rm.eigvals_table(F, "toy")
    top = topk_eig(F, 4)
    part = rm.summary_from_eigvals(top.eigvals.numpy(), "toy", d=60)
    pd.testing.assert_frame_equal(full.drop(columns="lambda1"), part.drop(columns="lambda1"), rtol=1e-9)
    with pytest.raises(lib.InputError, match="3 leading"):
        rm.summary_from_eigvals(lams[:, :2], "toy", d=60)


# -- chapter 3's analysis functions ---------------------------------------------------------------------
TEXTS = ["hello there.", "a longer second sentence, with a comma.", "abc", "the third one is short.", "zz top"]


@pytest.fixture(scope="module")
def tokenized_dir(tiny_dir, tmp_path_factory):
    """``tokenized_dir(family)``: a copy of the tiny checkpoint with a small WordPiece tokenizer (vocab 64)."""
    import shutil

    from tiny_models import VOCAB

    letters = list("abcdefghijklmnopqrstuvwxyz")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *letters, *(f"##{c}" for c in letters), ".", ","]
    vocab += [f"[unused{i}]" for i in range(VOCAB - len(vocab))]
    assert len(vocab) == VOCAB

    def make(family: str):
        folder = tmp_path_factory.mktemp(f"tok-{family}") / "ckpt"
        shutil.copytree(tiny_dir(family), folder)
        (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
        (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True}))
        return folder

    return make


def test_short_label():
    assert rp.short_label("all-MiniLM-L6-v2 (random init, seed 1)") == "random init, seed 1"
    assert rp.short_label("all-MiniLM-L6-v2 (trained)") == "trained"
    assert rp.short_label("no parentheses") == "no parentheses"


@pytest.mark.parametrize("random_init", [False, True])
def test_layer_varying_one_row_per_layer_and_source(tokenized_dir, random_init):
    m = lib.load_model(str(tokenized_dir("bert")), random_init=random_init, seed=3)
    H, S = als.prompt_states(m, TEXTS)
    eb = als.eigen_bases(m.layer_matrices())
    out = rm.layer_varying(m, H, S, eb, n_null=20)
    res, null, states = out  # unpacks like a tuple
    who = "random init s3" if random_init else "trained"
    variants = [f"{who} · {s}" for s in rm.TRAJECTORIES]
    assert res.variant.tolist() == [v for v in variants for _ in range(m.n_layers)]
    assert null.variant.tolist() == res.variant.tolist() and res.layer.tolist() == [1, 2, 1, 2]
    for col in ("gamma", "rho", "tilt"):
        assert np.all(res[f"{col}_lo"] <= res[col] + 1e-12) and np.all(res[col] <= res[f"{col}_hi"] + 1e-12)
    assert np.all((res.rho >= 0) & (res.rho <= 1)) and np.all(res.gamma > 0)
    assert np.all(null.rho_null_lo <= null.rho_null) and np.all(null.rho_null <= null.rho_null_hi)
    # each layer's null test is merged into its result row, and the null draws the layer's own dimension
    for col in rm.NULL_TEST_COLUMNS:
        np.testing.assert_array_equal(res[col].to_numpy(), null[col].to_numpy())
    assert res.k.tolist() == list(eb.k1) * 2 and null.k.tolist() == res.k.tolist() and null.draws.tolist() == [20] * 4
    np.testing.assert_allclose(res.gamma_ratio, res.gamma / res.chance, rtol=1e-12)
    n_content = sum(int((~s).sum()) for s in S)
    assert res.tokens.tolist() == [n_content] * 4 and res.prompts.tolist() == [len(TEXTS)] * 4
    # the real-forward-pass source is the residual stream itself, the simplified one starts from its embeddings
    assert set(states) == set(rm.TRAJECTORIES)
    real, sim = states["real forward pass"], states["simplified"]
    np.testing.assert_array_equal(real.states, np.concatenate([h.numpy() for h in H], axis=1))
    np.testing.assert_allclose(np.linalg.norm(sim.states[1:], axis=-1), np.sqrt(m.d_model), rtol=1e-10)
    # and its rows are gamma_rho of the content tokens, with the same seed
    ref = als.gamma_rho(sim.select("content"), eb, seed=0)
    np.testing.assert_allclose(rm.select_source(res, "simplified").gamma, ref.gamma, rtol=1e-12)
    with pytest.raises(ValueError, match="source must be"):
        rm.select_source(res, "simulated")


def _results(variant_prefix, gamma_ratio, rho, q_gamma=None, q_rho=None):
    """A hand-made layer_varying results frame: the same numbers for both sources."""
    import pandas as pd

    L = len(gamma_ratio)
    q_gamma = [1.0] * L if q_gamma is None else q_gamma
    q_rho = [1.0] * L if q_rho is None else q_rho
    return pd.concat([
        pd.DataFrame({"layer": np.arange(1, L + 1), "variant": f"{variant_prefix} · {s}", "gamma_ratio": gamma_ratio,
                      "tilt": np.full(L, 0.01) * (k + 1), "rho": rho, "q_gamma": q_gamma, "q_rho": q_rho})
        for k, s in enumerate(rm.TRAJECTORIES)
    ], ignore_index=True)


def test_layer_range_and_overview_row_on_hand_made_frames():
    import pandas as pd

    res = _results("trained", [2.0, 6.0, 4.0], [0.6, 0.3, 0.5], q_gamma=[0.01, 0.2, 0.049], q_rho=[0.05, 0.5, 0.001])
    r = rm.layer_range(res, "simplified")
    assert (r.gamma_ratio_min, r.gamma_ratio_max, r.layers) == (2.0, 6.0, 3)
    assert (r.rho_min, r.rho_max, r.rho_min_layer) == (0.3, 0.6, 2)
    assert r.gamma_beat == (1, 3) and r.rho_beat == (3,)  # q < 0.05 strictly
    pooled = rm.layer_range(pd.concat([res, res.assign(rho=res.rho + 0.1)]), "simplified")  # repeated index
    assert (pooled.rho_min, pooled.rho_max, pooled.rho_min_layer, pooled.layers) == (0.3, pytest.approx(0.7), 2, 6)
    assert pooled.gamma_beat == (1, 3, 1, 3)
    row = rp.overview_row("M (trained)", res, "real forward pass")
    assert row["model"] == "M (trained)" and row["trajectories"] == "real forward pass"
    assert row["mean γₜ / chance"] == pytest.approx(4.0) and row["mean Δγₜ"] == pytest.approx(0.02)
    assert row["mean ρₜ"] == pytest.approx(1.4 / 3)
    assert row["layers where γₜ beats its null"] == "1, 3" and row["layers where ρₜ beats its null"] == "3"
    assert rp.overview_row("M", _results("trained", [1.0], [0.5]), "simplified")["layers where ρₜ beats its null"] == "none"


@pytest.mark.parametrize("trained_gamma, trained_rho, where_g, where_r, learned", [
    (10.0, 0.875, "above", "above", True),  # mean γ/chance 10 against the twins' 2 and 4; mean ρ 0.875 against 0.5, 0.75
    (3.0, 0.875, "within", "above", False),
    (1.0, 0.25, "below", "below", False),
    (4.0, 0.75, "within", "within", False),  # equal to the twins' maximum is not above (binary-exact numbers)
])
def test_compare_to_twins(trained_gamma, trained_rho, where_g, where_r, learned):
    trained = _results("trained", [trained_gamma] * 2, [trained_rho] * 2, q_gamma=[0.01, 0.5], q_rho=[0.01, 0.01])
    twins = [_results("random init s0", [2.0, 2.0], [0.25, 0.75], q_gamma=[0.01, 0.01]),
             _results("random init s1", [2.0, 6.0], [0.75, 0.75])]
    c = rm.compare_to_twins(trained, twins, "simplified")
    assert c.source == "simplified"
    assert c.trained_gamma == trained_gamma and c.twin_gamma == (2.0, 4.0)
    assert c.trained_rho == trained_rho and c.twin_rho == (0.5, 0.75)
    assert (c.gamma_where, c.rho_where, c.learned) == (where_g, where_r, learned)
    # layer by layer: above every twin's value of the same layer (layer 1: max 2, layer 2: max 6; ρ: 0.75, 0.75)
    assert c.gamma_layers_above == tuple(t for t, top in ((1, 2.0), (2, 6.0)) if trained_gamma > top)
    assert c.rho_layers_above == ((1, 2) if trained_rho > 0.75 else ())
    assert (c.trained_gamma_beat, c.twin_gamma_beat, c.trained_rho_beat, c.twin_rho_beat) == (1, (2, 0), 2, (0, 0))
    real = rm.compare_to_twins(trained, twins[:1], "real forward pass")  # the other source, one twin
    assert real.source == "real forward pass" and real.twin_gamma == (2.0,)


def test_shared_run_rows_fit_a_known_rate():
    import pandas as pd

    steps = np.arange(61)
    # geometric at rate 0.8 only inside the fit window (steps 20–50): flat before, rate 0.5 after
    dist = 0.9 * 0.8 ** np.clip(steps, 20, 50) * 0.5 ** np.clip(steps - 50, 0, None)
    conv = pd.concat([
        pd.DataFrame({"step": steps, "target": "v₁", "alignment": 1 - 0.5 * 0.8**steps, "distance": dist, "rate": 0.75}),
        pd.DataFrame({"step": steps, "target": "span{v₁, v₂}", "alignment": 1.0, "distance": 0.3 * 0.5**steps, "rate": 0.4}),
    ], ignore_index=True)
    rows = rp.shared_run_rows(conv, label="M (random init, seed 0)", layer=2)
    assert [r["target"] for r in rows] == ["v₁", "span{v₁, v₂}"]
    r = rows[0]
    assert r["model"] == "random init, seed 0" and r["layer iterated"] == 2 and r["predicted rate r"] == 0.75
    assert r["fitted rate (steps 20–50)"] == pytest.approx(0.8, rel=1e-9)
    assert r["alignment at step 0"] == 0.5 and r["alignment at step 60"] == pytest.approx(1 - 0.5 * 0.8**60)
    table = pd.DataFrame(rows + rp.shared_run_rows(conv, label="M (trained)", layer=2, fit=(10, 30)))
    assert rp.shared_run_row(table, "M (random init, seed 0)", 2)["target"] == "v₁"
    with pytest.raises(KeyError, match="no shared run"):
        rp.shared_run_row(table, "M (trained)", 1)


def test_run_paper_model_unloadable_gives_the_message(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    msg = rm.run_paper_model("albert/albert-xxlarge-v2-does-not-exist", TEXTS)
    assert isinstance(msg, str) and msg.startswith("⚠ albert/albert-xxlarge-v2-does-not-exist could not be loaded")


def test_run_paper_model_without_tokenizer_still_gives_the_spectrum(tiny_dir):
    run = rm.run_paper_model(str(tiny_dir("gpt2")), TEXTS)
    assert isinstance(run, rm.PaperModelRun) and not run.shared
    assert run.note.endswith("no tokenizer in the checkpoint, token experiments skipped.")
    assert run.convergence is None and run.layer_varying is None and (run.prompts, run.steps) == (0, 0)
    assert list(run.spectrum.columns) == ["model", "layer", "λ1", "λ1 complex", "gap ratio", "span{v1,v2} ratio"]
    eb = als.eigen_bases(lib.load_model(str(tiny_dir("gpt2"))).layer_matrices())
    np.testing.assert_allclose(run.spectrum["gap ratio"], eb.gap_ratio, rtol=1e-12)
    assert run.spectrum.layer.tolist() == [1, 2]


def test_run_paper_model_layer_varying_and_shared(tokenized_dir):
    bert = rm.run_paper_model(str(tokenized_dir("bert")), TEXTS)
    assert bert.note is None and bert.convergence is None and bert.prompts == len(TEXTS)
    lv = bert.layer_varying
    assert isinstance(lv, rm.LayerVarying) and len(lv.results) == 2 * 2 and len(lv.null) == 4
    albert = rm.run_paper_model(str(tokenized_dir("albert")), TEXTS, shared_prompts=3, shared_steps=12, anchor=5)
    assert albert.shared and albert.layer_varying is None and (albert.prompts, albert.steps) == (3, 12)
    assert len(albert.spectrum) == 1 and albert.convergence.step.max() == 12
    assert albert.convergence.target.iloc[0] in ("v₁", "plane of λ₁, λ̄₁")


def test_run_paper_model_turns_an_analysis_failure_into_a_message(tiny_dir, monkeypatch):
    def boom(F):
        raise MemoryError("out of memory in eig")

    monkeypatch.setattr(rm.als, "eigen_bases", boom)
    msg = rm.run_paper_model(str(tiny_dir("bert")), TEXTS)
    assert isinstance(msg, str) and "was loaded but its analysis failed (MemoryError): out of memory in eig" in msg


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_run_paper_model_on_cuda_equals_cpu(tokenized_dir):
    """With a GPU the model runs there and the analysis (host, float64) gives the CPU's numbers."""
    for family in ("bert", "albert"):
        cpu = rm.run_paper_model(str(tokenized_dir(family)), TEXTS, shared_prompts=3, shared_steps=12, anchor=5)
        gpu = rm.run_paper_model(str(tokenized_dir(family)), TEXTS, device="cuda", shared_prompts=3, shared_steps=12,
                                 anchor=5)
        assert not isinstance(gpu, str), gpu
        np.testing.assert_allclose(gpu.spectrum["gap ratio"], cpu.spectrum["gap ratio"], rtol=1e-9)
        if family == "bert":
            np.testing.assert_allclose(gpu.layer_varying.results.gamma, cpu.layer_varying.results.gamma, rtol=1e-4)
        else:
            np.testing.assert_allclose(gpu.convergence.alignment, cpu.convergence.alignment, rtol=1e-4)


def test_random_init_twin_of_a_config_folder(tokenized_dir):
    """run_paper_model(random_init=True): the architecture-only twin (what bench_paper_set times)."""
    run = rm.run_paper_model(str(tokenized_dir("bert")), TEXTS, random_init=True, seed=3)
    assert isinstance(run, rm.PaperModelRun) and "random init" in run.label and run.prompts == len(TEXTS)


def test_albert_config_sizes_and_overrides():
    c = paper.albert_config("xxlarge", vocab_size=30522)
    assert (c.hidden_size, c.intermediate_size, c.embedding_size, c.vocab_size) == (4096, 16384, 128, 30522)
    with pytest.raises(ValueError, match="ALBERT size"):
        paper.albert_config("huge")


def test_jacobian_and_forward_estimates_scale_and_refuse_what_cannot_fit(tiny_dir, monkeypatch):
    """The parameters cells of chapters 4-6 time a reader's model first; per-prompt Jacobians that would not fit
    in memory are refused before anything runs."""
    import lib
    from lib.errors import ModelTooLargeError

    m = lib.load_model(str(tiny_dir("llama")))
    line = paper.jacobian_estimate(m, 6, 2, n_boot=10)
    assert line.startswith(f"{m.label}: d = {m.d_model}, {m.n_layers} layers; Jacobians of it and 2 twins on 6 prompts")
    assert "forward passes, about" in paper.forward_estimate(m, 100)
    monkeypatch.setattr("lib.memory.available_bytes", lambda device="cpu": 1000)
    with pytest.raises(ModelTooLargeError, match="fewer prompts"):
        paper.jacobian_estimate(m, 6, 2)


def _shape(d: int, n_layers: int):
    """A stand-in for a SpectralModel with only the sizes :func:`lib.models.paper.bootstrap_resamples` reads."""
    from types import SimpleNamespace

    return SimpleNamespace(d_model=d, n_layers=n_layers)


def test_bootstrap_resamples_follow_the_work_budget():
    """Known answers: per resample 2 · (2 · 4 + 3) · (L + 1) decompositions at (d / 512)³ each (three twins, two
    protocols). The stand-ins keep the book's 200; a 24-layer d = 512 model gets 40000 // 550 = 72; SmolLM2-135M's
    shape (30 layers, d = 576) 41; a model past the budget at the floor gets the floor, 40."""
    assert paper.bootstrap_decompositions(512, 24, 4) == 2 * 11 * 25 == 550
    assert paper.bootstrap_decompositions(1024, 1, 1, protocols=1) == 5 * 2 * 8
    assert paper.bootstrap_resamples(_shape(128, 6), 3) == 200  # the book decoder
    assert paper.bootstrap_resamples(_shape(384, 6), 3) == 200  # MiniLM's size
    assert paper.bootstrap_resamples(_shape(512, 24), 3) == 72
    assert paper.bootstrap_resamples(_shape(576, 30), 3) == 41  # SmolLM2-135M
    assert paper.bootstrap_resamples(_shape(2048, 16), 3) == paper.LEAST_RESAMPLES == 40  # OLMo-2-1B
    assert paper.bootstrap_resamples(_shape(512, 24), 1) == 40000 // (2 * 7 * 25) == 114  # one twin
    with pytest.raises(ValueError, match="least"):
        paper.bootstrap_resamples(_shape(128, 6), 3, least=300)
    with pytest.raises(ValueError, match="positive"):
        paper.bootstrap_decompositions(128, 0, 4)


def test_bootstrap_decompositions_count_what_the_chapter_runs(monkeypatch):
    """The cost model counts the d × d decompositions chapter 4's bootstrap really does per resample and protocol:
    counted by wrapping NumPy's eig, symmetric eig and SVD and the real Schur form while the chapter's two resampling
    calls run."""
    from lib.chapters import jacobian_funnel as fs
    from lib.linalg import nonnormal

    counted: list[int] = []

    def counting(fn):
        def wrapped(a, *args, **kwargs):
            counted.append(int(np.prod(np.shape(a)[:-2], dtype=np.int64)))
            return fn(a, *args, **kwargs)
        return wrapped

    monkeypatch.setattr(np.linalg, "eigvals", counting(np.linalg.eigvals))
    monkeypatch.setattr(np.linalg, "svd", counting(np.linalg.svd))
    monkeypatch.setattr(np.linalg, "eigvalsh", counting(np.linalg.eigvalsh))
    monkeypatch.setattr(nonnormal, "real_schur", counting(nonnormal.real_schur))
    from types import SimpleNamespace

    rng = np.random.default_rng(0)
    L, P, d = 5, 4, 6
    jac = {s: SimpleNamespace(per_prompt=np.eye(d) + 0.3 * rng.standard_normal((L, P, d, d)))
           for s in ("trained", "seed 0", "seed 1")}

    def decompositions(n_boot: int) -> int:  # the chapter's calls (book/04_jacobian_funnel.md, sections 4.3, 4.6)
        counted.clear()
        fs.bootstrap_twins(jac, update=True, n_boot=n_boot, twins_final_only=True)
        fs.twin_control_funnels(jac, n_boot=n_boot, firsts=(0, 1))
        return sum(counted)

    per_resample = decompositions(3) - decompositions(2)
    assert per_resample == paper.bootstrap_decompositions(512, L, len(jac), protocols=1) == 9 * 6


def test_cpu_decoder_work_known_answers():
    """A 9-layer d = 512 model with one twin on 10 prompts: 2 · (2 · 2 + 3) · 10 = 140 decompositions per resample,
    40000 // 140 = 285 > 200, so the book's 200 resamples; the times follow the two measured rates."""
    from lib.chapters import jacobian_funnel as fs

    row = fs.cpu_decoder_work([("x", 512, 1024, 9)], prompts=10, twins=1, cores=2).iloc[0]
    assert row["resamples"] == 200 and row["decompositions (thousands)"] == pytest.approx(201 * 140 / 1e3)
    jac = 2 * 10 * 9 * (2 * 512**2 * 1024 + 2 * 512**3) / fs.JACOBIAN_CPU_RATE
    boot = 201 * 140 * fs.DECOMPOSITION_CPU_S
    assert row["CPU min"] == pytest.approx((jac + boot) / 60)
    assert row["min on 2 cores"] == pytest.approx((jac + boot / 2) / 60)
    assert row["per-prompt Jacobians (GB)"] == pytest.approx(2 * 2 * 9 * 10 * 512**2 * 4 / 1e9)
    smol = fs.cpu_decoder_work().iloc[0]  # the published site's run
    assert smol["model"] == "HuggingFaceTB/SmolLM2-135M" and smol["resamples"] == 41
