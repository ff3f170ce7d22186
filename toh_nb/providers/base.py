"""The provider seam: how a child agent comes to exist.

The service owns everything a child *is* to the rest of the system — its id, depth, session log,
inbox, activations, authorization, notices, listing and tables — so every provider's children behave
the same in the ``subagent`` tool, the job tools, ``send_message``, ``interrupt_agent``, the tables and
the widget. A provider contributes only what differs, as a :class:`ChildPlan`:

- ``seed``: events the child's log starts with (``fork`` copies the parent's completed turns);
- ``model``: the child's model. An agent that lives elsewhere (an ACP coding agent) is a
  model adapter here: one turn of the child is one prompt to it, cancelled when the turn is cancelled
  (interrupt, kill, timeout), and what it does meanwhile is recorded with :meth:`ChildInfo.record`;
- ``own_tools``: the child brings its own tools (an external harness), so toh_nb offers it none;
- ``wrap_tool``: where the child's tools run. Called once per tool the child sees; the tool it returns
  (same name, description and schema) is the one dispatched, so a provider can run the user's tools
  elsewhere (a Ray actor) while toh_nb's own tools, which act on the driver's tree, stay as they are;
- ``steps``: the child's step loop (:class:`~toh_nb.core.steps.StepLoop`), for a child whose turns'
  steps run elsewhere (``toh_nb.providers.ray`` gives a ``RemoteSteps``); its turn lifecycle (inbox,
  records, waiters, cancellation) stays the driver's agent's, whatever loop steps it;
- ``close``: releases what the plan holds (a process, an actor) when the child is disposed: a one-shot
  run at its end, a continuable activation when it settles, everything at ``hub.close()``.

Optional abilities are small typed protocols (:class:`PlansNow`, :class:`ResumesNow`,
:class:`ExplainsResume`, :class:`Attachable`, :class:`Closable`), resolved once when a hub registers the
provider (:func:`abilities_of`), never probed per call. A provider that holds resources beyond one child
(a pool of Ray actors) is ``Closable``: ``hub.close()`` awaits its ``aclose()`` after every child and job
is disposed, so nothing is left behind.

Capabilities are declared, not probed: a call that needs one the provider lacks (a continuable child, a
persona, a tool filter, a depth limit) is refused with a :class:`~toh_nb.core.errors.ProviderError`
(a ``UsageError`` and a ``SubagentError``) naming the provider and the capability.

In-process providers implement ``plan_now``/``resume_now`` (synchronous), so a background job's child
exists the moment its job id is returned and a cold resume is accepted without a suspension; other
providers implement ``plan``/``resume`` (awaited). ``resume`` rebuilds the plan of a settled continuable
child from its log (``ChildInfo.request`` is then ``None``); a provider that cannot resume raises
``SubagentError(message, "NOT_RESUMABLE")`` and the sender reads that message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal, Protocol, runtime_checkable

from ..core.session import Event
from ..core.steps import StepLoop

#: the reference's capability names (``tool-subagent`` ``SubagentProvider.capabilities``)
REFERENCE_NAMES = {"depth_limit": "depthLimit", "tool_filter": "toolFilter", "persona": "persona",
                   "continuable": "continuable", "output_schema": "outputSchema"}

#: an external harness's child sees no toh_nb tools (it brings its own)
NO_TOOLS = {"allow": []}


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a provider's children can do, declared rather than probed.

    A call that needs a capability the provider lacks (a continuable child, a persona, a tool filter, a
    depth limit) is refused with a ``ProviderError`` naming the provider and the capability. Raises
    nothing itself: a plain frozen record.

    Args:
        continuable: children can be continuable (``hub.start``, ``background_mode="continuable"``).
        persona: a child accepts a persona (a system prompt of its own).
        tool_filter: a child accepts allow/deny lists of the tools it is offered.
        depth_limit: toh_nb enforces ``max_depth``; ``False`` is the reference's provider-managed depth: the
            child harness owns its recursion budget and toh_nb sends no cap.
        inherits_parent_context: a child starts with its parent's conversation (``fork``).
        output_schema: a child can be asked for output matching a schema.
    """

    continuable: bool = True
    persona: bool = True
    tool_filter: bool = True
    depth_limit: bool = True
    inherits_parent_context: bool = False
    output_schema: bool = False

    def supports(self, name: str) -> bool:
        """``name`` as a field name or the reference's spelling (``depthLimit``)."""
        for field_name, reference in REFERENCE_NAMES.items():
            if name in (field_name, reference):
                return bool(getattr(self, field_name))
        return False


