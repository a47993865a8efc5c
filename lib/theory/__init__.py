"""``lib.theory``: the theory of chapters 1 and 2. Toy layer matrices with a prescribed spectrum
(:mod:`~lib.theory.toys`) and the simplified layer as a dynamical system (:mod:`~lib.theory.dynamics`)."""
