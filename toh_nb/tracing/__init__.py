"""Traces: the agent tree as an OpenTelemetry trace (optional extra ``otel``).

``tn.Hub(tracing=True)`` (the global ``TracerProvider``) or ``tracing=<TracerProvider>`` or
``tracing=tn.Tracing(provider, capture_content=True)`` turns every agent turn into an
``invoke_agent`` span, every model call into a ``chat`` span and every tool call into an
``execute_tool`` span, named and attributed as the OpenTelemetry GenAI semantic conventions say
(``toh_nb.tracing.names``). The spans are made from the hub's event stream (``toh_nb.core.events``)
by one listener (``toh_nb.tracing.tracer``), so every provider whose events reach the hub's bus
(in-process, Ray's replayed events, ACP) is traced the same way. Off by default: then nothing of
OpenTelemetry is imported. The span shape is described in ``docs/guides/traces.md``.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import UsageError
from .options import CAPTURE_ENV, EXTRA_HINT, Tracing, check_tracing

__all__ = ["CAPTURE_ENV", "Tracing", "attach", "check_tracing"]


def attach(runtime: Any, options: Tracing, costs: Any = None) -> Any:
    """Subscribe a tracer to ``runtime``'s bus (the hub calls it with its ``tracing=`` settings);
    OpenTelemetry is imported here, and only here. A UsageError names the extra when it is missing."""
    try:
        from .tracer import HubTracer
    except ImportError as error:
        raise UsageError(f"{EXTRA_HINT} ({error})") from None
    return HubTracer(runtime, options, costs)