@dataclass(slots=True)
class ChildPlan:
    """What a provider contributes to one child; the service owns everything else about it.

    A provider's ``plan`` (or ``resume``) returns one. Raises nothing: a plain record; the service checks it
    when it builds the child.

    Args:
        seed: events the child's log starts with (``fork`` copies the parent's completed turns).
        model: the child's model. An agent that lives elsewhere (an ACP coding agent) is a model adapter:
            one turn of the child is one prompt to it, cancelled when the turn is cancelled.
        own_tools: the child brings its own tools (an external harness), so toh_nb offers it none.
        close: releases what the plan holds (a process, an actor) when the child is disposed: a one-shot
            run at its end, a continuable activation when it settles, everything at ``hub.close()``.
        wrap_tool: called once per tool the child sees; the tool it returns (same name, description and
            schema) is the one dispatched, so a provider can run user tools elsewhere (a Ray actor).
        steps: the step loop the child's turns run (a :class:`~toh_nb.core.steps.StepLoop`; ``None``: the
            in-process :class:`~toh_nb.core.steps.LocalSteps`), for a child whose steps run elsewhere (Ray's
            ``RemoteSteps``).
    """

    seed: list[Event] = field(default_factory=list)
    model: Any = None
    own_tools: bool = False
    close: Callable[[], Awaitable[None]] | None = None
    wrap_tool: Callable[[Any], Any] | None = None
    steps: StepLoop | None = None

    def tool_filter(self, requested: dict | None) -> dict | None:
        """The child's tool filter: none of toh_nb's tools for a harness that brings its own."""
        return NO_TOOLS if self.own_tools else requested


@dataclass(slots=True)
class ChildInfo:
    """What the service tells a provider about the child it is planning: its identity, mode and request.

    A plain record built by the service; only :meth:`ask` can raise.

    Args:
        id: the child's agent id.
        mode: ``"one-shot"`` or ``"continuable"``.
        label: the child's label, if any.
        depth: the child's depth (its parent's plus one).
        parent_id: the id of the agent that started it.
        request: the start request (prompt, persona, tool filter, options); ``None`` on a cold resume.
        record: ``record(kind, data)`` logs an external activity into the child's transcript and the event
            stream (``external/<kind>``).
        model: the model the child would run in-process (its own ``model=`` option, else its parent's).
        mcp_servers: the MCP servers whose tools the child would see; an external harness is handed them
            (ACP ``session/new``'s ``mcpServers``) so it uses the same tools.
        hub: the hub the child lives in (an identity only: hubs sharing a provider may each have an ``agent-1``).
        desk: the hub's desk of questions for a person (``toh_nb.core.asks``), which :meth:`ask` uses;
            ``None`` for a child planned outside a hub.

    Raises:
        UsageError: :meth:`ask` on a child planned outside a hub (no ``desk``: nobody to ask).
    """

    id: str
    mode: Literal["one-shot", "continuable"]
    label: str | None
    depth: int
    parent_id: str
    request: Any  # the StartRequest (prompt, persona, tool filter, options); None on a cold resume
    record: Callable[[str, dict], None]  # log an external activity into the child's transcript and stream
    model: Any = None  # the model the child would run in-process (its own option, else its parent's)
    #: the hub the child lives in (an identity only: hubs sharing a provider may each have an ``agent-1``)
    hub: Any = None
    #: the MCP servers whose tools the child would see (``toh_nb.mcp.MCPServer``): an external harness is
    #: handed them (ACP ``session/new``'s ``mcpServers``) so it uses the same tools
    mcp_servers: tuple = ()
    #: the hub's desk of questions for a person (``toh_nb.core.asks``): see :meth:`ask`
    desk: Any = None

    async def ask(self, title: str, kind: str, tool_call_id: str, timeout: float | None,
                  notify: Callable[[dict], Any] | None = None) -> bool:
        """Ask a person to allow a tool call of this child: published on the hub's event stream as
        ``PermissionAsked``, answered with ``hub.answer_permission`` (the tree's buttons call it);
        False when denied or unanswered within ``timeout`` seconds."""
        if self.desk is None:
            from ..core.errors import UsageError

            raise UsageError(f"child {self.id} was planned outside a hub: there is nobody to ask")
        return await self.desk.ask(self.id, title, kind, tool_call_id, timeout, notify)


