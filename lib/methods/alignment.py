"""γ_t, ρ_t and their relatives: how token states line up with the principal eigen-directions of ``F_t``.

**Reconstructed definitions [ours].** The paper names γ_t and ρ_t [paper] but its exact formulas were
not available; the forms below are the book's reconstruction (chapter 3, section 3.3) and may differ from the
paper's (signed vs absolute, which tokens, how the average is taken). For prompts ``p``, kept tokens
``i ∈ S_p``, ``x_i^p(t)`` the input of layer ``t`` and ``x_i^p(t+1)`` its output::

    a(x, B)  = ‖Bᵀ x‖ / ‖x‖                       (B orthonormal (d, k): k = 1 is |cos|, k = 2 a plane)
    γ_t      = mean_{p, i} a(x_i^p(t+1), B_t)     output of layer t against its own v_{1,t}
    γ_t^in   = mean_{p, i} a(x_i^p(t),   B_t)     input of layer t against the same direction
    Δγ_t     = γ_t − γ_t^in                       the tilt of layer t
    ρ_t      = mean_{p, i} 1[a(x_i^p(t+1), B_t) > a(x_i^p(t), B_t)]

``B_t`` is ``v_{1,t}`` for a real ``λ_{1,t}`` and the plane ``span{Re v_1, Im v_1}`` for a complex pair
(the *planar* variant). Means run over all kept (prompt, token) pairs, so long prompts weigh more;
confidence intervals resample *prompts* (the independent unit) with replacement.

**Chance levels.** ``a(x, B)`` is an absolute cosine (or the norm of a projection), so γ_t > 0 holds by
construction; what means something is γ_t against its chance level. For a uniformly random unit ``x``
and a fixed ``k``-dimensional ``B``, ``a² ~ Beta(k/2, (d−k)/2)`` and ``E a = c_{d,k}``
(:func:`baseline_subspace`): a plane catches more than a line (``c_{384,2} = 0.0640`` against
``c_{384,1} = 0.0407``). Every ratio divides γ_t by the chance level of *its own* basis dimension ``k_t``
(:func:`chance_levels`). The null (:func:`null_draws`, :func:`random_null`) replaces ``B_t`` by uniformly
random ``k_t``-dimensional subspaces and keeps the real (anisotropic) states, and the p-value of an
observed statistic is its rank among the draws, ``p = (1 + #{null ≥ observed}) / (m + 1)``, with a
Benjamini–Hochberg correction across layers.

Layout: every function takes token states as rows. A :class:`TokenStates` holds the trajectories of
many prompts concatenated along the token axis, ``(T+1, N, d)`` float64, with the prompt index and the
special-token flag of every token. Bases are stacked per layer as ``(T, d, k)`` and zero-padded to a
common ``k``: a zero column adds nothing to ``‖Bᵀx‖``, so a real ``v_1`` and a plane share one array.
Nothing loops over tokens or prompts in Python.

Contents, shared by chapters 1, 3 and 6: chance levels and random subspaces; :class:`TokenStates`, collected from a
real forward pass (:func:`prompt_states`) or from the simplified layer of :mod:`lib.theory.dynamics`
(:func:`simplified_states`); :class:`EigenBases` (:func:`eigen_bases`); per-token alignments; γ_t / ρ_t with
bootstrap intervals over prompts (:func:`gamma_rho`, :func:`prompt_sums`) and their nulls (:func:`null_draws`,
:func:`random_null`); and chapter 1's test of one layer's tilt on random tokens (:func:`one_layer_tilt`). What only
chapter 3 measures on top of them (the shared-layer convergence, the build-up profile, the own-direction tests) is in
:mod:`lib.chapters.real_models` and :mod:`lib.chapters.real_models_directions`; its tables (``gamma_rho_table``)
in :mod:`lib.page.real_models`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch
from scipy.special import gammaln

from lib.linalg import spectra
from lib.parallel import map_matrices
from lib.stats import benjamini_hochberg, bootstrap_ratio, empirical_p
from lib.theory import dynamics, toys

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = [
    "EigenBases",
    "TiltTest",
    "TokenStates",
    "baseline_subspace",
    "basis_dims",
    "chance_levels",
    "eigen_bases",
    "gamma_rho",
    "null_draws",
    "null_draws_with_tilt",
    "one_layer_tilt",
    "prompt_states",
    "prompt_sums",
    "random_directions",
    "random_null",
    "random_subspaces",
    "simplified_states",
    "step_alignment",
    "token_alignments",
]


# -- baselines ---------------------------------------------------------------------------------------
def baseline_subspace(d: int, k: int = 1) -> float:
    """Expected ``‖Bᵀu‖`` for a uniformly random unit ``u ∈ R^d`` and a fixed ``k``-dimensional subspace.

    ``‖Bᵀu‖² ~ Beta(k/2, (d−k)/2)``, so the mean is ``Γ((k+1)/2) Γ(d/2) / (Γ(k/2) Γ((d+1)/2))``:
    ``b_d ≈ sqrt(2/(π d))`` for ``k = 1`` (equal to :func:`lib.linalg.spectra.baseline_alignment`) and
    ``≈ sqrt(π/(2 d))`` for a plane.
    """
    if not 1 <= k <= d:
        raise ValueError(f"need 1 <= k <= d, got k = {k}, d = {d}")
    if k == d:
        return 1.0
    return float(np.exp(gammaln((k + 1) / 2) + gammaln(d / 2) - gammaln(k / 2) - gammaln((d + 1) / 2)))


def random_directions(d: int, m: int, seed: int = 0) -> np.ndarray:
    """``m`` independent uniformly random unit vectors in ``R^d``, float64 ``(m, d)``."""
    u = np.random.default_rng(seed).standard_normal((m, d))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


def random_subspaces(d: int, k: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` independent uniformly random ``k``-dimensional subspaces of ``R^d``: orthonormal bases ``(m, d, k)``.

    QR of a Gaussian ``(d, k)`` matrix: the Gaussian law is rotation-invariant, so the span of ``Q`` is
    uniform (Haar) on the Grassmannian, whatever sign convention the QR uses.
    """
    if not 1 <= k <= d:
        raise ValueError(f"need 1 <= k <= d, got k = {k}, d = {d}")
    return np.linalg.qr(rng.standard_normal((m, d, k)))[0]


