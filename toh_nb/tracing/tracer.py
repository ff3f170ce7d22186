"""The hub's event stream as OpenTelemetry spans: one listener on the hub's bus.

Span shape (``docs/guides/traces.md``):

- an ``invoke_agent <name>`` span per agent turn, a ``chat <model>`` span per model call under it and
  an ``execute_tool <tool>`` span per tool call under it;
- a foreground delegation's child turn is a child span of the ``execute_tool subagent`` span that
  started it, so a tree of foreground delegations is one trace;
- a background job's child and a continuable child start a trace per turn, linked (span links) to the
  span that started the child (``toh_nb.link=started_by``); a root turn starts a trace of its own
  (or continues the caller's span, or a ``traceparent`` a server received: ``toh_nb.tracing.context``);
- each message an agent reads (its prompt, a ``send_message``, a notice, a report) is a span event on
  the turn that read it (``message/read``: an idle agent's follow-ups run one turn each), and that turn
  is linked (``woken_by``) to the span of the agent that sent it: the ``send_message`` call, the
  reporting child's turn, the settled child's or the finished job child's last turn;
- interrupts, children and jobs starting and ending are span events on the spans they touch.

How a child finds the span that started it: a listener runs synchronously in the task that publishes
the event, so the tracer makes each ``execute_tool`` span the current OpenTelemetry span of the task
running the call (and each ``chat`` span that of the model call, each ``invoke_agent`` span that of the
turn), with what it knows of the span (:class:`_Info`: whose, which call) in the same OpenTelemetry
context. asyncio copies the current context into the tasks a call starts, so a child started by a call
-- its ``ChildStarted`` event, its turns' driver task -- sees that call's span, even among parallel
calls (a Ray child's replayed calls too: ``toh_nb.providers.ray.remote`` runs each in the context its
``ToolCalled`` left). The same current span makes spans of instrumented libraries the user's tools or
models call (HTTP clients...) nest under the right toh_nb span.

Cost (``bench/tracing.py``): the tracer subscribes to the kinds it uses only (no status changes or text
deltas are built for it), keeps a model's facts and a turn's ``chat`` attributes once, and leaves to
the SDK what the SDK does (it cleans every attribute value again).

Timestamps are the events' wall-clock ``time``: replayed events (``toh_nb.ray``'s host turns) keep
when they happened. Content (prompts, answers, tool arguments and results) is recorded only with
``capture_content`` (``toh_nb.tracing.options``), masked of every secret the process holds.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from ..version import __version__
from ..core import events as ev
from ..core.secrets import masked
from . import context as carried
from . import names as n
from .facts import model_name, provider_name, server_of
from .options import Tracing

SCOPE = "toh_nb"
#: message events kept for one turn span (events beyond are dropped; the log has them)
PENDING_LIMIT = 32
#: queued messages not read yet, and agents' last turn spans, remembered (the oldest are forgotten)
REMEMBERED = 4096
#: the key under which a context holds the tracer's :class:`_Info` of its current span
_INFO = otel_context.create_key("toh_nb.tracing.span")
_EMPTY = otel_context.Context()
_STARTED_BY = {n.LINK_KIND: n.STARTED_BY}
#: the most messages a chat span's ``gen_ai.input.messages`` holds (with content capture)
INPUT_MESSAGES_LIMIT = 16


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def _text(value: Any) -> str:
    """A string for a span: masked of held secrets, at most :data:`names.MAX_TEXT` characters."""
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    text = masked(text)
    return text if len(text) <= n.MAX_TEXT else text[: n.MAX_TEXT - 1] + "\u2026"


def _masked_value(value: Any) -> Any:
    """A tool call's arguments for a content attribute: masked, and cut to a string when long."""
    if value is None:
        return {}
    text = _text(value)
    try:
        return json.loads(text) if len(text) < n.MAX_TEXT else text
    except ValueError:
        return text


