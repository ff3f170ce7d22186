"""Notebook displays: deterministic ``text/plain`` reprs and small ``_repr_html_`` renderings.

Every object a cell returns shows a useful HTML view and a plain repr with no timestamps and no memory
addresses, so stored notebook outputs compare stably (with ``ids="sequential"`` they are identical run
after run). The renderings themselves live in ``toh_nb.results`` (shared with the async face, which
needs no Jupyter); this module adds what only live displays need.
"""

from __future__ import annotations

from ..results import AgentListing  # noqa: F401  (re-exported: the facade and its tests name it here)
from ..results import id_html, short_id  # noqa: F401  (re-exported: the notebook modules use them from here)


def format_elapsed(seconds: float | None) -> str:
    """``12.3 s`` or ``4 min 05 s`` (``""`` for no value): elapsed times in widgets and progress lines."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s"


class SendReceipt(str):
    """What ``kid.send(...)`` / ``hub.send(...)`` return: the message id (a ``str``, as SPEC §3 says)
    that also displays what happened, instead of a bare id in the cell's output."""

    agent_id: str

    def __new__(cls, message_id: str, agent_id: str) -> "SendReceipt":
        receipt = super().__new__(cls, message_id)
        receipt.agent_id = agent_id
        return receipt

    @property
    def message_id(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"sent message {self.message_id} to {self.agent_id}"

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(repr(self))

    def _repr_html_(self) -> str:
        return f"<div class='toh-sent'>sent message {id_html(self.message_id)} to {id_html(self.agent_id)}</div>"
