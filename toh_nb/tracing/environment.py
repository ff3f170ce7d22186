"""A TracerProvider configured by the standard OpenTelemetry environment, for ``python -m toh_nb acp``.

Why: a served hub runs in a process a client started, with no user code to hand it a provider. The
client (or whoever launches the server) says where spans go with the SDK's own variables:

- ``OTEL_TRACES_EXPORTER=otlp``: OTLP over HTTP/protobuf (``opentelemetry-exporter-otlp-proto-http``),
  to ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` (+ ``/v1/traces``);
- ``OTEL_TRACES_EXPORTER=console``: spans printed as JSON to stderr (stdout carries the protocol);
- unset or ``none``: no tracing (the default), and OpenTelemetry is not imported.

``OTEL_SERVICE_NAME`` names the service (default ``toh_nb-acp``). A ``traceparent`` a client sends in a
``session/prompt``'s ``_meta`` makes that prompt's root turn a child of the client's span.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

EXPORTER_ENV = "OTEL_TRACES_EXPORTER"
SERVICE_ENV = "OTEL_SERVICE_NAME"
DEFAULT_SERVICE = "toh_nb-acp"

log = logging.getLogger("toh_nb")


def provider_from_environment() -> Any:
    """An SDK ``TracerProvider`` exporting as :data:`EXPORTER_ENV` says, or None (tracing off, or the
    packages it needs are missing: a warning on stderr says which)."""
    choice = os.environ.get(EXPORTER_ENV, "").strip().lower()
    if choice in ("", "none"):
        return None
    if choice not in ("otlp", "console"):
        log.warning("%s=%s is not supported here (otlp or console): tracing stays off", EXPORTER_ENV, choice)
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        if choice == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter: Any = OTLPSpanExporter()
        else:
            exporter = ConsoleSpanExporter(out=sys.stderr)
    except ImportError as error:
        log.warning("%s=%s needs OpenTelemetry (pip install \"toh-nb[otel]\" and, for otlp, "
                    "opentelemetry-exporter-otlp-proto-http): %s; tracing stays off", EXPORTER_ENV, choice, error)
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get(SERVICE_ENV) or DEFAULT_SERVICE}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
