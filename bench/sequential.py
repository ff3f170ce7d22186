"""Sequential delegations through the ``subagent`` tool.

The root agent's model asks for one ``subagent`` call per step, N steps in a row (one ``hub.run``);
each child answers at once. Timed: ``hub.run`` from submission to the root's final answer (hub
creation and close are outside the figure; ``close_seconds`` is printed beside it). ``gc_seconds``
(inside the collector, per generation) and ``cpu_seconds`` (the process's CPU time) cover the same
span: with several sizes, the throughput kept at the largest size is printed from wall and CPU time.

Floor: N iterations of "create a task that puts its answer into a queue, await it, take the answer".

``--store DIR`` runs the same work with the JSONL store (a fresh sub-directory of DIR per run) and
names the figure ``sequential_jsonl``; it is skipped with a message when the JSONL store is missing.
"""

from __future__ import annotations

import asyncio

import _common as c

TARGET_MEMORY = 1000  # SPEC §8: >= 1,000 sequential delegations/s in memory
TARGET_JSONL = 500  # SPEC §8: >= 500/s with the JSONL store


async def engine(n: int, store: str | None = None, fsync: str | None = None) -> dict:
    from toh_nb.core.session import TOOL_RESULT
    from toh_nb.hub import AsyncHub
    from toh_nb.testing import engine_of

    def reply(request):
        if request.depth == 0:
            return c.calls([c.delegate_call(request.step)]) if request.step <= n else "done"
        return "ok"

    hub = AsyncHub(c.model(reply), ids="sequential", store=store, fsync=fsync, max_steps=None)  # one long turn
    try:
        with c.GcClock() as clock:
            start = c.now()
            result = await hub.run("delegate, one child at a time")
            seconds = c.now() - start
        results = [e for e in engine_of(hub).root.session.events if e.kind == TOOL_RESULT]
    finally:
        closing = c.now()
        await hub.close()
        close_seconds = c.now() - closing
    if result.stop_reason != "completed" or result.text != "done":
        raise SystemExit(f"sequential: the root's run ended {result.stop_reason}: {result.text!r}")
    bad = [e.message.text for e in results if e.message.text != "ok"]
    if len(results) != n or bad:
        raise SystemExit(f"sequential: expected {n} results 'ok', got {len(results)} ({bad[:3]})")
    return {"seconds": seconds, "close_seconds": close_seconds, **clock.fields()}


async def floor(n: int) -> float:
    queue: asyncio.Queue = asyncio.Queue()

    async def child(i: int) -> None:
        await queue.put(i)

    loop = asyncio.get_running_loop()
    start = c.now()
    for i in range(n):
        await loop.create_task(child(i))
        await queue.get()
    return c.now() - start


async def main() -> None:
    args = c.parser(__doc__.splitlines()[0], [1000, 10000], store=True).parse_args()
    name = c.store_variant(args, "sequential")
    if name is None:
        return
    target = TARGET_MEMORY if args.store is None else TARGET_JSONL
    await c.warm_up(args, lambda d: engine(20, d, args.fsync), lambda: floor(20))
    figures: list[dict] = []
    for n in args.n:
        result = await c.best_of(args.repeat, lambda: c.in_run_dir(args, lambda d: engine(n, d, args.fsync)),
                                 key=lambda r: r["seconds"])
        floor_seconds = await c.best_of(args.repeat, lambda: floor(n))
        extra = {"close_seconds": round(result["close_seconds"], 6), "gc_seconds": result["gc_seconds"],
                 "gc_collections": result["gc_collections"], "cpu_seconds": result["cpu_seconds"],
                 **c.store_fields(args, result)}
        fig = c.figure(name, n, result["seconds"], floor_seconds, target=target, **extra)
        figures.append(fig)
        c.emit(fig, args.json)
    if len(figures) > 1 and not args.json:
        print(c.kept_line(name, figures[0], figures[-1]), flush=True)


if __name__ == "__main__":
    c.run_main(main)
