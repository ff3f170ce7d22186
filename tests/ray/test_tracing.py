"""Traces of Ray children (``tracing=``): a Ray child's turns are replayed on the driver's bus, so its
spans are made in the driver and join the trace of the delegation that started it; toh_nb's own tools
the child calls (``subagent``) run in the driver, each under its own call's span."""

from __future__ import annotations

import asyncio

import pytest

import toh_nb as tn

from .scripts import Script, add

pytestmark = pytest.mark.slow

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402


def test_a_ray_childs_parallel_delegations_nest_under_their_own_call_spans(ray_cluster):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def main():
        async with tn.AsyncHub(Script(), ids="sequential", providers={"ray": tn.RayProvider()}, tracing=provider,
                               tools=[add, tn.SubagentTool(name="remote", provider="ray")]) as hub:
            return (await hub.run("trace two")).text

    text = asyncio.run(main())
    assert text == "root: mid: both answered"
    spans = exporter.get_finished_spans()
    by_id = {span.context.span_id: span for span in spans}

    def parent(span):
        return by_id[span.parent.span_id] if span.parent is not None else None

    turns = {span.attributes["gen_ai.agent.name"]: span for span in spans
             if span.attributes.get("gen_ai.operation.name") == "invoke_agent"}
    assert sorted(turns) == ["g1", "g2", "mid", "root"]
    assert {span.context.trace_id for span in spans} == {turns["root"].context.trace_id}  # one trace
    mid = turns["mid"]
    assert mid.attributes["toh_nb.subagent.provider"] == "ray"
    assert parent(mid).name == "execute_tool remote"
    assert parent(parent(mid)) is turns["root"]
    # the Ray child's model calls and its two subagent calls, replayed in the driver, under its turn
    assert sorted(s.name for s in spans if parent(s) is mid) == [
        "chat scripts.Script", "chat scripts.Script", "execute_tool subagent", "execute_tool subagent"]
    for label in ("g1", "g2"):
        call = parent(turns[label])
        assert call.name == "execute_tool subagent"
        assert call.attributes["gen_ai.tool.call.id"] == label  # the call that started it, not its sibling
        assert parent(call) is mid
