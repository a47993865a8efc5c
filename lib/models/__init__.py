"""Model adapters: :func:`load_model` and :class:`SpectralModel`.

Supported families: bert, albert, gpt2, gpt_neo, llama, olmo2, gemma2 (and close relatives that share
a family's layout: roberta, mistral, qwen2). See :mod:`lib.models.families` for where each keeps its
weights and norms.
"""

from __future__ import annotations

from lib.models.families import FAMILIES
from lib.models.loading import OFFLINE_ALIASES, SUPPORTED_FAMILIES, load_model
from lib.models.spectral_model import Layer, SpectralModel
from lib.models.twins import Twins, load_twins
from lib.models.weights import AttentionWeights, expand_kv

__all__ = [
    "FAMILIES",
    "OFFLINE_ALIASES",
    "SUPPORTED_FAMILIES",
    "AttentionWeights",
    "Layer",
    "SpectralModel",
    "Twins",
    "expand_kv",
    "load_model",
    "load_twins",
]
