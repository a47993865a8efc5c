"""lib.steering: the rank-1 eigen-edit of the last layer (power-method §7, checks C14–C15) and its baseline."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import lib
from lib import spectra, steering
from lib.errors import InputError
from tiny_models import SEQ, VOCAB

FAMILIES = ("bert", "albert", "gpt2", "gpt_neo", "llama", "olmo2", "gemma2")


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    with steering.one_thread():
        yield


def _random_model(tiny_dir, family, seed=0):
    return lib.load_model(str(tiny_dir(family)), random_init=True, seed=seed)


def _state(model):
    return {k: v.detach().clone() for k, v in model.hf_model.state_dict().items()}


def _ids(seed=0):
    return torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("family", FAMILIES)
def test_principal_eigenvector_follows_u(wide_dir, family):
    """C14 (spectral part): α|c| = 10·|λ_1(F_L)| makes u the principal eigenvector, |cos| > 0.99, on
    random-init d = 256 models of every family (GQA and H·d_h ≠ d included), three seeds each.

    The first-order error is ``‖(I − u zᵀ/c) F u‖ / (α c)``, so the cosine is ≈ 1 − (‖F u‖/(10 ρ))²/2;
    at d = 256, ``‖F u‖ ≈ ρ`` (≈ 0.995). At d = 32 the ratio fluctuates up to 1.4 between seeds, so
    the tiny models get the exact identity below instead of a threshold.
    """
    for seed in (0, 1, 2):
        model = lib.load_model(str(wide_dir(family)), random_init=True, seed=seed)
        u = steering.random_direction(model.d_model, seed=100 + seed)
        for alpha in (10, 20):
            with steering.steer(model, u, alpha, allow_shared=family == "albert") as edit:
                F = model.layer_matrices()[-1]
                P = spectra.principal(F)
                assert not P.is_complex
                assert edit.alpha_rel == pytest.approx(alpha)
                assert spectra.alignment(P.vector, u.vector) > 0.99, (family, seed, alpha, edit.method)
                if family == "albert":  # the shared module is edited, so every layer sees F'
                    assert torch.equal(model.layer_matrices()[0], F)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("matrix", steering.MATRICES)
def test_steered_eigenvector_is_the_resolvent_of_y(tiny_dir, family, matrix):
    """For F' = F + α y zᵀ, the eigenvector of an eigenvalue λ' ∉ spec(F) is (λ' I − F)^{-1} y (exact)."""
    model = lib.load_model(str(tiny_dir(family)), random_init=True, seed=1)
    F0 = spectra.as_float64(model.layer_matrices()[-1])
    u = steering.random_direction(model.d_model, seed=7)
    with steering.steer(model, u, 20, allow_shared=family == "albert", matrix=matrix) as edit:
        P = spectra.principal(model.layer_matrices()[-1])
    assert not P.is_complex
    want = np.linalg.solve(P.eigval.real * np.eye(model.d_model) - F0, edit.y)
    assert spectra.alignment(P.vector, want) > 1 - 1e-6, (family, matrix)
    assert spectra.alignment(P.vector, u.vector) > 0.98 * spectra.alignment(edit.y, u.vector)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("matrix", steering.MATRICES)
def test_edit_is_rank_one_in_F_and_undone_bitwise(tiny_dir, family, matrix):
    """F_L' = F_L + α y zᵀ (in every weight layout, GPT-2's Conv1D and fused c_attn included); the
    weights come back bit for bit. O-edit: y = u, z = Vᵀw. V-edit: y = O_grp b, z = u."""
    model = lib.load_model(str(tiny_dir(family)))
    before, F0 = _state(model), model.layer_matrices()[-1]
    hs0 = model.hidden_states_ids(_ids())
    u = steering.random_direction(model.d_model, seed=3)
    att = model.layer(-1).attention
    with steering.steer(model, u, 50, allow_shared=family == "albert", matrix=matrix) as edit:
        F1 = model.layer_matrices()[-1]
        want = F0.numpy() + edit.delta_F
        assert np.abs(F1.numpy() - want).max() < 1e-5 * np.abs(want).max()
        if matrix == "O":
            assert np.allclose(edit.z, spectra.as_float64(att.V).T @ edit.w) and np.array_equal(edit.y, u.vector)
        else:
            assert np.allclose(edit.y, steering.grouped_output(att) @ edit.w) and np.array_equal(edit.z, u.vector)
        assert edit.c == pytest.approx(float(edit.z @ edit.y))
    after = _state(model)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert torch.equal(model.hidden_states_ids(_ids()), hs0)


def test_restored_after_exception(tiny_dir):
    model = lib.load_model(str(tiny_dir("gpt2")))
    before = _state(model)
    with pytest.raises(RuntimeError, match="boom"):
        with steering.steer(model, steering.random_direction(model.d_model), 10):
            raise RuntimeError("boom")
    after = _state(model)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_choice_of_w_per_family(tiny_dir):
    """Square invertible V: solve, z = u. GQA (Llama): pinv, c = ‖P_row u‖². Gemma-2 (H·d_h = 2d): z = u."""
    u = steering.random_direction(32, seed=4)
    for family, method, exact in [("bert", "solve", True), ("llama", "pinv", False), ("gemma2", "pinv", True)]:
        model = lib.load_model(str(tiny_dir(family)))
        edit = steering.prepare_edit(model, u, 10)
        assert edit.method == method
        V = spectra.as_float64(model.layer(-1).attention.V)
        if exact:
            assert np.abs(edit.z - u.vector).max() < 1e-9
            assert edit.c == pytest.approx(1.0)
        else:
            Pu = np.linalg.pinv(V) @ V @ u.vector
            assert np.abs(edit.z - Pu).max() < 1e-9
            assert edit.c == pytest.approx(float(Pu @ Pu))
            assert 0 < edit.c < 1


def test_grouped_output_reproduces_F(tiny_dir):
    """F = O_grp V_kv with the checkpoint's own (unexpanded) value weight, GQA included."""
    for family in ("llama", "gemma2", "bert"):
        model = lib.load_model(str(tiny_dir(family)))
        att = model.layer(-1).attention
        V_kv = spectra.as_float64(model.adapter.value_module(model.blocks[-1]).weight)
        F = steering.grouped_output(att) @ V_kv
        assert np.abs(F - spectra.as_float64(att.layer_matrix())).max() < 1e-12 * np.abs(F).max()


def test_v_edit_equals_o_edit_with_mha_but_not_with_gqa(tiny_dir):
    """MHA with square invertible V and O: both edits give F + α u uᵀ. GQA: the V-edit plants
    y = projection of u on the column space of O_grp, so its eigenvector follows y, not u."""
    u = steering.random_direction(32, seed=6)
    for family in ("bert", "gpt2"):
        model = lib.load_model(str(tiny_dir(family)))
        o, v = steering.prepare_edit(model, u, 10), steering.prepare_edit(model, u, 10, matrix="V")
        assert np.abs(o.delta_F - v.delta_F).max() < 1e-9 * np.abs(o.delta_F).max()
    model = lib.load_model(str(tiny_dir("llama")))
    v = steering.prepare_edit(model, u, 10, matrix="V")
    O_grp = steering.grouped_output(model.layer(-1).attention)
    Pu = O_grp @ np.linalg.pinv(O_grp) @ u.vector
    assert v.method == "pinv" and np.abs(v.y - Pu).max() < 1e-9 and v.c == pytest.approx(float(Pu @ Pu))
    with steering.steer(model, u, 1000, matrix="V") as edit:
        P = spectra.principal(model.layer_matrices()[-1])
    y = edit.y / np.linalg.norm(edit.y)
    assert spectra.alignment(P.vector, y) > 0.999
    assert spectra.alignment(P.vector, u.vector) == pytest.approx(float(y @ u.vector), abs=1e-3)


def test_unknown_matrix_is_refused(tiny_dir):
    model = lib.load_model(str(tiny_dir("bert")))
    with pytest.raises(InputError, match="matrix must be one of"):
        steering.prepare_edit(model, steering.random_direction(32), 10, matrix="Q")


def test_relative_and_absolute_alpha(tiny_dir):
    model = lib.load_model(str(tiny_dir("llama")))
    u = steering.random_direction(32, seed=5)
    rel = steering.prepare_edit(model, u, 10)
    rho = float(spectra.spectral_radius(model.layer_matrices()[-1]))
    assert rel.alpha * abs(rel.c) == pytest.approx(10 * rho)
    ab = steering.prepare_edit(model, u, 3.0, relative=False)
    assert ab.alpha == 3.0


def test_albert_refused_without_allow_shared(tiny_dir):
    model = lib.load_model(str(tiny_dir("albert")))
    with pytest.raises(InputError, match="allow_shared"):
        with steering.steer(model, steering.random_direction(32), 10):
            pass


@pytest.mark.parametrize("alpha", [0, -1, float("nan"), float("inf"), "big"])
def test_bad_alpha(tiny_dir, alpha):
    model = lib.load_model(str(tiny_dir("bert")))
    with pytest.raises(InputError, match="alpha"):
        with steering.steer(model, steering.random_direction(32), alpha):
            pass


def test_bad_directions(tiny_dir):
    model = lib.load_model(str(tiny_dir("bert")))
    with pytest.raises(InputError, match="zero vector"):
        steering.prepare_edit(model, np.zeros(32), 10)
    with pytest.raises(InputError, match="d = 32"):
        steering.prepare_edit(model, np.ones(31), 10)
    with pytest.raises(InputError, match="NaN"):
        steering.as_direction([1.0, float("nan")])


def test_unknown_word_names_close_matches(minilm):
    with pytest.raises(InputError, match="close matches: ocean"):
        steering.word_direction(minilm, "oceanx")
    d = steering.word_direction(minilm, "ocean")
    assert d.token_id == minilm.tokenizer.convert_tokens_to_ids("ocean")
    assert np.linalg.norm(d.vector) == pytest.approx(1.0)


@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_activation_addition_is_a_bias_shift(tiny_dir, family):
    """The baseline adds s·u to the output projection's output: the same as adding s·u to its bias."""
    model = lib.load_model(str(tiny_dir(family)))
    u = steering.random_direction(32, seed=6)
    s = 2.5
    with steering.activation_addition(model, u, s):
        got = model.hidden_states_ids(_ids())
    module = model.adapter.output_module(model.blocks[-1])
    saved = module.bias.detach().clone()
    with torch.no_grad():
        module.bias.add_(torch.as_tensor(s * u.vector, dtype=module.bias.dtype))
    want = model.hidden_states_ids(_ids())
    with torch.no_grad():
        module.bias.copy_(saved)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)
    assert not torch.equal(got[-1], model.hidden_states_ids(_ids())[-1])  # the hook is gone


