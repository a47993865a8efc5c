"""Communities of residual coordinates and their coupling to Jacobian gain (chapter 4, section 4.7).

[secondary] The graph's nodes are residual-stream coordinates; it is signed, sparsified to top-k
edges, and partitioned by signed Leiden. [ours] Every parameter and every formula below is our
**reconstruction**:

1. :func:`correlation_graph`: Pearson correlation of z-scored coordinates over tokens, each node
   keeping its ``k`` strongest ``|C_ij|`` (with sign), symmetrised by union;
2. :func:`signed_leiden`: two-slice multiplex Leiden (positive edges weight +1, ``|negative|``
   edges weight −1), several seeds, best quality kept, agreement across seeds as NMI;
3. :func:`participation`: ``P_i = 1 − Σ_s (k_is/k_i)²`` with ``k_is = Σ_{j∈s} |w_ij|``;
4. :func:`unit_gain`, :func:`community_gain`: squared Jacobian column norms, as log ratios to the
   layer's median unit gain;
5. :func:`coupling`: Spearman ``r_S`` between participation and log gain, with (a) a gain-permutation
   null and (b) a size-preserving community-relabelling null; :func:`benjamini_hochberg` across layers;
6. :func:`planted_power`: the power of that test on planted partitions of a given size, and
   :func:`power_qualified`: a null verdict from a test too weak to see a modest effect becomes
   "inconclusive (underpowered)" (chapters 4 and 6).

The analysis depends on the coordinate basis (the spectra do not): it is meaningful only because
norms and activations single out the standard basis. The page's tables of these results (``coupling_table``,
``operator_table``, ``community_table``, ``power_table``) are in :mod:`lib.page.jacobian_funnel`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lib.linalg.spectra import as_float64
from lib.stats import benjamini_hochberg

if TYPE_CHECKING:
    from lib.jacobians.sweep import JacobianSet
    from lib.models import Twins

__all__ = [
    "CouplingResult",
    "LayerTopology",
    "Partition",
    "SUB_BLOCK_NAMES",
    "TopologySweep",
    "community_gain",
    "correlation_graph",
    "coupling",
    "layer_topology",
    "nmi",
    "participation",
    "planted_power",
    "pooled_community_coupling",
    "power_qualified",
    "signed_leiden",
    "token_matrix",
    "topology_sweep",
    "unit_gain",
]


def token_matrix(states: Sequence, layer: int, specials: Sequence | None = None) -> np.ndarray:
    """Stack the residual entering block ``layer`` at every token except position 0 (and specials).

    Args:
        states: per-text ``(L + 1, n, d)`` streams (``SpectralModel.hidden_states``).
        specials: optional per-text boolean masks ``(n,)`` of special tokens to drop.
    """
    rows = []
    for i, h in enumerate(states):
        h = as_float64(h)[layer]
        keep = np.ones(len(h), dtype=bool)
        keep[0] = False
        if specials is not None:
            keep &= ~np.asarray(specials[i], dtype=bool)
        rows.append(h[keep])
    return np.concatenate(rows, axis=0)


def correlation_graph(X, k: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Signed top-k correlation graph over the columns of ``X`` (tokens × d).

    Returns:
        ``(W, outliers)``: ``W`` is the symmetric ``(d, d)`` signed weight matrix (zero diagonal,
        node i keeps its ``k`` largest ``|C_ij|``, union-symmetrised); ``outliers`` lists the
        coordinates with some ``|z| > 20`` (reported separately, as the brief asks).
    """
    X = as_float64(X)
    sd = X.std(0)
    sd[sd == 0] = 1.0
    Z = (X - X.mean(0)) / sd
    outliers = np.flatnonzero((np.abs(Z) > 20).any(0))
    C = (Z.T @ Z) / len(Z)
    np.fill_diagonal(C, 0.0)
    d = C.shape[0]
    k = min(k, d - 1)
    top = np.argpartition(-np.abs(C), k - 1, axis=1)[:, :k]
    keep = np.zeros_like(C, dtype=bool)
    keep[np.repeat(np.arange(d), k), top.ravel()] = True
    keep |= keep.T
    return np.where(keep, C, 0.0), outliers


def _igraph(W: np.ndarray):
    import igraph as ig

    iu = np.triu_indices(len(W), 1)
    sel = W[iu] != 0
    g = ig.Graph(n=len(W), edges=list(zip(iu[0][sel].tolist(), iu[1][sel].tolist())))
    g.es["weight"] = W[iu][sel].tolist()
    return g


