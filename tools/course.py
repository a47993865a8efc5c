"""``make course``: an nbgrader course folder for the book's chapters, graded in the book's environment.

::

    python -m tools.course --out DIR [--no-kernel] [book/01_power_method.md ...]

writes

- ``DIR/source/chN/NN_name.ipynb``: each chapter's instructor edition (:mod:`tools.student`) as the
  assignment ``chN`` (``ch0`` … ``ch7``);
- ``DIR/gradebook.db``: nbgrader's (empty) gradebook (:func:`create_gradebook`);
- ``DIR/nbgrader_config.py``: ``CourseDirectory.root`` is ``DIR``; ``Execute.kernel_name`` is
  :data:`KERNEL_NAME`, so ``nbgrader autograde`` runs the submissions in the book's environment (not the
  Python that runs nbgrader, which may have no ``lib``); ``Execute.timeout`` is :data:`CELL_TIMEOUT`
  seconds per cell (nbgrader's 30 s is less than some chapter cells take); and ``generate_assignment``
  runs nbgrader's own preprocessors with :class:`ReleaseText` after ``ClearSolutions``, so the release is
  the student's notebook (its header, and every template exactly as the student edition has it);

and installs the kernel spec :data:`KERNEL_NAME` in the user's Jupyter data folder (``JUPYTER_DATA_DIR``
if set): this Python, with the repository on ``PYTHONPATH`` (``import lib`` works from any folder) and
the model hub off. The instructor then works in ``DIR`` with nbgrader's own commands (``book/course.md``).

This module imports only nbconvert at the top, so ``nbgrader_config.py`` can import it in whatever
environment runs nbgrader.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

__all__ = ["CELL_TIMEOUT", "KERNEL_NAME", "RELEASE_KEY", "ReleaseText", "assignment_id", "create_gradebook", "install_kernel",
           "release_preprocessors", "write_course"]

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = "book/[0-9][0-9]_*.md"
KERNEL_NAME = "spectral-book"
CELL_TIMEOUT = 600
#: Cell metadata written by :mod:`tools.student`: ``{"release": source}``, the cell's source in the release
RELEASE_KEY = "spectral_book"
#: The kernel's environment besides ``PYTHONPATH``: offline, as ``make book`` runs the chapters
KERNEL_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
              "TOKENIZERS_PARALLELISM": "false", "PYTHONHASHSEED": "0"}


class ReleaseText(Preprocessor):
    """Give every cell that carries a release text (metadata :data:`RELEASE_KEY`) that text as its source,
    and drop the key. Runs in ``nbgrader generate_assignment`` after ``ClearSolutions``: nbgrader's stubs
    are replaced by the template as the student edition shows it (a top-level ``my_spectrum = []`` stays a
    list instead of becoming a bare ``raise NotImplementedError()``), and the instructor's header by the
    student's."""

    enabled = Bool(True)  # nbgrader registers its preprocessors without enabling them

    def preprocess_cell(self, cell, resources, index):  # noqa: D102 - nbconvert's signature
        meta = cell.metadata.pop(RELEASE_KEY, None)
        if meta is not None:
            cell.source = meta["release"]
        return cell, resources


def release_preprocessors() -> list:
    """nbgrader's ``GenerateAssignment.preprocessors`` with :class:`ReleaseText` right after
    ``ClearSolutions`` (before the checksums and the saved cells, so autograde sees the release as sent)."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import ClearSolutions

    default = GenerateAssignment.class_traits()["preprocessors"].default()
    return [p for pp in default for p in ((pp, ReleaseText) if pp is ClearSolutions else (pp,))]


def assignment_id(chapter: str | Path) -> str:
    """The assignment of a chapter file: ``book/03_real_models.md`` is ``ch3``."""
    m = re.match(r"(\d+)_", Path(chapter).name)
    if m is None:
        raise ValueError(f"not a chapter file (NN_name.md): {chapter}")
    return f"ch{int(m[1])}"


def install_kernel(name: str = KERNEL_NAME, python: str = sys.executable) -> Path:
    """Install (or replace) the user kernel spec ``name``: ``python`` with the repository on ``PYTHONPATH``
    and :data:`KERNEL_ENV`. Returns the folder it went to (under ``JUPYTER_DATA_DIR``/kernels if set)."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = {"argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": f"Python 3 ({name}, course)", "language": "python",
            "env": {"PYTHONPATH": str(ROOT), **KERNEL_ENV}}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
        return Path(KernelSpecManager().install_kernel_spec(tmp, kernel_name=name, user=True))


