"""``lib.page``: what a page shows. The Altair theme and the book's figures, each chapter's charts, and the
ipywidgets panels of JupyterLab.

The computing modules of ``lib`` import neither Altair nor ipywidgets; everything drawn lives here:

* :mod:`lib.page.plotting`: the renderer for the site and the lab, the book's theme (one colour for
  trained weights and one for random initialization in every chapter) and the figures several chapters share;
* :mod:`lib.page.figures`: numbered, captioned figures that read the same on the site and in JupyterLab;
* :mod:`lib.page.setup`: :func:`~lib.page.setup.book_setup`, the first call of every chapter;
* :mod:`lib.page.tables`, :mod:`lib.page.prose`, :mod:`lib.page.claims`: tables that fit the column, numbers glued
  into prose, and the claims of the Results page;
* :mod:`lib.page.source`: the code of ``lib`` shown on the page; :mod:`lib.page.timing`: the runtimes a page quotes;
* one page module per chapter, named after its slug (``layer_spectra``, ``power_method``, ``real_models``,
  ``jacobian_funnel``, ``steering_lab``, ``two_views``: the chapter's charts, tables and findings), and the
  explorers of chapter 1 (``explorer``).
"""