def chance_levels(d: int, k: Any) -> np.ndarray:
    """:func:`baseline_subspace` ``c_{d,k}`` for every entry of the integer array ``k`` (float64, same shape)."""
    k = np.asarray(k, dtype=int)
    return np.array([baseline_subspace(d, int(x)) for x in k.reshape(-1)]).reshape(k.shape)


def basis_dims(bases: Any) -> np.ndarray:
    """The dimension actually used by each zero-padded basis: ``(T,)`` int for ``(T, d, k)``, ``()`` for ``(d, k)``.

    A used column has norm 1 and a padding column norm 0, so the count of columns with norm above 1/2
    is exact. An :class:`EigenBases` gives its ``k1`` (the bases of its ``v1``).
    """
    if isinstance(bases, EigenBases):
        return np.asarray(bases.k1, dtype=int)
    B = spectra.as_float64(bases)
    return (np.linalg.norm(B, axis=-2) > 0.5).sum(axis=-1)


# -- token states --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenStates:
    """Trajectories of many prompts, concatenated along the token axis.

    Attributes:
        states: float64 ``(T+1, N, d)``: entry ``t`` is the input of layer ``t`` (or step ``t``), entry
            ``t+1`` its output, for all ``N`` tokens of all prompts.
        prompt: int ``(N,)``: the prompt each token belongs to (``0 .. n_prompts−1``).
        special: bool ``(N,)``: tokenizer special tokens (``[CLS]``, ``[SEP]``, ...).
        n_prompts: number of prompts (a prompt may keep no token after :meth:`select`).
        label: what produced the states (model and variant), for tables and figure subtitles.
    """

    states: np.ndarray
    prompt: np.ndarray
    special: np.ndarray
    n_prompts: int
    label: str = ""

    @classmethod
    def from_trajectories(
        cls, trajectories: Sequence[Any], special: Sequence[Any] | None = None, label: str = ""
    ) -> TokenStates:
        """Concatenate per-prompt trajectories ``(T+1, n_p, d)`` (NumPy or torch) and their special masks ``(n_p,)``."""
        if not trajectories:
            raise ValueError("no trajectories given")
        arrs = [spectra.as_float64(x) for x in trajectories]
        shape = arrs[0].shape
        if any(a.ndim != 3 or a.shape[0] != shape[0] or a.shape[2] != shape[2] for a in arrs):
            raise ValueError(f"every trajectory must be (T+1, n_p, d) with the same T and d; first is {shape}")
        sizes = [a.shape[1] for a in arrs]
        if special is None:
            spec = np.zeros(sum(sizes), dtype=bool)
        else:
            masks = [np.asarray(spectra.as_float64(s), dtype=bool).reshape(-1) for s in special]
            if [m.size for m in masks] != sizes:
                raise ValueError("each special mask must have one entry per token of its prompt")
            spec = np.concatenate(masks)
        return cls(
            states=np.concatenate(arrs, axis=1),
            prompt=np.repeat(np.arange(len(arrs)), sizes),
            special=spec,
            n_prompts=len(arrs),
            label=label,
        )

    @property
    def steps(self) -> int:
        """``T``, the number of layers (or steps) the trajectories cover."""
        return self.states.shape[0] - 1

    @property
    def d(self) -> int:
        """The width ``d``."""
        return self.states.shape[2]

    def select(self, tokens: str = "content") -> TokenStates:
        """Keep ``"content"`` tokens (not special), ``"special"`` tokens only, or ``"all"``."""
        if tokens == "all":
            return self
        if tokens not in ("content", "special"):
            raise ValueError(f"tokens must be 'content', 'special' or 'all', got {tokens!r}")
        keep = self.special if tokens == "special" else ~self.special
        return TokenStates(self.states[:, keep], self.prompt[keep], self.special[keep], self.n_prompts, self.label)


