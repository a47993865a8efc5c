"""Launch buttons from one setting: the book's configuration with the repository's public URL filled in.

``make book`` runs this when ``SPECTRAL_BOOK_REPO_URL`` is set (e.g. ``https://github.com/owner/repo``)
and builds with the file it writes (``jupyter-book build --config``). The executed pages then get
Binder and Colab launch buttons, and a JupyterHub button when ``SPECTRAL_BOOK_JUPYTERHUB_URL`` names a
hub. Unset, ``_config.yml`` is used as it is and the pages have no launch button at all. Colab opens a
chapter's notebook on the ``colab`` branch (:mod:`tools.colab`, pushed there by the publishing workflow;
``book/_ext/colab_links.py`` points the buttons at it), since it cannot open the MyST sources.

    python -m tools.book_config --repo-url https://github.com/owner/repo --out _build/launch/_config.yml
"""

from __future__ import annotations

import argparse
import copy
import os
import re
from pathlib import Path
from typing import Any

import yaml

__all__ = ["BINDERHUB_URL", "COLAB_BRANCH", "COLAB_URL", "JUPYTERHUB_ENV", "REPO_URL_ENV", "with_launch_buttons", "write_config"]

REPO_URL_ENV = "SPECTRAL_BOOK_REPO_URL"
JUPYTERHUB_ENV = "SPECTRAL_BOOK_JUPYTERHUB_URL"
BINDERHUB_URL = "https://mybinder.org"
COLAB_URL = "https://colab.research.google.com"
COLAB_BRANCH = "colab"
"""The branch with the chapters' Colab notebooks (``tools.colab.COLAB_BRANCH``; kept equal by a test)."""

_EXTENSIONS = Path(__file__).resolve().parents[1] / "book" / "_ext"
_GITHUB = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+")


def with_launch_buttons(config: dict[str, Any], repo_url: str, *, branch: str = "main",
                        jupyterhub_url: str = "") -> dict[str, Any]:
    """A copy of the Jupyter Book ``config`` whose pages launch on Binder and Colab from ``repo_url``.

    Args:
        config: the parsed ``_config.yml`` (not modified).
        repo_url: the repository's public GitHub URL, ``https://github.com/<owner>/<repo>``; the theme
            builds launch links for GitHub only, so anything else is refused here rather than by a
            warning in the middle of the build.
        branch: the branch the launch links open.
        jupyterhub_url: a JupyterHub to offer too (``""``: no JupyterHub button).
    """
    repo_url = repo_url.strip().rstrip("/").removesuffix(".git")
    if not _GITHUB.fullmatch(repo_url):
        raise ValueError(f"{REPO_URL_ENV} must be a GitHub repository URL, https://github.com/<owner>/<repo>; "
                         f"got {repo_url!r}")
    out = copy.deepcopy(config)
    out["repository"] = {"url": repo_url, "branch": branch, "path_to_book": ""}
    theme = out.setdefault("sphinx", {}).setdefault("config", {}).setdefault("html_theme_options", {})
    theme.update(repository_url=repo_url, repository_branch=branch, path_to_docs="")
    theme["launch_buttons"] = {**theme.get("launch_buttons", {}), "binderhub_url": BINDERHUB_URL,
                               "colab_url": COLAB_URL, "jupyterhub_url": jupyterhub_url.rstrip("/")}
    out["sphinx"].setdefault("local_extensions", {})["colab_links"] = str(_EXTENSIONS)
    out["sphinx"]["config"]["colab_notebooks_branch"] = COLAB_BRANCH
    return out


def write_config(source: Path, out: Path, repo_url: str, *, jupyterhub_url: str = "") -> Path:
    """Write :func:`with_launch_buttons` of the config file ``source`` to ``out``.

    Paths that Jupyter Book resolves against the config file's folder (the local Sphinx extensions)
    are made absolute, so ``out`` may live anywhere (``_build/``); the rest resolve against the book.
    """
    config = with_launch_buttons(yaml.safe_load(source.read_text(encoding="utf-8")), repo_url,
                                 jupyterhub_url=jupyterhub_url)
    local = config.get("sphinx", {}).get("local_extensions") or {}
    for name, folder in local.items():
        local[name] = str((source.parent / folder).resolve())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("_config.yml"), help="the book's configuration")
    parser.add_argument("--out", type=Path, required=True, help="where to write the configuration with buttons")
    parser.add_argument("--repo-url", default=os.environ.get(REPO_URL_ENV, ""),
                        help=f"the repository's public URL (default: ${REPO_URL_ENV})")
    parser.add_argument("--jupyterhub-url", default=os.environ.get(JUPYTERHUB_ENV, ""),
                        help=f"a JupyterHub to launch on (default: ${JUPYTERHUB_ENV}, none if unset)")
    args = parser.parse_args(argv)
    try:
        write_config(args.config, args.out, args.repo_url, jupyterhub_url=args.jupyterhub_url)
    except ValueError as exc:
        parser.error(str(exc))


if __name__ == "__main__":
    main()
