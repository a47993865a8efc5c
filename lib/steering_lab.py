"""The steering lab (chapter 5): sweeps of the rank-1 eigen-edit and what they measure.

* :class:`Lab` holds one loaded model, a fixed prompt set and the **unedited** residual streams
  (real and simplified). An edit of block ``l`` leaves every state before it unchanged, so each
  measurement re-runs only blocks ``l..L-1`` (the real Hugging Face blocks, through
  ``model.layer(t)``, bit-identical to a full forward pass) and the simplified layers after ``l``.
  :meth:`Lab.run` measures one ``(direction, α, layer)``: alignment with ``u`` at every depth (real,
  simplified, and the activation-addition baseline at matched norm), the spectrum of ``F_l'``, and the
  output: target-token rank and a greedy continuation (LM head), or the nearest vocabulary tokens
  and cosine with ``u`` of the sentence embedding (encoder).
* :func:`sweep` runs a grid of α and directions into long tables; :func:`fluency` measures held-out
  perplexity (decoder) or embedding retention (encoder) against α.
* Its figures, the kernel-free explorer (Altair sliders over the precomputed grid) and the ipywidgets panel
  (JupyterLab), which re-runs :meth:`Lab.run` live, are in :mod:`lib.page.steering_plots`.

Provenance: the edit, the choice of ``w`` and of α, and the simplified layer are **reconstructed**
[ours] (see :mod:`lib.steering`); the paper's own evaluation is unknown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from lib import dynamics, spectra, steering

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = ["ALPHAS", "Lab", "bootstrap_pooled", "fluency", "sweep", "matched_success", "text_losses", "tradeoff"]

ALPHAS: tuple[float, ...] = (0, 1, 2, 5, 10, 20, 50, 100, 1000)
"""α|c|/|λ_1(F_L)| of the precomputed grid (0 = no edit)."""


@dataclass
class Lab:
    """One model, one prompt set, and the cached unedited states (see the module docstring).

    Attributes:
        model: a :class:`lib.models.SpectralModel` (decoders: loaded ``with_lm_head=True`` for text).
        texts: the prompts every measurement averages over.
        prompt: the prompt whose continuation (decoder) or embedding (encoder) is shown.
    """

    model: Any
    texts: Sequence[str]
    prompt: str
    _ids: list = field(default_factory=list, repr=False)
    _real: list = field(default_factory=list, repr=False)
    _simple: list = field(default_factory=list, repr=False)
    _heads: dict = field(default_factory=dict, repr=False)
    _proj: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        m = self.model
        self.texts = list(self.texts)
        self._ids = [m.encode(t)["input_ids"] for t in self.texts]
        self._real = [m.hidden_states_ids(ids) for ids in self._ids]
        weights = [m.layer(t).attention for t in range(m.n_layers)]
        self._simple = [dynamics.simulate(weights, h[0]) for h in self._real]
        self.has_head = steering._output_embeddings(m) is not None
        self._E = None if self.has_head else steering.unit_embeddings(m)
        self._radius: dict[int, float] = {}

    @property
    def label(self) -> str:
        return self.model.label

    def head_outputs(self, layer: int) -> list[np.ndarray]:
        """The concatenated head outputs entering block ``layer``'s output projection (cached)."""
        t = self.model.check_layer(layer)
        if t not in self._heads:
            self._heads[t] = steering.head_outputs(self.model, self.texts, t)
        return self._heads[t]

    # -- states after an edit -----------------------------------------------------------------
    @torch.no_grad()
    def real_states(self, layer: int) -> list[np.ndarray]:
        """Real residual streams ``(L+1, n, d)`` with the model's *current* weights for blocks ``layer..L-1``."""
        m = self.model
        t0 = m.check_layer(layer)
        out = []
        for h in self._real:
            x = h[t0][None].to(dtype=next(m.hf_model.parameters()).dtype)
            tail = []
            for t in range(t0, m.n_layers):
                x = m.layer(t)(x)
                tail.append(x[0].double())
            out.append(torch.cat([h[: t0 + 1], torch.stack(tail)]).numpy())
        return out

    def simplified_states(self, layer: int, attention: str = "softmax") -> list[np.ndarray]:
        """Simplified trajectories (L2, no FFN, no residual) with the current weights from ``layer`` on.

        ``attention="uniform"`` replaces every head's pattern from ``layer`` on by the same uniform
        average (:func:`lib.dynamics.simulate`): then every head averages alike, and a layer acts
        through ``F_t`` alone (chapter 5, the V-edit)."""
        m = self.model
        t0 = m.check_layer(layer)
        weights = [m.layer(t).attention for t in range(t0, m.n_layers)]
        return [torch.cat([s[: t0 + 1], dynamics.simulate(weights, s[t0], normalize_input=False,
                                                          attention=attention)[1:]]).numpy()
                for s in self._simple]

    @torch.no_grad()
    def logits(self, states: list[np.ndarray]) -> np.ndarray:
        """Next-token logits at the last position of each text, from final residual states (LM head models)."""
        m = self.model
        norm = m.adapter.final_norm(m.base)
        head = m.hf_model.get_output_embeddings()
        dtype = next(m.hf_model.parameters()).dtype
        x = torch.stack([torch.as_tensor(s[-1, -1]) for s in states]).to(dtype)
        z = head(norm(x) if norm is not None else x).double()
        cap = getattr(m.config, "final_logit_softcapping", None)
        if cap:
            z = cap * torch.tanh(z / cap)
        return z.numpy()

    # -- one measurement -------------------------------------------------------------------------
    def projection_outputs(self, layer: int) -> list[np.ndarray]:
        """Unedited outputs of block ``layer``'s output projection (cached; see :func:`steering.projection_outputs`)."""
        t = self.model.check_layer(layer)
        if t not in self._proj:
            self._proj[t] = steering.projection_outputs(self.model, self.texts, t)
        return self._proj[t]

    def run(self, direction: Any, alpha: float, layer: int = -1, *, text: bool = True,
            matrix: str = "O") -> dict[str, Any]:
        """Measure one ``(direction, α, layer)``; ``α`` in units of ``|λ_1(F_l)|`` (0 = no edit).

        ``matrix="V"`` applies the value-matrix control instead of the paper's O-edit
        (:func:`lib.steering.steer`); its matched activation-addition strength and sign agreement are
        measured at the output projection (:func:`lib.steering.measured_change`).

        Returns a dict with ``curves`` (DataFrame: ``depth``, ``series``, ``alignment``), ``eigvals`` of
        ``F_l'``, the ``edit`` (or ``None``), scalar measures (``spectral_alignment``, ``gap_ratio``,
        ``final_real``, ``final_simplified``, ``final_actadd``, ``strength``, ``sign_agreement``,
        ``change_along_u`` (mean ``|cos|`` of the change at the output projection with ``u``); with
        an LM head ``rank``, ``prob``, ``rank_actadd``, ``top1``, and the per-prompt ``ranks`` and
        ``ranks_actadd``), ``final_per_prompt`` (``{series: (sums, counts)}`` of the final tokens'
        alignment per prompt, for :func:`bootstrap_pooled`), and ``text`` (continuation or nearest tokens).
        """
        m = self.model
        t0 = m.check_layer(layer)
        u_dir = steering.as_direction(direction, m.d_model)
        u = u_dir.vector
        res: dict[str, Any] = {}
        if t0 not in self._radius:
            self._radius[t0] = float(spectra.spectral_radius(m.layer(t0).attention.layer_matrix()))
        measured = None
        before = self.projection_outputs(t0) if matrix != "O" else None  # unedited: fill the cache first
        with steering.maybe_steer(m, u_dir, alpha, layer=t0, radius=self._radius[t0], matrix=matrix) as edit:
            if edit is not None and before is not None:
                measured = steering.measured_change(before, steering.projection_outputs(m, self.texts, t0), u)
            rep = steering.spectral_report(m.layer(t0).attention.layer_matrix(), u)
            res["eigvals"] = rep.pop("eigvals")
            real = self.real_states(t0)
            simple = self.simplified_states(t0)
            if self.has_head:
                res["logits"] = self.logits(real)
            if text:
                res["text"] = self._text(u_dir)
        if edit is None:
            strength, sign, along = 0.0, float("nan"), float("nan")
        elif measured is not None:
            strength, sign, along = measured["strength"], measured["sign_agreement"], measured["along_u"]
        else:  # the O-edit adds α u (wᵀ o_i): parallel to u by construction
            outs = self.head_outputs(t0)
            strength, sign, along = steering.matched_strength(edit, outs), steering.sign_agreement(edit, outs), 1.0
        with steering.activation_addition(m, u, strength, layer=t0):
            act = self.real_states(t0)
            if self.has_head:
                res["logits_actadd"] = self.logits(act)
        curves, finals = [], {}
        for name, states in (("real", real), ("simplified", simple), ("activation addition (real)", act)):
            per = [spectra.alignment(s, u) for s in states]  # (L+1, n_k) per prompt
            a = np.concatenate(per, axis=1).mean(1)
            curves.append(pd.DataFrame({"depth": np.arange(m.n_layers + 1), "series": name, "alignment": a}))
            finals[name] = (np.array([p[-1].sum() for p in per]), np.array([p.shape[1] for p in per], dtype=float))
        res["final_per_prompt"] = finals
        res["curves"] = pd.concat(curves, ignore_index=True)
        res.update(rep)
        res["edit"] = edit
        res["c"] = edit.c if edit is not None else float("nan")
        res["strength"] = strength
        res["sign_agreement"] = sign
        res["change_along_u"] = along
        last = res["curves"].groupby("series").alignment.last()
        res["final_real"], res["final_simplified"] = float(last["real"]), float(last["simplified"])
        res["final_actadd"] = float(last["activation addition (real)"])
        if self.has_head and u_dir.token_id is not None:
            for key, suffix in (("logits", ""), ("logits_actadd", "_actadd")):
                z = res[key]
                rank = (z > z[:, [u_dir.token_id]]).sum(1) + 1
                p = np.exp(z - z.max(1, keepdims=True))
                p /= p.sum(1, keepdims=True)
                res["rank" + suffix] = float(np.median(rank))
                res["top1" + suffix] = float(np.mean(rank == 1))
                res["ranks" + suffix] = rank
                res["prob" + suffix] = float(p[:, u_dir.token_id].mean())
        return res

    def _text(self, u_dir: steering.Direction, k: int = 5) -> str:
        m = self.model
        if self.has_head:
            from lib.decoder import generate

            return generate(m.hf_model, m.tokenizer, self.prompt, max_new_tokens=10)
        hs = m.hidden_states_ids(m.encode(self.prompt)["input_ids"])[-1].numpy()
        pooled = hs.mean(0)
        near = steering.nearest_tokens(m, pooled[None], k, self._E)[0]
        return f"nearest tokens: {' '.join(near)} · cos(sentence, u) = {float(pooled @ u_dir.vector / np.linalg.norm(pooled)):+.2f}"


