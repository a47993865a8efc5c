"""``lib.linalg``: arrays in, arrays out. Eigenpairs in the book's conventions (:mod:`~lib.linalg.spectra`), top-k
eigenpairs of stacks (:mod:`~lib.linalg.topk_eig`), the power method (:mod:`~lib.linalg.power`), non-normality
metrics and controls (:mod:`~lib.linalg.nonnormal`), the real Schur form with the GIL released
(:mod:`~lib.linalg.schur`) and cumulative products (:mod:`~lib.linalg.cumulative`).

Nothing here knows a model, a chapter or a page.
"""
