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
  perplexity (decoder) or embedding retention (encoder) against α; :func:`tradeoff` and
  :func:`matched_success` compare the eigen-edit with activation addition at matched success.
* The chapter's checks and controls, one function each: :func:`check_edit` (the edit is rank 1 in
  ``F_L`` and undone bit for bit), :func:`layer_control` (a middle layer instead of the last),
  :func:`v_control`, :func:`v_anatomy` and :func:`uniform_attention_control` (the V-edit), and
  :func:`sign_variant` (exercise 5.3's ``w`` along the mean head output); :func:`first_alpha`,
  :func:`value_at` and :func:`ppl_text` read the sweep tables for the prose.
* Its figures, the kernel-free explorer (Altair sliders over the precomputed grid) and the ipywidgets panel
  (JupyterLab), which re-runs :meth:`Lab.run` live, are in :mod:`lib.page.steering_lab`.

Provenance: the edit, the choice of ``w`` and of α, and the simplified layer are **reconstructed**
[ours] (see :mod:`lib.methods.steering`); the paper's own evaluation is unknown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from lib.linalg import spectra
from lib.methods import steering
from lib.stats import bootstrap_pooled
from lib.theory import dynamics

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = ["ALPHAS", "RETENTION_LOW", "Lab", "check_edit", "concept_texts", "first_alpha", "fluency", "layer_control",
           "matched_success", "ppl_text", "real_model_sweep", "retention_points", "sign_variant", "sweep",
           "target_ranks", "text_losses", "tradeoff", "uniform_attention_control", "v_anatomy", "v_control",
           "value_at"]

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
        average (:func:`lib.theory.dynamics.simulate`): then every head averages alike, and a layer acts
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
        (:func:`lib.methods.steering.steer`); its matched activation-addition strength and sign agreement are
        measured at the output projection (:func:`lib.methods.steering.measured_change`).

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
                rank = target_ranks(z, u_dir.token_id)
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
            from lib.models.decoder import generate

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
    :func:`lib.methods.steering.matched_strength`); each method's curve is traced over its own grid [ours].

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
        rank = target_ranks(lab.logits(lab.real_states(t0)), direction.token_id)
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
    from lib.models.decoder import heldout_loss

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


# -- the chapter's set-up, checks and controls ---------------------------------------------------------
def concept_texts(topic: str, others: Sequence[str], n_topic: int = 10, n_other: int = 4,
                  seed: int = 0) -> tuple[list[str], list[str]]:
    """Sentences of the book's synthetic language about ``topic`` and, as the contrast, about ``others``.

    ``n_topic`` sentences about ``topic``, then ``n_other`` about each of ``others`` in order, all from one
    ``numpy.random.default_rng(seed)`` (:func:`lib.models.decoder.language.sentence`); for
    :func:`lib.methods.steering.concept_direction` (chapter 5's "concept: sea" is ``concept_texts("sea",
    ("farm", "forest", "town"))``).
    """
    from lib.models.decoder import language

    rng = np.random.default_rng(seed)
    on = [language.sentence(rng, topic)[0] for _ in range(n_topic)]
    off = [language.sentence(rng, t)[0] for t in others for _ in range(n_other)]
    return on, off


@torch.no_grad()
def check_edit(model: SpectralModel, direction: Any, alpha: float = 10) -> dict[str, Any]:
    """Apply the O-edit of the last layer once and measure what chapter 5 (§5.1) says of it.

    Returns a dict: ``model`` and ``direction`` labels, ``method`` (how ``w`` was chosen), ``c``,
    ``radius`` ``|λ₁(F_L)|``, ``alpha_abs`` (the absolute α), ``alignment_before``/``_after``
    (``|⟨v₁, u⟩|`` of ``F_L`` and ``F_L'``), ``gap_before``/``_after`` (gap ratios), ``rank1_error``
    ``max|F_L' − F_L − α u zᵀ| / max|F_L'|`` (the weights' change is exactly rank 1 in ``F_L``) and
    ``restored`` (every tensor of the model is bit for bit as before once the ``with`` block is left).
    """
    u = steering._target(model, direction)
    before = {k: v.clone() for k, v in model.hf_model.state_dict().items()}
    F0 = model.layer_matrices()[-1].numpy()
    r0 = steering.spectral_report(F0, u.vector)
    with steering.steer(model, u, alpha) as edit:
        F1 = model.layer_matrices()[-1].numpy()
        r1 = steering.spectral_report(F1, u.vector)
        err = float(np.abs(F1 - F0 - edit.delta_F).max() / np.abs(F1).max())
    restored = all(torch.equal(before[k], v) for k, v in model.hf_model.state_dict().items())
    return {"model": model.label, "direction": u.label, "method": edit.method, "c": edit.c,
            "radius": edit.radius, "alpha_abs": edit.alpha, "alignment_before": r0["spectral_alignment"],
            "alignment_after": r1["spectral_alignment"], "gap_before": r0["gap_ratio"],
            "gap_after": r1["gap_ratio"], "rank1_error": err, "restored": restored}


