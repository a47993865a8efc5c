"""Train the book's decoder from scratch: ``python -m lib.models.decoder.train [--out DIR] [--steps N]``.

[ours] A 6-layer Llama-style decoder (RMSNorm, SwiGLU, RoPE, grouped-query attention with 4 query
heads and 2 KV heads, d = 128) trained on the synthetic English-like language of
:mod:`lib.models.decoder.language` with a word-level tokenizer. Everything is seeded (corpus seed 0, held-out
seed 1, ``torch.manual_seed(0)``, deterministic algorithms, a fixed thread count), so a rerun with the
same torch version and thread count reproduces the committed ``model.safetensors`` bit for bit; other
versions or thread counts change float rounding, and the final loss then agrees to about 1e-2 nats
(documented tolerance; checked by ``tests/unit/test_decoder.py`` only on the committed file).

Writes ``config.json``, ``model.safetensors`` (the causal LM, fp32), ``generation_config.json``,
``steps/step_NNNN.safetensors`` (the weights after NNNN updates, at ``HPARAMS["checkpoint_steps"]``, the last
one being the final weights again; fp32, same keys; written without drawing a random number, so the run is the
same with or without them: :mod:`lib.models.decoder.steps`),
``tokenizer.json`` + ``tokenizer_config.json`` + ``special_tokens_map.json`` and
``training_log.json`` (hyper-parameters, versions, the loss curve and the held-out loss).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import numpy as np
import torch

from lib.models.decoder.language import generate_corpus, vocabulary

SPECIAL = ["<pad>", "<unk>", "<bos>", "<eos>"]
HPARAMS = dict(
    hidden_size=128, intermediate_size=384, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=128, seq_len=64, batch_size=16, steps=1200, lr=3e-3, warmup=50, weight_decay=0.01,
    n_train_stories=20000, n_heldout_stories=300, corpus_seed=0, heldout_seed=1, torch_seed=0, threads=1,
    log_every=10, checkpoint_steps=[0, 25, 50, 100, 300, 600, 1200],
)
STEPS_DIR = "steps"
"""Sub-folder of ``out`` holding the intermediate checkpoints ``step_NNNN.safetensors``."""


def step_file(step: int) -> str:
    """File name of the intermediate checkpoint after ``step`` optimizer updates (``step_0025.safetensors``)."""
    return f"step_{step:04d}.safetensors"


def save_weights(model, path: Path, step: int) -> None:
    """Write ``model``'s state dict (fp32, the keys of ``save_pretrained``) to ``path`` as safetensors.

    Reads the weights only: no random number is drawn, so the training run is unchanged by it.
    """
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(torch.float32).contiguous().clone() for k, v in model.state_dict().items()}
    save_file(tensors, str(path), metadata={"format": "pt", "step": str(step)})


def build_tokenizer():
    """Word-level tokenizer over :func:`vocabulary` as a standard HF ``PreTrainedTokenizerFast``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL + vocabulary())}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])])
    tk.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with single spaces
    return PreTrainedTokenizerFast(
        tokenizer_object=tk, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )


def token_stream(tokenizer, stories: list[str]) -> torch.Tensor:
    """``<bos> story <eos>`` for every story, concatenated into one long id stream."""
    ids: list[int] = []
    for s in stories:
        ids += tokenizer(s)["input_ids"] + [tokenizer.eos_token_id]
    return torch.tensor(ids, dtype=torch.long)


def make_config(tokenizer, hp: dict):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hp["hidden_size"], intermediate_size=hp["intermediate_size"],
        num_hidden_layers=hp["num_hidden_layers"], num_attention_heads=hp["num_attention_heads"],
        num_key_value_heads=hp["num_key_value_heads"], max_position_embeddings=hp["max_position_embeddings"],
        rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )


