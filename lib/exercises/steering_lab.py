"""Checkers of chapter 5's exercises: the steering vector ``w`` of the eigen-edit, and the sign variant.

:func:`check_steering_w`: references ``pinv(V)ᵀ u`` (SVD-based, float64) and the projection of ``u`` on the
row space of ``V``, never :func:`lib.methods.steering.choose_w`. The mistakes named: a ``w`` that solves ``Vᵀw = u``
but carries a component in the null space of ``Vᵀ`` (not the minimum-norm one), ``V w`` or ``V⁻¹u``
instead of the transpose, and an exact solve where the system has no solution.

:func:`check_sign_variant`: reference :func:`lib.chapters.steering_lab.sign_variant` on the chapter's own decoder
lab. The mistakes named: a ``w`` of the wrong norm, the mean of per-prompt means instead of the mean over
all tokens, the default ``w`` instead of the variant's, and the top-1 rate measured after the ``with``
block (the unedited model).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from lib.exercises.runner import DEFAULT_TIME_LIMIT, Case, Wrong, as_array, as_float, call, run_cases
from lib.linalg import spectra
from lib.models.weights import expand_kv

__all__ = ["check_sign_variant", "check_steering_w"]


def _gqa(rng: np.random.Generator, n_heads: int, n_kv: int, head_dim: int, d: int) -> np.ndarray:
    """A random grouped-query value matrix, expanded to ``(H·d_h, d)`` (rank ``n_kv·d_h``)."""
    V_kv = torch.from_numpy(rng.standard_normal((n_kv * head_dim, d)))
    return expand_kv(V_kv, n_heads, n_kv, head_dim).numpy()


_OFF_STEERING_W = ("lib.methods.steering.choose_w",)
"""The library's own versions of what the exercise asks for: off while the student's function runs."""


def check_steering_w(fn: Callable[[np.ndarray, np.ndarray], Any], verbose: bool = True,
                     time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check the student's ``fn(V, u) -> w``: the minimum-norm least-squares solution of ``V_Lᵀ w = u``.

    ``V`` is ``(H·d_h, d)`` (expanded value matrix), ``u`` a unit ``(d,)``. Each case checks ``z = Vᵀ w``
    (``u`` itself when ``V`` has full column rank, else the projection of ``u`` on the row space of
    ``V``) and then ``w`` itself against ``pinv(V)ᵀ u``: a ``w`` shifted along the null space of
    ``Vᵀ`` gives the same ``z`` but is rejected, with feedback naming the null-space component.
    Cases: square invertible (MHA); grouped-query with ``H·d_h = d`` (the book decoder: rank
    ``n_kv·d_h = d/2``); ``H·d_h = 2d`` with distinct heads (full column rank, a null space of
    dimension ``d``); Gemma-2-9B-like grouped-query (``H·d_h = 8d/7 > d`` but rank
    ``n_kv·d_h = 4d/7 < d``: ``z ≠ u``).
    """
    rng = np.random.default_rng(5)

    def unit(d: int) -> np.ndarray:
        u = rng.standard_normal(d)
        return u / np.linalg.norm(u)

    d = 12
    V_sq = rng.standard_normal((d, d))
    V_gqa = _gqa(rng, 4, 2, 3, d)        # 4 query heads, 2 KV heads of width 3
    V_tall = rng.standard_normal((2 * d, d))                            # 4 distinct heads of width 6
    V_gemma = _gqa(rng, 4, 2, 4, 14)      # d = 14, H·d_h = 16, n_kv·d_h = 8

    def case(V: np.ndarray, u: np.ndarray) -> Callable[[], None]:
        def run() -> None:
            w = as_array(call(fn, V.copy(), u.copy()), (V.shape[0],), "w (shape (H·dₕ,))")
            full_rank = np.linalg.matrix_rank(V) == V.shape[1]
            want_z = u if full_rank else np.linalg.pinv(V) @ V @ u
            err = float(np.abs(V.T @ w - want_z).max())
            if err > 1e-8:
                if V.shape[0] == V.shape[1] and np.abs(V @ w - u).max() < 1e-8:
                    raise Wrong("you solved V w = u; the edit needs Vᵀ w = u (solve with V.T)")
                what = "Vᵀw − u" if full_rank else "z − P_row u (V is rank-deficient: z is the projection of u)"
                hint = "solve Vᵀ w = u (do not form an inverse)" if V.shape[0] == V.shape[1] and full_rank else \
                    "no w solves Vᵀ w = u exactly here; use the minimum-norm least-squares solution " \
                    "w = pinv(V)ᵀ u (np.linalg.lstsq(V.T, u))"
                raise Wrong(f"max |{what}| = {err:.2e}; {hint}")
            w_min = np.linalg.pinv(V).T @ u
            off = float(np.linalg.norm(w - w_min))
            if off > 1e-8 * max(1.0, float(np.linalg.norm(w_min))):
                raise Wrong(f"z = Vᵀw is right, but w is not the minimum-norm solution: it has a component of norm "
                            f"{off:.2e} in the null space of Vᵀ. That component leaves F_L' unchanged but changes "
                            "wᵀo_i, hence the real layer's output; return w = pinv(V)ᵀ u (np.linalg.lstsq(V.T, u))")
        return run

    return run_cases("check_steering_w", fn, [
        Case("square, invertible V (MHA): z = u", case(V_sq, unit(d))),
        Case("grouped-query V, H·dₕ = d (book decoder: rank nₖᵥ·dₕ = d/2): z = projection of u",
             case(V_gqa, unit(d))),
        Case("H·dₕ = 2d, distinct heads (full column rank): z = u, w of minimum norm", case(V_tall, unit(d))),
        Case("grouped-query, H·dₕ > d > nₖᵥ·dₕ (Gemma-2-9B-like, rank 4d/7): z = projection of u",
             case(V_gemma, unit(14))),
    ], verbose, time_limit, off=_OFF_STEERING_W)


