"""The book decoder's saved training steps: its weights after a handful of updates of one seeded run.

``python -m lib.models.decoder.train`` writes ``steps/step_NNNN.safetensors``: the causal LM's state dict (fp32,
the keys of ``save_pretrained``) after NNNN optimizer updates, for NNNN in ``HPARAMS["checkpoint_steps"]``
(step 0 is the seeded initialization itself, the final step the run's final weights). Writing them draws no
random number, so the run is the same with or without them.

The committed series (``checkpoint/steps``, with that run's ``training_log.json``) comes from one rerun of the
script on another machine than the committed ``model.safetensors``: same seeds, torch version and thread
count, but other float rounding (the logged losses first differ at step 30, by about 1e-5), so its later steps
and its final weights are a sibling of the committed model, not its history (``checkpoint/steps/README.md``).

* :func:`saved_steps`: the steps that can be loaded, ascending;
* :func:`load_step`: the weights at one of them as the :class:`lib.models.SpectralModel` every chapter uses
  (the committed checkpoint's config and tokenizer, these weights);
* :func:`steps_log`: the training log of the run that wrote them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from lib.errors import CheckpointError, ModelNotAvailableError
from lib.models.decoder.lm import checkpoint_dir
from lib.models.decoder.train import STEPS_DIR, step_file
from lib.models.spectral_model import SpectralModel

__all__ = ["load_step", "saved_steps", "step_path", "steps_dir", "steps_log"]

_STEP_FILE = re.compile(r"step_(\d{4,})\.safetensors")


def steps_dir() -> Path:
    """The folder of the saved steps (``checkpoint/steps``)."""
    return checkpoint_dir() / STEPS_DIR


def step_path(step: int) -> Path:
    """The file of the weights after ``step`` updates (``steps/step_0025.safetensors``); it may not exist."""
    return steps_dir() / step_file(step)


def steps_log() -> dict:
    """The training log of the run that wrote the saved steps (hyper-parameters, versions, loss curve)."""
    with open(steps_dir() / "training_log.json", encoding="utf-8") as fh:
        return json.load(fh)


def saved_steps() -> list[int]:
    """Every step whose weights are saved, ascending."""
    return sorted(int(m.group(1)) for p in steps_dir().glob("step_*.safetensors")
                  if (m := _STEP_FILE.fullmatch(p.name)))


def load_step(step: int, *, device: str | torch.device = "cpu", into: SpectralModel | None = None) -> SpectralModel:
    """The book decoder with its weights after ``step`` training updates of the saved run, as a
    :class:`SpectralModel`.

    The file ``steps/step_NNNN.safetensors`` is read strictly into the committed checkpoint's architecture
    (every weight of the transformer must be in it; the LM head is not needed). The model's ``name`` says the
    step (``"book-decoder, step 25 of 1200"``). ``into``: a model of :func:`load_step` (or the book decoder) whose
    weights are replaced in place and which is returned, so that a run over steps loads the checkpoint once.

    Raises:
        ModelNotAvailableError: no file for ``step`` (the message lists the saved steps).
        CheckpointError: the file lacks a weight of the transformer or holds one it does not have.
    """
    from safetensors.torch import load_file

    from lib.models.loading import load_model

    steps = saved_steps()
    if step not in steps:
        raise ModelNotAvailableError(
            f"No saved weights of the book decoder at step {step}; saved: {steps}. Other steps need a rerun of "
            "`python -m lib.models.decoder.train` with them in HPARAMS['checkpoint_steps']."
        )
    model = load_model("book-decoder", device=device) if into is None else into
    tensors = load_file(str(step_path(step)))
    prefix = "model."
    base = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
    try:
        model.base.load_state_dict(base, strict=True)
    except RuntimeError as exc:
        raise CheckpointError(f"{step_path(step)} does not hold the book decoder's weights: {exc}") from exc
    model.name = f"book-decoder, step {step} of {steps[-1]}"
    return model
