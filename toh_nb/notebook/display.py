"""Notebook displays: deterministic ``text/plain`` reprs and small ``_repr_html_`` renderings.

Every object a cell returns shows a useful HTML view and a plain repr with no timestamps and no memory
addresses, so stored notebook outputs compare stably (with ``ids="sequential"`` they are identical run
after run).
"""

from __future__ import annotations

import html
from typing import Any

from ..results import item_html, status_badge  # noqa: F401  (re-exported for the facade)
from ..subagents.service import AgentList

def format_elapsed(seconds: float | None) -> str:
    """``12.3 s`` or ``4 min 05 s`` (``""`` for no value): elapsed times in widgets and progress lines."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s"


class AgentListing(AgentList):
    """``hub.list_agents()``: the engine's entries; ``str()`` and ``repr()`` are exactly the
    ``list_agents`` tool text, and the notebook shows an HTML table."""

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        if not self:
            return "<div class='toh-agents'><i>(no subagents)</i></div>"
        rows = []
        for entry in self:
            if entry.kind == "diagnostic":
                status = f"<i>diagnostic: {html.escape(entry.reason or '')}</i>"
            else:
                status = status_badge(entry.status)
            parent = html.escape(entry.parent or "") if entry.descendants_form else ""
            depth = "" if entry.depth is None or not entry.descendants_form else str(entry.depth)
            indent = "&nbsp;&nbsp;" * max(0, (entry.depth or 1) - 1) if entry.descendants_form else ""
            rows.append(f"<tr><td style='text-align:left'>{indent}<code>{html.escape(entry.id)}</code></td>"
                        f"<td>{status}</td><td style='text-align:left'>{html.escape(entry.label or '')}</td>"
                        f"<td>{parent}</td><td>{depth}</td></tr>")
        return ("<table class='toh-agents'><thead><tr><th>id</th><th>status</th><th>label</th><th>parent</th>"
                f"<th>depth</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")