def first_alpha(summary: pd.DataFrame, column: str, level: float) -> float:
    """The smallest α of a :func:`sweep` summary at which ``column`` exceeds ``level`` for *every* direction
    (the largest of the directions' first α); NaN if some direction never gets there."""
    ok = summary[summary[column] > level].groupby("direction").alpha.min()
    return float(ok.max()) if len(ok) == summary.direction.nunique() else float("nan")


RETENTION_LOW = 0.1
"""[ours] The retention below which a sentence embedding counts as lost (cosine with the unedited one)."""


def retention_points(flu: pd.DataFrame, low: float = RETENTION_LOW) -> dict[str, float]:
    """Where the two retention curves of an encoder's :func:`fluency` table cross the prose's landmarks.

    Returns ``eigen_ahead_until``: the largest α > 0 up to which the eigen-edit keeps *more* than activation
    addition at every α > 0 (NaN if it is behind at the first α > 0); ``both_lost_from``: the smallest α from
    which both methods stay below ``low`` at that α and every larger one (NaN if they never do).
    """
    wide = flu.pivot(index="alpha", columns="method", values="value").sort_index()
    wide = wide[wide.index > 0]
    ahead = (wide["eigen-edit"] > wide["activation addition"]).to_numpy()
    n_ahead = int(np.argmin(ahead)) if not ahead.all() else len(ahead)
    lost = (wide.max(axis=1) < low).to_numpy()
    tail = np.flip(np.logical_and.accumulate(np.flip(lost)))  # below `low` here and at every larger α
    return {"eigen_ahead_until": float(wide.index[n_ahead - 1]) if n_ahead else float("nan"),
            "both_lost_from": float(wide.index[np.argmax(tail)]) if tail.any() else float("nan")}


def value_at(summary: pd.DataFrame, direction: str, alpha: float, column: str) -> Any:
    """``column`` of the :func:`sweep` (or :func:`tradeoff`) row of ``direction`` at ``alpha``.

    Raises:
        InputError: no such row (naming the directions and α the table has).
    """
    rows = summary[(summary.direction == direction) & (summary.alpha == alpha)]
    if rows.empty:
        raise steering.InputError(f"no run of {direction!r} at α = {alpha:g}; the table has directions "
                                  f"{sorted(set(summary.direction))} and α {sorted(set(summary.alpha))}")
    return rows[column].iloc[0]


def ppl_text(row: Any, prefix: str = "") -> str:
    """A perplexity with its interval for the prose, ``"94 (95% CI 65–139)"``, from a :func:`tradeoff` or
    :func:`matched_success` row (``prefix="aa_"`` reads activation addition's columns there)."""
    return f"{row[prefix + 'ppl']:.0f} (95% CI {row[prefix + 'ppl_lo']:.0f}–{row[prefix + 'ppl_hi']:.0f})"


def target_ranks(logits: np.ndarray, token_id: int) -> np.ndarray:
    """Rank of ``token_id`` in each row of ``logits`` ``(P, V)`` (1 = the most likely next token; ties
    count in its favour)."""
    z = np.asarray(logits)
    return (z > z[:, [token_id]]).sum(1) + 1


def layer_control(pairs: Sequence[tuple[Lab, steering.Direction]], alpha: float = 100,
                  layers: Sequence[int] = (2, -1)) -> pd.DataFrame:
    """The same O-edit at other layers (a control [ours]): one :meth:`Lab.run` per ``(lab, u)`` and layer.

    Returns one row per run: ``model``, ``layer`` (1-based), ``spectral_alignment`` (of that layer's
    ``F_l'``), ``final_real`` (mean final alignment with ``u``) and ``rank`` (median target rank; NaN
    without an LM head).
    """
    rows = []
    for lab, u in pairs:
        for layer in layers:
            t = lab.model.check_layer(layer)
            r = lab.run(u, alpha, t, text=False)
            rows.append({"model": lab.label, "layer": t + 1, "spectral_alignment": r["spectral_alignment"],
                         "final_real": r["final_real"], "rank": r.get("rank", np.nan)})
    return pd.DataFrame(rows)


def v_control(pairs: Sequence[tuple[Lab, steering.Direction]], alpha: float = 100) -> pd.DataFrame:
    """The O-edit and the V-edit of the last layer at the same α (chapter 5, §5.6): one row per
    ``(lab, u)`` and matrix, in that order.

    Columns: ``model``, ``matrix`` (``"O"``/``"V"``), ``method`` (how ``w`` or ``b`` was chosen), ``c``,
    ``cos_y_u`` (``|cos(y, u)|``: 1 for the O-edit, and for the V-edit with multi-head attention),
    ``spectral_alignment`` ``|⟨v₁', u⟩|``, ``change_along_u`` (mean ``|cos|`` of each token's change at the
    output projection with ``u``), ``final_simplified``, ``final_real`` with its 95% bootstrap interval
    over prompts ``final_real_lo``/``_hi``, and ``rank`` (median target rank; NaN without an LM head).
    """
    rows = []
    for lab, u in pairs:
        for matrix in steering.MATRICES:
            r = lab.run(u, alpha, text=False, matrix=matrix)
            e = r["edit"]
            lo, hi = bootstrap_pooled(*r["final_per_prompt"]["real"])
            rows.append({"model": lab.label, "matrix": matrix, "method": e.method, "c": e.c,
                         "cos_y_u": abs(e.y @ u.vector) / np.linalg.norm(e.y),
                         "spectral_alignment": r["spectral_alignment"], "change_along_u": r["change_along_u"],
                         "final_simplified": r["final_simplified"], "final_real": r["final_real"],
                         "final_real_lo": lo, "final_real_hi": hi, "rank": r.get("rank", np.nan)})
    return pd.DataFrame(rows)


