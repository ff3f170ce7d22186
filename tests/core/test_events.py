"""The typed event stream: ordering per agent, subtree filter, bounded history, nothing lost at scale."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import ClassVar

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core import events as ev
from toh_nb.core.content import ToolCall


def _tree_model(req):
    """Root delegates to two children; the first child delegates to a grandchild."""
    if req.depth == 0 and req.step == 1:
        return tn.ModelResponse(tool_calls=[ToolCall("subagent", {"description": "a", "prompt": "go a"}),
                                            ToolCall("subagent", {"description": "b", "prompt": "go b"})])
    if req.label == "a" and req.step == 1:
        return tn.ModelResponse(tool_calls=[ToolCall("subagent", {"description": "a1", "prompt": "go a1"})])
    return f"{req.label or 'root'} done"


async def _collect(hub, **kwargs):
    seen = []

    async def reader():
        async for event in hub.astream(**kwargs):
            seen.append(event)

    task = asyncio.ensure_future(reader())
    await asyncio.sleep(0)
    return seen, task


def test_events_of_one_agent_come_in_order_and_carry_who_and_when():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(_tree_model), ids="sequential") as hub:
            seen, task = await _collect(hub)
            await hub.run("go")
        await task
        return seen

    seen = asyncio.run(main())
    root = [e.kind for e in seen if e.agent_id == "root" and not isinstance(e, (ev.StatusChanged, ev.HubClosed))]
    assert root[:5] == ["message/queued", "turn/start", "message/read", "model/request", "model/response"]
    assert root[-3:] == ["model/request", "model/response", "turn/end"]
    assert isinstance(seen[-1], ev.HubClosed)
    started = {e.label: e for e in seen if isinstance(e, ev.ChildStarted)}
    grandchild = started["a1"]
    assert (grandchild.parent_id, grandchild.depth) == (started["a"].agent_id, 2)
    assert {(e.parent_id, e.depth) for e in seen if e.agent_id == grandchild.agent_id} == {(started["a"].agent_id, 2)}
    stamps = [e.monotonic for e in seen]
    assert stamps == sorted(stamps)
    ends = [e for e in seen if isinstance(e, ev.ChildEnded)]
    assert sorted((e.agent_id, e.stop_reason) for e in ends) == [("agent-1", "completed"), ("agent-2", "completed"),
                                                               ("agent-3", "completed")]
    with pytest.raises(Exception):
        ends[0].stop_reason = "x"  # immutable


def test_subtree_filter_follows_children_started_later_and_kinds_narrow_it():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(_tree_model), ids="sequential") as hub:
            gate = asyncio.Event()

            async def slow(req):
                await gate.wait()
                return _tree_model(req)

            engine_of(hub).runtime.model = tn.FunctionModel(slow)
            kid = await hub.start("go a", label="a")
            sub, sub_task = await _collect(hub, agent=kid)
            ends, ends_task = await _collect(hub, kinds=["turn/end"])
            gate.set()
            await kid.wait(timeout=5)
        await sub_task
        await ends_task
        return sub, ends

    sub, ends = asyncio.run(main())
    agents = {e.agent_id for e in sub if not isinstance(e, ev.HubClosed)}
    assert agents == {"agent-1", "agent-2"}  # the child and the grandchild it started, not the root
    assert {e.kind for e in ends} == {"turn/end", "hub/closed"}


def test_history_is_bounded_and_only_lifecycle_events_are_kept():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), ids="sequential", history=5) as hub:
            for n in range(6):
                await hub.spawn(f"task {n}", label=f"t{n}")
            return list(engine_of(hub).runtime.bus.history), await hub.events()

    history, rows = asyncio.run(main())
    assert len(history) == 5 and all(e.lifecycle for e in history)
    assert [r["kind"] for r in rows][-2:] == ["subagent/start", "subagent/end"]
    assert rows[-1]["id"] == "agent-6" and rows[-1]["stop_reason"] == "completed"
    with pytest.raises(tn.UsageError, match="history must be an integer >= 0"):
        tn.AsyncHub(history=-1)


def test_no_event_is_lost_with_a_thousand_concurrent_children():
    async def model(req):
        await asyncio.sleep(0)
        return "done"

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential") as hub:
            seen, task = await _collect(hub, kinds=["subagent/end", "turn/end"])
            kids = [await hub.start(f"task {n}", label=f"k{n}") for n in range(1000)]
            for kid in kids:
                await kid.wait(timeout=30)
        await task
        return seen

    seen = asyncio.run(main())
    assert len([e for e in seen if e.kind == "subagent/end"]) == 1000
    assert len({e.agent_id for e in seen if e.kind == "turn/end"}) == 1000


def test_a_failing_listener_is_logged_and_streamed_never_breaking_the_run(caplog):
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok")) as hub:
            problems = []
            hub.view.subscribe(lambda e: problems.append(e) if isinstance(e, ev.ListenerFailed) else None)

            def bad(event):
                raise RuntimeError("boom")

            hub.view.subscribe(bad)
            result = await hub.spawn("x", label="x")
            return result, problems

    with caplog.at_level(logging.WARNING, logger="toh_nb"):
        result, problems = asyncio.run(main())
    assert result.text == "ok"
    assert problems and problems[0].message.endswith("listener threw: RuntimeError: boom")
    assert "listener threw: RuntimeError: boom" in caplog.text


def test_sync_stream_on_the_portal():
    with tn.Hub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as hub:
        hub.spawn("warm up", label="w")
        kinds = []
        job = hub.spawn("x", label="bg", background=True)
        for event in hub.stream(kinds=["job/end"], history=True, timeout=5):
            kinds.append((event.kind, getattr(event, "job", None)))
            if event.kind == "job/end":
                break
        assert kinds == [("job/end", job.id)]


def _lifecycle_events() -> list[ev.HubEvent]:
    """One of each lifecycle kind, several sharing a parent (so a head), with the values tables show."""
    out: list[ev.HubEvent] = []
    for n in range(3):
        out.append(ev.ChildStarted(agent_id=f"agent-{n + 1}", parent_id="agent-0", depth=1, run_id=f"run-{n + 1}",
                                   provider="local", mode="continuable", label=f"worker {n}"))
        out.append(ev.ChildEnded(agent_id=f"agent-{n + 1}", parent_id="agent-0", depth=1, run_id=f"run-{n + 1}",
                                 provider="local", stop_reason="completed", last_assistant_message=f"done {n}"))
    out += [ev.JobStarted(agent_id="agent-0", job="job-1", job_kind="subagent", label="x"),
            ev.JobStopping(agent_id="agent-0", job="job-1", reason="asked"),
            ev.JobEnded(agent_id="agent-0", job="job-1", job_kind="subagent", label="x", status="completed",
                        detail=None, child_id="agent-4"),
            ev.Interrupted(agent_id="agent-2", by="agent-0"),
            ev.Problem(source="store", message="disk full", agent_id=None),
            ev.ListenerFailed(source="listener", message="boom", depth=True),  # True prints unlike 1
            ev.ChildStarted(agent_id="agent-5", parent_id=None, depth=1, run_id="run-5", provider="acp",
                            mode="one-shot", local=False)]
    return out


def test_the_history_gives_back_equal_events_oldest_first_and_drops_the_oldest_past_its_bound():
    published = _lifecycle_events()
    history = ev.EventHistory(maxlen=len(published) - 4)
    for event in published:
        history.append(event)
    kept = list(history)
    assert kept == published[4:] and repr(kept) == repr(published[4:])
    assert [type(e) for e in kept] == [type(e) for e in published[4:]]
    assert len(history) == len(published) - 4 and history[-1] == published[-1] and history[0] == published[4]
    assert repr(history) == f"EventHistory({published[4:]!r}, maxlen={len(published) - 4})"
    for event in published:  # around the ring again: still the newest, in order
        history.append(event)
    assert list(history) == published[4:]
    history.clear()
    assert list(history) == [] and len(history) == 0
    nothing = ev.EventHistory(maxlen=0)
    nothing.append(published[0])
    assert list(nothing) == []


def test_the_history_keeps_columns_not_the_published_events():
    """Why: the events objects with their float timestamps were 320 B per idle child at 1,000 children
    (bench/README.md, round six); kept as columns, the events that share a parent and a provider share
    one head."""
    published = _lifecycle_events()
    history = ev.EventHistory()
    for event in published:
        history.append(event)
    assert all(kept == event and kept is not event for kept, event in zip(history, published))
    assert history.queued == 0  # reading turned the queued events into columns
    starts = [head for head in history.heads() if head is not None and head[0] is ev.ChildStarted]
    assert len(starts) == 4 and starts[0] is starts[1] is starts[2] and starts[3] is not starts[0]


def test_events_the_history_cannot_rebuild_are_kept_whole():
    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Counted(ev.HubEvent):
        kind: ClassVar[str] = "test/counted"
        lifecycle: ClassVar[bool] = True
        count: int = dataclasses.field(default=0, init=False)

    odd_time = ev.Problem(source="s", message="m", time=5)  # an int prints unlike the double it would become
    unhashable = ev.JobEnded(job="j", job_kind="k", label="l", status=["not", "hashable"])  # type: ignore[arg-type]
    history = ev.EventHistory()
    events = [Counted(), odd_time, unhashable, ev.Problem(source="s", message="m")]
    for event in events:
        history.append(event)
    kept = list(history)
    assert kept == events and kept[0] is events[0] and kept[1] is odd_time
    assert kept[2] is not unhashable and kept[3] is not events[3]  # these two are rebuilt (heads go by identity)
    assert [repr(e) for e in kept] == [repr(e) for e in events]


def test_a_hubs_history_lists_its_childrens_lifecycle_in_order():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as hub:
            children = [await hub.start(f"task {n}", label=f"t{n}") for n in range(3)]
            for child in children:
                await child.wait()
            return list(engine_of(hub).runtime.bus.history), await hub.events()

    history, rows = asyncio.run(main())
    # the starts in start order, then the ends: their order is the order the sync model's threads finish in
    assert [(e.kind, e.agent_id) for e in history[:3]] == [
        ("subagent/start", "agent-1"), ("subagent/start", "agent-2"), ("subagent/start", "agent-3")]
    assert sorted((e.kind, e.agent_id) for e in history[3:]) == [
        ("subagent/end", "agent-1"), ("subagent/end", "agent-2"), ("subagent/end", "agent-3")]
    assert [e.label for e in history[:3]] == ["t0", "t1", "t2"]
    assert [r["stop_reason"] for r in rows][3:] == ["completed"] * 3


def test_the_history_turns_queued_events_into_columns_in_batches_within_its_bound():
    published = [ev.Interrupted(agent_id=f"agent-{n}", by="agent-0") for n in range(3 * ev.BATCH + 5)]
    history = ev.EventHistory(maxlen=ev.BATCH + 6)
    for event in published:
        history.append(event)
        assert history.queued < ev.BATCH  # never more than one batch queued as objects
    assert list(history) == published[-(ev.BATCH + 6):] and len(history) == ev.BATCH + 6


def test_a_listener_given_kinds_gets_only_those_and_unwanted_activity_is_not_built():
    bus = ev.EventBus()
    assert bus.wanted == frozenset() and not bus.listening
    seen = []
    unsubscribe = bus.subscribe(seen.append, kinds=["turn/start", "hub/closed"])
    assert bus.wanted == {"turn/start", "hub/closed"} and bus.listening
    assert bus.wants("turn/start") and not bus.wants("agent/status")
    bus.publish(ev.TurnStarted(agent_id="a", turn=1))
    bus.publish(ev.StatusChanged(agent_id="a", status="idle"))
    assert [e.kind for e in seen] == ["turn/start"]
    everything = []
    unsubscribe_all = bus.subscribe(everything.append)
    assert bus.wanted == ev.ALL_KINDS and "message/read" in bus.wanted
    unsubscribe_all()
    unsubscribe_all()  # twice: a no-op
    assert bus.wanted == {"turn/start", "hub/closed"}
    unsubscribe()
    assert bus.wanted == frozenset() and not bus.listening
    with pytest.raises(TypeError, match="not one string"):
        bus.subscribe(seen.append, kinds="turn/start")


def test_the_engine_builds_no_status_events_for_a_listener_that_does_not_want_them(monkeypatch):
    built = []
    original = ev.StatusChanged.__init__

    def counting(self, *args, **kwargs):
        built.append(kwargs.get("status"))
        original(self, *args, **kwargs)

    async def main(kinds):
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as hub:
            seen = []
            unsubscribe = hub.view.subscribe(seen.append, kinds=kinds)
            await hub.run("go")
            unsubscribe()
            return [e.kind for e in seen]

    monkeypatch.setattr(ev.StatusChanged, "__init__", counting)
    kinds = asyncio.run(main(["turn/start", "message/read", "turn/end"]))
    assert kinds == ["turn/start", "message/read", "turn/end"] and built == []
    kinds = asyncio.run(main(None))
    assert "agent/status" in kinds and built
