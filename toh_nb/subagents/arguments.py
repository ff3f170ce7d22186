"""What a delegation asks for (:class:`StartRequest`) and the checks its arguments pass.

Kept apart from the service because the hub, the notebook facade and the ``subagent`` tool validate the
same arguments (a depth cap, a tool filter) before any child exists; one module means one message each.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, TypedDict

from ..core.agent import Agent
from ..core.checks import MAX_COUNT, is_int_at_least, shown
from ..core.errors import SubagentDepthError, UsageError
from ..core.model import model_name
from . import texts


#: the deprecation of the loose ``agent_options`` dict (one text, tested exactly)
AGENT_OPTIONS_DEPRECATED = ("agent_options is deprecated and will be removed in the next release; "
                            "use options=ChildOptions(model=..., max_tokens=..., limits=...)")


@dataclass(frozen=True, slots=True)
class ChildOptions:
    """What a child is given besides its prompt (``None``: inherited from the parent): its own model, the
    completion limit of its model calls, its budgets (``toh_nb.core.budget.Limits``)."""

    model: Any = None
    max_tokens: int | None = None
    limits: Any = None

    @classmethod
    def given(cls, model: Any = None, max_tokens: int | None = None, limits: Any = None) -> "ChildOptions | None":
        """The options, or None when nothing is set (the child inherits everything)."""
        if model is None and max_tokens is None and limits is None:
            return None
        return cls(model, max_tokens, limits)

    @classmethod
    def of(cls, options: dict | None) -> "ChildOptions | None":
        """From the old dict form (``{"model": ..., "max_tokens": ..., "limits": ...}``)."""
        options = options or {}
        return cls.given(options.get("model"), options.get("max_tokens"), options.get("limits"))

    def as_dict(self) -> dict:
        """The old dict form: only what is set."""
        return {key: value for key, value in (("model", self.model), ("max_tokens", self.max_tokens),
                                               ("limits", self.limits)) if value is not None}


#: what a child without options of its own is given: nothing (it inherits everything); one shared object
NO_OPTIONS = ChildOptions()


@dataclass(slots=True, init=False)
class StartRequest:
    """What a delegation asks for. ``max_depth=None`` means no cap (provider-managed).

    ``options`` (:class:`ChildOptions`) replaces the ``agent_options`` dict, which is still accepted and
    read, with a DeprecationWarning, for one release (third-party providers read it)."""

    prompt: str
    parent: Agent
    label: str | None
    options: ChildOptions | None
    persona: str | None
    tool_filter: dict | None
    max_depth: int | None
    by_user: bool
    #: tools this child sees besides the hub's tool layer (``tools=`` of spawn/start: an MCP server's
    #: tools), and the MCP servers they come from (an external child is handed the servers instead)
    tools: tuple
    mcp_servers: tuple

    def __init__(self, prompt: str, parent: Agent, label: str | None = None, agent_options: dict | None = None,
                 persona: str | None = None, tool_filter: dict | None = None, max_depth: int | None = 3,
                 by_user: bool = False, tools: tuple = (), mcp_servers: tuple = (), *,
                 options: ChildOptions | None = None) -> None:
        if agent_options is not None:
            warnings.warn(AGENT_OPTIONS_DEPRECATED, DeprecationWarning, stacklevel=2)
            options = options or ChildOptions.of(agent_options)
        self.prompt, self.parent, self.label, self.options = prompt, parent, label, options
        self.persona, self.tool_filter, self.max_depth, self.by_user = persona, tool_filter, max_depth, by_user
        self.tools, self.mcp_servers = tools, mcp_servers

    @property
    def agent_options(self) -> dict | None:
        """Deprecated: :attr:`options` as the old dict."""
        warnings.warn(AGENT_OPTIONS_DEPRECATED, DeprecationWarning, stacklevel=2)
        if self.options is None:
            return None
        return self.options.as_dict() or None


def route_name(model: Any) -> str | None:
    """The route name a descriptor records for a per-child model (its name, else its class's name)."""
    if model is None:
        return None
    return model_name(model) or type(model).__name__


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
