"""AsyncHub lifecycle: closing with work in flight, concurrent runs, closed-hub errors."""

from __future__ import annotations

import asyncio

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of


def test_close_with_work_in_flight_leaves_no_tasks_and_consistent_logs(no_leftover_tasks):
    async def main():
        async def model(req):
            if req.label:
                await asyncio.sleep(3600)
            return "root"

        hub = tn.AsyncHub(tn.FunctionModel(model), ids="sequential")
        kids = [await hub.start(f"k{i}", label=f"kid {i}") for i in range(3)]
        jobs = [await hub.spawn(f"j{i}", label=f"job {i}", background=True) for i in range(3)]
        foreground = asyncio.ensure_future(hub.spawn("fg", label="fg"))
        await asyncio.sleep(0.01)
        await hub.close()
        result = await foreground
        assert result.stop_reason == "aborted"
        assert [j.status for j in jobs] == ["killed"] * 3
        for header in engine_of(hub).store.headers():
            events = engine_of(hub).store.open(header.id).events
            starts = sum(e.kind == "turn/start" for e in events)
            ends = [e.data["reason"] for e in events if e.kind == "turn/end"]
            assert len(ends) == starts  # every started turn has its end
            if header.origin == "subagent":
                assert ends == ["aborted"]
        assert engine_of(hub).runtime.agents == {}
        assert [k.status for k in kids] == ["ready"] * 3  # stored, resumable by a new hub on a store
        with pytest.raises(tn.ClosedError, match="this hub is closed"):
            await hub.spawn("again")
        with pytest.raises(tn.ClosedError):
            await hub.list_agents()
        await hub.close()  # idempotent
        no_leftover_tasks()

    asyncio.run(main())


def test_concurrent_runs_are_separate_fifo_turns():
    async def main():
        async def model(req):
            await asyncio.sleep(0.01)
            return f"answer to {req.last_user_text}"

        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential") as hub:
            results = await asyncio.gather(*(hub.run(f"q{i}") for i in range(4)))
            assert [r.text for r in results] == [f"answer to q{i}" for i in range(4)]
            assert engine_of(hub).root.turns == 4

    asyncio.run(main())


def test_run_timeout_aborts_the_turn():
    async def main():
        async def model(req):
            await asyncio.sleep(3600)

        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential") as hub:
            result = await hub.run("slow", timeout=0.05)
            assert result.stop_reason == "aborted"
            with pytest.raises(tn.UsageError, match="timeout must be a non-negative number"):
                await hub.run("x", timeout=-1)
            with pytest.raises(tn.UsageError, match="prompt must be a string"):
                await hub.run(42)

    asyncio.run(main())


def test_close_also_closes_models_given_to_single_children():
    closed = []

    class Pooled:
        def __init__(self, name):
            self.name = name

        async def request(self, req):
            return tn.ModelResponse(text=self.name)

        async def aclose(self):
            closed.append(self.name)

    async def main():
        shared = Pooled("shared")
        async with tn.AsyncHub(Pooled("hub")) as hub:
            await hub.spawn("a", model=shared)
            await hub.spawn("b", model=shared)
            await hub.start("c", label="c", model=Pooled("kid"))

    asyncio.run(main())
    assert closed == ["hub", "shared", "kid"]
