"""N continuable children: start, settle, 10 messages each, settle, list.

Phases (each timed; ``seconds`` is their sum, ``ops`` counts N starts + 10·N sends):

1. ``start``: N ``hub.start(...)`` calls (each returns when the child's first message is accepted; no
   child runs before the last start returns, so all N are started "simultaneously");
2. ``settle``: wait until every child has settled (``child.wait()``): each ran its first turn and,
   its activation disposed, now lists as ``ready``;
3. ``send``: ``hub.send(child, message)`` 10 times per child (the first cold-resumes the settled
   child, the next 9 queue behind it as FIFO turns); each returns once its ``message/queued`` record
   is acknowledged by the store (free in memory; with ``--store`` one writer round trip per send, an
   fdatasync under ``--fsync always``, during which the child's turns already run);
4. ``settle2``: wait until every child has settled again (11 turns each in all);
5. ``list``: ``hub.list_agents()`` returns N entries, all ``ready`` (checked).

``--store DIR`` runs with the JSONL store and names the figure ``continuable_jsonl``.

SPEC §8 wants 10,000 children within 2× the throughput of 1,000: compare ``rate_per_s`` of the two
sizes (``run_all.py`` prints the ratio).

Floor: N bare "children" = an ``asyncio.Queue`` + a worker task that drains it and exits when empty
(start: create queue, put the prompt, create the task; settle: await the tasks; send: restart the
worker if it exited and put 10 messages; settle again; list: format N lines).
"""

from __future__ import annotations

import asyncio

import _common as c

MESSAGES = 10


async def engine(n: int, store: str | None = None, fsync: str | None = None) -> dict:
    from toh_nb.hub import AsyncHub

    turns = 0

    def reply(request):
        nonlocal turns
        turns += 1
        return "ok"

    hub = AsyncHub(c.model(reply), ids="sequential", store=store, fsync=fsync)
    phases: dict[str, float] = {}
    try:
        with c.GcClock() as clock:
            t0 = c.now()
            children = [await hub.start(f"you are worker {i}", label=f"worker {i}") for i in range(n)]
            t1 = c.now()
            for child in children:
                await child.wait()
            t2 = c.now()
            for child in children:
                for m in range(MESSAGES):
                    await hub.send(child.id, f"message {m}")
            t3 = c.now()
            for child in children:
                await child.wait()
            t4 = c.now()
            listing = await hub.list_agents()
            t5 = c.now()
        phases = {"start": t1 - t0, "settle": t2 - t1, "send": t3 - t2, "settle2": t4 - t3, "list": t5 - t4}
        text = str(listing)
    finally:
        closing = c.now()
        await hub.close()
        phases["close"] = c.now() - closing
    ready = sum(1 for e in listing if e.kind == "child" and e.status == "ready")
    if len(listing) != n or ready != n or turns != n * (MESSAGES + 1):
        raise SystemExit(f"continuable: {len(listing)} listed, {ready} ready, {turns} turns "
                         f"(expected {n}, {n}, {n * (MESSAGES + 1)}); first line {text.splitlines()[:1]}")
    return {"seconds": t5 - t0, "phases": phases, **clock.fields()}


async def floor(n: int) -> dict:
    loop = asyncio.get_running_loop()
    queues: list[asyncio.Queue] = []
    workers: list[asyncio.Task | None] = []

    async def worker(queue: asyncio.Queue) -> None:
        while not queue.empty():
            queue.get_nowait()
            await asyncio.sleep(0)  # one "turn" per message, each yielding once

    t0 = c.now()
    for i in range(n):
        q: asyncio.Queue = asyncio.Queue()
        q.put_nowait(f"you are worker {i}")
        queues.append(q)
        workers.append(loop.create_task(worker(q)))
    t1 = c.now()
    for task in workers:
        await task
    t2 = c.now()
    for i, q in enumerate(queues):
        for m in range(MESSAGES):
            q.put_nowait(f"message {m}")
            if workers[i].done():
                workers[i] = loop.create_task(worker(q))
    t3 = c.now()
    for task in workers:
        await task
    t4 = c.now()
    lines = "\n".join(f"agent-{i} [ready] \u2014 worker {i}" for i in range(n))
    t5 = c.now()
    assert lines
    return {"seconds": t5 - t0, "phases": {"start": t1 - t0, "settle": t2 - t1, "send": t3 - t2,
                                           "settle2": t4 - t3, "list": t5 - t4}}


async def main() -> None:
    args = c.parser(__doc__.splitlines()[0], [1000, 10000], store=True).parse_args()
    name = c.store_variant(args, "continuable")
    if name is None:
        return
    await c.warm_up(args, lambda d: engine(20, d, args.fsync), lambda: floor(20))
    figures: list[dict] = []
    for n in args.n:
        result = await c.best_of(args.repeat, lambda: c.in_run_dir(args, lambda d: engine(n, d, args.fsync)),
                                 key=lambda r: r["seconds"])
        base = await c.best_of(args.repeat, lambda: floor(n), key=lambda r: r["seconds"])
        extra = {"gc_seconds": result["gc_seconds"], "gc_collections": result["gc_collections"],
                 "cpu_seconds": result["cpu_seconds"], **c.store_fields(args, result)}
        fig = c.figure(name, n, result["seconds"], base["seconds"], ops=n * (1 + MESSAGES),
                       phases={k: round(v, 6) for k, v in result["phases"].items()},
                       floor_phases={k: round(v, 6) for k, v in base["phases"].items()}, **extra)
        figures.append(fig)
        c.emit(fig, args.json)
    if len(figures) > 1 and not args.json:
        print(c.kept_line(name, figures[0], figures[-1]), flush=True)


if __name__ == "__main__":
    c.run_main(main)
