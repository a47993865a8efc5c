"""Checkers of chapter 3's exercises: γ and ρ of one layer, the token choice, a span's chance level, a null test.

The references are :mod:`lib.methods.alignment` (``gamma_rho``, ``baseline_subspace``, ``random_null``;
vectorised over prompts and layers, tested on their own) on toy token states built here; each checker names
the plausible mistakes (a signed cosine, the wrong tokens, the wrong chance level, uncorrected p-values...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lib.exercises.runner import (
    DEFAULT_TIME_LIMIT,
    Case,
    Wrong,
    as_array,
    as_float,
    as_int,
    as_pair,
    call,
    recording,
    run_cases,
)
from lib.methods.alignment import (
    EigenBases,
    TokenStates,
    baseline_subspace,
    eigen_bases,
    gamma_rho,
    random_directions,
    random_null,
)
from lib.theory import toys

__all__ = ["check_gamma_rho", "check_null_layers", "check_span_ratio", "check_token_shift"]


def _variants(Xi: np.ndarray, Xo: np.ndarray, v: np.ndarray) -> dict[str, tuple[float, float]]:
    """(γ, ρ) of the plausible wrong definitions, each with the feedback naming its mistake."""
    def cos(X: np.ndarray, signed: bool = False, normed: bool = True) -> np.ndarray:
        c = (X @ v) / (np.linalg.norm(X, axis=1) if normed else 1.0)
        return c if signed else np.abs(c)

    ci, co = cos(Xi), cos(Xo)
    si, so = cos(Xi, signed=True), cos(Xo, signed=True)
    di, do = cos(Xi, normed=False), cos(Xo, normed=False)
    wi, wo = np.abs(Xi @ v) / np.linalg.norm(Xi), np.abs(Xo @ v) / np.linalg.norm(Xo)
    return {
        "take the absolute cosine |x·v|/‖x‖ (the sign of an eigenvector is arbitrary)":
            (float(so.mean()), float((so > si).mean())),
        "divide by the token norms: γ is a mean |cosine|, not a mean |x·v|":
            (float(do.mean()), float((do > di).mean())),
        "ρ counts tokens whose |cosine| strictly increases (>, not ≥)":
            (float(co.mean()), float((co >= ci).mean())),
        "γ is the mean |cosine| of the layer's outputs X_out, not of its inputs X_in":
            (float(ci.mean()), float((co > ci).mean())),
        "divide each token by its own norm, np.linalg.norm(X, axis=1), not by the norm of the whole matrix":
            (float(wo.mean()), float((wo > wi).mean())),
        "ρ counts the tokens whose |cosine| increases from X_in to X_out, not those where it decreases":
            (float(co.mean()), float((co < ci).mean())),
        "return the pair in the order (gamma, rho)": (float((co > ci).mean()), float(co.mean())),
    }


def _which_half(g: float, r: float, G: float, R: float) -> str:
    """For a pair that matches no named mistake: which of γ and ρ is wrong, and what it is."""
    if abs(g - G) < 1e-10:
        return "γ is right, ρ is not: ρ is the fraction of the N tokens whose |cosine| with v strictly increases"
    if abs(r - R) < 1e-10:
        return "ρ is right, γ is not: γ is the mean over the N tokens of |x_out · v| / ‖x_out‖"
    return ""


_OFF_GAMMA_RHO = ("lib.methods.alignment.gamma_rho", "lib.methods.alignment.token_alignments", "lib.methods.alignment.step_alignment",)
"""The library's own versions of what the exercise asks for: off while the student's function runs."""


def check_gamma_rho(fn: Callable[[np.ndarray, np.ndarray, np.ndarray], Any], verbose: bool = True,
                    time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check a student's ``fn(X_in, X_out, v) -> (gamma, rho)`` for one layer.

    ``X_in`` and ``X_out`` are ``(N, d)`` token states (rows) entering and leaving the layer, ``v`` a unit
    ``(d,)`` direction. ``gamma`` is the mean absolute cosine of the outputs with ``v`` and ``rho`` the
    fraction of tokens whose absolute cosine strictly increases. Named (:func:`_variants`): a signed cosine, a
    dot product, ``≥``, the inputs' γ, the whole matrix's norm, decreases counted, the pair swapped; otherwise
    which of γ and ρ is wrong.
    """
    rng = np.random.default_rng(7)
    d, N = 16, 40
    v = random_directions(d, 1, seed=3)[0]
    X_in = rng.standard_normal((N, d))
    X_out = X_in + 1.5 * rng.standard_normal((N, 1)) * v  # pushed along ±v: mostly increases

    def reference(Xi: np.ndarray, Xo: np.ndarray, u: np.ndarray) -> tuple[float, float]:
        row = gamma_rho(TokenStates.from_trajectories([np.stack([Xi, Xo])]), u[:, None], n_boot=0).iloc[0]
        return float(row.gamma), float(row.rho)

    def compare(Xi: np.ndarray, Xo: np.ndarray, u: np.ndarray) -> Callable[[], None]:
        def run() -> None:
            g, r = as_pair(call(fn, Xi.copy(), Xo.copy(), u.copy()), "the result (gamma, rho)")
            g, r = as_float(g, "gamma"), as_float(r, "rho")
            G, R = reference(Xi, Xo, u)
            if abs(g - G) < 1e-10 and abs(r - R) < 1e-10:
                return
            why = next((hint for hint, (vg, vr) in _variants(Xi, Xo, u).items()
                        if abs(g - vg) < 1e-10 and abs(r - vr) < 1e-10), "") or _which_half(g, r, G, R)
            raise Wrong(f"got (γ, ρ) = ({g:.4f}, {r:.4f}), expected ({G:.4f}, {R:.4f})" + (f": {why}" if why else ""))
        return run

    return run_cases("check_gamma_rho", fn, [
        Case("random tokens, pushed along ±v", compare(X_in, X_out, v)),
        Case("sign of v does not matter (absolute cosine)", compare(X_in, X_out, -v)),
        Case("token norms do not matter (cosine, not dot product)", compare(3.0 * X_in, 0.1 * X_out, v)),
        Case("no change gives ρ = 0 (strict increase)", compare(X_in, X_in.copy(), v)),
    ], verbose, time_limit, off=_OFF_GAMMA_RHO)


