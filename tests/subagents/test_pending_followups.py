"""Acknowledged follow-ups in the child's log (``message/queued``): consumed by their turn, dropped
for good by a kill, left pending by a closing hub and run first by the next send; what the transcript
and the agents table show of them."""

from __future__ import annotations

import asyncio

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.session import MESSAGE_DISCARDED, MESSAGE_QUEUED, USER_MESSAGE, conversation_of

from ..helpers import until


def blocking_model(gates: dict[str, asyncio.Event] | None = None):
    """The root answers plainly; a child turn whose text starts with ``block`` waits on its gate."""

    async def fn(request):
        text = request.last_user_text
        if request.label is not None and text.startswith("block"):
            gate = gates.setdefault(request.agent_id, asyncio.Event()) if gates is not None else asyncio.Event()
            await gate.wait()
            gate.clear()
        return f"did {text}"

    return tn.FunctionModel(fn)


def kinds_and_ids(session) -> list[tuple[str, object]]:
    out = []
    for event in session.events:
        if event.kind == MESSAGE_QUEUED:
            out.append((event.kind, event.data["id"]))
        elif event.kind == USER_MESSAGE:
            out.append((event.kind, event.message.id))
        elif event.kind == MESSAGE_DISCARDED:
            out.append((event.kind, tuple(event.data["ids"])))
    return out


def test_each_follow_up_is_logged_when_accepted_and_consumed_once_by_its_turn_in_fifo_order():
    async def main():
        gates: dict[str, asyncio.Event] = {}
        async with tn.AsyncHub(blocking_model(gates), ids="sequential") as hub:
            kid = await hub.start("block task", label="worker")
            ids = await asyncio.gather(*(kid.send(f"m{i}") for i in range(3)))
            session = engine_of(hub).runtime.agents[kid.id].session
            # logged at acceptance, while the first turn still runs: before any of their turns
            # (the start's first prompt too: queued when the start accepted it, consumed by the first turn)
            first = [(MESSAGE_QUEUED, "msg-1"), (USER_MESSAGE, "msg-1")]
            assert kinds_and_ids(session) == first + [(MESSAGE_QUEUED, i) for i in ids]
            gates[kid.id].set()
            await kid.wait()
            assert kinds_and_ids(session) == first + [(MESSAGE_QUEUED, i) for i in ids] + \
                [(USER_MESSAGE, i) for i in ids]
            # each follow-up is one turn, and the conversation holds it once (a queued record is not conversation)
            conversation = [m.text for m in conversation_of(session.events)]
            assert conversation == ["block task", "did block task", "m0", "did m0", "m1", "did m1", "m2", "did m2"]

    asyncio.run(main())


def test_a_kill_drops_queued_follow_ups_for_good_and_logs_it(tmp_path):
    async def main():
        async with tn.AsyncHub(blocking_model(), store=str(tmp_path), ids="sequential") as hub:
            kid = await hub.start("block task", label="worker")
            b, c = await kid.send("B"), await kid.send("C")
            assert await kid.kill() is True
            await until(lambda: kid.status == "ready", "the killed child to settle")
            session = engine_of(hub).store.open(kid.id)
            # the first turn may log its prompt between the two follow-ups (the start returned first)
            logged = [entry for entry in kinds_and_ids(session) if entry != (USER_MESSAGE, "msg-1")]
            assert logged[-3:] == [(MESSAGE_QUEUED, b), (MESSAGE_QUEUED, c), (MESSAGE_DISCARDED, (b, c))]
        async with tn.AsyncHub(blocking_model(), store=str(tmp_path), ids="sequential") as hub:
            d = await hub.send(kid.id, "D")  # a cold resume after a reopen: B and C stay dropped
            await (await hub.child(kid.id)).wait()
            session = engine_of(hub).store.open(kid.id)
            assert [e.message.text for e in session.events if e.kind == USER_MESSAGE] == ["block task", "D"]
            assert kinds_and_ids(session)[-1] == (USER_MESSAGE, d)

    asyncio.run(main())


