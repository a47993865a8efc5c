"""The claims the book tests, and how a chapter reports what it measured for each.

Every row of the *Results at a glance* page (``book/results.md``) is one :class:`Claim`: a claim of one of
the two papers (or a finding of our own), the chapter and section that test it, and three values that the
chapter computes and glues with :func:`glue_claim` when it is executed:

* ``claim_<id>_models``: the models the chapter ran for it (e.g. "all-MiniLM-L6-v2; 3 random-init twins");
* ``claim_<id>_measured``: the measured quantity with its interval, as prose ("γ_t/chance 0.61–1.12, ...");
* ``claim_<id>_verdict``: one of :data:`VERDICTS`, decided by the chapter's code from its numbers.

The Results page pastes them across documents (``{glue:text}`03_real_models.md::claim_LA7_verdict```), so
nothing on it is typed in; ``tests/pages/test_results_page.py`` checks that every claim is on the page, that the
built page shows a value for each, and that every claim's section label exists. Each chapter places the
MyST target ``(claim-<id lowercased>)=`` above the section that tests the claim.

Claim texts paraphrase the papers' abstracts and introductions [paper]; rows marked ``ours`` are the
book's own findings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ANSWERS", "CLAIMS", "MODEL_TAGS", "SOURCES", "VERDICTS", "Claim", "answer", "claim", "glue_claim", "model_tags",
           "verdict_counts", "verdict_slug", "verdict_if"]

Source = Literal["li2026power", "fernando2026residual", "ours"]

VERDICTS: tuple[str, ...] = (
    "reproduced",
    "reproduced on toys",
    "partly reproduced",
    "not reproduced",
    "not specific to training",
    "inconclusive (underpowered)",
    "not testable offline",
)
"""The verdicts a row may carry. "reproduced on toys": a theorem checked on constructed matrices, not on a
trained model; "not specific to training": the effect is there, and as large at random initialization;
"inconclusive (underpowered)": the test found nothing, but a power analysis shows it could not have seen a
modest effect at this sample size."""


ANSWERS: dict[str, str] = {
    "reproduced": "yes",
    "reproduced on toys": "yes, on toys",
    "partly reproduced": "partly",
    "not reproduced": "no",
    "not specific to training": "yes, and as much at random init",
    "inconclusive (underpowered)": "can't tell (underpowered)",
    "not testable offline": "not testable offline",
}
"""How a verdict answers one of the book's own questions (rows with ``source="ours"``)."""

SOURCES: dict[str, str] = {
    "li2026power": "Li & Altafini: transformer layers as power-method steps",
    "fernando2026residual": "Fernando & Guitchounts: Jacobians of the residual stream",
    "ours": "The book's own questions: two views of one layer",
}
"""The Results page's three groups of claims, in their order, with their headings."""

MODEL_TAGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("toys", ("toy",)),
    ("MiniLM", ("MiniLM",)),
    ("decoder", ("book-decoder", "book decoder")),
    ("ALBERT configs", ("ALBERT",)),
    ("twins", ("twin",)),
)
"""Short tags for the models a claim was run on, each with the words of the glued ``models`` text that give it."""


def verdict_slug(verdict: str) -> str:
    """A CSS-safe name for a verdict: ``"inconclusive (underpowered)"`` → ``"inconclusive-underpowered"``."""
    if verdict not in VERDICTS:
        raise ValueError(f"unknown verdict {verdict!r}; use one of {VERDICTS}")
    return "-".join("".join(ch if ch.isalnum() else " " for ch in verdict).split())


def answer(c: Claim, verdict: str) -> str:
    """The word the overview shows: the verdict, or for the book's own questions its yes/no answer."""
    verdict_slug(verdict)
    return ANSWERS[verdict] if c.source == "ours" else verdict


def model_tags(models: str) -> list[str]:
    """The :data:`MODEL_TAGS` that a claim's glued ``models`` text names, in their order.

    Example:
        >>> model_tags("all-MiniLM-L6-v2 (220 prompts) and book-decoder, each with 3 random-init twins")
        ['MiniLM', 'decoder', 'twins']
    """
    return [tag for tag, words in MODEL_TAGS if any(w.lower() in models.lower() for w in words)]


def verdict_counts(verdicts: dict[str, str], source: str) -> dict[str, int]:
    """How many claims of ``source`` carry each verdict (only verdicts that occur, in :data:`VERDICTS` order).

    Args:
        verdicts: claim id → verdict, for every claim of ``source``.
    Raises:
        KeyError: a claim of ``source`` has no verdict in ``verdicts``.
    """
    ids = [c.id for c in CLAIMS if c.source == source]
    missing = [i for i in ids if i not in verdicts]
    if missing:
        raise KeyError(f"no verdict for {', '.join(missing)}")
    counts = {v: sum(verdicts[i] == v for i in ids) for v in VERDICTS}
    return {v: n for v, n in counts.items() if n}