def test_matched_strength_is_the_mean_change(tiny_dir):
    """s = α·mean|wᵀ o_i| equals the measured mean norm of the eigen-edit's change at the output projection."""
    model = lib.load_model(str(tiny_dir("llama")))
    u = steering.random_direction(32, seed=7)
    ids = _ids()
    module = model.adapter.output_module(model.blocks[-1])
    seen = []
    handle = module.register_forward_hook(lambda _m, _a, out: seen.append(out.detach().double()))
    try:
        model.hidden_states_ids(ids)
        with steering.steer(model, u, 20) as edit:
            model.hidden_states_ids(ids)
    finally:
        handle.remove()
    change = (seen[1] - seen[0])[0].numpy()
    outs = []
    hook = module.register_forward_pre_hook(lambda _m, a: outs.append(spectra.as_float64(a[0][0])))
    try:
        model.hidden_states_ids(ids)
    finally:
        hook.remove()
    s = steering.matched_strength(edit, outs)
    assert s == pytest.approx(np.linalg.norm(change, axis=1).mean(), rel=1e-4)
    assert np.abs(change / np.linalg.norm(change, axis=1, keepdims=True) @ u.vector).min() > 0.999


def test_lab_fast_path_matches_full_forward(tiny_dir):
    """Lab re-runs only the blocks after the edit; the result equals a full forward pass of the edited model."""
    from lib.steering_lab import Lab

    model = lib.load_model(str(tiny_dir("gpt_neo")))
    lab = Lab.__new__(Lab)
    lab.model, lab.texts, lab.prompt = model, [], ""
    lab._real = [model.hidden_states_ids(_ids(1))]
    u = steering.random_direction(32, seed=8)
    with steering.steer(model, u, 30):
        fast = lab.real_states(-1)[0]
        full = model.hidden_states_ids(_ids(1)).numpy()
    assert np.array_equal(fast, full)