def test_follow_ups_waiting_when_the_hub_closes_run_first_on_the_next_send_after_a_reopen(tmp_path):
    async def main():
        async with tn.AsyncHub(blocking_model(), store=str(tmp_path)) as hub:
            kid = await hub.start("block task", label="worker")
            b, c = await kid.send("B"), await kid.send("C")
        async with tn.AsyncHub(blocking_model(), store=str(tmp_path)) as hub:
            assert str(await hub.list_agents()) == f"{kid.id} [ready] \u2014 worker"
            d = await hub.send(kid.id, "D")
            await (await hub.child(kid.id)).wait()
            session = engine_of(hub).store.open(kid.id)
            ran = [(e.message.id, e.message.text) for e in session.events if e.kind == USER_MESSAGE]
            assert ran[1:] == [(b, "B"), (c, "C"), (d, "D")]
            assert [e.data["reason"] for e in session.events if e.kind == "turn/end"] == \
                ["aborted", "completed", "completed", "completed"]
        async with tn.AsyncHub(blocking_model(), store=str(tmp_path)) as hub:  # and never again
            e = await hub.send(kid.id, "E")
            await (await hub.child(kid.id)).wait()
            session = engine_of(hub).store.open(kid.id)
            assert [m.id for m in (x.message for x in session.events if x.kind == USER_MESSAGE)][-4:] == [b, c, d, e]

    asyncio.run(main())


def test_interrupt_parked_follow_ups_stay_pending_in_the_log_and_run_in_order_on_the_next_send():
    async def main():
        gates: dict[str, asyncio.Event] = {}
        async with tn.AsyncHub(blocking_model(gates), ids="sequential") as hub:
            kid = await hub.start("block A", label="worker")
            b, c = await kid.send("B"), await kid.send("C")
            await until(lambda: kid.id in gates, "the first turn to block")
            await kid.interrupt()
            await until(lambda: engine_of(hub).runtime.agents[kid.id].status == "idle", "the interrupted turn to end")
            session = engine_of(hub).runtime.agents[kid.id].session
            # parked, not consumed (the first turn started after both sends returned: no await in memory)
            parked = [(MESSAGE_QUEUED, "msg-1"), (MESSAGE_QUEUED, b), (MESSAGE_QUEUED, c), (USER_MESSAGE, "msg-1")]
            assert kinds_and_ids(session) == parked
            d = await kid.send("D")
            await kid.wait()
            assert kinds_and_ids(session) == parked + [(MESSAGE_QUEUED, d), (USER_MESSAGE, b), (USER_MESSAGE, c),
                                                       (USER_MESSAGE, d)]

    asyncio.run(main())


def test_the_transcript_shows_queued_and_discarded_follow_ups_and_the_agents_table_counts_turns_only():
    async def main():
        gates: dict[str, asyncio.Event] = {}
        async with tn.AsyncHub(blocking_model(gates), ids="sequential") as hub:
            kid = await hub.start("block task", label="worker")
            await until(lambda: kid.id in gates, "the first turn to block")
            await kid.send("block B")
            await hub.call_tool("send_message", subagent_id=kid.id, message="C")
            await kid.kill()
            await until(lambda: kid.status == "ready", "the killed child to settle")
            rows = [(r["turn"], r["kind"], r["role"], r["source"], r["text"]) for r in await hub.transcript(kid, raw=True)]
            assert rows[1:] == [  # the start's prompt shows once, as its turn's message (its queued record is hidden)
                (1, "turn/start", None, None, None),
                (1, "user/message", "user", "user", "block task"),
                (None, "message/queued", "user", "user", "block B"),
                (None, "message/queued", "user", "user", "C"),  # the tool called by the hub: the user's
                (None, "message/discarded", None, None, "msg-2, msg-3"),  # the kill drops the queue first
                (1, "turn/end", None, None, "aborted"),
            ]
            row = next(r for r in await hub.agents() if r["id"] == kid.id)
            assert (row["status"], row["turns"], row["stop_reason"]) == ("ready", 1, "aborted")

    asyncio.run(main())
