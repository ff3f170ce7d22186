"""Notebook displays: deterministic ``text/plain`` reprs and small ``_repr_html_`` renderings.

Every object a cell returns shows a useful HTML view and a plain repr with no timestamps and no memory
addresses, so stored notebook outputs compare stably (with ``ids="sequential"`` they are identical run
after run). The renderings themselves live in ``toh_nb.results`` (shared with the async face, which
needs no Jupyter); this module adds what only live displays need.
"""

from __future__ import annotations

from ..results import AgentListing  # noqa: F401  (re-exported: the facade and its tests name it here)


def format_elapsed(seconds: float | None) -> str:
    """``12.3 s`` or ``4 min 05 s`` (``""`` for no value): elapsed times in widgets and progress lines."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s"
