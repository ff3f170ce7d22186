"""Who may stop a continuable child: only a live strict ancestor, never the child itself.

One function so ``interrupt_agent``, ``kill`` and the hub's user-side calls refuse with the same texts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.agent import Agent
from ..core.errors import SubagentError
from ..core.runtime import Runtime
from . import texts

if TYPE_CHECKING:
    from .activations import Activation


def authorized_target(runtime: Runtime, activations: "dict[str, Activation]", target_id: str,
                      caller: Agent) -> "Activation | None":
    """The target's live activation if ``caller`` (a live ancestor) may stop it; None: a no-op."""
    if not runtime.is_live(caller):
        raise SubagentError(texts.stale_ancestor(target_id), "UNAUTHORIZED")
    if caller.id == target_id:
        raise SubagentError(texts.self_interrupt(caller.id), "UNAUTHORIZED")
    act = activations.get(target_id)
    if act is None:
        return None
    node = act.child.parent
    while node is not None and node is not caller:
        node = node.parent
    if node is None:
        raise SubagentError(texts.not_descendant(target_id, caller.id), "UNAUTHORIZED")
    return None if act.disposing else act