# -- exercises 3.2–3.4: the same statistics, other tokens, other bases, another null ----------------------------
def _toy_bases(seed: int = 0) -> EigenBases:
    """Eigen-bases of three ``12 × 12`` layers whose ``span{v₁, v₂}`` has 2, 3 and 4 dimensions (real + real,
    complex + real, complex + complex leading eigenvalues), built with a prescribed spectrum."""
    bulk = list(np.linspace(0.5, 0.1, 8))
    spectrum_sets = ([3.0, 2.0] + bulk + [0.05, 0.02], [2.5 * np.exp(0.6j), 1.5] + bulk + [0.05],
               [2.5 * np.exp(0.6j), 1.5 * np.exp(1.1j)] + bulk)
    F = [toys.matrix_with_spectrum(s, seed=seed + i, cond=2.0) for i, s in enumerate(spectrum_sets)]
    return eigen_bases(np.stack(F))


def _toy_states(eb: EigenBases, seed: int, *, prompts: int = 7, special_push: float = 2.0) -> TokenStates:
    """Token trajectories through ``eb``'s layers: each layer adds noise and pulls every token toward its
    ``span{v₁, v₂}``; the special tokens (first and last of each prompt) are pulled ``special_push`` times harder
    toward ``v₁`` on the way out, so that they behave unlike the content tokens."""
    rng = np.random.default_rng(seed)
    d, T = eb.v1.shape[1], eb.n_layers
    trajs, specials = [], []
    for _ in range(prompts):
        n = int(rng.integers(4, 8))
        special = np.zeros(n, dtype=bool)
        special[[0, -1]] = True
        X = [rng.standard_normal((n, d))]
        for t in range(T):
            Y = X[-1] + 0.5 * rng.standard_normal((n, d))
            span = eb.v12[t] @ (eb.v12[t].T @ Y.T)  # projection on span{v₁, v₂}
            Y = Y + 0.8 * span.T
            pull = eb.v1[t] @ (eb.v1[t].T @ Y[special].T)
            Y[special] += special_push * pull.T
            X.append(Y)
        trajs.append(np.stack(X))
        specials.append(special)
    return TokenStates.from_trajectories(trajs, specials)


