"""Closed-form in-context block Jacobians (chapter 6, section 6.5) [ours].

The in-context diagonal block ``∂h_{t+1}[T]/∂h_t[T]`` holds every other position's input fixed. Only
position ``T``'s own attention input ``n = n(x)`` (``x = h_t[T]``) moves: its query, and its own key and
value among the keys and values of the positions it sees. Everything after the attention core acts on
position ``T`` alone, so the block Jacobian is the single-token one of :mod:`lib.jacobians.single_token` with
the affine ``F = O V`` replaced by the attention core's real Jacobian ``A = ∂o_T/∂n`` at ``T``.

One head ``h`` (column convention; ``R_T`` the RoPE rotation at ``T``, the identity without RoPE; ``c``
the score scale; ``κ_j`` the slope of Gemma-2's logit soft-cap, 1 without it): query
``q = R_T (W_Q n + b_Q)``, keys ``k_j`` and values ``v_j`` of the visible positions ``j`` (causal mask,
sliding window), scores ``s_j = cap(c qᵀ k_j)``, weights ``a = softmax(s)``, output
``o = Σ_j a_j v_j``. With ``∂a/∂s = diag(a) − a aᵀ`` and ``ṽ_j = v_j − o``:

    ∂o/∂n = a_T W_V  +  c (Σ_j a_j κ_j ṽ_j k_jᵀ) ∂q/∂n  +  c a_T κ_T ṽ_T (qᵀ ∂k_T/∂n),

the value path of ``T``, the query path, and the key path of ``T``. ``∂q/∂n = R_T W_Q`` and
``∂k_T/∂n = R_T W_K`` (grouped-query attention: the key/value head that the query head reads); with
OLMo-2's QK-norm (an RMSNorm over the whole projected query, resp. key, vector) ``W_Q`` and
``W_K`` become ``J_qnorm W_Q`` and ``J_knorm W_K``. Then ``A = Σ_h O_h ∂o_h/∂n`` and
``o_T = Σ_h O_h o_h + b_O``, and the block follows :mod:`lib.jacobians.single_token`'s table with ``F``
replaced by ``A`` (and ``F n + b`` by ``o_T``; :func:`lib.jacobians.single_token.attention_sublayer`):

========================  ==============================================
family                    ``J_attn(x)``
========================  ==============================================
GPT-2, GPT-Neo, Llama     ``I + A J_n1(x)``
BERT, ALBERT (post-LN)    ``J_LN1(x + o_T) (I + A)``
OLMo-2 (post-norms)       ``I + J_post1(o_T) A``
Gemma-2 (both)            ``I + J_post1(o_T) A J_n1(x)``
========================  ==============================================

and ``J = J_mlp(u) J_attn(x)`` with ``u`` the real mid-block residual at ``T``.

Supported: every family of :mod:`lib.models.families` (BERT, ALBERT, GPT-2, GPT-Neo, Llama, OLMo-2,
Gemma-2), except BERT/ALBERT checkpoints with relative position embeddings (the scores then depend on
``n`` through an extra term); :func:`supports` says which, and :func:`lib.jacobians.sweep.in_context_jacobian`
falls back to autodiff for the rest. Cost per prompt and layer: ``O(n d H d_h + d² H d_h)`` for the
attention and one ``d × d_ff × d`` product for the MLP, against ``d`` backward passes of the block for
autodiff. Everything runs in the model's dtype on its device (the precision of the forward pass autodiff
differentiates; GPT-Neo's own forward takes scores and softmax in float32, so there the closed form is the
more precise of the two); tested against autodiff of the real modules in float64.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lib.errors import InputError
from lib.jacobians import single_token as jc
from lib.models.spectral_model import on_layer_device
from lib.models.weights import expand_kv

__all__ = ["attention_cores", "in_context_jacobian_closed", "in_context_jacobians_closed", "supports"]

_ROPE_FAMILIES = ("llama", "olmo2", "gemma2")


def supports(model) -> bool:
    """Whether :func:`in_context_jacobians_closed` is exact for ``model`` (else use autodiff)."""
    if model.family not in ("bert", "albert", "gpt2", "gpt_neo", "llama", "olmo2", "gemma2"):
        return False
    return getattr(model.config, "position_embedding_type", "absolute") in (None, "absolute")


def _rope(v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Hugging Face's rotary embedding ``v cos + rotate_half(v) sin`` on the last axis (``d_h``)."""
    half = v.shape[-1] // 2
    return v * cos + torch.cat((-v[..., half:], v[..., :half]), dim=-1) * sin


