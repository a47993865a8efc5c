"""``lib.methods``: the measurements more than one chapter makes, each on any :class:`lib.models.SpectralModel`.

* :mod:`~lib.methods.layer_spectra`: the per-layer spectra of ``F_t = O_t V_t`` (chapters 0 and 3);
* :mod:`~lib.methods.alignment`: γ_t, ρ_t, their chance levels and nulls (chapters 1, 3 and 6);
* :mod:`~lib.methods.funnel`: the funnel's statistics with their prompt-bootstrap replicates and its
  non-normality controls (chapter 4; any stack of per-prompt block Jacobians);
* :mod:`~lib.methods.topology`: communities of residual coordinates and their coupling to gain, and the power
  that qualifies a null verdict (chapters 4 and 6);
* :mod:`~lib.methods.steering`: the rank-1 edit of an output matrix (chapters 5 and 6);
* :mod:`~lib.methods.bridge`: the power-method matrix inside the block Jacobian (chapter 6);
* :mod:`~lib.methods.exactness`: the book's formulas against a model's real modules (``make report``).
"""
