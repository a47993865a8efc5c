"""Tiny random-initialised configs of every supported family, saved as real checkpoint folders.

Each config is small (d = 32) but keeps its family's traps: GPT-2's Conv1D layout, GPT-Neo's local
layers and missing score scale, grouped-query attention (Llama, Gemma-2), QK-norm (OLMo-2), and
Gemma-2's ``H·d_h ≠ d``. Windows are short (4) so that sequences of 9 tokens exercise them.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import (
    AlbertConfig,
    AutoModel,
    BertConfig,
    Gemma2Config,
    GPT2Config,
    GPTNeoConfig,
    LlamaConfig,
    Olmo2Config,
)

VOCAB = 64
SEQ = 9  # longer than the sliding windows below


def tiny_configs() -> dict[str, object]:
    """One small config per family name."""
    common = dict(vocab_size=VOCAB, max_position_embeddings=64)
    decoder = dict(common, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4)
    return {
        "bert": BertConfig(**common, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64),
        "albert": AlbertConfig(
            **common, embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
            intermediate_size=64,
        ),
        "gpt2": GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4),
        "gpt_neo": GPTNeoConfig(
            vocab_size=VOCAB, max_position_embeddings=64, hidden_size=32, num_layers=2, num_heads=4,
            attention_types=[[["global", "local"], 1]], window_size=4,
        ),
        "llama": LlamaConfig(**decoder, num_key_value_heads=2),
        "olmo2": Olmo2Config(**decoder, num_key_value_heads=4),
        "gemma2": Gemma2Config(
            **decoder, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16, sliding_window=4,
        ),
    }


def wide_config(family: str, d: int = 256) -> object:
    """The tiny config of ``family`` widened to ``d`` (8 heads of ``d/8``; GQA kept for Llama and
    Gemma-2, whose ``H·d_h`` stays ``≠ d``), for statements that hold once ``d`` is not tiny."""
    c = tiny_configs()[family]
    for key in ("hidden_size", "n_embd"):
        if hasattr(c, key):
            setattr(c, key, d)
    c.intermediate_size = 2 * d
    if family == "gpt2":
        c.n_inner = 2 * d
    if family == "albert":
        c.embedding_size = 64
    for key in ("num_attention_heads", "n_head", "num_heads"):
        if hasattr(c, key):
            setattr(c, key, 4 if family == "gemma2" else 8)
    if family == "gemma2":
        c.head_dim = c.query_pre_attn_scalar = 40  # H·d_h = 160 ≠ d
    elif hasattr(c, "head_dim"):
        c.head_dim = d // 8
    return c


def perturb_(model: torch.nn.Module, seed: int) -> None:
    """Give every parameter (norm gains and biases included) a generic random value.

    Default inits leave biases at 0 and gains at 1, which would hide transpose and bias mistakes.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = 0.1 if p.dim() == 1 else 0.3
            base = 1.0 if ("norm" in name.lower() or "ln" in name.lower()) and p.dim() == 1 and "bias" not in name else 0.0
            p.copy_(base + scale * torch.randn(p.shape, generator=g))


def save_tiny(family: str, folder: Path, seed: int = 0) -> Path:
    """Build the tiny config of ``family``, perturb its weights, and save it (safetensors) in ``folder``."""
    torch.manual_seed(seed)
    model = AutoModel.from_config(tiny_configs()[family])
    perturb_(model, seed)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    return folder


def block_inputs(model, P: int = 3, seed: int = 0) -> torch.Tensor:
    """Block 1's inputs at the last token of ``P`` random 7-token texts, ``(P, d)`` (the Jacobian tests' points)."""
    g = torch.Generator().manual_seed(seed)
    ids = [torch.randint(0, model.config.vocab_size, (7,), generator=g) for _ in range(P)]
    return torch.stack([model.hidden_states_ids(i)[1, -1] for i in ids])


RMS_FAMILIES = ("llama", "olmo2", "gemma2")
"""Families whose RMSNorm Hugging Face computes in float32, even in a float64 model."""


def fp64_tolerance(family: str) -> float:
    """Relative tolerance of float64 identities: 1e-10 with LayerNorm, 1e-6 where RMSNorm's float32 step limits it."""
    return 1e-6 if family in RMS_FAMILIES else 1e-10