def test_checker_accepts_reference_and_rejects_wrong_w():
    assert steering.check_steering_w(lambda V, u: steering.choose_w(V, u)[0], verbose=False)
    assert not steering.check_steering_w(lambda V, u: V @ u, verbose=False)
    assert not steering.check_steering_w(lambda V, u: np.linalg.solve(V, u) if V.shape[0] == V.shape[1] else V @ u,
                                         verbose=False)


def test_book_decoder_target_rank_improves():
    """C15 on the book decoder: steering toward 'the' makes it the top next token more often."""
    from lib.decoder import language
    from lib.steering_lab import Lab

    model = lib.load_model("book-decoder", with_lm_head=True)
    lab = Lab(model, language.prompts(8), prompt="the dog")
    u = steering.word_direction(model, "the")
    r0, r1 = lab.run(u, 0, text=False), lab.run(u, 100, text=False)
    assert r1["top1"] > r0["top1"]
    assert r1["final_real"] > r0["final_real"]
    assert r1["spectral_alignment"] > 0.99


def test_measured_change_equals_the_analytic_o_edit_change():
    """At the output projection the O-edit adds α u (wᵀ o_i): the measured mean norm and sign agree."""
    from lib.decoder import language

    model = lib.load_model("book-decoder")
    texts = language.prompts(4)
    u = steering.word_direction(model, "boat")
    before, outs = steering.projection_outputs(model, texts), steering.head_outputs(model, texts)
    with steering.steer(model, u, 20) as edit:
        after = steering.projection_outputs(model, texts)
    ch = steering.measured_change(before, after, u.vector)
    with pytest.raises(InputError, match="O-edit only"):
        steering.matched_strength(steering.prepare_edit(model, u, 20, matrix="V"), outs)
    assert ch["strength"] == pytest.approx(steering.matched_strength(edit, outs), rel=1e-4)
    assert ch["sign_agreement"] == pytest.approx(steering.sign_agreement(edit, outs))
    assert ch["along_u"] > 1 - 1e-5


