"""A model and its random-init twins, as one object: the book's unit of comparison.

Every claim about trained weights is checked against the same architecture with fresh seeded weights.
:class:`Twins` carries the model's name, its kind (encoder or decoder) and the twins' seeds, so chapters
take names and groups from data instead of parsing labels such as ``"all-MiniLM-L6-v2 (random init,
seed 1)"``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lib.errors import InputError
from lib.models.spectral_model import SpectralModel

__all__ = ["Twins", "load_twins", "series_label"]


def series_label(model: SpectralModel) -> str:
    """``"trained"`` or ``"random init, seed s"``: a model's series in a chart legend and its table cells."""
    return f"random init, seed {model.seed}" if model.random_init else "trained"


@dataclass(frozen=True)
class Twins:
    """A trained model and its random-init twins (same config, weights from ``torch.manual_seed(seed)``).

    Attributes:
        trained: the trained :class:`SpectralModel`. twins: one per seed, in the order of ``seeds``.
        seeds: the twins' seeds. source: what :func:`lib.load_model` was given (alias, folder or hub id).

    Example:
        >>> import lib
        >>> pair = lib.load_twins("book-decoder", seeds=(1, 2))
        >>> pair.name, pair.kind, pair.seeds, len(pair)
        ('book-decoder', 'decoder', (1, 2), 3)
        >>> [m.label for m in pair]
        ['book-decoder (trained)', 'book-decoder (random init, seed 1)', 'book-decoder (random init, seed 2)']
        >>> pair.series(pair.twins[0])
        'random init, seed 1'
    """

    trained: SpectralModel
    twins: tuple[SpectralModel, ...]
    seeds: tuple[int, ...]
    source: str

    @property
    def name(self) -> str:
        """The model's name without its training state (``"all-MiniLM-L6-v2"``)."""
        return self.trained.name

    @property
    def kind(self) -> Literal["encoder", "decoder"]:
        """``"decoder"`` when attention is causal, else ``"encoder"``."""
        return "decoder" if self.trained.layer(0).attention.causal else "encoder"

    @property
    def models(self) -> tuple[SpectralModel, ...]:
        """The trained model first, then the twins."""
        return (self.trained, *self.twins)

    def __iter__(self) -> Iterator[SpectralModel]:
        return iter(self.models)

    def __len__(self) -> int:
        return len(self.models)

    def series(self, model: SpectralModel) -> str:
        """The short series label of one of the models: ``"trained"`` or ``"random init, seed s"``."""
        if model is self.trained or model in self.twins:
            return series_label(model)
        raise InputError(f"{model.label} is not one of {self.name}'s models")

    def __repr__(self) -> str:
        return f"Twins({self.name}, {self.kind}: trained + random init seeds {list(self.seeds)})"


def load_twins(source: str, seeds: Sequence[int] = (1, 2, 3), **kwargs: Any) -> Twins:
    """Load ``source`` trained and once per seed with random initialization (:func:`lib.load_model`'s
    ``random_init=True``); ``kwargs`` go to every load (``dtype``, ``device``, ...).

    Raises:
        InputError: ``seeds`` empty, not ints, or repeated. Whatever :func:`lib.load_model` raises.
    """
    from lib.models.loading import load_model

    seeds = tuple(seeds)
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise InputError(f"seeds must be a non-empty sequence of ints, not {seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise InputError(f"seeds repeat: {seeds!r} (each twin needs its own seed)")
    trained = load_model(source, **kwargs)
    twins = tuple(load_model(source, random_init=True, seed=s, **kwargs) for s in seeds)
    return Twins(trained, twins, seeds, source)