def v_anatomy(lab: Lab, direction: steering.Direction, alpha: float = 100) -> dict[str, Any]:
    """:func:`lib.methods.steering.v_edit_anatomy` of the last layer's V-edit on ``lab``'s prompts, plus ``b_norm``
    (``‖b‖``, the norm of the edit's weight-side vector)."""
    m = lab.model
    heads_before = lab.head_outputs(-1)
    with steering.steer(m, direction, alpha, matrix="V") as edit:
        heads_after = steering.head_outputs(m, lab.texts)
    out = steering.v_edit_anatomy(edit, m.layer(-1).attention, heads_before, heads_after)
    out["b_norm"] = float(np.linalg.norm(edit.w))
    return out


def uniform_attention_control(lab: Lab, direction: steering.Direction, alpha: float = 100) -> dict[str, float]:
    """The counterfactual of §5.6: in the simplified model, every head of the last layer attends
    uniformly (so all heads average alike); the mean final alignment with ``u`` after the O-edit and
    after the V-edit, ``{"O": ..., "V": ...}``."""
    out = {}
    for matrix in steering.MATRICES:
        with steering.steer(lab.model, direction, alpha, matrix=matrix):
            states = lab.simplified_states(-1, attention="uniform")
            fin = [spectra.alignment(s[-1], direction.vector) for s in states]
        out[matrix] = float(np.concatenate(fin).mean())
    return out


def sign_variant(lab: Lab, direction: steering.Direction, alpha: float = 100,
                 heldout: Sequence[str] | None = None) -> dict[str, float]:
    """Exercise 5.3's variant [ours]: the O-edit with ``w`` the unit mean head output of the last layer.

    ``ō`` is the mean of the concatenated head outputs over every token of every prompt
    (:meth:`Lab.head_outputs`), ``w = ō/‖ō‖``; α is relative (``α|c| = alpha·|λ₁(F_L)|``). Returns
    ``c``, ``sign_agreement`` (the fraction of tokens with ``wᵀ o_i > 0``), ``top1`` (the fraction of
    prompts whose most likely next token is ``direction``'s word, measured with the edit in place),
    ``z_cos`` (``|cos(z, u)|``, ``z = V_Lᵀ w``: how far the planted direction is from ``u``), ``strength``
    (the mean norm of the change, :func:`lib.methods.steering.matched_strength`) and, with ``heldout`` texts,
    ``ppl`` (their perplexity with the edit, :func:`text_losses`).
    """
    if not lab.has_head or direction.token_id is None:
        raise steering.InputError("sign_variant needs a decoder with an LM head and a word direction")
    outs = lab.head_outputs(-1)
    o_bar = np.concatenate(outs).mean(0)
    out: dict[str, float] = {}
    with steering.steer(lab.model, direction, alpha, w=o_bar / np.linalg.norm(o_bar)) as edit:
        ranks = target_ranks(lab.logits(lab.real_states(-1)), direction.token_id)
        if heldout is not None:
            ls, lc = text_losses(lab.model, heldout)
            out["ppl"] = math.exp(ls.sum() / lc.sum())
    return {"c": float(edit.c), "sign_agreement": steering.sign_agreement(edit, outs),
            "top1": float(np.mean(ranks == 1)),
            "z_cos": float(abs(edit.z @ edit.u) / np.linalg.norm(edit.z)),
            "strength": steering.matched_strength(edit, outs), **out}


def real_model_sweep(model: SpectralModel, word: str = "boat", texts: Sequence[str] | None = None,
                     prompt: str = "The sailor looked at the", alphas: Sequence[float] = ALPHAS) -> dict[str, pd.DataFrame]:
    """§5.8's sweep of a hub checkpoint with an LM head: ``word`` (:func:`lib.methods.steering.word_direction`, e.g.
    GPT-2's ``Ġboat``) and a random control, over ``texts`` (default: 16 prompts of the book's English
    prompt set, :func:`lib.models.prompts.prompts`); the :func:`sweep` tables."""
    from lib.models import prompts

    lab = Lab(model, list(texts) if texts is not None else prompts.prompts(16), prompt=prompt)
    dirs = [steering.word_direction(model, word), steering.random_direction(model.d_model)]
    return sweep(lab, dirs, alphas)
