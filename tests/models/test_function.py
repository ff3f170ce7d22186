"""Sync model functions run off the shared loop: a slow one never stalls other agents or hubs."""

from __future__ import annotations

import asyncio
import threading

import toh_nb as tn


def test_a_sleeping_sync_model_does_not_stop_another_hub_on_the_same_loop():
    ticks = []
    release = threading.Event()

    def slow(req):
        # blocks until the other hub has made progress; on the loop's own thread that never happens
        return "slow done" if release.wait(3) else "stalled the loop"

    async def ticker(req):
        return "tick"

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(slow)) as blocked, tn.AsyncHub(tn.FunctionModel(ticker)) as free:
            slow_run = asyncio.ensure_future(blocked.run("wait"))
            for _ in range(5):
                ticks.append((await free.run("go")).text)
            release.set()
            assert (await slow_run).text == "slow done"

    asyncio.run(main())
    assert ticks == ["tick"] * 5


def test_a_timed_out_sync_model_does_not_hold_up_the_next_run():
    release = threading.Event()  # set only after the second run has finished
    seen = []

    def model(req):
        if req.turn == 1:
            release.wait(5)
            seen.append("first finished")
            return "late"
        seen.append("second ran")
        return "prompt answer"

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model)) as hub:
            first = await hub.run("one", timeout=0.1)
            assert first.stop_reason == "aborted"
            second = await hub.run("two")
            release.set()
            return second.text

    assert asyncio.run(main()) == "prompt answer"
    assert seen[0] == "second ran"  # it did not wait for the first turn's still-blocked thread


def test_a_model_object_with_a_sync_request_method_works():
    class Plain:
        def request(self, req):
            return tn.ModelResponse(text=f"{threading.current_thread() is threading.main_thread()}")

    async def main():
        async with tn.AsyncHub(Plain()) as hub:
            return (await hub.run("hi")).text

    assert asyncio.run(main()) == "False"  # ran in a worker thread, not on the loop's thread


def test_async_detection_covers_functions_methods_objects_and_partials():
    import functools

    from toh_nb.core.model import is_async_callable

    async def coro(req):
        return "x"

    def plain(req):
        return "x"

    class AsyncCall:
        async def __call__(self, req):
            return "x"

    class SyncCall:
        def __call__(self, req):
            return "x"

    class Model:
        async def request(self, req):
            return "x"

    assert [is_async_callable(f) for f in (coro, plain, AsyncCall(), SyncCall(), Model().request,
                                           functools.partial(coro), functools.partial(plain),
                                           lambda req: "x")] == [True, False, True, False, True, True, False, False]