# -- sweeps ------------------------------------------------------------------------------------------
def sweep(lab: Lab, directions: Sequence[steering.Direction], alphas: Sequence[float] = ALPHAS,
          layer: int = -1) -> dict[str, pd.DataFrame]:
    """Run :meth:`Lab.run` over ``directions × alphas``.

    Returns ``{"summary": one row per run (with 95% bootstrap intervals over prompts, ``*_lo`` and
    ``*_hi``, of the final alignments and of the top-1 rate), "curves": alignment per depth,
    "eigvals": the spectrum of F_l' per run, "text": the output per run}``; every table has
    ``direction``, ``alpha`` and ``ai`` (the index of α in ``alphas``, what the static sliders select).
    """
    rows, curves, eigs, texts = [], [], [], []
    scalar = ("spectral_alignment", "gap_ratio", "lambda1_modulus", "c", "strength", "sign_agreement", "final_real",
              "final_simplified", "final_actadd", "rank", "rank_actadd", "prob", "prob_actadd", "top1", "top1_actadd")
    lab.run(directions[0], 0, layer, text=False)  # caches |λ_1(F_l)|
    radius = lab._radius[lab.model.check_layer(layer)]
    for d in directions:
        for ai, a in enumerate(alphas):
            r = lab.run(d, a, layer)
            key = {"direction": d.label, "alpha": float(a), "ai": ai}
            ci = {}
            for name, col in (("real", "final_real"), ("simplified", "final_simplified"),
                              ("activation addition (real)", "final_actadd")):
                ci[col + "_lo"], ci[col + "_hi"] = bootstrap_pooled(*r["final_per_prompt"][name])
            if "ranks" in r:
                ci["top1_lo"], ci["top1_hi"] = bootstrap_pooled((r["ranks"] == 1).astype(float))
            rows.append({**key, **{k: r[k] for k in scalar if k in r}, **ci})
            curves.append(r["curves"].assign(**key))
            lam = r["eigvals"] / radius
            eigs.append(pd.DataFrame({"re": lam.real, "im": lam.imag, "k": np.arange(lam.size), **key}))
            texts.append({**key, "text": r["text"]})
    return {"summary": pd.DataFrame(rows), "curves": pd.concat(curves, ignore_index=True),
            "eigvals": pd.concat(eigs, ignore_index=True), "text": pd.DataFrame(texts)}