def _inputs(messages: Any) -> list[dict]:
    """The GenAI ``gen_ai.input.messages`` of a model call: the conversation's messages after the
    model's previous answer (at most :data:`INPUT_MESSAGES_LIMIT`), masked and cut."""
    found: list[dict] = []
    for message in reversed(messages):
        if message.role == "assistant" or len(found) >= INPUT_MESSAGES_LIMIT:
            break
        if message.role == "tool":
            parts = [{"type": "tool_call_response", "id": block.call_id, "response": _text(block.text)}
                     for block in message.content if getattr(block, "type", None) == "tool-result"]
        else:
            parts = [{"type": "text", "content": _text(message.text)}]
        found.append({"role": message.role, "parts": parts})
    found.reverse()
    return found


def _clean(attributes: dict) -> dict:
    """Attributes without None values (OpenTelemetry refuses them)."""
    return {key: value for key, value in attributes.items() if value is not None}


def _remember(memory: dict, key: Any, value: Any) -> None:
    memory[key] = value
    if len(memory) > REMEMBERED:
        del memory[next(iter(memory))]


class _Info:
    """What the tracer knows of one of its spans, kept in the OpenTelemetry context that span is current
    in: the tracer (two traced hubs may share a task), the agent, the tool call (None: a turn or a model
    call), and the jobs a tool call started (their children run detached: linked traces)."""

    __slots__ = ("tracer", "agent_id", "call_id", "span", "context", "jobs", "started")

    def __init__(self, tracer: "HubTracer", agent_id: str, call_id: str | None, span: Any, base: Any) -> None:
        self.tracer = tracer
        self.agent_id = agent_id
        self.call_id = call_id
        self.span = span
        self.context = otel_context.set_value(_INFO, self, trace.set_span_in_context(span, base))
        self.jobs: list[str] | None = None
        #: the ``subagent.started`` event of the one-shot child this call started, written only if the
        #: call also starts a job (a foreground child's span nests under the call: no event needed)
        self.started: tuple[dict, int] | None = None


class _Turn:
    """One agent's running turn: its span, the context its task had before, its open chat and tools."""

    __slots__ = ("info", "span", "prior", "chat", "tools", "model", "chat_base", "text", "messages", "linked")

    def __init__(self, info: _Info, prior: Any, model: Any, chat_base: dict) -> None:
        self.info = info
        self.span = info.span
        self.prior = prior
        self.chat: Any = None
        self.tools: dict[str, Any] = {}
        self.model = model
        #: the attributes every chat span of this turn has (its step added)
        self.chat_base = chat_base
        self.text = ""
        #: message events for the span, written when it ends (see HubTracer._messages)
        self.messages: list[tuple[str, dict, int]] = []
        #: span ids the turn descends from or links to (a sender's span is linked once, if not one of them)
        self.linked: set[int] = set()


