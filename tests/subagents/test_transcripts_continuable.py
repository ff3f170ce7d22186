"""The continuable scenarios of the reference transcripts (`continuable`, `interrupt`)."""

from __future__ import annotations

import asyncio

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.content import ToolCall

from ..helpers import render, seen_by_model, until

TOOLS = [{"tool_name": "subagent", "provider": "spawn"},
         {"tool_name": "subagent_c", "provider": "spawn", "background_mode": "continuable"}]


def response(item):
    if isinstance(item, ToolCall):
        return tn.ModelResponse(tool_calls=[item])
    return item


def test_continuable_transcript():
    reported, root_turn1_done, child_turn1_done = asyncio.Event(), asyncio.Event(), asyncio.Event()
    second_epoch_over = asyncio.Event()

    async def root(req):
        if req.turn == 1:
            if req.step == 1:
                return ToolCall("subagent_c", {"description": "research task", "prompt": "CHILD:cont Investigate topic A."}, id="call_10")
            if req.step == 2:
                await reported.wait()  # the child's report lands while this step runs
                return ToolCall("list_agents", {}, id="call_12")
            root_turn1_done.set()
            return "Started the child; waiting for it."
        if req.turn == 2:
            if req.step == 1:
                return ToolCall("list_agents", {"scope": "descendants"}, id="call_15")
            if req.step == 2:
                return ToolCall("list_agents", {"scope": "children"}, id="call_16")
            if req.step == 3:
                return ToolCall("send_message", {"subagent_id": "agent-1", "message": "CHILD2: Now investigate topic B."}, id="call_17")
            if req.step == 4:
                await second_epoch_over.wait()
                return ToolCall("list_agents", {}, id="call_18")
            return "Parent: message sent, waiting."
        return "unexpected"

    async def child(req):
        if req.turn == 1:
            if req.step == 1:
                return ToolCall("report", {"output": "partial finding: topic A looks promising"}, id="call_11")
            if req.step == 2:
                reported.set()
                return ToolCall("subagent_c", {"description": "grandchild task", "prompt": "GRANDCHILD: detail on A"}, id="call_13")
            if req.step == 3:
                return ToolCall("list_agents", {"scope": "children"}, id="call_14")
            child_turn1_done.set()
            return "child turn 1 result: topic A done (grandchild started)"
        if req.turn == 2:
            await root_turn1_done.wait()
            return "child: grandchild finished; final result for topic A"
        return "child turn 2 result: topic B is fine"

    async def grandchild(req):
        await child_turn1_done.wait()
        await asyncio.sleep(0)
        return "grandchild result: topic A detail"

    async def model(req):
        await asyncio.sleep(0)
        if req.label is None:
            return response(await root(req))
        if req.label == "research task":
            return response(await child(req))
        return response(await grandchild(req))

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", delegation_tools=TOOLS) as hub:
            ends = []

            def on_event(event):
                if event.kind == "subagent/end":
                    ends.append(event.agent_id)
                    if ends.count("agent-1") == 2:
                        second_epoch_over.set()

            hub.view.subscribe(on_event)
            await hub.run("SCN:continuable")
            await until(lambda: engine_of(hub).root.turns == 2 and engine_of(hub).root.status == "idle", "root turn 2")
            assert seen_by_model(engine_of(hub).runtime.store.open("root")) == [
                "USER [user]: SCN:continuable",
                "TOOL-RESULT call_10: started subagent agent-1",
                "TOOL-RESULT call_12: agent-1 [running] \u2014 research task",
                'USER [subagent-report relay from=agent-1]: 2 blocks ["Background subagent agent-1 reported:",'
                '"partial finding: topic A looks promising"]',
                'USER [subagent-settled notice from=agent-1]: 3 blocks ["Background subagent agent-1 finished and will '
                'do no further work unless you send it more.","Its closing message:","child: grandchild finished; '
                'final result for topic A"]',
                "TOOL-RESULT call_15: agent-1 [ready] parent=root depth=1 \u2014 research task\n"
                "agent-2 [ready] parent=agent-1 depth=2 \u2014 grandchild task",
                "TOOL-RESULT call_16: agent-1 [ready] \u2014 research task",
                "TOOL-RESULT call_17: message queued as the next turn for subagent agent-1",
                "TOOL-RESULT call_18: agent-1 [ready] \u2014 research task",
                'USER [subagent-settled notice from=agent-1]: 3 blocks ["Background subagent agent-1 finished and will '
                'do no further work unless you send it more.","Its closing message:","child turn 2 result: topic B is fine"]',
            ]
            child_log = render(engine_of(hub).runtime.store.open("agent-1"))
            assert child_log[0] == 'DESCRIPTOR {"version":2,"mode":"continuable","provider":"spawn","label":"research task"}'
            assert child_log[1] == "-- turn 1 start"
            assert "TOOL-RESULT call_11: report accepted by the agent that started you as message msg-3" in child_log
            assert "TOOL-RESULT call_14: agent-2 [running] \u2014 grandchild task" in child_log
            assert child_log[-5:] == [
                '-- turn 2 end: {"kind":"completed"}',
                "-- turn 3 start",
                "USER [coordinator relay from=root]: CHILD2: Now investigate topic B.",
                "ASSISTANT: child turn 2 result: topic B is fine",
                '-- turn 3 end: {"kind":"completed"}',
            ]
            assert child_log.count('DESCRIPTOR {"version":2,"mode":"continuable","provider":"spawn","label":"research task"}') == 1
            grand = engine_of(hub).runtime.store.open("agent-2")
            assert grand.header.parent_session == "agent-1" and grand.header.delegation_depth == 2
            lifecycle = [(e.kind, e.agent_id, e.run_id, getattr(e, "stop_reason", None))
                         for e in engine_of(hub).runtime.bus.history if e.kind.startswith("subagent/")]
            assert lifecycle == [("subagent/start", "agent-1", "run-1", None),
                                 ("subagent/start", "agent-2", "run-2", None),
                                 ("subagent/end", "agent-2", "run-2", "completed"),
                                 ("subagent/end", "agent-1", "run-1", "completed"),
                                 ("subagent/start", "agent-1", "run-3", None),
                                 ("subagent/end", "agent-1", "run-3", "completed")]

    asyncio.run(main())


