"""The hub's event stream as OpenTelemetry spans: one listener on the hub's bus.

Span shape (``docs/guides/traces.md``):

- an ``invoke_agent <name>`` span per agent turn, a ``chat <model>`` span per model call under it and
  an ``execute_tool <tool>`` span per tool call under it;
- a foreground delegation's child turn is a child span of the ``execute_tool subagent`` span that
  started it, so a tree of foreground delegations is one trace;
- a background job's child and a continuable child start a trace per turn, linked (span links) to the
  span that started the child (``toh_nb.link=started_by``) and to the span that woke the turn, if any
  (``woken_by``: a ``send_message`` call, a notice's sender); a root turn starts a trace of its own
  (or continues the caller's span, or a ``traceparent`` a server received: ``toh_nb.tracing.context``);
- messages queued for an agent (``send_message``, notices, reports), interrupts, children and jobs
  starting and ending are span events on the spans they touch.

How a child finds the span that started it: a listener runs synchronously in the task that publishes
the event, so the tracer makes each ``execute_tool`` span the current OpenTelemetry span of the task
running the call (and each ``chat`` span that of the model call, each ``invoke_agent`` span that of the
turn). asyncio copies the current context into the tasks a call starts, so a child started by a call
-- its ``ChildStarted`` event, its turns' driver task -- sees that call's span, even among parallel
calls. The same current span makes spans of instrumented libraries the user's tools or models call
(HTTP clients...) nest under the right toh_nb span.

Timestamps are the events' wall-clock ``time``: replayed events (``toh_nb.ray``'s host turns) keep
when they happened. Content (prompts, answers, tool arguments and results) is recorded only with
``capture_content`` (``toh_nb.tracing.options``), masked of every secret the process holds.
"""

from __future__ import annotations

import json
import weakref
from typing import Any, Callable

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from .. import __version__
from ..core import events as ev
from ..core.secrets import masked
from . import context as carried
from . import names as n
from .facts import model_name, provider_name, server_of
from .options import Tracing

SCOPE = "toh_nb"
#: queued messages kept for an agent's next turn span (events beyond are dropped; the log has them)
PENDING_LIMIT = 32


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def _text(value: Any) -> str:
    """A string for a span: masked of held secrets, at most :data:`names.MAX_TEXT` characters."""
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    text = masked(text)
    return text if len(text) <= n.MAX_TEXT else text[: n.MAX_TEXT - 1] + "\u2026"


def _clean(attributes: dict) -> dict:
    """Attributes without None values (OpenTelemetry refuses them)."""
    return {key: value for key, value in attributes.items() if value is not None}


class _Info:
    """What the tracer knows of one of its spans (kept while the span object lives)."""

    __slots__ = ("agent_id", "call_id", "jobs", "__weakref__")

    def __init__(self, agent_id: str | None, call_id: str | None = None) -> None:
        self.agent_id = agent_id
        self.call_id = call_id
        self.jobs: list[str] = []


class _Turn:
    """One agent's running turn: its span, the context its task had before, its open chat and tools."""

    __slots__ = ("span", "context", "prior", "chat", "tools", "model", "text", "parent_id", "messages")

    def __init__(self, span: Any, prior: Any, model: Any, parent_id: str | None) -> None:
        self.span = span
        self.context = trace.set_span_in_context(span)
        self.prior = prior
        self.chat: Any = None
        self.tools: dict[str, Any] = {}
        self.model = model
        self.text = ""
        self.parent_id = parent_id
        #: message events for the span, written when it ends (see HubTracer._messages)
        self.messages: list[tuple[str, dict, int]] = []


class _Child:
    """A child's current activation or run: the span that started it and whether it runs detached."""

    __slots__ = ("origin", "mode", "provider")

    def __init__(self, origin: Any, mode: str, provider: str) -> None:
        self.origin = origin
        self.mode = mode
        self.provider = provider


