"""Control semantics: FIFO follow-ups, parking, authorization, notices, report, listing, bad input."""

from __future__ import annotations

import asyncio

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.content import ToolCall
from toh_nb.core.errors import SubagentError, UsageError

from ..helpers import render, until

CONTINUABLE = [{"tool_name": "subagent", "provider": "spawn", "background_mode": "continuable"}]


def user_texts(session, kinds=("coordinator", "user")):
    return [e.message.text for e in session.events
            if e.kind == "user/message" and e.message.source is not None and e.message.source.kind in kinds]


def gated_model():
    """Children block on a gate per turn; the root answers plainly."""
    gates: dict[str, asyncio.Event] = {}

    async def fn(req):
        if req.label is None:
            return "root ok"
        gate = gates.setdefault(req.agent_id, asyncio.Event())
        await gate.wait()
        gate.clear()
        return f"did {req.last_user_text}"

    return tn.FunctionModel(fn), gates


def test_followups_queue_behind_the_open_turn_in_call_order():
    async def main():
        model, gates = gated_model()
        async with tn.AsyncHub(model, ids="sequential") as hub:
            kid = await hub.start("task", label="worker")
            ids = await asyncio.gather(*(kid.send(f"m{i}") for i in range(10)))
            assert len(set(ids)) == 10
            while kid.status != "ready":
                gates.setdefault(kid.id, asyncio.Event()).set()
                await asyncio.sleep(0.001)
            session = engine_of(hub).runtime.store.open(kid.id)
            assert user_texts(session) == ["task"] + [f"m{i}" for i in range(10)]
            ends = [e.data["reason"] for e in session.events if e.kind == "turn/end"]
            assert ends == ["completed"] * 11  # each accepted message is exactly one turn

    asyncio.run(main())


def test_interrupt_parks_queued_messages_until_the_next_send():
    async def main():
        model, gates = gated_model()
        async with tn.AsyncHub(model, ids="sequential") as hub:
            kid = await hub.start("A", label="worker")
            await kid.send("B")
            await kid.send("C")
            await until(lambda: kid.id in gates, "child model call")
            await kid.interrupt()
            await asyncio.sleep(0.01)
            session = engine_of(hub).runtime.store.open(kid.id)
            assert [e.data["reason"] for e in session.events if e.kind == "turn/end"] == ["aborted"]
            assert kid.status == "idle"  # parked: resident, between turns, not settled
            await kid.send("D")
            while kid.status != "ready":
                gates[kid.id].set()
                await asyncio.sleep(0.001)
            assert user_texts(session) == ["A", "B", "C", "D"]
            assert [e.data["reason"] for e in session.events if e.kind == "turn/end"] == \
                ["aborted", "completed", "completed", "completed"]

    asyncio.run(main())


def test_interrupt_leaves_descendants_running_and_is_refused_for_strangers():
    async def main():
        hang = asyncio.Event()

        async def fn(req):
            if req.label == "parent" and req.turn == 1 and req.step == 1:
                return tn.ModelResponse(tool_calls=[ToolCall("subagent", {"description": "grand", "prompt": "g"})])
            if req.label == "grand":
                await hang.wait()
                return "grand done"
            if req.label == "sibling" and req.step == 1:
                return tn.ModelResponse(tool_calls=[
                    ToolCall("interrupt_agent", {"agent_id": "agent-1"}),
                    ToolCall("send_message", {"subagent_id": "agent-1", "message": "hi"}),
                    ToolCall("list_agents", {"scope": "galaxy"})])
            if req.label == "parent":
                await hang.wait()
            return "ok"

        async with tn.AsyncHub(tn.FunctionModel(fn), ids="sequential", delegation_tools=CONTINUABLE) as hub:
            parent = await hub.start("p", label="parent")
            await until(lambda: "agent-2" in engine_of(hub).runtime.agents, "grandchild")
            # the root (an ancestor two levels up) may interrupt the grandchild; the grandchild keeps its parent
            await hub.call_tool("interrupt_agent", agent_id=parent.id)
            await until(lambda: engine_of(hub).runtime.agents["agent-1"].status == "idle", "parent interrupted")
            assert engine_of(hub).runtime.agents["agent-2"].status == "running"  # descendants keep running
            sibling = await hub.start("s", label="sibling")
            await until(lambda: engine_of(hub).service.status_of(sibling.id) == "ready", "sibling settled")
            results = [e.message.text for e in engine_of(hub).runtime.store.open(sibling.id).events if e.kind == "tool/result"]
            assert results == [
                'Error: subagent "agent-1" is not a live descendant of agent "agent-3"',
                'Error: subagent "agent-1" belongs to another parent session',
                "Error: invalid arguments for tool \"list_agents\": scope: Input should be 'children' or 'descendants'",
            ]
            hang.set()

    asyncio.run(main())


