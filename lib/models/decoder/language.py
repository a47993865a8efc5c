"""A small synthetic English-like language: the decoder's training corpus and the chapter's prompts.

[ours] The book's decoder is trained on text generated here, from a seeded probabilistic grammar,
so the corpus needs no download and carries no third-party licence (the grammar and word lists are
the project's own, under the project's licence). The language keeps a few features of English that
a small model must learn to predict it well:

* subject–verb agreement in number (``the dog runs`` / ``the dogs run``), including across a
  prepositional phrase (``the dog near the trees runs``);
* pronouns that agree with the previous sentence's subject (``the girl ... . she ...``);
* a topic per story (places, animals, weather) that biases which nouns and verbs appear;
* transitive and intransitive verbs, adjectives, prepositional phrases and conjunctions.

Everything is lowercase words and punctuation separated by spaces, so a word-level tokenizer
covers it exactly (no unknown tokens).
"""

from __future__ import annotations

import numpy as np

__all__ = ["TOPICS", "generate_corpus", "prompts", "sentence", "story", "vocabulary"]

# -- word lists: (singular, plural, pronoun) for nouns; (3rd singular, plural) for verbs ------------
PEOPLE = [
    ("girl", "girls", "she"), ("boy", "boys", "he"), ("woman", "women", "she"), ("man", "men", "he"),
    ("farmer", "farmers", "he"), ("teacher", "teachers", "she"), ("child", "children", "it"),
    ("king", "kings", "he"), ("queen", "queens", "she"), ("sailor", "sailors", "he"),
]
ANIMALS = [
    ("dog", "dogs", "it"), ("cat", "cats", "it"), ("bird", "birds", "it"), ("horse", "horses", "it"),
    ("fox", "foxes", "it"), ("fish", "fish", "it"), ("rabbit", "rabbits", "it"), ("wolf", "wolves", "it"),
]
THINGS = [
    ("tree", "trees"), ("river", "rivers"), ("house", "houses"), ("stone", "stones"), ("road", "roads"),
    ("boat", "boats"), ("hill", "hills"), ("garden", "gardens"), ("door", "doors"), ("apple", "apples"),
    ("book", "books"), ("fire", "fires"), ("field", "fields"), ("bridge", "bridges"), ("ship", "ships"),
]
TOPICS: dict[str, dict[str, list]] = {
    "farm": {
        "things": ["field", "apple", "house", "garden", "fire", "road"],
        "adjs": ["green", "old", "small", "warm", "quiet"],
        "intrans": [("works", "work"), ("sleeps", "sleep"), ("waits", "wait"), ("sings", "sing")],
        "trans": [("plants", "plant"), ("finds", "find"), ("carries", "carry"), ("eats", "eat")],
    },
    "sea": {
        "things": ["boat", "ship", "river", "stone", "bridge", "road"],
        "adjs": ["blue", "cold", "wide", "dark", "wet"],
        "intrans": [("swims", "swim"), ("sails", "sail"), ("waits", "wait"), ("falls", "fall")],
        "trans": [("watches", "watch"), ("pulls", "pull"), ("finds", "find"), ("loses", "lose")],
    },
    "forest": {
        "things": ["tree", "hill", "stone", "river", "fire", "road"],
        "adjs": ["tall", "dark", "old", "green", "quiet"],
        "intrans": [("runs", "run"), ("hides", "hide"), ("sleeps", "sleep"), ("walks", "walk")],
        "trans": [("sees", "see"), ("follows", "follow"), ("hears", "hear"), ("finds", "find")],
    },
    "town": {
        "things": ["house", "door", "book", "road", "bridge", "garden"],
        "adjs": ["big", "new", "bright", "busy", "small"],
        "intrans": [("walks", "walk"), ("talks", "talk"), ("laughs", "laugh"), ("waits", "wait")],
        "trans": [("opens", "open"), ("reads", "read"), ("builds", "build"), ("sees", "see")],
    },
}
PREPS = ["near", "under", "behind", "across", "beside", "over"]
ADVERBS = ["slowly", "quickly", "again", "today", "alone", "often"]
TIMES = ["in the morning", "at night", "after the rain", "before the winter", "every day"]
CONJ = ["and", "but", "so", "because"]
THING_PLURAL = dict(THINGS)


def _pick(rng: np.random.Generator, xs: list):
    return xs[int(rng.integers(len(xs)))]


def _det(rng: np.random.Generator, plural: bool) -> str:
    return _pick(rng, ["the", "some", "many"]) if plural else _pick(rng, ["the", "the", "a", "one"])


