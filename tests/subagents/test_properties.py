"""Property: random interleavings of send / interrupt / settle on a small tree keep the guarantees.

Every accepted message runs exactly once and in acceptance order, nothing refused is ever run, and
every activation ends with exactly one settlement notice to the parent.
"""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.errors import SubagentError

OPS = st.lists(st.sampled_from(["send", "send", "interrupt", "release", "tick", "bogus", "grandchild"]),
               max_size=14)


async def scenario(ops):
    gates: dict[str, asyncio.Event] = {}

    async def fn(req):
        if req.label is None:
            return "root"
        if "spawn a grandchild" in req.last_user_text and req.step == 1:
            return tn.ModelResponse(tool_calls=[tn.ToolCall("subagent", {"description": "grand", "prompt": "g"})])
        gate = gates.setdefault(req.agent_id, asyncio.Event())
        await gate.wait()
        gate.clear()
        return f"done {req.last_user_text}"

    tools = [{"tool_name": "subagent", "provider": "spawn", "background_mode": "continuable"}]
    async with tn.AsyncHub(tn.FunctionModel(fn), ids="sequential", delegation_tools=tools) as hub:
        kid = await hub.start("m0", label="kid")
        accepted = ["m0"]
        refused = []
        for n, op in enumerate(ops, start=1):
            if op == "send":
                await kid.send(f"m{n}")
                accepted.append(f"m{n}")
            elif op == "grandchild":
                await kid.send(f"m{n} spawn a grandchild")
                accepted.append(f"m{n} spawn a grandchild")
            elif op == "bogus":
                try:
                    await hub.send("agent-999", f"m{n}")
                except SubagentError:
                    refused.append(f"m{n}")
            elif op == "interrupt":
                await kid.interrupt()
            elif op == "release":
                for gate in gates.values():
                    gate.set()
            await asyncio.sleep(0)
        await kid.send("final")  # a waking send runs whatever an interrupt parked
        accepted.append("final")
        for _ in range(5000):
            if not engine_of(hub).service.activations:
                break
            for gate in gates.values():
                gate.set()
            await asyncio.sleep(0.0005)
        assert not engine_of(hub).service.activations, "the tree did not settle"

        session = engine_of(hub).runtime.store.open(kid.id)
        ran = [e.message.text for e in session.events
               if e.kind == "user/message" and e.message.source.kind in ("user", "coordinator")]
        assert ran == accepted  # each accepted message exactly once, in order
        assert not set(refused) & {e.message.text for s in engine_of(hub).runtime.store.headers()
                                   for e in engine_of(hub).runtime.store.open(s.id).events if e.message is not None}
        history = engine_of(hub).runtime.bus.history
        for child_id in [h.id for h in engine_of(hub).runtime.store.headers() if h.origin == "subagent"]:
            starts = [e.run_id for e in history if e.kind == "subagent/start" and e.agent_id == child_id]
            ends = [e.run_id for e in history if e.kind == "subagent/end" and e.agent_id == child_id]
            assert starts == sorted(set(starts), key=starts.index) and sorted(starts) == sorted(ends)
        notices = [m for m in list(engine_of(hub).root.next_step_inbox) + list(engine_of(hub).root.next_turn_inbox)
                   if m.source.kind == "subagent-settled" and m.source.sender == kid.id]
        epochs = [e for e in history if e.kind == "subagent/end" and e.agent_id == kid.id]
        assert len(notices) == len(epochs) >= 1


@settings(max_examples=40, deadline=None)
@given(OPS)
def test_random_interleavings_keep_the_guarantees(ops):
    asyncio.run(scenario(ops))
