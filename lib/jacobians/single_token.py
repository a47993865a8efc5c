"""Closed-form single-token block Jacobians (chapter 4, section 4.2: single-token protocol) [ours].

A token alone attends only to itself: the softmax over one score is 1, RoPE at position 0 is the
identity, and QK-norms, logit soft-capping and sliding windows act on scores only. So on a single
token the attention core is **affine**, ``n ↦ F n + b`` with ``F = O V`` and ``b = O b_V + b_O``, and
every block is a composition of norms, that affine map, an elementwise-activated MLP and skips. Its
Jacobian is then a product of known factors, formed here without autodiff:

* a norm's Jacobian is **diagonal minus low rank** (:class:`DiagLowRank`):
  LayerNorm ``y = γ ⊙ x̂ + β``, ``x̂ = (x − μ)/σ``: ``J = diag(γ/σ) (I − 1 1ᵀ/d − x̂ x̂ᵀ/d)``;
  RMSNorm ``y = g ⊙ x / r``, ``r = sqrt(mean x² + ε)`` (``g = γ``, Gemma: ``1 + γ``):
  ``J = diag(g/r) (I − x xᵀ/(d r²))``; applied to a dense matrix in ``O(d²)``, not ``O(d³)``;
* the MLP core is ``C = W_out diag(φ'(z)) W_in`` (GELU MLPs) or, for gated MLPs
  ``W_down (act(g) ⊙ W_up n)``, ``C = W_down [diag(act'(g) ⊙ up) W_gate + diag(act(g)) W_up]``:
  one ``d × d_ff × d`` product per token, the unavoidable cost (autodiff pays it two or three times);
* the block Jacobian is ``J_mlp(u) J_attn(x)`` with, by family (``J_n`` a norm's Jacobian at its input):

  ========================  ==============================================  ================================================
  family                    ``J_attn(x)``                                   ``J_mlp(u)``
  ========================  ==============================================  ================================================
  GPT-2, GPT-Neo, Llama     ``I + F J_n1(x)``                               ``I + C J_n2(u)``
  BERT, ALBERT (post-LN)    ``J_LN1(x + F x + b) (I + F)``                  ``J_LN2(u + mlp(u)) (I + C)``
  OLMo-2 (post-norms)       ``I + J_post1(F x + b) F``                      ``I + J_post2(mlp(u)) C``
  Gemma-2 (both)            ``I + J_post1(F n1 + b) F J_n1(x)``             ``I + J_post2(mlp(n2)) C J_pre2(u)``
  ========================  ==============================================  ================================================

Everything runs in the model's dtype on the model's device; :func:`lib.jacobians.sweep.layer_jacobians`
(``method="closed"``, its default) calls :func:`block_jacobians` and returns float64. Tests compare
every family against autodiff of the real modules in float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from lib.errors import InputError

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = ["DiagLowRank", "attention_affine", "attention_input_norm", "attention_sublayer", "block_jacobians", "flops",
           "mlp_part", "norm_jacobian"]

PARTS: tuple[str, ...] = ("block", "attn", "mlp")


def flops(d: int, d_ff: int, prompts: int = 1, layers: int = 1) -> float:
    """Matrix-product FLOPs of :func:`block_jacobians` for ``prompts × layers`` block Jacobians:
    ``2 d² d_ff`` (the MLP core) ``+ 2 d³`` (``J_mlp J_attn``) each; the norms' and the attention's
    terms are ``O(d²)`` and left out."""
    return float(prompts * layers * (2 * d * d * d_ff + 2 * d**3))


@dataclass(frozen=True)
class DiagLowRank:
    """A batch of Jacobians ``J_p = diag(s_p) − A_p B_pᵀ``: s ``(P, d)``, A and B ``(P, d, r)``."""

    s: torch.Tensor
    A: torch.Tensor
    B: torch.Tensor

    def right_of(self, M: torch.Tensor) -> torch.Tensor:
        """``M J`` for dense ``M`` ``(P, m, d)``, in ``O(m d r)``."""
        return M * self.s[:, None, :] - (M @ self.A) @ self.B.transpose(1, 2)

    def left_of(self, M: torch.Tensor) -> torch.Tensor:
        """``J M`` for dense ``M`` ``(P, d, m)``, in ``O(d m r)``."""
        return self.s[:, :, None] * M - self.A @ (self.B.transpose(1, 2) @ M)

    def dense(self) -> torch.Tensor:
        """``(P, d, d)``."""
        return torch.diag_embed(self.s) - self.A @ self.B.transpose(1, 2)


def norm_jacobian(norm: nn.Module, X: torch.Tensor) -> DiagLowRank:
    """Jacobians of a LayerNorm or RMSNorm module at every row of ``X`` ``(P, d)`` (module docstring).

    Raises:
        InputError: a norm of another kind (no closed form here; use ``method="autodiff"``).
    """
    d = X.shape[-1]
    name = type(norm).__name__
    if isinstance(norm, nn.LayerNorm):
        mu = X.mean(-1, keepdim=True)
        sigma = torch.sqrt(X.var(-1, unbiased=False, keepdim=True) + norm.eps)
        xh = (X - mu) / sigma
        gain = norm.weight if norm.weight is not None else torch.ones_like(X[0])
        s = gain * (1.0 / sigma)
        ones = torch.ones_like(X)
        A = torch.stack([s, s * xh], dim=-1)
        B = torch.stack([ones, xh], dim=-1) / d
        return DiagLowRank(s, A, B)
    if name.endswith("RMSNorm"):
        eps = getattr(norm, "variance_epsilon", None) or getattr(norm, "eps")
        r = torch.sqrt(X.pow(2).mean(-1, keepdim=True) + eps)
        gain = (1.0 + norm.weight) if name.startswith("Gemma") else norm.weight
        s = gain * (1.0 / r)
        return DiagLowRank(s, (s * X)[..., None], (X / (d * r * r))[..., None])
    raise InputError(f"no closed-form Jacobian for a norm of type {name}; use method='autodiff'")


def attention_affine(model: SpectralModel, t: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(F, b)`` of block ``t``'s attention core on a single token, ``n ↦ F n + b`` (module docstring).

    Returns ``F = O V`` ``(d, d)`` and ``b = O b_V + b_O`` ``(d,)``, formed in the model's dtype on its
    device (the precision of the forward pass that autodiff would differentiate).
    """
    att = model.layer(t).attention  # float64 copies on the host
    p = model.param(t)  # the device that holds block t

    def here(M: torch.Tensor) -> torch.Tensor:  # the products run on the model's device, in its dtype
        return M.to(device=p.device, dtype=p.dtype)

    O = here(att.O)
    F = O @ here(att.V)
    b = torch.zeros(F.shape[0], dtype=p.dtype, device=p.device)
    if att.b_V is not None:
        b = b + O @ here(att.b_V)
    if att.b_O is not None:
        b = b + here(att.b_O)
    return F, b