@dataclass(frozen=True)
class Claim:
    """One row of the Results page.

    Attributes:
        id: short key, e.g. ``"LA7"`` (Li & Altafini) or ``"FG4"`` (Fernando & Guitchounts).
        source: the paper's bibtex key, or ``"ours"``.
        text: the claim in the book's words (a paraphrase of the paper's abstract or introduction), MyST
            inline markup allowed (``$v_{1,t}$``).
        chapter: the chapter file (``"03_real_models"``) whose execution glues the row's values.
        short: the claim in about ten words, for the overview at the top of the Results page (the book's own
            findings, ``source="ours"``, as a yes/no question).
    """

    id: str
    source: Source
    text: str
    chapter: str
    short: str

    @property
    def label(self) -> str:
        """The MyST target of the section that tests the claim: ``claim-<id lowercased>``."""
        return f"claim-{self.id.lower()}"

    def key(self, field: Literal["models", "measured", "verdict"]) -> str:
        """The glue key of one of the row's values, e.g. ``claim_LA7_verdict``."""
        return f"claim_{self.id}_{field}"


_LA, _FG = "li2026power", "fernando2026residual"
CLAIMS: tuple[Claim, ...] = (
    Claim("LA1", _LA, "Without its FFN, a layer acts like one power-method step on $F_t = O_t V_t$ and "
          "tilts the tokens toward $v_{1,t}$.", "01_power_method",
          "An attention-only layer is one power-method step toward v₁"),
    Claim("LA2", _LA, "Shared weights with a real, strictly dominant λ₁: consensus, all tokens aligned "
          "with v₁.", "02_shared_weights",
          "Shared weights, real dominant λ₁: tokens reach consensus on v₁"),
    Claim("LA3", _LA, "Shared weights with a complex λ₁: a limit cycle in the plane of Re v₁, Im v₁.",
          "02_shared_weights",
          "Shared weights, complex λ₁: tokens circle in a plane"),
    Claim("LA4", _LA, "Bipartite consensus is possible in theory but rare and unstable with many heads.",
          "02_shared_weights",
          "Bipartite consensus: possible, but rare and unstable with many heads"),
    Claim("LA5", _LA, "Iterating one shared layer, tokens converge quickly; the speed is limited by a small "
          "gap or a complex λ₁.", "03_real_models",
          "One shared layer iterated: tokens converge fast unless the gap is small"),
    Claim("LA6", _LA, "ALBERT base/large: real λ₁ close to λ₂ (tokens settle in span{v₁, v₂}); "
          "xlarge/xxlarge: complex λ₁ (tokens rotate in a plane).", "03_real_models",
          "ALBERT: base and large settle, xlarge and xxlarge rotate"),
    Claim("LA7", _LA, "Layer-varying models: the alignment $\\gamma_t$ with the layer's own $v_{1,t}$ is positive "
          "but weak.", "03_real_models",
          "Each layer aligns tokens with its own v₁, weakly"),
    Claim("LA8", _LA, "Layer-varying models: the probability $\\rho_t$ that a layer increases the alignment is "
          "consistently above 0.5.", "03_real_models",
          "A layer raises that alignment more often than not"),
    Claim("LA9", _LA, "Layer-varying models: no build-up of alignment toward one global direction.",
          "03_real_models",
          "No build-up of alignment toward one global direction"),
    Claim("LA10", _LA, "A large rank-1 edit of the last layer's output matrix makes the chosen direction $u$ "
          "the principal eigenvector of $F_L$.", "05_steering_lab",
          "A large rank-1 edit makes u the principal eigenvector"),
    Claim("LA11", _LA, "After that edit, all tokens align with $u$.", "05_steering_lab",
          "After that edit, every token aligns with u"),
    Claim("FG1", _FG, "Early layers are rotation-dominated (about 98% of eigenvalues complex); the complex "
          "fraction falls with depth.", "04_jacobian_funnel",
          "Early layers rotate; the complex fraction falls with depth"),
    Claim("FG2", _FG, "Early layers are non-normal, late layers near-symmetric: a monotonic gradient through "
          "depth.", "04_jacobian_funnel",
          "Non-normal early, near-symmetric late: a gradient through depth"),
    Claim("FG3", _FG, "The cumulative product of layer Jacobians is a low-rank funnel: about 7 to 40 "
          "directions survive.", "04_jacobian_funnel",
          "The cumulative Jacobian product is a low-rank funnel"),
    Claim("FG4", _FG, "Removing the structured non-normality largely removes the gradient and the "
          "collapse.", "04_jacobian_funnel",
          "Removing the non-normality removes the gradient and the funnel"),
    Claim("FG5", _FG, "A unit's position among activation communities predicts whether the Jacobian "
          "amplifies it; the sign depends on the operator type.", "04_jacobian_funnel",
          "Community position predicts amplification; the sign depends on the operator"),
    Claim("FG6", _FG, "Units that bridge communities are suppressed in early and middle layers and "
          "amplified late.", "04_jacobian_funnel",
          "Bridging units are suppressed early and amplified late"),
    Claim("FG7", _FG, "None of this is present at random initialization: it is learned.",
          "04_jacobian_funnel",
          "None of it is there at random initialization"),
    Claim("TV1", "ours", "In trained models the attention path carries most of the block update J̄ₜ − I (J̄ₜ for "
          "post-norm): its projection share ⟨J̄_A, Ū⟩/‖Ū‖² is over one half, median over layers with its 95% "
          "interval, through A = Fₜ on a single token and through the attention core's Jacobian in context.",
          "06_two_views",
          "Does the attention path carry most of the block update?"),
    Claim("TV2", "ours", "v₁(Fₜ) lies closer than chance to the Jacobian's leading subspaces (top-K eigenvectors, "
          "singular vectors, funnel image of J̄ₜ) in most layers, and more often than at random init.", "06_two_views",
          "Does v₁(Fₜ) lie near the Jacobian's leading subspaces?"),
    Claim("TV3", "ours", "The gap ratio of Fₜ predicts, layer by layer, the spectral radius, non-normality or "
          "effective rank of J̄ₜ.", "06_two_views",
          "Does the gap ratio of Fₜ predict the Jacobian's spectrum?"),
    Claim("TV4", "ours", "Measured against J̄ₜ's leading eigen-direction instead of v₁(Fₜ), γₜ or ρₜ beat their "
          "random-subspace null in more layers (at least two more of the twelve).", "06_two_views",
          "Do the Jacobian's directions make γₜ and ρₜ beat their null more often?"),
    Claim("TV5", "ours", "The single-token Jacobian (chapter 4's protocol) is close to the in-context "
          "Jacobian of the token in its sentence (median difference under 20% of the update).", "06_two_views",
          "Is the single-token Jacobian close to the in-context one?"),
    Claim("TV6", "ours", "When the chapter-5 O-edit is many times the LayerNorm input it meets, the Jacobian view "
          "of the last block collapses: a(W̄u, u) and |⟨s₁, u⟩| fall under half their unedited values; trained "
          "and random-init twins compared at the same edit size.", "06_two_views",
          "Does the Jacobian view collapse when the edit saturates the LayerNorm?"),
    Claim("TV7", "ours", "At the same edit size, trained MiniLM's steered tokens settle lower than its twins', at "
          "the α → ∞ fixed point of the edited block (the LayerNorm of ±u through the MLP), which predicts "
          "every post-norm model's ceiling.", "06_two_views",
          "Does the edited block's fixed point set the trained model's lower ceiling?"),
)