def test_stale_caller_and_self_are_refused():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "x"), ids="sequential") as hub:
            service = engine_of(hub).service
            with pytest.raises(SubagentError, match='agent "root" cannot interrupt itself') as info:
                service.interrupt("root", engine_of(hub).root)
            assert info.value.code == "UNAUTHORIZED"
            engine_of(hub).runtime.agents.pop("root")  # the registry's entry is no longer this object: stale
            with pytest.raises(SubagentError, match='interrupting "x" requires the exact live ancestor agent'):
                service.interrupt("x", engine_of(hub).root)
            with pytest.raises(SubagentError, match='subagent "x" delivery requires the exact live parent agent'):
                await service.followup(engine_of(hub).root, "x", "hello")
            engine_of(hub).runtime.agents["root"] = engine_of(hub).root

    asyncio.run(main())


def test_send_message_refuses_one_shot_and_job_ids_and_bad_input():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "done"), ids="sequential") as hub:
            await hub.spawn("one-shot work", label="once")
            job = await hub.spawn("bg", label="bg", background=True)
            await job.output(wait=True)
            results = {
                "one-shot": await hub.call_tool("send_message", subagent_id="agent-1", message="more"),
                "job id": await hub.call_tool("send_message", subagent_id=job.id, message="more"),
                "empty id": await hub.call_tool("send_message", subagent_id="", message="more"),
                "missing": await hub.call_tool("send_message", message="more"),
                "non-string": await hub.call_tool("send_message", subagent_id="agent-1", message=5),
                "traversal": await hub.call_tool("send_message", subagent_id="../etc/passwd", message="x"),
                "scope": await hub.call_tool("list_agents", scope="everything"),
                "interrupt empty": await hub.call_tool("interrupt_agent", agent_id=" "),
            }
            assert all(r.is_error for r in results.values())
            assert results["one-shot"].text == ('Error: subagent "agent-1" has no supported continuation state and '
                                                "cannot be resumed; do not retry send_message with this id")
            assert results["job id"].text == 'Error: subagent "subagent-1" is unavailable'
            assert results["empty id"].text == "Error: subagent_id must be a non-empty id"
            assert "subagent_id: Field required" in results["missing"].text
            assert "message: Input should be a valid string" in results["non-string"].text
            assert results["traversal"].text == 'Error: subagent "../etc/passwd" is unavailable'
            assert "scope: Input should be 'children' or 'descendants'" in results["scope"].text
            assert results["interrupt empty"].text == "Error: agent_id must be a non-empty id"
            assert str(await hub.list_agents()) == "(no subagents)"  # nothing was created or queued
            assert len(engine_of(hub).runtime.agents) == 1

    asyncio.run(main())


@pytest.mark.parametrize("response, line, closing", [
    (tn.ModelResponse(text="half an ans", stop_reason="max_tokens"), "ran out of room before it finished.",
     ["Its closing message:", "half an ans"]),
    (tn.ModelResponse(text="", stop_reason="refusal"), "declined the task.", ["It left no closing message."]),
    (RuntimeError("boom"), "failed before it finished.", ["It left no closing message."]),
])
def test_settlement_notice_opening_lines(response, line, closing):
    def fn(req):
        if req.label is None:
            return "root"
        if isinstance(response, Exception):
            raise response
        return response

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(fn), ids="sequential") as hub:
            kid = await hub.start("t", label="kid")
            await kid.wait(timeout=5, check=False)
            await hub.run("next")  # the user-started child's notice waits for the root's next turn
            notices = [e.message for e in engine_of(hub).runtime.store.open("root").events
                       if e.kind == "user/message" and e.message.source.kind == "subagent-settled"]
            assert len(notices) == 1
            assert [b.text for b in notices[0].content] == [f"Background subagent {kid.id} {line}"] + closing

    asyncio.run(main())