def _act_and_slope(act: nn.Module, Z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(φ(Z), φ'(Z))`` of an elementwise activation module (one reverse-mode pass).

    For an elementwise ``φ`` the gradient of ``Σ φ(Z)`` is ``φ'(Z)``. Reverse mode, not
    ``torch.func.jvp``: forward-mode AD keeps its dual level process-wide, so two threads taking
    Jacobians side by side (:func:`lib.parallel.map_matrices` over models) would mix their tangents;
    autograd's state is per thread.
    """
    with torch.enable_grad():
        Zr = Z.detach().requires_grad_(True)
        a = act(Zr)
        (slope,) = torch.autograd.grad(a.sum(), Zr)
    return a.detach(), slope


def _linear(module: nn.Module, conv1d: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(W, b)`` in column convention (``y = W x + b``); GPT-2's ``Conv1D`` stores ``Wᵀ``.

    The transpose is made contiguous once, so that the per-prompt scaled copies built from ``W`` are
    contiguous too and the big product needs no further copy.
    """
    W = module.weight
    return (W.T.contiguous() if conv1d else W), module.bias


def _mlp_core(model: SpectralModel, blk: nn.Module, N: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(C, m)``: the MLP core's Jacobian ``(P, d, d)`` and value ``(P, d)`` at its (normalized) input ``N``."""
    fam = model.family
    if fam in ("llama", "olmo2", "gemma2"):
        mlp = blk.mlp
        G = N @ mlp.gate_proj.weight.T
        Up = N @ mlp.up_proj.weight.T
        a, da = _act_and_slope(mlp.act_fn, G)
        W_d, W_g, W_u = mlp.down_proj.weight, mlp.gate_proj.weight, mlp.up_proj.weight
        C = _per_prompt(lambda p: W_d @ ((da[p] * Up[p])[:, None] * W_g + a[p][:, None] * W_u), N)
        return C, (a * Up) @ W_d.T
    if fam == "bert":
        (W_i, b_i), act, (W_o, b_o) = _linear(blk.intermediate.dense, False), blk.intermediate.intermediate_act_fn, \
            _linear(blk.output.dense, False)
    elif fam == "albert":
        (W_i, b_i), act, (W_o, b_o) = _linear(blk.ffn, False), blk.activation, _linear(blk.ffn_output, False)
    elif fam in ("gpt2", "gpt_neo"):
        conv = fam == "gpt2"
        (W_i, b_i), act, (W_o, b_o) = _linear(blk.mlp.c_fc, conv), blk.mlp.act, _linear(blk.mlp.c_proj, conv)
    else:  # pragma: no cover - every supported family is handled
        raise NotImplementedError(f"closed-form MLP Jacobian of family {fam!r}")
    Z = N @ W_i.T + (b_i if b_i is not None else 0)
    a, da = _act_and_slope(act, Z)
    m = a @ W_o.T + (b_o if b_o is not None else 0)
    return _per_prompt(lambda p: (W_o * da[p]) @ W_i, N), m


def _per_prompt(product, N: torch.Tensor) -> torch.Tensor:
    """``(P, d, d)`` from one ``(d, d)`` matrix product per prompt: a loop of plain matrix products over
    contiguous operands, which avoids the ``(P, d, d_ff)`` copies a broadcast batched product makes."""
    P, d = N.shape
    C = torch.empty(P, d, d, dtype=N.dtype, device=N.device)
    for p in range(P):
        C[p] = product(p)
    return C


def _identity_plus(M: torch.Tensor) -> torch.Tensor:
    return M + torch.eye(M.shape[-1], dtype=M.dtype, device=M.device)


def attention_input_norm(model: SpectralModel, blk: nn.Module) -> nn.Module | None:
    """The norm in front of block ``blk``'s attention core (GPT-2, GPT-Neo, Llama, Gemma-2), else ``None``
    (post-norm BERT, ALBERT and OLMo-2 feed the residual itself to the attention)."""
    fam = model.family
    if fam in ("gpt2", "gpt_neo"):
        return blk.ln_1
    if fam in ("llama", "gemma2"):
        return blk.input_layernorm
    return None


def attention_sublayer(model: SpectralModel, blk: nn.Module, X: torch.Tensor, o: torch.Tensor,
                       A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(J_attn, u)``: the attention sub-block's Jacobians ``(P, d, d)`` and outputs ``(P, d)`` at the
    residuals ``X`` ``(P, d)``, given the attention core's outputs ``o`` ``(P, d)`` and its Jacobians
    ``A = ∂o/∂n`` ``(P, d, d)`` with respect to its input ``n`` (``X`` or its pre-norm, see
    :func:`attention_input_norm`). Single token: ``o = F n + b``, ``A = F``; in context
    (:mod:`lib.jacobians.in_context`): the real attention output and its Jacobian at the position."""
    fam = model.family
    if fam in ("bert", "albert"):
        ln = blk.attention.output.LayerNorm if fam == "bert" else blk.attention.LayerNorm
        Z = X + o
        return norm_jacobian(ln, Z).left_of(_identity_plus(A)), ln(Z)
    if fam in ("gpt2", "gpt_neo", "llama"):
        return _identity_plus(norm_jacobian(attention_input_norm(model, blk), X).right_of(A)), X + o
    if fam == "olmo2":
        post = blk.post_attention_layernorm
        return _identity_plus(norm_jacobian(post, o).left_of(A)), X + post(o)
    if fam == "gemma2":
        post = blk.post_attention_layernorm
        inner = norm_jacobian(blk.input_layernorm, X).right_of(A)
        return _identity_plus(norm_jacobian(post, o).left_of(inner)), X + post(o)
    raise NotImplementedError(f"closed-form attention Jacobian of family {fam!r}")  # pragma: no cover


def _attn_part(model: SpectralModel, blk: nn.Module, F: torch.Tensor, b: torch.Tensor,
               X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(J_attn, u)`` on single tokens, where the attention core is the affine ``n ↦ F n + b``."""
    pre = attention_input_norm(model, blk)
    N = X if pre is None else pre(X)
    return attention_sublayer(model, blk, X, N @ F.T + b, F.expand(X.shape[0], *F.shape))


def mlp_part(model: SpectralModel, blk: nn.Module, U: torch.Tensor) -> torch.Tensor:
    """``J_mlp`` ``(P, d, d)`` of the MLP sub-block at the mid-block residuals ``U``."""
    fam = model.family
    if fam in ("bert", "albert"):
        C, m = _mlp_core(model, blk, U)
        ln = blk.output.LayerNorm if fam == "bert" else blk.full_layer_layer_norm
        return norm_jacobian(ln, U + m).left_of(_identity_plus(C))
    if fam in ("gpt2", "gpt_neo", "llama"):
        pre = blk.ln_2 if fam != "llama" else blk.post_attention_layernorm
        C, _ = _mlp_core(model, blk, pre(U))
        return _identity_plus(norm_jacobian(pre, U).right_of(C))
    if fam == "olmo2":
        C, m = _mlp_core(model, blk, U)
        return _identity_plus(norm_jacobian(blk.post_feedforward_layernorm, m).left_of(C))
    if fam == "gemma2":
        pre, post = blk.pre_feedforward_layernorm, blk.post_feedforward_layernorm
        C, m = _mlp_core(model, blk, pre(U))
        return _identity_plus(norm_jacobian(post, m).left_of(norm_jacobian(pre, U).right_of(C)))
    raise NotImplementedError(f"closed-form MLP Jacobian of family {fam!r}")  # pragma: no cover


@torch.no_grad()
def block_jacobians(model: SpectralModel, t: int, X: torch.Tensor, part: str = "block",
                    affine: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Single-token Jacobians of block ``t`` at the rows of ``X`` ``(P, d)`` (model dtype and device).

    Args:
        part: ``"block"``, ``"attn"`` (``x ↦ u``) or ``"mlp"`` (``u ↦ f``, at ``u = attn(x)``).
        affine: :func:`attention_affine` of block ``t`` if already computed (callers that chunk the
            prompts pass it, so ``F = O V`` is formed once per layer, not once per chunk).
    Returns:
        ``(P, d, d)`` in the model's dtype (column convention, ``J[i, j] = ∂f_i/∂x_j``).
    """
    if part not in PARTS:
        raise InputError(f"part must be one of {PARTS}, got {part!r}")
    blk = model.blocks[t]
    F, b = attention_affine(model, t) if affine is None else affine
    J_attn, U = _attn_part(model, blk, F, b, X)
    if part == "attn":
        return J_attn
    J_mlp = mlp_part(model, blk, U)
    return J_mlp if part == "mlp" else J_mlp @ J_attn