def claim(claim_id: str) -> Claim:
    """The :class:`Claim` with this id (``KeyError`` naming the known ids if there is none)."""
    for c in CLAIMS:
        if c.id == claim_id:
            return c
    raise KeyError(f"no claim {claim_id!r}; known: {', '.join(c.id for c in CLAIMS)}")


def verdict_if(held: bool, *, otherwise: str = "not reproduced", when_held: str = "reproduced") -> str:
    """``when_held`` if ``held`` else ``otherwise``, both checked against :data:`VERDICTS`.

    Example:
        >>> verdict_if(False, otherwise="not specific to training")
        'not specific to training'
    """
    for v in (when_held, otherwise):
        if v not in VERDICTS:
            raise ValueError(f"unknown verdict {v!r}; use one of {VERDICTS}")
    return when_held if held else otherwise


def glue_claim(claim_id: str, *, models: str, measured: str, verdict: str) -> None:
    """Glue one Results-page row from the chapter that tests it (``display=False``: nothing is shown).

    Glued with :func:`lib.page.prose.glue`, so a chapter's prose may quote its own verdict as
    ``{eval}`claim_FG3_verdict``` in JupyterLab as on the site (myst-nb's glue alone left the lab a NameError).

    Args:
        claim_id: a :data:`CLAIMS` id.
        models: the models the chapter ran for this claim.
        measured: the measured values with their intervals or null ranges, as a short phrase.
        verdict: one of :data:`VERDICTS` (compute it from the numbers, e.g. with :func:`verdict_if`).
    """
    from lib.page.prose import glue

    c = claim(claim_id)
    if verdict not in VERDICTS:
        raise ValueError(f"unknown verdict {verdict!r} for {claim_id}; use one of {VERDICTS}")
    for field, value in (("models", models), ("measured", measured), ("verdict", verdict)):
        if not str(value).strip():
            raise ValueError(f"claim {claim_id}: empty {field}")
        glue(c.key(field), str(value), display=False)
