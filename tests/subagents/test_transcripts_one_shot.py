"""The one-shot scenarios of the reference transcripts, reproduced with scripted models.

Each test asserts the exact texts the parent model receives, in order (``seen_by_model``), and the
child's own log. Ordering the reference got from timing is forced here with events, so the tests are
deterministic.
"""

from __future__ import annotations

import asyncio

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.content import ToolCall

from ..helpers import render, seen_by_model, until


def hub_for(fn, **kwargs):
    return tn.AsyncHub(tn.FunctionModel(fn), ids="sequential", **kwargs)


async def settle(hub, turns):
    root = engine_of(hub).root
    await until(lambda: root.turns >= turns and root.status == "idle", f"root to reach turn {turns}", timeout=1.0)


def test_foreground():
    def model(req):
        if req.label == "answer a question":
            return "42"
        return [ToolCall("subagent", {"description": "answer a question",
                                      "prompt": "CHILD: What is 6*7? Reply with the number only."}, id="call_1"),
                ToolCall("list_agents", {}, id="call_2"), ToolCall("job_list", {}, id="call_3"),
                f"Parent final answer. The subagent said: {req.messages[2].text}" if len(req.messages) > 2 else ""][req.step - 1]

    async def main():
        async with hub_for(lambda r: tn.ModelResponse(tool_calls=[m]) if isinstance(m := model(r), ToolCall) else m) as hub:
            result = await hub.run("SCN:foreground")
            assert result.text == "Parent final answer. The subagent said: 42"
            assert seen_by_model(engine_of(hub).runtime.store.open("root")) == [
                "USER [user]: SCN:foreground",
                "TOOL-RESULT call_1: 42",
                "TOOL-RESULT call_2: (no subagents)",
                "TOOL-RESULT call_3: (no background jobs)",
            ]
            child = engine_of(hub).runtime.store.open("agent-1")
            # the descriptor is written with the header (atomically), so it precedes the first turn
            # (the reference appends it inside turn 1; a child killed there would look corrupt)
            assert render(child) == [
                'DESCRIPTOR {"version":2,"mode":"one-shot","provider":"spawn","label":"answer a question"}',
                "-- turn 1 start",
                "USER [user]: CHILD: What is 6*7? Reply with the number only.",
                "ASSISTANT: 42",
                '-- turn 1 end: {"kind":"completed"}',
            ]
            header = child.header
            assert (header.parent_session, header.origin, header.delegation_depth) == ("root", "subagent", 1)
            lifecycle = [(e.kind, e.agent_id, getattr(e, "stop_reason", None), getattr(e, "last_assistant_message", None))
                         for e in engine_of(hub).runtime.bus.history]
            assert lifecycle == [("subagent/start", "agent-1", None, None),
                                 ("subagent/end", "agent-1", "completed", "42")]
            assert "agent-1" not in engine_of(hub).runtime.agents  # disposed after the foreground run

    asyncio.run(main())


def steps(*items):
    """A FunctionModel body from per-step items (ToolCall, str or callable)."""

    def pick(req):
        item = items[req.step - 1]
        item = item(req) if callable(item) else item
        if isinstance(item, list):
            return tn.ModelResponse(tool_calls=item)
        return tn.ModelResponse(tool_calls=[item]) if isinstance(item, ToolCall) else item

    return pick


def test_background_one_shot_wait():
    release = asyncio.Event()

    async def child(req):
        await release.wait()
        return "the sum is 4"

    def wait_call(req):
        release.set()
        return ToolCall("job_output", {"job_id": "subagent-1", "wait": True}, id="call_6")

    root = steps(ToolCall("subagent", {"description": "background sum", "prompt": "CHILD: add 2+2",
                                       "run_in_background": True}, id="call_4"),
                 ToolCall("job_list", {}, id="call_5"), wait_call,
                 ToolCall("job_output", {"job_id": "subagent-1"}, id="call_7"),
                 "Parent done after collecting the job.")

    async def model(req):
        return await child(req) if req.label else root(req)

    async def main():
        async with hub_for(model) as hub:
            await hub.run("SCN:background_one_shot_wait")
            assert seen_by_model(engine_of(hub).runtime.store.open("root")) == [
                "USER [user]: SCN:background_one_shot_wait",
                "TOOL-RESULT call_4: started background subagent job subagent-1",
                "TOOL-RESULT call_5: subagent-1 [subagent] running \u2014 background sum",
                "TOOL-RESULT call_6: the sum is 4\n[status: completed]",
                "USER [plugin notice tool-jobs]: background job subagent-1 (subagent: background sum) finished "
                "[status: completed]. Read its output with job_output.",
                "TOOL-RESULT call_7: the sum is 4\n[status: completed]",
            ]
            assert engine_of(hub).root.turns == 1

    asyncio.run(main())


