"""``hub.graph()``: a Mermaid picture of the agent tree (like LangGraph's ``draw_mermaid``).

The result's ``str()`` is the Mermaid source (paste it into docs, a Markdown file or mermaid.live). In
JupyterLab (4.1 and later) it renders inline as a diagram: the display offers ``text/vnd.mermaid`` and a
Markdown ``mermaid`` fence; ``text/plain`` is the source too, so stored notebooks compare stably.

Shapes: agents are boxes, background jobs are subroutine boxes (``[[…]]``) with the job's child agent
under them; an edge ``-.->`` marks a job started by its owner. Each node is coloured by its status in
the one vocabulary of :func:`toh_nb.notebook.treeview.display_status`.
"""

from __future__ import annotations

from typing import Any

from ..results import STATUS_COLOURS
from .display import short_id
from .treeview import display_status, name_of


def _text(value: str) -> str:
    """Mermaid label text: quotes and angle brackets as entities, so any label is safe."""
    return (value.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
            .replace("\n", " "))


class MermaidGraph:
    """A Mermaid flowchart of the tree: ``str()``/``.source`` is the text; ``.rows`` the tree rows."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows
        self.source = mermaid_source(rows)

    def __str__(self) -> str:
        return self.source

    def __repr__(self) -> str:
        return self.source

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        return {"text/plain": self.source, "text/vnd.mermaid": self.source,
                "text/markdown": f"```mermaid\n{self.source}\n```"}


def mermaid_source(rows: list[dict]) -> str:
    """The Mermaid ``flowchart TD`` text of tree rows (:func:`toh_nb.notebook.treeview.tree_rows`)."""
    names = {row["id"]: f"n{index}" for index, row in enumerate(rows)}
    lines = ["flowchart TD"]
    used: dict[str, list[str]] = {}
    for row in rows:
        node = names[row["id"]]
        status = display_status(row)
        title = name_of(row)
        ident = short_id(row["id"])
        if row["kind"] == "job":
            lines.append(f'    {node}[["{_text(f"{title} · {ident}")}<br/>{_text(status)}"]]')
        else:
            head = title if row.get("mode") == "root" and row["id"] == "root" else f"{title} · {ident}".lstrip(" ·")
            mode = row.get("mode") or "agent"
            detail = status if mode == "root" else f"{mode} · {status}"
            lines.append(f'    {node}["{_text(head)}<br/>{_text(detail)}"]')
        used.setdefault(status, []).append(node)
    for row in rows:
        parent = row.get("tree_parent")
        if parent in names:
            arrow = "-.->" if row["kind"] == "job" else "-->"
            lines.append(f"    {names[parent]} {arrow} {names[row['id']]}")
    for status in sorted(used):
        colour = STATUS_COLOURS.get(status, "#455a64")
        lines.append(f"    classDef {status.replace('-', '_')} stroke:{colour},stroke-width:2px")
        lines.append(f"    class {','.join(used[status])} {status.replace('-', '_')}")
    return "\n".join(lines)
