"""One typed event stream for everything that happens in a hub.

Why one stream: the widget, the tables, the progress line, scripts (``async for ev in hub.astream()``)
and notebooks (``for ev in hub.stream()``) all want the same facts — a turn started, a tool was called,
a child settled, a job ended — and three ad-hoc channels drifted apart. Every event is an immutable
dataclass carrying the agent it concerns (``agent_id``, ``parent_id``, ``depth``), a wall-clock ``time``
(for tables) and a ``monotonic`` timestamp (for ordering and durations), plus its own fields.

Two tiers keep the hot path cheap:

- *lifecycle* events (children started/ended, jobs started/stopping/ended, interrupts, store and
  listener problems) are always published and kept in a bounded history (``hub.events()``);
- *activity* events (turns, model calls, tool calls, queued messages, status changes, text deltas,
  an external child's activity, a message read) are built only when some listener wants their kind
  (:attr:`EventBus.wanted`: a listener may subscribe to some kinds only).

Permission requests that wait for a person (:class:`PermissionAsked`, :class:`PermissionAnswered`) are
lifecycle events: a script's ``hub.stream()`` and the notebook's tree see the same asks, and either
answers through ``hub.answer_permission``. A model's streamed text reaches the stream as
:class:`TextDelta` (its ``on_delta`` callback, when given, is called with the same pieces).

Listeners run on the hub's loop, must be quick, and never affect a run: a listener that raises is
logged on ``logging.getLogger("toh_nb")`` and reported as a :class:`ListenerFailed` event.
"""

from __future__ import annotations

import logging
from time import monotonic as _monotonic
from time import time as _wall_clock
from array import array
from collections import deque
from dataclasses import dataclass, field, fields
from itertools import islice
from operator import attrgetter, is_
from typing import Any, Callable, ClassVar, Iterable, Iterator

logger = logging.getLogger("toh_nb")

