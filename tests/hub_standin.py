"""A loopback stand-in for the Hugging Face model hub, serving tiny checkpoints under real hub ids.

Point ``HF_ENDPOINT`` at :attr:`HubStandin.endpoint` (before ``huggingface_hub`` is imported: it reads
the variable once) and ``snapshot_download`` / ``lib.load_model(hub_id)`` fetch from it as from the
hub. It speaks the part of the protocol that ``huggingface_hub`` 2.x uses to download a model:

* ``GET /api/models/{id}[/revision/{rev}]``: the repo's info (``sha``, ``siblings``, ``gated``);
* ``GET /api/models/{id}/tree/{rev}``: the file list, with git blob ids and, for large files, LFS
  metadata (sha256, size);
* ``HEAD``/``GET /{id}/resolve/{rev}/{path}``: a small file answers itself (``ETag`` = its git blob id,
  ``X-Repo-Commit``, ``Content-Length``); an LFS file (``*.safetensors``, ``*.model``, ``*.bin``)
  answers ``302`` to a separate "CDN" origin with ``X-Linked-Etag`` (its sha256) and ``X-Linked-Size``,
  the way the hub hands large files to its storage;
* errors as the hub writes them: an unknown id is ``404`` with ``X-Error-Code: RepoNotFound``; a
  gated repo lists its files but answers ``401`` (no token) or ``403`` (a token without access) with
  ``X-Error-Code: GatedRepo`` for every file, and serves them to a token given access (``tokens``); an unknown
  revision or file is ``RevisionNotFound`` / ``EntryNotFound``.

Every request is logged (:attr:`HubStandin.log`), so a test can tell a download from a cache hit.
:func:`build_checkpoint` writes the tiny checkpoints: a random-initialised model of the family saved
from its pretraining class (as the hub's checkpoints are, so their weights carry the head and the
base-model prefix) with a tokenizer of the family's own class, trained on the book's prompts.
:data:`REAL_DECODERS` are the small real decoders the published site runs (chapters 4 and 6), each served as a tiny
checkpoint with its real config's shape features (:func:`build_checkpoint`).

Run ``python tests/hub_standin.py`` to serve the paper's ids by hand (it prints the ``HF_ENDPOINT`` to use).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = [
    "GATED_ID",
    "GEMMA_TOKEN",
    "MISSING_ID",
    "PAPER_FAMILIES",
    "REAL_DECODERS",
    "HubStandin",
    "Request",
    "build_checkpoint",
    "build_paper_checkpoints",
    "build_real_decoder_checkpoints",
]

PAPER_FAMILIES: dict[str, str] = {
    "albert/albert-base-v2": "albert",
    "albert/albert-large-v2": "albert",
    "albert/albert-xlarge-v2": "albert",
    "albert/albert-xxlarge-v2": "albert",
    "google-bert/bert-base-uncased": "bert",
    "openai-community/gpt2": "gpt2",
    "EleutherAI/gpt-neo-125m": "gpt_neo",
}
"""The papers' hub ids (``lib.models.paper.PAPER_MODELS``) and the family each checkpoint belongs to."""

REAL_DECODERS: dict[str, str] = {
    "HuggingFaceTB/SmolLM2-135M": "llama",
    "allenai/OLMo-2-0425-1B": "olmo2",
    "google/gemma-2-2b": "gemma2",
}
"""The small real decoders of the published site's chapters 4 and 6 and the family of each. Their stand-ins keep the real
configs' shape features at d = 32 (:func:`_config`): SmolLM2 ties its input and output embeddings and uses
grouped-query attention; OLMo-2 normalises queries and keys (QK-norm) and the sublayers' outputs; Gemma-2 ties its
embeddings, soft-caps the attention scores and the final logits, and alternates sliding-window and global layers.
Gemma-2 is gated on the hub, and so is its stand-in: only :data:`GEMMA_TOKEN` may fetch it."""

REAL_DECODER_FAMILIES = frozenset(REAL_DECODERS.values())
"""The families of :data:`REAL_DECODERS` (their stand-ins' vocabularies also learn the grammar's stories)."""

GEMMA_TOKEN = "hf_standin_gemma_access"
"""The token the stand-in gives access to ``google/gemma-2-2b`` (as a reader who accepted Gemma's licence)."""

GATED_ID = "meta-llama/Llama-3.2-1B"
"""A gated repo (as on the hub): its files are listed, but fetching one needs accepted access."""

MISSING_ID = "someone/no-such-model"
"""An id with no repository behind it."""

_LFS_SUFFIXES = (".safetensors", ".model", ".bin")