def test_background_one_shot_notice_wakes_the_idle_parent():
    release = asyncio.Event()

    async def child(req):
        await release.wait()
        return "report: all good"

    def final(req):
        release.set()
        return "I will wait for the notice."

    root_turn1 = steps(ToolCall("subagent", {"description": "background slow task", "prompt": "CHILD:slow produce a report",
                                             "run_in_background": True}, id="call_8"), final)
    root_turn2 = steps(ToolCall("job_output", {"job_id": "subagent-1"}, id="call_9"), "Parent done: collected output.")

    async def model(req):
        if req.label:
            return await child(req)
        return root_turn1(req) if req.turn == 1 else root_turn2(req)

    async def main():
        async with hub_for(model) as hub:
            await hub.run("SCN:background_one_shot_notice")
            await settle(hub, 2)
            assert render(engine_of(hub).runtime.store.open("root")) == [
                "-- turn 1 start",
                "USER [user]: SCN:background_one_shot_notice",
                'ASSISTANT: <tool-call call_8 subagent {"description":"background slow task",'
                '"prompt":"CHILD:slow produce a report","run_in_background":true}>',
                "TOOL-CALL call_8 subagent",
                "TOOL-RESULT call_8: started background subagent job subagent-1",
                "ASSISTANT: I will wait for the notice.",
                '-- turn 1 end: {"kind":"completed"}',
                "-- turn 2 start",
                "USER [plugin notice tool-jobs]: background job subagent-1 (subagent: background slow task) finished "
                "[status: completed]. Read its output with job_output.",
                'ASSISTANT: <tool-call call_9 job_output {"job_id":"subagent-1"}>',
                "TOOL-CALL call_9 job_output",
                "TOOL-RESULT call_9: report: all good\n[status: completed]",
                "ASSISTANT: Parent done: collected output.",
                '-- turn 2 end: {"kind":"completed"}',
            ]

    asyncio.run(main())


def test_killed_background_child(no_leftover_tasks):
    async def child(req):
        await asyncio.sleep(3600)

    root = steps(ToolCall("subagent", {"description": "hanging background", "prompt": "CHILD:hang",
                                       "run_in_background": True}, id="call_49"),
                 ToolCall("job_output", {"job_id": "subagent-1"}, id="call_50"),
                 ToolCall("job_kill", {"job_id": "subagent-1", "reason": "no longer needed"}, id="call_51"),
                 ToolCall("job_output", {"job_id": "subagent-1", "wait": True, "timeout_ms": 2000}, id="call_52"),
                 ToolCall("job_kill", {"job_id": "subagent-1"}, id="call_53"),
                 "parent: killed the job")

    async def model(req):
        if req.label:
            return await child(req)
        await asyncio.sleep(0.001)  # a real model does I/O; this lets the child reach its model call
        return root(req)

    async def main():
        async with hub_for(model) as hub:
            await hub.run("SCN:killed_background_child")
            assert seen_by_model(engine_of(hub).runtime.store.open("root")) == [
                "USER [user]: SCN:killed_background_child",
                "TOOL-RESULT call_49: started background subagent job subagent-1",
                "TOOL-RESULT call_50: (no new output)\n[status: running]",
                "TOOL-RESULT call_51: requested cancellation of job subagent-1",
                "TOOL-RESULT call_52: (no new output)\n[status: killed]",
                "TOOL-RESULT call_53: job subagent-1 had already finished [status: killed]",
            ]  # no completion notice after a kill
            assert render(engine_of(hub).runtime.store.open("agent-1"))[-1] == '-- turn 1 end: {"kind":"aborted"}'
            ends = [e.stop_reason for e in engine_of(hub).runtime.bus.history if e.kind == "subagent/end"]
            assert ends == ["aborted"]
        no_leftover_tasks()

    asyncio.run(main())


def test_failed_child_reports_headline_and_diagnostic():
    def child(req):
        raise RuntimeError("simulated provider failure")

    root = steps(ToolCall("subagent", {"description": "failing child", "prompt": "CHILD:error"}, id="call_79"),
                 lambda req: f"parent after failure: {req.messages[-1].text}")

    async def main():
        async with hub_for(lambda req: child(req) if req.label else root(req)) as hub:
            result = await hub.run("SCN:failed_child")
            # SPEC §5: the model's exception becomes the diagnostic (the reference printed only the headline)
            assert seen_by_model(engine_of(hub).runtime.store.open("root"))[1] == (
                "TOOL-RESULT call_79 (isError): Error: subagent run failed\nDiagnostic: simulated provider failure")
            assert result.text == "parent after failure: Error: subagent run failed\nDiagnostic: simulated provider failure"
            child_log = engine_of(hub).runtime.store.open("agent-1")
            assert child_log.events[-1].data == {"reason": "error", "error": "simulated provider failure"}
            assert [e.stop_reason for e in engine_of(hub).runtime.bus.history if e.kind == "subagent/end"] == ["error"]

    asyncio.run(main())


