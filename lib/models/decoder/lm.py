"""The trained book decoder: its committed checkpoint, the causal LM with its head, losses and generation."""


from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

__all__ = ["checkpoint_dir", "generate", "heldout_loss", "load_lm", "training_log"]

_HERE = Path(__file__).resolve().parent
CHECKPOINT = _HERE / "checkpoint"


def checkpoint_dir() -> Path:
    """Folder of the committed checkpoint (what ``lib.load_model("book-decoder")`` loads)."""
    if not (CHECKPOINT / "config.json").is_file():
        from lib.errors import ModelNotAvailableError

        raise ModelNotAvailableError(
            f"The book decoder's checkpoint is missing from {CHECKPOINT}; rebuild it with `python -m lib.models.decoder.train`."
        )
    return CHECKPOINT


def load_lm(random_init: bool = False, seed: int = 0, device: str | torch.device = "cpu") -> tuple[Any, Any]:
    """``(LlamaForCausalLM, tokenizer)`` of the book decoder (or its seeded random-init twin)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder = checkpoint_dir()
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    if random_init:
        torch.manual_seed(seed)
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    else:
        model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, attn_implementation="eager")
    return model.to(device).eval(), tok


def training_log() -> dict:
    """The training record: hyper-parameters, seeds, versions and the loss curve (``steps``, ``loss``)."""
    with open(checkpoint_dir() / "training_log.json", encoding="utf-8") as fh:
        return json.load(fh)


@torch.no_grad()
def heldout_loss(model: Any, tokenizer: Any, texts: list[str]) -> float:
    """Mean next-token cross-entropy (nats per token) of ``model`` on ``texts``."""
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for text in texts:
        ids = torch.tensor([tokenizer(text)["input_ids"]], device=device)
        out = model(input_ids=ids, labels=ids)
        n = ids.shape[1] - 1
        total += float(out.loss) * n
        count += n
    return total / count


@torch.no_grad()
def generate(model: Any, tokenizer: Any, prompt: str, max_new_tokens: int = 20, *, seed: int | None = None,
             temperature: float = 1.0) -> str:
    """Continue ``prompt``: greedy when ``seed`` is None, else sampled with ``torch.Generator(seed)``.

    Returns the prompt followed by the new words (special tokens dropped).
    """
    device = next(model.parameters()).device
    ids = torch.tensor([tokenizer(prompt)["input_ids"]], device=device)
    gen = None if seed is None else torch.Generator(device=device).manual_seed(seed)
    for _ in range(max_new_tokens):
        logits = model(input_ids=ids).logits[0, -1].double()
        if gen is None:
            nxt = int(logits.argmax())
        else:
            p = torch.softmax(logits / temperature, dim=-1)
            nxt = int(torch.multinomial(p, 1, generator=gen))
        if nxt == tokenizer.eos_token_id:
            break
        ids = torch.cat([ids, torch.tensor([[nxt]], device=device)], dim=1)
    return tokenizer.decode(ids[0], skip_special_tokens=True)
