"""``lib.jacobians``: block Jacobians of the residual stream.

* :mod:`~lib.jacobians.single_token`: the closed form for a token alone (chapter 4);
* :mod:`~lib.jacobians.in_context`: the closed-form in-context diagonal block (chapter 6);
* :mod:`~lib.jacobians.sweep`: every layer over many prompts, batched with ``torch.func``, and the
  autodiff references the closed forms are tested against.
"""