def nmi(a: Sequence[int], b: Sequence[int]) -> float:
    """Normalised mutual information of two memberships (igraph's ``compare_communities``)."""
    import igraph as ig

    return float(ig.compare_communities(list(a), list(b), method="nmi"))


@dataclass
class Partition:
    """Best signed-Leiden partition over seeds.

    Attributes:
        membership: ``(d,)`` community ids (0..C−1, by decreasing size).
        quality: its multiplex quality. seed: the seed that found it.
        nmi_mean, nmi_min: agreement (NMI) of every seed's partition with the best one.
        n_communities: communities of any size; sizes: their sizes.
    """

    membership: np.ndarray
    quality: float
    seed: int
    nmi_mean: float
    nmi_min: float
    sizes: np.ndarray

    @property
    def n_communities(self) -> int:
        return len(self.sizes)


def signed_leiden(W, seeds: Sequence[int] = tuple(range(10)), resolution: float | None = None) -> Partition:
    """Signed Leiden on the two-slice multiplex (positive slice +1, ``|negative|`` slice −1).

    ``resolution=None`` uses ``ModularityVertexPartition``; a number uses
    ``RBConfigurationVertexPartition`` with that resolution.
    """
    import leidenalg as la

    W = as_float64(W)
    pos, neg = _igraph(np.where(W > 0, W, 0.0)), _igraph(np.where(W < 0, -W, 0.0))
    kind = la.ModularityVertexPartition if resolution is None else la.RBConfigurationVertexPartition
    extra = {} if resolution is None else {"resolution_parameter": resolution}
    runs = []
    for s in seeds:
        parts = [kind(g, weights="weight", **extra) for g in (pos, neg)]
        opt = la.Optimiser()
        opt.set_rng_seed(int(s))
        opt.optimise_partition_multiplex(parts, layer_weights=[1, -1], n_iterations=-1)
        q = parts[0].quality() - parts[1].quality()
        runs.append((q, int(s), np.array(parts[0].membership)))
    q, seed, memb = max(runs, key=lambda r: (r[0], -r[1]))
    # relabel by decreasing size (ties: first appearance)
    ids, counts = np.unique(memb, return_counts=True)
    order = ids[np.lexsort((ids, -counts))]
    relabel = {int(c): i for i, c in enumerate(order)}
    memb = np.array([relabel[int(c)] for c in memb])
    scores = [nmi(memb, r[2]) for r in runs]
    return Partition(membership=memb, quality=float(q), seed=seed, nmi_mean=float(np.mean(scores)),
                     nmi_min=float(np.min(scores)), sizes=np.bincount(memb))


def _onehot(membership: np.ndarray) -> np.ndarray:
    m = np.asarray(membership)
    E = np.zeros((len(m), int(m.max()) + 1))
    E[np.arange(len(m)), m] = 1.0
    return E


def participation(W, membership, positive_only: bool = False) -> np.ndarray:
    """Participation coefficient ``P_i = 1 − Σ_s (k_is / k_i)²``, strengths ``k_is = Σ_{j∈s} |w_ij|``.

    ``positive_only``: use positive edges only (variant). Isolated nodes get ``P_i = 0``.
    """
    W = as_float64(W)
    A = np.where(W > 0, W, 0.0) if positive_only else np.abs(W)
    S = A @ _onehot(membership)  # (d, C)
    k = S.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        P = 1.0 - np.sum((S / k[:, None]) ** 2, axis=1)
    return np.where(k > 0, P, 0.0)


def unit_gain(J, log_ratio: bool = True) -> np.ndarray:
    """``g(i) = ‖J e_i‖²`` (squared column norms); by default ``log(g / median g)``."""
    g = np.sum(as_float64(J) ** 2, axis=0)
    return np.log(g / np.median(g)) if log_ratio else g


def community_gain(J, membership, min_size: int = 5) -> pd.DataFrame:
    """Per community ``g(C) = ‖J E_C‖_F² / |C|`` and ``log(g(C) / median_i g(i))``, communities ≥ ``min_size``.

    Also the self-gain of the update ``tr(E_Cᵀ (J − I) E_C) / |C|``.
    """
    J = as_float64(J)
    g = np.sum(J**2, axis=0)
    med = np.median(g)
    m = np.asarray(membership)
    rows = []
    for c in np.unique(m):
        idx = np.flatnonzero(m == c)
        if len(idx) < min_size:
            continue
        gc = g[idx].sum() / len(idx)
        self_gain = (np.trace(J[np.ix_(idx, idx)]) - len(idx)) / len(idx)
        rows.append({"community": int(c), "size": len(idx), "gain": gc, "log_gain": np.log(gc / med),
                     "self_gain": self_gain})
    return pd.DataFrame(rows)


