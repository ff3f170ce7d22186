"""Traces of Ray children (``tracing=``): a Ray child's turns are replayed on the driver's bus, so its
spans are made in the driver and join the trace of the delegation that started it; toh_nb's own tools
the child calls (``subagent``) run in the driver, each under its own call's span."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

import toh_nb as tn
from toh_nb.core.events import EventBus, ToolCalled
from toh_nb.providers.ray.remote import Replay

from .scripts import Script, add

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402


@pytest.mark.slow
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
    under = [s for s in spans if parent(s) is mid]
    assert sorted(s.name for s in under) == ["chat", "chat", "execute_tool subagent", "execute_tool subagent"]
    for chat in (s for s in under if s.name == "chat"):  # the model the host runs, not the driver's stand-in
        assert chat.attributes["gen_ai.provider.name"] == "toh_nb.script"
        assert "gen_ai.request.model" not in chat.attributes  # (Script has no name: none, rather than None)
    for label in ("g1", "g2"):
        call = parent(turns[label])
        assert call.name == "execute_tool subagent"
        assert call.attributes["gen_ai.tool.call.id"] == label  # the call that started it, not its sibling
        assert parent(call) is mid


def test_replayed_calls_run_in_the_context_their_tool_call_event_left():
    """The mechanism under the test above, without a cluster: a host's batch brings both calls' events,
    then both calls' requests; each request runs in the context its own event left (in-process, a
    call's task starts right after its event), not in whatever the batch's last event left."""
    current = contextvars.ContextVar("current_call", default=None)
    bus = EventBus()
    bus.subscribe(lambda event: current.set(event.call_id), kinds=["tool/call"])  # as the tracer does
    seen = {}

    class Agent:
        def __init__(self):
            self.bus = bus

    class Probe(Replay):
        __slots__ = ()

        async def _serve(self, request, call_id):
            seen[call_id] = current.get()

    async def main():
        replay = Probe(Agent(), None, None, None, 1)
        replay.apply([("event", ToolCalled(agent_id="kid", turn=1, call_id=call_id, name="subagent"))
                      for call_id in ("g1", "g2")] + [("tool", 1, "g1"), ("tool", 2, "g2")])
        await asyncio.gather(*replay.asked.values())

    asyncio.run(main())
    assert seen == {"g1": "g1", "g2": "g2"}