def _per_layer(fn: Callable[..., Any], ts: TokenStates, eb: Any, what: str) -> np.ndarray:
    """The student's per-layer result, as a ``(T,)`` float array."""
    return as_array(call(fn, ts, eb), (ts.steps,), what)


def _named(got: np.ndarray, want: np.ndarray, variants: dict[str, np.ndarray], what: str) -> None:
    """Raise :class:`Wrong` unless ``got`` equals ``want``, naming the first variant ``got`` equals."""
    if np.allclose(got, want, rtol=1e-9, atol=1e-12):
        return
    why = next((hint for hint, v in variants.items() if np.allclose(got, v, rtol=1e-9, atol=1e-12)), "")
    if not why:
        off = [t + 1 for t in range(len(want)) if not np.isclose(got[t], want[t], rtol=1e-9, atol=1e-12)]
        why = f"layers {', '.join(map(str, off))} differ" if len(off) > 1 else f"layer {off[0]} differs"
    raise Wrong(f"{what} {np.round(got, 4).tolist()}, expected {np.round(want, 4).tolist()}: {why}")


def check_token_shift(fn: Callable[[TokenStates, EigenBases], Any], verbose: bool = True,
                      time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(ts, eb) -> (T,)``: per layer, γ_t over *all* tokens minus γ_t over the content tokens only.

    ``ts`` holds every token (special ones included), ``eb`` the layers' :class:`EigenBases` (γ_t is measured
    against ``eb.v1``). The reference is :func:`lib.methods.alignment.gamma_rho`. Rejected by name: the special
    tokens alone instead of all tokens, the opposite sign, γ_t / chance instead of γ_t, ρ_t instead of γ_t, the
    span ``eb.v12`` instead of ``v₁``, a ratio instead of a difference.
    """
    def gamma(ts: TokenStates, eb: EigenBases, col: str = "gamma") -> np.ndarray:
        return gamma_rho(ts, eb, n_boot=0)[col].to_numpy()

    def case(eb: EigenBases, ts: TokenStates) -> Callable[[], None]:
        def run() -> None:
            got = _per_layer(fn, ts, eb, "the shift")
            content = gamma(ts.select("content"), eb)
            want = gamma(ts.select("all"), eb) - content
            variants = {
                "'all tokens' are the content and the special tokens together (ts.select('all')), "
                "not the special ones alone": gamma(ts.select("special"), eb) - content,
                "the sign: γₜ of all tokens minus γₜ of the content tokens": -want,
                "take γₜ itself (the column gamma), not γₜ / chance (gamma_ratio)":
                    gamma(ts.select("all"), eb, "gamma_ratio") - gamma(ts.select("content"), eb, "gamma_ratio"),
                "γₜ is the mean alignment (gamma), not the fraction of increases ρₜ (rho)":
                    gamma(ts.select("all"), eb, "rho") - gamma(ts.select("content"), eb, "rho"),
                "measure against v₁ (pass eb itself), not against span{v₁, v₂} (eb.v12)":
                    gamma(ts.select("all"), eb.v12) - gamma(ts.select("content"), eb.v12),
                "the shift is a difference, γₜ(all) − γₜ(content), not a ratio":
                    gamma(ts.select("all"), eb) / content,
            }
            _named(got, want, variants, "got the shift")
        return run

    eb = _toy_bases(0)
    return run_cases("check_token_shift", fn, [
        Case("special tokens pulled toward v₁", case(eb, _toy_states(eb, seed=1))),
        Case("special tokens like the others (the shift is small)",
             case(eb, _toy_states(eb, seed=2, special_push=0.0))),
    ], verbose, time_limit)


def check_span_ratio(fn: Callable[[TokenStates, EigenBases], Any], verbose: bool = True,
                     time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(ts, eb) -> (T,)``: per layer, γ_t against ``span{v₁,t, v₂,t}`` (``eb.v12[t]``, whose first
    ``eb.k12[t]`` columns are used) over the chance level ``c(d, k12_t)`` of that span's own dimension.

    The toy layers' spans have 2, 3 and 4 dimensions. Rejected by name: the chance level of a line, that of the
    padded width 4, no division by chance, a product with it, a ratio to v₁'s γ_t, the principal direction
    ``eb.v1`` instead of the span.
    """
    def col(ts: TokenStates, B: Any, name: str = "gamma_ratio") -> np.ndarray:
        return gamma_rho(ts, B, n_boot=0)[name].to_numpy()

    def case(eb: EigenBases, ts: TokenStates) -> Callable[[], None]:
        def run() -> None:
            got = _per_layer(fn, ts, eb, "the ratio")
            raw = col(ts, eb.v12, "gamma")
            want = raw / np.array([baseline_subspace(ts.d, int(k)) for k in eb.k12])
            variants = {
                "divide by the chance level of the span's own dimension k = eb.k12[t] (2 to 4), not a line's "
                "c(d, 1)": raw / baseline_subspace(ts.d, 1),
                "eb.v12 is zero-padded to 4 columns: its dimension is eb.k12[t], not 4":
                    raw / baseline_subspace(ts.d, 4),
                "divide γₜ by its chance level c(d, k)": raw,
                "measure against span{v₁, v₂} (eb.v12), not v₁ alone (eb.v1)": col(ts, eb),
                "divide γₜ by the chance level c(d, kₜ), do not multiply":
                    raw * np.array([baseline_subspace(ts.d, int(k)) for k in eb.k12]),
                "the ratio is to the chance level c(d, kₜ), not to γₜ of v₁ alone": raw / col(ts, eb, "gamma"),
            }
            _named(got, want, variants, "got")
        return run

    eb = _toy_bases(0)
    return run_cases("check_span_ratio", fn, [
        Case("spans of dimension 2, 3 and 4", case(eb, _toy_states(eb, seed=3))),
        Case("other tokens, the same layers", case(eb, _toy_states(eb, seed=4, prompts=5))),
    ], verbose, time_limit)


