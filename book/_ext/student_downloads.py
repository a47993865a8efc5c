"""Sphinx extension: the course editions of every chapter, offered for download by the html site.

When the html builder finishes, it writes ``<outdir>/_downloads/course/student/<chapter>.ipynb`` and
``<outdir>/_downloads/course/instructor/<chapter>.ipynb`` with :func:`tools.student.write_editions`,
for every chapter of the table of contents (documents named ``NN_*``). The *Course materials* page
(``book/course.md``) links them. A chapter that cannot be split into editions (say, a solution block
that is never closed) fails the build with the chapter's name and line.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

ROOT = Path(__file__).resolve().parents[2]  # the repository: tools/ is not an installed package
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.student import EditionError, write_editions  # noqa: E402

COURSE_DIR = Path("_downloads", "course")
_CHAPTER = re.compile(r"\d\d_")


def chapter_sources(app: Sphinx) -> list[Path]:
    """Source files of the built documents whose name starts with two digits and ``_``, sorted."""
    return sorted(Path(app.env.doc2path(doc)) for doc in app.env.found_docs
                  if _CHAPTER.match(doc.rsplit("/", 1)[-1]))


def _write_editions(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.name != "html":
        return
    try:
        write_editions(chapter_sources(app), Path(app.outdir) / COURSE_DIR)
    except EditionError as exc:
        raise ExtensionError(f"course editions: {exc}") from exc


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("build-finished", _write_editions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
