"""Sync user code runs on its hub's own threads (toh_nb.core.threads): a sync tool stuck after its turn
timed out keeps its thread, but never starves the engine, the same hub's next run, or another hub."""

from __future__ import annotations

import asyncio
import threading

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core import threads as threads_module
from toh_nb.core.events import ToolAbandoned

STUCK = 8  # more than the loop's default executor has threads on a small machine (min(32, cpus + 4))


def _stuck_hub(release: threading.Event, started: list, **options) -> tn.AsyncHub:
    def wait_forever(n: int) -> str:
        """Block until released (like ``input()`` or a hung socket)."""
        started.append(n)
        release.wait(30)
        return "late"

    def answer(request):  # a sync model function: it needs a thread for every step
        if request.label == "stuck" and request.step == 1:
            return tn.ModelResponse(tool_calls=[tn.ToolCall("wait_forever", {"n": 1})])
        return "hello back"

    return tn.AsyncHub(tn.FunctionModel(answer), tools=[wait_forever], ids="sequential", **options)


def test_stuck_sync_tools_leave_the_hub_and_other_hubs_working():
    release = threading.Event()
    started: list = []

    async def main():
        async with _stuck_hub(release, started) as hub, tn.AsyncHub(tn.FunctionModel(lambda r: "other")) as other:
            events = []
            hub.view.subscribe(lambda e: events.append(e) if isinstance(e, ToolAbandoned) else None)
            results = await asyncio.gather(*[hub.spawn(f"stuck {i}", label="stuck", turn_timeout=0.3)
                                             for i in range(STUCK)])
            assert [r.stop_reason for r in results] == ["max-time"] * STUCK
            assert len(started) == STUCK
            # the same hub: a plain run (its sync model needs a thread) still answers
            plain = await hub.run("hello", timeout=20)
            assert (plain.stop_reason, plain.text) == ("completed", "hello back")
            # another hub is untouched
            other_run = await other.run("hi", timeout=20)
            assert (other_run.stop_reason, other_run.text) == ("completed", "other")
            # the abandoned calls are counted on their agents and were announced on the stream
            rows = await hub.agents()
            stuck_rows = [row for row in rows if row["label"] == "stuck"]
            assert [row["abandoned_tools"] for row in stuck_rows] == [1] * STUCK
            assert next(row for row in rows if row["id"] == hub.root)["abandoned_tools"] == 0
            assert len(events) == STUCK
            assert {e.agent_id for e in events} == {row["id"] for row in stuck_rows}
            assert events[-1].name == 'tool "wait_forever"'
            assert events[-1].detail == ('tool "wait_forever" still runs after its turn ended; its thread is left '
                                         f"to finish on its own ({STUCK} abandoned in this hub)")
            assert [r for r in await hub.events() if r["kind"] == "tool/abandoned"][0]["detail"] == events[0].detail
            release.set()
            await _until(lambda: not engine_of(hub).runtime.user_threads.abandoned())
            assert [row["abandoned_tools"] for row in await hub.agents()] == [0] * (STUCK + 1)

    try:
        asyncio.run(main())
    finally:
        release.set()


def test_past_the_cap_a_sync_tool_fails_fast_naming_the_stuck_ones(monkeypatch):
    monkeypatch.setattr(threads_module, "MAX_ABANDONED", 2)
    release = threading.Event()
    started: list = []

    async def main():
        async with _stuck_hub(release, started) as hub:
            for _ in range(2):
                result = await hub.spawn("stuck", label="stuck", turn_timeout=0.3)
                assert result.stop_reason == "max-time"
            refused = await hub.call_tool("wait_forever", n=3)
            assert refused.is_error
            assert refused.text == (
                'Error: no thread for tool "wait_forever": 2 sync calls of this hub are still running after '
                'their turns ended (tool "wait_forever" (agent agent-1), tool "wait_forever" (agent agent-2)); '
                "each keeps its thread until its function returns (Python cannot stop a thread), and the hub "
                "refuses new sync calls while 2 are stuck")
            assert len(started) == 2  # the refused call never ran
            # a sync model function is refused the same way: the turn ends with that error
            run = await hub.run("hello", check=False)
            assert run.stop_reason == "error"
            assert run.diagnostic.startswith("no thread for model function answer: 2 sync calls of this hub")
            release.set()
            await _until(lambda: not engine_of(hub).runtime.user_threads.abandoned())
            assert (await hub.run("hello")).text == "hello back"

    try:
        asyncio.run(main())
    finally:
        release.set()


def test_close_does_not_wait_for_an_abandoned_thread():
    release = threading.Event()
    started: list = []

    async def main():
        hub = _stuck_hub(release, started)
        job = await hub.spawn("stuck", label="stuck", background=True)
        await _until(lambda: started)
        await asyncio.wait_for(hub.close(), 10)  # disposes the turn; the thread is left running
        assert job.status == "killed"
        assert engine_of(hub).runtime.user_threads.abandoned() == [("agent-1", 'tool "wait_forever"')]
        with pytest.raises(tn.UsageError, match="this hub is closed"):
            await engine_of(hub).runtime.user_threads.run(print, name="x")

    try:
        asyncio.run(main())
    finally:
        release.set()


def test_user_code_never_runs_on_the_default_executor_or_the_engine_threads():
    names = []

    def where() -> str:
        """Say which thread runs this."""
        names.append(threading.current_thread().name)
        return "here"

    def model(request):
        names.append(threading.current_thread().name)
        if request.step == 1:
            return tn.ModelResponse(tool_calls=[tn.ToolCall("where", {})])
        return "done"

    with tn.Hub(tn.FunctionModel(model), tools=[where]) as hub:
        assert hub.run("go").text == "done"
    assert len(names) == 3 and all(name.startswith("toh-user-") for name in names), names


async def _until(predicate, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)
