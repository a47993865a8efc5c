"""``lib.page``: what a page shows. The Altair theme and the book's figures, each chapter's charts, and the
ipywidgets panels of JupyterLab.

The computing modules of ``lib`` import neither Altair nor ipywidgets; everything drawn lives here:

* :mod:`lib.page.plotting`: the renderer for the site and the lab, the book's theme (one colour for
  trained weights and one for random initialization in every chapter) and the figures several chapters share;
* :mod:`lib.page.figures`: numbered, captioned figures that read the same on the site and in JupyterLab;
* one module of charts per chapter (``theory_plots``, ``spectra_plots``, ``realmodel_plots``,
  ``funnel_plots``, ``steering_plots``, ``bridge_plots``) and the explorers of chapter 1 (``explorer``).
"""