def _ranks(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(x, axis=-1)


def _pearson_rows(a: np.ndarray, B: np.ndarray) -> np.ndarray:
    a = (a - a.mean()) / a.std()
    B = (B - B.mean(-1, keepdims=True)) / B.std(-1, keepdims=True)
    return (B @ a) / len(a)


@dataclass
class CouplingResult:
    """Spearman coupling of participation with log gain, and its two permutation p-values.

    ``p_gain``: null (a), gains permuted across units. ``p_relabel``: null (b), community labels
    shuffled with sizes preserved and participation recomputed (``nan`` if not run). Both two-sided,
    ``(1 + #{|r_null| ≥ |r|}) / (1 + n_perm)``.
    """

    r_s: float
    p_gain: float
    p_relabel: float
    n_perm: int


def coupling(P, log_gain, *, W=None, membership=None, n_perm: int = 1000, seed: int = 0) -> CouplingResult:
    """Spearman ``r_S(P_i, log g_i)`` with null (a) and, given ``W`` and ``membership``, null (b)."""
    P = np.asarray(P, dtype=np.float64)
    g = np.asarray(log_gain, dtype=np.float64)
    rng = np.random.default_rng(seed)
    rP, rg = _ranks(P), _ranks(g)
    r = float(_pearson_rows(rP, rg[None])[0])
    perm = np.argsort(rng.random((n_perm, len(g))), axis=1)
    null_a = _pearson_rows(rP, rg[perm])
    p_a = (1 + np.sum(np.abs(null_a) >= abs(r) - 1e-12)) / (1 + n_perm)
    p_b = float("nan")
    if W is not None and membership is not None:
        m = np.asarray(membership)
        A = np.abs(as_float64(W))
        k = A.sum(1)
        C = int(m.max()) + 1
        null_b = np.empty(n_perm)
        for s in range(0, n_perm, 100):  # vectorised over up to 100 relabellings at a time
            perms = np.stack([rng.permutation(m) for _ in range(min(100, n_perm - s))])
            E = np.zeros((len(perms), len(m), C))
            E[np.arange(len(perms))[:, None], np.arange(len(m))[None], perms] = 1.0
            S = A @ E
            with np.errstate(invalid="ignore", divide="ignore"):
                Pn = np.where(k > 0, 1.0 - np.sum((S / k[None, :, None]) ** 2, axis=2), 0.0)
            null_b[s : s + len(perms)] = _pearson_rows(rg, _ranks(Pn))
        p_b = float((1 + np.sum(np.abs(null_b) >= abs(r) - 1e-12)) / (1 + n_perm))
    return CouplingResult(r_s=r, p_gain=float(p_a), p_relabel=p_b, n_perm=n_perm)


@dataclass
class LayerTopology:
    """Everything section 4.7 computes for one layer (see :func:`layer_topology`)."""

    W: np.ndarray
    partition: Partition
    participation: np.ndarray
    log_gain: np.ndarray
    coupling: CouplingResult
    communities: pd.DataFrame
    outliers: np.ndarray


def layer_topology(X_tokens, J, *, k: int = 20, seeds: Sequence[int] = tuple(range(10)), n_perm: int = 1000,
                   relabel_null: bool = True, seed: int = 0, min_size: int = 5) -> LayerTopology:
    """The section 4.7 pipeline for one layer: graph, communities, participation, gains and coupling.

    Args:
        X_tokens: the residual entering the block at every token, ``(N_tok, d)``.
        J: the layer's mean Jacobian ``J̄_l`` (d, d).
    """
    W, outliers = correlation_graph(X_tokens, k=k)
    part = signed_leiden(W, seeds=seeds)
    P = participation(W, part.membership)
    lg = unit_gain(J)
    cp = coupling(P, lg, W=W if relabel_null else None, membership=part.membership, n_perm=n_perm, seed=seed)
    comm = community_gain(J, part.membership, min_size=min_size)
    if len(comm):
        comm["boundary"] = [P[part.membership == c].mean() for c in comm.community]
    return LayerTopology(W=W, partition=part, participation=P, log_gain=lg, coupling=cp, communities=comm,
                         outliers=outliers)


def planted_power(d: int, n_tokens: int, *, n_communities: int = 3, effects: Sequence[float] = (0.1, 0.2, 0.3),
                  reps: int = 20, n_bridges: int | None = None, k: int = 20, leiden_seeds: int = 2,
                  n_perm: int = 200, alpha: float = 0.05, n_layers: int = 6, seed: int = 0) -> pd.DataFrame:
    """Power of the section 4.7 coupling test on planted partitions of the chapter's size [ours].

    Each replicate plants ``n_communities`` equal communities of coordinates over ``n_tokens`` tokens
    (one latent factor per community, unit noise) with ``n_bridges`` coordinates (default ``d // 10``)
    loading on two factors, runs the whole pipeline (graph, signed Leiden, participation), then plants a
    log gain whose Spearman correlation with participation is about ``effect``
    (``ρ · z(rank P) + sqrt(1 − ρ²) · noise``) and runs :func:`coupling` (gain-permutation null).

    Returns:
        one row per effect: ``effect``, ``r_s_mean`` (the coupling actually planted), ``nmi_mean``
        (recovery of the planted partition), ``power`` (share of replicates with ``p < alpha``) and
        ``power_bh`` (share with ``p < alpha / n_layers``: the Benjamini–Hochberg threshold when one
        of ``n_layers`` layers carries the effect).
    """
    from scipy.stats import norm

    rng = np.random.default_rng(seed)
    n_bridges = d // 10 if n_bridges is None else n_bridges
    memb = np.arange(d) % n_communities
    hits = {e: [] for e in effects}
    for r in range(reps):
        F = rng.standard_normal((n_tokens, n_communities))
        X = F[:, memb] + rng.standard_normal((n_tokens, d))
        for b in rng.choice(d, n_bridges, replace=False):
            X[:, b] = 0.7 * F[:, memb[b]] + 0.7 * F[:, (memb[b] + 1) % n_communities] + rng.standard_normal(n_tokens)
        W, _ = correlation_graph(X, k=k)
        part = signed_leiden(W, seeds=range(leiden_seeds))
        P = participation(W, part.membership)
        zP = norm.ppf((_ranks(P) - 0.5) / d)
        for e in effects:
            g = e * zP + np.sqrt(1 - e * e) * rng.standard_normal(d)
            c = coupling(P, g, n_perm=n_perm, seed=int(rng.integers(2**31)))
            hits[e].append((c.r_s, nmi(part.membership, memb), c.p_gain))
    rows = []
    for e, h in hits.items():
        a = np.array(h)
        rows.append({"effect": e, "r_s_mean": a[:, 0].mean(), "nmi_mean": a[:, 1].mean(),
                     "power": float(np.mean(a[:, 2] < alpha)), "power_bh": float(np.mean(a[:, 2] < alpha / n_layers))})
    return pd.DataFrame(rows)


SUB_BLOCK_NAMES: dict[str, str] = {"attn": "attention", "mlp": "MLP"}
"""How tables name :attr:`lib.jacobians.sweep.JacobianSet.parts`."""


@dataclass
class TopologySweep:
    """Section 4.7 for a model and its twins, every layer (see :func:`topology_sweep`).

    Attributes:
        layers: ``(series, l)`` → :class:`LayerTopology` (``l`` 0-based).
        coupling: one row per series and layer: ``model``, ``weights`` (the series label), ``layer`` (1-based),
            ``depth``, ``n_tokens``, ``communities``, ``nmi_seeds``, ``nmi_min``, ``r_s``, ``p_gain``,
            ``p_relabel`` and ``q`` (Benjamini–Hochberg of ``p_gain`` over each series' layers).
        sub_blocks: one row per series, sub-block (``"attention"``, ``"MLP"``) and layer: the same participation
            against the sub-block's gain, ``r_s``, ``p_gain`` and ``q`` (BH over each sub-block's layers).
        series: the series labels, trained first.
    """

    layers: dict[tuple[str, int], LayerTopology]
    coupling: pd.DataFrame
    sub_blocks: pd.DataFrame
    series: list[str]


def _bh_by(frame: pd.DataFrame, by: list[str]) -> np.ndarray:
    q = np.full(len(frame), np.nan)
    for _, idx in frame.groupby(by).indices.items():
        q[idx] = benjamini_hochberg(frame["p_gain"].to_numpy()[idx])
    return q


def topology_sweep(twins: Twins, jacobians: Mapping[str, JacobianSet], texts: Sequence[str], *, k: int = 20,
                   seeds: Sequence[int] = tuple(range(10)), n_perm: int = 500) -> TopologySweep:
    """:func:`layer_topology` at every layer of the trained model and of each twin, on the same ``texts``.

    Layer ``l``'s graph is built from the residual entering block ``l`` at every token of ``texts``
    (:func:`token_matrix`), its gains from ``jacobians[series].mean[l]``; both permutation nulls use
    ``n_perm`` permutations seeded by the layer index. Where ``jacobians`` hold sub-block means
    (``parts``), the same participation is also coupled to each sub-block's gain.

    Args:
        twins: :func:`lib.load_twins`'s models. jacobians: series label (:meth:`lib.models.Twins.series`) →
            that model's mean Jacobians (:class:`lib.jacobians.sweep.JacobianSet`).
        texts: the graph's texts. k, seeds, n_perm: as :func:`layer_topology`.
    """
    layers, rows, part_rows = {}, [], []
    for model in twins:
        series = twins.series(model)
        js = jacobians[series]
        states = model.hidden_states(list(texts))
        specials = [model.encode(s)["special"] for s in texts]
        for l in range(model.n_layers):
            Xtok = token_matrix(states, l, specials)
            res = layer_topology(Xtok, js.mean[l], k=k, seeds=seeds, n_perm=n_perm, seed=l)
            layers[series, l] = res
            rows.append({"model": twins.name, "weights": series, "layer": l + 1, "depth": (l + 1) / model.n_layers,
                         "n_tokens": len(Xtok), "communities": res.partition.n_communities,
                         "nmi_seeds": res.partition.nmi_mean, "nmi_min": res.partition.nmi_min,
                         "r_s": res.coupling.r_s, "p_gain": res.coupling.p_gain, "p_relabel": res.coupling.p_relabel})
            for part, Jp in js.parts.items():
                c = coupling(res.participation, unit_gain(Jp[l]), n_perm=n_perm, seed=l)
                part_rows.append({"weights": series, "sub_block": SUB_BLOCK_NAMES.get(part, part), "layer": l + 1,
                                  "depth": (l + 1) / model.n_layers, "r_s": c.r_s, "p_gain": c.p_gain})
    coup = pd.DataFrame(rows)
    coup["q"] = _bh_by(coup, ["weights"])
    parts = pd.DataFrame(part_rows, columns=["weights", "sub_block", "layer", "depth", "r_s", "p_gain"])
    parts["q"] = _bh_by(parts, ["weights", "sub_block"]) if len(parts) else []
    return TopologySweep(layers=layers, coupling=coup, sub_blocks=parts, series=[twins.series(m) for m in twins])


def pooled_community_coupling(sweep: TopologySweep, min_size: int = 5) -> tuple[pd.DataFrame, dict[str, object]]:
    """Communities of every layer, pooled per series, and the Spearman correlation of their boundary score with
    their log gain (section 4.7's community-level test).

    Returns:
        ``(communities, correlations)``: every community of at least ``min_size`` units (the columns of
        :func:`community_gain` plus ``boundary``, ``weights`` and ``layer``), and series label →
        ``scipy.stats.spearmanr`` result over that series' communities.
    """
    from scipy.stats import spearmanr

    frames = [res.communities.assign(weights=s, layer=l + 1) for (s, l), res in sweep.layers.items()]
    comm = pd.concat(frames, ignore_index=True)
    comm = comm[comm["size"] >= min_size]
    return comm, {s: spearmanr(g.boundary, g.log_gain) for s, g in comm.groupby("weights", sort=False)}


def power_qualified(verdict: str, planted_r, power, *, at_r: float = 0.2, level: float = 0.8) -> str:
    """A "not reproduced" from a test too weak to see a modest effect becomes "inconclusive (underpowered)".

    Args:
        verdict: the verdict of the test on the data.
        planted_r: ``(E,)`` mean coupling ``r_S`` of each planted effect of a power analysis
            (:func:`planted_power`).
        power: ``(E,)`` the share of replicates in which the test found that planted effect.
        at_r: the effect size the test must be able to see [ours: a modest coupling, |r_S| = 0.2].
        level: the power needed to read a null result as absence (0.8, the usual convention).

    Returns:
        ``verdict`` unchanged unless it is ``"not reproduced"`` and the power at the planted effect nearest
        ``at_r`` is below ``level``.

    Example:
        >>> power_qualified("not reproduced", [0.16, 0.32], [0.22, 0.84])
        'inconclusive (underpowered)'
    """
    if verdict != "not reproduced":
        return verdict
    r, pw = np.asarray(planted_r, dtype=np.float64), np.asarray(power, dtype=np.float64)
    if r.shape != pw.shape or r.size == 0:
        raise ValueError(f"planted_r and power must be equal-length, non-empty; got {r.shape} and {pw.shape}")
    return "inconclusive (underpowered)" if pw[np.argmin(np.abs(r - at_r))] < level else verdict