def train(out: Path, steps: int | None = None, progress: bool = True,
          checkpoint_steps: list[int] | None = None) -> dict:
    """Train and save the checkpoint into ``out``; returns the training log.

    ``checkpoint_steps`` (default ``HPARAMS["checkpoint_steps"]``): the steps whose weights are also written
    to ``out / "steps"`` (:func:`step_file`); they change nothing else.
    """
    import transformers
    from transformers import LlamaForCausalLM

    hp = dict(HPARAMS)
    if steps is not None:
        hp["steps"] = steps
    if checkpoint_steps is not None:
        hp["checkpoint_steps"] = sorted(checkpoint_steps)
    torch.set_num_threads(hp["threads"])
    torch.use_deterministic_algorithms(True)
    tok = build_tokenizer()
    train_ids = token_stream(tok, generate_corpus(hp["n_train_stories"], hp["corpus_seed"]))
    held = generate_corpus(hp["n_heldout_stories"], hp["heldout_seed"])
    config = make_config(tok, hp)
    torch.manual_seed(hp["torch_seed"])
    model = LlamaForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=hp["lr"], betas=(0.9, 0.95), weight_decay=hp["weight_decay"])

    def lr_at(step: int) -> float:
        if step < hp["warmup"]:
            return hp["lr"] * (step + 1) / hp["warmup"]
        frac = (step - hp["warmup"]) / max(1, hp["steps"] - hp["warmup"])
        return hp["lr"] * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))

    gen = torch.Generator().manual_seed(hp["torch_seed"])
    n_win = (len(train_ids) - 1) // hp["seq_len"]
    windows = train_ids[: n_win * hp["seq_len"]].view(n_win, hp["seq_len"])
    log_steps, log_loss = [], []
    t0 = time.time()
    model.train()
    for step in range(hp["steps"]):
        if step in hp["checkpoint_steps"]:  # weights after `step` updates (step 0: the seeded initialization)
            save_weights(model, out / STEPS_DIR / step_file(step), step)
        idx = torch.randint(n_win, (hp["batch_size"],), generator=gen)
        batch = windows[idx]
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % hp["log_every"] == 0 or step == hp["steps"] - 1:
            log_steps.append(step)
            log_loss.append(float(loss))
            if progress:
                print(f"step {step:5d}  loss {float(loss):.4f}  ({time.time() - t0:.0f} s)", flush=True)
    if hp["steps"] in hp["checkpoint_steps"]:  # the final weights too, in the same format as the others
        save_weights(model, out / STEPS_DIR / step_file(hp["steps"]), hp["steps"])
    model.eval()
    from lib.models.decoder.lm import heldout_loss

    held_loss = heldout_loss(model, tok, held)
    torch.manual_seed(hp["torch_seed"])
    held_loss_init = heldout_loss(LlamaForCausalLM(config).eval(), tok, held)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    log = {
        "description": "book-decoder: Llama-style decoder trained by python -m lib.models.decoder.train",
        "hparams": hp,
        "n_parameters": sum(p.numel() for p in model.parameters()),
        "n_train_tokens_available": len(train_ids),
        "steps": log_steps,
        "loss": log_loss,
        "heldout_loss": held_loss,
        "heldout_loss_random_init": held_loss_init,
        "uniform_loss": math.log(len(tok)),
        "train_seconds": time.time() - t0,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "numpy": np.__version__, "python": platform.python_version()},
        "corpus": "synthetic English-like language of lib.models.decoder.language (project-owned grammar, no third-party text)",
    }
    with open(out / "training_log.json", "w", encoding="utf-8") as fh:
        json.dump(log, fh, indent=1)
    return log


def main() -> None:
    from lib.models.decoder.lm import CHECKPOINT

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=CHECKPOINT)
    ap.add_argument("--steps", type=int, default=None)
    args = ap.parse_args()
    log = train(args.out, args.steps)
    print(f"held-out loss {log['heldout_loss']:.4f} nats/token (random init {log['heldout_loss_random_init']:.4f}, "
          f"uniform {log['uniform_loss']:.4f}); saved to {args.out}")


if __name__ == "__main__":
    main()
