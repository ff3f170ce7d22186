"""What a delegation asks for (:class:`StartRequest`) and the checks its arguments pass.

Kept apart from the service because the hub, the notebook facade and the ``subagent`` tool validate the
same arguments (a depth cap, a tool filter) before any child exists; one module means one message each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from ..core.agent import Agent
from ..core.checks import MAX_COUNT, is_int_at_least, shown
from ..core.errors import SubagentDepthError, UsageError
from . import texts


@dataclass(slots=True)
class StartRequest:
    """What a delegation asks for. ``max_depth=None`` means no cap (provider-managed)."""

    prompt: str
    parent: Agent
    label: str | None = None
    agent_options: dict | None = None  # {"model": Model, "max_tokens": int, "limits": Limits}
    persona: str | None = None
    tool_filter: dict | None = None
    max_depth: int | None = 3
    by_user: bool = False
    #: tools this child sees besides the hub's tool layer (``tools=`` of spawn/start: an MCP server's
    #: tools), and the MCP servers they come from (an external child is handed the servers instead)
    tools: tuple = ()
    mcp_servers: tuple = ()


def model_name(model: Any) -> str | None:
    """The route name a descriptor records for a per-child model (``gpt-4o-mini``, a function's name)."""
    if model is None:
        return None
    for attribute in ("model", "name"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def depth_of(agent: Agent) -> int:
    """An agent's delegation depth (a resumed child keeps the depth its log records)."""
    return max(agent.session.header.delegation_depth, agent.depth)


def validate_max_depth(max_depth: Any, name: str = "max_depth") -> int | None:
    """``int >= 0`` → the cap; ``"provider-managed"`` → ``None`` (no cap sent). The error names the
    Python parameter (the reference's ``maxDepth`` wording is for texts a model reads)."""
    if isinstance(max_depth, str) and max_depth == "provider-managed":
        return None
    if not is_int_at_least(max_depth, 0) or max_depth > MAX_COUNT:
        raise UsageError(f'{name} must be an integer from 0 to {MAX_COUNT} or "provider-managed", '
                         f"got {shown(max_depth)}")
    return max_depth


def child_depth(parent: Agent, max_depth: int | None) -> int:
    """The depth a new child of ``parent`` gets, refused past the cap."""
    depth = depth_of(parent) + 1
    if max_depth is not None and depth > max_depth:
        raise SubagentDepthError(depth, max_depth)
    return depth


def filtered(tools: tuple, tool_filter: dict | None) -> tuple:
    """The child's own ``tools`` its ``tool_filter`` lets through (it applies to them like to any tool)."""
    if not tool_filter:
        return tools
    allow, deny = tool_filter.get("allow"), set(tool_filter.get("deny") or ())
    return tuple(t for t in tools if (allow is None or t.name in allow) and t.name not in deny)


class ToolFilter(TypedDict, total=False):
    """Which tools a child sees: ``allow`` (only these) and/or ``deny`` (all but these); ``report``
    survives even ``allow: []``."""

    allow: list[str]
    deny: list[str]


def validate_tool_filter(tool_filter: Any) -> dict | None:
    """``{"allow": [...], "deny": [...]}`` (either or both) as a fresh dict of lists; ``None`` passes."""
    if tool_filter is None:
        return None
    if not isinstance(tool_filter, dict):
        raise UsageError(f"tool_filter must be a dict with 'allow' and/or 'deny' lists, got {type(tool_filter).__name__}")
    unknown = set(tool_filter) - {"allow", "deny"}
    if unknown:
        raise UsageError(f"tool_filter has unknown key(s) {sorted(unknown)}; use 'allow' and/or 'deny'")
    if "allow" not in tool_filter and "deny" not in tool_filter:
        raise UsageError(texts.EMPTY_FILTER)
    out = {}
    for key in ("allow", "deny"):
        if key in tool_filter:
            names = tool_filter[key]
            if isinstance(names, str) or not all(isinstance(n, str) for n in names):
                raise UsageError(f"tool_filter['{key}'] must be a list of tool names")
            out[key] = list(names)
    return out
