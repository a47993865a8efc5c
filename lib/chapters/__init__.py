"""``lib.chapters``: one analysis module per chapter, named after the chapter's slug (``book/NN_slug.md``).

Each runs the chapter's experiments over a model and its random-init twins and returns frames and verdicts;
the page module of the same name (``lib.page.<slug>``) draws and words them, and ``lib.exercises.<slug>``
checks the chapter's exercises. A chapter whose analysis outgrows one module splits it by topic, the slug first
(``real_models_directions``: chapter 3's own-direction tests). What two chapters share lives below, in
:mod:`lib.methods` or :mod:`lib.stats`.
"""