def _triple(value: Any) -> tuple[Any, Any, Any]:
    if isinstance(value, (tuple, list)) and len(value) == 3:
        return value[0], value[1], value[2]
    raise Wrong(f"return the triple (c, sign_agreement, top1), got {type(value).__name__}")


@functools.cache
def _decoder_lab() -> Any:
    """The checker's own lab: the book decoder with its LM head over 8 prompts of the book's language."""
    from lib.chapters import steering_lab as sl
    from lib.models import load_model
    from lib.models.decoder import language

    return sl.Lab(load_model("book-decoder", with_lm_head=True), language.prompts(8), prompt="the sailor watches")


_OFF_SIGN_VARIANT = ("lib.chapters.steering_lab.sign_variant",)
"""The library's own versions of what the exercise asks for: off while the student's function runs."""


def check_sign_variant(fn: Callable[[Any, Any, float], Any], lab: Any = None, verbose: bool = True,
                       time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(lab, u, alpha) -> (c, sign_agreement, top1)``: the O-edit with ``w`` the unit mean head output.

    ``lab`` is a :class:`lib.chapters.steering_lab.Lab` of a decoder with an LM head (default: the book decoder over 8
    prompts of the book's language, built once); ``u`` a word :class:`lib.methods.steering.Direction` of its model,
    ``alpha`` relative (``α|c| = alpha·|λ₁(F_L)|``). The student builds ``w = ō/‖ō‖`` from the mean ``ō`` of
    ``lab.head_outputs(-1)`` over every token of every prompt, steers with
    ``steering.steer(lab.model, u, alpha, w=w)``, and returns the edit's ``c``, the fraction of tokens with
    ``wᵀ o_i > 0`` and the fraction of prompts whose most likely next token is ``u``'s word with the edit in
    place. Cases: ``boat`` at α = 100 and 20, ``the`` at α = 100 (reference
    :func:`lib.chapters.steering_lab.sign_variant`); the mistakes named are listed in the module docstring.
    """
    from lib.parallel import one_thread

    with one_thread():  # small model: spinning BLAS threads made each case 20–40× slower
        lab = _decoder_lab() if lab is None else lab
        lab.head_outputs(-1)  # cached here, once: each case runs in a child process, whose caches are lost
        return _sign_variant_cases(fn, lab, verbose, time_limit)


def _sign_variant_cases(fn: Callable[[Any, Any, float], Any], lab: Any, verbose: bool,
                        time_limit: float | None) -> bool:
    from lib.chapters import steering_lab as sl
    from lib.methods import steering

    def case(word: str, alpha: float) -> Callable[[], None]:
        def run() -> None:
            u = steering.word_direction(lab.model, word)
            c, sign, top1 = _triple(call(fn, lab, u, alpha))
            c, sign, top1 = as_float(c, "c"), as_float(sign, "sign_agreement"), as_float(top1, "top1")
            want = sl.sign_variant(lab, u, alpha)
            outs = lab.head_outputs(-1)
            o_bar = np.concatenate(outs).mean(0)
            per_prompt = np.mean([o.mean(0) for o in outs], axis=0)
            if abs(c - want["c"]) > 1e-6 * max(1.0, abs(want["c"])):
                with steering.steer(lab.model, u, alpha) as default:
                    c_default = default.c
                if abs(c - c_default) < 1e-6 * max(1.0, abs(c_default)):
                    raise Wrong(f"c = {c:.4f} is the default w's (choose_w); pass the variant's w to steer(..., w=w)")
                if abs(c - want["c"] * np.linalg.norm(o_bar)) < 1e-6 * max(1.0, abs(c)):
                    raise Wrong(f"c = {c:.4f} is ‖ō‖ times the expected {want['c']:.4f}: w must have unit norm, "
                                "w = ō / ‖ō‖")
                c_pp = float(per_prompt / np.linalg.norm(per_prompt) @ spectra.as_float64(lab.model.layer(-1)
                                                                                   .attention.V) @ u.vector)
                if abs(c - c_pp) < 1e-6 * max(1.0, abs(c_pp)):
                    raise Wrong(f"c = {c:.4f}: you averaged the per-prompt means; ō is the mean over all tokens "
                                "of all prompts, np.concatenate(outs).mean(0)")
                raise Wrong(f"c = {c:.4f}, expected {want['c']:.4f} (c = zᵀu with z = V_Lᵀ w)")
            if abs(sign - want["sign_agreement"]) > 1e-9:
                raise Wrong(f"sign agreement {sign:.4f}, expected {want['sign_agreement']:.4f}: the fraction of "
                            "all tokens with wᵀo_i > 0, steering.sign_agreement(edit, outs)")
            if abs(top1 - want["top1"]) > 1e-9:
                unedited = sl.target_ranks(lab.logits(lab.real_states(-1)), u.token_id)
                if abs(top1 - float(np.mean(unedited == 1))) < 1e-9:
                    raise Wrong(f"top-1 rate {top1:.3f} is the unedited model's: compute the logits inside the "
                                "with block, while the edit is in place")
                raise Wrong(f"top-1 rate {top1:.3f}, expected {want['top1']:.3f} (the fraction of prompts whose "
                            "target rank is 1)")
        return run

    return run_cases("check_sign_variant", fn, [
        Case("boat at α|c|/|λ₁| = 100", case("boat", 100)),
        Case("boat at α|c|/|λ₁| = 20", case("boat", 20)),
        Case("the at α|c|/|λ₁| = 100 (a frequent word)", case("the", 100)),
    ], verbose, time_limit, off=_OFF_SIGN_VARIANT)
