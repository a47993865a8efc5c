"""Model adapters against the raw Hugging Face weights, for every family.

The references below read the *state dict by key name* and build F with explicit per-head loops,
independently of ``lib.models``: the GPT-2 Conv1D transpose and the GQA grouping are the traps.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import FAMILIES
from safetensors.torch import load_file
from tiny_models import SEQ, VOCAB
from transformers import AutoModel

import lib


def _sd(folder) -> dict[str, torch.Tensor]:
    return {k: v.double() for k, v in load_file(str(folder / "model.safetensors")).items()}


def _key(sd: dict, *parts: str) -> torch.Tensor:
    """The unique state-dict entry whose name contains all ``parts`` in order (prefix-agnostic)."""
    hits = [k for k in sd if all(p in k for p in parts) and _ordered(k, parts)]
    assert len(hits) == 1, (parts, hits)
    return sd[hits[0]]


def _ordered(key: str, parts: tuple[str, ...]) -> bool:
    pos = 0
    for p in parts:
        pos = key.find(p, pos)
        if pos < 0:
            return False
        pos += len(p)
    return True


def reference_F(family: str, folder, cfg) -> list[torch.Tensor]:
    """``F_t = Σ_h O_h V_{g(h)}`` from raw weights, one explicit loop over heads."""
    sd = _sd(folder)
    L = cfg.num_hidden_layers
    H = cfg.num_attention_heads
    d = cfg.hidden_size
    out = []
    for t in range(L):
        if family == "bert":
            V = _key(sd, f"layer.{t}.", "attention.self.value.weight")
            O = _key(sd, f"layer.{t}.", "attention.output.dense.weight")
            n_kv, dh = H, d // H
        elif family == "albert":
            V = _key(sd, "albert_layers.0.", "attention.value.weight")
            O = _key(sd, "albert_layers.0.", "attention.dense.weight")
            n_kv, dh = H, d // H
        elif family == "gpt2":
            V = _key(sd, f"h.{t}.", "attn.c_attn.weight")[:, 2 * d:].T  # Conv1D: (in, out)
            O = _key(sd, f"h.{t}.", "attn.c_proj.weight").T
            n_kv, dh = H, d // H
        elif family == "gpt_neo":
            V = _key(sd, f"h.{t}.", "v_proj.weight")
            O = _key(sd, f"h.{t}.", "out_proj.weight")
            n_kv, dh = H, d // H
        else:
            V = _key(sd, f"layers.{t}.", "v_proj.weight")
            O = _key(sd, f"layers.{t}.", "o_proj.weight")
            n_kv = cfg.num_key_value_heads
            dh = getattr(cfg, "head_dim", None) or d // H
        F = torch.zeros(d, d, dtype=torch.float64)
        for h in range(H):
            g = h // (H // n_kv)
            F += O[:, h * dh:(h + 1) * dh] @ V[g * dh:(g + 1) * dh, :]
        out.append(F)
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_layer_matrices_match_raw_weights(family, tiny_dir):
    folder = tiny_dir(family)
    m = lib.load_model(str(folder))
    assert m.family == family
    F = m.layer_matrices()
    assert F.shape == (m.n_layers, m.d_model, m.d_model) and F.dtype == torch.float64
    for t, ref in enumerate(reference_F(family, folder, m.config)):
        assert torch.allclose(F[t], ref, rtol=1e-12, atol=1e-12), (family, t)
    if family == "albert":
        assert all(torch.equal(F[0], F[t]) for t in range(1, m.n_layers))


@pytest.mark.parametrize("family", FAMILIES)
def test_head_matrices_sum_to_F(family, tiny_dir):
    m = lib.load_model(str(tiny_dir(family)))
    for t in range(m.n_layers):
        heads = m.head_matrices(t)
        assert heads.shape == (m.n_heads, m.d_model, m.d_model)
        F = m.layer(t).attention.layer_matrix()
        assert torch.allclose(heads.sum(0), F, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("family", FAMILIES)
def test_attention_on_one_token_is_F_x(family, tiny_dir):
    """Functional test (C2): with one token softmax = 1, so O(V x + b_V) + b_O = F x + O b_V + b_O."""
    m = lib.load_model(str(tiny_dir(family)))
    x = torch.randn(1, 1, m.d_model, generator=torch.Generator().manual_seed(1))
    for t in range(m.n_layers):
        layer = m.layer(t)
        seen: dict[str, torch.Tensor] = {}
        vmod, omod = m.adapter.value_module(layer.module), m.adapter.output_module(layer.module)
        h1 = vmod.register_forward_hook(lambda _m, a, _o: seen.__setitem__("in", a[0].detach()))
        h2 = omod.register_forward_hook(lambda _m, _a, o: seen.__setitem__("out", o.detach()))
        try:
            with torch.no_grad():
                layer(x)
        finally:
            h1.remove()
            h2.remove()
        w = layer.attention
        xin = seen["in"].double().reshape(-1)
        expected = w.layer_matrix() @ xin
        if w.b_V is not None:
            expected = expected + w.O @ w.b_V
        if w.b_O is not None:
            expected = expected + w.b_O
        got = seen["out"].double().reshape(-1)
        assert torch.allclose(got, expected, rtol=1e-5, atol=1e-5 * expected.abs().max()), (family, t)


@pytest.mark.parametrize("family", FAMILIES)
def test_hidden_states_match_output_hidden_states(family, tiny_dir):
    folder = tiny_dir(family)
    m = lib.load_model(str(folder))
    ids = torch.randint(3, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(2))
    ours = m.hidden_states_ids(ids)
    assert ours.shape == (m.n_layers + 1, SEQ, m.d_model) and ours.dtype == torch.float64
    raw = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        ref = raw(input_ids=ids[None], output_hidden_states=True).hidden_states
    assert len(ref) == m.n_layers + 1
    for l in range(m.n_layers):
        assert torch.allclose(ours[l], ref[l][0].double(), atol=1e-5), (family, l)
    last = ours[-1]
    final_norm = m.adapter.final_norm(m.base)
    if final_norm is not None:  # pre-norm: Hugging Face's last entry has the final norm applied
        with torch.no_grad():
            last = final_norm(last.float()).double()
    assert torch.allclose(last, ref[-1][0].double(), atol=1e-5), family


@pytest.mark.parametrize("family", FAMILIES)
def test_layer_call_reproduces_the_forward_pass(family, tiny_dir):
    """Running layer(t) on the stream's entry t gives entry t+1 (masks, windows and RoPE included)."""
    m = lib.load_model(str(tiny_dir(family)))
    ids = torch.randint(3, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(3))
    hs = m.hidden_states_ids(ids)
    for t in range(m.n_layers):
        with torch.no_grad():
            out = m.layer(t)(hs[t].float())
        assert torch.allclose(out.double(), hs[t + 1], atol=1e-5), (family, t)


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_random_init_is_seeded(family, tiny_dir):
    folder = str(tiny_dir(family))
    a = lib.load_model(folder, random_init=True, seed=1).layer_matrices()
    b = lib.load_model(folder, random_init=True, seed=1).layer_matrices()
    c = lib.load_model(folder, random_init=True, seed=2).layer_matrices()
    trained = lib.load_model(folder).layer_matrices()
    assert torch.equal(a, b)
    assert not torch.allclose(a, c)
    assert not torch.allclose(a, trained)
    assert "random init, seed 1" in lib.load_model(folder, random_init=True, seed=1).label


