"""parse_traceparent reads a W3C ``traceparent`` exactly as OpenTelemetry's propagator does (issue 45 item 7)."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from toh_nb.tracing.context import parse_traceparent

TRACE, SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
IDS = (0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7)

#: (header, what it reads as: (trace id, span id, flags) or None)
TABLE = [
    (f"00-{TRACE}-{SPAN}-01", (*IDS, 1)),
    (f"00-{TRACE}-{SPAN}-00", (*IDS, 0)),
    (f"00-{TRACE}-{SPAN}-ff", (*IDS, 255)),  # flags this version does not know are kept, as OTel keeps them
    (f"00-{TRACE.upper()}-{SPAN}-01", None),  # upper-case hex: W3C Trace Context forbids it
    (f"00-{TRACE}-{SPAN.upper()}-01", None),
    (f"00-{TRACE}-{SPAN}-0A", None),
    (f"00-{'0' * 32}-{SPAN}-01", None),  # an all-zero trace id
    (f"00-{TRACE}-{'0' * 16}-01", None),  # an all-zero span id
    (f"ff-{TRACE}-{SPAN}-01", None),  # the forbidden version
    (f"00-{TRACE}-{SPAN}-01-extra", None),  # version 00 has exactly four fields
    (f"01-{TRACE}-{SPAN}-01-future-fields", (*IDS, 1)),  # a later version may add fields
    (f"cc-{TRACE}-{SPAN}-01", (*IDS, 1)),
    (f" \t00-{TRACE}-{SPAN}-01\t ", (*IDS, 1)),  # spaces and tabs around it
    (f"\n00-{TRACE}-{SPAN}-01", None),  # other white space is not
    (f"00-{TRACE}-{SPAN}-01\n", (*IDS, 1)),  # a line's end, as a regular expression's ``$`` allows
    (f"00-{TRACE[:-1]}-{SPAN}-01", None),  # a short trace id
    (f"00-{TRACE}-{SPAN}-1", None),
    (f"00_{TRACE}_{SPAN}_01", None),
    (f"01-{TRACE}-{SPAN}-01-" + "x" * 600, None),  # longer than the propagator reads
    ("", None),
]


@pytest.mark.parametrize(("header", "expected"), TABLE)
def test_traceparent_table(header, expected):
    assert parse_traceparent(header) == expected


def propagator_reads(header: str):
    context = trace.get_current_span(TraceContextTextMapPropagator().extract({"traceparent": header})).get_span_context()
    return (context.trace_id, context.span_id, int(context.trace_flags)) if context.is_valid else None


@pytest.mark.parametrize(("header", "expected"), TABLE)
def test_the_table_is_what_the_opentelemetry_propagator_reads(header, expected):
    assert propagator_reads(header) == expected


@pytest.mark.parametrize("value", [None, 7, b"00-" + TRACE.encode() + b"-" + SPAN.encode() + b"-01", [f"00-{TRACE}-{SPAN}-01"]])
def test_a_traceparent_that_is_no_string_is_ignored(value):
    assert parse_traceparent(value) is None
