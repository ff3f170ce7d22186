"""The span tree of each reference scenario shape, read from the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio

from opentelemetry.trace import SpanKind, StatusCode

import toh_nb as tn
from toh_nb.core import budget

from .conftest import call, calls, delegate, say, script, settle


def _link_kinds(span) -> list[tuple[int, str]]:
    return [(link.context.span_id, link.attributes.get("toh_nb.link")) for link in span.links]


def _events(span, name: str) -> list[dict]:
    return [dict(event.attributes) for event in span.events if event.name == name]


async def test_foreground_parallel_children_sit_under_their_own_tool_spans(traced):
    async def slow_a(request):
        await asyncio.sleep(0.05)  # b finishes first: the tree must not follow completion order
        return say("a done")

    model = script({"root": [calls(("subagent", "c1", {"description": "a", "prompt": "pa"}),
                                   ("subagent", "c2", {"description": "b", "prompt": "pb"})),
                             say("all done", 11, 4)],
                    "a": [slow_a], "b": [say("b done")]})
    async with tn.AsyncHub(model, ids="sequential", tracing=traced.provider) as hub:
        result = await hub.run("go")
    assert result.text == "all done"
    root = traced.turn("root")
    assert root.parent is None
    assert root.name == "invoke_agent root"
    assert root.kind is SpanKind.INTERNAL
    assert traced.names(root) == ["chat scripted", "execute_tool subagent", "execute_tool subagent", "chat scripted"]
    assert {s.context.trace_id for s in traced.spans} == {root.context.trace_id}  # one trace
    for call_id, label, agent in (("c1", "a", "agent-1"), ("c2", "b", "agent-2")):
        tool = traced.tool(call_id)
        assert tool.parent.span_id == root.context.span_id
        assert tool.name == "execute_tool subagent"
        child = traced.one("invoke_agent", name=label)
        assert child.parent.span_id == tool.context.span_id
        assert child.attributes["gen_ai.agent.id"] == agent
        assert child.attributes["toh_nb.agent.mode"] == "one-shot"
        assert child.attributes["toh_nb.agent.depth"] == 1
        assert child.attributes["toh_nb.agent.parent_id"] == "root"
        assert child.attributes["toh_nb.stop_reason"] == "completed"
        assert child.attributes["gen_ai.usage.input_tokens"] == 7
        assert child.attributes["gen_ai.usage.output_tokens"] == 3
        assert traced.names(child) == ["chat scripted"]
        assert "toh_nb.agent.background" not in child.attributes
        # nested under its call: no started/ended events to say what the tree shows
        assert not _events(tool, "toh_nb.subagent.started")
    assert not [e for e in traced.turn("root").events if e.name == "toh_nb.subagent.ended"]
    assert root.attributes["gen_ai.usage.input_tokens"] == 21
    assert root.attributes["gen_ai.usage.output_tokens"] == 6
    assert root.attributes["toh_nb.agent.mode"] == "root"
    chat = traced.children(root)[-1]
    assert chat.kind is SpanKind.CLIENT
    assert chat.attributes["gen_ai.request.model"] == "scripted"
    assert chat.attributes["gen_ai.provider.name"] == "toh_nb.function"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert chat.attributes["gen_ai.usage.input_tokens"] == 11


async def test_depth_three_is_one_nested_trace(traced):
    model = script({"root": [delegate("c1", "l1"), say("r")], "l1": [delegate("c2", "l2"), say("1")],
                    "l2": [delegate("c3", "l3"), say("2")], "l3": [say("3")]})
    async with tn.AsyncHub(model, ids="sequential", tracing=traced.provider, max_depth=3) as hub:
        await hub.run("go")
    chain = [traced.turn("root"), traced.tool("c1"), traced.one("invoke_agent", name="l1"), traced.tool("c2"),
             traced.one("invoke_agent", name="l2"), traced.tool("c3"), traced.one("invoke_agent", name="l3")]
    for parent, child in zip(chain, chain[1:]):
        assert child.parent.span_id == parent.context.span_id
        assert child.context.trace_id == chain[0].context.trace_id
    assert [s.attributes["toh_nb.agent.depth"] for s in chain[::2]] == [0, 1, 2, 3]


async def test_background_job_child_starts_a_linked_trace(traced):
    gate = asyncio.Event()

    async def late(request):
        await gate.wait()
        return say("found it")

    model = script({("root", 1): [delegate("c1", "bg", run_in_background=True), say("started")],
                    ("root", 2): [say("collected")], "bg": [late]})
    async with tn.AsyncHub(model, ids="sequential", tracing=traced.provider) as hub:
        await hub.run("go")
        gate.set()
        await settle(lambda: len(traced.find("invoke_agent", agent="root")) == 2)
    root = traced.turn("root")
    tool = traced.tool("c1")
    child = traced.one("invoke_agent", name="bg")
    assert child.parent is None  # a trace of its own
    assert child.context.trace_id != root.context.trace_id
    assert _link_kinds(child) == [(tool.context.span_id, "started_by")]
    assert child.links[0].context.trace_id == root.context.trace_id
    assert child.attributes["toh_nb.agent.background"] is True
    assert _events(tool, "toh_nb.job.started") == [{"toh_nb.job.id": "subagent-1", "toh_nb.agent.label": "bg"}]
    assert _events(tool, "toh_nb.subagent.started") == [
        {"toh_nb.child_id": "agent-1", "toh_nb.agent.mode": "one-shot", "toh_nb.subagent.provider": "spawn",
         "toh_nb.agent.label": "bg"}]
    notified = traced.turn("root", 2)  # the job's notice woke the root
    assert notified.context.trace_id not in (root.context.trace_id, child.context.trace_id)
    assert [e["toh_nb.message.source"] for e in _events(notified, "toh_nb.message")] == ["plugin"]
    # ... and links to the job's child: a viewer walks from the notified turn to the work it reports
    assert _link_kinds(notified) == [(child.context.span_id, "woken_by")]
    assert notified.links[0].context.trace_id == child.context.trace_id
    assert notified.links[0].attributes["toh_nb.job.id"] == "subagent-1"
    assert notified.links[0].attributes["toh_nb.child_id"] == "agent-1"


async def test_follow_ups_queued_for_an_idle_child_each_appear_on_the_turn_that_read_them(traced):
    gate = asyncio.Event()

    async def held(request):
        if request.turn == 1:
            await gate.wait()
        return say(f"turn {request.turn}")

    model = script({"root": [say("unused")], "ed": [held]})
    async with tn.AsyncHub(model, ids="sequential", tracing=traced.provider) as hub:
        kid = await hub.start("first", label="ed")
        await hub.send(kid.id, "second")  # queued while its first turn runs
        await hub.send(kid.id, "third")
        gate.set()
        await kid.wait(timeout=10)
        await settle(lambda: len(traced.find("invoke_agent", agent=kid.id)) == 3)
    turns = traced.find("invoke_agent", agent=kid.id)
    ids = [[e["toh_nb.message.id"] for e in _events(span, "toh_nb.message")] for span in turns]
    assert [len(found) for found in ids] == [1, 1, 1]  # one message a turn, in the order sent
    assert len({found[0] for found in ids}) == 3
    assert [e["toh_nb.message.source"] for span in turns for e in _events(span, "toh_nb.message")] == ["user"] * 3
    assert all(event.timestamp >= span.start_time for span in turns for event in span.events)


async def test_a_settled_childs_notice_links_the_turn_it_wakes_to_the_childs_last_turn(traced):
    model = script({("root", 1): [delegate("c1", "ed"), say("started it")], ("root", 2): [say("noted")],
                    "ed": [say("edited")]})
    async with tn.AsyncHub(model, ids="sequential", tracing=traced.provider, background_mode="continuable") as hub:
        await hub.run("go")
        await settle(lambda: len(traced.find("invoke_agent", agent="root")) == 2)
    child = traced.turn("agent-1")
    woken = traced.turn("root", 2)
    assert [e["toh_nb.message.source"] for e in _events(woken, "toh_nb.message")] == ["subagent-settled"]
    assert _events(woken, "toh_nb.message")[0]["toh_nb.sender_id"] == "agent-1"
    assert _link_kinds(woken) == [(child.context.span_id, "woken_by")]


async def test_continuable_child_turns_are_traces_linked_to_what_started_and_woke_them(traced):
    sent = []

    async def root(request):
        texts = [message.text for message in request.messages]
        if request.step > 1:
            return say("ok")
        if request.turn == 1:
            return delegate("c1", "ed")
        if "tell it" in texts and not sent:  # (a notice may arrive in the same turn)
            sent.append(True)
            return call("send_message", "c2", subagent_id="agent-1", message="shorter")
        return say("noted")  # a child's settled notice

    model = script({"root": [root, root], "ed": [say("edited")]})
    async with tn.AsyncHub(model, ids="sequential", tracing=traced.provider, background_mode="continuable") as hub:
        await hub.run("go")
        await hub.view.settled("agent-1", 10)
        await hub.send("agent-1", "again")  # the user: a follow-up with no span behind it
        await hub.view.settled("agent-1", 10)
        await hub.run("tell it")  # the root's send_message: a new activation started by a tool call
        await hub.view.settled("agent-1", 10)
        await settle(lambda: len(traced.find("invoke_agent", agent="agent-1")) == 3)
    first, second, third = traced.find("invoke_agent", agent="agent-1")
    root_traces = {span.context.trace_id for span in traced.find("invoke_agent", agent="root")}
    child_traces = {first.context.trace_id, second.context.trace_id, third.context.trace_id}
    assert len(child_traces) == 3 and not child_traces & root_traces
    assert all(span.parent is None for span in (first, second, third))
    assert {span.attributes["gen_ai.conversation.id"] for span in (first, second, third)} == {"agent-1"}
    assert [span.attributes["toh_nb.turn"] for span in (first, second, third)] == [1, 2, 3]
    assert _link_kinds(first) == [(traced.tool("c1").context.span_id, "started_by")]
    assert _link_kinds(second) == []
    send = traced.tool("c2")
    assert _link_kinds(third) == [(send.context.span_id, "started_by")]
    assert third.links[0].context.trace_id == send.context.trace_id
    assert _events(send, "toh_nb.message.sent") == [
        {"toh_nb.target_id": "agent-1", "toh_nb.message.source": "coordinator", "toh_nb.message.id": "msg-7"}]
    assert [e["toh_nb.message.source"] for e in _events(third, "toh_nb.message")] == ["coordinator"]
    assert [e["toh_nb.message.source"] for e in _events(second, "toh_nb.message")] == ["user"]
    assert first.attributes["toh_nb.agent.mode"] == "continuable"
    assert first.attributes["toh_nb.agent.background"] is True
    assert [e["toh_nb.child_id"] for e in _events(send, "toh_nb.subagent.started")] == ["agent-1"]
    # the user's hub.send started an activation too: no tool span, and no event on a root turn
    assert all(not _events(span, "toh_nb.subagent.started") for span in traced.find("invoke_agent", agent="root"))


async def test_interrupt_is_an_event_on_both_sides_and_the_turn_ends_aborted(traced):
    running = asyncio.Event()

    async def stuck(request):
        running.set()
        await asyncio.sleep(60)
        return say("never")

    async def interrupt_when_running(request):
        await running.wait()
        return call("interrupt_agent", "c2", agent_id="agent-1")

    model = script({"root": [delegate("c1", "slow"), interrupt_when_running, say("stopped")], "slow": [stuck]})
    async with tn.AsyncHub(model, ids="sequential", tracing=traced.provider, background_mode="continuable") as hub:
        await hub.run("go")
        await hub.view.settled("agent-1", 10)
    child = traced.turn("agent-1")
    assert child.attributes["toh_nb.stop_reason"] == "aborted"
    assert child.status.status_code is StatusCode.UNSET
    assert _events(child, "toh_nb.interrupt") == [{"toh_nb.sender_id": "root"}]
    assert _events(traced.tool("c2"), "toh_nb.interrupt.sent") == [{"toh_nb.target_id": "agent-1"}]
    chat = traced.children(child)[0]
    assert chat.name == "chat scripted"
    assert chat.attributes["toh_nb.stop_reason"] == "aborted"


async def test_a_failed_child_is_an_error_span_with_its_diagnostic(traced):
    model = script({"root": [delegate("c1", "bad"), say("coped")], "bad": [RuntimeError("disk on fire")]})
    async with tn.AsyncHub(model, ids="sequential", tracing=traced.provider) as hub:
        await hub.run("go")
    child = traced.one("invoke_agent", name="bad")
    assert child.status.status_code is StatusCode.ERROR
    assert child.status.description == "disk on fire"
    assert child.attributes["error.type"] == "error"
    assert child.attributes["toh_nb.stop_reason"] == "error"
    chat = traced.children(child)[0]
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.status.description == "disk on fire"
    tool = traced.tool("c1")
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes["error.type"] == "tool_error"
    assert "disk on fire" in tool.status.description
    assert traced.turn("root").status.status_code is StatusCode.UNSET


async def test_budgets_are_attributes_and_a_budget_stop_is_an_error_status(traced):
    model = script({"root": [say("unused")], "loop": [call("list_agents", "c1")]})
    async with tn.AsyncHub(model, ids="sequential", tracing=traced.provider) as hub:
        result = await hub.spawn("spin", label="loop", max_steps=1, token_budget=500)
    assert result.stop_reason == "max-steps"
    child = traced.one("invoke_agent", name="loop")
    assert child.attributes["toh_nb.budget.max_steps"] == 1
    assert child.attributes["toh_nb.budget.token_budget"] == 500
    assert child.attributes["toh_nb.stop_reason"] == "max-steps"
    assert child.attributes["error.type"] == "max-steps"
    assert child.status.status_code is StatusCode.ERROR
    assert child.status.description == budget.step_limit_text(1)
    assert child.attributes["toh_nb.usage.subtree_tokens"] == 12
    assert traced.names(child) == ["chat scripted", "execute_tool list_agents"]
    assert child.parent is None  # started by the user: no tool span above it


async def test_prices_put_costs_on_chat_and_turn_spans(traced):
    model = script({"root": [say("hi", 1000, 500)]}, name="priced")
    async with tn.AsyncHub(model, ids="sequential", tracing=traced.provider, prices={"priced": (1.0, 2.0)}) as hub:
        await hub.run("go")
    root = traced.turn("root")
    assert root.attributes["toh_nb.usage.cost"] == 0.002
    assert traced.children(root)[0].attributes["toh_nb.usage.cost"] == 0.002


async def test_no_cost_attribute_without_prices(traced):
    async with tn.AsyncHub(script({"root": [say("hi")]}), tracing=traced.provider) as hub:
        await hub.run("go")
    assert all("toh_nb.usage.cost" not in span.attributes for span in traced.spans)


async def test_a_root_turn_inside_the_callers_span_continues_its_trace(traced):
    tracer = traced.provider.get_tracer("user")
    async with tn.AsyncHub(script({"root": [say("hi")]}), tracing=traced.provider) as hub:
        with tracer.start_as_current_span("experiment") as outer:
            await hub.run("go")
    root = traced.one("invoke_agent")
    assert root.parent.span_id == outer.get_span_context().span_id


async def test_the_sync_hub_takes_tracing_too(traced):
    def run() -> None:
        with tn.Hub(script({"root": [delegate("c1", "kid"), say("ok")], "kid": [say("k")]}), ids="sequential",
                    tracing=traced.provider) as hub:
            hub.run("go")

    await asyncio.get_running_loop().run_in_executor(None, run)
    assert traced.one("invoke_agent", name="kid").parent.span_id == traced.tool("c1").context.span_id


async def test_spans_left_open_by_a_close_end_with_the_hub(traced):
    started = asyncio.Event()

    async def stuck(request):
        started.set()
        await asyncio.sleep(60)

    hub = tn.AsyncHub(script({"root": [say("x")], "slow": [stuck]}), ids="sequential", tracing=traced.provider)
    await hub.start("wait", label="slow")
    await started.wait()
    await hub.close()
    child = traced.turn("agent-1")
    assert child.attributes["toh_nb.stop_reason"] == "aborted"
    assert child.end_time is not None


async def test_a_model_without_a_name_leaves_the_model_attribute_out(traced):
    class Nameless:
        async def request(self, request):
            return say("hi")

    async with tn.AsyncHub(Nameless(), tracing=traced.provider) as hub:
        await hub.run("go")
    for span in traced.spans:
        assert "gen_ai.request.model" not in span.attributes  # absent, never None
        assert span.attributes["gen_ai.provider.name"] == "toh_nb.nameless"
    assert sorted(span.name for span in traced.spans) == ["chat", "invoke_agent root"]