def test_minilm_offline(minilm):
    assert (minilm.family, minilm.n_layers, minilm.d_model, minilm.n_heads) == ("bert", 6, 384, 12)
    assert minilm.head_dim == 32
    from lib.models.loading import minilm_dir

    sd = {k: v.double() for k, v in load_file(str(minilm_dir() / "model.safetensors")).items()}
    F = minilm.layer_matrices()
    for t in range(6):
        V = _key(sd, f"layer.{t}.", "attention.self.value.weight")
        O = _key(sd, f"layer.{t}.", "attention.output.dense.weight")
        assert torch.allclose(F[t], O @ V, rtol=1e-12, atol=1e-12)


def test_minilm_hidden_states_and_tokens(minilm):
    (hs,) = minilm.hidden_states(["The power method finds the dominant eigenvector."])
    enc = minilm.encode("The power method finds the dominant eigenvector.")
    assert enc["tokens"][0] == "[CLS]" and enc["tokens"][-1] == "[SEP]"
    assert enc["special"].tolist() == [True] + [False] * (len(enc["tokens"]) - 2) + [True]
    assert hs.shape == (7, len(enc["tokens"]), 384)
    assert np.isfinite(hs.numpy()).all()


def test_layer_index_errors(minilm):
    with pytest.raises(IndexError, match="has 6 layers"):
        minilm.layer(6)
    with pytest.raises(TypeError):
        minilm.layer(1.5)
    assert minilm.layer(-1).index == 5


def test_with_lm_head_keeps_the_same_layers(tiny_dir):
    folder = str(tiny_dir("llama"))
    lm = lib.load_model(folder, with_lm_head=True)
    base = lib.load_model(folder)
    assert hasattr(lm.hf_model, "lm_head") and lm.base is not lm.hf_model
    assert torch.equal(lm.layer_matrices(), base.layer_matrices())
    ids = torch.arange(3, 3 + SEQ)
    assert torch.allclose(lm.hidden_states_ids(ids), base.hidden_states_ids(ids))
    with pytest.raises(ValueError, match="no LM head"):
        lib.load_model(str(tiny_dir("bert")), with_lm_head=True)


def test_book_decoder_alias_loads_with_head():
    m = lib.load_model("book-decoder", with_lm_head=True)
    assert m.family == "llama" and m.n_kv_heads < m.n_heads