class _Child:
    """A child's current activation or run: the call that started it and what it is."""

    __slots__ = ("origin", "mode", "provider")

    def __init__(self, origin: _Info | None, mode: str, provider: str) -> None:
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
        #: message id -> (event attributes, the sender's span context or None, the link's attributes)
        self._queued: dict[str, tuple[dict, Any, dict | None]] = {}
        #: agent id -> the span context of its last ended turn (what a settled child's notice links to)
        self._last: dict[str, Any] = {}
        #: a finished job's notice on its way: (the event count when its JobEnded came, owner, link, attributes)
        self._notice: tuple | None = None
        self._count = 0
        #: model object id -> (model, name, provider name, server address, server port)
        self._models: dict[int, tuple] = {}
        self._handlers: dict[type, Callable[[Any], None]] = {
            ev.TurnStarted: self._turn_started, ev.TurnEnded: self._turn_ended,
            ev.ModelRequested: self._model_requested, ev.ModelResponded: self._model_responded,
            ev.ToolCalled: self._tool_called, ev.ToolReturned: self._tool_returned,
            ev.MessageQueued: self._message_queued, ev.MessageRead: self._message_read,
            ev.Interrupted: self._interrupted,
            ev.ChildStarted: self._child_started, ev.ChildEnded: self._child_ended,
            ev.JobStarted: self._job_started, ev.JobStopping: self._job_event, ev.JobEnded: self._job_event,
            ev.ExternalActivity: self._external, ev.ToolAbandoned: self._abandoned, ev.HubClosed: self._closed,
        }
        self._unsubscribe = runtime.bus.subscribe(self, kinds=[cls.kind for cls in self._handlers])

    def __call__(self, event: ev.HubEvent) -> None:
        self._count += 1
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    # -- helpers -------------------------------------------------------------------------------

    def _mine(self, context: Any = None) -> _Info | None:
        """This tracer's info of the span current in ``context`` (default: this task's), or None."""
        info = otel_context.get_value(_INFO, context)
        return info if info is not None and info.tracer is self else None

    def _start(self, name: str, parent: Any, kind: SpanKind, attributes: dict, start: float,
               links: list | None = None) -> Any:
        return self.tracer.start_span(name, context=parent, kind=kind, attributes=attributes, links=links,
                                      start_time=_ns(start))

    def _model(self, model: Any) -> tuple:
        """``(model, name, provider name, server address, server port)``, worked out once per model."""
        facts = self._models.get(id(model))
        if facts is None or facts[0] is not model:
            address, port = server_of(model)
            facts = (model, model_name(model), provider_name(model), address, port)
            if len(self._models) >= 256:
                self._models.clear()
            self._models[id(model)] = facts
        return facts

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

    def _sender(self, target: str | None) -> _Info | None:
        """The tracer's span current in the publishing task when it belongs to another agent than
        ``target`` (the ``send_message``/``interrupt_agent`` call, a reporting child's turn)."""
        info = self._mine()
        return info if info is not None and info.agent_id != target else None

    # -- turns ---------------------------------------------------------------------------------

    def _turn_started(self, event: ev.TurnStarted) -> None:
        agent_id = event.agent_id
        previous = self._turns.pop(agent_id, None)
        if previous is not None:  # a turn with no end event (cannot happen on one bus): closed here
            previous.span.end(end_time=_ns(event.time))
        agent = self.runtime.agents.get(agent_id)
        prior = otel_context.get_current()
        mine = self._mine(prior)
        child = self._children.get(agent_id)
        origin = child.origin if child is not None else None
        background = child is not None and (child.mode == "continuable" or (origin is not None and bool(origin.jobs)))
        links = None
        if origin is not None and not background:
            parent = origin.context  # a foreground delegation: inside its tool span
        else:
            if origin is not None:
                links = [Link(origin.span.get_span_context(), _STARTED_BY)]
            remote = carried.inbound() if event.parent_id is None else None
            if remote is not None:
                trace_id, span_id, flags, state = remote
                context = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags),
                                      trace_state=_trace_state(state))
                parent = trace.set_span_in_context(NonRecordingSpan(context))
            elif mine is None and origin is None and trace.get_current_span(prior).get_span_context().is_valid:
                parent = prior  # the caller's own span (an AsyncHub used inside the user's span)
            else:
                parent = _EMPTY  # a trace of its own
        label = agent.label if agent is not None else None
        name = label or ("root" if event.parent_id is None else agent_id)
        attributes = {n.OPERATION_NAME: n.INVOKE_AGENT, n.AGENT_ID: agent_id, n.AGENT_NAME: name,
                      n.CONVERSATION_ID: agent_id, n.TURN: event.turn}
        mode = agent.mode if agent is not None else (child.mode if child is not None else None)
        if mode is not None:
            attributes[n.AGENT_MODE] = mode
        if event.depth is not None:
            attributes[n.AGENT_DEPTH] = event.depth
        if event.parent_id is not None:
            attributes[n.AGENT_PARENT] = event.parent_id
        if child is not None:
            if background:
                attributes[n.BACKGROUND] = True
            attributes[n.SUBAGENT_PROVIDER] = child.provider
        model = agent.model if agent is not None else None
        chat_base = {n.OPERATION_NAME: n.CHAT, n.AGENT_ID: agent_id, n.CONVERSATION_ID: agent_id}
        if model is not None:
            _, model_id, provider, address, port = self._model(model)
            if model_id is not None:
                attributes[n.REQUEST_MODEL] = chat_base[n.REQUEST_MODEL] = model_id
            attributes[n.PROVIDER_NAME] = chat_base[n.PROVIDER_NAME] = provider
            if address is not None:
                chat_base[n.SERVER_ADDRESS] = address
            if port is not None:
                chat_base[n.SERVER_PORT] = port
        if agent is not None:
            if agent.max_tokens is not None:
                chat_base[n.REQUEST_MAX_TOKENS] = agent.max_tokens
            limits = agent.limits
            if limits.max_steps is not None:
                attributes[n.MAX_STEPS] = limits.max_steps
            if limits.token_budget is not None:
                attributes[n.TOKEN_BUDGET] = limits.token_budget
            if limits.turn_timeout is not None:
                attributes[n.TURN_TIMEOUT] = limits.turn_timeout
        span = self._start(f"{n.INVOKE_AGENT} {name}", parent, SpanKind.INTERNAL, attributes, event.time, links)
        turn = self._turns[agent_id] = _Turn(_Info(self, agent_id, None, span, prior), prior, model, chat_base)
        if origin is not None:
            turn.linked.add(origin.span.get_span_context().span_id)
        otel_context.attach(turn.info.context)

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
        attributes = {n.USAGE_INPUT_TOKENS: event.input_tokens, n.USAGE_OUTPUT_TOKENS: event.output_tokens}
        if self.costs is not None:
            attributes[n.COST] = self._cost(event.agent_id, event.input_tokens, event.output_tokens)
        agent = self.runtime.agents.get(event.agent_id)
        if agent is not None:
            attributes[n.SUBTREE_TOKENS] = agent.subtree_tokens
        if self.content and turn.text:
            attributes[n.OUTPUT_VALUE] = turn.text
        span.set_attributes(attributes)
        self._messages(turn)
        self._finish(span, event.reason, event.error, end)
        _remember(self._last, event.agent_id, span.get_span_context())
        otel_context.attach(turn.prior)
        carried.set_outbound(None)

    def _messages(self, turn: _Turn) -> None:
        """The turn's message events (and, with content, its input) go on its span as it ends: a
        model's key is held (``toh_nb.core.secrets``) from its first request on, so text masked now is
        masked of it even when the message was read before that request."""
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
        attributes = turn.chat_base.copy()
        attributes[n.STEP] = event.step
        name = attributes.get(n.REQUEST_MODEL)
        span = self._start(f"{n.CHAT} {name}" if name else n.CHAT, turn.info.context, SpanKind.CLIENT, attributes,
                           event.time)
        turn.chat = span
        otel_context.attach(trace.set_span_in_context(span, turn.info.context))
        context = span.get_span_context()
        carried.set_outbound((context.trace_id, context.span_id, int(context.trace_flags))
                             if context.is_valid else None)

    def _model_responded(self, event: ev.ModelResponded) -> None:
        turn = self._turns.get(event.agent_id)
        if turn is None or turn.chat is None:
            return
        span, turn.chat = turn.chat, None
        finish = event.stop_reason or ("tool_calls" if event.tool_calls else "stop")
        attributes: dict = {n.USAGE_INPUT_TOKENS: event.input_tokens, n.USAGE_OUTPUT_TOKENS: event.output_tokens,
                            n.RESPONSE_FINISH_REASONS: (finish,)}
        if self.costs is not None:
            attributes[n.COST] = self._cost(event.agent_id, event.input_tokens, event.output_tokens)
        if self.content:
            text = _text(event.text)
            arguments = event.tool_arguments or (None,) * len(event.tool_calls)
            parts = ([{"type": "text", "content": text}] if text else []) + [
                {"type": "tool_call", "name": name, "arguments": _masked_value(args)}
                for name, args in zip(event.tool_calls, arguments)]
            attributes[n.OUTPUT_MESSAGES] = json.dumps(
                [{"role": "assistant", "parts": parts, "finish_reason": finish}], ensure_ascii=False, default=str)
            attributes[n.OUTPUT_VALUE] = text
            turn.text = text
            agent = self.runtime.agents.get(event.agent_id)
            if agent is not None:  # what the call read: the messages since the model's previous answer
                inputs = _inputs(agent.messages)  # (now, not at the request: a key is held from it on)
                if inputs:
                    attributes[n.INPUT_MESSAGES] = json.dumps(inputs, ensure_ascii=False)
        span.set_attributes(attributes)
        span.end(end_time=_ns(event.time))
        otel_context.attach(turn.info.context)
        carried.set_outbound(None)

    # -- tool calls ----------------------------------------------------------------------------

    def _tool_attributes(self, event: ev.ToolCalled | ev.ToolReturned) -> dict:
        return {n.OPERATION_NAME: n.EXECUTE_TOOL, n.TOOL_NAME: event.name, n.TOOL_CALL_ID: event.call_id,
                n.TOOL_TYPE: "function", n.AGENT_ID: event.agent_id}

    def _tool_called(self, event: ev.ToolCalled) -> None:
        turn = self._turns.get(event.agent_id)
        if turn is None:
            return
        attributes = self._tool_attributes(event)
        if self.content and event.arguments is not None:
            attributes[n.TOOL_CALL_ARGUMENTS] = attributes[n.INPUT_VALUE] = _text(event.arguments)
        span = self._start(f"{n.EXECUTE_TOOL} {event.name}", turn.info.context, SpanKind.INTERNAL, attributes,
                           event.time)
        turn.tools[event.call_id] = span
        # the call's task (this one, or the pool task created next, which copies this context) runs under it
        otel_context.attach(_Info(self, event.agent_id, event.call_id, span, turn.info.context).context)

    def _tool_returned(self, event: ev.ToolReturned) -> None:
        turn = self._turns.get(event.agent_id)
        if turn is None:
            return
        span = turn.tools.pop(event.call_id, None)
        if span is None:  # a call refused before it was dispatched (an abort): its result only
            span = self._start(f"{n.EXECUTE_TOOL} {event.name}", turn.info.context, SpanKind.INTERNAL,
                               self._tool_attributes(event), event.time)
        if self.content:
            span.set_attribute(n.TOOL_CALL_RESULT, _text(event.text))
            span.set_attribute(n.OUTPUT_VALUE, _text(event.text))
        if event.is_error:
            diagnostic = _text(event.text)
            span.set_attributes({n.ERROR_TYPE: "tool_error", n.DIAGNOSTIC: diagnostic})
            span.set_status(Status(StatusCode.ERROR, diagnostic))
        span.end(end_time=_ns(event.time))
        otel_context.attach(turn.info.context)

    # -- messages, interrupts, children, jobs --------------------------------------------------

    def _message_queued(self, event: ev.MessageQueued) -> None:
        """Who sent it (its span, linked from the turn that reads it) and, on the sender's span, that it did."""
        target = event.agent_id
        attributes = {n.MESSAGE_SOURCE: event.source} if event.source is not None else {}
        if event.message_id is not None:
            attributes[n.MESSAGE_ID] = event.message_id
        sender_context = link = None
        sender = self._sender(target)
        notice = self._notice
        if sender is not None:  # the call that sent it (send_message), a reporting child's turn
            sender_context = sender.span.get_span_context()
            attributes[n.SENDER] = sender.agent_id
            agent = self.runtime.agents.get(target) if sender.call_id is not None and target is not None else None
            opening = (agent is not None and not agent.turns and agent.parent is not None
                       and agent.parent.id == sender.agent_id)
            if not opening:  # (the first prompt of a child the call creates is the call's own input)
                sent = {n.TARGET: target, **attributes} if target is not None else dict(attributes)
                sent.pop(n.SENDER, None)
                sender.span.add_event(n.EVENT_MESSAGE_SENT, sent, _ns(event.time))
        elif notice is not None and notice[0] == self._count - 1 and notice[1] == target and event.source == "plugin":
            _, _, sender_context, link = notice  # a finished job's notice: linked to its child's last turn
        elif event.sender is not None:  # a settled child's notice: its last turn
            attributes[n.SENDER] = event.sender
            turn = self._turns.get(event.sender)
            sender_context = turn.span.get_span_context() if turn is not None else self._last.get(event.sender)
        self._notice = None
        if self.content:
            attributes[n.MESSAGE_TEXT] = event.text  # masked when written (_messages)
        if event.message_id is not None:
            _remember(self._queued, event.message_id, (attributes, sender_context, link))

    def _message_read(self, event: ev.MessageRead) -> None:
        """A message on the turn that read it, and that turn linked to the span of whoever sent it."""
        turn = self._turns.get(event.agent_id)
        if turn is None:
            return
        queued = self._queued.pop(event.message_id, None) if event.message_id is not None else None
        if queued is None:
            attributes: dict = {n.MESSAGE_SOURCE: event.source} if event.source is not None else {}
            if event.message_id is not None:
                attributes[n.MESSAGE_ID] = event.message_id
            sender_context = link = None
        else:
            attributes, sender_context, link = queued
        if len(turn.messages) < PENDING_LIMIT:
            turn.messages.append((n.EVENT_MESSAGE, attributes, _ns(event.time)))
        if sender_context is not None and sender_context.is_valid:
            span_id = sender_context.span_id
            if span_id not in turn.linked and span_id != turn.span.get_span_context().span_id:
                turn.linked.add(span_id)
                turn.span.add_link(sender_context, link or {n.LINK_KIND: n.WOKEN_BY})

    def _interrupted(self, event: ev.Interrupted) -> None:
        self._event_on_turn(event.agent_id, n.EVENT_INTERRUPT, {n.SENDER: event.by}, event.time)
        sender = self._sender(event.agent_id)
        if sender is not None:
            sender.span.add_event(n.EVENT_INTERRUPT_SENT, {n.TARGET: event.agent_id}, _ns(event.time))

    def _child_started(self, event: ev.ChildStarted) -> None:
        info = self._mine()
        # started by a call of its parent (this task runs that call, or was started by it): else by the
        # user (hub.spawn/start/send), whose children start traces of their own
        origin = info if info is not None and info.agent_id == event.parent_id and info.call_id else None
        self._children[event.agent_id] = _Child(origin, event.mode, event.provider)
        if origin is not None:
            attributes = {n.CHILD_ID: event.agent_id, n.AGENT_MODE: event.mode, n.SUBAGENT_PROVIDER: event.provider}
            if event.label is not None:
                attributes[n.AGENT_LABEL] = event.label
            if event.mode == "one-shot" and not origin.jobs:  # foreground unless the call starts a job (_job_started)
                origin.started = (attributes, _ns(event.time))
            else:
                origin.span.add_event(n.EVENT_CHILD_STARTED, attributes, _ns(event.time))

    def _child_ended(self, event: ev.ChildEnded) -> None:
        child = self._children.pop(event.agent_id, None)
        if child is not None and child.mode == "one-shot" and child.origin is not None and not child.origin.jobs:
            return  # a foreground child: its span ended inside the call's, whose result follows
        attributes = {n.CHILD_ID: event.agent_id, n.STOP_REASON: event.stop_reason}
        if not self._event_on_turn(event.parent_id, n.EVENT_CHILD_ENDED, attributes, event.time):
            if child is not None and child.origin is not None and child.origin.span.is_recording():
                child.origin.span.add_event(n.EVENT_CHILD_ENDED, attributes, _ns(event.time))

    def _job_started(self, event: ev.JobStarted) -> None:
        info = self._mine()
        attributes = {n.JOB_ID: event.job, n.AGENT_LABEL: event.label}
        if info is not None and info.agent_id == event.agent_id and info.call_id:
            if info.jobs is None:
                info.jobs = []
            info.jobs.append(event.job)  # its children run detached: traces of their own, linked
            if info.started is not None:
                info.span.add_event(n.EVENT_CHILD_STARTED, *info.started)
                info.started = None
            info.span.add_event(n.EVENT_JOB_STARTED, attributes, _ns(event.time))
        else:
            self._event_on_turn(event.agent_id, n.EVENT_JOB_STARTED, attributes, event.time)

    def _job_event(self, event: ev.JobStopping | ev.JobEnded) -> None:
        if isinstance(event, ev.JobEnded):
            name = n.EVENT_JOB_ENDED
            attributes = {n.JOB_ID: event.job, n.JOB_STATUS: event.status, n.CHILD_ID: event.child_id,
                          n.DIAGNOSTIC: _text(event.detail) if event.detail else None}
            last = self._last.get(event.child_id) if event.child_id is not None else None
            if last is not None:  # its notice (published next, if any) links to the child's last turn
                self._notice = (self._count, event.agent_id, last,
                                {n.LINK_KIND: n.WOKEN_BY, n.JOB_ID: event.job, n.CHILD_ID: event.child_id})
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
        self._queued.clear()
        self._last.clear()
        self._unsubscribe()


def _trace_state(value: str | None) -> TraceState | None:
    if not value:
        return None
    try:
        return TraceState.from_header([value])
    except Exception:  # a malformed tracestate is dropped (W3C): the traceparent still holds
        return None