class _Core:
    """Block ``t``'s attention weights in the model's dtype on its device (formed once per layer)."""

    def __init__(self, model, t: int) -> None:
        att = model.layer(t).attention  # float64 copies on the host, KV heads expanded
        p = model.param(t)  # the device that holds block t
        self.dtype, self.device = p.dtype, p.device

        def here(M):
            return None if M is None else M.to(device=p.device, dtype=p.dtype)

        self.Q, self.K, self.V, self.O = here(att.Q), here(att.K), here(att.V), here(att.O)
        self.b_Q, self.b_K, self.b_V, self.b_O = here(att.b_Q), here(att.b_K), here(att.b_V), here(att.b_O)
        self.H, self.n_kv, self.d_h = att.n_heads, att.n_kv_heads, att.head_dim
        self.scale, self.causal, self.window = att.score_scale, att.causal, att.window
        self.softcap = None  # Gemma-2's logit soft-cap, cap · tanh(score / cap)
        if model.family == "gemma2":
            self.softcap = getattr(model.config, "attn_logit_softcapping", None)
        self.qk_norm = None
        if att.qk_norm:  # OLMo-2: RMSNorm over the whole projected query (H d_h) and key (n_kv d_h)
            a = model.blocks[t].self_attn
            self.qk_norm = (a.q_norm, a.k_norm, a.k_proj.weight, a.k_proj.bias)
        self.rope = model.family in _ROPE_FAMILIES
        self.model = model

    def _heads(self, M: torch.Tensor) -> torch.Tensor:
        """``(..., H d_h, m) -> (..., H, d_h, m)``."""
        return M.reshape(*M.shape[:-2], self.H, self.d_h, M.shape[-1])

    def _expand(self, M: torch.Tensor) -> torch.Tensor:
        """KV rows ``(n_kv d_h, m)`` to query heads ``(H d_h, m)``."""
        return expand_kv(M, self.H, self.n_kv, self.d_h)

    def at(self, N: torch.Tensor, T: int, *, key_path: bool = True, value_path: bool = False
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``(o_T, A, A_value)``: the attention output ``(d,)`` at position ``T`` of the attention inputs
        ``N`` ``(n, d)``, its Jacobian ``A = ∂o_T/∂N[T]`` ``(d, d)`` and the value path of ``T`` in it,
        ``A_value = Σ_h a_{T,h} O_h V_h`` (``F`` with each head weighted by ``T``'s attention to itself;
        ``A − A_value`` are the softmax's query and key paths). ``key_path=False`` drops the key and value
        paths of ``T`` (the query path alone: a wrong Jacobian, for the test that shows those paths
        matter); ``A_value`` is ``None`` then and unless ``value_path``."""
        n = N.shape[0]
        lo = 0 if self.window is None else max(0, T - self.window + 1)
        hi = T + 1 if self.causal else n
        Nv = N[lo:hi]  # the positions T sees
        iT = T - lo
        q = N[T] @ self.Q.T + (self.b_Q if self.b_Q is not None else 0)  # (H d_h,)
        dQ = self.Q  # (H d_h, d)
        if self.qk_norm is None:
            K = Nv @ self.K.T + (self.b_K if self.b_K is not None else 0)  # (m, H d_h)
            dK = self.K
        else:
            q_norm, k_norm, W_k, b_k = self.qk_norm
            dQ = jc.norm_jacobian(q_norm, q[None]).left_of(self.Q[None])[0]
            q = q_norm(q)
            Kraw = Nv @ W_k.T + (b_k if b_k is not None else 0)  # (m, n_kv d_h)
            dK = self._expand(jc.norm_jacobian(k_norm, Kraw[iT : iT + 1]).left_of(W_k[None])[0])
            K = self._expand(k_norm(Kraw).T).T
        V = Nv @ self.V.T + (self.b_V if self.b_V is not None else 0)  # (m, H d_h)
        H, d_h, m = self.H, self.d_h, Nv.shape[0]
        q, dQ, dK = q.reshape(H, d_h), self._heads(dQ), self._heads(dK)  # (H, d_h), (H, d_h, d) ×2
        K, V = K.reshape(m, H, d_h).transpose(0, 1), V.reshape(m, H, d_h).transpose(0, 1)  # (H, m, d_h)
        if self.rope:
            pos = torch.arange(lo, hi, device=N.device)[None]
            cos, sin = self.model.base.rotary_emb(Nv[None], pos)  # (1, m, d_h)
            cos, sin = cos[0].to(N.dtype), sin[0].to(N.dtype)
            K = _rope(K, cos, sin)
            q = _rope(q, cos[iT], sin[iT])
            dQ = _rope(dQ.transpose(1, 2), cos[iT], sin[iT]).transpose(1, 2)  # R_T acts on the d_h axis
            dK = _rope(dK.transpose(1, 2), cos[iT], sin[iT]).transpose(1, 2)
        r = self.scale * (K @ q[:, :, None])[..., 0]  # (H, m) raw scores
        if self.softcap is None:
            s, kappa = r, torch.ones_like(r)
        else:
            th = torch.tanh(r / self.softcap)
            s, kappa = self.softcap * th, 1 - th * th
        a = torch.softmax(s, dim=-1)  # (H, m)
        o = (a[:, None, :] @ V)[:, 0]  # (H, d_h)
        Vt = V - o[:, None, :]  # ṽ_j
        M = Vt.transpose(1, 2) @ ((a * kappa)[:, :, None] * K)  # (H, d_h, d_h): Σ_j a_j κ_j ṽ_j k_jᵀ
        A = self.scale * (M @ dQ)  # query path
        A_value = None
        if key_path:
            aT = a[:, iT, None, None]
            A_value = aT * self._heads(self.V)  # value path of T
            key = Vt[:, iT, :, None] @ (q[:, None, :] @ dK)  # ṽ_T (qᵀ ∂k_T/∂n), (H, d_h, d)
            A = A + A_value + (self.scale * aT * kappa[:, iT, None, None]) * key  # key path of T
            A_value = self.O @ A_value.reshape(H * d_h, -1) if value_path else None
        out = self.O @ o.reshape(-1) + (self.b_O if self.b_O is not None else 0)
        return out, self.O @ A.reshape(H * d_h, -1), A_value


@torch.no_grad()
@on_layer_device
def attention_cores(model, t: int, states: Sequence, positions: Sequence[int | None], *, key_path: bool = True,
                    value_path: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The attention core of block ``t`` at position ``T`` of several sequences, in context.

    Args: as :func:`in_context_jacobians_closed`; ``value_path``: also return the value paths (one more
    ``d × H d_h × d`` product per sequence).
    Returns:
        ``(X, o, A, A_value)`` in the model's dtype on its device: the residuals ``X = h_t[T]`` ``(P, d)``,
        the attention outputs ``o_T`` ``(P, d)``, the core's Jacobians ``A = ∂o_T/∂n_T`` ``(P, d, d)`` (what
        replaces the single-token ``F_t``) and their value paths ``Σ_h a_{T,h} O_h V_h`` ``(P, d, d)``
        (``None`` unless ``value_path``, and when ``key_path=False``).
    Raises:
        InputError: a model :func:`supports` rejects, or mismatched ``states`` and ``positions``.
    """
    if not supports(model):
        raise InputError(f"no closed-form in-context Jacobian for {model.label} (family {model.family}); "
                         "use lib.jacobians.sweep.in_context_jacobian(..., method='autodiff')")
    if len(states) != len(positions) or not states:
        raise InputError("need one position per sequence and at least one sequence, "
                         f"got {len(states)} sequences and {len(positions)} positions")
    core = _Core(model, t)
    pre = jc.attention_input_norm(model, model.blocks[t])
    xs, outs, As, Avs = [], [], [], []
    for H, T in zip(states, positions):
        H = torch.as_tensor(H).to(device=core.device, dtype=core.dtype)
        n = H.shape[0]
        T = n - 1 if T is None else T % n
        N = H if pre is None else pre(H)
        o, A, Av = core.at(N, T, key_path=key_path, value_path=value_path)
        xs.append(H[T])
        outs.append(o)
        As.append(A)
        Avs.append(Av)
    return torch.stack(xs), torch.stack(outs), torch.stack(As), (torch.stack(Avs) if Avs[0] is not None else None)


@torch.no_grad()
@on_layer_device
def in_context_jacobians_closed(model, t: int, states: Sequence, positions: Sequence[int | None], *,
                                key_path: bool = True) -> torch.Tensor:
    """In-context diagonal blocks ``∂h_{t+1}[T]/∂h_t[T]`` of block ``t`` for several sequences.

    Args:
        states: per sequence, the input of block ``t``, ``(n_p, d)`` (lengths may differ).
        positions: per sequence, the position ``T`` (``None``: the last; negative: from the end).
        key_path: ``False`` drops the key and value paths of ``T`` (only for tests: a wrong Jacobian).
    Returns:
        float64 ``(P, d, d)`` on the model's device (column convention, ``J[i, j] = ∂f_i/∂x_j``).
    Raises:
        InputError: a model :func:`supports` rejects, or mismatched ``states`` and ``positions``.
    """
    X, o, A, _ = attention_cores(model, t, states, positions, key_path=key_path)
    blk = model.blocks[t]
    J_attn, U = jc.attention_sublayer(model, blk, X, o, A)
    return (jc.mlp_part(model, blk, U) @ J_attn).double()


def in_context_jacobian_closed(model, t: int, H, T: int | None = None) -> torch.Tensor:
    """:func:`in_context_jacobians_closed` for one sequence: ``H`` ``(n, d)`` the input of block ``t``,
    ``T`` the position (default: the last). Returns float64 ``(d, d)``."""
    return in_context_jacobians_closed(model, t, [H], [T])[0]