def _null_toy(seed: int = 18, d: int = 12) -> tuple[TokenStates, np.ndarray]:
    """Five layers and one direction each: layer 1 raises the tokens' alignment with its direction strongly, layer 2
    a little (its ρ beats the null before the Benjamini–Hochberg correction, not after), layer 3 lines the tokens
    up with layer 4's direction, from which layer 4 lets them drift back slightly (γ_4 beats its null, ρ_4 does
    not), layer 5 does nothing in particular."""
    rng = np.random.default_rng(seed)
    B = random_directions(d, 5, seed=seed + 100)
    trajs = []
    for _ in range(8):
        n = int(rng.integers(4, 8))
        X = [rng.standard_normal((n, d))]
        for t, push in enumerate((0.6, 0.08, 0.0, 0.0, 0.0)):
            Y = X[-1] + 0.6 * rng.standard_normal((n, d))
            if t == 2:
                u = B[3]
                Y = Y + 1.5 * np.sign(Y @ u)[:, None] * u * np.linalg.norm(Y, axis=1, keepdims=True)
            elif t == 3:
                u = B[3]
                Y = X[-1] - 0.15 * (X[-1] @ u)[:, None] * u + 0.1 * rng.standard_normal((n, d))
            else:
                u = B[t]
                Y = Y + push * np.sign(Y @ u)[:, None] * u * np.linalg.norm(Y, axis=1, keepdims=True)
            X.append(Y)
        trajs.append(np.stack(X))
    return TokenStates.from_trajectories(trajs), B[:, :, None]