def test_busy_parent_gets_two_notices_in_one_step_and_idle_parent_one_turn():
    async def main():
        release = asyncio.Event()
        root_requests = []

        async def fn(req):
            if req.label is None:
                root_requests.append((req.turn, req.step, [m.text[:30] for m in req.messages if m.role == "user"]))
                if req.turn == 1 and req.step == 1:
                    return tn.ModelResponse(tool_calls=[
                        ToolCall("subagent", {"description": "a", "prompt": "a"}),
                        ToolCall("subagent", {"description": "b", "prompt": "b"})])
                return "root done"
            await release.wait()
            return f"child {req.label}"

        async with tn.AsyncHub(tn.FunctionModel(fn), ids="sequential", delegation_tools=CONTINUABLE) as hub:
            await hub.run("start two")
            release.set()
            await until(lambda: engine_of(hub).root.turns == 2 and engine_of(hub).root.status == "idle", "root woke")
            await asyncio.sleep(0.01)
            assert engine_of(hub).root.turns == 2  # two notices arriving together cost one turn
            turn2 = [r for r in root_requests if r[0] == 2]
            assert len(turn2) == 1
            assert [t for t in turn2[0][2] if t.startswith("Background")] == [
                "Background subagent agent-1 fi", "Background subagent agent-2 fi"]

    asyncio.run(main())


def test_notice_is_delivered_before_ownership_is_released():
    async def main():
        seen = {}

        async def fn(req):
            if req.label == "parent" and req.turn == 1 and req.step == 1:
                return tn.ModelResponse(tool_calls=[ToolCall("subagent", {"description": "kid", "prompt": "k"})])
            return f"{req.label} turn {req.turn}"

        async with tn.AsyncHub(tn.FunctionModel(fn), ids="sequential", delegation_tools=CONTINUABLE) as hub:
            service = engine_of(hub).service
            # the continuable part of the composed service; the step between its notice and its release
            # has no public face
            original = service.continuable._release  # noqa: SLF001 - the moment ownership is released

            def release(child_id):
                owner = service.activations.get("agent-1")
                if child_id == "agent-2" and owner is not None:
                    seen["owned at release"] = child_id in owner.owned
                    seen["notice queued"] = any(m.source.kind == "subagent-settled"
                                                for m in list(owner.child.next_turn_inbox) + list(owner.child.next_step_inbox))
                    seen["parent state"] = owner.state
                original(child_id)

            service.continuable._release = release  # noqa: SLF001 - observed at that moment (above)
            parent = await hub.start("p", label="parent")
            await parent.wait(timeout=5)
            assert seen == {"owned at release": True, "notice queued": True, "parent state": "running"}
            log = render(engine_of(hub).runtime.store.open("agent-1"))
            assert log[-3:] == ['USER [subagent-settled notice from=agent-2]: 3 blocks ["Background subagent agent-2 '
                                'finished and will do no further work unless you send it more.","Its closing message:",'
                                '"kid turn 1"]', "ASSISTANT: parent turn 2", '-- turn 2 end: {"kind":"completed"}']

    asyncio.run(main())


