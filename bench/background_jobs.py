"""N background one-shot jobs, started and collected by the root agent's model.

The reference caps active jobs at 10 per owner, so two figures:

- ``background_jobs``: ``AsyncHub(max_jobs_per_owner=N)``. The root's model starts N background
  children in one message (N ``subagent`` calls with ``run_in_background: true``), then collects them
  in one message of N ``job_output`` calls with ``wait: true``, then answers.
- ``background_jobs_batched``: the default cap of 10. The root's model works in batches of 10: one
  message of 10 background starts, one message of 10 ``job_output`` waits, and so on.

Both run with the default tool pool of 10. The completion notices of jobs that finish while the root
is busy are injected into its next step (so the root also reads N notices): that is part of the
figure. Each job's output is checked (``ok`` and ``[status: completed]``). Timed: ``hub.run``.

Floor: N job tasks created at once, each awaiting one child task; then each job awaited in turn.
"""

from __future__ import annotations

import asyncio

import _common as c


def _job_output(job_number: int) -> object:
    from toh_nb.core.content import ToolCall

    return ToolCall("job_output", {"job_id": f"subagent-{job_number}", "wait": True})


async def engine(n: int, batch: int | None) -> float:
    from toh_nb.core.session import TOOL_RESULT
    from toh_nb.hub import AsyncHub
    from toh_nb.testing import engine_of

    size = n if batch is None else batch
    rounds = -(-n // size)

    def reply(request):
        if request.depth > 0:
            return "ok"
        step = request.step
        if step > 2 * rounds:
            return "done"
        first = (step - 1) // 2 * size
        numbers = range(first, min(n, first + size))
        if step % 2 == 1:
            return c.calls([c.delegate_call(i, run_in_background=True) for i in numbers])
        return c.calls([_job_output(i + 1) for i in numbers])

    cap = n if batch is None else 10
    async with AsyncHub(c.model(reply), ids="sequential", max_jobs_per_owner=cap, max_steps=None) as hub:
        start = c.now()
        result = await hub.run("start background jobs and collect them")
        seconds = c.now() - start
        results = [e.message for e in engine_of(hub).root.session.events if e.kind == TOOL_RESULT]
    started = [m for m in results if m.text.startswith("started background subagent job")]
    collected = [m for m in results if m.text.startswith("ok") and "[status: completed]" in m.text]
    if result.stop_reason != "completed" or len(started) != n or len(collected) != n:
        errors = [m.text for m in results if m.content[0].is_error][:3]
        raise SystemExit(f"background_jobs: run {result.stop_reason}, {len(started)} started, "
                         f"{len(collected)} collected of {n}; errors: {errors}")
    return seconds


async def floor(n: int) -> float:
    loop = asyncio.get_running_loop()

    async def child() -> str:
        return "ok"

    async def job() -> str:
        return await loop.create_task(child())

    start = c.now()
    jobs = [loop.create_task(job()) for _ in range(n)]
    for task in jobs:
        await task
    return c.now() - start


async def main() -> None:
    args = c.parser(__doc__.splitlines()[0], [1000, 10000]).parse_args()
    if not args.no_warmup:
        await engine(20, None)
        await engine(20, 10)
        await floor(20)
    for n in args.n:
        floor_seconds = await c.best_of(args.repeat, lambda: floor(n))
        for name, batch in (("background_jobs", None), ("background_jobs_batched", 10)):
            seconds = await c.best_of(args.repeat, lambda: engine(n, batch))
            c.emit(c.figure(name, n, seconds, floor_seconds, max_jobs_per_owner=n if batch is None else 10,
                            batch=batch or n), args.json)


if __name__ == "__main__":
    c.run_main(main)
