"""``astream(timeout=)`` and the sync ``stream`` built on it; the hub's activity and ``kill_job``."""

from __future__ import annotations

import asyncio
import threading

import pytest

import toh_nb as tn


def test_astream_ends_after_timeout_seconds_without_an_event():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as hub:
            await hub.spawn("one", label="a")
            quiet = [e async for e in hub.astream(timeout=0.05)]
            replayed = [e.kind async for e in hub.astream(history=True, timeout=0.05)]
            with pytest.raises(tn.UsageError) as error:
                [e async for e in hub.astream(timeout=-1)]
            return quiet, replayed, str(error.value)

    quiet, replayed, error = asyncio.run(main())
    assert quiet == [] and replayed == ["subagent/start", "subagent/end"]
    assert error == "timeout must be a non-negative number of seconds or None (no limit), got -1"


def test_the_sync_stream_is_astream_read_through_the_portal(monkeypatch):
    """Hub.stream yields what AsyncHub.astream yields for the same arguments (no second implementation)."""
    seen = {}

    async def fake_astream(self, agent=None, *, kinds=None, history=False, timeout=None):
        seen.update(agent=agent, kinds=kinds, history=history, timeout=timeout,
                    portal=threading.current_thread() is not threading.main_thread())
        for n in range(3):
            yield tn.Problem(source="test", message=f"event {n}")

    monkeypatch.setattr(tn.AsyncHub, "astream", fake_astream)
    with tn.Hub(ids="sequential") as hub:
        got = [e.message for e in hub.stream("root", kinds=["problem"], history=True, timeout=2.5)]
    assert got == ["event 0", "event 1", "event 2"]
    assert seen == {"agent": "root", "kinds": ["problem"], "history": True, "timeout": None, "portal": True}


def test_a_stream_left_early_unsubscribes_and_one_read_to_the_end_stops_at_the_close():
    with tn.Hub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as hub:
        stream = hub.stream(kinds=["subagent/end"], history=True, timeout=5)
        hub.spawn("one")
        assert next(stream).kind == "subagent/end"
        stream.close()  # leaving the loop early stops astream on the portal
        events = hub.stream(kinds=["subagent/start", "subagent/end", "hub/closed"], history=True, timeout=5)
        first = next(events)  # subscribed from here on
        hub.spawn("two")
        hub.close()
        rest = [event.kind for event in events]  # what was queued is still read after the close
    assert first.kind == "subagent/start" and rest == ["subagent/end", "subagent/start", "subagent/end", "hub/closed"]


def test_activity_counts_what_runs_and_kill_job_stops_any_job_of_the_tree():
    release = asyncio.Event()

    async def slow(request):
        if request.label == "bg":
            await release.wait()
        return "done"

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(slow), ids="sequential") as hub:
            job = await hub.spawn("wait", label="bg", background=True)
            await asyncio.sleep(0.05)
            before = hub.activity
            line = await hub.kill_job(job.id)
            await job.output(wait=True, timeout=5)
            again = await hub.kill_job(job.id)
            with pytest.raises(tn.UsageError) as error:
                await hub.kill_job("subagent-9")
            return before, line, again, str(error.value), hub.activity

    before, line, again, error, after = asyncio.run(main())
    assert (before.running_agents, before.active_jobs, before.job_children) == (
        ("agent-1",), ("subagent-1",), frozenset({"agent-1"}))
    assert before.line() == "1 agent running · 1 job active · 0 tokens"
    assert line == "requested cancellation of job subagent-1"
    assert again.startswith("job subagent-1 had already finished") and error == "subagent-9 is not a job"
    assert after.active_jobs == () and after.line() == "0 agents running · 0 tokens"
