"""A model larger than one device, loaded sharded with Accelerate (``load_model(..., device_map=...)``).

On this CPU-only machine the split is host memory and disk: the budget (``max_memory``) forces the later
blocks out to an offload folder, where their weights are meta tensors until a forward pass (or
:meth:`SpectralModel.onloaded`) brings them in. Every per-layer result must equal the unsharded model's.
"""

from __future__ import annotations

import pytest
import torch
from accelerate.utils import compute_module_sizes

import lib
from lib.jacobians import sweep as sw

FAMILIES = ("llama", "gpt2", "bert", "olmo2", "gemma2")


def _split_map(model: lib.SpectralModel) -> dict[str, str]:
    """Block 0 and everything outside the blocks in host memory, every other block on disk."""
    names = {id(m): n for n, m in model.hf_model.named_modules()}
    blocks = {names[id(b)]: ("cpu" if i == 0 else "disk") for i, b in enumerate(model.blocks)}
    placed: dict[str, str] = {}

    def place(prefix: str, module: torch.nn.Module) -> None:
        for name, child in module.named_children():
            full = f"{prefix}{name}"
            if full in blocks:
                placed[full] = blocks[full]
            elif any(b.startswith(full + ".") for b in blocks):  # holds blocks: place its children one by one
                place(full + ".", child)
            else:
                placed[full] = "cpu"

    place("", model.hf_model)
    return placed


def test_auto_map_with_a_budget_splits_the_blocks(tiny_dir):
    folder = str(tiny_dir("llama"))
    size = compute_module_sizes(lib.load_model(folder).hf_model)[""]
    m = lib.load_model(folder, device_map="auto", max_memory={"cpu": int(0.7 * size)})
    placements = {m.device_map.get(f"layers.{t}") for t in range(m.n_layers)}
    assert placements == {"cpu", "disk"}, m.device_map
    assert m.blocks[-1].self_attn.q_proj.weight.device.type == "meta"  # offloaded until needed


@pytest.mark.parametrize("family", FAMILIES)
def test_sharded_model_gives_the_unsharded_results(tiny_dir, family):
    folder = str(tiny_dir(family))
    ref = lib.load_model(folder, dtype=torch.float64)
    m = lib.load_model(folder, dtype=torch.float64, device_map=_split_map(ref))
    assert "disk" in m.device_map.values()
    assert torch.equal(m.layer_matrices(), ref.layer_matrices())
    ids = torch.arange(1, 8) % ref.config.vocab_size
    H = ref.hidden_states_ids(ids)
    torch.testing.assert_close(m.hidden_states_ids(ids), H, rtol=0, atol=1e-12)
    X = H[:, -1:, :]  # (L + 1, 1, d): the last token entering every block
    for t in range(ref.n_layers):
        for method in ("closed", "autodiff"):
            torch.testing.assert_close(sw.layer_jacobians(m, t, X[t], method=method),
                                       sw.layer_jacobians(ref, t, X[t], method=method), rtol=0, atol=1e-12)
        torch.testing.assert_close(sw.in_context_jacobian(m, t, H[t]), sw.in_context_jacobian(ref, t, H[t]),
                                   rtol=0, atol=1e-12)
    assert m.blocks[-1] is not None and next(m.blocks[-1].parameters()).device.type == "meta"  # offloaded again


def test_random_init_twin_is_placed_the_same_way(tiny_dir):
    folder = str(tiny_dir("llama"))
    ref = lib.load_model(folder, random_init=True, seed=3)
    m = lib.load_model(folder, random_init=True, seed=3, device_map=_split_map(ref))
    assert "disk" in m.device_map.values()
    assert torch.equal(m.layer_matrices(), ref.layer_matrices())


def test_bad_sharding_arguments_get_the_librarys_error(tiny_dir):
    folder = str(tiny_dir("llama"))
    with pytest.raises(lib.InputError, match="device_map='auto'"):
        lib.load_model(folder, max_memory={"cpu": "1GiB"})
    with pytest.raises(lib.InputError, match="not both"):
        lib.load_model(folder, device="meta", device_map="auto")
    with pytest.raises(lib.InputError, match="device_map must be"):
        lib.load_model(folder, device_map=["cpu"])


def test_padded_batch_of_a_sharded_model(tiny_dir):
    """The padded batched pass (chapter 6) gathers block outputs from every device the model is spread over."""
    folder = str(tiny_dir("llama"))
    ref = lib.load_model(folder, dtype=torch.float64)
    m = lib.load_model(folder, dtype=torch.float64, device_map=_split_map(ref))
    ids = [torch.arange(1, 8) % ref.config.vocab_size, torch.arange(3, 7) % ref.config.vocab_size]
    for got, want in zip(m.hidden_states_padded(ids), ref.hidden_states_padded(ids)):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
