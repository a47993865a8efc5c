"""Memory estimates that refuse a computation up front instead of failing half-way."""

from __future__ import annotations

import psutil
import torch

from lib.errors import ModelTooLargeError

__all__ = ["available_bytes", "require"]

_SAFETY = 0.8


def available_bytes(device: torch.device | str = "cpu") -> int:
    """Memory a new allocation may use on ``device``: 80% of what is free now (RAM or GPU memory)."""
    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free * _SAFETY)
    return int(psutil.virtual_memory().available * _SAFETY)


def require(need: int, what: str, hint: str, *, device: torch.device | str = "cpu", budget: int | None = None) -> None:
    """Raise :class:`ModelTooLargeError` if ``need`` bytes exceed the budget (default: :func:`available_bytes`).

    Args:
        need: estimated bytes of the computation's result and working set.
        what: what would be computed, for the message.
        hint: the option that would fit (fewer prompts, a smaller batch, a GPU, …).
    """
    avail = available_bytes(device) if budget is None else budget
    if need > avail:
        raise ModelTooLargeError(
            f"{what} needs about {need / 2**30:.2f} GiB but only {avail / 2**30:.2f} GiB is available "
            f"on {torch.device(device)}. {hint}"
        )