def _layers(value: Any) -> tuple[int, ...]:
    """The student's answer as a tuple of ints (a tuple, list or integer array)."""
    if isinstance(value, np.ndarray):
        if value.ndim != 1 or (value.size and value.dtype.kind not in "iu"):
            raise Wrong(f"return the layers as a tuple of ints, got an array of dtype {value.dtype}")
        value = value.tolist()
    if not isinstance(value, (tuple, list)):
        raise Wrong(f"return the layers as a tuple of ints, e.g. (1, 3) or (), got {type(value).__name__}")
    floats = [x for x in value if isinstance(x, (float, np.floating))]
    if floats:
        raise Wrong(f"layers are ints such as 1 or 3, got the float {floats[0]!r}: convert each with int(...)")
    return tuple(as_int(x, "each layer") for x in value)


def check_null_layers(fn: Callable[[TokenStates, np.ndarray, int, int], Any], verbose: bool = True,
                      time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(ts, bases, m, seed) -> tuple``: the 1-based layers, in increasing order, whose ρ_t against
    ``bases`` beats the layer's own null of ``m`` random subspaces (seed ``seed``) at FDR 5%: ``q_rho < 0.05``
    in :func:`lib.methods.alignment.random_null`. Rejected by name: another ``m`` or ``seed`` than the ones given
    (the calls of ``random_null`` are recorded: a hard-coded ``m=1000, seed=0`` is named as such, before any
    other mistake its layers may look like), the uncorrected ``p_rho``, γ_t's test (``q_gamma``), 0-based
    layers, float layer numbers."""
    def case(ts: TokenStates, B: np.ndarray, m: int, seed: int) -> Callable[[], None]:
        def run() -> None:
            with recording("lib.methods.alignment.random_null") as calls:
                raw = call(fn, ts, B.copy(), m, seed)
            got = _layers(raw)
            null = random_null(ts, B, m=m, seed=seed)

            def where(mask: Any) -> tuple[int, ...]:
                return tuple(int(x) for x in null.layer[mask])

            want = where(null.q_rho < 0.05)
            if got == want:
                return
            other = [c for c in calls if (c["m"], c["seed"]) != (m, seed)]
            if other:
                raise Wrong(f"got layers {got}, expected {want}: you called random_null with m = {other[0]['m']}, "
                            f"seed = {other[0]['seed']}; use the m = {m} and seed = {seed} you are given "
                            "(random_null(ts, bases, m=m, seed=seed))")
            variants = {
                "use the Benjamini–Hochberg q-values (q_rho), not the raw p-values: testing every layer at 5% "
                "finds a layer by chance alone in many runs": where(null.p_rho < 0.05),
                "the test of ρₜ (q_rho), not of γₜ (q_gamma)": where(null.q_gamma < 0.05),
                "layers are numbered from 1 (the column layer), not from 0": tuple(t - 1 for t in want),
            }
            why = next((hint for hint, v in variants.items() if got == v and v != want), "")
            raise Wrong(f"got layers {got}, expected {want}" + (f": {why}" if why else ""))
        return run

    ts, B = _null_toy()
    noise, _ = _null_toy(seed=5)
    flat = TokenStates.from_trajectories([np.repeat(noise.states[:1], 6, axis=0)])  # nothing moves: ρ_t = 0
    return run_cases("check_null_layers", fn, [
        Case("five layers: strong, weak, none, γ without ρ, none", case(ts, B, 200, 0)),
        Case("another seed of the same null", case(ts, B, 200, 1)),
        Case("no layer moves the tokens (the answer is ())", case(flat, B, 100, 0)),
    ], verbose, time_limit)
