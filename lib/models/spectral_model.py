"""``SpectralModel``: one interface over every supported Hugging Face family."""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from lib.errors import InputError, InputTypeError, LayerIndexError
from lib.models.families import Family
from lib.models.weights import AttentionWeights
from lib.progress import progress as progress_bar

__all__ = ["Layer", "SpectralModel", "causal_mask", "on_layer_device"]


def causal_mask(n: int, window: int | None, dtype: torch.dtype, device: torch.device | str = "cpu") -> torch.Tensor:
    """Additive mask ``(1, 1, n, n)``: 0 where query ``i`` may attend key ``j``, the dtype's minimum elsewhere.

    Key ``j`` is visible from query ``i`` iff ``j ≤ i`` and, with a sliding window, ``i − j < window``.
    """
    i = torch.arange(n, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    visible = j <= i
    if window is not None:
        visible &= (i - j) < window
    mask = torch.zeros(n, n, dtype=dtype, device=device)
    mask.masked_fill_(~visible, torch.finfo(dtype).min)
    return mask[None, None]


def on_layer_device(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for per-layer work ``fn(model, t, ...)``: it runs with block ``t``'s weights in place.

    A no-op for a model on one device; for a sharded model with offloaded blocks, the call runs inside
    :meth:`SpectralModel.onloaded` ``(t)``, and ``model.param(t)`` gives the device it runs on.
    """

    @functools.wraps(fn)
    def wrapped(model: SpectralModel, t: int, *args: Any, **kwargs: Any) -> Any:
        with model.onloaded(t):
            return fn(model, t, *args, **kwargs)

    return wrapped


@dataclass(frozen=True)
class Layer:
    """Block ``t`` of a loaded model.

    Calling it runs the *real* Hugging Face block (attention, FFN, every norm, the skips) on residual
    vectors ``x`` of shape ``(batch, n, d)`` or ``(n, d)`` (causal mask for decoders, RoPE positions
    ``0..n-1`` for Llama-style families). Inputs are cast to the model's dtype and device; the result
    has the same shape. Usable under ``torch.func`` for Jacobians.

    Attributes:
        index: ``t`` (0-based; figures label it ``t + 1``).
        attention: the layer's attention weights (float64, column convention, KV expanded).
        norm_placement: ``"post"``, ``"pre"``, ``"output"`` or ``"sandwich"`` (see
            :mod:`lib.models.families`).
    """

    index: int
    attention: AttentionWeights
    norm_placement: str
    _model: SpectralModel

    @property
    def module(self) -> nn.Module:
        """The Hugging Face block module (shared by every ``t`` in ALBERT)."""
        return self._model.blocks[self.index]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        squeeze = x.dim() == 2
        h = x[None] if squeeze else x
        param = self._model.param(self.index)
        h = h.to(dtype=param.dtype, device=param.device)
        mask = None
        if self.attention.causal:
            mask = causal_mask(h.shape[1], self.attention.window, h.dtype, h.device)
        out = self._model.adapter.run_block(self._model.base, self.module, self.index, h, mask)
        return out[0] if squeeze else out


class SpectralModel:
    """A loaded checkpoint seen through the book's conventions.

    Attributes:
        family: adapter name (``"bert"``, ``"albert"``, ``"gpt2"``, ``"gpt_neo"``, ``"llama"``,
            ``"olmo2"``, ``"gemma2"``).
        n_layers: ``L``. d_model: ``d``. n_heads: ``H`` (query heads). n_kv_heads, head_dim.
        label: display name for figure subtitles, e.g. ``"all-MiniLM-L6-v2 (trained)"``.
        hf_model: the Hugging Face model. config: its config. tokenizer: its tokenizer or ``None``.
        random_init: whether the weights are a fresh seeded initialization; seed: that seed.
        device_map: where each module lives when the checkpoint was loaded sharded (``load_model(...,
            device_map="auto")``: Accelerate's ``hf_device_map``, e.g. ``{"layers.0": 0, "layers.9": "cpu",
            "layers.31": "disk"}``), else ``None``. Per-layer work runs on the device that holds the layer
            (:meth:`param`, :meth:`onloaded`).
    """

    def __init__(
        self,
        hf_model: nn.Module,
        config: Any,
        family: Family,
        tokenizer: Any,
        *,
        name: str,
        random_init: bool,
        seed: int,
    ) -> None:
        self.hf_model = hf_model
        self.base: nn.Module = getattr(hf_model, "base_model", hf_model)
        self.config = config
        self._family = family
        self.tokenizer = tokenizer
        self.name = name
        self.random_init = random_init
        self.seed = seed
        self.device_map: dict[str, Any] | None = getattr(hf_model, "hf_device_map", None)
        self.blocks: list[nn.Module] = family.blocks(self.base, config)
        self.n_layers = len(self.blocks)
        self.d_model = int(config.hidden_size)
        first = self.layer(0).attention
        self.n_heads, self.n_kv_heads, self.head_dim = first.n_heads, first.n_kv_heads, first.head_dim

    # -- identity --------------------------------------------------------------------------
    @property
    def family(self) -> str:
        """The adapter's family name."""
        return self._family.name

    @property
    def adapter(self) -> Family:
        """The family adapter (where weights and norms live)."""
        return self._family

    @property
    def label(self) -> str:
        """``"<name> (trained)"`` or ``"<name> (random init, seed s)"``."""
        return f"{self.name} (random init, seed {self.seed})" if self.random_init else f"{self.name} (trained)"

    def __repr__(self) -> str:
        return (
            f"SpectralModel({self.label}: family={self.family}, L={self.n_layers}, d={self.d_model}, "
            f"H={self.n_heads}, n_kv={self.n_kv_heads}, d_h={self.head_dim})"
        )

    # -- weights ---------------------------------------------------------------------------
    def check_layer(self, t: int) -> int:
        """The 0-based index of layer ``t`` (negative counts from the end, as in Python).

        Raises:
            InputTypeError: ``t`` is not an int. LayerIndexError: ``t`` is outside ``-L..L-1``.
        """
        if not isinstance(t, int) or isinstance(t, bool):
            raise InputTypeError(f"layer index must be an int, got {type(t).__name__}")
        if not -self.n_layers <= t < self.n_layers:
            raise LayerIndexError(f"layer {t} out of range: this model has {self.n_layers} layers (0..{self.n_layers - 1})")
        return t % self.n_layers

    def param(self, t: int | None = None) -> torch.Tensor:
        """A parameter whose device and dtype are where block ``t``'s work runs (``None``: the model's first).

        For a sharded model (:attr:`device_map`) that is the device holding block ``t``; for a block
        offloaded to host memory or disk, the device it is brought to (inside :meth:`onloaded`).
        """
        module = self.hf_model if t is None else self.blocks[self.check_layer(t)]
        p = next(module.parameters())
        hook = getattr(module, "_hf_hook", None)
        if p.device.type == "meta" and getattr(hook, "execution_device", None) is not None:
            return torch.empty(0, dtype=p.dtype, device=hook.execution_device)
        return p

    @contextlib.contextmanager
    def onloaded(self, t: int) -> Iterator[None]:
        """While active, block ``t``'s weights are real tensors on its execution device.

        A no-op unless the model was loaded with Accelerate offloading (``device_map`` placing the block
        on ``"cpu"`` as offload or on ``"disk"``), where the block's parameters otherwise sit on the
        meta device and are brought in only for its forward pass. Reading weights (``F_t``, the
        closed-form Jacobians) needs them in place; this context puts them there and takes them out again.
        """
        if self.device_map is None:
            yield
            return
        from accelerate.utils import has_offloaded_params

        hooks = [(sub, sub._hf_hook) for sub in self.blocks[self.check_layer(t)].modules() if has_offloaded_params(sub)]
        for sub, hook in hooks:  # weights in; a forward pass inside (a norm's) must not take them out again
            hook.pre_forward(sub)
            hook.offload = False
        try:
            yield
        finally:
            for sub, hook in hooks:
                hook.offload = True
                hook.post_forward(sub, None)

    def layer(self, t: int) -> Layer:
        """Block ``t``: its attention weights and a callable running the real block."""
        t = self.check_layer(t)
        with self.onloaded(t):
            weights = self._family.attention_weights(self.blocks[t], t, self.config)
        return Layer(index=t, attention=weights, norm_placement=self._family.norm_placement, _model=self)

    def layer_matrices(self) -> torch.Tensor:
        """``F_t = O_t V_t`` for every layer, shape ``(L, d, d)``, float64, column convention.

        A token ``x`` maps to ``F_t x``. For ALBERT all ``L`` matrices are the shared layer's.
        """
        return torch.stack([self.layer(t).attention.layer_matrix() for t in range(self.n_layers)])

    def head_matrices(self, t: int) -> torch.Tensor:
        """Per-head ``O_h V_{g(h)}`` of layer ``t``, shape ``(H, d, d)``, float64; they sum to ``F_t``."""
        return self.layer(t).attention.head_matrices()

    # -- text ------------------------------------------------------------------------------
    @property
    def max_length(self) -> int | None:
        """The longest input (in tokens) the model accepts, or ``None`` if unlimited."""
        n = getattr(self.config, "max_position_embeddings", None) or getattr(self.config, "n_positions", None)
        return int(n) if n else None

    def encode(self, text: str) -> dict[str, Any]:
        """Tokenize one text, truncating to :attr:`max_length` with one warning (transformers' own is silenced).

        Returns:
            ``{"input_ids": LongTensor (n,), "tokens": list[str], "special": BoolTensor (n,)}``;
            ``special`` marks tokens such as ``[CLS]``/``[SEP]``.
        """
        if self.tokenizer is None:
            raise InputError(f"{self.label} has no tokenizer; pass input_ids to hidden_states instead of texts.")
        if not isinstance(text, str):
            raise InputTypeError(f"texts must be strings, got {type(text).__name__}")
        # verbose=False: transformers' own "longer than the maximum ... will result in indexing errors" is
        # not true here (the text is truncated below, with the one warning that says so)
        enc = self.tokenizer(text, add_special_tokens=True, return_special_tokens_mask=True, verbose=False)
        ids = enc["input_ids"]
        special = enc["special_tokens_mask"]
        self._warn_unknown(text, ids)
        limit = self.max_length
        if limit is not None and len(ids) > limit:
            warnings.warn(
                f"Text of {len(ids)} tokens is longer than {self.label}'s context of {limit}; "
                f"it was truncated to the first {limit} tokens.",
                stacklevel=3,
            )
            enc = self.tokenizer(text, truncation=True, max_length=limit, return_special_tokens_mask=True)
            ids, special = enc["input_ids"], enc["special_tokens_mask"]
        return {
            "input_ids": torch.tensor(ids, dtype=torch.long),
            "tokens": self.tokenizer.convert_ids_to_tokens(ids),
            "special": torch.tensor(special, dtype=torch.bool),
        }

    def _warn_unknown(self, text: str, ids: Sequence[int]) -> None:
        """Warn, naming the words, when ``text`` has words the vocabulary lacks (they became the unknown token,
        so the model sees one and the same input for all of them)."""
        unk = getattr(self.tokenizer, "unk_token_id", None)
        if unk is None or unk not in ids:
            return
        words = [w for w in dict.fromkeys(text.split()) if unk in self.tokenizer(w, add_special_tokens=False)["input_ids"]]
        shown = ", ".join(repr(w) for w in words[:8]) + (" ..." if len(words) > 8 else "")
        warnings.warn(f"{ids.count(unk)} token(s) of the text are not in {self.label}'s vocabulary and became "
                      f"{self.tokenizer.unk_token}: {shown or 'see the text'}. "
                      + ("The book decoder knows only the words of its grammar: lib.models.decoder.language.vocabulary()."
                         if self.label.startswith("book-decoder") else ""), stacklevel=3)

    @torch.no_grad()
    def hidden_states_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Residual stream of one sequence of token ids ``(n,)``: float64 ``(L+1, n, d)``.

        Entry 0 is the input of block 0 (the embedding output); entry ``l + 1`` is the output of
        block ``l``, read with hooks on the blocks themselves, so for pre-norm families the last entry
        is the raw residual stream *before* the final norm (Hugging Face's own last hidden state has
        that norm applied).
        """
        if input_ids.dim() != 1 or input_ids.numel() == 0:
            raise InputError(f"input_ids must be a non-empty 1-D tensor, got shape {tuple(input_ids.shape)}")
        return self.hidden_states_batch(input_ids[None])[:, 0]

    @torch.no_grad()
    def hidden_states_batch(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Residual streams of ``B`` sequences of the same length ``n`` in one pass: float64 ``(L+1, B, n, d)``.

        The same entries as :meth:`hidden_states_ids` (which is this pass with ``B = 1``) for each row of
        ``input_ids`` ``(B, n)`` (no padding, so no attention mask is needed). One batched pass instead of
        ``B`` is several times faster on a CPU, and agrees with the one-sequence passes to float32 rounding
        (the matrix products block differently), not bitwise.
        """
        if input_ids.dim() != 2 or input_ids.numel() == 0:
            raise InputError(f"input_ids must be a non-empty 2-D tensor (B, n), got shape {tuple(input_ids.shape)}")
        outputs: list[torch.Tensor] = []

        def hook(_mod: nn.Module, _args: Any, out: Any) -> None:
            outputs.append((out[0] if isinstance(out, (tuple, list)) else out).detach())

        handles = [m.register_forward_hook(hook) for m in {id(b): b for b in self.blocks}.values()]
        try:
            device = self.param().device
            res = self.base(input_ids=input_ids.to(device), output_hidden_states=True, use_cache=False)
        finally:
            for h in handles:
                h.remove()
        if len(outputs) != self.n_layers:
            raise RuntimeError(f"expected {self.n_layers} block outputs, hooks saw {len(outputs)}")
        # each block's output comes back on the device that holds the block (several, when sharded)
        return torch.stack([h.to(device="cpu", dtype=torch.float64) for h in (res.hidden_states[0], *outputs)])

    @torch.no_grad()
    def hidden_states_padded(self, ids: Sequence[torch.Tensor], *, batch: int = 64) -> list[torch.Tensor]:
        """Residual streams of sequences of different lengths, ``batch`` at a time: one float64 ``(L+1, n_i, d)``
        per sequence of token ids ``ids[i]`` ``(n_i,)``, the entries of :meth:`hidden_states_ids`.

        The sequences are padded on the right to the longest of each batch and an attention mask hides the
        padding, so a real position attends to its own sequence only and keeps its position ids (right padding
        moves no real token). Equal to the one-sequence passes to rounding (the products block differently;
        tested in float64), several times faster on a CPU than one pass per sequence.
        """
        if not ids or any(x.dim() != 1 or x.numel() == 0 for x in ids):
            raise InputError("ids must be a non-empty list of non-empty 1-D token-id tensors")
        device = self.param().device
        out: list[torch.Tensor] = []
        for s in range(0, len(ids), batch):
            part = ids[s : s + batch]
            n = max(len(x) for x in part)
            input_ids = torch.zeros(len(part), n, dtype=torch.long)
            mask = torch.zeros(len(part), n, dtype=torch.long)
            for b, x in enumerate(part):
                input_ids[b, : len(x)], mask[b, : len(x)] = x, 1
            outputs: list[torch.Tensor] = []

            def hook(_mod: nn.Module, _args: Any, o: Any) -> None:
                outputs.append((o[0] if isinstance(o, (tuple, list)) else o).detach())

            handles = [m.register_forward_hook(hook) for m in {id(b): b for b in self.blocks}.values()]
            try:
                res = self.base(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                                output_hidden_states=True, use_cache=False)
            finally:
                for h in handles:
                    h.remove()
            if len(outputs) != self.n_layers:
                raise RuntimeError(f"expected {self.n_layers} block outputs, hooks saw {len(outputs)}")
            H = torch.stack([h.to(device="cpu", dtype=torch.float64) for h in (res.hidden_states[0], *outputs)])
            out.extend(H[:, b, : len(x)].clone() for b, x in enumerate(part))
        return out

    def hidden_states(self, texts: str | Sequence[str], *, progress: bool | None = None) -> list[torch.Tensor]:
        """The residual stream of each text from a real forward pass.

        Args:
            texts: one string or a list of strings (tokenized with the checkpoint's own tokenizer).
            progress: show a progress bar (default: when there are more than 20 texts).

        Returns:
            one float64 tensor ``(L+1, n_i, d)`` per text (see :meth:`hidden_states_ids`).
        """
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        if not texts:
            raise InputError("texts is empty: pass at least one string")
        show = len(texts) > 20 if progress is None else progress
        it = progress_bar(texts, desc=f"forward passes ({self.name})", disable=not show)
        return [self.hidden_states_ids(self.encode(text)["input_ids"]) for text in it]
