"""Every ``Example:`` in a docstring of ``lib`` runs and prints what it says (doctest, with ``...`` for
numbers that are not the point). A new user copies these first, so a stale one is a bug."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import lib


def _modules() -> list[str]:
    names = ["lib"]
    for info in pkgutil.walk_packages(lib.__path__, "lib."):
        names.append(info.name)
    return sorted(names)


def _examples() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = []
    for name in _modules():
        if name.startswith("lib.models.decoder.train"):  # a training script: importing it is fine, but nothing to run
            continue
        module = importlib.import_module(name)
        tests += [t for t in finder.find(module, name) if t.examples]
    return tests


EXAMPLES = _examples()


def test_the_main_entry_points_have_an_example():
    have = {t.name for t in EXAMPLES}
    for name in ("lib.models.loading.load_model", "lib.methods.steering.steer", "lib.theory.dynamics.simulate", "lib.linalg.topk_eig.topk_eig"):
        assert name in have, f"{name} has no Example: in its docstring"


@pytest.mark.parametrize("test", EXAMPLES, ids=lambda t: t.name)
def test_example_runs(test):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    result = runner.run(test)
    assert result.failed == 0, f"{test.name}: {result.failed} of {result.attempted} example lines failed (see above)"
