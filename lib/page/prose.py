"""Numbers in prose that read the same on the site and in JupyterLab.

A chapter writes a computed number into its prose as ``{eval}`name```. Two surfaces resolve that role:

* the site (Jupyter Book, myst-nb): the local extension ``book/_ext/eval_glue.py`` reads ``name`` from
  the values the same document glued with myst-nb's glue, exactly as ``{glue:text}`name``` would;
* JupyterLab with jupyterlab-myst: the markdown cell asks the running kernel for the expression ``name``
  (a ``user_expressions`` request) and shows its plain-text value.

:func:`glue` serves both: it glues the value with :func:`myst_nb.glue` (so the site, and the Results page,
which pastes glued values across documents, keep working) and publishes it under the same name in the
IPython user namespace, where the lab finds it. A glue must never change what a chapter's own code sees,
so publishing refuses a name that already holds a different object, and after every cell a check refuses
a published name that the chapter rebound since (the lab would show the new value in the prose).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["NAME_PATTERN", "GlueNameError", "glue", "glued", "check_published"]

#: The names ``{eval}`...``` accepts: myst-nb's ``nb_eval_name_regex`` default, without its ``$``.
NAME_PATTERN = re.compile(r"[a-zA-Z][a-zA-Z0-9_]*")

# name -> the object glue() last published under it, per kernel process
_published: dict[str, Any] = {}
_hooked_shells: set[int] = set()


class GlueNameError(ValueError):
    """A glue name that is not an identifier, or that would clobber (or was clobbered by) chapter code."""


def _shell() -> Any | None:
    """The running IPython shell, or ``None`` outside IPython (plain Python, tests)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency of myst-nb
        return None
    return get_ipython()


def publish(name: str, value: Any, namespace: dict[str, Any]) -> None:
    """Bind ``namespace[name] = value`` unless that would replace a chapter's own object.

    Args:
        name: an identifier matching :data:`NAME_PATTERN`.
        value: the glued object.
        namespace: the user namespace (``get_ipython().user_ns`` in a kernel).

    Raises:
        GlueNameError: ``name`` is not an identifier, or ``namespace`` holds under it an object that
            is neither ``value`` nor the object an earlier glue published there (re-running a glue cell
            in the lab is allowed; gluing over a chapter variable is not).
    """
    if not NAME_PATTERN.fullmatch(name):
        raise GlueNameError(f"glue name {name!r} is not an identifier matching {NAME_PATTERN.pattern}")
    if name in namespace:
        current = namespace[name]
        ours = name in _published and current is _published[name]
        if current is not value and not ours:
            raise GlueNameError(
                f"glue({name!r}, ...) would replace the variable {name!r} the chapter already defines "
                f"(a {type(current).__name__}); choose another glue name"
            )
    namespace[name] = value
    _published[name] = value


def check_published(namespace: dict[str, Any]) -> None:
    """Raise if a name :func:`glue` published was rebound or deleted since.

    Args:
        namespace: the user namespace the names were published into.

    Raises:
        GlueNameError: naming every published name that no longer holds its glued object.
    """
    moved = sorted(k for k, v in _published.items() if k not in namespace or namespace[k] is not v)
    if moved:
        raise GlueNameError(
            f"glued name(s) {', '.join(moved)} were rebound after glue(): the prose's {{eval}} would show "
            "the new value; rename the chapter variable or the glue"
        )


def glue(name: str, value: Any, display: bool = False) -> None:
    """Glue ``value`` for the site and publish it for JupyterLab (see the module docstring).

    Args:
        name: the glue key and the kernel name the prose's ``{eval}`name``` reads.
        value: any object; the prose shows its plain-text representation (quotes of a string dropped).
        display: show the value as this cell's output too (myst-nb's ``display``).

    Raises:
        GlueNameError: as :func:`publish`, and inside a kernel when a name glued earlier was rebound.
    """
    from myst_nb import glue as nb_glue

    shell = _shell()
    if shell is not None:
        check_published(shell.user_ns)
        publish(name, value, shell.user_ns)
        if id(shell) not in _hooked_shells:
            shell.events.register("post_run_cell", lambda _result: check_published(shell.user_ns))
            _hooked_shells.add(id(shell))
    elif not NAME_PATTERN.fullmatch(name):
        raise GlueNameError(f"glue name {name!r} is not an identifier matching {NAME_PATTERN.pattern}")
    nb_glue(name, value, display=display)


def glued(*names: str) -> list[Any]:
    """The values :func:`glue` last published under ``names`` in this process, in the order given.

    A page's small table of the numbers its prose quotes (``pd.DataFrame`` of ``glued(...)``) then shows
    exactly the glued text, never a second formatting of the same number.

    Raises:
        KeyError: naming every name that was never glued.
    """
    missing = [n for n in names if n not in _published]
    if missing:
        raise KeyError(f"never glued: {', '.join(missing)}")
    return [_published[n] for n in names]