class HubTracer:
    """Subscribed to a hub's bus by the hub (``tracing=``); see the module docstring."""

    def __init__(self, runtime: Any, options: Tracing, costs: Any = None) -> None:
        provider = options.provider if options.provider is not None else trace.get_tracer_provider()
        self.tracer = provider.get_tracer(SCOPE, __version__)
        self.runtime = runtime
        self.costs = costs if costs is not None and costs.prices else None
        self.content = options.content()
        self._turns: dict[str, _Turn] = {}
        self._children: dict[str, _Child] = {}
        self._pending: dict[str, list[tuple[str, dict, int]]] = {}
        self._info: "weakref.WeakKeyDictionary[Any, _Info]" = weakref.WeakKeyDictionary()
        self._handlers: dict[type, Callable[[Any], None]] = {
            ev.TurnStarted: self._turn_started, ev.TurnEnded: self._turn_ended,
            ev.ModelRequested: self._model_requested, ev.ModelResponded: self._model_responded,
            ev.ToolCalled: self._tool_called, ev.ToolReturned: self._tool_returned,
            ev.MessageQueued: self._message_queued, ev.Interrupted: self._interrupted,
            ev.ChildStarted: self._child_started, ev.ChildEnded: self._child_ended,
            ev.JobStarted: self._job_started, ev.JobStopping: self._job_event, ev.JobEnded: self._job_event,
            ev.ExternalActivity: self._external, ev.ToolAbandoned: self._abandoned, ev.HubClosed: self._closed,
        }
        self._unsubscribe = runtime.bus.subscribe(self)

    def __call__(self, event: ev.HubEvent) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    # -- helpers -------------------------------------------------------------------------------

    def _ours(self, span: Any) -> _Info | None:
        try:
            return self._info.get(span)
        except TypeError:  # an unhashable foreign span
            return None

    def _start(self, name: str, parent: Any, kind: SpanKind, attributes: dict, start: float, agent_id: str | None,
               call_id: str | None = None, links: list | None = None) -> Any:
        span = self.tracer.start_span(name, context=parent, kind=kind, attributes=_clean(attributes),
                                      links=links or None, start_time=_ns(start))
        self._info[span] = _Info(agent_id, call_id)
        return span

    def _cost(self, agent_id: str, input_tokens: int, output_tokens: int) -> float | None:
        if self.costs is None:
            return None
        self.costs.note(agent_id, self.runtime)
        return self.costs.cost(agent_id, input_tokens, output_tokens)

    def _event_on_turn(self, agent_id: str | None, name: str, attributes: dict, at: float) -> bool:
        turn = self._turns.get(agent_id) if agent_id is not None else None
        if turn is None:
            return False
        turn.span.add_event(name, _clean(attributes), _ns(at))
        return True

    def _sender(self, target: str | None) -> Any:
        """The tracer's span current in the publishing task when it belongs to another agent than
        ``target`` (the ``send_message``/``interrupt_agent`` call, a reporting child's turn)."""
        current = trace.get_current_span()
        info = self._ours(current)
        return current if info is not None and info.agent_id != target else None

    # -- turns ---------------------------------------------------------------------------------

    def _turn_started(self, event: ev.TurnStarted) -> None:
        agent_id = event.agent_id
        previous = self._turns.pop(agent_id, None)
        if previous is not None:  # a turn with no end event (cannot happen on one bus): closed here
            previous.span.end(end_time=_ns(event.time))
        agent = self.runtime.agents.get(agent_id)
        prior = otel_context.get_current()
        current = trace.get_current_span(prior)
        mine = self._ours(current)
        child = self._children.get(agent_id)
        origin = child.origin if child is not None else None
        background = child is not None and (child.mode == "continuable" or (
            origin is not None and bool(self._info_jobs(origin))))
        links: list = []
        parent = None
        if origin is not None and not background:
            parent = trace.set_span_in_context(origin)  # a foreground delegation: inside its tool span
        else:
            if origin is not None:
                links.append(Link(origin.get_span_context(), {n.LINK_KIND: n.STARTED_BY}))
            if mine is not None and mine.agent_id != agent_id and current is not origin:
                links.append(Link(current.get_span_context(), {n.LINK_KIND: n.WOKEN_BY}))
            remote = carried.inbound() if event.parent_id is None else None
            if remote is not None:
                trace_id, span_id, flags, state = remote
                context = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags),
                                      trace_state=_trace_state(state))
                parent = trace.set_span_in_context(NonRecordingSpan(context))
            elif mine is None and origin is None and current.get_span_context().is_valid:
                parent = prior  # the caller's own span (an AsyncHub used inside the user's span)
            else:
                parent = otel_context.Context()  # a trace of its own
        model = agent.model if agent is not None else None
        label = agent.label if agent is not None else None
        mode = agent.mode if agent is not None else (child.mode if child is not None else None)
        name = label or ("root" if event.parent_id is None else agent_id)
        attributes = {
            n.OPERATION_NAME: n.INVOKE_AGENT, n.AGENT_ID: agent_id, n.AGENT_NAME: name,
            n.CONVERSATION_ID: agent_id, n.AGENT_LABEL: label, n.AGENT_MODE: mode, n.AGENT_DEPTH: event.depth,
            n.AGENT_PARENT: event.parent_id, n.TURN: event.turn, n.BACKGROUND: background if child else None,
            n.SUBAGENT_PROVIDER: child.provider if child is not None else None,
        }
        if model is not None:
            attributes[n.REQUEST_MODEL] = model_name(model)
            attributes[n.PROVIDER_NAME] = provider_name(model)
        limits = agent.limits if agent is not None else None
        if limits is not None:
            attributes[n.MAX_STEPS] = limits.max_steps
            attributes[n.TOKEN_BUDGET] = limits.token_budget
            attributes[n.TURN_TIMEOUT] = limits.turn_timeout
        span = self._start(f"{n.INVOKE_AGENT} {name}", parent, SpanKind.INTERNAL, attributes, event.time, agent_id,
                           links=links)
        turn = self._turns[agent_id] = _Turn(span, prior, model, event.parent_id)
        turn.messages = self._pending.pop(agent_id, [])
        otel_context.attach(turn.context)

    def _info_jobs(self, span: Any) -> list[str]:
        info = self._ours(span)
        return info.jobs if info is not None else []

    def _turn_ended(self, event: ev.TurnEnded) -> None:
        turn = self._turns.pop(event.agent_id, None)
        if turn is None:
            return
        end = _ns(event.time)
        if turn.chat is not None:  # the call never answered: the turn's end says why
            self._finish(turn.chat, event.reason, event.error, end)
        for span in turn.tools.values():
            self._finish(span, event.reason, event.error, end)
        span = turn.span
        attributes = {n.USAGE_INPUT_TOKENS: event.input_tokens, n.USAGE_OUTPUT_TOKENS: event.output_tokens,
                      n.COST: self._cost(event.agent_id, event.input_tokens, event.output_tokens)}
        agent = self.runtime.agents.get(event.agent_id)
        if agent is not None:
            attributes[n.SUBTREE_TOKENS] = agent.subtree_tokens
        if self.content and turn.text:
            attributes[n.OUTPUT_VALUE] = turn.text
        span.set_attributes(_clean(attributes))
        self._messages(turn)
        self._finish(span, event.reason, event.error, end)
        otel_context.attach(turn.prior)
        carried.set_outbound(None)

    def _messages(self, turn: _Turn) -> None:
        """The turn's message events (and, with content, its input) go on its span as it ends: a
        model's key is held (``toh_nb.core.secrets``) from its first request on, so text masked now is
        masked of it even when the message was queued before that request."""
        texts = []
        for name, attributes, at in turn.messages:
            if n.MESSAGE_TEXT in attributes:
                attributes = {**attributes, n.MESSAGE_TEXT: _text(attributes[n.MESSAGE_TEXT])}
                texts.append(attributes[n.MESSAGE_TEXT])
            turn.span.add_event(name, attributes, at)
        if texts:
            turn.span.set_attribute(n.INPUT_VALUE, "\n\n".join(texts))
            turn.span.set_attribute(n.INPUT_MESSAGES, json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": t}]} for t in texts], ensure_ascii=False))

    def _finish(self, span: Any, reason: str, error: str | None, end: int) -> None:
        span.set_attribute(n.STOP_REASON, reason)
        if reason in n.ERROR_STOPS:
            span.set_attribute(n.ERROR_TYPE, reason)
            diagnostic = _text(error) if error else reason
            span.set_attribute(n.DIAGNOSTIC, diagnostic)
            span.set_status(Status(StatusCode.ERROR, diagnostic))
        span.end(end_time=end)

    # -- model calls ---------------------------------------------------------------------------

    def _model_requested(self, event: ev.ModelRequested) -> None:
        turn = self._turns.get(event.agent_id)
        if turn is None:
            return
        if turn.chat is not None:
            turn.chat.end(end_time=_ns(event.time))
        model = turn.model
        name = model_name(model) if model is not None else None
        address, port = server_of(model) if model is not None else (None, None)
        agent = self.runtime.agents.get(event.agent_id)
        attributes = {n.OPERATION_NAME: n.CHAT, n.REQUEST_MODEL: name, n.AGENT_ID: event.agent_id,
                      n.CONVERSATION_ID: event.agent_id, n.TURN: event.turn, n.STEP: event.step,
                      n.PROVIDER_NAME: provider_name(model) if model is not None else None,
                      n.SERVER_ADDRESS: address, n.SERVER_PORT: port,
                      n.REQUEST_MAX_TOKENS: agent.max_tokens if agent is not None else None}
        span = self._start(f"{n.CHAT} {name}" if name else n.CHAT, turn.context, SpanKind.CLIENT, attributes,
                           event.time, event.agent_id)
        turn.chat = span
        otel_context.attach(trace.set_span_in_context(span))
        context = span.get_span_context()
        carried.set_outbound((context.trace_id, context.span_id, int(context.trace_flags))
                             if context.is_valid else None)

    def _model_responded(self, event: ev.ModelResponded) -> None:
        turn = self._turns.get(event.agent_id)
        if turn is None or turn.chat is None:
            return
        span, turn.chat = turn.chat, None
        finish = event.stop_reason or ("tool_calls" if event.tool_calls else "stop")
        attributes = {n.USAGE_INPUT_TOKENS: event.input_tokens, n.USAGE_OUTPUT_TOKENS: event.output_tokens,
                      n.RESPONSE_FINISH_REASONS: (finish,),
                      n.COST: self._cost(event.agent_id, event.input_tokens, event.output_tokens)}
        if self.content:
            text = _text(event.text)
            parts = ([{"type": "text", "content": text}] if text else []) + [
                {"type": "tool_call", "name": name} for name in event.tool_calls]
            attributes[n.OUTPUT_MESSAGES] = json.dumps(
                [{"role": "assistant", "parts": parts, "finish_reason": finish}], ensure_ascii=False)
            attributes[n.OUTPUT_VALUE] = text
            turn.text = text
        span.set_attributes(_clean(attributes))
        span.end(end_time=_ns(event.time))
        otel_context.attach(turn.context)
        carried.set_outbound(None)

    # -- tool calls ----------------------------------------------------------------------------

    def _tool_called(self, event: ev.ToolCalled) -> None:
        turn = self._turns.get(event.agent_id)
        if turn is None:
            return
        attributes = {n.OPERATION_NAME: n.EXECUTE_TOOL, n.TOOL_NAME: event.name, n.TOOL_CALL_ID: event.call_id,
                      n.TOOL_TYPE: "function", n.AGENT_ID: event.agent_id, n.TURN: event.turn}
        if self.content and event.arguments is not None:
            attributes[n.TOOL_CALL_ARGUMENTS] = attributes[n.INPUT_VALUE] = _text(event.arguments)
        span = self._start(f"{n.EXECUTE_TOOL} {event.name}", turn.context, SpanKind.INTERNAL, attributes,
                           event.time, event.agent_id, event.call_id)
        turn.tools[event.call_id] = span
        # the call's task (this one, or the pool task created next, which copies this context) runs under it
        otel_context.attach(trace.set_span_in_context(span))

    def _tool_returned(self, event: ev.ToolReturned) -> None:
        turn = self._turns.get(event.agent_id)
        if turn is None:
            return
        span = turn.tools.pop(event.call_id, None)
        if span is None:  # a call refused before it was dispatched (an abort): its result only
            span = self._start(f"{n.EXECUTE_TOOL} {event.name}", turn.context, SpanKind.INTERNAL,
                               {n.OPERATION_NAME: n.EXECUTE_TOOL, n.TOOL_NAME: event.name,
                                n.TOOL_CALL_ID: event.call_id, n.TOOL_TYPE: "function", n.AGENT_ID: event.agent_id,
                                n.TURN: event.turn}, event.time, event.agent_id, event.call_id)
        if self.content:
            span.set_attribute(n.TOOL_CALL_RESULT, _text(event.text))
            span.set_attribute(n.OUTPUT_VALUE, _text(event.text))
        if event.is_error:
            diagnostic = _text(event.text)
            span.set_attributes({n.ERROR_TYPE: "tool_error", n.DIAGNOSTIC: diagnostic})
            span.set_status(Status(StatusCode.ERROR, diagnostic))
        span.end(end_time=_ns(event.time))
        otel_context.attach(turn.context)

    # -- messages, interrupts, children, jobs --------------------------------------------------

    def _message_queued(self, event: ev.MessageQueued) -> None:
        target = event.agent_id
        attributes = _clean({n.MESSAGE_SOURCE: event.source, n.MESSAGE_ID: event.message_id})
        if self.content:
            attributes[n.MESSAGE_TEXT] = event.text  # masked when written (_messages)
        turn = self._turns.get(target) if target is not None else None
        queue = turn.messages if turn is not None else self._pending.setdefault(target, []) if target else None
        if queue is not None and len(queue) < PENDING_LIMIT:
            queue.append((n.EVENT_MESSAGE, attributes, _ns(event.time)))
        sender = self._sender(target)
        if sender is not None:
            sender.add_event(n.EVENT_MESSAGE_SENT, _clean({n.TARGET: target, n.MESSAGE_SOURCE: event.source,
                                                           n.MESSAGE_ID: event.message_id}), _ns(event.time))

    def _interrupted(self, event: ev.Interrupted) -> None:
        self._event_on_turn(event.agent_id, n.EVENT_INTERRUPT, {n.SENDER: event.by}, event.time)
        sender = self._sender(event.agent_id)
        if sender is not None:
            sender.add_event(n.EVENT_INTERRUPT_SENT, {n.TARGET: event.agent_id}, _ns(event.time))

    def _child_started(self, event: ev.ChildStarted) -> None:
        current = trace.get_current_span()
        info = self._ours(current)
        # started by a call of its parent (this task runs that call, or was started by it): else by the
        # user (hub.spawn/start/send), whose children start traces of their own
        origin = current if info is not None and info.agent_id == event.parent_id and info.call_id else None
        self._children[event.agent_id] = _Child(origin, event.mode, event.provider)
        attributes = {n.CHILD_ID: event.agent_id, n.AGENT_MODE: event.mode, n.SUBAGENT_PROVIDER: event.provider,
                      n.AGENT_LABEL: event.label}
        if origin is not None:
            origin.add_event(n.EVENT_CHILD_STARTED, _clean(attributes), _ns(event.time))

    def _child_ended(self, event: ev.ChildEnded) -> None:
        child = self._children.pop(event.agent_id, None)
        attributes = {n.CHILD_ID: event.agent_id, n.STOP_REASON: event.stop_reason}
        if not self._event_on_turn(event.parent_id, n.EVENT_CHILD_ENDED, attributes, event.time):
            if child is not None and child.origin is not None and child.origin.is_recording():
                child.origin.add_event(n.EVENT_CHILD_ENDED, attributes, _ns(event.time))

    def _job_started(self, event: ev.JobStarted) -> None:
        current = trace.get_current_span()
        info = self._ours(current)
        attributes = {n.JOB_ID: event.job, n.AGENT_LABEL: event.label}
        if info is not None and info.agent_id == event.agent_id and info.call_id:
            info.jobs.append(event.job)  # its children run detached: traces of their own, linked
            current.add_event(n.EVENT_JOB_STARTED, attributes, _ns(event.time))
        else:
            self._event_on_turn(event.agent_id, n.EVENT_JOB_STARTED, attributes, event.time)

    def _job_event(self, event: ev.JobStopping | ev.JobEnded) -> None:
        if isinstance(event, ev.JobEnded):
            name = n.EVENT_JOB_ENDED
            attributes = {n.JOB_ID: event.job, n.JOB_STATUS: event.status, n.CHILD_ID: event.child_id,
                          n.DIAGNOSTIC: _text(event.detail) if event.detail else None}
        else:
            name, attributes = n.EVENT_JOB_STOPPING, {n.JOB_ID: event.job, n.DIAGNOSTIC: event.reason}
        self._event_on_turn(event.agent_id, name, attributes, event.time)

    def _external(self, event: ev.ExternalActivity) -> None:
        turn = self._turns.get(event.agent_id)
        if turn is None:
            return
        attributes = {n.ACTIVITY: event.activity}
        if self.content and event.data is not None:
            attributes[n.MESSAGE_TEXT] = _text(event.data)
        (turn.chat or turn.span).add_event(n.EVENT_EXTERNAL, attributes, _ns(event.time))

    def _abandoned(self, event: ev.ToolAbandoned) -> None:
        self._event_on_turn(event.agent_id, n.EVENT_TOOL_ABANDONED,
                            {n.TOOL_NAME: event.name, n.DIAGNOSTIC: _text(event.detail)}, event.time)

    def _closed(self, event: ev.HubClosed) -> None:
        """The hub closed: every span still open ends here (a turn cut by the close), then the tracer leaves."""
        end = _ns(event.time)
        for turn in self._turns.values():
            self._messages(turn)
            for span in [turn.chat, *turn.tools.values()]:
                if span is not None:
                    self._finish(span, "aborted", None, end)
            self._finish(turn.span, "aborted", None, end)
        self._turns.clear()
        self._children.clear()
        self._pending.clear()
        self._unsubscribe()


def _trace_state(value: str | None) -> TraceState | None:
    if not value:
        return None
    try:
        return TraceState.from_header([value])
    except Exception:  # a malformed tracestate is dropped (W3C): the traceparent still holds
        return None
