"""The ``tracing=`` argument of ``tn.Hub``/``tn.AsyncHub``, checked without importing OpenTelemetry."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..core.errors import UsageError

#: the GenAI conventions' switch for recording message content on spans
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: values of :data:`CAPTURE_ENV` that turn content capture on (case-insensitive; the older ``true`` and
#: the newer span modes)
CAPTURE_ON = frozenset({"true", "1", "yes", "span_only", "span_and_event"})
EXTRA_HINT = 'tracing needs OpenTelemetry: pip install "toh-nb[otel]" (opentelemetry-api and opentelemetry-sdk)'


@dataclass(frozen=True, slots=True)
class Tracing:
    """Tracing settings: ``tn.Hub(tracing=tn.Tracing(provider, capture_content=True))``.

    Args:
        provider: the OpenTelemetry ``TracerProvider`` to use; None: the global one
            (``opentelemetry.trace.get_tracer_provider()``, as ``tracing=True``).
        capture_content: record prompts, answers, tool arguments and results on the spans (masked of the
            secrets the hub holds). None: as ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says
            (off unless it is ``true``).

    Raises:
        UsageError: ``provider`` is not a ``TracerProvider`` (has no ``get_tracer``), or ``capture_content``
            is not a bool or None.
    """

    provider: Any = None
    capture_content: bool | None = None

    def __post_init__(self) -> None:
        if self.provider is not None and not _is_provider(self.provider):
            raise UsageError("Tracing(provider=...) must be an OpenTelemetry TracerProvider (with get_tracer), "
                             f"got {type(self.provider).__name__}")
        if self.capture_content is not None and not isinstance(self.capture_content, bool):
            raise UsageError(f"capture_content must be True, False or None, got {self.capture_content!r}")

    def content(self) -> bool:
        """Whether message content is recorded (the option, else the environment switch)."""
        if self.capture_content is not None:
            return self.capture_content
        return os.environ.get(CAPTURE_ENV, "").strip().lower() in CAPTURE_ON


def _is_provider(value: Any) -> bool:
    return callable(getattr(value, "get_tracer", None))


def check_tracing(value: Any) -> Tracing | None:
    """``None``/``False`` → None (off); ``True`` → the global provider; a TracerProvider; a :class:`Tracing`."""
    if value is None or value is False:
        return None
    if value is True:
        return Tracing()
    if isinstance(value, Tracing):
        return value
    if _is_provider(value):
        return Tracing(provider=value)
    raise UsageError("tracing must be True, False, an OpenTelemetry TracerProvider or tn.Tracing(...), "
                     f"got {type(value).__name__}")