def test_interrupt_transcript():
    released = asyncio.Event()
    resumed = asyncio.Event()

    async def root(req):
        if req.turn == 1:
            if req.step <= 3:
                await asyncio.sleep(0.001)  # let the child reach its model call
            if req.step == 6:  # the reference's timing: the child finishes stopping after this turn ends
                asyncio.get_running_loop().call_soon(released.set)
            return [ToolCall("subagent_c", {"description": "long running work", "prompt": "CHILD:hang work forever"}, id="call_19"),
                    ToolCall("list_agents", {}, id="call_20"),
                    ToolCall("list_agents", {"scope": "descendants"}, id="call_21"),
                    ToolCall("interrupt_agent", {"agent_id": "agent-1"}, id="call_22"),
                    ToolCall("interrupt_agent", {"agent_id": "root"}, id="call_23"),
                    "Parent: requested interrupt; waiting for the settlement notice."][req.step - 1]
        if req.turn == 2:
            if req.step == 6:  # and the resumed child answers after the parent's turn 2
                asyncio.get_running_loop().call_soon(resumed.set)
            return [ToolCall("interrupt_agent", {"agent_id": "agent-1"}, id="call_24"),
                    ToolCall("interrupt_agent", {"agent_id": "no-such-agent-id"}, id="call_25"),
                    ToolCall("list_agents", {}, id="call_26"),
                    ToolCall("send_message", {"subagent_id": "agent-1", "message": "CHILD2: please resume and finish"}, id="call_27"),
                    ToolCall("send_message", {"subagent_id": "no-such-agent-id", "message": "hello?"}, id="call_28"),
                    "Parent: resume sent."][req.step - 1]
        return "Parent: final (k=12)."

    async def child(req):
        if "hang" in req.last_user_text:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                await released.wait()
                raise
        await resumed.wait()
        return "child resumed after interrupt and finished"

    async def model(req):
        return response(await root(req) if req.label is None else await child(req))

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", delegation_tools=TOOLS) as hub:
            await hub.run("SCN:interrupt")
            await until(lambda: engine_of(hub).root.turns == 3 and engine_of(hub).root.status == "idle", "root turn 3")
            assert render(engine_of(hub).runtime.store.open("root")) == [
                "-- turn 1 start",
                "USER [user]: SCN:interrupt",
                'ASSISTANT: <tool-call call_19 subagent_c {"description":"long running work","prompt":"CHILD:hang work forever"}>',
                "TOOL-CALL call_19 subagent_c",
                "TOOL-RESULT call_19: started subagent agent-1",
                "ASSISTANT: <tool-call call_20 list_agents {}>",
                "TOOL-CALL call_20 list_agents",
                "TOOL-RESULT call_20: agent-1 [running] \u2014 long running work",
                'ASSISTANT: <tool-call call_21 list_agents {"scope":"descendants"}>',
                "TOOL-CALL call_21 list_agents",
                "TOOL-RESULT call_21: agent-1 [running] parent=root depth=1 \u2014 long running work",
                'ASSISTANT: <tool-call call_22 interrupt_agent {"agent_id":"agent-1"}>',
                "TOOL-CALL call_22 interrupt_agent",
                "TOOL-RESULT call_22: interrupt requested for agent agent-1",
                'ASSISTANT: <tool-call call_23 interrupt_agent {"agent_id":"root"}>',
                "TOOL-CALL call_23 interrupt_agent",
                'TOOL-RESULT call_23 (isError): Error: agent "root" cannot interrupt itself',
                "ASSISTANT: Parent: requested interrupt; waiting for the settlement notice.",
                '-- turn 1 end: {"kind":"completed"}',
                "-- turn 2 start",
                'USER [subagent-settled notice from=agent-1]: 2 blocks ["Background subagent agent-1 was stopped '
                'before it finished.","It left no closing message."]',
                'ASSISTANT: <tool-call call_24 interrupt_agent {"agent_id":"agent-1"}>',
                "TOOL-CALL call_24 interrupt_agent",
                "TOOL-RESULT call_24: interrupt requested for agent agent-1",
                'ASSISTANT: <tool-call call_25 interrupt_agent {"agent_id":"no-such-agent-id"}>',
                "TOOL-CALL call_25 interrupt_agent",
                "TOOL-RESULT call_25: interrupt requested for agent no-such-agent-id",
                "ASSISTANT: <tool-call call_26 list_agents {}>",
                "TOOL-CALL call_26 list_agents",
                "TOOL-RESULT call_26: agent-1 [ready] \u2014 long running work",
                'ASSISTANT: <tool-call call_27 send_message {"subagent_id":"agent-1","message":"CHILD2: please resume and finish"}>',
                "TOOL-CALL call_27 send_message",
                "TOOL-RESULT call_27: message queued as the next turn for subagent agent-1",
                'ASSISTANT: <tool-call call_28 send_message {"subagent_id":"no-such-agent-id","message":"hello?"}>',
                "TOOL-CALL call_28 send_message",
                'TOOL-RESULT call_28 (isError): Error: subagent "no-such-agent-id" is unavailable',
                "ASSISTANT: Parent: resume sent.",
                '-- turn 2 end: {"kind":"completed"}',
                "-- turn 3 start",
                'USER [subagent-settled notice from=agent-1]: 3 blocks ["Background subagent agent-1 finished and will '
                'do no further work unless you send it more.","Its closing message:","child resumed after interrupt and finished"]',
                "ASSISTANT: Parent: final (k=12).",
                '-- turn 3 end: {"kind":"completed"}',
            ]
            assert render(engine_of(hub).runtime.store.open("agent-1")) == [
                'DESCRIPTOR {"version":2,"mode":"continuable","provider":"spawn","label":"long running work"}',
                "-- turn 1 start",
                "USER [user]: CHILD:hang work forever",
                '-- turn 1 end: {"kind":"aborted"}',
                "-- turn 2 start",
                "USER [coordinator relay from=root]: CHILD2: please resume and finish",
                "ASSISTANT: child resumed after interrupt and finished",
                '-- turn 2 end: {"kind":"completed"}',
            ]
            ends = [(e.run_id, e.stop_reason) for e in engine_of(hub).runtime.bus.history if e.kind == "subagent/end"]
            assert ends == [("run-1", "aborted"), ("run-2", "completed")]

    asyncio.run(main())