# -- token trajectories ---------------------------------------------------------------------------------
def prompt_states(model: SpectralModel, texts: Sequence[str], *, batched: bool = False
                  ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Real forward passes: the residual stream ``(L+1, n_p, d)`` float64 and the special-token mask of each text.

    ``batched=True`` runs the texts of equal token length together (:meth:`SpectralModel.hidden_states_batch`:
    one pass per distinct length, several times faster on a CPU; equal to the one-text passes to float32
    rounding, not bitwise).
    """
    encs = [model.encode(t) for t in texts]
    specials = [e["special"] for e in encs]
    if not batched:
        return model.hidden_states(list(texts), progress=False), specials
    by_len: dict[int, list[int]] = {}
    for p, e in enumerate(encs):
        by_len.setdefault(len(e["input_ids"]), []).append(p)
    states: list[Any] = [None] * len(encs)
    for idx in by_len.values():
        out = model.hidden_states_batch(torch.stack([encs[p]["input_ids"] for p in idx]))
        for b, p in enumerate(idx):
            states[p] = out[:, b]
    return states, specials


def simplified_states(
    weights: Any,
    x0: Sequence[Any],
    *,
    steps: int | None = None,
    special: Sequence[Any] | None = None,
    label: str = "",
    **simulate_kwargs: Any,
) -> TokenStates:
    """Run :func:`lib.theory.dynamics.simulate` from each prompt's initial tokens and collect :class:`TokenStates`.

    Prompts of equal length are stacked into one batch, so the number of calls is the number of
    distinct lengths, not of prompts.

    Args:
        weights: per-layer weights (a sequence) or one shared layer (then ``steps`` is required).
        x0: one ``(n_p, d)`` initial state per prompt (e.g. ``hidden_states[p][0]``).
        steps: layers or steps to run.
        special: special-token masks, as in :meth:`TokenStates.from_trajectories`.
        label: for tables and subtitles.
        simulate_kwargs: passed to :func:`lib.theory.dynamics.simulate` (``norm``, ``radius``, ``residual``...).
    """
    x0 = [spectra.as_float64(x) for x in x0]
    by_len: dict[int, list[int]] = {}
    for p, x in enumerate(x0):
        by_len.setdefault(x.shape[0], []).append(p)
    trajs: list[Any] = [None] * len(x0)
    for idx in by_len.values():
        batch = torch.as_tensor(np.stack([x0[p] for p in idx]))
        out = dynamics.simulate(weights, batch, steps, **simulate_kwargs)  # (T+1, B, n, d)
        for b, p in enumerate(idx):
            trajs[p] = out[:, b].numpy()
    return TokenStates.from_trajectories(trajs, special, label=label)


# -- eigen-directions ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class EigenBases:
    """Per-layer orthonormal bases of the leading eigen-directions of ``F_t`` (zero-padded, float64).

    Attributes:
        v1: ``(L, d, 2)``: ``v_{1,t}`` (second column zero) or the plane of a complex ``λ_{1,t}``.
        v2: ``(L, d, 2)``: the same for the *next* eigen-direction (the one ``gap_ratio`` refers to; a
            conjugate partner is skipped), the ``v_{2,t}`` null of chapter 3's exercise 4.
        v12: ``(L, d, 4)``: ``span{v_1, v_2}`` (real and imaginary parts of both, QR; 2 to 4 columns used).
        k1, k12: the dimensions actually used by ``v1`` and ``v12`` per layer.
        lambda1: ``(L,)`` complex principal eigenvalues. lambda1_complex: ``(L,)`` bool.
        gap_ratio: ``(L,)`` ``|λ_next|/|λ_1|``: the rate of convergence to ``v1``.
        subspace_ratio: ``(L,)`` modulus of the first eigenvalue outside ``v12``, over ``|λ_1|``: the rate
            of convergence to ``span{v_1, v_2}``.
    """

    v1: np.ndarray
    v2: np.ndarray
    v12: np.ndarray
    k1: np.ndarray
    k12: np.ndarray
    lambda1: np.ndarray
    lambda1_complex: np.ndarray
    gap_ratio: np.ndarray
    subspace_ratio: np.ndarray

    @property
    def n_layers(self) -> int:
        """``L``."""
        return self.v1.shape[0]

    def layer(self, t: int) -> EigenBases:
        """The bases of layer ``t`` alone (``L = 1``), e.g. to iterate one shared layer."""
        s = slice(t, t + 1)
        return EigenBases(*(getattr(self, f)[s] for f in self.__dataclass_fields__))


def _direction_groups(lams: np.ndarray) -> list[list[int]]:
    """Group sorted eigenvalue indices into directions: a real one alone, a conjugate pair together."""
    scale = abs(lams[0]) if lams.size else 0.0
    groups, k = [], 0
    while k < lams.size:
        pair = bool(spectra.is_complex(lams[k], scale)) and k + 1 < lams.size
        groups.append([k, k + 1] if pair else [k])
        k += 2 if pair else 1
    return groups


def _basis(V: np.ndarray, idx: Sequence[int], width: int) -> tuple[np.ndarray, int]:
    """Orthonormal basis of the real span of the eigenvectors ``V[:, idx]`` (one per group member pair), padded."""
    cols = []
    for k in idx:
        v = V[:, k]
        cols.append(v.real)
        if np.linalg.norm(v.imag) > 1e-12:
            cols.append(v.imag)
    Q, R = np.linalg.qr(np.stack(cols, axis=1))
    keep = np.abs(np.diag(R)) > 1e-10 * np.abs(np.diag(R)).max()
    Q = Q[:, keep]
    out = np.zeros((V.shape[0], width))
    out[:, : Q.shape[1]] = Q
    return out, int(Q.shape[1])


def eigen_bases(F: Any) -> EigenBases:
    """Leading eigen-directions of every layer matrix in ``F`` (``(L, d, d)``, or one ``(d, d)``).

    Full float64 LAPACK eigendecomposition per layer (:func:`lib.linalg.spectra.eig`), so the cost is about
    ``L · d³``; share one call for shared-weight models (pass ``F[:1]``). For a conjugate pair the real
    and imaginary parts of one member span the plane; the members of a pair are one direction.
    """
    F64 = spectra.as_float64(F)
    if F64.ndim == 2:
        F64 = F64[None]
    fields: dict[str, list] = {k: [] for k in EigenBases.__dataclass_fields__}
    for lams, V in map_matrices(spectra.eig, F64):  # one layer per core (lib.parallel)
        groups = _direction_groups(lams)
        if len(groups) < 2:
            raise ValueError("F must have at least two eigen-directions (d >= 2)")
        first, second = groups[0], groups[1]
        b1, k1 = _basis(V, first[:1], 2)
        b2, _ = _basis(V, second[:1], 2)
        b12, k12 = _basis(V, [first[0], second[0]], 4)
        top = abs(lams[0])
        nxt = groups[2][0] if len(groups) > 2 else None
        vals = dict(
            v1=b1, v2=b2, v12=b12, k1=k1, k12=k12, lambda1=lams[0],
            lambda1_complex=len(first) == 2,
            gap_ratio=abs(lams[second[0]]) / top,
            subspace_ratio=abs(lams[nxt]) / top if nxt is not None else 0.0,
        )
        for k, v in vals.items():
            fields[k].append(v)
    return EigenBases(**{k: np.asarray(v) for k, v in fields.items()})


# -- alignments ------------------------------------------------------------------------------------------
def _subspace_align(X: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``‖Bᵀx‖/‖x‖`` for ``X (T, N, d)`` against per-layer ``B (T, d, k)`` (or one shared ``(d, k)``)."""
    proj = np.einsum("tnd,tdk->tnk", X, B) if B.ndim == 3 else X @ B
    return np.linalg.norm(proj, axis=-1) / np.linalg.norm(X, axis=-1)


def token_alignments(ts: TokenStates, bases: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-token alignments of each layer's input and output with that layer's basis.

    Args:
        ts: token states ``(T+1, N, d)``.
        bases: ``(T, d, k)`` one orthonormal (zero-padded) basis per layer, or ``(d, k)`` for all layers.

    Returns:
        ``(a_in, a_out)``, float64 ``(T, N)``: ``a(x(t), B_t)`` and ``a(x(t+1), B_t)``.
    """
    B = spectra.as_float64(bases)
    X = ts.states
    if B.ndim == 3 and B.shape[0] != ts.steps:
        raise ValueError(f"{B.shape[0]} bases for {ts.steps} layers")
    if B.shape[-2] != ts.d:
        raise ValueError(f"bases have d = {B.shape[-2]}, states have d = {ts.d}")
    return _subspace_align(X[:-1], B), _subspace_align(X[1:], B)


def step_alignment(ts: TokenStates, basis: np.ndarray) -> np.ndarray:
    """``a(x(t), B)`` for every step ``t = 0..T`` and token against one fixed basis ``(d, k)``: ``(T+1, N)``."""
    return _subspace_align(ts.states, spectra.as_float64(basis))


# -- statistics over prompts -------------------------------------------------------------------------
def prompt_sums(values: np.ndarray, prompt: np.ndarray, n_prompts: int) -> np.ndarray:
    """Sum ``values (..., N)`` per prompt: ``(..., P)`` (one matrix product, no Python loop)."""
    onehot = np.zeros((prompt.size, n_prompts))
    onehot[np.arange(prompt.size), prompt] = 1.0
    return values @ onehot


def gamma_rho(
    ts: TokenStates,
    bases: np.ndarray | EigenBases,
    *,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """γ_t, γ_t^in, Δγ_t and ρ_t per layer, with bootstrap intervals over prompts (reconstructed [ours]).

    Args:
        ts: token states (select the tokens first, e.g. ``ts.select("content")``).
        bases: :class:`EigenBases` (its ``v1``: the planar variant where ``λ_1`` is complex) or any
            ``(T, d, k)`` / ``(d, k)`` bases.
        n_boot, ci, seed: see :func:`bootstrap_ratio`.

    Returns:
        One row per layer (``layer`` 1-based) with ``gamma``, ``gamma_in``, ``tilt``, ``rho`` and
        ``*_lo`` / ``*_hi`` interval columns, ``k`` (the dimension of the layer's basis), ``chance``
        (``c_{d,k}``, :func:`baseline_subspace`), ``gamma_ratio`` = γ_t / chance with its interval
        (``gamma_ratio_lo`` / ``_hi``: the bootstrap interval of γ_t over the same constant), plus
        ``tokens`` and ``prompts`` (those with a kept token).
    """
    B = bases.v1 if isinstance(bases, EigenBases) else bases
    k = np.broadcast_to(basis_dims(bases), (ts.steps,))
    chance = chance_levels(ts.d, k)
    a_in, a_out = token_alignments(ts, B)
    counts = np.bincount(ts.prompt, minlength=ts.n_prompts).astype(np.float64)
    per_token = {"gamma": a_out, "gamma_in": a_in, "tilt": a_out - a_in, "rho": (a_out > a_in).astype(np.float64)}
    out = {"layer": np.arange(1, ts.steps + 1)}
    for name, vals in per_token.items():
        est, lo, hi = bootstrap_ratio(prompt_sums(vals, ts.prompt, ts.n_prompts), counts, n_boot=n_boot, ci=ci, seed=seed)
        out.update({name: est, f"{name}_lo": lo, f"{name}_hi": hi})
    out.update({"k": k.copy(), "chance": chance})
    for suffix in ("", "_lo", "_hi"):
        out[f"gamma_ratio{suffix}"] = out[f"gamma{suffix}"] / chance
    out["tokens"] = np.full(ts.steps, ts.prompt.size)
    out["prompts"] = np.full(ts.steps, int((counts > 0).sum()))
    return pd.DataFrame(out)


def null_draws(
    ts: TokenStates, bases: np.ndarray | EigenBases, *, m: int = 1000, seed: int = 0, chunk: int = 250
) -> tuple[np.ndarray, np.ndarray]:
    """γ_t and ρ_t of the real states against ``m`` uniformly random subspaces of each layer's own dimension.

    For layer ``t`` with basis dimension ``k_t`` (:func:`basis_dims`), ``m`` bases are drawn by
    :func:`random_subspaces`, independently for every layer, and γ and ρ are computed exactly as in
    :func:`gamma_rho` (token-weighted means, strict increase), one matrix product per chunk of draws.
    :func:`null_draws_with_tilt` also returns the tilt Δγ_t of the same draws.

    Args:
        ts: token states ``(T+1, N, d)`` (select the tokens first).
        bases: the bases whose dimensions the null copies (an :class:`EigenBases`, or ``(T, d, k)``).
        m: number of random subspaces per layer.
        seed: seed of ``numpy.random.default_rng`` (one generator, layers drawn in order).
        chunk: draws per matrix product (bounds the memory to ``N · chunk · k`` floats).

    Returns:
        ``(gamma, rho)``, float64 ``(T, m)``: the null distribution of each layer's statistics.
    """
    gam, rho, _ = null_draws_with_tilt(ts, bases, m=m, seed=seed, chunk=chunk)
    return gam, rho


def null_draws_with_tilt(
    ts: TokenStates, bases: np.ndarray | EigenBases, *, m: int = 1000, seed: int = 0, chunk: int = 250
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`null_draws` plus the tilt ``Δγ_t = γ_t − γ_t^in`` of every draw: ``(gamma, rho, tilt)``, each ``(T, m)``.

    The same subspaces (same generator, same order) as :func:`null_draws`, so its two arrays are identical. The
    tilt of a draw is the mean change, across the layer, of the tokens' alignment with that random subspace: the
    null of Δγ_t (the states drift, and a random direction's alignment changes with them).
    """
    k = np.broadcast_to(basis_dims(bases), (ts.steps,))
    rng = np.random.default_rng(seed)
    # Unit tokens; the projections of the Monte Carlo null run in float32 (2-3x faster; their rounding,
    # ~1e-7 relative, is far below the null's own sampling error ~1/sqrt(m)). Draws and sums stay float64.
    X = (ts.states / np.linalg.norm(ts.states, axis=-1, keepdims=True)).astype(np.float32)
    N, d = X.shape[1], X.shape[2]
    gam, rho, tilt = (np.empty((ts.steps, m)) for _ in range(3))
    for t in range(ts.steps):
        kt = int(k[t])
        for j in range(0, m, chunk):
            c = min(chunk, m - j)
            Q = random_subspaces(d, kt, c, rng).transpose(1, 0, 2).reshape(d, c * kt).astype(np.float32)
            P = (X[t : t + 2] @ Q).reshape(2, N, c, kt)
            a2 = np.einsum("snck,snck->snc", P, P)  # squared alignment, (in/out, N, c)
            gam[t, j : j + c] = np.sqrt(a2[1]).mean(axis=0, dtype=np.float64)
            tilt[t, j : j + c] = gam[t, j : j + c] - np.sqrt(a2[0]).mean(axis=0, dtype=np.float64)
            rho[t, j : j + c] = (a2[1] > a2[0]).mean(axis=0, dtype=np.float64)
    return gam, rho, tilt


def random_null(
    ts: TokenStates, bases: np.ndarray | EigenBases, *, m: int = 1000, seed: int = 0, ci: float = 0.95
) -> pd.DataFrame:
    """The layer's own null distribution of γ_t, ρ_t and Δγ_t, and the one-sided test of the observed values.

    The null keeps the real states (so it absorbs their anisotropy) and replaces each layer's basis by
    uniformly random subspaces of the *same* dimension ``k_t`` (:func:`null_draws`). p-values are
    :func:`empirical_p`; ``q_*`` are Benjamini–Hochberg adjusted across the ``T`` layers
    (:func:`lib.stats.benjamini_hochberg`), so ``q < 0.05`` is "beats the null at FDR 5%".

    Returns:
        One row per layer: ``layer``, ``k``, ``chance`` (``c_{d,k}``), ``draws`` (``m``); the null's
        mean and central ``ci`` range, ``gamma_null`` / ``gamma_null_lo`` / ``gamma_null_hi`` (also over
        ``chance``: ``gamma_ratio_null*``), ``rho_null*`` and ``tilt_null*`` (the distribution of the draws, not
        an interval for its mean); the observed ``gamma``, ``rho`` and ``tilt`` (Δγ_t; :func:`gamma_rho`'s
        estimates) and ``p_gamma``, ``p_rho``, ``p_tilt``, ``q_gamma``, ``q_rho``, ``q_tilt``. The tilt's test is
        one-sided too (a tilt *toward* the basis); its null is the change of a random subspace's alignment
        across the same layer (:func:`null_draws_with_tilt`).
    """

    obs = gamma_rho(ts, bases, n_boot=0)
    gam, rho, tilt = null_draws_with_tilt(ts, bases, m=m, seed=seed)
    q = (1 - ci) / 2
    out: dict[str, Any] = {"layer": obs.layer.to_numpy(), "k": obs.k.to_numpy(), "chance": obs.chance.to_numpy(),
                           "draws": np.full(ts.steps, m)}
    for name, vals in (("gamma_null", gam), ("rho_null", rho), ("tilt_null", tilt)):
        lo, hi = np.quantile(vals, [q, 1 - q], axis=1)
        out.update({name: vals.mean(axis=1), f"{name}_lo": lo, f"{name}_hi": hi})
    for suffix in ("", "_lo", "_hi"):
        out[f"gamma_ratio_null{suffix}"] = out[f"gamma_null{suffix}"] / out["chance"]
    for name, draws in (("gamma", gam), ("rho", rho), ("tilt", tilt)):
        p = empirical_p(obs[name].to_numpy(), draws)
        out.update({name: obs[name].to_numpy(), f"p_{name}": p, f"q_{name}": benjamini_hochberg(p)})
    return pd.DataFrame(out)


# -- one layer's tilt on random tokens (chapter 1, section 1.2) ----------------------------------------------
@dataclass(frozen=True)
class TiltTest:
    """One layer's tilt toward a direction ``v`` on independent sets of random tokens, against chance and a null.

    Attributes:
        gamma_in, gamma: mean alignment ``a(x, v)`` of the tokens before and after the layer.
        chance: ``c_{d,1}``, the mean alignment of a random direction with a fixed line.
        gamma_null_lo, gamma_null_hi: central 95% range of ``gamma`` for the same output tokens against
            ``draws`` random directions. p_gamma: the one-sided empirical p-value of ``gamma``.
        rho: the share of tokens whose alignment grew; rho_null_lo, rho_null_hi, p_rho: its null test.
        draws: random directions in the null.
        tilt: ``gamma − gamma_in``; tilt_null_lo, tilt_null_hi, p_tilt: its own null test (the change of the same
            tokens' alignment with each random direction across the layer).
    """

    gamma_in: float
    gamma: float
    chance: float
    gamma_null_lo: float
    gamma_null_hi: float
    p_gamma: float
    rho: float
    rho_null_lo: float
    rho_null_hi: float
    p_rho: float
    draws: int
    tilt: float = float("nan")
    tilt_null_lo: float = float("nan")
    tilt_null_hi: float = float("nan")
    p_tilt: float = float("nan")


def one_layer_tilt(weights: Any, v: Any, *, n_tokens: int, n_sets: int, m: int = 1000, seed: int = 0) -> TiltTest:
    """Run one layer of :mod:`lib.theory.dynamics` on ``n_sets`` independent sets of ``n_tokens`` random tokens
    and test its tilt toward ``v``.

    Set ``s`` is :func:`lib.theory.toys.random_tokens` with seed ``s``; the sets play the role of prompts (the
    tokens of one set move together, so one set alone would be a weak test). The statistics are
    :func:`gamma_rho` (no bootstrap) and :func:`random_null` against ``m`` random directions (seed ``seed``),
    with ``v`` as a one-dimensional basis.
    """
    d = int(np.asarray(v).shape[0])
    runs = [dynamics.simulate(weights, toys.random_tokens(n_tokens, d, seed=s), 1).numpy() for s in range(n_sets)]
    ts = TokenStates.from_trajectories(runs)
    basis = np.asarray(v, dtype=np.float64)[:, None][None]
    null = random_null(ts, basis, m=m, seed=seed).iloc[0]
    obs = gamma_rho(ts, basis, n_boot=0).iloc[0]
    return TiltTest(float(obs.gamma_in), float(null.gamma), float(null.chance), float(null.gamma_null_lo),
                    float(null.gamma_null_hi), float(null.p_gamma), float(null.rho), float(null.rho_null_lo),
                    float(null.rho_null_hi), float(null.p_rho), m, float(null.tilt), float(null.tilt_null_lo),
                    float(null.tilt_null_hi), float(null.p_tilt))