def bootstrap_pooled(sums: Any, counts: Any = None, *, n_boot: int = 2000, level: float = 0.95,
                     seed: int = 0, transform: Any = None) -> tuple[float, float]:
    """Percentile bootstrap interval over prompts of a pooled mean ``Σ sums / Σ counts``.

    Args:
        sums: per-prompt sums ``(P,)`` (e.g. the summed alignment of a prompt's tokens, or 1/0 hits).
        counts: per-prompt counts ``(P,)`` (tokens); ``None`` means one per prompt (a plain mean).
        transform: applied to each resampled pooled mean (``np.exp`` for a perplexity from losses).

    Returns:
        ``(lo, hi)``; vectorised: one ``(n_boot, P)`` index draw from ``default_rng(seed)``.
    """
    x = np.asarray(sums, dtype=np.float64)
    n = np.ones_like(x) if counts is None else np.asarray(counts, dtype=np.float64)
    idx = np.random.default_rng(seed).integers(0, x.size, size=(n_boot, x.size))
    stat = x[idx].sum(1) / n[idx].sum(1)
    if transform is not None:
        stat = transform(stat)
    q = (1 - level) / 2
    lo, hi = np.quantile(stat, [q, 1 - q])
    return float(lo), float(hi)


@torch.no_grad()
def text_losses(model: SpectralModel, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per text: the summed next-token cross-entropy (nats) and the number of predicted tokens,
    float64 ``(P,)`` each (``exp(Σ sums / Σ counts)`` is the perplexity of ``heldout_loss``).

    One right-padded batch: with causal attention the pads after a text change none of its logits.
    """
    hf, tok = model.hf_model, model.tokenizer
    device = next(hf.parameters()).device
    enc = [tok(t)["input_ids"] for t in texts]
    n = max(map(len, enc))
    ids = torch.zeros((len(enc), n), dtype=torch.long, device=device)
    mask = torch.zeros((len(enc), n), dtype=torch.long, device=device)
    for k, e in enumerate(enc):
        ids[k, : len(e)] = torch.as_tensor(e)
        mask[k, : len(e)] = 1
    logp = torch.log_softmax(hf(input_ids=ids, attention_mask=mask).logits[:, :-1].double(), -1)
    nll = -logp.gather(-1, ids[:, 1:, None])[..., 0] * mask[:, 1:]
    return nll.sum(1).cpu().numpy(), mask[:, 1:].sum(1).double().cpu().numpy()


def tradeoff(lab: Lab, direction: steering.Direction, heldout: Sequence[str], alphas: Sequence[float] = ALPHAS,
             strengths: Sequence[float] | None = None, layer: int = -1) -> pd.DataFrame:
    """Success against fluency for the eigen-edit and activation addition, each over its own strength grid.

    The eigen-edit runs at every ``α`` of ``alphas`` (units of ``|λ_1(F_l)|``), activation addition at
    every ``s`` of ``strengths`` (default: the strengths ``s(α)`` matching the eigen-edit's mean change,
    :func:`lib.steering.matched_strength`); each method's curve is traced over its own grid [ours].

    Success is measured on ``lab.texts`` (the target token's rank at the last position: top-1 rate and
    mean reciprocal rank), fluency on ``heldout`` (perplexity, :func:`text_losses`). Intervals: 95%
    percentile bootstrap over prompts (success) and over held-out texts (perplexity).

    Returns:
        one row per run: ``method``, ``alpha`` (eigen-edit; NaN for activation addition), ``strength``
        (mean norm of the change at the output projection), ``top1`` (+ ``_lo``, ``_hi``), ``mrr``,
        ``ppl`` (+ ``_lo``, ``_hi``).
    """
    if not lab.has_head or direction.token_id is None:
        raise steering.InputError("tradeoff needs a decoder with an LM head and a word direction (a target token)")
    m = lab.model
    t0 = m.check_layer(layer)
    outs = lab.head_outputs(t0)
    if t0 not in lab._radius:
        lab._radius[t0] = float(spectra.spectral_radius(m.layer(t0).attention.layer_matrix()))
    rows = []

    def measure(method: str, a: float, s: float) -> None:
        z = lab.logits(lab.real_states(t0))
        rank = (z > z[:, [direction.token_id]]).sum(1) + 1
        ls, lc = text_losses(m, heldout)
        lo, hi = bootstrap_pooled((rank == 1).astype(float))
        plo, phi = bootstrap_pooled(ls, lc, transform=np.exp)
        rows.append({"method": method, "alpha": float(a), "strength": float(s), "top1": float(np.mean(rank == 1)),
                     "top1_lo": lo, "top1_hi": hi, "mrr": float(np.mean(1.0 / rank)),
                     "ppl": math.exp(ls.sum() / lc.sum()), "ppl_lo": plo, "ppl_hi": phi})

    matched = []
    for a in alphas:
        with steering.maybe_steer(m, direction, a, layer=t0, radius=lab._radius[t0]) as edit:
            matched.append(steering.matched_strength(edit, outs) if edit is not None else 0.0)
            measure("eigen-edit", a, matched[-1])
    for s in matched if strengths is None else strengths:
        with steering.activation_addition(m, direction, s, layer=t0):
            measure("activation addition", float("nan"), s)
    return pd.DataFrame(rows)


def matched_success(df: pd.DataFrame) -> pd.DataFrame:
    """At matched success: for each eigen-edit run of :func:`tradeoff` with a nonzero top-1 rate, the
    activation-addition run of lowest perplexity among those whose top-1 rate is at least as high.

    Returns one row per such eigen-edit run: ``alpha``, ``top1``, ``ppl`` (+ ``_lo``, ``_hi``) of the
    eigen-edit, the same with the prefix ``aa_`` for activation addition (NaN when no run reaches
    that rate), ``cheaper`` (activation addition's perplexity is lower) and ``separated`` (its 95%
    interval lies wholly below the eigen-edit's).
    """
    eig = df[(df.method == "eigen-edit") & (df.top1 > 0)]
    aa = df[df.method == "activation addition"]
    cols = ["top1", "ppl", "ppl_lo", "ppl_hi"]
    rows = []
    for _, e in eig.iterrows():
        ok = aa[aa.top1 >= e.top1]
        best = ok.loc[ok.ppl.idxmin()] if len(ok) else pd.Series({c: np.nan for c in cols})
        rows.append({"alpha": e.alpha, **{c: e[c] for c in cols}, **{"aa_" + c: best[c] for c in cols},
                     "cheaper": bool(best.ppl < e.ppl), "separated": bool(best.ppl_hi < e.ppl_lo)})
    return pd.DataFrame(rows)


def fluency(lab: Lab, direction: steering.Direction, heldout: Sequence[str], alphas: Sequence[float] = ALPHAS,
            layer: int = -1) -> pd.DataFrame:
    """Cost of steering against α, for the eigen-edit and activation addition at matched norm.

    Decoder (LM head): held-out perplexity ``exp(mean next-token loss)`` on ``heldout``. Encoder: mean
    cosine between each held-out sentence embedding (mean-pooled final states) with and without the
    intervention (retention; 1 = unchanged) [ours].
    """
    from lib.decoder import heldout_loss

    m = lab.model
    outs = lab.head_outputs(layer)

    def measure() -> float:
        if lab.has_head:
            return math.exp(heldout_loss(m.hf_model, m.tokenizer, list(heldout)))
        pooled = np.stack([h[-1].numpy().mean(0) for h in m.hidden_states(list(heldout), progress=False)])
        return pooled

    ref = measure()
    rows = []
    for a in alphas:
        with steering.maybe_steer(m, direction, a, layer=layer) as edit:
            eig = measure()
        s = steering.matched_strength(edit, outs) if edit is not None else 0.0
        with steering.activation_addition(m, direction, s, layer=layer):
            act = measure()
        for name, val in (("eigen-edit", eig), ("activation addition", act)):
            if not lab.has_head:
                val = float(np.mean(np.sum(val * ref, 1) / (np.linalg.norm(val, axis=1) * np.linalg.norm(ref, axis=1))))
            rows.append({"alpha": float(a), "method": name, "value": float(val)})
    return pd.DataFrame(rows)