def test_lab_v_control_on_the_gqa_decoder():
    """The V-edit control in the lab: on the GQA decoder it plants y ≠ u, so v₁' aligns with y, not u."""
    from lib.decoder import language
    from lib.steering_lab import Lab

    model = lib.load_model("book-decoder", with_lm_head=True)
    lab = Lab(model, language.prompts(4), prompt="the dog")
    u = steering.word_direction(model, "boat")
    o, v = lab.run(u, 100, text=False), lab.run(u, 100, text=False, matrix="V")
    assert v["edit"].matrix == "V" and o["edit"].matrix == "O"
    y = v["edit"].y / np.linalg.norm(v["edit"].y)
    assert v["spectral_alignment"] == pytest.approx(abs(float(y @ u.vector)), abs=0.01)
    assert v["spectral_alignment"] < o["spectral_alignment"]
    assert v["strength"] > 0 and 0 <= v["sign_agreement"] <= 1
    assert o["change_along_u"] == 1.0 and v["change_along_u"] < 0.99  # heads average the V-edit differently


def test_v_edit_is_not_the_o_edit_in_a_real_multi_head_pass(minilm):
    """MiniLM (MHA, square V and O): the two edits give the same F_L', yet the V-edit's change at the
    output projection is not along u, because each head averages its values with its own pattern."""
    from lib.decoder import language

    texts = language.prompts(3)
    u = steering.word_direction(minilm, "ocean")
    before = steering.projection_outputs(minilm, texts)
    for matrix, lo, hi in (("O", 1 - 1e-5, 1.0), ("V", 0.0, 0.5)):
        with steering.steer(minilm, u, 100, matrix=matrix):
            ch = steering.measured_change(before, steering.projection_outputs(minilm, texts), u.vector)
        assert lo <= ch["along_u"] <= hi, (matrix, ch)


def test_widget_lab_builds_and_the_matrix_toggle_reruns(capsys):
    """The JupyterLab panel (no kernel needed to build it): toggling O → V re-runs the lab with the V-edit."""
    from lib.decoder import language
    from lib.steering_lab import Lab, widget_lab

    model = lib.load_model("book-decoder", with_lm_head=True)
    lab = Lab(model, language.prompts(2), prompt="the dog")
    box = widget_lab({"decoder": lab}, {"decoder": {"boat": steering.word_direction(model, "boat")}})
    toggle = box.children[1].children[2]
    assert toggle.options == steering.MATRICES and toggle.value == "O"
    capsys.readouterr()
    toggle.value = "V"
    assert "V-edit" in capsys.readouterr().out


def test_lab_output_text_is_wrapped_not_cut():
    """The lab's output line (nearest tokens or a continuation) wraps inside its panel."""
    import pandas as pd

    from lib import steering_lab

    long = "nearest tokens: " + " ".join(["wonders familiar experience stuff"] * 6) + " · cos(sentence, u) = +0.12"
    curves = pd.DataFrame({"depth": [0, 1], "alignment": [0.1, 0.2], "series": ["real", "real"]})
    eigs = pd.DataFrame({"re": [1.0], "im": [0.0], "k": [0]})
    spec = steering_lab._panels(curves, eigs, pd.DataFrame({"text": [long]}), where=None, params=(),
                                n_layers=1, baseline=0.1).to_dict()
    panel = spec["vconcat"][1]
    text = spec["datasets"][panel["data"]["name"]][0]["text"]
    lines = text.split("\n")
    assert len(lines) > 1 and all(len(line) <= steering_lab.TEXT_CHARS for line in lines)
    assert " ".join(lines) == long
    assert panel["mark"]["lineBreak"] == "\n" and panel["height"] >= 16 * len(lines)
