"""Checkers of chapter 6's exercises: the attention path, principal angles, the single-token update.

References: autograd of a small composed block, :func:`scipy.linalg.subspace_angles` (float64), and the
definition of the relative update with its own reference ``R`` (never :mod:`lib.methods.bridge`'s code). The
mistakes named: the factors in the wrong order, angles from unorthonormalised bases or from ``arccos``
alone, and dividing by the wrong norm for the block's layout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg
import torch

from lib.exercises.runner import DEFAULT_TIME_LIMIT, Case, Wrong, as_array, as_float, as_pair, call, run_cases

__all__ = ["check_attention_path", "check_principal_angles", "check_relative_update"]


def _arccos_angles(A: np.ndarray, B: np.ndarray, orthonormalise: bool) -> np.ndarray:
    if orthonormalise:
        A, B = np.linalg.qr(A)[0], np.linalg.qr(B)[0]
    return np.sort(np.arccos(np.clip(np.linalg.svd(A.T @ B, compute_uv=False), -1, 1)))


_OFF_PRINCIPAL_ANGLES = ("lib.methods.bridge.principal_angles", "scipy.linalg.subspace_angles",)
"""The library's own versions of what the exercise asks for: off while the student's function runs."""


def check_principal_angles(fn: Callable[[np.ndarray, np.ndarray], Any], verbose: bool = True,
                           time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check a student's ``fn(A, B) -> angles`` (radians, ascending) for two bases ``(d, p)``, ``(d, q)``.

    The bases need not be orthonormal; the result has ``min(p, q)`` angles. References are
    :func:`scipy.linalg.subspace_angles` (float64).
    """
    rng = np.random.default_rng(11)
    A = rng.standard_normal((12, 3))
    v = rng.standard_normal((12, 1))
    plane = rng.standard_normal((12, 2))
    mixed = A @ rng.standard_normal((3, 3)) + 0.3 * rng.standard_normal((12, 3))
    e1 = np.eye(12)[:, :1]
    tilted = (np.eye(12)[:, 0] + 1e-9 * np.eye(12)[:, 1])[:, None]

    def compare(P: np.ndarray, Q: np.ndarray, tol: float = 1e-8) -> Callable[[], None]:
        def run() -> None:
            raw = call(fn, P.copy(), Q.copy())
            ref = np.sort(scipy.linalg.subspace_angles(P, Q))
            n = np.size(raw) if isinstance(raw, (np.ndarray, list, tuple)) or hasattr(raw, "detach") else 1
            if n != ref.size:
                raise Wrong(f"expected {ref.size} angles (min(p, q)), got {n}")
            got = as_array(raw, np.shape(raw), "the angles").ravel()
            if np.any(np.diff(got) < 0):
                raise Wrong("return the angles in ascending order")
            err = float(np.abs(got - ref).max())
            if err < tol:
                return
            why = ""
            if np.abs(got - _arccos_angles(P, Q, True)).max() < tol:
                why = ": a tiny angle's cosine rounds to 1, so arccos returns 0; take small angles from the sines " \
                      "(the singular values of Q_B − Q_A Q_Aᵀ Q_B)"
            elif np.abs(got - _arccos_angles(P, Q, False)).max() < tol:
                why = ": orthonormalize the bases first (e.g. np.linalg.qr); the singular values of AᵀB are cosines " \
                      "only for orthonormal A and B"
            elif np.abs(got - np.degrees(ref)).max() < 1e-6:
                why = ": return radians, not degrees"
            elif np.abs(got - np.sort(np.cos(ref))).max() < 1e-6:
                why = ": those are the cosines of the angles; return the angles themselves (radians)"
            raise Wrong(f"largest error {err:.1e} rad (expected {np.round(ref, 4)})" + why)
        return run

    return run_cases("check_principal_angles", fn, [
        Case("a line and a plane", compare(v, plane)),
        Case("non-orthonormal inputs (orthonormalize first)", compare(5 * A, mixed)),
        Case("a subspace with itself gives zeros", compare(A, A @ np.diag([2.0, 3.0, 0.5]), tol=1e-7)),
        Case("a nearly parallel line (1e-9 rad: use the sine)", compare(e1, tilted, tol=1e-12)),
    ], verbose, time_limit, off=_OFF_PRINCIPAL_ANGLES)


