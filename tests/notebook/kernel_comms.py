"""What ipykernel (>= 7.4) asks a comm before it hands the comm an incoming message: the subshell that
handles it. ipykernel has no public face for the question, so the one reach into it is here."""

from __future__ import annotations

from typing import Any


def subshell_for(comm: Any, method: str, subshell: "str | None") -> "str | None":
    """The subshell ipykernel hands ``comm``'s incoming ``method`` message (sent by the front-end on
    ``subshell``; None: the main shell) to, after the comm's last outgoing message was published from a
    cell's context (which records no subshell)."""
    comm._reply_subshell_id = None  # noqa: SLF001 - ipykernel's record of its last reply's subshell: no public setter
    return comm._reply_subshell_for({"method": method}, subshell)  # noqa: SLF001 - ipykernel's routing question (>= 7.4): no public face
