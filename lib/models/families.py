"""Family adapters: where each architecture keeps its blocks, value/output weights and norms.

Every adapter maps a Hugging Face base model (``model.base_model``) to the book's objects:

* ``blocks(base)``: the ``L`` block modules in order (ALBERT: the one shared layer, ``L`` times);
* ``attention_weights(block, t)``: the layer's :class:`AttentionWeights` (float64, column
  convention, KV heads expanded, GPT-2's ``Conv1D`` transposed here and nowhere else);
* ``run_block(base, block, t, x, mask)``: the real block on ``x`` of shape ``(b, n, d)``;
* ``value_module`` / ``output_module``: the modules whose input is the value projection's input and
  whose output is ``O (·) + b_O`` (used by the functional test ``attention(x) = F x``).

What a "layer" means for each family (``norm_placement``):

* ``"post"`` (BERT, ALBERT): ``u = LN₁(x + O(V x + b_V) + b_O)``, ``f = LN₂(u + FFN(u))``;
* ``"pre"`` (GPT-2, GPT-Neo, Llama): ``u = x + Attn(N₁(x))``, ``f = u + MLP(N₂(u))``;
* ``"output"`` (OLMo-2): ``u = x + N_a(Attn(x))``, ``f = u + N_m(MLP(u))``;
* ``"sandwich"`` (Gemma-2): ``u = x + N_post(Attn(N_pre(x)))``, same pattern for the MLP.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from lib.models.weights import AttentionWeights, expand_kv

__all__ = ["FAMILIES", "Family", "family_for_model_type"]


def _f64(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach().to(device="cpu", dtype=torch.float64).clone()


def _linear_bias(m: nn.Module) -> torch.Tensor | None:
    return _f64(getattr(m, "bias", None))


def _first(out: Any) -> torch.Tensor:
    """Blocks return a tensor or a tuple whose first entry is the hidden states."""
    return out[0] if isinstance(out, (tuple, list)) else out


class Family:
    """Base adapter. Subclasses fill in where the weights live."""

    name: str = ""
    model_types: tuple[str, ...] = ()
    norm_placement: str = ""
    causal: bool = True

    # -- structure -------------------------------------------------------------------------
    def blocks(self, base: nn.Module, config: Any) -> list[nn.Module]:
        raise NotImplementedError

    def final_norm(self, base: nn.Module) -> nn.Module | None:
        """The norm applied after the last block (pre-norm families), or ``None``."""
        return None

    def value_module(self, block: nn.Module) -> nn.Module:
        raise NotImplementedError

    def output_module(self, block: nn.Module) -> nn.Module:
        raise NotImplementedError

    # -- weights ---------------------------------------------------------------------------
    def attention_weights(self, block: nn.Module, t: int, config: Any) -> AttentionWeights:
        raise NotImplementedError

    def window(self, t: int, config: Any) -> int | None:
        """Sliding-window length of layer ``t`` (``None``: global attention)."""
        return None

    # -- running ---------------------------------------------------------------------------
    def run_block(
        self, base: nn.Module, block: nn.Module, t: int, x: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        raise NotImplementedError


class _Linear4(Family):
    """Families with separate q/k/v/o ``nn.Linear`` modules (weights already column convention)."""

    def _attn(self, block: nn.Module) -> nn.Module:
        raise NotImplementedError

    def _qkvo(self, block: nn.Module) -> tuple[nn.Module, nn.Module, nn.Module, nn.Module]:
        raise NotImplementedError

    def _heads(self, config: Any) -> tuple[int, int, int]:
        """``(H, n_kv, d_h)``."""
        H = config.num_attention_heads
        n_kv = getattr(config, "num_key_value_heads", None) or H
        d_h = getattr(config, "head_dim", None) or config.hidden_size // H
        return H, n_kv, d_h

    def _scale(self, config: Any, d_h: int) -> float:
        return 1.0 / math.sqrt(d_h)

    def attention_weights(self, block: nn.Module, t: int, config: Any) -> AttentionWeights:
        q, k, v, o = self._qkvo(block)
        H, n_kv, d_h = self._heads(config)

        def kv(W: torch.Tensor | None) -> torch.Tensor | None:
            return None if W is None else expand_kv(W, H, n_kv, d_h)

        return AttentionWeights(
            Q=_f64(q.weight),
            K=kv(_f64(k.weight)),
            V=kv(_f64(v.weight)),
            O=_f64(o.weight),
            b_Q=_linear_bias(q),
            b_K=kv(_linear_bias(k)),
            b_V=kv(_linear_bias(v)),
            b_O=_linear_bias(o),
            n_heads=H,
            n_kv_heads=n_kv,
            head_dim=d_h,
            score_scale=self._scale(config, d_h),
            causal=self.causal,
            window=self.window(t, config),
            qk_norm=hasattr(self._attn(block), "q_norm"),
        )

    def value_module(self, block: nn.Module) -> nn.Module:
        return self._qkvo(block)[2]

    def output_module(self, block: nn.Module) -> nn.Module:
        return self._qkvo(block)[3]


class Bert(_Linear4):
    name = "bert"
    model_types = ("bert", "roberta", "xlm-roberta")
    norm_placement = "post"
    causal = False

    def blocks(self, base: nn.Module, config: Any) -> list[nn.Module]:
        return list(base.encoder.layer)

    def _attn(self, block: nn.Module) -> nn.Module:
        return block.attention.self

    def _qkvo(self, block: nn.Module) -> tuple[nn.Module, nn.Module, nn.Module, nn.Module]:
        s = block.attention.self
        return s.query, s.key, s.value, block.attention.output.dense

    def run_block(self, base, block, t, x, mask):  # noqa: D102 - see Family
        return _first(block(x, attention_mask=mask))


class Albert(_Linear4):
    name = "albert"
    model_types = ("albert",)
    norm_placement = "post"
    causal = False

    def blocks(self, base: nn.Module, config: Any) -> list[nn.Module]:
        if config.inner_group_num != 1:
            from lib.errors import UnsupportedModelError

            raise UnsupportedModelError(
                f"ALBERT with inner_group_num = {config.inner_group_num} is not supported "
                "(every released ALBERT checkpoint has 1)."
            )
        groups = base.encoder.albert_layer_groups
        per_group = config.num_hidden_layers // config.num_hidden_groups
        return [groups[t // per_group].albert_layers[0] for t in range(config.num_hidden_layers)]

    def _attn(self, block: nn.Module) -> nn.Module:
        return block.attention

    def _qkvo(self, block: nn.Module) -> tuple[nn.Module, nn.Module, nn.Module, nn.Module]:
        a = block.attention
        return a.query, a.key, a.value, a.dense

    def run_block(self, base, block, t, x, mask):  # noqa: D102 - see Family
        return _first(block(x, attention_mask=mask))


class GPT2(Family):
    """GPT-2: ``Conv1D`` stores ``(in, out)`` and computes ``x @ W``; transposed once, here."""

    name = "gpt2"
    model_types = ("gpt2",)
    norm_placement = "pre"

    def blocks(self, base: nn.Module, config: Any) -> list[nn.Module]:
        return list(base.h)

    def final_norm(self, base: nn.Module) -> nn.Module | None:
        return base.ln_f

    def value_module(self, block: nn.Module) -> nn.Module:
        return block.attn.c_attn

    def output_module(self, block: nn.Module) -> nn.Module:
        return block.attn.c_proj

    def attention_weights(self, block: nn.Module, t: int, config: Any) -> AttentionWeights:
        d = config.hidden_size
        H = config.num_attention_heads
        d_h = d // H
        W = _f64(block.attn.c_attn.weight)  # (d, 3d), Conv1D layout
        b = _f64(block.attn.c_attn.bias)  # (3d,)
        scale = 1.0 / math.sqrt(d_h) if getattr(config, "scale_attn_weights", True) else 1.0
        if getattr(config, "scale_attn_by_inverse_layer_idx", False):
            scale /= t + 1
        return AttentionWeights(
            Q=W[:, :d].T.contiguous(),
            K=W[:, d : 2 * d].T.contiguous(),
            V=W[:, 2 * d :].T.contiguous(),
            O=_f64(block.attn.c_proj.weight).T.contiguous(),
            b_Q=b[:d],
            b_K=b[d : 2 * d],
            b_V=b[2 * d :],
            b_O=_f64(block.attn.c_proj.bias),
            n_heads=H,
            n_kv_heads=H,
            head_dim=d_h,
            score_scale=scale,
            causal=True,
        )

    def run_block(self, base, block, t, x, mask):  # noqa: D102 - see Family
        return _first(block(x, attention_mask=mask))


class GPTNeo(_Linear4):
    """GPT-Neo: no ``1/sqrt(d_h)`` score scaling; global and local (windowed) layers alternate."""

    name = "gpt_neo"
    model_types = ("gpt_neo",)
    norm_placement = "pre"

    def blocks(self, base: nn.Module, config: Any) -> list[nn.Module]:
        return list(base.h)

    def final_norm(self, base: nn.Module) -> nn.Module | None:
        return base.ln_f

    def _attn(self, block: nn.Module) -> nn.Module:
        return block.attn.attention

    def _qkvo(self, block: nn.Module) -> tuple[nn.Module, nn.Module, nn.Module, nn.Module]:
        a = block.attn.attention
        return a.q_proj, a.k_proj, a.v_proj, a.out_proj

    def _scale(self, config: Any, d_h: int) -> float:
        return 1.0

    def window(self, t: int, config: Any) -> int | None:
        return config.window_size if config.attention_layers[t] == "local" else None

    def run_block(self, base, block, t, x, mask):  # noqa: D102 - see Family
        return _first(block(x, attention_mask=mask))


class Llama(_Linear4):
    """Llama-style decoders: ``layers[l].self_attn.{q,k,v,o}_proj``, RoPE, grouped-query attention."""

    name = "llama"
    model_types = ("llama", "mistral", "qwen2")
    norm_placement = "pre"

    def blocks(self, base: nn.Module, config: Any) -> list[nn.Module]:
        return list(base.layers)

    def final_norm(self, base: nn.Module) -> nn.Module | None:
        return base.norm

    def _attn(self, block: nn.Module) -> nn.Module:
        return block.self_attn

    def _qkvo(self, block: nn.Module) -> tuple[nn.Module, nn.Module, nn.Module, nn.Module]:
        a = block.self_attn
        return a.q_proj, a.k_proj, a.v_proj, a.o_proj

    def window(self, t: int, config: Any) -> int | None:
        types = getattr(config, "layer_types", None)
        if types is not None and types[t] == "sliding_attention":
            return getattr(config, "sliding_window", None)
        return None

    def run_block(self, base, block, t, x, mask):  # noqa: D102 - see Family
        positions = torch.arange(x.shape[1], device=x.device).unsqueeze(0).expand(x.shape[0], -1)
        cos_sin = base.rotary_emb(x, positions)
        return _first(block(x, attention_mask=mask, position_ids=positions, position_embeddings=cos_sin))


class Olmo2(Llama):
    """OLMo-2: RMSNorm on the sublayer *outputs* and on queries/keys (QK-norm)."""

    name = "olmo2"
    model_types = ("olmo2",)
    norm_placement = "output"


class Gemma2(Llama):
    """Gemma-2: pre- and post-norms with gain ``1 + w``; scores scaled by ``query_pre_attn_scalar^-1/2``."""

    name = "gemma2"
    model_types = ("gemma2",)
    norm_placement = "sandwich"

    def _scale(self, config: Any, d_h: int) -> float:
        return float(config.query_pre_attn_scalar) ** -0.5


FAMILIES: dict[str, Family] = {f.name: f for f in (Bert(), Albert(), GPT2(), GPTNeo(), Llama(), Olmo2(), Gemma2())}


def family_for_model_type(model_type: str) -> Family | None:
    """The adapter that handles a config's ``model_type``, or ``None``."""
    for fam in FAMILIES.values():
        if model_type in fam.model_types:
            return fam
    return None
