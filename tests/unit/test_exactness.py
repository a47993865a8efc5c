"""lib.methods.exactness: the report's three checks hold on every family and catch a wrong formula."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import FAMILIES

from lib.jacobians import in_context
from lib.methods import exactness as ex


def _stream(model, n: int = 5, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return model.hidden_states_ids(torch.randint(0, model.config.vocab_size, (n,), generator=g))


@pytest.mark.parametrize("family", FAMILIES)
def test_the_three_checks_hold_on_every_family(tiny64, family):
    model = tiny64(family)
    H = _stream(model)
    for t in range(model.n_layers):
        assert ex.ft_forward_error(model, t, H[t, -1]) < ex.TOLERANCE
        assert ex.block_jacobian_error(model, t, H[t, 1:]) < ex.TOLERANCE
        err = ex.in_context_error(model, t, H[t], 3)
        assert (err is None) == (not in_context.supports(model))
        assert err is None or err < ex.TOLERANCE


def test_a_wrong_layer_matrix_is_caught(tiny64, monkeypatch):
    """F_t transposed (the classic slip) fails the forward-pass check by orders of magnitude."""
    model = tiny64("llama")
    x = _stream(model)[1, -1]
    layer_cls = type(model.layer(1).attention)
    right = layer_cls.layer_matrix
    monkeypatch.setattr(layer_cls, "layer_matrix", lambda self: right(self).T)
    assert ex.ft_forward_error(model, 1, x) > 1e-2


def test_exactness_checks_table_and_float64_is_undone(minilm):
    from lib.models.prompts import prompts

    dtype = next(minilm.hf_model.parameters()).dtype
    table = ex.exactness_checks(minilm, prompts(2), layers=[0, -1])
    assert next(minilm.hf_model.parameters()).dtype == dtype  # the model is back in its own dtype
    assert list(table.columns) == ["check", "layer", "relative error", "exact"]
    assert list(table["check"]) == list(ex.CHECKS) * 2 and set(table["layer"]) == {1, minilm.n_layers}
    assert table["exact"].all() and np.all(table["relative error"] < 1e-12)


def test_bad_input():
    import lib

    m = lib.load_model("book-decoder")
    with pytest.raises(lib.InputError):
        ex.exactness_checks(m, [])
    with pytest.raises(lib.InputError):
        ex.ft_forward_error(m, 0, torch.zeros(3))
