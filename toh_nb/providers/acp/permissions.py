"""Answering an external agent's ``session/request_permission``.

The agent asks before it edits a file or runs a command; nobody is at a terminal to answer, so a policy
does. Deny is the default because the agent is a program we do not control: the user opts in, either by
tool kind (``{"read", "edit"}``, ACP's ``ToolKind`` names), for everything (``"allow"``), with a
callable that sees the request and decides (sync or async; ``True``/``False`` or an option id), or by
asking a person (``"ask"`` or :class:`AskUser`): the request waits on the desk of the hub whose child
asked (:mod:`toh_nb.core.asks`), is published on that hub's event stream as ``PermissionAsked``, is
answered with ``hub.answer_permission(ask_id, allowed)`` (the live tree's Allow/Deny buttons call it;
a script that reads ``hub.stream()`` can too), and is denied when nobody answers within the timeout.

The engine side knows nothing of notebooks: an ask is also announced through the ``notify`` hook the
link passes to :meth:`PermissionPolicy.decide` (it records an ``external/permission_request`` event in
the child's log). A policy used outside a hub (no desk) keeps its asks in the process-wide
:data:`PENDING`, answered with :func:`answer` (kept one release; a hub never uses it).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ...core.asks import PermissionDesk
from ...core.checks import check_number
from ...core.errors import UsageError

def denied_line(labels: list[str]) -> str:
    """The line a turn's answer gains when permissions were refused to the agent (``labels``: "title
    (kind)" each): under the default deny policy a refused tool call often ends in a quiet, empty
    "completed", and whoever delegated must be able to tell that from success."""
    noun = "Permission" if len(labels) == 1 else "Permissions"
    return f"{noun} denied: " + "; ".join(labels)


#: ACP's tool kinds (``schema.ToolKind``), copied so a policy is checked without the ``acp`` extra
#: imported; tests/acp/test_permissions.py holds the copy equal to the installed SDK's
TOOL_KINDS = ("read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other")


@dataclass(frozen=True, slots=True)
class PermissionRequest:
    """What a permission callable sees when an ACP agent asks to run a tool: the call and the options offered.

    ``permissions=`` of ``tn.AcpAgent`` may be a function of one of these returning ``True``/``False`` or an
    option id. Raises nothing: a plain frozen record.

    Args:
        session_id: the agent's ACP session id.
        title: the tool call's title as the agent gave it (``Write /w/out.txt``).
        kind: its ACP tool kind (``read``, ``edit``, ``execute``, …; ``other`` when the agent gave none).
        tool_call_id: the tool call's id.
        options: the options the agent offers, as ``{"id", "name", "kind"}`` dicts.
        raw_input: the tool call's raw input, if the agent sent it.
    """

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


#: seconds an asked permission waits for the notebook user before it is denied
ASK_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class AskUser:
    """``permissions=AskUser(timeout=60)``: an ACP agent's permission requests are asked of the notebook user.

    Each request appears at the top of ``hub.tree()`` with **Allow** and **Deny**; the agent's turn waits,
    and a request nobody answers in time is denied. ``permissions="ask"`` is ``AskUser()``.

    Args:
        timeout: seconds a request waits for an answer before it is denied.

    Raises:
        UsageError: ``timeout`` is not a positive number.
    """

    timeout: float = ASK_TIMEOUT

    def __post_init__(self) -> None:
        check_number(self.timeout, "AskUser timeout", positive=True, none=None)


class PendingAsks(PermissionDesk):
    """The process-wide desk of a policy used outside a hub: a :class:`~toh_nb.core.asks.PermissionDesk`
    that publishes nothing (no hub, no event stream); ``listing`` is its old name of ``pending``."""

    def listing(self, agent_ids: Iterable[str] | None = None) -> list[dict]:
        """The pending asks (of those agents), oldest first."""
        return self.pending(agent_ids)


#: the pending asks of policies used outside a hub (answered with :func:`answer`; a hub has its own desk)
PENDING = PendingAsks()


def answer(ask_id: str, allowed: bool) -> str:
    """Allow (``True``) or deny (``False``) the pending permission request ``ask_id``."""
    return PENDING.answer(ask_id, allowed)


class PermissionPolicy:
    """Built from ``AcpAgent(permissions=...)``: ``"deny"`` (default), ``"allow"``, an iterable of tool
    kinds to allow, a callable ``(PermissionRequest) -> bool | str`` (sync or async), or ``"ask"`` /
    :class:`AskUser` (the notebook user answers in ``hub.tree()``; denied after the timeout)."""

    def __init__(self, spec: Any = "deny") -> None:
        self.allow_all = False
        self.kinds: frozenset[str] = frozenset()
        self.decide_fn: Callable | None = None
        self.ask: AskUser | None = None
        if spec is None or spec == "deny":
            pass
        elif spec == "allow":
            self.allow_all = True
        elif spec == "ask":
            self.ask = AskUser()
        elif isinstance(spec, AskUser):
            self.ask = spec
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
            raise UsageError('permissions must be "deny", "allow", "ask", AskUser(timeout), a collection of ACP '
                             f"tool kinds or a callable, got {spec!r}")

    def describe(self) -> str:
        if self.allow_all:
            return "allow"
        if self.ask is not None:
            return "ask" if self.ask == AskUser() else f"ask (timeout {self.ask.timeout:g} s)"
        if self.decide_fn is not None:
            return getattr(self.decide_fn, "__name__", "callable")
        if self.kinds:
            return "allow " + ",".join(sorted(self.kinds))
        return "deny"

    async def decide(self, request: PermissionRequest, agent_id: str | None = None,
                     notify: Callable[[dict], None] | None = None,
                     desk: Callable[..., Any] | None = None) -> Decision:
        """The answer to ``request``. ``agent_id``/``notify``: for ``"ask"``, whose request it is and a
        hook that announces the pending ask (its dict: id, agent, title, kind, tool_call_id); ``desk``:
        the hub's way to ask a person (``ChildInfo.ask``; None: the process-wide :data:`PENDING`)."""
        if self.ask is not None:
            if desk is None:  # outside a hub: the process-wide desk, answered with answer()
                desk = functools.partial(PENDING.ask, agent_id)
            allowed = await desk(request.title, request.kind, request.tool_call_id, self.ask.timeout, notify)
            return Decision(allowed, _pick(request.options, "allow" if allowed else "reject"))
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
