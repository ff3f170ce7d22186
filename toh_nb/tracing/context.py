"""Trace context handed across a process boundary (ACP), without importing OpenTelemetry.

Why a module of its own: ``toh_nb.acp`` sends the current model call's context to an external agent
as W3C ``traceparent`` in a ``session/prompt``'s ``_meta``, and ``python -m toh_nb acp`` continues a
trace it receives. Both must work (and cost nothing) when tracing is off, so they only read and set
the two context variables here; the tracer (``toh_nb.tracing.tracer``) fills :func:`outbound_meta`'s
variable while a traced model call runs and reads :func:`inbound` when a root turn starts.
Context variables follow asyncio tasks: a value set in a request's task reaches the tasks it starts.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from typing import Any, Mapping

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"

#: (trace id, span id, flags) of the traced model call running in this context, or None
_outbound: ContextVar[tuple[int, int, int] | None] = ContextVar("toh_nb_trace_outbound", default=None)
#: (trace id, span id, flags, tracestate) received from a client, or None
_inbound: ContextVar[tuple[int, int, int, str | None] | None] = ContextVar("toh_nb_trace_inbound", default=None)

#: OpenTelemetry's own reading (``TraceContextTextMapPropagator``, opentelemetry-api 1.45): lower-case hex
#: only, as W3C Trace Context requires; spaces and tabs around it; a suffix only after a future version
_PARENT = re.compile(r"^[ \t]*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:(-.*)|[ \t]*)$")
#: the propagator ignores a longer header
MAX_TRACEPARENT = 512


def format_traceparent(trace_id: int, span_id: int, flags: int) -> str:
    """W3C Trace Context ``traceparent`` (version 00)."""
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def parse_traceparent(value: Any) -> tuple[int, int, int] | None:
    """``(trace id, span id, flags)`` of a valid ``traceparent``, else None (an invalid one is ignored,
    as the W3C spec asks: the receiver starts a new trace).

    Read exactly as OpenTelemetry's ``TraceContextTextMapPropagator`` reads it (a table test holds the
    two together), so a context toh_nb continues is one the traced agent on the other side would too;
    upper-case hex, which it once accepted, is refused (W3C Trace Context forbids it)."""
    if not isinstance(value, str) or len(value) > MAX_TRACEPARENT:
        return None
    match = _PARENT.search(value)
    if match is None or match.group(1) == "ff" or (match.group(1) == "00" and match.group(5)):
        return None
    trace_id, span_id = int(match.group(2), 16), int(match.group(3), 16)
    if not trace_id or not span_id:
        return None
    return trace_id, span_id, int(match.group(4), 16)


def set_outbound(ids: tuple[int, int, int] | None) -> None:
    """The tracer: the model call running in this context is ``ids`` (None: no traced call)."""
    _outbound.set(ids)


def outbound_meta() -> dict[str, str]:
    """``{"traceparent": ...}`` for a request this context sends (empty when no traced call runs)."""
    ids = _outbound.get()
    return {} if ids is None else {TRACEPARENT: format_traceparent(*ids)}


def receive(meta: Mapping[str, Any] | None) -> None:
    """A server: the request being served came with ``meta`` (its ``_meta``); a valid ``traceparent``
    there becomes the parent of the root turns this context starts (None or no valid one: none)."""
    ids = parse_traceparent(meta.get(TRACEPARENT)) if isinstance(meta, Mapping) else None
    state = meta.get(TRACESTATE) if ids is not None else None
    _inbound.set(None if ids is None else (*ids, state if isinstance(state, str) else None))


def inbound() -> tuple[int, int, int, str | None] | None:
    """What :func:`receive` kept in this context."""
    return _inbound.get()
