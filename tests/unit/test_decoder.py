"""The committed book decoder: loads by alias, is a GQA Llama, and has learned its language."""

from __future__ import annotations

import json

import pytest
import torch

import lib
from lib.models import decoder
from lib.models.decoder import language


@pytest.fixture(scope="module")
def lm():
    return decoder.load_lm()


def test_alias_loads_llama_family():
    m = lib.load_model("book-decoder")
    assert m.family == "llama"
    assert m.n_kv_heads < m.n_heads
    assert m.tokenizer is not None and m.label == "book-decoder (trained)"
    x = m.hidden_states("the dog runs near the river .")[0]
    assert x.shape == (m.n_layers + 1, 8, m.d_model)


def test_checkpoint_files_and_size():
    folder = decoder.checkpoint_dir()
    st = folder / "model.safetensors"
    assert st.is_file() and st.stat().st_size <= 20 * 2**20
    for f in ("config.json", "tokenizer.json", "training_log.json"):
        assert (folder / f).is_file()
    log = decoder.training_log()
    assert len(log["steps"]) == len(log["loss"]) > 10
    assert json.loads((folder / "config.json").read_text())["model_type"] == "llama"


def test_tokenizer_covers_language(lm):
    _, tok = lm
    text = " ".join(language.generate_corpus(50, seed=7))
    ids = tok(text)["input_ids"]
    assert tok.unk_token_id not in ids
    assert tok.decode(ids, skip_special_tokens=True) == text


def test_heldout_loss_well_below_random_twin(lm):
    model, tok = lm
    held = language.generate_corpus(40, seed=123)
    trained = decoder.heldout_loss(model, tok, held)
    twin, _ = decoder.load_lm(random_init=True, seed=0)
    random = decoder.heldout_loss(twin, tok, held)
    assert trained < 0.6 * random
    assert trained == pytest.approx(decoder.training_log()["heldout_loss"], abs=0.15)


def test_generate_is_text_and_deterministic(lm):
    model, tok = lm
    a = decoder.generate(model, tok, "the girl", max_new_tokens=8)
    assert a.startswith("the girl") and len(a.split()) > 3
    assert decoder.generate(model, tok, "the girl", 8, seed=1) == decoder.generate(model, tok, "the girl", 8, seed=1)


def test_language_is_deterministic():
    assert language.prompts(5) == language.prompts(5)
    assert language.generate_corpus(3, 0) != language.generate_corpus(3, 1)
    assert all(w in language.vocabulary() for w in " ".join(language.prompts(30)).split())


def test_lm_and_alias_share_weights(lm):
    model, _ = lm
    m = lib.load_model("book-decoder")
    torch.testing.assert_close(model.model.layers[0].mlp.up_proj.weight, m.blocks[0].mlp.up_proj.weight)