# -- checkpoints --------------------------------------------------------------------------------------
def _tokenizer(family: str):
    """A tokenizer of the family's own class, its vocabulary (2000 pieces) learned from the book's prompts (for the
    :data:`REAL_DECODERS`' families, with the decoder grammar's stories, which the published site runs on them).

    The prompts then split into about as many tokens as with the real vocabularies (mostly whole
    words), and any other text falls back to characters.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import AlbertTokenizer, BertTokenizer, GPT2Tokenizer

    from lib.models.decoder import language
    from lib.models.prompts import prompts

    corpus, size = prompts(), 2000
    if family in REAL_DECODER_FAMILIES:  # their real vocabularies hold the grammar's words too ("boat", chapter 6)
        corpus = corpus + language.prompts()
    if family == "bert":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.train_from_iterator(corpus, trainers.WordPieceTrainer(
            vocab_size=size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False))
        return BertTokenizer(vocab=tok.get_vocab())
    if family == "albert":
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.Lowercase()
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.train_from_iterator(corpus, trainers.UnigramTrainer(
            vocab_size=size, special_tokens=["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"], unk_token="<unk>",
            show_progress=False))
        return AlbertTokenizer(vocab=[(piece, score) for piece, score in json.loads(tok.to_str())["model"]["vocab"]])
    if family in ("gpt2", "gpt_neo", "llama", "olmo2", "gemma2"):  # SmolLM2 and OLMo-2 have byte-level BPEs too
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.train_from_iterator(corpus, trainers.BpeTrainer(
            vocab_size=size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<|endoftext|>"],
            show_progress=False))
        model = json.loads(tok.to_str())["model"]
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        return GPT2Tokenizer(vocab=model["vocab"], merges=merges)
    raise ValueError(f"no tiny tokenizer for family {family!r}")


def _config(family: str, vocab_size: int, eos: int | None):
    """A tiny config of ``family`` (d = 32); ``eos``: the decoders' end-of-text token. The decoders of
    :data:`REAL_DECODERS` have four layers, so Gemma-2's alternation of sliding-window and global layers repeats."""
    from transformers import (AlbertConfig, BertConfig, Gemma2Config, GPT2Config, GPTNeoConfig, LlamaConfig,
                              Olmo2Config)

    positions = 512
    decoder = dict(vocab_size=vocab_size, max_position_embeddings=positions, hidden_size=32, intermediate_size=64,
                   num_hidden_layers=4, num_attention_heads=4, bos_token_id=eos, eos_token_id=eos,
                   pad_token_id=eos)
    if family == "llama":  # SmolLM2: tied embeddings, grouped-query attention
        return LlamaConfig(**decoder, num_key_value_heads=2, tie_word_embeddings=True, rope_theta=100000.0)
    if family == "olmo2":  # QK-norm and output norms (the family's own), untied embeddings
        return Olmo2Config(**decoder, num_key_value_heads=4, tie_word_embeddings=False, rope_theta=500000.0)
    if family == "gemma2":  # soft-capping, sliding window on alternate layers, tied embeddings
        return Gemma2Config(**decoder, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
                            sliding_window=4, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                            tie_word_embeddings=True)
    if family == "bert":
        return BertConfig(vocab_size=vocab_size, max_position_embeddings=positions, hidden_size=32,
                          num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    if family == "albert":
        return AlbertConfig(vocab_size=vocab_size, max_position_embeddings=positions, embedding_size=16,
                            hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64)
    if family == "gpt2":
        return GPT2Config(vocab_size=vocab_size, n_positions=positions, n_embd=32, n_layer=2, n_head=4,
                          bos_token_id=eos, eos_token_id=eos)
    if family == "gpt_neo":
        return GPTNeoConfig(vocab_size=vocab_size, max_position_embeddings=positions, hidden_size=32, num_layers=2,
                            num_heads=4, attention_types=[[["global", "local"], 1]], window_size=4,
                            bos_token_id=eos, eos_token_id=eos)
    raise ValueError(f"no tiny config for family {family!r}")


def build_checkpoint(family: str, folder: Path, seed: int = 0) -> Path:
    """Save a tiny random-initialised checkpoint of ``family`` with its tokenizer in ``folder``.

    The model is saved from its pretraining class (ALBERT and BERT: masked LM, the decoders: causal LM), as the
    hub's checkpoints are; ALBERT keeps only ``tokenizer.json`` (its hub repos have no
    ``tokenizer_config.json``, so the tokenizer class comes from ``config.json``).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    tokenizer = _tokenizer(family)
    config = _config(family, vocab_size=len(tokenizer), eos=tokenizer.eos_token_id)
    torch.manual_seed(seed)
    head = AutoModelForMaskedLM if family in ("bert", "albert") else AutoModelForCausalLM
    folder.mkdir(parents=True, exist_ok=True)
    head.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if family == "albert":
        (folder / "tokenizer_config.json").unlink()
    return folder


def build_real_decoder_checkpoints(root: Path) -> dict[str, Path]:
    """One tiny checkpoint per id of :data:`REAL_DECODERS` (serve ``google/gemma-2-2b`` gated, with
    ``tokens=[GEMMA_TOKEN]``)."""
    return {hub_id: build_checkpoint(family, root / hub_id.replace("/", "--"), seed=seed)
            for seed, (hub_id, family) in enumerate(REAL_DECODERS.items())}


def build_paper_checkpoints(root: Path) -> dict[str, Path]:
    """One tiny checkpoint per paper id (:data:`PAPER_FAMILIES`) and a tiny gated one (:data:`GATED_ID`)."""
    repos = {}
    for seed, (hub_id, family) in enumerate({**PAPER_FAMILIES, GATED_ID: "gpt2"}.items()):
        repos[hub_id] = build_checkpoint(family, root / hub_id.replace("/", "--"), seed=seed)
    return repos


# -- the server ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    """One request the stand-in answered: method, path (query removed), status, and the repo it concerned."""

    method: str
    path: str
    status: int
    repo_id: str | None

    @property
    def is_file_download(self) -> bool:
        """A ``GET`` that sent a file's bytes (from the hub or from the CDN)."""
        return self.method == "GET" and self.status == 200 and ("/resolve/" in self.path or self.path.startswith("/cdn/"))


class _Repo:
    def __init__(self, repo_id: str, folder: Path, gated: bool) -> None:
        self.repo_id = repo_id
        self.gated = gated
        self.files: dict[str, bytes] = {
            p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
        }
        digest = hashlib.sha1(repo_id.encode())
        for path, data in self.files.items():
            digest.update(path.encode() + b"\0" + data)
        self.sha = digest.hexdigest()

    @staticmethod
    def blob_id(data: bytes) -> str:
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    @staticmethod
    def is_lfs(path: str) -> bool:
        return path.endswith(_LFS_SUFFIXES)

    def info(self) -> dict:
        return {"id": self.repo_id, "modelId": self.repo_id, "sha": self.sha, "private": False,
                "gated": "manual" if self.gated else False, "disabled": False, "tags": [],
                "siblings": [{"rfilename": p} for p in self.files]}

    def tree(self) -> list[dict]:
        entries = []
        for path, data in self.files.items():
            entry = {"type": "file", "path": path, "size": len(data), "oid": self.blob_id(data)}
            if self.is_lfs(path):
                pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{_sha256(data)}\nsize {len(data)}\n"
                entry["oid"] = self.blob_id(pointer.encode())
                entry["lfs"] = {"oid": _sha256(data), "size": len(data), "pointerSize": len(pointer)}
            entries.append(entry)
        return entries


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class HubStandin:
    """The stand-in hub on ``127.0.0.1`` (a free port), plus a "CDN" origin for LFS files.

    Args:
        repos: hub id -> folder whose files the repo serves (subfolders included).
        gated: ids among ``repos`` whose files need accepted access.
        tokens: tokens that were given access to every gated repo (sent as ``Authorization: Bearer <token>``).

    Use as a context manager (or :meth:`start` / :meth:`stop`); :attr:`endpoint` is the ``HF_ENDPOINT``.
    """

    def __init__(self, repos: Mapping[str, Path], gated: Collection[str] = (), tokens: Collection[str] = ()) -> None:
        self.repos = {rid: _Repo(rid, Path(folder), rid in gated) for rid, folder in repos.items()}
        self.authorized = {f"Bearer {t}" for t in tokens}
        self.blobs = {_sha256(data): data for r in self.repos.values() for p, data in r.files.items() if r.is_lfs(p)}
        self.log: list[Request] = []
        self._lock = threading.Lock()
        self._servers: list[ThreadingHTTPServer] = []

    # -- lifecycle --
    def start(self) -> HubStandin:
        handler = _handler_for(self)
        for _ in range(2):  # the hub, then the CDN
            server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self._servers.append(server)
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()

    def __enter__(self) -> HubStandin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``: the value for ``HF_ENDPOINT``."""
        return f"http://127.0.0.1:{self._servers[0].server_address[1]}"

    @property
    def cdn(self) -> str:
        return f"http://127.0.0.1:{self._servers[1].server_address[1]}"

    # -- what was asked --
    def record(self, request: Request) -> None:
        with self._lock:
            self.log.append(request)

    def file_downloads(self, since: int = 0) -> list[Request]:
        """Requests from ``log[since:]`` that sent a file's bytes."""
        with self._lock:
            return [r for r in self.log[since:] if r.is_file_download]


def _handler_for(hub: HubStandin) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet: the test reads hub.log instead
            pass

        def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
            self._route(head=True)

        def do_GET(self) -> None:  # noqa: N802
            self._route(head=False)

        # -- answers --
        def _send(self, status: int, body: bytes = b"", headers: Mapping[str, str] | None = None,
                  head: bool = False, repo_id: str | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)
            hub.record(Request(self.command, urlsplit(self.path).path, status, repo_id))

        def _json(self, data: object, head: bool, repo_id: str) -> None:
            self._send(200, json.dumps(data).encode(), {"Content-Type": "application/json"}, head, repo_id)

        def _error(self, status: int, code: str, message: str, head: bool, repo_id: str | None,
                   extra: Mapping[str, str] | None = None) -> None:
            body = json.dumps({"error": message}).encode()
            headers = {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message,
                       **(extra or {})}
            self._send(status, body, headers, head, repo_id)

        # -- routing --
        def _route(self, head: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            if self.server is hub._servers[-1]:  # the CDN: blobs by sha256
                data = hub.blobs.get(path.removeprefix("/cdn/"))
                if data is None:
                    return self._send(404, b"NoSuchKey", head=head)
                return self._send(200, data, {"Content-Type": "application/octet-stream", "ETag": '"cdn"'}, head)
            if path.startswith("/api/models/"):
                return self._api(path.removeprefix("/api/models/"), head)
            parts = path.strip("/").split("/")
            if len(parts) >= 5 and parts[2] == "resolve":
                return self._resolve("/".join(parts[:2]), parts[3], "/".join(parts[4:]), head)
            self._send(404, b"Not Found", head=head)

        def _repo(self, repo_id: str, head: bool) -> _Repo | None:
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(404, "RepoNotFound", "Repository not found", head, repo_id)
            return repo

        def _revision_ok(self, repo: _Repo, revision: str, head: bool) -> bool:
            if revision in ("main", repo.sha):
                return True
            self._error(404, "RevisionNotFound", "Invalid rev id: " + revision, head, repo.repo_id)
            return False

        def _api(self, rest: str, head: bool) -> None:
            owner, name, *tail = rest.split("/")
            repo = self._repo(f"{owner}/{name}", head)
            if repo is None:
                return
            if not tail or tail[0] == "revision":
                if tail and not self._revision_ok(repo, "/".join(tail[1:]), head):
                    return
                return self._json(repo.info(), head, repo.repo_id)
            if tail[0] == "tree" and len(tail) >= 2:
                if self._revision_ok(repo, tail[1], head):
                    self._json(repo.tree(), head, repo.repo_id)
                return
            self._send(404, b"Not Found", head=head, repo_id=repo.repo_id)

        def _resolve(self, repo_id: str, revision: str, filename: str, head: bool) -> None:
            repo = self._repo(repo_id, head)
            if repo is None or not self._revision_ok(repo, revision, head):
                return
            commit = {"X-Repo-Commit": repo.sha}
            if repo.gated and self.headers.get("Authorization") not in hub.authorized:
                if self.headers.get("Authorization"):
                    status, message = 403, (f"Access to model {repo_id} is restricted and you are not in the "
                                            f"authorized list. Visit {hub.endpoint}/{repo_id} to ask for access.")
                else:
                    status, message = 401, (f"Access to model {repo_id} is restricted. You must have access to it "
                                            "and be authenticated to access it. Please log in.")
                return self._error(status, "GatedRepo", message, head, repo_id, commit)
            data = repo.files.get(filename)
            if data is None:
                return self._error(404, "EntryNotFound", f"{filename} does not exist on \"{revision}\"", head,
                                   repo_id, commit)
            if repo.is_lfs(filename):
                sha = _sha256(data)
                headers = {**commit, "Location": f"{hub.cdn}/cdn/{sha}", "X-Linked-Etag": f'"{sha}"',
                           "X-Linked-Size": str(len(data)), "ETag": f'"{repo.blob_id(data)}"'}
                return self._send(302, b"", headers, head, repo_id)
            headers = {**commit, "ETag": f'"{repo.blob_id(data)}"', "Content-Type": "application/octet-stream"}
            self._send(200, data, headers, head, repo_id)

    return Handler


if __name__ == "__main__":  # serve the paper's ids by hand
    import tempfile
    import time

    root = Path(tempfile.mkdtemp(prefix="hub-standin-"))
    with HubStandin(build_paper_checkpoints(root), gated=[GATED_ID]) as standin:
        print(f"HF_ENDPOINT={standin.endpoint}  (checkpoints in {root}; Ctrl-C stops)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
