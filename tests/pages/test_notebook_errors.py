"""A reader's mistake in a notebook cell gives one clear message, and the cell still fails."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def _run(cells: list[str], allow_errors: bool = True):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=allow_errors).execute()
    return nb


def _error_output(cell):
    errs = [o for o in cell.outputs if o.output_type == "error"]
    assert len(errs) == 1, cell.outputs
    return errs[0]


def test_reader_error_is_one_clear_message():
    nb = _run(["import lib; from lib.page.setup import book_setup; book_setup()", "lib.load_model('no-such-org/no-such-model')", "import numpy as np; from lib.linalg import spectra; spectra.eigvals(np.ones((2, 3)))"])
    for cell, name, words in [(nb.cells[1], "ModelNotAvailableError", "minilm"), (nb.cells[2], "InputError", "square")]:
        err = _error_output(cell)
        assert err.ename == name
        assert len(err.traceback) <= 2, err.traceback
        assert words in "\n".join(err.traceback)


def test_argument_checks_inside_lib_are_short_but_user_bugs_are_not():
    nb = _run([
        "import lib; from lib.page.setup import book_setup; book_setup()",
        "from lib.linalg.power import steps_needed\nsteps_needed(1.5)",
        "def mine(x):\n    raise ValueError('my own bug')\nmine(1)",
    ])
    short = _error_output(nb.cells[1])
    assert short.ename == "ValueError"
    assert len(short.traceback) <= 2 and "ratio" in "\n".join(short.traceback)
    assert len(_error_output(nb.cells[2]).traceback) > 2


def test_other_errors_keep_the_full_traceback():
    nb = _run(["import lib; from lib.page.setup import book_setup; book_setup()", "def f():\n    return 1 / 0\nf()"])
    err = _error_output(nb.cells[1])
    assert err.ename == "ZeroDivisionError" and len(err.traceback) > 2


def test_the_cell_still_fails_the_run():
    with pytest.raises(CellExecutionError):
        _run(["import lib; from lib.page.setup import book_setup; book_setup()", "lib.load_model('')"], allow_errors=False)
