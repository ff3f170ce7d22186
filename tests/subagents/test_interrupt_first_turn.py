"""An interrupt that lands before a continuable child's first turn has started ends that turn ``aborted``.

The first prompt of an activation is its current turn, not a queued follow-up: parking it (the rule for
later follow-ups) would leave the child ``idle`` forever with an activation that never settles and a
parent that never hears of it.
"""

from __future__ import annotations

import asyncio

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.content import ToolCall

from ..helpers import render, until

STOPPED = ["Background subagent agent-1 was stopped before it finished.", "It left no closing message."]


def _notices(agent):
    return [[b.text for b in m.content] for m in list(agent.next_step_inbox) + list(agent.next_turn_inbox)
            if m.source is not None and m.source.kind == "subagent-settled"]


def test_user_interrupt_right_after_start_aborts_the_first_turn_and_notifies():
    calls = []

    def model(req):
        calls.append(req.agent_id)
        return "child answer"

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential") as hub:
            kid = await hub.start("first task", label="worker")
            await hub.interrupt(kid.id)
            assert await kid.wait(timeout=2) is None
            assert kid.status == "ready"  # settled: the activation did not hang
            assert calls == []  # the model never ran for the aborted turn
            assert render(engine_of(hub).runtime.store.open(kid.id))[-3:] == [
                "-- turn 1 start", "USER [user]: first task", '-- turn 1 end: {"kind":"aborted"}']
            assert _notices(engine_of(hub).root) == [STOPPED]
            assert str(await hub.list_agents()) == "agent-1 [ready] \u2014 worker"
            # it resumes normally afterwards
            await hub.send(kid.id, "second task")
            assert await kid.wait(timeout=2) == "child answer"

    asyncio.run(main())


def test_model_that_starts_then_interrupts_in_one_message_gets_the_notice():
    async def model(req):
        if req.depth > 0:
            return "never used"
        if req.turn == 1 and req.step == 1:
            return tn.ModelResponse(tool_calls=[
                ToolCall("subagent", {"description": "helper", "prompt": "do it", "run_in_background": True}, id="c1"),
                ToolCall("interrupt_agent", {"agent_id": "agent-1"}, id="c2")])
        return "root done: " + req.messages[-1].text

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", background_mode="continuable") as hub:
            await hub.run("go")
            root = engine_of(hub).root
            notice = "\n".join(STOPPED)
            # read in the same turn (a later step) or in a turn it wakes: either way the root sees it
            await until(lambda: root.status == "idle" and notice in [m.text for m in root.conversation],
                        "the notice to reach the root")
            assert str(await hub.list_agents()) == "agent-1 [ready] \u2014 helper"

    asyncio.run(main())


def test_a_later_follow_up_interrupted_before_it_runs_stays_parked():
    gate, started = asyncio.Event(), asyncio.Event()

    async def model(req):
        if req.depth > 0 and req.turn == 1:
            started.set()  # the first turn runs: its model call waits at the gate
            await gate.wait()
        return f"turn {req.turn}"

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential") as hub:
            kid = await hub.start("first", label="worker")
            await until(started.is_set, "the first turn to start")
            await hub.send(kid.id, "second")  # queued behind the running first turn
            await hub.interrupt(kid.id)  # aborts turn 1; "second" is parked, not run
            agent = engine_of(hub).runtime.agents[kid.id]
            await until(lambda: agent.status == "idle", "the child to stop")
            assert agent.parked and [m.text for m in agent.next_turn_inbox] == ["second"]
            assert kid.status == "idle"
            await hub.send(kid.id, "third")  # the next waking send runs the parked one first
            assert await kid.wait(timeout=2) == "turn 3"

    asyncio.run(main())


def test_interrupting_a_cold_resumed_child_before_its_turn_starts_also_settles_it():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as hub:
            kid = await hub.start("first", label="worker")
            assert await kid.wait(timeout=2) == "ok"
            assert kid.status == "ready"
            await hub.send(kid.id, "resume me")  # a new activation: this message is its current turn
            await hub.interrupt(kid.id)
            await kid.wait(timeout=2)
            assert kid.status == "ready"
            notices = _notices(engine_of(hub).root)
            assert notices[-1] == STOPPED
            assert render(engine_of(hub).runtime.store.open(kid.id))[-2:] == [
                "USER [user]: resume me", '-- turn 2 end: {"kind":"aborted"}']

    asyncio.run(main())