def check_attention_path(fn: Callable[[np.ndarray, np.ndarray, np.ndarray, bool], Any], verbose: bool = True,
                         time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(J_mlp, J_n1, F, post) -> (J, J_F)``: one block's Jacobian and its attention path.

    ``J_mlp`` is the MLP sub-block's Jacobian, ``J_n1`` the first norm's Jacobian (at ``x`` for pre-norm,
    at ``z = x + F x + b`` for post-norm), ``F`` the layer matrix; ``post`` is a bool. Pre-norm:
    ``J = J_mlp (I + F J_n1)``; post-norm: ``J = J_mlp J_n1 (I + F)``; ``J_F`` is the term through ``F``.
    The reference of ``J`` is autograd of the composed map; ``J − J_F`` must be the path that avoids ``F``
    at the same evaluation points.
    """
    rng = np.random.default_rng(5)
    d = 6
    F = rng.standard_normal((d, d)) / np.sqrt(d)
    Wm = rng.standard_normal((d, d)) / np.sqrt(d)
    x = rng.standard_normal(d)

    def ln(v: torch.Tensor) -> torch.Tensor:  # a parameter-free LayerNorm
        c = v - v.mean()
        return c / torch.sqrt((c**2).mean() + 1e-5)

    def mlp(u: torch.Tensor) -> torch.Tensor:  # residual MLP sub-block
        return u + torch.tanh(torch.as_tensor(Wm) @ u)

    def case(post: bool) -> Callable[[], None]:
        def run() -> None:
            xt, Ft = torch.as_tensor(x), torch.as_tensor(F)

            def block(v: torch.Tensor) -> torch.Tensor:
                return mlp(ln(v + Ft @ v)) if post else mlp(v + Ft @ ln(v))

            J_ref = torch.autograd.functional.jacobian(block, xt).numpy()
            with torch.no_grad():
                u = ln(xt + Ft @ xt) if post else xt + Ft @ ln(xt)
            J_mlp = torch.autograd.functional.jacobian(mlp, u).numpy()
            J_n1 = torch.autograd.functional.jacobian(ln, xt + Ft @ xt if post else xt).numpy()
            J, J_F = as_pair(call(fn, J_mlp.copy(), J_n1.copy(), F.copy(), post), "the result (J, J_F)")
            J, J_F = as_array(J, (d, d), "J"), as_array(J_F, (d, d), "J_F")
            I = np.eye(d)
            err = np.linalg.norm(J - J_ref) / np.linalg.norm(J_ref)
            if err > 1e-8:
                swapped = J_mlp @ (I + F) @ J_n1 if post else J_mlp @ (I + J_n1 @ F)
                if np.linalg.norm(J - swapped) < 1e-8 * np.linalg.norm(J_ref):
                    order = ("post-norm: u = LN₁(x + F x + b), so ∂u/∂x = J_n1 (I + F), the norm's Jacobian on the "
                             "left" if post else "pre-norm: u = x + F N₁(x) + b, so ∂u/∂x = I + F J_n1, F on the left")
                    raise Wrong(f"J differs from autograd by {err:.1e}: the factors are in the wrong order ({order})")
                raise Wrong(f"J differs from autograd by {err:.1e} (relative)")
            skip = J_mlp @ (J_n1 if post else I)
            err_f = np.linalg.norm(J - J_F - skip) / np.linalg.norm(skip)
            if err_f > 1e-8:
                path = "J_mlp J_n1" if post else "J_mlp"
                raise Wrong(f"J − J_F should be the path that avoids F ({path}); off by {err_f:.1e}")
        return run

    return run_cases("check_attention_path", fn, [
        Case("pre-norm block (GPT-2, Llama)", case(False)),
        Case("post-norm block (BERT)", case(True)),
    ], verbose, time_limit)


def check_relative_update(fn: Callable[[np.ndarray, np.ndarray, str], Any], verbose: bool = True,
                          time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(J_single, J_ctx, layout) -> float``: ``‖J_ctx − J_single‖_F / ‖J_ctx − R‖_F``.

    ``R`` is the part of ``J`` that is not the block's update: ``I`` for ``layout="pre-norm"`` (the residual
    path), ``0`` for ``"post-norm"``.
    """
    rng = np.random.default_rng(3)
    d = 8
    Jc = np.eye(d) + 0.2 * rng.standard_normal((d, d))
    Js = Jc + 0.01 * rng.standard_normal((d, d))

    def compare(layout: str) -> Callable[[], None]:
        def run() -> None:
            got = as_float(call(fn, Js.copy(), Jc.copy(), layout), "the relative update")
            R = np.eye(d) if layout == "pre-norm" else np.zeros((d, d))
            want = float(np.linalg.norm(Jc - Js) / np.linalg.norm(Jc - R))
            if abs(got - want) < 1e-10 * max(1.0, want):
                return
            why = ""
            fro = np.linalg.norm
            if abs(got - want**2) < 1e-10 * max(1.0, want):
                why = ": that is the square of the ratio; use the norms themselves, not their squares"
            elif abs(got - fro(Jc - Js, 2) / fro(Jc - R, 2)) < 1e-10:
                why = ": use the Frobenius norm (np.linalg.norm of the matrix), not the spectral norm (ord=2)"
            elif abs(got - fro(Jc - Js) / fro(Js - R)) < 1e-10:
                why = ": divide by the in-context update ‖J_ctx − R‖_F, not the single-token one"
            elif layout == "pre-norm" and abs(got - np.linalg.norm(Jc - Js) / np.linalg.norm(Jc)) < 1e-10:
                why = ": a pre-norm block's update is J − I (the residual path is not part of it): divide by ‖J_ctx − I‖"
            elif layout == "post-norm" and abs(got - np.linalg.norm(Jc - Js) / np.linalg.norm(Jc - np.eye(d))) < 1e-10:
                why = ": a post-norm block has no identity path around its norm: divide by ‖J_ctx‖"
            raise Wrong(f"got {got:.6f}, expected {want:.6f}" + why)
        return run

    return run_cases("check_relative_update", fn, [
        Case("pre-norm: relative to J − I", compare("pre-norm")),
        Case("post-norm: relative to J", compare("post-norm")),
    ], verbose, time_limit)
