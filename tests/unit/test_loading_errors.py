"""Bad input to lib.load_model: each case raises one clear error, quickly, and loads nothing."""

from __future__ import annotations

import json
import logging
import shutil
import time
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import lib
from lib.models import loading


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_unknown_id_offline_fails_fast_and_lists_aliases(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(lib.ModelNotAvailableError) as err:
        lib.load_model("no-such-org/no-such-model-xyz")
    assert time.perf_counter() - t0 < 10
    msg = str(err.value)
    assert "'minilm'" in msg and "SPECTRAL_BOOK_REAL_MODELS=1" in msg


def test_no_network_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(loading, "_network_reachable", lambda: False)
    with pytest.raises(lib.ModelNotAvailableError, match="no network"):
        lib.load_model("openai-community/gpt2")


def test_network_check_is_bounded_in_time(monkeypatch):
    """The real reachability probe answers within its timeout (here: no network, or a quick yes)."""
    t0 = time.perf_counter()
    loading._network_reachable()
    assert time.perf_counter() - t0 < loading._CONNECT_TIMEOUT_S + 2


def test_gated_and_unknown_repos_get_helpful_messages(monkeypatch):
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(loading, "_network_reachable", lambda: True)
    import huggingface_hub

    class FakeResponse:
        status_code = 403
        headers: dict = {}
        request = None

    def gated(*_a, **_k):
        raise GatedRepoError("gated", response=FakeResponse())

    monkeypatch.setattr(huggingface_hub, "snapshot_download", gated)
    with pytest.raises(lib.ModelNotAvailableError, match="licence"):
        lib.load_model("meta-llama/Llama-3.1-8B")

    def missing(*_a, **_k):
        raise RepositoryNotFoundError("missing", response=FakeResponse())

    monkeypatch.setattr(huggingface_hub, "snapshot_download", missing)
    with pytest.raises(lib.ModelNotAvailableError, match="Unknown model id"):
        lib.load_model("someone/typo-model")


def test_unsupported_architecture_is_refused_before_weights(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5", "d_model": 8}))
    with pytest.raises(lib.UnsupportedModelError) as err:
        lib.load_model(str(tmp_path))
    for fam in lib.SUPPORTED_FAMILIES:
        assert fam in str(err.value)


def test_directory_without_weights(tmp_path, tiny_dir):
    shutil.copy(tiny_dir("bert") / "config.json", tmp_path / "config.json")
    with pytest.raises(lib.CheckpointError, match="no weight files"):
        lib.load_model(str(tmp_path))
    # the architecture alone still loads
    assert lib.load_model(str(tmp_path), random_init=True).n_layers == 2


def test_not_a_checkpoint_path(tmp_path):
    with pytest.raises(lib.ModelNotAvailableError, match="not a checkpoint directory"):
        lib.load_model(str(tmp_path / "missing" / "dir"))
    with pytest.raises(lib.CheckpointError, match="config.json"):
        lib.load_model(str(tmp_path))
    with pytest.raises(lib.ModelNotAvailableError, match="non-empty"):
        lib.load_model("")


@pytest.mark.parametrize("typo, alias", [("minilmm", "minilm"), ("MiniLM", "minilm"), ("mini-lm", "minilm"),
                                         ("book_decoder", "book-decoder"), ("Book-Decoder", "book-decoder"),
                                         ("bookdecoder", "book-decoder"), ("all-MiniLM-L6-v2", "minilm")])
@pytest.mark.parametrize("hub", ["offline", "no network", "online"])
def test_a_misspelt_alias_names_the_alias_without_asking_the_hub(monkeypatch, typo, alias, hub):
    """Once sent to the hub and answered 'Cannot reach the model hub ... (no network?)'."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1" if hub == "offline" else "0")
    monkeypatch.setattr(loading, "_network_reachable", lambda: hub == "online")
    monkeypatch.setattr(loading, "_download", lambda *a: pytest.fail("a misspelt alias went to the hub"))
    with pytest.raises(lib.ModelNotAvailableError) as err:
        lib.load_model(typo)
    msg = str(err.value)
    assert f"did you mean '{alias}'?" in msg and "not an offline alias" in msg and "network" not in msg
    assert loading.close_alias(typo) == alias


@pytest.mark.parametrize("name", ["gpt2", "bert-base-uncased", "openai-community/gpt2", "someone/minilm",
                                  "EleutherAI/gpt-neo-125m", "decoder", "mini"])
def test_hub_ids_are_not_taken_for_misspelt_aliases(monkeypatch, name):
    """Names that are hub ids (legacy ones without an owner included) still go to the hub."""
    sent = []
    monkeypatch.setattr(loading, "_download", lambda repo_id, allow_pickle: sent.append(repo_id) or Path("/nowhere"))
    assert loading.resolve_source(name) == (Path("/nowhere"), name) and sent == [name]


def test_a_real_folder_wins_over_an_alias_lookalike(tmp_path, tiny_dir, monkeypatch):
    shutil.copytree(tiny_dir("bert"), tmp_path / "MiniLM")
    monkeypatch.chdir(tmp_path)
    assert lib.load_model("MiniLM").n_layers == 2
    (tmp_path / "minilmm").write_text("not a checkpoint")
    with pytest.raises(lib.ModelNotAvailableError, match="'minilmm' is a file, not a checkpoint directory"):
        lib.load_model("minilmm")


@pytest.mark.parametrize("name", ["./my_models/minilm", "~/no-such-folder-xyz/model", "my_models/minilm/v2",
                                  "my models/minilm", "x..y"])
def test_a_missing_path_is_neither_a_folder_nor_a_hub_id(monkeypatch, tmp_path, name):
    """Not a hub id by the hub's own rules: said at once, with where it was looked for as a folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(loading, "_download", lambda *a: pytest.fail("a path went to the hub"))
    with pytest.raises(lib.ModelNotAvailableError) as err:
        lib.load_model(name)
    msg = str(err.value)
    assert "not a checkpoint directory" in msg and "not a hub id" in msg and "'owner/name'" in msg
    assert f"nothing at {Path(name).expanduser().absolute()}" in msg


@pytest.mark.parametrize("hub, says", [("offline", "HF_HUB_OFFLINE=1"), ("no network", "no network")])
def test_a_missing_relative_folder_shaped_like_a_hub_id_says_both(monkeypatch, tmp_path, hub, says):
    """'my_models/minilm' could be a hub id (owner/name), so it goes to the hub; when the hub cannot answer,
    the message says that there is no such folder either, what hub ids look like, and the alias it resembles."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1" if hub == "offline" else "0")
    monkeypatch.setattr(loading, "_network_reachable", lambda: False)
    with pytest.raises(lib.ModelNotAvailableError) as err:
        lib.load_model("my_models/minilm")
    msg = str(err.value)
    assert f"not a folder (nothing at {tmp_path / 'my_models' / 'minilm'})" in msg.replace("neither a folder",
                                                                                          "not a folder")
    assert says in msg and "Did you mean the offline alias 'minilm'?" in msg
    assert hub == "offline" or "'owner/name'" in msg


def test_no_gpu_is_the_librarys_error_before_anything_loads(monkeypatch):
    """device='cuda' without CUDA once raised torch's raw AssertionError after loading the weights."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(loading, "resolve_source", lambda *a, **k: pytest.fail("loaded before checking the device"))
    for device in ("cuda", "cuda:0", torch.device("cuda")):
        with pytest.raises(lib.InputError, match="needs a CUDA GPU") as err:
            lib.load_model("book-decoder", device=device)
        assert "device='cpu'" in str(err.value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(lib.InputError, match=r"1 CUDA GPU\(s\), cuda:0..cuda:0"):
        lib.load_model("book-decoder", device="cuda:1")
    for bad in ("gpu", 3.5, None):
        with pytest.raises(lib.InputError, match="device must be"):
            lib.load_model("book-decoder", device=bad)


def test_a_device_torch_cannot_use_here_is_the_librarys_error(monkeypatch):
    """A device that passes the name check but that this torch build lacks (XPU here) is refused too."""
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        pytest.skip("this machine has an XPU")
    with pytest.raises(lib.InputError, match="Could not move book-decoder to device 'xpu'"):
        lib.load_model("book-decoder", device="xpu")


def test_pickle_refused_unless_opted_in(tmp_path, tiny_dir):
    src = tiny_dir("gpt2")
    dst = tmp_path / "pickled"
    dst.mkdir()
    shutil.copy(src / "config.json", dst / "config.json")
    torch.save(load_file(str(src / "model.safetensors")), dst / "pytorch_model.bin")
    with pytest.raises(lib.UnsafeCheckpointError, match="allow_pickle=True"):
        lib.load_model(str(dst))
    with pytest.warns(UserWarning, match="pickle"):
        m = lib.load_model(str(dst), allow_pickle=True)
    assert torch.allclose(m.layer_matrices(), lib.load_model(str(src)).layer_matrices())


def test_corrupt_safetensors(tmp_path, tiny_dir):
    dst = _copy(tiny_dir("llama"), tmp_path / "corrupt")
    w = dst / "model.safetensors"
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    with pytest.raises(lib.CheckpointError, match="corrupt or truncated"):
        lib.load_model(str(dst))


def test_model_too_big_is_refused_with_estimate(tiny_dir):
    with pytest.raises(lib.ModelTooLargeError) as err:
        lib.load_model(str(tiny_dir("llama")), max_memory_bytes=1000)
    assert "GiB" in str(err.value) and "bfloat16" in str(err.value)


def test_estimate_matches_real_parameter_count(tiny_dir):
    m = lib.load_model(str(tiny_dir("gemma2")))
    n = sum(p.numel() for p in m.hf_model.parameters())
    assert loading.estimate_weight_bytes(m.config, torch.float32) == 4 * n
    assert loading.estimate_weight_bytes(m.config, torch.bfloat16) == 2 * n


def test_long_text_is_truncated_with_warning(minilm):
    text = "word " * 600
    with pytest.warns(UserWarning, match="truncated to the first 512"):
        (hs,) = minilm.hidden_states([text])
    assert hs.shape[1] == 512


@pytest.mark.parametrize("alias, n_words", [("minilm", 600), ("book-decoder", 200)])
def test_an_over_long_text_gets_one_warning_not_a_contradictory_second(alias, n_words):
    """transformers also logged 'Token indices sequence length is longer ... will result in indexing errors',
    which is not true once the book truncates the text (once per tokenizer, so the flag is reset here)."""
    model = lib.load_model(alias)
    assert n_words > model.max_length
    # transformers compares with the tokenizer's limit (unset, 1e30, for the decoder): make it the model's
    model.tokenizer.model_max_length = min(model.tokenizer.model_max_length, model.max_length)
    model.tokenizer.deprecation_warnings.pop("sequence-length-is-longer-than-the-specified-maximum", None)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("transformers").addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.encode("the sailor watches " * (n_words // 3))
    finally:
        logging.getLogger("transformers").removeHandler(handler)
    assert [str(w.message) for w in caught if "longer than" in str(w.message)] == [str(caught[0].message)]
    assert "truncated to the first" in str(caught[0].message)
    assert not [r.getMessage() for r in records if "longer than" in r.getMessage()]


def test_empty_and_wrong_texts(minilm):
    with pytest.raises(ValueError, match="empty"):
        minilm.hidden_states([])
    with pytest.raises(TypeError):
        minilm.hidden_states([3])


@pytest.mark.parametrize("name, want", [("float32", torch.float32), ("bfloat16", torch.bfloat16),
                                        ("torch.float64", torch.float64), (torch.float16, torch.float16)])
def test_a_parameters_cell_may_name_the_dtype(name, want):
    assert loading.check_dtype(name) is want


@pytest.mark.parametrize("bad", ["fp32", "int8", torch.int64, 32])
def test_an_unknown_dtype_is_refused_before_anything_loads(bad, monkeypatch):
    monkeypatch.setattr(loading, "resolve_source", lambda *a, **k: pytest.fail("read before the dtype check"))
    with pytest.raises(lib.InputError, match="dtype must be one of 'float32'"):
        lib.load_model("minilm", dtype=bad)


def test_a_dtype_name_loads_the_weights_in_that_dtype(tiny_dir):
    assert lib.load_model(str(tiny_dir("bert")), dtype="float64").hf_model.dtype == torch.float64