def _thing_np(rng: np.random.Generator, topic: dict) -> str:
    plural = rng.random() < 0.3
    noun = _pick(rng, topic["things"])
    words = [_det(rng, plural)]
    if rng.random() < 0.4:
        words.append(_pick(rng, topic["adjs"]))
    words.append(THING_PLURAL[noun] if plural else noun)
    return " ".join(words)


def sentence(rng: np.random.Generator, topic: str, subject: tuple | None = None) -> tuple[str, tuple]:
    """One sentence of ``topic``; ``subject = (noun_sg, noun_pl, pronoun, plural)`` repeats a subject.

    Returns ``(text, subject)`` so that the next sentence can refer back with a pronoun.
    """
    tp = TOPICS[topic]
    words: list[str] = []
    if rng.random() < 0.15:
        words += _pick(rng, TIMES).split() + [","]
    if subject is not None and rng.random() < 0.6:
        sg, pl, pron, plural = subject
        words.append("they" if plural else pron)
    else:
        sg, pl, pron = _pick(rng, PEOPLE if rng.random() < 0.55 else ANIMALS)
        plural = rng.random() < 0.3
        words.append(_det(rng, plural))
        if rng.random() < 0.4:
            words.append(_pick(rng, tp["adjs"]))
        words.append(pl if plural else sg)
        if rng.random() < 0.25:  # agreement across a prepositional phrase
            words += [_pick(rng, PREPS)] + _thing_np(rng, tp).split()
    subject = (sg, pl, pron, plural)
    pronoun_plural = words[-1] == "they" or plural

    def verb_phrase() -> list[str]:
        if rng.random() < 0.5:
            v = _pick(rng, tp["trans"])[1 if pronoun_plural else 0]
            out = [v] + _thing_np(rng, tp).split()
        else:
            v = _pick(rng, tp["intrans"])[1 if pronoun_plural else 0]
            out = [v]
            if rng.random() < 0.5:
                out += [_pick(rng, PREPS)] + _thing_np(rng, tp).split()
        if rng.random() < 0.3:
            out.append(_pick(rng, ADVERBS))
        return out

    words += verb_phrase()
    if rng.random() < 0.25:
        words += [_pick(rng, CONJ)] + verb_phrase()
    words.append(".")
    words = ["an" if w == "a" and nxt[0] in "aeiou" else w for w, nxt in zip(words, words[1:] + ["."])]
    return " ".join(words), subject


def story(rng: np.random.Generator, n_sentences: int | None = None) -> str:
    """A short story: one topic, 2–6 sentences, pronouns referring back to earlier subjects."""
    topic = _pick(rng, sorted(TOPICS))
    n = int(rng.integers(2, 7)) if n_sentences is None else n_sentences
    subject, out = None, []
    for _ in range(n):
        text, subject = sentence(rng, topic, subject)
        out.append(text)
    return " ".join(out)


def generate_corpus(n_stories: int, seed: int) -> list[str]:
    """``n_stories`` stories from ``numpy.random.default_rng(seed)`` (deterministic)."""
    rng = np.random.default_rng(seed)
    return [story(rng) for _ in range(n_stories)]


def vocabulary() -> list[str]:
    """Every word and punctuation mark the grammar can emit, sorted (the tokenizer's word list)."""
    words: set[str] = {".", ",", "they", "the", "a", "an", "one", "some", "many"}
    for sg, pl, pron in PEOPLE + ANIMALS:
        words |= {sg, pl, pron}
    for sg, pl in THINGS:
        words |= {sg, pl}
    for tp in TOPICS.values():
        words |= set(tp["adjs"])
        for pair in tp["intrans"] + tp["trans"]:
            words |= set(pair)
    words |= set(PREPS) | set(ADVERBS) | set(CONJ)
    for t in TIMES:
        words |= set(t.split())
    return sorted(words)


PROMPT_SEED = 20260501
"""Seed of the chapter's prompt set (disjoint in seed from the training corpus, seed 0)."""


def prompts(n: int = 96, seed: int = PROMPT_SEED) -> list[str]:
    """The chapter's fixed prompt set: ``n`` stories of 2–3 sentences (versioned by ``seed``).

    The same English-like prompts feed MiniLM (uncased WordPiece covers every word) and the book's
    decoder, so both models see identical inputs.
    """
    rng = np.random.default_rng(seed)
    return [story(rng, n_sentences=int(rng.integers(2, 4))) for _ in range(n)]
