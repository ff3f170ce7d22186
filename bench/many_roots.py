"""N root agents, each delegating once, started together.

Two shapes, both on one event loop (the reference figure is "N root agents each delegating once"):

- ``many_roots``: one ``AsyncHub`` whose runtime holds N root agents (the hub's own root plus N-1
  more, made the way the hub makes its root: a root session in the store + ``runtime.create_agent``
  with ``mode="root"``). All N get their prompt at once; each one's model makes one ``subagent``
  call, then answers. This is the figure to compare with the reference: it measures N concurrent
  roots, not N copies of the hub's composition.
- ``many_hubs``: N separate ``AsyncHub`` instances, each ``hub.run`` once, gathered. This includes
  what it costs to *build* a hub (tool schemas, providers, store, root), printed as the ``create``
  phase and as ``create_us_per_hub``; hub construction is the dominant cost, so by default it runs
  for N = 100 and 1,000 only.

Timed: creation + running (``phases`` splits them; ``close`` is printed but not in ``seconds``).

Floor: N root tasks created together, each creating one child task and awaiting it, all gathered.
"""

from __future__ import annotations

import asyncio
import time

import _common as c


def _reply(request):
    if request.depth == 0:
        return c.calls([c.delegate_call(0)]) if request.step == 1 else "done"
    return "ok"


async def engine_roots(n: int) -> dict:
    from toh_nb.core.content import user_message
    from toh_nb.core.session import SessionHeader
    from toh_nb.hub import AsyncHub
    from toh_nb.testing import engine_of

    hub = AsyncHub(c.model(_reply), ids="sequential")
    try:
        start = c.now()
        runtime = engine_of(hub).runtime  # the bench builds roots the way the hub does: engine internals
        roots = [engine_of(hub).root]
        for i in range(1, n):
            session = runtime.store.create(SessionHeader(f"root-{i}", time.time(), origin="root"))
            roots.append(runtime.create_agent(session, label=None, depth=0, parent=None, mode="root"))
        created = c.now()
        futures = [root.submit(user_message("delegate once", id=runtime.ids.message())) for root in roots]
        outcomes = await asyncio.gather(*futures)
        ran = c.now()
    finally:
        await hub.close()
    closed = c.now()
    bad = [o for o in outcomes if o.reason != "completed"]
    if bad:
        raise SystemExit(f"many_roots: {len(bad)} roots did not complete: {bad[:2]}")
    return {"seconds": ran - start, "phases": {"create": created - start, "run": ran - created,
                                               "close": closed - ran}}


async def engine_hubs(n: int) -> dict:
    from toh_nb.hub import AsyncHub

    model = c.model(_reply)
    start = c.now()
    hubs = [AsyncHub(model, ids="sequential") for _ in range(n)]
    created = c.now()
    try:
        results = await asyncio.gather(*(hub.run("delegate once") for hub in hubs))
        ran = c.now()
    finally:
        for hub in hubs:
            await hub.close()
    closed = c.now()
    bad = [r for r in results if r.stop_reason != "completed"]
    if bad:
        raise SystemExit(f"many_hubs: {len(bad)} runs did not complete")
    return {"seconds": ran - start, "phases": {"create": created - start, "run": ran - created,
                                               "close": closed - ran}}


engine = engine_roots  # what bench/profile_engine.py profiles


async def floor(n: int) -> float:
    loop = asyncio.get_running_loop()

    async def child() -> str:
        return "ok"

    async def root() -> str:
        return await loop.create_task(child())

    start = c.now()
    await asyncio.gather(*[loop.create_task(root()) for _ in range(n)])
    return c.now() - start


async def main() -> None:
    p = c.parser(__doc__.splitlines()[0], [100, 1000, 10000])
    p.add_argument("--hubs-max", type=int, default=1000,
                   help="run many_hubs only for sizes up to this (default 1000; hub creation is slow)")
    args = p.parse_args()
    if not args.no_warmup:
        await engine_roots(20)
        await engine_hubs(5)
        await floor(20)
    for n in args.n:
        floor_seconds = await c.best_of(args.repeat, lambda: floor(n))
        r = await c.best_of(args.repeat, lambda: engine_roots(n), key=lambda r: r["seconds"])
        c.emit(c.figure("many_roots", n, r["seconds"], floor_seconds,
                        phases={k: round(v, 6) for k, v in r["phases"].items()}), args.json)
        if n <= args.hubs_max:
            h = await c.best_of(args.repeat, lambda: engine_hubs(n), key=lambda r: r["seconds"])
            c.emit(c.figure("many_hubs", n, h["seconds"], floor_seconds,
                            phases={k: round(v, 6) for k, v in h["phases"].items()},
                            create_us_per_hub=round(h["phases"]["create"] / n * 1e6, 1)), args.json)


if __name__ == "__main__":
    c.run_main(main)
