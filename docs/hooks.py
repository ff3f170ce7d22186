"""mkdocs hooks for the toh_nb site (named in mkdocs.yml's ``hooks:``).

The API reference page (``docs/reference/api.md``) holds one marker, ``<!-- toh_nb.__all__ -->``, which
:func:`on_page_markdown` replaces at build time by a mkdocstrings block for every name of
``toh_nb.__all__``, found where it is defined now (``obj.__module__``). So a name added to the package
appears in the reference without anyone editing the page, and a class that moves to another module
is documented from its new home: the reference follows the code.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

MARKER = "<!-- toh_nb.__all__ -->"
ROOT = Path(__file__).resolve().parents[1]

#: sections of the reference, in order: a title and the test that places a public object in it
SECTIONS = (
    ("Hubs and handles", lambda obj, where: where.startswith(("toh_nb.hub", "toh_nb.notebook"))),
    ("Errors", lambda obj, where: isinstance(obj, type) and issubclass(obj, BaseException)),
    ("Models", lambda obj, where: where.startswith(("toh_nb.models", "toh_nb.core.model"))),
    ("Providers and delegation tools",
     lambda obj, where: where.startswith(("toh_nb.subagents", "toh_nb.acp", "toh_nb.ray", "toh_nb.providers"))),
    ("Messages, tools and results", lambda obj, where: True),
)


def public_api() -> list[tuple[str, str, str]]:
    """``(section, public name, dotted path of its definition)`` for every name of ``toh_nb.__all__``."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    package = importlib.import_module("toh_nb")
    entries = []
    for name in package.__all__:
        obj = getattr(package, name)
        where = f"{obj.__module__}.{obj.__qualname__}"
        section = next(title for title, belongs in SECTIONS if belongs(obj, where))
        entries.append((section, name, where))
    return entries


def api_markdown() -> str:
    """The reference's body: a heading per section, then each name's mkdocstrings block."""
    entries = public_api()
    lines = []
    for title, _ in SECTIONS:
        names = [(name, where) for section, name, where in entries if section == title]
        if not names:
            continue
        lines += [f"## {title}", ""]
        for name, where in names:
            if where.rsplit(".", 1)[-1] != name:
                lines += [f"`tn.{name}` is the name under which `toh_nb` exports `{where}`:", ""]
            lines += [f"::: {where}", "    options:", "      heading_level: 3", ""]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, api_markdown())
    return markdown
