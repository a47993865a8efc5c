"""Bad input to lib.load_model: each case raises one clear error, quickly, and loads nothing."""

from __future__ import annotations

import json
import shutil
import time

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


def test_empty_and_wrong_texts(minilm):
    with pytest.raises(ValueError, match="empty"):
        minilm.hidden_states([])
    with pytest.raises(TypeError):
        minilm.hidden_states([3])
