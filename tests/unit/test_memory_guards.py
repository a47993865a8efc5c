"""Computations too big for memory are refused up front, with the estimate and what would fit."""

from __future__ import annotations

import pytest
import torch

import lib
from lib import memory
from lib.jacobians import sweep


def test_require_message():
    with pytest.raises(lib.ModelTooLargeError, match=r"needs about 1.00 GiB .* Use fewer"):
        memory.require(2**30, "a thing", "Use fewer.", budget=2**20)
    memory.require(10, "a small thing", "-", budget=2**20)  # fits: no error


def test_available_bytes_is_positive_and_bounded():
    import psutil

    assert 0 < memory.available_bytes("cpu") <= psutil.virtual_memory().available


def test_jacobians_refused_before_any_work(tiny_dir, monkeypatch):
    m = lib.load_model(str(tiny_dir("llama")))
    X = torch.randn(4, m.d_model)
    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": 1000)
    with pytest.raises(lib.ModelTooLargeError) as err:
        sweep.layer_jacobians(m, 0, X)
    assert "prompts fit per call" in str(err.value) and "GiB" in str(err.value)


def test_sweep_keeping_every_prompt_is_refused_with_the_alternative(tiny_dir, monkeypatch):
    m = lib.load_model(str(tiny_dir("bert")))
    X = torch.randn(m.n_layers + 1, 3, m.d_model)
    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": 1000)
    with pytest.raises(lib.ModelTooLargeError, match="keep_per_prompt=False"):
        sweep.sweep(m, X, keep_per_prompt=True, progress=False)


def test_empty_inputs_are_refused(tiny_dir):
    m = lib.load_model(str(tiny_dir("gpt2")))
    with pytest.raises(lib.InputError, match="P ≥ 1"):
        sweep.layer_jacobians(m, 0, torch.zeros(0, m.d_model))
    with pytest.raises(lib.InputError, match="no prompts"):
        sweep.sweep(m, torch.zeros(m.n_layers + 1, 0, m.d_model), progress=False)
