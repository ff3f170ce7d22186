"""N delegations issued in one assistant message.

The root agent's model answers its first step with N ``subagent`` calls in one message, then gives a
final answer; each child answers at once. Two figures per N: the engine's rolling tool pool of 10
(``AsyncHub(max_parallel_tool_calls=10)``, the default and the reference's setting) and a pool as
large as the message (``max_parallel_tool_calls=N``). Timed: ``hub.run`` from submission to the root's
final answer.

Floor: the same rolling pool written bare — P workers, each creating one child task per call and
awaiting it, results stored in model order (P = 10 or N).
"""

from __future__ import annotations

import asyncio

import _common as c

TARGET = 2000  # SPEC §8: >= 2,000/s for 1,000 delegations issued in one assistant message


async def engine(n: int, pool: int) -> float:
    from toh_nb.core.session import TOOL_RESULT
    from toh_nb.hub import AsyncHub
    from toh_nb.testing import engine_of

    def reply(request):
        if request.depth == 0:
            return c.calls([c.delegate_call(i) for i in range(n)]) if request.step == 1 else "done"
        return "ok"

    async with AsyncHub(c.model(reply), ids="sequential", max_parallel_tool_calls=pool) as hub:
        start = c.now()
        result = await hub.run("delegate everything at once")
        seconds = c.now() - start
        results = [e for e in engine_of(hub).root.session.events if e.kind == TOOL_RESULT]
    if result.stop_reason != "completed" or len(results) != n or any(e.message.text != "ok" for e in results):
        raise SystemExit(f"one_message: run ended {result.stop_reason} with {len(results)} results")
    return seconds


async def floor(n: int, pool: int) -> float:
    loop = asyncio.get_running_loop()
    results: list = [None] * n
    cursor = 0

    async def child(i: int) -> str:
        return "ok"

    async def worker() -> None:
        nonlocal cursor
        while cursor < n:
            i = cursor
            cursor += 1
            results[i] = await loop.create_task(child(i))

    start = c.now()
    await asyncio.gather(*(worker() for _ in range(min(pool, n))))
    return c.now() - start


async def main() -> None:
    args = c.parser(__doc__.splitlines()[0], [1000, 10000]).parse_args()
    if not args.no_warmup:
        await engine(20, 10)
        await floor(20, 10)
    for n in args.n:
        for label, pool in (("pool10", 10), ("poolN", n)):
            seconds = await c.best_of(args.repeat, lambda: engine(n, pool))
            floor_seconds = await c.best_of(args.repeat, lambda: floor(n, pool))
            c.emit(c.figure(f"one_message_{label}", n, seconds, floor_seconds, target=TARGET, pool=pool),
                   args.json)


if __name__ == "__main__":
    c.run_main(main)
