"""Answering an external agent's ``session/request_permission``.

The agent asks before it edits a file or runs a command; nobody is at a terminal to answer, so a policy
does. Deny is the default because the agent is a program we do not control: the user opts in, either by
tool kind (``{"read", "edit"}``, ACP's ``ToolKind`` names), for everything (``"allow"``), or with a
callable that sees the request and decides (sync or async; ``True``/``False`` or an option id).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..core.errors import UsageError

#: ACP's tool kinds (``schema.ToolKind``)
TOOL_KINDS = ("read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other")


@dataclass(frozen=True, slots=True)
class PermissionRequest:
    """What a permission callable sees: the tool call and the options the agent offers."""

    session_id: str
    title: str
    kind: str  # a TOOL_KINDS name ("other" when the agent gave none)
    tool_call_id: str
    options: list[dict] = field(default_factory=list)  # [{"id", "name", "kind"}]
    raw_input: Any = None


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    option_id: str | None  # the option answered; None = the request is answered "cancelled"


class PermissionPolicy:
    """Built from ``AcpAgent(permissions=...)``: ``"deny"`` (default), ``"allow"``, an iterable of tool
    kinds to allow, or a callable ``(PermissionRequest) -> bool | str`` (sync or async)."""

    def __init__(self, spec: Any = "deny") -> None:
        self.allow_all = False
        self.kinds: frozenset[str] = frozenset()
        self.decide_fn: Callable | None = None
        if spec is None or spec == "deny":
            pass
        elif spec == "allow":
            self.allow_all = True
        elif callable(spec):
            self.decide_fn = spec
        elif isinstance(spec, Iterable) and not isinstance(spec, (str, bytes, dict)):
            kinds = list(spec)
            unknown = [k for k in kinds if k not in TOOL_KINDS]
            if unknown:
                raise UsageError(f"permissions: unknown ACP tool kind(s) {', '.join(map(repr, unknown))}; "
                                 f"expected some of {', '.join(TOOL_KINDS)}")
            self.kinds = frozenset(kinds)
        else:
            raise UsageError('permissions must be "deny", "allow", a collection of ACP tool kinds or a callable, '
                             f"got {spec!r}")

    def describe(self) -> str:
        if self.allow_all:
            return "allow"
        if self.decide_fn is not None:
            return getattr(self.decide_fn, "__name__", "callable")
        if self.kinds:
            return "allow " + ",".join(sorted(self.kinds))
        return "deny"

    async def decide(self, request: PermissionRequest) -> Decision:
        if self.decide_fn is not None:
            answer = self.decide_fn(request)
            if inspect.isawaitable(answer):
                answer = await answer
            if isinstance(answer, str):
                if answer not in {o["id"] for o in request.options}:
                    return Decision(False, _pick(request.options, "reject"))  # an unknown option is a refusal
                kind = next(o["kind"] for o in request.options if o["id"] == answer)
                return Decision(kind.startswith("allow"), answer)
            allowed = bool(answer)
        else:
            allowed = self.allow_all or request.kind in self.kinds
        return Decision(allowed, _pick(request.options, "allow" if allowed else "reject"))


def _pick(options: list[dict], prefix: str) -> str | None:
    """The ``*_once`` option of that sense, else ``*_always``; None when the agent offers neither."""
    for wanted in (f"{prefix}_once", f"{prefix}_always"):
        for option in options:
            if option["kind"] == wanted:
                return option["id"]
    return None
