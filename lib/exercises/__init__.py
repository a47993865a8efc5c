"""The book's exercise checkers, one module per chapter, all following one convention (:mod:`.runner`).

Call a checker with your own function, e.g. ``check_power_method(my_power_method)``. It runs a few
cases whose answers are computed here *independently* (the simulator, LAPACK, SciPy or autograd, not
the formula you are asked to write, wherever possible), each under a time limit (``time_limit=`` seconds
per case, 10 by default) in a child process that is killed when the time is up, whatever your code
catches (:mod:`.runner`), prints ✓ or ✗ for each case as it finishes, with feedback that names the
mistake, and returns ``True`` only if every case passed. A case that does not return costs only its own
exercise: the checker says "did not return within 10 s" with the line your code was at, and returns
``False``. Your function's own errors never escape: they are shown under the case with the lines of your
code, apart from the checker's words; a ``None`` result and a wrong shape or type are named. While your
function runs, the library's own version of what the exercise asks you to write is off (e.g.
``lib.linalg.power.power_method`` in exercise 1.1): calling it raises :class:`~.runner.LibraryOff`.

* chapter 0 (:mod:`.layer_spectra`): :func:`check_spectral_summary`, :func:`check_rank_bound`, :func:`check_energy_ratio`
* chapter 1 (:mod:`.power_method`): :func:`check_power_method`, :func:`check_head_sum`, :func:`check_residual_rates`
* chapter 2 (:mod:`.shared_weights`): :func:`check_steps_needed`, :func:`check_causal_bipartite`,
  :func:`check_residual_radius` (the chapter's exercises); :func:`check_bipartite_condition` and
  :func:`check_linearization_radius` check its propositions' own statements
* chapter 3 (:mod:`.real_models`): :func:`check_gamma_rho`, :func:`check_token_shift`, :func:`check_span_ratio`,
  :func:`check_null_layers`
* chapter 4 (:mod:`.jacobian_funnel`): :func:`check_effective_rank`, :func:`check_schur_normal`,
  :func:`check_complex_fractions`, :func:`check_truncated_funnel`
* chapter 5 (:mod:`.steering_lab`): :func:`check_steering_w`, :func:`check_sign_variant`
* chapter 6 (:mod:`.two_views`): :func:`check_attention_path`, :func:`check_principal_angles`,
  :func:`check_relative_update`
* chapter 7 (:mod:`.jacobian_funnel_training`): :func:`check_emergence_step`
"""

from __future__ import annotations

from lib.exercises.jacobian_funnel import (
                               check_complex_fractions,
                               check_effective_rank,
                               check_schur_normal,
                               check_truncated_funnel,
)
from lib.exercises.jacobian_funnel_training import check_emergence_step
from lib.exercises.layer_spectra import check_energy_ratio, check_rank_bound, check_spectral_summary
from lib.exercises.power_method import check_head_sum, check_power_method, check_residual_rates
from lib.exercises.real_models import check_gamma_rho, check_null_layers, check_span_ratio, check_token_shift
from lib.exercises.shared_weights import (
                               check_bipartite_condition,
                               check_causal_bipartite,
                               check_linearization_radius,
                               check_residual_radius,
                               check_steps_needed,
)
from lib.exercises.steering_lab import check_sign_variant, check_steering_w
from lib.exercises.two_views import check_attention_path, check_principal_angles, check_relative_update

__all__ = [
    "check_attention_path",
    "check_bipartite_condition",
    "check_causal_bipartite",
    "check_complex_fractions",
    "check_effective_rank",
    "check_emergence_step",
    "check_energy_ratio",
    "check_gamma_rho",
    "check_head_sum",
    "check_linearization_radius",
    "check_null_layers",
    "check_power_method",
    "check_principal_angles",
    "check_rank_bound",
    "check_relative_update",
    "check_residual_radius",
    "check_residual_rates",
    "check_schur_normal",
    "check_sign_variant",
    "check_span_ratio",
    "check_spectral_summary",
    "check_steering_w",
    "check_steps_needed",
    "check_token_shift",
    "check_truncated_funnel",
]