GRADEBOOK = "gradebook.db"


def create_gradebook(path: Path) -> None:
    """Create nbgrader's gradebook database at ``path`` if it is missing. nbgrader stamps a new database by
    running the ``alembic`` command, which is found only when this environment's ``bin`` is on ``PATH``
    (not so for ``.venv/bin/nbgrader`` run without activating the environment): creating it here, with
    that folder on ``PATH``, spares the instructor the ``FileNotFoundError: 'alembic'``."""
    if path.exists():
        return
    from nbgrader.api import Gradebook

    old = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), old])
    try:
        Gradebook(f"sqlite:///{path}").close()
    finally:
        os.environ["PATH"] = old


CONFIG = '''"""nbgrader configuration of the book's course folder, written by `make course` (tools/course.py)."""
import sys

sys.path.insert(0, {root!r})  # the book's repository, for tools.course
from tools.course import release_preprocessors  # noqa: E402

c = get_config()  # noqa: F821
c.CourseDirectory.root = {course!r}
# the book's environment (the kernel spec `make course` installed), not the Python that runs nbgrader
c.Execute.kernel_name = {kernel!r}
c.Execute.timeout = {timeout}  # seconds per cell; nbgrader's 30 s is less than some chapter cells take
# the release is the student's notebook: its header, and the templates as the student edition has them
c.GenerateAssignment.preprocessors = release_preprocessors()
'''


def write_course(out: str | Path, chapters: Iterable[str | Path], *, kernel: bool = True) -> list[Path]:
    """Write the course folder ``out`` (see the module docstring) and, if ``kernel``, install the kernel spec.

    Every chapter is converted before anything is written, so a bad chapter writes nothing.

    Returns:
        The files written: ``nbgrader_config.py``, then one instructor notebook per chapter.

    Raises:
        tools.student.EditionError: a chapter that cannot be turned into editions.
    """
    from tools.student import editions, read_chapter, write_notebook

    out = Path(out).resolve()
    done = [(assignment_id(c), Path(c).stem, editions(read_chapter(c))[1]) for c in chapters]
    out.mkdir(parents=True, exist_ok=True)
    config = out / "nbgrader_config.py"
    config.write_text(CONFIG.format(root=str(ROOT), course=str(out), kernel=KERNEL_NAME, timeout=CELL_TIMEOUT),
                      encoding="utf-8")
    written = [config] + [write_notebook(nb, out / "source" / aid / f"{stem}.ipynb") for aid, stem, nb in done]
    create_gradebook(out / GRADEBOOK)
    if kernel:
        install_kernel()
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.course", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="the course folder")
    parser.add_argument("--no-kernel", action="store_true", help="do not install the kernel spec")
    parser.add_argument("chapters", nargs="*", type=Path, help=f"MyST chapters (default: {CHAPTERS})")
    args = parser.parse_args(argv)
    chapters = args.chapters or sorted(ROOT.glob(CHAPTERS))
    try:
        written = write_course(args.out, chapters, kernel=not args.no_kernel)
    except ValueError as exc:  # tools.student.EditionError included
        print(f"tools.course: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(written) - 1} assignments to {args.out}/source and {written[0]}"
          + ("" if args.no_kernel else f"; kernel spec {KERNEL_NAME!r} installed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