DEFAULT_HISTORY = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class HubEvent:
    """Base of every stream event: which agent it concerns, and when (``hub.stream()``, ``hub.events()``).

    Each subclass is one kind of fact (``ev.kind``: ``"turn/end"`` …, for ``kinds=[...]`` filters) and adds
    its own fields; ``ev.fields()`` gives those without the common ones, e.g. for a table row. Raises
    nothing: a frozen record the engine publishes.

    Args:
        agent_id: the agent the event concerns (``None``: the hub as a whole, e.g. a provider registered).
        parent_id: that agent's parent's id (``None``: the root, or an agent not known here).
        depth: that agent's depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
    """

    kind: ClassVar[str] = "event"
    lifecycle: ClassVar[bool] = False  # kept in the history and published even with no listener
    agent_id: str | None = None
    parent_id: str | None = None
    depth: int | None = None
    time: float = field(default_factory=_wall_clock)
    monotonic: float = field(default_factory=_monotonic)

    def fields(self) -> dict[str, Any]:
        """The event's own fields (without the common ones), e.g. for a table row."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _COMMON}


_COMMON = {"agent_id", "parent_id", "depth", "time", "monotonic"}


# -- activity of one agent --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStarted(HubEvent):
    """``agent_id`` began a turn (``turn/start``): its model is about to read the message that starts it.

    An activity event: built only while someone listens. Raises nothing: a frozen record the engine publishes.

    Args:
        agent_id: the agent whose turn began.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        turn: the turn's number in the agent's log (its first is 1).
    """

    kind: ClassVar[str] = "turn/start"
    turn: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnded(HubEvent):
    """``agent_id``'s turn ended (``turn/end``), why, and the tokens it used.

    An activity event: built only while someone listens. Raises nothing: a frozen record the engine publishes.

    Args:
        agent_id: the agent whose turn ended.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        turn: the turn's number (as in its :class:`TurnStarted`).
        reason: how it ended, a ``toh_nb.core.states.TurnEnd`` value: ``completed``, ``max-tokens``,
            ``aborted`` (interrupted, killed), ``error``, ``blocked`` (the model refused), ``max-steps``,
            ``token-budget`` or ``max-time``.
        error: what went wrong (a model failure's message, a failed store write, a budget's explanation);
            ``None`` when nothing did.
        input_tokens: input tokens of the turn's model calls.
        output_tokens: output tokens of the turn's model calls.
    """

    kind: ClassVar[str] = "turn/end"
    turn: int
    reason: str
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequested(HubEvent):
    """``agent_id`` called its model (``model/request``): one step of a turn begins.

    An activity event: built only while someone listens. Raises nothing: a frozen record the engine publishes.

    Args:
        agent_id: the agent calling its model.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        turn: the turn the call belongs to.
        step: the call's number within the turn (its first is 1; ``max_steps`` bounds it).
    """

    kind: ClassVar[str] = "model/request"
    turn: int
    step: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponded(HubEvent):
    """``agent_id``'s model answered one step (``model/response``): its text, tool calls and tokens.

    An activity event: built only while someone listens. Raises nothing: a frozen record the engine publishes.

    Args:
        agent_id: the agent whose model answered.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        turn: the turn the call belongs to.
        step: the call's number within the turn (as in its :class:`ModelRequested`).
        text: the answer's text (``""`` when it only called tools).
        tool_calls: the names of the tools it asked to call, in order.
        tool_arguments: the arguments of each of those calls, in the same order (as the model gave them).
        stop_reason: the model's stop reason: ``end_turn``, ``tool_use``, ``max_tokens`` or ``refusal``.
        input_tokens: the call's input tokens, as the model reported them.
        output_tokens: the call's output tokens, as the model reported them.
    """

    kind: ClassVar[str] = "model/response"
    turn: int
    step: int
    text: str
    tool_calls: tuple[str, ...] = ()
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    tool_arguments: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(HubEvent):
    """A piece of ``agent_id``'s answer as its model streams it (``model/delta``), before the step ends.

    An activity event: built only while someone listens. Only a model that streams (one that calls
    ``ModelRequest.on_delta``) produces them; the whole text follows in :class:`ModelResponded`. Raises nothing: a
    frozen record the engine publishes.

    Args:
        agent_id: the agent whose model is answering.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        text: the new piece of text (the pieces in order make the answer).
    """

    kind: ClassVar[str] = "model/delta"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCalled(HubEvent):
    """``agent_id`` started one tool call its model asked for (``tool/call``).

    An activity event: built only while someone listens. Raises nothing: a frozen record the engine publishes.

    Args:
        agent_id: the agent calling the tool.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        turn: the turn the call belongs to.
        call_id: the call's id, which its :class:`ToolReturned` repeats.
        name: the tool's name.
        arguments: the arguments the model gave (a dict, as logged).
    """

    kind: ClassVar[str] = "tool/call"
    turn: int
    call_id: str
    name: str
    arguments: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolReturned(HubEvent):
    """A tool call of ``agent_id`` returned (``tool/result``): the text its model reads next.

    An activity event: built only while someone listens. Raises nothing: a frozen record the engine publishes.

    Args:
        agent_id: the agent whose tool call returned.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        turn: the turn the call belongs to.
        call_id: the call's id (as in its :class:`ToolCalled`).
        name: the tool's name.
        text: the result's text, as the model sees it.
        is_error: the tool failed (or refused the call); ``text`` says why.
    """

    kind: ClassVar[str] = "tool/result"
    turn: int
    call_id: str
    name: str
    text: str
    is_error: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageQueued(HubEvent):
    """A message was queued for ``agent_id`` (``message/queued``): your prompt, a relayed message, a notice.

    An activity event: built only while someone listens. Raises nothing: a frozen record the engine publishes.

    Args:
        agent_id: the agent the message is for.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        message_id: the message's id (``msg-3``), or ``None`` when it has none.
        source: who or what sent it (``Source.kind``: ``"user"`` for your prompts, ``"subagent-settled"``
            for a child's settlement notice …); ``None`` when the message does not say.
        text: the message's text.
        sender: the id of the agent that sent it (a relayed message, a report, a settlement notice);
            ``None`` for your prompts and for notices no agent sent (a job's).
    """

    kind: ClassVar[str] = "message/queued"
    message_id: str | None
    source: str | None
    text: str
    sender: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageRead(HubEvent):
    """``agent_id`` read a queued message into its conversation (``message/read``): the message that opens a
    turn, or one read at a step boundary of a running turn (a steered message, a notice).

    Why: a message is queued (:class:`MessageQueued`) when it is sent and read when a turn takes it; an
    idle agent's follow-ups run one turn each, so only the read says which turn a message belongs to
    (traces put each message on that turn). An activity event: built only while someone listens.
    Raises nothing: a frozen record the engine publishes.

    Args:
        agent_id: the agent that read it.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        turn: the turn that read it.
        message_id: the message's id (as in its :class:`MessageQueued`), or ``None`` when it has none.
        source: who or what sent it (``Source.kind``, as in its :class:`MessageQueued`).
    """

    kind: ClassVar[str] = "message/read"
    turn: int
    message_id: str | None
    source: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusChanged(HubEvent):
    """``agent_id``'s status changed (``agent/status``): it started or stopped running turns.

    An activity event: built only while someone listens. Raises nothing: a frozen record the engine publishes.

    Args:
        agent_id: the agent whose status changed.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        status: its new status: ``running`` (a turn runs) or ``idle`` (nothing queued).
    """

    kind: ClassVar[str] = "agent/status"
    status: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ExternalActivity(HubEvent):
    """What an agent that lives elsewhere (ACP, Ray) reported doing (``subagent/activity``): a tool call, a plan.

    The provider records it with ``ChildInfo.record(kind, data)``; it is also logged in the child's transcript
    (``external/<kind>``). An activity event: built only while someone listens. Raises nothing: a frozen record the
    engine publishes.

    Args:
        agent_id: the external child that reported it.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        activity: what kind of activity it is (the provider's ``kind``, e.g. ``tool_call``, ``plan``).
        data: its details, as the provider gave them (a dict).
    """

    kind: ClassVar[str] = "subagent/activity"
    activity: str
    data: Any = None


# -- lifecycle (recorded) ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class ChildStarted(HubEvent):
    """A child's run (one-shot) or activation (continuable) began (``subagent/start``).

    A lifecycle event: always published and kept in ``hub.events()``. Raises nothing: a frozen record the engine
    publishes.

    Args:
        agent_id: the child.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        run_id: the id of this run or activation (each activation of a continuable child has its own),
            which its :class:`ChildEnded` repeats.
        provider: the provider that made the child (``spawn``, ``fork``, or one given as ``providers=``).
        mode: ``"one-shot"`` or ``"continuable"``.
        label: the child's label, if it has one.
        local: the child is an agent of this hub (its log and transcript are here).
    """

    kind: ClassVar[str] = "subagent/start"
    lifecycle: ClassVar[bool] = True
    run_id: str
    provider: str
    mode: str
    label: str | None = None
    local: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildEnded(HubEvent):
    """A child's run (one-shot) ended or its activation (continuable) settled (``subagent/end``).

    A lifecycle event: always published and kept in ``hub.events()``. Raises nothing: a frozen record the engine
    publishes.

    Args:
        agent_id: the child.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        run_id: the run's or activation's id (as in its :class:`ChildStarted`).
        provider: the provider that made the child.
        stop_reason: how it ended, a :class:`~toh_nb.core.states.StopReason` value (``completed``,
            ``aborted``, ``error``, ``max-tokens`` …).
        last_assistant_message: the text the child closed with; ``None`` when it said nothing.
        local: the child was an agent of this hub (``False``: it never existed here, so ``parent_id``
            and ``depth`` are ``None``).
    """

    kind: ClassVar[str] = "subagent/end"
    lifecycle: ClassVar[bool] = True
    run_id: str
    provider: str
    stop_reason: str
    last_assistant_message: str | None = None
    local: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStarted(HubEvent):
    """A background job started (``job/start``); ``agent_id`` is the job's owner.

    A lifecycle event: always published and kept in ``hub.events()``. Raises nothing: a frozen record the engine
    publishes.

    Args:
        agent_id: the agent that owns the job (the root for one you started with ``hub.spawn``).
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        job: the job's id (``subagent-1``).
        job_kind: what kind of job it is (``"subagent"``: a background one-shot child).
        label: the job's label (the description it was given).
    """

    kind: ClassVar[str] = "job/start"
    lifecycle: ClassVar[bool] = True
    job: str
    job_kind: str
    label: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStopping(HubEvent):
    """A running background job was asked to stop (``job/stopping``); its :class:`JobEnded` follows.

    A lifecycle event: always published and kept in ``hub.events()``. Raises nothing: a frozen record the engine
    publishes.

    Args:
        agent_id: the agent that owns the job (the root for one you started with ``hub.spawn``).
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        job: the job's id.
        reason: why it is being stopped (the reason given to ``kill``, else
            ``"background subagent task killed"``).
    """

    kind: ClassVar[str] = "job/stopping"
    lifecycle: ClassVar[bool] = True
    job: str
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobEnded(HubEvent):
    """A background job settled (``job/end``): completed, killed or failed.

    A lifecycle event: always published and kept in ``hub.events()``. Raises nothing: a frozen record the engine
    publishes.

    Args:
        agent_id: the agent that owns the job (the root for one you started with ``hub.spawn``).
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        job: the job's id.
        job_kind: what kind of job it is (as in its :class:`JobStarted`).
        label: the job's label.
        status: ``completed``, ``killed`` or ``failed``.
        detail: what the job's outcome says about how it ended (a failure's description), if anything.
        child_id: the id of the child agent that did the work, if one was started.
    """

    kind: ClassVar[str] = "job/end"
    lifecycle: ClassVar[bool] = True
    job: str
    job_kind: str
    label: str
    status: str
    detail: str | None = None
    child_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Interrupted(HubEvent):
    """``agent_id`` was interrupted by ``by`` (``agent/interrupt``): its turn aborted, queued messages parked.

    A lifecycle event: always published and kept in ``hub.events()``. Raises nothing: a frozen record the engine
    publishes.

    Args:
        agent_id: the interrupted child.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        by: the id of the agent that interrupted it (the root when you called ``interrupt``, else the
            agent whose model did).
    """

    kind: ClassVar[str] = "agent/interrupt"
    lifecycle: ClassVar[bool] = True
    by: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolAbandoned(HubEvent):
    """``agent_id``'s turn ended (interrupt, ``turn_timeout``, kill, close) while one of its sync calls
    (``name``: ``tool "x"`` or ``model function f``) still ran in a thread, which is left to finish on its
    own: Python cannot stop a thread (``toh_nb.core.threads``). It counts in ``abandoned_tools`` of
    ``hub.agents()`` until the function returns.

    A lifecycle event: always published and kept in ``hub.events()``. Raises nothing: a frozen record the
    engine publishes.

    Args:
        agent_id: the agent whose turn ended (``None``: the call's owner is not known).
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        name: what still runs: ``tool "x"`` or ``model function f``.
        detail: the sentence shown for it (``… still runs after its turn ended; its thread is left to
            finish on its own (1 abandoned in this hub)``).
    """

    kind: ClassVar[str] = "tool/abandoned"
    lifecycle: ClassVar[bool] = True
    name: str
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionAsked(HubEvent):
    """``agent_id`` (an external agent, ``AcpAgent(permissions="ask")``) waits for a person to allow or
    deny a tool call: ``hub.answer_permission(ask_id, True/False)`` answers (the tree's Allow/Deny
    buttons do); nobody answering within ``timeout`` seconds denies it. :class:`PermissionAnswered`
    follows.

    A lifecycle event: always published and kept in ``hub.events()``. Raises nothing: a frozen record the
    engine publishes.

    Args:
        agent_id: the external agent asking.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        ask_id: the request's id (``perm-1``), to pass to ``hub.answer_permission``.
        title: the tool call's title as the agent gave it (``Write /w/out.txt``).
        tool_kind: its ACP tool kind (``read``, ``edit``, ``execute``, …; ``other`` when the agent gave none).
        tool_call_id: the agent's id of the tool call.
        timeout: seconds it waits for an answer before denying (``None``: no limit).
    """

    kind: ClassVar[str] = "permission/ask"
    lifecycle: ClassVar[bool] = True
    ask_id: str
    title: str
    tool_kind: str
    tool_call_id: str
    timeout: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionAnswered(HubEvent):
    """The permission request ``ask_id`` of ``agent_id`` was answered: ``allowed``, and ``by`` whom
    (``user``; ``timeout`` or ``cancelled``: denied without an answer).

    A lifecycle event: always published and kept in ``hub.events()``. Raises nothing: a frozen record the
    engine publishes.

    Args:
        agent_id: the external agent that asked.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        ask_id: the request's id (as in its :class:`PermissionAsked`).
        allowed: the tool call may run.
        by: ``"user"`` (answered through ``hub.answer_permission``), ``"timeout"`` (nobody answered in
            time) or ``"cancelled"`` (the wait was cancelled, e.g. the child stopped).
    """

    kind: ClassVar[str] = "permission/answer"
    lifecycle: ClassVar[bool] = True
    ask_id: str
    allowed: bool
    by: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderChanged(HubEvent):
    """A provider was registered or unregistered (``subagent/provider``).

    Published whenever it happens (not kept in ``hub.events()``). Raises nothing: a frozen record the engine
    publishes.

    Args:
        agent_id: ``None``: the change concerns the hub, not an agent.
        parent_id: ``None`` (no agent).
        depth: ``None`` (no agent).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        provider: the provider's name.
        registered: ``True``: it was registered; ``False``: it was removed.
    """

    kind: ClassVar[str] = "subagent/provider"
    provider: str
    registered: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem(HubEvent):
    """Something went wrong outside any turn (``problem``): a store flush, an undelivered notice, a release.

    No caller can receive these failures, so they are logged on ``logging.getLogger("toh_nb")`` and
    published here. A lifecycle event: always published and kept in ``hub.events()``. Raises nothing: a
    frozen record the engine publishes.

    Args:
        agent_id: the agent it concerns, if any.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        source: where it happened (``"subagent"``, ``"hub"``; ``"listener"`` for a :class:`ListenerFailed`).
        message: what went wrong, in a sentence.
    """

    kind: ClassVar[str] = "problem"
    lifecycle: ClassVar[bool] = True
    source: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerFailed(Problem):
    """A stream listener raised (``problem/listener``): logged, reported here, the run unaffected.

    Listeners never affect a run: the exception is logged on ``logging.getLogger("toh_nb")`` and reported as this
    event. A lifecycle event: always published and kept in ``hub.events()``. Raises nothing: a frozen record the
    engine publishes.

    Args:
        agent_id: ``None``: a listener is nobody's.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
        source: ``"listener"``.
        message: which event's listener raised, and what (``turn/end listener threw: ValueError: …``).
    """

    kind: ClassVar[str] = "problem/listener"


@dataclass(frozen=True, slots=True, kw_only=True)
class HubClosed(HubEvent):
    """The last event of a hub (``hub/closed``): streams end here.

    Raises nothing: a frozen record the engine publishes.

    Args:
        agent_id: the hub's root.
        parent_id: its parent's id (``None``: the root, or an agent not known here).
        depth: its depth in the tree (0: the root; ``None``: not known here).
        time: wall-clock seconds (``time.time()``) when it happened, for tables; default now.
        monotonic: ``time.monotonic()`` when it happened, for ordering and durations; default now.
    """

    kind: ClassVar[str] = "hub/closed"


Listener = Callable[[HubEvent], Any]


class SubtreeFilter:
    """Keeps the events of one agent and its descendants (optionally of some kinds only).

    Membership grows as the stream runs: an event whose parent is a member makes its agent a member,
    so children started later are followed without reading the store. ``members`` seeds it with the
    descendants that already exist."""

    __slots__ = ("members", "kinds")

    def __init__(self, root: str | None, members: Iterable[str] = (), kinds: Iterable[str] | None = None) -> None:
        self.members: set[str] | None = None if root is None else {root, *members}
        self.kinds = None if kinds is None else frozenset(kinds)

    def __call__(self, event: HubEvent) -> bool:
        if isinstance(event, HubClosed):
            return True
        if self.members is not None:
            if event.agent_id not in self.members:
                if event.parent_id is None or event.parent_id not in self.members:
                    return False
                self.members.add(event.agent_id)
        return self.kinds is None or event.kind in self.kinds


class EventHistory:
    """The bounded history of lifecycle events (``EventBus.history``, read by ``hub.events()``).

    Why not a deque of the events: with fewer than 5,000 children the history holds the start and the
    end of every child, and an event object (112 B) with its two timestamps (24 B float objects) was
    160 B of it -- 320 B of the ~2.2 KB an idle continuable child cost at 1,000 children
    (bench/README.md, round six). Here an event is kept as columns: a *head* shared by the events that
    have the same class and the same values of the few-valued fields (:data:`_GROUPED`: parent, depth,
    provider, mode, stop reason…), then its other field values as references in one deque (8 B each),
    and its ``time`` and ``monotonic`` in an array of doubles (8 B each instead of 24): ~50 B for a
    ``ChildStarted`` or a ``ChildEnded``. Iterating rebuilds the events at once: equal to the
    published ones (``==``, ``repr``), new objects each time. An event whose class cannot be rebuilt
    from its fields (checked on its first event) is kept whole.

    Cost: appending only queues the event (a deque's append); the queue is turned into columns
    :data:`BATCH` events at a time and before any read, because doing it one event at a time on
    the delegation path cost ~2 µs per event there (6 % of a one-shot delegation, measured).
    """

    __slots__ = ("maxlen", "_recent", "_refs", "_clocks", "_dropped", "_count")

    def __init__(self, maxlen: int = DEFAULT_HISTORY) -> None:
        self.maxlen = maxlen
        #: events appended since the last compaction, as published
        self._recent: deque = deque()
        #: per compacted event: its head (or _WHOLE), then its own field values (or the event itself)
        self._refs: deque = deque()
        #: ``time`` and ``monotonic`` of each compacted event, oldest first, after those of ``_dropped``
        #: events already dropped (cut off once they are as many as the bound: at most twice its doubles)
        self._clocks = array("d")
        self._dropped = 0
        self._count = 0  # compacted events

    def append(self, event: HubEvent) -> None:
        recent = self._recent
        recent.append(event)
        if len(recent) >= BATCH:
            self._compact()

    def _compact(self) -> None:
        """Turn the queued events into columns, dropping the oldest past the bound."""
        recent = self._recent
        excess = self._count + len(recent) - max(self.maxlen, 0)
        while excess > 0 and self._count:
            self._drop_oldest()
            excess -= 1
        while excess > 0:
            recent.popleft()
            excess -= 1
        refs, clocks = self._refs, self._clocks
        for event in recent:
            head = _head_of(event)
            if head is None:
                refs.append(_WHOLE)
                refs.append(event)
                clocks.append(0.0)
                clocks.append(0.0)
            else:
                refs.append(head)
                refs.extend(_SHAPES[head[0]][3](event))  # type: ignore[index]
                clocks.append(event.time)
                clocks.append(event.monotonic)
        self._count += len(recent)
        recent.clear()

    def _drop_oldest(self) -> None:
        refs = self._refs
        head = refs.popleft()
        for _ in range(1 if head is _WHOLE else len(_SHAPES[head[0]][1])):  # type: ignore[index]
            refs.popleft()
        self._count -= 1
        self._dropped += 1
        if self._dropped >= self.maxlen:
            del self._clocks[: 2 * self._dropped]
            self._dropped = 0

    @property
    def queued(self) -> int:
        """How many appended events still wait as objects to become columns (fewer than :data:`BATCH`)."""
        return len(self._recent)

    def heads(self) -> list:
        """The head of each kept event, oldest first (``None`` for an event kept whole), after turning the
        queue into columns: the events that share a class and their grouped values share one head
        object, which is what keeps the history small."""
        self._compact()
        out: list = []
        refs = iter(self._refs)
        for _ in range(self._count):
            head = next(refs)
            if head is _WHOLE:
                next(refs)
                out.append(None)
                continue
            out.append(head)
            for _ in _SHAPES[head[0]][1]:  # type: ignore[index]
                next(refs)
        return out

    def __iter__(self) -> Iterator[HubEvent]:
        return iter(self._events())

    def _events(self) -> list[HubEvent]:
        """Every kept event, oldest first (rebuilt at once: a snapshot, whatever is appended later)."""
        self._compact()
        out: list[HubEvent] = []
        refs = iter(self._refs)
        clocks, first = self._clocks, 2 * self._dropped
        for position in range(self._count):
            head = next(refs)
            if head is _WHOLE:
                out.append(next(refs))
                continue
            cls = head[0]
            grouped, own = _SHAPES[cls][:2]  # type: ignore[index]
            values = dict(zip(grouped, head[1:]))
            for name in own:
                values[name] = next(refs)
            at = first + 2 * position
            out.append(cls(time=clocks[at], monotonic=clocks[at + 1], **values))
        return out

    def __len__(self) -> int:
        self._compact()
        return self._count

    def __getitem__(self, index: int) -> HubEvent:
        return self._events()[index]

    def clear(self) -> None:
        self._recent.clear()
        self._refs.clear()
        self._clocks = array("d")
        self._dropped = self._count = 0

    def __repr__(self) -> str:
        return f"EventHistory({self._events()!r}, maxlen={self.maxlen})"


#: how many appended events an :class:`EventHistory` queues before turning them into columns
BATCH = 64
#: marks an event kept whole in an :class:`EventHistory`
_WHOLE = object()
#: fields with few distinct values: an :class:`EventHistory` keeps them in a head shared by many events
_GROUPED = frozenset({"parent_id", "depth", "provider", "mode", "local", "stop_reason", "job_kind", "status",
                      "source"})
#: per event class: (grouped field names, own field names, a getter of each's values as a tuple, the
#: class's last head), or None when its events are kept whole
_SHAPES: dict[type, list | None] = {}
#: the heads in use: (class, ids of the grouped values) -> the one tuple ``(class, *grouped values)``
#: for them. Keyed by identity, not equality (1, True and 1.0 are equal but print differently); the
#: head holds its values, so their ids stay theirs while it is here. Cleared when it grows large (the
#: kept events hold their heads themselves).
_HEADS: dict[tuple, tuple] = {}
_MAX_HEADS = 4096


def _head_of(event: HubEvent) -> tuple | None:
    """The shared head of ``event`` -- ``(class, *grouped values)`` -- or None to keep it whole: when its
    class cannot be rebuilt from its fields (tried on its first event: the copy must equal the
    original and print the same), or when a timestamp is not a float (a double holds nothing else)."""
    cls = type(event)
    try:
        shape = _SHAPES[cls]
    except KeyError:
        shape = _SHAPES[cls] = _shape_of(cls, event)
    if shape is None or not type(event.time) is float is type(event.monotonic):
        return None
    values = shape[2](event)
    last = shape[4]
    if last is not None and all(map(is_, values, islice(last, 1, None))):  # the same as the class's last event
        return last
    key = (cls, *map(id, values))
    head = _HEADS.get(key)
    if head is None:
        if len(_HEADS) >= _MAX_HEADS:
            _HEADS.clear()
        head = _HEADS[key] = (cls, *values)
    shape[4] = head
    return head


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    """``attrgetter`` that always gives a tuple (it gives the bare value for one name)."""
    if not names:
        return lambda event: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda event: (one(event),)
    return attrgetter(*names)


def _shape_of(cls: type, event: HubEvent) -> list | None:
    try:
        every = fields(cls)
        if any(not f.init for f in every):
            return None
        names = [f.name for f in every if f.name not in ("time", "monotonic")]
        copy = cls(time=event.time, monotonic=event.monotonic, **{name: getattr(event, name) for name in names})
    except Exception:
        return None
    if copy != event or repr(copy) != repr(event):
        return None
    grouped = tuple(n for n in names if n in _GROUPED)
    own = tuple(n for n in names if n not in _GROUPED)
    return [grouped, own, _getter(grouped), _getter(own), None]


def _kinds_of(cls: type) -> set[str]:
    out = set()
    for sub in cls.__subclasses__():
        out.add(sub.kind)
        out |= _kinds_of(sub)
    return out


#: the kind of every event type defined here: what a listener subscribed without ``kinds`` wants
ALL_KINDS: frozenset[str] = frozenset(_kinds_of(HubEvent))


class EventBus:
    """The hub's one stream: ``publish`` typed events; ``subscribe`` listeners; a bounded history.

    A listener may name the kinds it wants (``subscribe(listener, kinds=[...])``): it is called for
    those only, and an activity event no listener wants is not even built (the engine checks
    ``kind in bus.wanted`` before building one), so a tracer that needs no status changes or text
    deltas does not pay for them."""

    __slots__ = ("history", "_listeners", "listening", "wanted")

    def __init__(self, history: int = DEFAULT_HISTORY) -> None:
        self.history = EventHistory(history)
        #: (listener, the kinds it wants or None for every kind)
        self._listeners: list[tuple[Listener, frozenset[str] | None]] = []
        #: someone listens (to some kinds)
        self.listening = False
        #: the kinds some listener wants: activity events of other kinds are not built
        self.wanted: frozenset[str] = frozenset()

    def subscribe(self, listener: Listener, kinds: Iterable[str] | None = None) -> Callable[[], None]:
        """Call ``listener(event)`` for every event published (``kinds``: for events of those kinds
        only, e.g. ``["turn/start", "turn/end", "hub/closed"]``); returns the function that
        unsubscribes it."""
        if isinstance(kinds, str):
            raise TypeError("kinds must be a collection of event kinds, not one string")
        entry = (listener, None if kinds is None else frozenset(kinds))
        self._listeners.append(entry)
        self._wanted_changed()

        def unsubscribe() -> None:
            for index, other in enumerate(self._listeners):
                if other is entry:
                    del self._listeners[index]
                    self._wanted_changed()
                    return

        return unsubscribe

    def _wanted_changed(self) -> None:
        wanted: set[str] = set()
        for _, kinds in self._listeners:
            if kinds is None:
                wanted = set(ALL_KINDS)
                break
            wanted |= kinds
        self.wanted = frozenset(wanted)
        self.listening = bool(self._listeners)

    def wants(self, kind: str) -> bool:
        """Some listener wants events of ``kind`` (build an activity event only then)."""
        return kind in self.wanted

    def publish(self, event: HubEvent) -> HubEvent:
        if event.lifecycle:
            self.history.append(event)
        kind = event.kind
        for listener, kinds in tuple(self._listeners):
            if kinds is not None and kind not in kinds:
                continue
            try:
                listener(event)
            except Exception as error:  # listeners never affect the run
                if isinstance(event, ListenerFailed):
                    logger.exception("toh_nb event listener failed on a failure report")
                    continue
                self.problem("listener", f"{event.kind} listener threw: {type(error).__name__}: {error}",
                             failed=True)
        return event

    def problem(self, source: str, message: str, *, agent_id: str | None = None, failed: bool = False) -> None:
        """Report a problem that no caller can receive: logged, kept in the history, streamed."""
        logger.warning("%s: %s", source, message)
        cls = ListenerFailed if failed else Problem
        self.publish(cls(agent_id=agent_id, source=source, message=message))
