"""The course path with the real nbgrader (0.9.6), step by step as ``book/course.md`` tells an instructor.

1. ``python -m tools.course --out COURSE`` (what ``make course`` runs): the course folder, its
   ``nbgrader_config.py`` and the book's kernel spec (installed under a temporary ``JUPYTER_DATA_DIR``).
2. ``nbgrader generate_assignment "*"`` in ``COURSE``, with the book's environment *not* on ``PATH``: every
   chapter's release is the student's notebook (its header, the templates as the student edition has
   them, ``my_spectrum = []`` included) and holds none of the solutions' code or the numbers they quote
   (:mod:`solution_leaks`).
3. ``nbgrader autograde`` of chapters 1 and 2 (the cheapest with templates), four students each: a right
   submission, one with two known wrong answers, an untouched release, and one whose function never
   returns (in chapter 2 behind a bare ``except:``, which once swallowed the checker's time limit). The
   gradebook's scores are checked test cell by test cell: a hang costs only its own point.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from solution_leaks import leaks

from tools.course import CELL_TIMEOUT, KERNEL_NAME, RELEASE_KEY
from tools.student import editions, read_chapter

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted(ROOT.glob("book/[0-9][0-9]_*.md"))
BIN = Path(sys.executable).parent
GRADED = {"ch1": "01_power_method", "ch2": "02_shared_weights"}
#: two plausible mistakes per graded chapter, each one the chapter's text warns about
WRONG = {
    "ex1_1_code": ("def my_power_method(F, x0, steps):\n    x = x0.copy()\n    for _ in range(steps):\n"
                   "        x = F @ x\n    return x / np.linalg.norm(x)  # normalised only at the end"),
    "ex1_3_code": ("def my_rates(eigvals):\n    plain = np.abs(eigvals)\n    shifted = np.abs(1 + eigvals)  # not sorted"
                   " again\n    return plain[1] / plain[0], shifted[1] / shifted[0]\n\n\n"
                   "my_spectrum = [1.0, 0.5, 0.2]"),
    "ex2_1_code": ("import math\n\n\ndef my_steps_needed(ratio, tol):\n"
                   "    return max(0, math.ceil(math.log(tol) / math.log(ratio)))  # no slack"),
    "ex2_3_code": ("def my_residual_radius(eigvals, k):\n    others = np.abs(1 + np.delete(eigvals, k))\n"
                   "    return others.max() / abs(1 + eigvals[k])  # the skip's 1 forgotten"),
}
#: a function that never returns, one per graded chapter; chapter 2's catches everything, the time limit too
HANG = {"ex1_2_code": "def my_head_sum(O, V, n_heads):\n    while True:\n        pass",
        "ex2_2_code": ("def my_causal_bipartite(c, signs):\n    while True:\n        try:\n"
                       "            sum(range(10**6))\n        except:  # noqa: E722\n            pass")}


def _nbgrader(course: SimpleNamespace, *args: str, timeout: float = 1800) -> str:
    run = subprocess.run([str(BIN / "nbgrader"), *args], cwd=course.root, env=course.env, capture_output=True,
                         text=True, timeout=timeout)
    assert run.returncode == 0, f"nbgrader {' '.join(args)}:\n{run.stdout[-4000:]}\n{run.stderr[-6000:]}"
    return run.stdout + run.stderr


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """Steps 1 and 2: the course folder written, every chapter's release generated."""
    base = tmp_path_factory.mktemp("nbgrader")
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != BIN.resolve()]
    env = {**os.environ, "JUPYTER_DATA_DIR": str(base / "jupyter"), "PATH": os.pathsep.join(path)}
    env.pop("PYTHONPATH", None)  # the kernel spec brings the repository; nbgrader needs nothing else
    root = base / "course"
    made = subprocess.run([sys.executable, "-m", "tools.course", "--out", str(root)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stdout + made.stderr
    course = SimpleNamespace(root=root, env=env, jupyter=base / "jupyter")
    _nbgrader(course, "generate_assignment", "*")
    return course


def _cells(path: Path) -> dict[str, nbformat.NotebookNode]:
    nb = nbformat.read(path, as_version=4)
    return {c.metadata.nbgrader.grade_id: c for c in nb.cells if "nbgrader" in c.metadata}


@pytest.mark.slow
def test_make_course_writes_a_folder_nbgrader_runs_in_the_books_environment(course):
    config = (course.root / "nbgrader_config.py").read_text()
    assert f"c.Execute.kernel_name = {KERNEL_NAME!r}" in config and f"c.Execute.timeout = {CELL_TIMEOUT}" in config
    assert f"c.CourseDirectory.root = {str(course.root)!r}" in config
    spec = json.loads((course.jupyter / "kernels" / KERNEL_NAME / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable and spec["env"]["PYTHONPATH"] == str(ROOT)
    assert spec["env"]["HF_HUB_OFFLINE"] == "1"
    # the kernel nbgrader will start imports the book's lib from any folder
    listed = subprocess.run([str(BIN / "jupyter"), "kernelspec", "list", "--json"], env=course.env,
                            capture_output=True, text=True, timeout=120)
    assert KERNEL_NAME in json.loads(listed.stdout)["kernelspecs"]
    assert (course.root / "gradebook.db").is_file()
    sources = sorted(p.relative_to(course.root / "source").as_posix() for p in (course.root / "source").rglob("*.ipynb"))
    assert sources == [f"ch{int(p.name[:2])}/{p.stem}.ipynb" for p in CHAPTERS]


@pytest.mark.slow
@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_release_is_the_students_notebook_without_answers(course, path):
    release = course.root / "release" / f"ch{int(path.name[:2])}" / f"{path.stem}.ipynb"
    nb = nbformat.read(release, as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    assert nb.cells[0].source.startswith("**Student edition**") and "Instructor edition" not in text
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
    assert not any(RELEASE_KEY in c.metadata for c in nb.cells)
    assert leaks(path, nb) == []
    # every answer cell is the template exactly as the student edition shows it, and it runs (no bare raise)
    student, _ = editions(read_chapter(path))
    student_code = "\n\n".join(c.source for c in student.cells if c.cell_type == "code")
    answers = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert answers
    for cell in answers:
        if cell.cell_type == "code":
            assert cell.source in student_code and "raise NotImplementedError()" not in cell.source
            assert not any(line.startswith("raise") for line in cell.source.split("\n")), cell.source
        else:
            assert cell.source == "YOUR ANSWER HERE"
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
             and not c.metadata.nbgrader.get("solution")]
    assert tests and all(c.metadata.nbgrader.locked and c.source.startswith("assert check_") for c in tests)


def _submit(course: SimpleNamespace, student: str, aid: str, replace: dict[str, str]) -> None:
    stem = GRADED[aid]
    nb = nbformat.read(course.root / "release" / aid / f"{stem}.ipynb", as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in replace:
            cell.source = replace[gid]
    out = course.root / "submitted" / student / aid
    out.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out / f"{stem}.ipynb")


@pytest.mark.slow
def test_autograde_scores_every_test_cell_as_it_should(course):
    """Step 3, for chapters 1 and 2: the scores of four students, test cell by test cell."""
    from nbgrader.api import Gradebook

    expected: dict[tuple[str, str], dict[str, float]] = {}
    for aid, stem in GRADED.items():
        source = _cells(course.root / "source" / aid / f"{stem}.ipynb")
        right = {gid: c.source for gid, c in source.items() if c.metadata.nbgrader.solution}
        tests = [gid for gid, c in source.items() if c.metadata.nbgrader.grade and not c.metadata.nbgrader.solution]
        assert len(tests) == 3, tests
        wrong = {gid: code for gid, code in WRONG.items() if gid.startswith(f"ex{aid[2:]}_")}
        hang = {gid: code for gid, code in HANG.items() if gid.startswith(f"ex{aid[2:]}_")}
        assert len(wrong) == 2 and len(hang) == 1
        _submit(course, "right", aid, right)
        _submit(course, "wrong", aid, {**right, **wrong})
        _submit(course, "untouched", aid, {})
        _submit(course, "hang", aid, {**right, **hang})

        def scores(bad: dict[str, str]) -> dict[str, float]:
            return {t: 0.0 if t.replace("_test", "_code") in bad else 1.0 for t in tests}

        expected[aid, "right"] = scores({})
        expected[aid, "wrong"] = scores(wrong)
        expected[aid, "untouched"] = scores(right)
        expected[aid, "hang"] = scores(hang)
        _nbgrader(course, "autograde", aid)

    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        for (aid, student), want in expected.items():
            nb = gb.find_submission_notebook(GRADED[aid], aid, student)
            got = {g.name: g.score for g in nb.grades if g.name in want}
            assert got == want, f"{aid}, {student}: {got} (expected {want})"
    # the hung function was stopped by its checker, with a message, and the cells after it ran
    graded = nbformat.read(course.root / "autograded" / "hang" / "ch1" / "01_power_method.ipynb", as_version=4)
    cell = next(c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "ex1_2_test")
    shown = "".join(o.get("text", "") + "".join(o.get("traceback", [])) for o in cell.outputs)
    assert "✗" in shown and "CellTimeoutError" not in shown
    assert [c for c in graded.cells if c.cell_type == "code"][-1].execution_count, "the last cell did not run"


def test_makefile_course_target():
    import re

    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^course: \$\(STAMP\)\n\t\$\(PY\) -m tools\.course --out _build/course$", make, re.M)
    assert re.search(r"^## make course:", make, re.M) and re.search(r"^\.PHONY:.* course\b", make, re.M)


def test_course_cli_errors_clearly(tmp_path, capsys):
    from tools.course import main

    assert main(["--out", str(tmp_path / "c"), "--no-kernel", str(tmp_path / "09_nope.md")]) == 2
    assert "chapter not found" in capsys.readouterr().err and not (tmp_path / "c").exists()
    assert main(["--out", str(tmp_path / "c"), "--no-kernel", str(tmp_path / "nope.md")]) == 2
    assert "not a chapter file (NN_name.md)" in capsys.readouterr().err and not (tmp_path / "c").exists()
