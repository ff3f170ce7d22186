"""Memory per idle continuable child.

N continuable children are started with ``hub.start`` and left to settle (each ran one turn and now
lists as ``ready``). What stays is what an idle child costs: its session log, its store entry, the
settlement notice queued for the root's next turn, the lifecycle events in the hub's history.
Two measurements, each on a fresh hub after a warm-up, with garbage collected before and after:

- ``rss_bytes_per_child``: the growth of ``VmRSS`` (``/proc/self/status``) divided by N (includes
  allocator slack and fragmentation, i.e. what the process really holds);
- ``bytes_per_child``: the growth of ``tracemalloc``'s traced memory divided by N (Python objects
  only, exact), with the top allocation sites (``top_sites``, bytes per child, file:line). It leaves
  out asyncio's registry of all tasks (a ``WeakSet``; its allocations are the ones made in
  ``_weakrefset.py``), reported as ``task_registry_bytes_per_child``: an idle child has no task, so
  all the registry holds for it is hash-table room sized by the most tasks ever alive at once, which
  never shrinks — and the traced run was charged for replacing a table that the untraced runs before
  it had allocated (210 B per child at 10,000 after the floor's run, 0 right after the engine's).

``meets_target`` compares the larger of the two with SPEC §8's ≤ 20 KB (20,480 bytes) per idle child.
``seconds`` is the time to start and settle the N children in the untraced run. ``--repeat`` is
ignored (memory is measured once). ``--store DIR`` measures the same with the JSONL store (``memory_jsonl``).

Floor: N idle bare "children", each an ``asyncio.Queue`` with a worker task suspended on ``get()``
(the naive one-task-per-child design), measured the same two ways.
"""

from __future__ import annotations

import asyncio
import os
import tracemalloc

import _common as c

TARGET_BYTES = 20 * 1024
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))


async def _children(n: int, store: str | None, fsync: str | None, *, trace: bool) -> dict:
    from toh_nb.hub import AsyncHub

    hub = AsyncHub(c.model(lambda request: "ok"), ids="sequential", store=store, fsync=fsync)
    try:
        c.settle_gc()
        before_rss = c.proc_status_kb("VmRSS")
        before_snapshot = tracemalloc.take_snapshot() if trace else None
        before_traced = tracemalloc.get_traced_memory()[0] if trace else 0
        start = c.now()
        children = [await hub.start(f"you are worker {i}", label=f"worker {i}") for i in range(n)]
        for child in children:
            await child.wait()
        seconds = c.now() - start
        del children
        c.settle_gc()
        after_rss = c.proc_status_kb("VmRSS")
        out = {"seconds": seconds, "rss_bytes": (after_rss - before_rss) * 1024 if after_rss else None}
        if trace:
            after_snapshot = tracemalloc.take_snapshot()
            stats = after_snapshot.compare_to(before_snapshot, "lineno")
            registry = sum(s.size_diff for s in stats if _in_task_registry(s.traceback[0]))
            out["traced_bytes"] = tracemalloc.get_traced_memory()[0] - before_traced - registry
            out["registry_bytes"] = registry
            out["top_sites"] = [[_site(s.traceback[0]), round(s.size_diff / n)] for s in stats
                                if not _in_task_registry(s.traceback[0])][:10]
        listing = await hub.list_agents()
        if len(listing) != n or any(e.status != "ready" for e in listing):
            raise SystemExit(f"memory: {len(listing)} listed of {n}, not all ready")
    finally:
        await hub.close()
    return out


def _in_task_registry(frame: tracemalloc.Frame) -> bool:
    """An allocation of asyncio's registry of all tasks (the only ``WeakSet`` these runs use)."""
    return os.path.basename(frame.filename) == "_weakrefset.py"


def _site(frame: tracemalloc.Frame) -> str:
    path = frame.filename
    for root in (os.path.dirname(BENCH_DIR), os.path.dirname(os.__file__)):
        if path.startswith(root + os.sep):
            path = os.path.relpath(path, root)
            break
    return f"{path}:{frame.lineno}"


async def _floor(n: int, *, trace: bool) -> dict:
    loop = asyncio.get_running_loop()

    async def worker(queue: asyncio.Queue) -> None:
        while True:
            await queue.get()

    c.settle_gc()
    before_rss = c.proc_status_kb("VmRSS")
    before_traced = tracemalloc.get_traced_memory()[0] if trace else 0
    queues = [asyncio.Queue() for _ in range(n)]
    tasks = [loop.create_task(worker(q)) for q in queues]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    c.settle_gc()
    after_rss = c.proc_status_kb("VmRSS")
    out = {"rss_bytes": (after_rss - before_rss) * 1024 if after_rss else None,
           "traced_bytes": tracemalloc.get_traced_memory()[0] - before_traced if trace else None}
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return out


async def main() -> None:
    args = c.parser(__doc__.splitlines()[0], [1000, 10000], store=True).parse_args()
    name = c.store_variant(args, "memory")
    if name is None:
        return
    await c.warm_up(args, lambda d: _children(20, d, args.fsync, trace=False), lambda: _floor(20, trace=False))
    for n in args.n:
        with c.RunDir(args.store, args.keep) as d:
            plain = await _children(n, d, args.fsync, trace=False)
        floor_plain = await _floor(n, trace=False)
        tracemalloc.start()
        try:
            with c.RunDir(args.store, args.keep) as d:
                traced = await _children(n, d, args.fsync, trace=True)
            floor_traced = await _floor(n, trace=True)
        finally:
            tracemalloc.stop()
        per_child = traced["traced_bytes"] / n
        rss_per_child = plain["rss_bytes"] / n if plain["rss_bytes"] is not None else None
        floor_per_child = floor_traced["traced_bytes"] / n
        worst = max(per_child, rss_per_child or 0)
        fig = c.figure(name, n, plain["seconds"], None,
                       bytes_per_child=round(per_child), rss_bytes_per_child=round(rss_per_child or 0),
                       task_registry_bytes_per_child=round(traced["registry_bytes"] / n),
                       floor_bytes_per_child=round(floor_per_child),
                       floor_rss_bytes_per_child=round((floor_plain["rss_bytes"] or 0) / n),
                       ratio=round(per_child / floor_per_child, 1) if floor_per_child else None,
                       target_bytes_per_child=TARGET_BYTES, meets_target=worst <= TARGET_BYTES,
                       top_sites=traced["top_sites"])
        fig.update(c.store_fields(args))
        c.emit(fig, args.json)


if __name__ == "__main__":
    c.run_main(main)