def test_parallel_foreground_children_overlap_and_commit_in_model_order():
    started: list[str] = []
    all_started = asyncio.Event()
    finish_order: list[str] = []

    async def child(req):
        started.append(req.label)
        if len(started) == 3:
            all_started.set()
        await all_started.wait()  # each child blocks until all three have started: they really overlap
        # finish in reverse order to show the commit cursor
        await asyncio.sleep({"part 1": 0.03, "part 2": 0.02, "part 3": 0.0}[req.label])
        finish_order.append(req.label)
        return f"done {req.last_user_text}"

    root = steps([ToolCall("subagent", {"description": f"part {i}", "prompt": f"CHILD: part {i}"}, id=f"call_{79 + i}")
                  for i in (1, 2, 3)],
                 lambda req: "merged: " + " | ".join(m.text for m in req.messages if m.role == "tool"))

    async def model(req):
        return await child(req) if req.label else root(req)

    async def main():
        async with hub_for(model) as hub:
            result = await hub.run("SCN:parallel_foreground (3 subagent calls in one assistant message)")
            assert finish_order == ["part 3", "part 2", "part 1"]
            assert render(engine_of(hub).runtime.store.open("root"))[3:9] == [
                "TOOL-CALL call_80 subagent", "TOOL-CALL call_81 subagent", "TOOL-CALL call_82 subagent",
                "TOOL-RESULT call_80: done CHILD: part 1", "TOOL-RESULT call_81: done CHILD: part 2",
                "TOOL-RESULT call_82: done CHILD: part 3"]
            assert result.text == "merged: done CHILD: part 1 | done CHILD: part 2 | done CHILD: part 3"

    asyncio.run(main())


def test_max_depth_refuses_the_fourth_level():
    def model(req):
        last = req.messages[-1]
        if last.role == "tool":
            return f"depth {req.depth} received: {last.text}"
        return tn.ModelResponse(tool_calls=[ToolCall("subagent", {
            "description": f"nest level {req.depth + 1}",
            "prompt": f"NEST: delegate again (I am depth {req.depth + 1})"})])

    async def main():
        async with hub_for(model) as hub:
            result = await hub.run("SCN:max_depth")
            expected = "depth 1 received: depth 2 received: depth 3 received: Error: subagent depth 4 exceeds maxDepth 3"
            assert result.text == "depth 0 received: " + expected
            assert seen_by_model(engine_of(hub).runtime.store.open("root"))[1].endswith(": " + expected)
            deepest = engine_of(hub).runtime.store.open("agent-3")
            assert deepest.header.delegation_depth == 3
            assert "TOOL-RESULT call-4 (isError): Error: subagent depth 4 exceeds maxDepth 3" in render(deepest)
            starts = [e.agent_id for e in engine_of(hub).runtime.bus.history if e.kind == "subagent/start"]
            ends = [e.agent_id for e in engine_of(hub).runtime.bus.history if e.kind == "subagent/end"]
            assert starts == ["agent-1", "agent-2", "agent-3"] and ends == ["agent-3", "agent-2", "agent-1"]

    asyncio.run(main())


def test_max_depth_zero_forbids_delegation_and_provider_managed_sends_no_cap():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "x"), ids="sequential", max_depth=0) as hub:
            result = await hub.call_tool("subagent", description="d", prompt="p")
            assert (result.text, result.is_error) == ("Error: subagent depth 1 exceeds maxDepth 0", True)

        calls = []

        def deep(req):
            calls.append(req.depth)
            if req.depth < 5 and req.messages[-1].role == "user":
                return tn.ModelResponse(tool_calls=[ToolCall("subagent", {"description": "d", "prompt": "p"})])
            return "bottom"

        async with tn.AsyncHub(tn.FunctionModel(deep), ids="sequential", max_depth="provider-managed") as hub:
            await hub.run("go")
            assert max(calls) == 5

    asyncio.run(main())


def test_a_kill_before_the_job_task_runs_still_disposes_the_child(no_leftover_tasks):
    async def main():
        async def model(req):
            if req.label:
                await asyncio.sleep(3600)
            return "root"

        async with hub_for(model) as hub:
            started = await hub.call_tool("subagent", description="bg", prompt="p", run_in_background=True)
            assert started.text == "started background subagent job subagent-1"
            assert "agent-1" in engine_of(hub).runtime.agents  # the child exists as soon as the id is returned
            killed = await hub.call_tool("job_kill", job_id="subagent-1")  # no await in between
            assert killed.text == "requested cancellation of job subagent-1"
            await asyncio.sleep(0.01)
            assert engine_of(hub).jobs.jobs["subagent-1"].status == "killed"
            assert "agent-1" not in engine_of(hub).runtime.agents
        no_leftover_tasks()

    asyncio.run(main())