def test_report_goes_to_the_direct_parent_and_survives_an_empty_allow_filter():
    async def main():
        async def fn(req):
            if req.label == "kid":
                if req.step == 1:
                    assert req.tool_names == ["report"]  # allow: [] hides everything but report
                    return tn.ModelResponse(tool_calls=[ToolCall("report", {"output": "found it"})])
                return "kid closing"
            return "root"

        async with tn.AsyncHub(tn.FunctionModel(fn), ids="sequential") as hub:
            kid = await hub.start("look", label="kid", tool_filter={"allow": []})
            await kid.wait(timeout=5)
            pending = [m for m in engine_of(hub).root.next_step_inbox]
            kinds = [m.source.kind for m in pending]
            assert kinds == ["subagent-report", "subagent-settled"]  # the report arrives first
            assert [b.text for b in pending[0].content] == [f"Background subagent {kid.id} reported:", "found it"]
            root_report = await hub.call_tool("report", output="x")
            assert root_report.text == 'Error: unknown tool "report"'  # roots never get the tool
            with pytest.raises(SubagentError, match='agent "root" is not a live continuable subagent and cannot report'):
                engine_of(hub).service.report_from(engine_of(hub).root, "x")

    asyncio.run(main())


def test_tool_filter_deny_and_unknown_names():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: ",".join(r.tool_names)), ids="sequential") as hub:
            res = await hub.spawn("t", label="filtered", tool_filter={"deny": ["subagent", "job_kill"]})
            assert res.text == "job_output,job_list,send_message,interrupt_agent,list_agents"
            with pytest.raises(UsageError, match='tool filter names unknown tool\\(s\\) "nope"'):
                await hub.spawn("t", tool_filter={"allow": ["nope"]})
            with pytest.raises(UsageError, match="names neither `allow` nor `deny`"):
                await hub.spawn("t", tool_filter={})
            assert len(engine_of(hub).runtime.agents) == 1

    asyncio.run(main())


def test_persona_lands_in_the_childs_system_prompt_and_is_reapplied_on_resume():
    async def main():
        systems = []

        def fn(req):
            if req.label:
                systems.append(req.system)
            return "ok"

        async with tn.AsyncHub(tn.FunctionModel(fn), ids="sequential") as hub:
            kid = await hub.start("t", label="kid", persona="You are a terse pirate.")
            await kid.wait(timeout=5)
            await kid.send("again")
            await kid.wait(timeout=5)
            assert len(systems) == 2 and all("You are a terse pirate." in s for s in systems)
            assert all("You are a delegated subagent." in s for s in systems)
            assert "report tool" in systems[0]
            record = engine_of(hub).runtime.store.open(kid.id).descriptor
            assert record == {"version": 2, "mode": "continuable", "provider": "spawn", "label": "kid",
                              "persona": "You are a terse pirate."}

    asyncio.run(main())


def test_list_agents_omits_one_shot_children_but_traverses_them():
    async def main():
        def fn(req):
            if req.label == "once" and req.turn == 1 and req.step == 1:
                return tn.ModelResponse(tool_calls=[ToolCall("subagent_c", {"description": "inner", "prompt": "i"})])
            return "done"

        tools = [{"tool_name": "subagent", "provider": "spawn"},
                 {"tool_name": "subagent_c", "provider": "spawn", "background_mode": "continuable"}]
        async with tn.AsyncHub(tn.FunctionModel(fn), ids="sequential", delegation_tools=tools) as hub:
            await hub.spawn("go", label="once")
            await until(lambda: engine_of(hub).service.activations == {}, "inner settled")
            assert str(await hub.list_agents()) == "(no subagents)"
            assert str(await hub.list_agents("descendants")) == "agent-2 [ready] parent=agent-1 depth=2 \u2014 inner"
            with pytest.raises(UsageError, match="scope must be"):
                await hub.list_agents("all")

    asyncio.run(main())


def test_wait_returns_the_last_activations_closing_text_and_resume_keeps_the_childs_model():
    async def main():
        calls = []

        def special(req):
            calls.append(req.turn)
            if req.turn == 2:
                raise RuntimeError("second turn failed")
            return "first answer"

        async with tn.AsyncHub(tn.FunctionModel(lambda r: "hub model"), ids="sequential") as hub:
            kid = await hub.start("t", label="kid", model=tn.FunctionModel(special))
            assert await kid.wait(timeout=5) == "first answer"
            await kid.send("again")  # cold resume in this process keeps the child's own model
            assert await kid.wait(timeout=5, check=False) is None  # the last activation failed and left no text
            assert calls == [1, 2]

    asyncio.run(main())
