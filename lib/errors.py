"""Errors that ``lib`` raises on bad input, each with a message that says what to do next."""

from __future__ import annotations


class SpectralBookError(Exception):
    """Base class of every error that ``lib`` raises on purpose."""


class UnsupportedModelError(SpectralBookError, ValueError):
    """The checkpoint's architecture is not one of the supported families."""


class ModelNotAvailableError(SpectralBookError, OSError):
    """The model cannot be found or fetched: unknown id, no network, gated, not cached."""


class CheckpointError(SpectralBookError, OSError):
    """A local checkpoint is missing its weights, or its weight file is corrupt or truncated."""


class UnsafeCheckpointError(SpectralBookError, PermissionError):
    """The checkpoint would need pickle (``.bin``/``.pt``) or remote code, which is refused by default."""


class ModelTooLargeError(SpectralBookError, MemoryError):
    """The weights (or a computation) would not fit in the available memory."""


class InputError(SpectralBookError, ValueError):
    """An argument has the wrong shape, size or value (non-square matrix, NaN, empty list, a device this machine
    lacks, a steering edit that would make a weight infinite, …)."""


class LayerIndexError(SpectralBookError, IndexError):
    """A layer index outside ``0..L-1`` (or ``-L..-1``)."""


class InputTypeError(SpectralBookError, TypeError):
    """An argument of the wrong type (a layer index that is not an int, a text that is not a str)."""


class RealModelRunError(SpectralBookError, RuntimeError):
    """With the real-model switch on, one of the paper's checkpoints could not be loaded or analysed.

    Raised (not printed) so that a publishing build stops instead of publishing a page without it.
    """


class ReportError(SpectralBookError, RuntimeError):
    """``make report`` (``tools.report``): a part of the report could not analyse the model; the message names the
    part, the error it raised and where the notebook as far as it ran was kept."""
