"""ACP: the model call's context travels as ``_meta.traceparent``; ``python -m toh_nb acp`` continues it."""

from __future__ import annotations

import os
import pathlib
import sys

import pytest

import toh_nb as tn
from toh_nb.tracing import context as carried

from .conftest import settle
from .otlp_receiver import Receiver

pytest.importorskip("acp")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

ROOT = pathlib.Path(__file__).resolve().parents[2]  # this checkout's toh_nb, in the served process too


@pytest.mark.slow
async def test_traceparent_round_trip_through_python_m_toh_nb_acp(traced, tmp_path):
    with Receiver() as receiver:
        env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.url,
               "OTEL_SERVICE_NAME": "served", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        agent = tn.AcpAgent([sys.executable, "-m", "toh_nb", "acp", "--latency", "0"], env=env, cwd=str(tmp_path),
                            eof_grace=20.0)
        async with tn.AsyncHub(tn.DemoModel(latency=0), ids="sequential", tracing=traced.provider,
                               providers={"served": agent}) as hub:
            result = await hub.spawn("Plan a garden", label="remote", provider="served")
            assert result.stop_reason == "completed"
        await settle(lambda: any(span.name.startswith("invoke_agent") for _, span in receiver.spans), timeout=30)
    child = traced.one("invoke_agent", name="remote")
    chat = traced.children(child)[0]
    assert chat.name == f"chat acp:{os.path.basename(sys.executable)}"
    assert chat.attributes["gen_ai.provider.name"] == "toh_nb.acp"
    served_root = [span for resource, span in receiver.spans
                   if span.name == "invoke_agent root" and resource.get("service.name") == "served"]
    assert len(served_root) == 1
    (span,) = served_root
    assert int.from_bytes(span.trace_id, "big") == chat.context.trace_id
    assert int.from_bytes(span.parent_span_id, "big") == chat.context.span_id
    # the served hub's own tree hangs below: its root delegates (DemoModel), its children in the same trace
    served_traces = {int.from_bytes(s.trace_id, "big") for _, s in receiver.spans}
    assert chat.context.trace_id in served_traces


def test_traceparent_format_and_parse():
    value = carried.format_traceparent(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, 1)
    assert value == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert carried.parse_traceparent(value) == (0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, 1)
    for bad in (None, 7, "", "00-" + "0" * 32 + "-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16
                + "-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-xyz", value + "-extra"):
        assert carried.parse_traceparent(bad) is None
    assert carried.outbound_meta() == {}


def test_received_meta_sets_the_inbound_parent_in_this_context_only():
    import contextvars

    def inside() -> tuple:
        carried.receive({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "a=1"})
        return carried.inbound()

    assert contextvars.copy_context().run(inside) == (0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, 1, "a=1")
    assert carried.inbound() is None
    assert contextvars.copy_context().run(lambda: (carried.receive({"traceparent": "junk"}), carried.inbound())[1]) is None
