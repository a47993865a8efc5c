"""Steering by a rank-1 edit of one layer's output matrix (chapter 5 of the book), and its baseline.

The paper's claim [paper]: adding a large enough rank-1 perturbation to the **output matrix of the
last layer** opens a large spectral gap, so that a chosen direction ``u`` becomes the principal
eigenvector of ``F_L = O_L V_L`` and the tokens align with it. The formulas below are **our
reconstruction** [ours]; the paper's exact ``w``, ``α`` and evaluation are unknown.

The edit (column convention, ``y = W x``)::

    O_L ← O_L + α u wᵀ,    w ∈ R^{H·d_h},    F_L' = F_L + α u zᵀ,    z = V_Lᵀ w,    c = zᵀ u

* ``V_L`` is the value matrix with key/value heads **expanded** (``H·d_h × d``): the real output
  projection acts on the ``H·d_h`` concatenated head outputs, and head ``h`` reads KV head
  ``h // (H / n_kv)``.
* **Choice of w** (:func:`choose_w`) [ours]:

  - ``V_L`` square and well conditioned (``σ_min/σ_max > 1e-8``): ``w = V_L^{-T} u`` by a linear
    solve, so ``z = u``, ``c = 1`` and ``F_L' = F_L + α u uᵀ`` exactly;
  - otherwise (**documented fallback**: ``V_L`` not square, or singular): the minimum-norm
    least-squares solution of ``V_Lᵀ w = u``, i.e. ``w = pinv(V_L)ᵀ u``. Then ``z`` is the
    projection of ``u`` on the row space of ``V_L`` and ``c = ‖z‖²``; ``z = u`` only when ``V_L``
    has full column rank ``d``. With grouped-query attention it cannot: the expanded ``V_L`` repeats
    each KV head's block, so ``rank V_L ≤ n_kv·d_h``, below ``d`` for the book decoder (64 < 128)
    and for every Gemma-2 (2B: 1024 < 2304; 9B: 2048 < 3584; 27B: 2048 < 4608), whatever ``H·d_h``
    (9B: 4096 > 3584). ``F_L' u = F_L u + α c u`` for any ``w`` with ``c ≠ 0``.

    The minimum norm matters beyond ``F_L``: a ``w`` shifted along the null space of ``V_Lᵀ``
    leaves ``z`` and ``F_L'`` unchanged but changes ``wᵀ o_i`` (``o_i`` the concatenated head
    outputs, whose heads attend differently), hence the real layer's output.

* **α** is absolute, or, with ``relative=True``, in units of the spectral radius: ``α|c| =
  alpha · |λ_1(F_L)|`` (so ``alpha = 10`` is the book's default whatever ``c`` is).

Measurements (:func:`spectral_report`, :func:`simplified_alignment`, :func:`real_alignment`,
:func:`target_report`, :func:`nearest_tokens`) and the **activation-addition baseline**
(:func:`activation_addition`: add ``s·u`` to the same module's output, every token, with ``s``
matched to the mean norm of the eigen-edit's change, :func:`matched_strength`) are here too. The lab
(:mod:`lib.chapters.steering_lab`) puts them together.

**Control: editing V instead of O** (``matrix="V"``, a control of chapter 5) [ours, a variant]::

    V_L ← V_L + α b uᵀ,    b ∈ R^{n_kv·d_h},    F_L' = F_L + α y uᵀ,    y = O_grp b,    c = uᵀ y

``V_L`` is here the checkpoint's own (unexpanded) value weight and ``O_grp`` (``d × n_kv·d_h``)
sums the output columns of the query heads that share a KV head, so that ``F_L = O_grp V_L``. ``b``
solves ``O_grp b = u`` (:func:`choose_w` on ``O_grpᵀ``; the minimum-norm fallback again when
``O_grp`` is not square and invertible). With multi-head attention both edits give the same
``F_L' = F_L + α u uᵀ``; with grouped-query attention ``y`` is only the projection of ``u`` on the
column space of ``O_grp``, and since the principal eigenvector of ``F_L + α y uᵀ`` is
``(λ' I − F_L)^{-1} y``, a V-edit steers toward ``y``, not ``u``.

**ALBERT**: its layers share one module, so "the last layer's ``O``" is every layer's ``O``.
:func:`steer` refuses it unless ``allow_shared=True``, in which case it edits the shared module and
therefore every layer (``model.layer_matrices()`` then shows ``F'`` at every depth).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from torch import nn

from lib.errors import InputError, InputTypeError
from lib.linalg import spectra
from lib.theory import dynamics

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = [
    "ALPHA_SWEEP",
    "GEMMA2_ATTENTION",
    "MATRICES",
    "Matrix",
    "Space",
    "Direction",
    "SteeringEdit",
    "activation_addition",
    "as_direction",
    "choose_w",
    "concept_direction",
    "difference_direction",
    "grouped_output",
    "head_outputs",
    "matched_strength",
    "maybe_steer",
    "nearest_tokens",
    "unit_embeddings",
    "prepare_edit",
    "projection_outputs",
    "measured_change",
    "sign_agreement",
    "random_direction",
    "real_alignment",
    "simplified_alignment",
    "spectral_report",
    "steer",
    "target_report",
    "v_edit_anatomy",
    "word_direction",
]

ALPHA_SWEEP: tuple[float, ...] = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
"""The sweep of ``α|c| / |λ_1(F_L)|`` of chapter 5 (0 means: no edit)."""

GEMMA2_ATTENTION: dict[str, tuple[int, int, int, int]] = {
    "Gemma-2-2B": (2304, 8, 4, 256),
    "Gemma-2-9B": (3584, 16, 8, 256),
    "Gemma-2-27B": (4608, 32, 16, 128),
}
"""``(d, H, n_kv, d_h)`` of the Gemma-2 checkpoints' configs (``hidden_size``, ``num_attention_heads``,
``num_key_value_heads``, ``head_dim``): the expanded ``V_L`` has rank at most ``n_kv·d_h < d`` in each."""

Matrix = Literal["O", "V"]
"""Which matrix an edit changes: the output matrix (the paper's edit) or the value matrix (the control)."""
Space = Literal["auto", "input", "output"]
"""Where a word's direction is read: input embeddings, the unembedding, or whichever the model has."""
MATRICES: tuple[Matrix, ...] = ("O", "V")
"""Which weight :func:`steer` edits: the output matrix (the paper's edit) or the value matrix (a control)."""

SOLVE_RCOND = 1e-8
"""``V_L`` counts as invertible when it is square and ``σ_min/σ_max`` exceeds this."""


class _WithOnly(contextlib.AbstractContextManager):
    """An edit's context manager that warns when it is dropped without ever being entered: a call of
    :func:`steer` without ``with`` edits nothing, which would otherwise pass in silence."""

    def __init__(self, cm: contextlib.AbstractContextManager, name: str):
        self._cm, self._name, self._entered = cm, name, False

    def __enter__(self) -> Any:
        self._entered = True
        return self._cm.__enter__()

    def __exit__(self, *exc: Any) -> bool | None:
        return self._cm.__exit__(*exc)

    def __del__(self) -> None:
        if not self._entered:
            warnings.warn(f"{self._name}(...) was called without `with`, so nothing was edited; write "
                          f"`with {self._name}(model, ...) as edit:`", RuntimeWarning, stacklevel=2)


def _with_only(fn: Callable[..., Iterator[Any]]) -> Callable[..., _WithOnly]:
    """``contextlib.contextmanager(fn)`` whose context manager warns if it is never entered (:class:`_WithOnly`)."""
    manager = contextlib.contextmanager(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> _WithOnly:
        return _WithOnly(manager(*args, **kwargs), fn.__name__)

    return wrapper


def _target(model: SpectralModel, direction: Any) -> Direction:
    """The unit target of an edit: a :class:`Direction`, any vector of length ``d``, or one vocabulary word
    (:func:`word_direction`)."""
    if isinstance(direction, str):
        return word_direction(model, direction)
    return as_direction(direction, model.d_model)


# -- directions ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Direction:
    """A steering target: a unit vector ``u`` (float64, ``(d,)``) and how it was made.

    Attributes:
        vector: unit float64 ``(d,)``.
        label: short name for figures (``"word: sea"``, ``"concept: sea − rest"``, ``"random (seed 0)"``).
        kind: ``"word"``, ``"difference"``, ``"concept"``, ``"random"`` or ``"vector"``.
        token_id: the target token for word directions (used by :func:`target_report`), else ``None``.
    """

    vector: np.ndarray
    label: str
    kind: str = "vector"
    token_id: int | None = None

    def __repr__(self) -> str:
        tok = "" if self.token_id is None else f", token_id={self.token_id}"
        return f"Direction({self.label!r}, kind={self.kind!r}, d={self.vector.shape[0]}{tok})"


def _short(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def as_direction(direction: Any, d: int | None = None, label: str = "vector") -> Direction:
    """Validate and normalize a direction: a :class:`Direction`, or any vector (NumPy, torch, list).

    Raises:
        InputError: a word (use :func:`word_direction`), wrong shape, complex or non-finite entries, or the
            zero vector. InputTypeError: something that is not a vector of numbers (a dict, a list of words).
    """
    if isinstance(direction, str):
        raise InputError(f"{direction!r} is a word, not a vector: make its direction with "
                         f"word_direction(model, {direction!r}) (steer and activation_addition accept the word itself)")
    if isinstance(direction, Direction):
        vec, label, kind, tok = direction.vector, direction.label, direction.kind, direction.token_id
    else:
        vec, kind, tok = direction, "vector", None
    try:
        u = spectra.as_float64(vec)
    except (TypeError, ValueError) as exc:  # a dict, a list of words, a ragged list
        raise InputTypeError(
            f"a direction must be a vector of d numbers (NumPy array, torch tensor or list), a Direction, or one "
            f"vocabulary word; got {type(vec).__name__} {_short(vec)}. For several words, build one direction with "
            "difference_direction(model, a, b) or concept_direction(model, prompts)"
        ) from exc
    if np.iscomplexobj(u):
        raise InputError("a direction must be real; got complex entries (for a complex eigenvector take its real "
                         "and imaginary parts as two directions)")
    if u.ndim != 1:
        raise InputError(f"a direction must be one vector of shape (d,), got shape {u.shape}")
    if d is not None and u.shape[0] != d:
        raise InputError(f"the direction has {u.shape[0]} entries but the model has d = {d}")
    if not np.all(np.isfinite(u)):
        raise InputError("the direction contains NaN or infinite entries")
    norm = float(np.linalg.norm(u))
    if norm == 0.0:
        raise InputError("the direction is the zero vector; steering needs a nonzero direction u")
    return Direction(u / norm, label, kind, tok)


def _vocab(model: SpectralModel) -> dict[str, int]:
    if model.tokenizer is None:
        raise InputError(f"{model.label} has no tokenizer, so words cannot be looked up; pass a vector instead")
    return model.tokenizer.get_vocab()


def _token_id(model: SpectralModel, word: str) -> int:
    """The id of ``word`` as one token of the model's vocabulary, or an error naming close matches."""
    if not isinstance(word, str) or not word.strip():
        raise InputError(f"a word must be a non-empty string, got {word!r}")
    vocab = _vocab(model)
    for cand in (word, word.lower(), "Ġ" + word, "▁" + word):
        if cand in vocab:
            return int(vocab[cand])
    pieces = model.tokenizer.tokenize(word)
    words = [w for w in vocab if w.isalpha()]
    close = difflib.get_close_matches(word.lower(), words, n=5, cutoff=0.6)
    split = f" (the tokenizer splits it into {pieces})" if len(pieces) > 1 else ""
    hint = f"close matches: {', '.join(close)}" if close else "no close match; try a more common word"
    raise InputError(f"'{word}' is not a single token of {model.label}'s vocabulary{split}; {hint}.")


def _input_embeddings(model: SpectralModel) -> torch.Tensor:
    return model.hf_model.get_input_embeddings().weight


def _output_embeddings(model: SpectralModel) -> torch.Tensor | None:
    head = model.hf_model.get_output_embeddings() if hasattr(model.hf_model, "get_output_embeddings") else None
    return None if head is None else head.weight


def word_direction(model: SpectralModel, word: str, space: Space = "auto") -> Direction:
    """The direction of one vocabulary word.

    Args:
        model: a loaded :class:`lib.models.SpectralModel`.
        word: one token of the vocabulary (else :class:`InputError` with close matches).
        space: ``"input"`` (the input-embedding row), ``"output"`` (the unembedding row with the final
            norm's gain folded in: ``γ_f ⊙ W_U[k]`` for RMSNorm, ``(1 + γ_f) ⊙ W_U[k]`` for Gemma,
            ``P(γ_f ⊙ W_U[k])`` for LayerNorm, ``P`` the centring [ours]) or
            ``"auto"`` (output when the model has an LM head, input otherwise).
    """
    k = _token_id(model, word)
    W_out = _output_embeddings(model)
    if space == "auto":
        space = "output" if W_out is not None else "input"
    if space == "input":
        return Direction(as_direction(_input_embeddings(model)[k]).vector, f"word: {word}", "word", k)
    if space != "output":
        raise InputError(f"space must be 'auto', 'input' or 'output', got {space!r}")
    if W_out is None:
        raise InputError(f"{model.label} has no LM head; use space='input' (load decoders with with_lm_head=True)")
    row = spectra.as_float64(W_out[k])
    norm = model.adapter.final_norm(model.base)
    if norm is not None and getattr(norm, "weight", None) is not None:
        gain = spectra.as_float64(norm.weight)
        if model.family == "gemma2":
            gain = 1.0 + gain
        row = gain * row
        if isinstance(norm, nn.LayerNorm):
            row = row - row.mean()
    return Direction(as_direction(row).vector, f"word: {word}", "word", k)


def difference_direction(model: SpectralModel, word_a: str, word_b: str, space: Space = "auto") -> Direction:
    """``u ∝ e(word_a) − e(word_b)`` (embeddings as in :func:`word_direction`); the target token is ``word_a``."""
    a, b = word_direction(model, word_a, space), word_direction(model, word_b, space)
    return Direction(as_direction(a.vector - b.vector).vector, f"{word_a} − {word_b}", "difference", a.token_id)


def _mean_final_state(model: SpectralModel, prompts: Sequence[str]) -> np.ndarray:
    """Mean over prompts of the mean final residual state over each prompt's non-special tokens."""
    if isinstance(prompts, str) or not prompts:
        raise InputError("prompts must be a non-empty list of strings")
    means = []
    for text in prompts:
        enc = model.encode(text)
        hs = model.hidden_states_ids(enc["input_ids"])[-1].numpy()
        keep = ~enc["special"].numpy()
        means.append(hs[keep].mean(0) if keep.any() else hs.mean(0))
    return np.mean(means, axis=0)


def concept_direction(model: SpectralModel, prompts: Sequence[str], contrast: Sequence[str] | None = None,
                      label: str = "concept") -> Direction:
    """A concept: the mean final hidden state of ``prompts`` (minus that of ``contrast``, if given).

    Real hidden states share a large common mean (anisotropy), so a plain mean is dominated by it;
    the contrast removes it [ours].
    """
    mean = _mean_final_state(model, prompts)
    if contrast is not None:
        mean = mean - _mean_final_state(model, contrast)
    return Direction(as_direction(mean).vector, label, "concept", None)


def random_direction(d: int, seed: int = 0) -> Direction:
    """A uniformly random unit vector (the control), from ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    return Direction(as_direction(rng.standard_normal(d)).vector, f"random (seed {seed})", "random", None)


# -- the edit --------------------------------------------------------------------------------------
def choose_w(V: Any, u: Any) -> tuple[np.ndarray, str]:
    """``w`` with ``V_Lᵀ w = u`` when solvable (module docstring), and the method used.

    Args:
        V: ``(H·d_h, d)`` expanded value matrix (float64). u: unit ``(d,)``.

    Returns:
        ``(w, method)`` with ``method`` ``"solve"`` (square, invertible ``V``) or ``"pinv"`` (the
        minimum-norm least-squares fallback).
    """
    V, u = spectra.as_float64(V), spectra.as_float64(u)
    if V.shape[0] == V.shape[1]:
        s = np.linalg.svd(V, compute_uv=False)
        if s[-1] > SOLVE_RCOND * s[0]:
            return np.linalg.solve(V.T, u), "solve"
    w, *_ = np.linalg.lstsq(V.T, u, rcond=None)
    return w, "pinv"


@dataclass(frozen=True)
class SteeringEdit:
    """What :func:`steer` did (yielded by the context manager).

    Attributes:
        layer: the edited block ``l`` (0-based; figures say ``l + 1``).
        u: unit target (float64 ``(d,)``); label: its name.
        alpha: the absolute ``α`` applied; alpha_rel: ``α|c| / |λ_1(F_l)|``.
        w: the edit's weight-side vector: ``w`` (``(H·d_h,)``) for ``matrix="O"``, ``b``
            (``(n_kv·d_h,)``) for ``matrix="V"``.
        z, y: the change of ``F_l`` is ``α y zᵀ``. O-edit: ``y = u``, ``z = V_lᵀ w``; V-edit:
            ``y = O_grp b``, ``z = u``. c: ``zᵀ y``. method: ``"solve"``, ``"pinv"`` or ``"given"``.
        radius: ``|λ_1(F_l)|`` before the edit.
        shared: whether the edited module is shared by several layers (ALBERT).
        matrix: ``"O"`` (the paper's edit) or ``"V"`` (the control).
    """

    layer: int
    u: np.ndarray
    label: str
    alpha: float
    alpha_rel: float
    w: np.ndarray
    z: np.ndarray
    c: float
    method: str
    radius: float
    shared: bool
    matrix: Matrix
    y: np.ndarray

    def __repr__(self) -> str:
        return (f"SteeringEdit({self.matrix}-edit of layer {self.layer + 1} towards {self.label!r}: "
                f"alpha={self.alpha:.4g} (alpha_rel={self.alpha_rel:.4g}), c={self.c:.4g}, method={self.method!r})")

    @property
    def delta_F(self) -> np.ndarray:
        """``α y zᵀ`` (d × d, float64), the change of ``F_l`` (``α u zᵀ`` for the O-edit)."""
        return self.alpha * np.outer(self.y, self.z)


def _check_alpha(alpha: Any) -> float:
    try:
        a = float(alpha)
    except (TypeError, ValueError) as exc:
        raise InputError(f"alpha must be a positive number, got {alpha!r}") from exc
    if not math.isfinite(a) or a <= 0:
        raise InputError(f"alpha must be positive and finite, got {alpha!r} (use no edit at all for α = 0)")
    return a


def _resolve_layer(model: SpectralModel, layer: int) -> int:
    return model.check_layer(layer)


def _is_shared(model: SpectralModel, t: int) -> bool:
    block = model.blocks[t]
    return sum(b is block for b in model.blocks) > 1


def grouped_output(att: Any) -> np.ndarray:
    """``O_grp`` (``d × n_kv·d_h``, float64): the output columns of the query heads that share a KV head,
    summed, so that ``F = O V = O_grp V_kv`` with ``V_kv`` the checkpoint's own value weight."""
    O = spectra.as_float64(att.O)
    d, H, n_kv, dh = O.shape[0], att.n_heads, att.n_kv_heads, att.head_dim
    return O.reshape(d, n_kv, H // n_kv, dh).sum(axis=2).reshape(d, n_kv * dh)


def _edited_module(model: SpectralModel, t: int, matrix: Matrix) -> nn.Module:
    block = model.blocks[t]
    return model.adapter.output_module(block) if matrix == "O" else model.adapter.value_module(block)


def _weight_delta(module: nn.Module, family: str, edit: SteeringEdit) -> torch.Tensor:
    """The edit in the module's own weight layout.

    O-edit: ``α u wᵀ`` (``d × H·d_h``); V-edit: ``α b uᵀ`` (``n_kv·d_h × d``). GPT-2's ``Conv1D``
    stores ``(in, out)``, so the delta is transposed, and its fused ``c_attn`` holds the value weight
    in its last ``d`` output columns.
    """
    with np.errstate(over="ignore"):  # an overflow is refused by steer, with what to do
        D = edit.alpha * (np.outer(edit.u, edit.w) if edit.matrix == "O" else np.outer(edit.w, edit.u))
    weight = module.weight
    if family == "gpt2":
        D = D.T
        if edit.matrix == "V":
            full = np.zeros(tuple(weight.shape))
            full[:, -D.shape[1]:] = D
            D = full
    if tuple(D.shape) != tuple(weight.shape):
        raise RuntimeError(f"edit of shape {D.shape} does not fit the weight of shape {tuple(weight.shape)}")
    return torch.as_tensor(D, dtype=weight.dtype, device=weight.device)


class _InForce:
    """The :func:`steer` edits in force on one weight tensor, so that they undo correctly in any order.

    It keeps the weight as it was before the first edit and each edit's delta, in the order they were
    applied. When an edit ends, the weight becomes the original plus the deltas still in force (added in
    that order, so an edit that ends last-in-first-out leaves exactly the weight it found), and once the
    last one ends, the original itself: bitwise what it was, whichever edit ends first.
    """

    _by_weight: dict[int, _InForce] = {}  # id(weight) -> its edits, only while one is in force

    def __init__(self, weight: torch.Tensor) -> None:
        self.weight = weight
        self.original = weight.detach().clone()
        self.deltas: dict[int, torch.Tensor] = {}
        self._next = 0

    @classmethod
    def of(cls, weight: torch.Tensor) -> _InForce:
        """The edits in force on ``weight`` (a new, empty record when there are none)."""
        if id(weight) not in cls._by_weight:
            cls._by_weight[id(weight)] = cls(weight)
        return cls._by_weight[id(weight)]

    def add(self, delta: torch.Tensor) -> int:
        """Record one more edit (the caller writes it); its token for :meth:`remove`."""
        self._next += 1
        self.deltas[self._next] = delta
        return self._next

    @torch.no_grad()
    def remove(self, token: int) -> None:
        """End the edit ``token``: write the original plus the deltas still in force."""
        del self.deltas[token]
        if not self.deltas:
            self.weight.copy_(self.original)
            del self._by_weight[id(self.weight)]
            return
        restored = self.original.clone()
        for delta in self.deltas.values():
            restored.add_(delta)
        self.weight.copy_(restored)


def prepare_edit(model: SpectralModel, direction: Any, alpha: float, *, relative: bool = True, layer: int = -1,
                 allow_shared: bool = False, w: Any = None, radius: float | None = None,
                 matrix: Matrix = "O") -> SteeringEdit:
    """Compute the edit :func:`steer` would apply, without touching the model (arguments as there)."""
    a = _check_alpha(alpha)
    if matrix not in MATRICES:
        raise InputError(f"matrix must be one of {MATRICES} (the output or the value matrix), got {matrix!r}")
    t = _resolve_layer(model, layer)
    shared = _is_shared(model, t)
    if shared and not allow_shared:
        raise InputError(
            f"{model.label}: layer {t + 1} shares its module with other layers (ALBERT), so editing its {matrix} "
            "matrix edits every layer. Pass allow_shared=True to edit the shared layer (F' then holds at every depth)."
        )
    att = model.layer(t).attention
    u_dir = _target(model, direction)
    u = u_dir.vector
    # O-edit: F' = F + α u (Vᵀw)ᵀ, w solves Vᵀw = u.  V-edit: F' = F + α (O_grp b) uᵀ, b solves O_grp b = u.
    side = spectra.as_float64(att.V) if matrix == "O" else grouped_output(att).T
    if w is None:
        w, method = choose_w(side, u)
    else:
        w, method = spectra.as_float64(w), "given"
        if w.shape != (side.shape[0],) or not np.all(np.isfinite(w)):
            what = "(H·dₕ,)" if matrix == "O" else "(nₖᵥ·dₕ,)"
            raise InputError(f"w must be a finite vector of shape ({side.shape[0]},) = {what}, got shape {w.shape}")
    y, z = (u, side.T @ w) if matrix == "O" else (side.T @ w, u)
    c = float(z @ y)
    if abs(c) < 1e-8:
        space = "row space of V" if matrix == "O" else "column space of the grouped O"
        raise InputError(f"u is (numerically) orthogonal to the {space} (c = {c:.1e}); no rank-1 {matrix}-edit can steer it")
    if radius is None:
        radius = float(spectra.spectral_radius(att.layer_matrix()))
    alpha_abs = a * radius / abs(c) if relative else a
    return SteeringEdit(t, u, u_dir.label, alpha_abs, alpha_abs * abs(c) / radius if radius > 0 else math.inf,
                        w, z, c, method, radius, shared, matrix, y)


@_with_only
def steer(model: SpectralModel, direction: Any, alpha: float, relative: bool = True, *, layer: int = -1,
          allow_shared: bool = False, w: Any = None, radius: float | None = None,
          matrix: Matrix = "O") -> Iterator[SteeringEdit]:
    """Edit ``O_l ← O_l + α u wᵀ`` in place for the duration of a ``with`` block; restore it exactly after.

    Args:
        model: a loaded :class:`lib.models.SpectralModel` (edited in place: no copy is made).
        direction: the target ``u``: a :class:`Direction`, any nonzero vector of length ``d``, or one
            vocabulary word (its :func:`word_direction`).
        alpha: ``α > 0``; in units of ``|λ_1(F_l)|`` (``α|c| = alpha·|λ_1|``) when ``relative``.
        layer: the block to edit (default the last, as in the paper; another layer is a control).
        allow_shared: edit a module that several layers share (ALBERT); refused otherwise.
        w: override the choice of :func:`choose_w` (a variant: any ``w`` with ``c = wᵀ V_l u ≠ 0``
            makes ``u`` an eigenvector direction of ``F_l'`` for large ``α``; ``method`` is then ``"given"``).
        radius: ``|λ_1(F_l)|`` if already known (saves one eigendecomposition in sweeps).
        matrix: ``"O"`` (the paper's edit) or ``"V"``: the control ``V_l ← V_l + α b uᵀ`` (module
            docstring); ``w`` then overrides ``b``.

    Yields:
        the :class:`SteeringEdit` (``w``, ``z``, ``c``, the absolute ``α``). Inside the block
        ``model.layer_matrices()`` and every forward pass see the edit.

    The original weight tensor is cloned and copied back on exit, also after an exception, so the
    model is bitwise identical afterwards. Edits of the same weight may overlap and end in any order: each
    exit leaves the edits still in force, and the last one the original weight (:class:`_InForce`).
    An edit that would make a weight infinite in its dtype (a huge absolute ``alpha``) is refused before
    anything is written. Called without ``with`` it edits nothing and warns.

    Example:
        >>> import lib
        >>> m = lib.load_model("book-decoder")
        >>> with steer(m, "boat", 20) as edit:  # α|c| = 20 |λ₁(F_L)|: u is F_L′'s principal direction
        ...     print(edit)
        ...     round(spectral_report(m.layer(-1).attention.layer_matrix(), edit.u)["spectral_alignment"], 3)
        SteeringEdit(O-edit of layer 6 towards 'word: boat': alpha=... (alpha_rel=20), c=..., method='pinv')
        1.0

    Raises:
        InputError: ``alpha ≤ 0`` or not finite, an edit that would make the weight non-finite, a
            zero/ill-shaped direction, a shared module, an unknown ``matrix``. InputTypeError: a direction
            that is not a vector, a :class:`Direction` or a word (a dict, say).
    """
    edit = prepare_edit(model, direction, alpha, relative=relative, layer=layer, allow_shared=allow_shared, w=w,
                        radius=radius, matrix=matrix)
    module = _edited_module(model, edit.layer, matrix)
    weight = module.weight
    delta = _weight_delta(module, model.family, edit)
    with torch.no_grad():
        edited = weight.detach() + delta  # what `weight += delta` would write, checked before it is written
    if not bool(torch.isfinite(edited).all()):
        raise InputError(
            f"this edit would make the {matrix} weight of layer {edit.layer + 1} non-finite in {weight.dtype} "
            f"(alpha = {edit.alpha:.3g}; {weight.dtype} holds at most {torch.finfo(weight.dtype).max:.3g}): "
            "use a smaller alpha, or relative=True (alpha in units of |λ₁(F_L)|, the book's sweep goes to 1000). "
            "The weights were not changed."
        )
    edits = _InForce.of(weight)
    token = edits.add(delta)
    try:
        with torch.no_grad():
            weight.copy_(edited)
        yield edit
    finally:
        edits.remove(token)


@_with_only
def maybe_steer(model: SpectralModel, direction: Any, alpha: float, **kw: Any) -> Iterator[SteeringEdit | None]:
    """:func:`steer`, or no edit at all when ``alpha == 0`` (the unedited reference of a sweep)."""
    if alpha == 0:
        yield None
    else:
        with steer(model, direction, alpha, **kw) as edit:
            yield edit


# -- the activation-addition baseline --------------------------------------------------------------
@_with_only
def activation_addition(model: SpectralModel, direction: Any, strength: float, *, layer: int = -1) -> Iterator[np.ndarray]:
    """Add ``strength · u`` to the output of layer ``l``'s output projection, at every token [ours].

    This is activation addition at the site of the eigen-edit: the eigen-edit adds
    ``α u (wᵀ o_i)`` (a token-dependent multiple of ``u``, ``o_i`` the concatenated head outputs),
    this adds the same ``s u`` to every token. It is exactly the same as adding ``s u`` to the
    output projection's bias. Implemented as a forward hook, removed on exit.

    Yields the unit ``u``.
    """
    s = float(strength)
    if not math.isfinite(s):
        raise InputError(f"strength must be finite, got {strength!r}")
    t = _resolve_layer(model, layer)
    module = model.adapter.output_module(model.blocks[t])
    u = _target(model, direction).vector
    add = torch.as_tensor(s * u, dtype=module.weight.dtype, device=module.weight.device)

    def hook(_m: nn.Module, _args: Any, out: torch.Tensor) -> torch.Tensor:
        return out + add

    handle = module.register_forward_hook(hook)
    try:
        yield u
    finally:
        handle.remove()


@torch.no_grad()
def _around_output_projection(model: SpectralModel, texts: Sequence[str], layer: int, side: str) -> list[np.ndarray]:
    """What enters (``side="in"``) or leaves (``"out"``) layer ``l``'s output projection, per text (float64)."""
    t = _resolve_layer(model, layer)
    module = model.adapter.output_module(model.blocks[t])
    seen: list[torch.Tensor] = []
    if side == "in":
        register = module.register_forward_pre_hook

        def hook(_m: nn.Module, args: Any) -> None:
            seen.append(args[0].detach())
    else:
        register = module.register_forward_hook

        def hook(_m: nn.Module, _args: Any, out: torch.Tensor) -> None:  # type: ignore[misc]
            seen.append(out.detach())

    out = []
    for text in texts:
        seen.clear()
        handle = register(hook)
        try:
            model.hidden_states_ids(model.encode(text)["input_ids"])
        finally:
            handle.remove()
        out.append(spectra.as_float64(seen[-1][0]))
    return out


def head_outputs(model: SpectralModel, texts: Sequence[str], layer: int = -1) -> list[np.ndarray]:
    """The input of layer ``l``'s output projection (the concatenated head outputs ``o_i``), per text.

    Returns one float64 ``(n, H·d_h)`` array per text (unchanged by an O-edit, changed by a V-edit).
    """
    return _around_output_projection(model, texts, layer, "in")


def projection_outputs(model: SpectralModel, texts: Sequence[str], layer: int = -1) -> list[np.ndarray]:
    """The output of layer ``l``'s output projection (``O o_i + b_O``, before any residual), per text.

    Returns one float64 ``(n, d)`` array per text, with the model's *current* weights, so that the
    change an edit makes there can be measured for any edit (:func:`measured_change`).
    """
    return _around_output_projection(model, texts, layer, "out")


def measured_change(before: Sequence[np.ndarray], after: Sequence[np.ndarray], u: Any) -> dict[str, float]:
    """How an edit changed the output projection's output, from :func:`projection_outputs` without and
    with it (``Δ_i`` per token, all texts pooled).

    Returns:
        ``strength``: mean ``‖Δ_i‖`` (the activation-addition strength at matched norm);
        ``sign_agreement``: fraction of tokens with ``Δ_i·u > 0``; ``along_u``: mean ``|cos(Δ_i, u)|``
        (``u`` any nonzero vector; a token with ``Δ_i = 0`` counts as ``cos = 0``).

    For the O-edit ``Δ_i = α u (wᵀ o_i)``: this equals :func:`matched_strength` and
    :func:`sign_agreement` (up to float32 rounding) and ``along_u = 1``. For the V-edit the change
    passes through every head's own attention average, ``Δ_i = α Σ_h O_h b_h Σ_j A^h_ij (uᵀ x_j)``,
    and is parallel to ``u`` only where the heads' patterns agree.
    """
    u = as_direction(u).vector  # unit: a cosine needs it (a non-unit u once scaled along_u by ‖u‖)
    delta = np.concatenate([a - b for a, b in zip(after, before)])
    norms = np.linalg.norm(delta, axis=1)
    cos = (delta @ u) / np.where(norms > 0, norms, 1.0)
    return {"strength": float(norms.mean()), "sign_agreement": float((delta @ u > 0).mean()),
            "along_u": float(np.abs(cos).mean())}


def _o_edit_projections(edit: SteeringEdit, outputs: Sequence[np.ndarray]) -> np.ndarray:
    if edit.matrix != "O":
        raise InputError("this formula holds for the O-edit only; measure a V-edit's change with measured_change")
    return np.concatenate([o @ edit.w for o in outputs])


def matched_strength(edit: SteeringEdit, outputs: Sequence[np.ndarray]) -> float:
    """``s`` for :func:`activation_addition` matching the O-edit's change: mean over tokens of
    ``‖α u (wᵀ o_i)‖ = α |wᵀ o_i|``, with ``o_i`` from :func:`head_outputs` (O-edit only)."""
    return float(edit.alpha * np.abs(_o_edit_projections(edit, outputs)).mean())


def sign_agreement(edit: SteeringEdit, outputs: Sequence[np.ndarray]) -> float:
    """Fraction of tokens with ``wᵀ o_i > 0``: those the O-edit pushes toward ``+u`` (the rest go to ``−u``)."""
    return float((_o_edit_projections(edit, outputs) > 0).mean())


def v_edit_anatomy(edit: SteeringEdit, att: Any, heads_before: Sequence[np.ndarray],
                   heads_after: Sequence[np.ndarray]) -> dict[str, np.ndarray | float]:
    """Why a V-edit with the same ``F_L'`` as the O-edit does not move the tokens along ``u`` [ours].

    The V-edit adds ``α b_g uᵀ`` to the value weight of KV head ``g``; query head ``h`` (of group
    ``g(h)``) averages the changed values with its own attention pattern, so its output changes by
    ``α b_{g(h)} s_ih`` with ``s_ih = Σ_j A^h_ij (uᵀ x_j)``, and the output projection's output by

        Δ_i = α Σ_h p_h s_ih,    p_h = O_h b_{g(h)},    Σ_h p_h = O_grp b = y    (= u with MHA).

    Write ``s_ih = m_i + δ_ih`` (``m_i`` the mean over heads): ``Δ_i = α (m_i y + r_i)``,
    ``r_i = Σ_h p_h δ_ih``. If every head averaged alike (``δ = 0``) the change would be ``α m_i y``,
    along ``y``; the spectrum of ``F = Σ_h O_h V_h`` only sees ``Σ_h p_h``. The per-head ``p_h`` are
    large and cancel in the sum (``κ = Σ_h ‖p_h‖ / ‖y‖ ≫ 1``), so a small disagreement ``δ`` between
    heads becomes a large change off ``u``.

    Args:
        edit: a V-edit (:func:`prepare_edit` / :func:`steer` with ``matrix="V"``).
        att: the edited layer's :class:`AttentionWeights` (unedited; ``O`` is not changed by a V-edit).
        heads_before, heads_after: :func:`head_outputs` without and with the edit, one ``(n, H·d_h)``
            array per text.

    Returns:
        ``kappa`` (float); per token, all texts pooled (float64 ``(N,)``): ``text`` (index of its
        text), ``m``, ``disagreement`` ``‖δ_i‖ / (√H |m_i|)`` (relative spread of the heads' averages),
        ``gain`` ``‖r_i‖ / (‖δ_i‖ ‖y‖ / √H)`` (how much the per-head vectors amplify it, relative
        to a head-independent ``y``), ``off_on`` ``‖r_i‖ / (|m_i| ‖y‖)`` (= disagreement × gain),
        ``cos`` ``|cos(Δ_i, u)|``; and ``fit_error``: max over tokens of ``‖Δo_i − α s_i b‖ / ‖Δo_i‖``
        (each head's change is along its ``b_g``: a check of the formula, float32 rounding).
    """
    if edit.matrix != "V":
        raise InputError("v_edit_anatomy explains a V-edit; the O-edit's change α u (wᵀ oᵢ) is along u "
                         "by construction")
    O = spectra.as_float64(att.O)
    d, H, n_kv, dh = O.shape[0], att.n_heads, att.n_kv_heads, att.head_dim
    b = np.repeat(edit.w.reshape(n_kv, dh), H // n_kv, axis=0)                      # (H, d_h): b_{g(h)}
    p = np.einsum("dhk,hk->hd", O.reshape(d, H, dh), b)                               # (H, d): p_h
    y = p.sum(0)
    ny = float(np.linalg.norm(y))
    u = edit.u
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("text", "m", "disagreement", "gain", "off_on", "cos")}
    fit = 0.0
    for k, (o0, o1) in enumerate(zip(heads_before, heads_after)):
        D = (spectra.as_float64(o1) - spectra.as_float64(o0)).reshape(-1, H, dh)      # (n, H, d_h)
        s = np.einsum("nhk,hk->nh", D, b) / (edit.alpha * np.sum(b * b, axis=1))      # (n, H): s_ih
        resid = np.linalg.norm((D - edit.alpha * s[:, :, None] * b[None]).reshape(len(D), -1), axis=1)
        fit = max(fit, float(np.max(resid / np.linalg.norm(D.reshape(len(D), -1), axis=1))))
        m = s.mean(1)
        delta = s - m[:, None]
        r = delta @ p                                                                 # (n, d)
        change = s @ p                                                                # Δ_i / α
        nd, nr = np.linalg.norm(delta, axis=1), np.linalg.norm(r, axis=1)
        cols["text"].append(np.full(len(D), k, dtype=float))
        cols["m"].append(m)
        with np.errstate(divide="ignore", invalid="ignore"):  # heads that agree exactly: gain is NaN
            cols["disagreement"].append(nd / (np.sqrt(H) * np.abs(m)))
            cols["gain"].append(nr / (nd * ny / np.sqrt(H)))
            cols["off_on"].append(nr / (np.abs(m) * ny))
        cols["cos"].append(np.abs(change @ u) / np.linalg.norm(change, axis=1))
    out: dict[str, np.ndarray | float] = {k: np.concatenate(v) for k, v in cols.items()}
    out["kappa"] = float(np.linalg.norm(p, axis=1).sum() / ny)
    out["fit_error"] = fit
    return out


# -- measurements ----------------------------------------------------------------------------------
def spectral_report(F: Any, u: Any) -> dict[str, float]:
    """``|<v_1(F), u>|`` (planar alignment for a complex pair), ``|λ_1|``, the gap ratio, whether λ_1 is
    complex, and all sorted ``eigvals`` (from one eigendecomposition)."""
    P = spectra.principal(F)
    u = spectra.as_float64(u)
    return {
        "spectral_alignment": float(spectra.subspace_alignment(u, P.basis)),
        "lambda1_modulus": float(abs(P.eigval)),
        "gap_ratio": float(P.gap_ratio),
        "complex": bool(P.is_complex),
        "eigvals": P.eigvals,
    }


def simplified_alignment(model: SpectralModel, states0: Sequence[np.ndarray], u: Any) -> np.ndarray:
    """Mean ``a(x_i(t), u)`` at every depth t = 0..L of the simplified FFN-free model (L2 norm, no
    residual, live weights, so an active edit is included), started from each text's embedding output.

    Args:
        states0: one ``(n, d)`` array per text (``hidden_states[0]``).
    Returns:
        float64 ``(L+1,)``, averaged over every token of every text.
    """
    weights = [model.layer(t).attention for t in range(model.n_layers)]
    per = [spectra.alignment(dynamics.simulate(weights, x0).numpy(), u) for x0 in states0]
    return np.concatenate(per, axis=1).mean(1)


def real_alignment(model: SpectralModel, texts: Sequence[str], u: Any) -> np.ndarray:
    """Mean ``a(x_i(t), u)`` over all tokens, at every depth t = 0..L of the real forward pass (residual
    stream, the last entry before any final norm). float64 ``(L+1,)``."""
    hs = model.hidden_states(list(texts), progress=False)
    return np.concatenate([spectra.alignment(h.numpy(), u) for h in hs], axis=1).mean(1)


@torch.no_grad()
def target_report(model: SpectralModel, texts: Sequence[str], token_id: int) -> dict[str, float]:
    """Rank (1 = top) and probability of ``token_id`` as the next token after each text (last position),
    averaged over texts; needs a model loaded ``with_lm_head=True``."""
    if _output_embeddings(model) is None:
        raise InputError(f"{model.label} has no LM head; load it with with_lm_head=True")
    ranks, probs = [], []
    device = next(model.hf_model.parameters()).device
    for text in texts:
        ids = model.encode(text)["input_ids"][None].to(device)
        logits = model.hf_model(input_ids=ids).logits[0, -1].double()
        p = torch.softmax(logits, -1)
        ranks.append(int((logits > logits[token_id]).sum()) + 1)
        probs.append(float(p[token_id]))
    return {"rank": float(np.mean(ranks)), "median_rank": float(np.median(ranks)), "prob": float(np.mean(probs))}


def unit_embeddings(model: SpectralModel) -> np.ndarray:
    """The input-embedding rows scaled to unit norm, float64 ``(vocab, d)``."""
    E = spectra.as_float64(_input_embeddings(model))
    return E / np.linalg.norm(E, axis=1, keepdims=True)


def nearest_tokens(model: SpectralModel, X: Any, k: int = 5, E: np.ndarray | None = None) -> list[list[str]]:
    """The ``k`` vocabulary tokens whose input embeddings have the largest cosine with each row of ``X``
    (``E``: :func:`unit_embeddings`, if already computed)."""
    E = unit_embeddings(model) if E is None else E
    X = np.atleast_2d(spectra.as_float64(X))
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    top = np.argsort(-(X @ E.T), axis=1)[:, :k]
    return [model.tokenizer.convert_ids_to_tokens(row.tolist()) for row in top]
