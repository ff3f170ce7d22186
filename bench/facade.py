"""Sync facade round trip: one blocking call from the main thread to a trivial coroutine on the portal.

``facade``: ``toh_nb.notebook.portal.call(trivial)`` N times from the main thread (the portal's loop
runs in its daemon thread; ``trivial`` is ``async def trivial(): return 1``), each call timed on its own
with ``perf_counter_ns``: median, p99 and mean in µs (``rate_per_s`` = calls per second).

``facade_hub``: a whole sync-facade method, ``toh_nb.Hub(...).list_agents()`` on an empty hub, when
the sync ``Hub`` exists (skipped otherwise).

Floor: the least a cross-thread round trip to a coroutine can cost: ``loop.call_soon_threadsafe`` of a
callback that starts the coroutine as a task whose done-callback releases a ``threading.Lock`` the
caller blocks on. ``stdlib_median_us`` is ``asyncio.run_coroutine_threadsafe(...).result()`` for
comparison (what a naive portal costs).

If ``toh_nb.notebook.portal`` cannot be imported, the figure is measured against a minimal local
portal defined in this file and says so (``"portal": "local stand-in"``).
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time

import _common as c

TARGET_MEDIAN_US = 100.0  # SPEC §8: a sync facade call to a trivial coroutine costs <= 100 µs at the median


async def trivial() -> int:
    return 1


class LoopThread:
    """A bare event loop in a daemon thread (for the floor and the local stand-in portal)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._main, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait()

    def _main(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(ready.set)
        self.loop.run_forever()

    def floor_call(self, fn) -> object:
        """The physical minimum: hand over, run as a task, release a lock from the done callback."""
        lock = threading.Lock()
        lock.acquire()
        box: list = []

        def done(task: asyncio.Task) -> None:
            box.append(task.result())
            lock.release()

        def start() -> None:
            self.loop.create_task(fn()).add_done_callback(done)

        self.loop.call_soon_threadsafe(start)
        lock.acquire()
        return box[0]

    def stdlib_call(self, fn) -> object:
        return asyncio.run_coroutine_threadsafe(fn(), self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def sample(calls: list, n: int, warmup: int = 500) -> list[list[float]]:
    """Time each of ``calls`` n times, interleaved (call 1, call 2, …, call 1, …) so that all of them
    see the same machine conditions; µs per call, one list per callable."""
    for _ in range(warmup):
        for call in calls:
            call()
    out: list[list[float]] = [[] for _ in calls]
    clock = time.perf_counter_ns
    for _ in range(n):
        for call, times in zip(calls, out):
            t = clock()
            call()
            times.append((clock() - t) / 1000.0)
    return out


def summary(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {"median_us": round(statistics.median(ordered), 2),
            "p99_us": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
            "mean_us": round(statistics.fmean(ordered), 2)}


def main() -> None:
    args = c.parser(__doc__.splitlines()[0], [10000]).parse_args()
    bare = LoopThread()
    try:
        try:
            from toh_nb.notebook import portal as real_portal

            portal_call = real_portal.call
            portal_name = "toh_nb.notebook.portal"
        except Exception as error:  # not written yet: measure a minimal stand-in, clearly labelled
            local = LoopThread()
            portal_call = local.floor_call
            portal_name = f"local stand-in (toh_nb.notebook.portal unavailable: {type(error).__name__})"
        for n in args.n:
            best = floor = stdlib = None
            for _ in range(max(1, args.repeat)):
                runs = sample([lambda: portal_call(trivial), lambda: bare.floor_call(trivial),
                               lambda: bare.stdlib_call(trivial)], n)
                stats, floor_stats, stdlib_stats = (summary(r) for r in runs)
                if best is None or stats["median_us"] < best["median_us"]:
                    best, floor, stdlib = stats, floor_stats, stdlib_stats
            seconds = best["mean_us"] * n / 1e6
            fig = c.figure("facade", n, seconds, None, portal=portal_name, **best,
                           floor_median_us=floor["median_us"], floor_p99_us=floor["p99_us"],
                           stdlib_median_us=stdlib["median_us"], stdlib_p99_us=stdlib["p99_us"],
                           ratio=round(best["median_us"] / floor["median_us"], 2) if floor["median_us"] else None,
                           target_median_us=TARGET_MEDIAN_US, meets_target=best["median_us"] <= TARGET_MEDIAN_US)
            c.emit(fig, args.json)
            hub_figure(n, floor, args.json)
    finally:
        bare.stop()


def hub_figure(n: int, floor: dict, as_json: bool) -> None:
    """``Hub().list_agents()`` through the sync facade, if the sync Hub exists."""
    try:
        import toh_nb

        from toh_nb.models.function import FunctionModel

        hub = toh_nb.Hub(model=FunctionModel(lambda request: "ok"))
    except Exception as error:
        c.skipped("facade_hub", f"the sync toh_nb.Hub is not available: {type(error).__name__}: {error}", as_json)
        return
    try:
        stats = summary(sample([lambda: hub.list_agents()], n)[0])
    except Exception as error:
        c.skipped("facade_hub", f"Hub.list_agents() failed: {type(error).__name__}: {error}", as_json)
        return
    finally:
        try:
            hub.close()
        except Exception:
            pass
    c.emit(c.figure("facade_hub", n, stats["mean_us"] * n / 1e6, None, call="Hub.list_agents()", **stats,
                    floor_median_us=floor["median_us"],
                    ratio=round(stats["median_us"] / floor["median_us"], 2) if floor["median_us"] else None,
                    target_median_us=TARGET_MEDIAN_US, meets_target=stats["median_us"] <= TARGET_MEDIAN_US),
           as_json)


if __name__ == "__main__":
    main()