@runtime_checkable
class Provider(Protocol):
    """The provider protocol: a registered way of making children (``tn.Hub(providers={"name": provider})``).

    Implement ``name``, ``capabilities`` (a ``Capabilities``) and ``async plan(child: ChildInfo) ->
    ChildPlan``; ``async resume(child, session) -> ChildPlan`` rebuilds a settled continuable child from its
    log. Optional: ``plan_now``/``resume_now`` (synchronous planning, for in-process providers),
    ``resume_problem(child_id, store)`` (why a child could not resume), ``async aclose()`` (release what
    the provider holds, at ``hub.close()``) and ``attach()`` (called when a hub registers it). Select one
    with ``provider="name"`` on ``spawn``/``start`` or ``tn.SubagentTool(provider="name")``.

    Raises:
        TypeError: instantiating the protocol itself; implement it in your own class.
        UsageError: (at ``tn.Hub(providers=...)``) an object without a name, capabilities or a plan method.
    """

    name: str
    capabilities: Capabilities

    async def plan(self, child: ChildInfo) -> ChildPlan: ...

    async def resume(self, child: ChildInfo, session: Any) -> ChildPlan: ...



@runtime_checkable
class PlansNow(Protocol):
    """Plans synchronously (in-process providers): a background job's child exists when its id is returned."""

    def plan_now(self, child: ChildInfo) -> ChildPlan: ...


@runtime_checkable
class ResumesNow(Protocol):
    """Resumes synchronously: a cold resume is accepted without a suspension."""

    def resume_now(self, child: ChildInfo, session: Any) -> ChildPlan: ...


@runtime_checkable
class ExplainsResume(Protocol):
    """Says why a settled child could not resume here (its ``list_agents`` diagnostic; None: it can)."""

    def resume_problem(self, child_id: str, store: Any) -> str | None: ...


@runtime_checkable
class Attachable(Protocol):
    """Counts the hubs that registered it (a provider shared by hubs releases its pool at the last close)."""

    def attach(self) -> None: ...


@runtime_checkable
class Closable(Protocol):
    """Holds resources beyond one child: ``hub.close()`` awaits ``aclose()`` after every child is disposed."""

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Abilities:
    """A registered provider's optional abilities, resolved once (None: it lacks that one)."""

    plan_now: Callable[[ChildInfo], ChildPlan] | None = None
    resume_now: Callable[[ChildInfo, Any], ChildPlan] | None = None
    resume_problem: Callable[[str, Any], str | None] | None = None
    attach: Callable[[], None] | None = None
    aclose: Callable[[], Awaitable[None]] | None = None


def abilities_of(provider: Any) -> Abilities:
    """Which optional protocols ``provider`` implements, as bound methods (checked once, at registration)."""
    return Abilities(plan_now=provider.plan_now if isinstance(provider, PlansNow) else None,
                     resume_now=provider.resume_now if isinstance(provider, ResumesNow) else None,
                     resume_problem=provider.resume_problem if isinstance(provider, ExplainsResume) else None,
                     attach=provider.attach if isinstance(provider, Attachable) else None,
                     aclose=provider.aclose if isinstance(provider, Closable) else None)


def is_provider_shaped(provider: Any) -> bool:
    """Whether ``provider`` has what every provider needs besides its name (a Capabilities object and a
    way to plan), checked before a hub gives a nameless provider the name it is registered under."""
    return isinstance(getattr(provider, "capabilities", None), Capabilities) and (
        callable(getattr(provider, "plan", None)) or callable(getattr(provider, "plan_now", None)))


def check_provider(provider: Any) -> None:
    """Registration-time shape check (a clear error instead of a failure at the first delegation)."""
    from ..core.errors import UsageError

    name = getattr(provider, "name", None)
    if not isinstance(name, str) or not name:
        raise UsageError(f"a subagent provider needs a non-empty string name, got {name!r}")
    if not isinstance(getattr(provider, "capabilities", None), Capabilities):
        raise UsageError(f'subagent provider "{name}" must declare its capabilities as a Capabilities object')
    if not callable(getattr(provider, "plan", None)) and not callable(getattr(provider, "plan_now", None)):
        raise UsageError(f'subagent provider "{name}" has neither plan() nor plan_now()')
