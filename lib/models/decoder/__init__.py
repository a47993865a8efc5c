"""The book's own small decoder ("book-decoder"): a Llama-style model trained by the project.

* :func:`checkpoint_dir` is the committed checkpoint folder (``config.json``, ``model.safetensors``,
  tokenizer files, ``training_log.json``); ``lib.load_model("book-decoder")`` resolves to it.
* :func:`load_lm` loads the causal LM (with its head) and tokenizer, for text output and losses.
* :func:`generate` continues a prompt greedily (or by sampling with a seed).
* :mod:`lib.models.decoder.language` generates the synthetic English-like corpus and the chapter prompts.
* ``python -m lib.models.decoder.train`` reproduces the checkpoint (see :mod:`lib.models.decoder.train`) and saves
  the weights at a handful of training steps; :mod:`lib.models.decoder.steps` loads those.
"""

from lib.models.decoder.lm import CHECKPOINT, checkpoint_dir, generate, heldout_loss, load_lm, training_log

__all__ = ["CHECKPOINT", "checkpoint_dir", "generate", "heldout_loss", "load_lm", "training_log"]
