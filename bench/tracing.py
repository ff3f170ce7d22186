"""Overhead of tracing per delegation: the same N sequential delegations with ``tracing=`` off and on.

The root agent's model asks for one ``subagent`` call per step, N steps in a row (one ``hub.run``);
each child answers at once (the ``sequential`` benchmark's work). ``off``: no tracing (no listener:
activity events are not even built). ``on``: ``tracing=<SDK TracerProvider>`` with a
SimpleSpanProcessor into the SDK's in-memory exporter (every span made, ended and exported
synchronously; 4 spans per delegation: the root's chat and execute_tool, the child's invoke_agent and
chat, plus the root's one turn). Printed: microseconds per delegation for each, and the ratio on/off
(best of ``--repeat`` runs each), in wall-clock time and in this process's CPU time: on a shared
machine other processes stretch the first (the run is single-threaded, so the second is what it costs).
``--calls`` also counts the Python function calls per delegation (one more run each way under
``cProfile``): a figure no other process can stretch. Run: ``python bench/tracing.py [-n 500]
[--repeat 3] [--calls]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import _common as c


async def run(n: int, provider) -> tuple[float, float]:
    from toh_nb.hub import AsyncHub

    def reply(request):
        if request.depth == 0:
            return c.calls([c.delegate_call(request.step)]) if request.step <= n else "done"
        return "ok"

    hub = AsyncHub(c.model(reply), ids="sequential", max_steps=None, tracing=provider)
    try:
        start, cpu = time.perf_counter(), time.process_time()
        result = await hub.run("delegate, one child at a time")
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        await hub.close()
    if result.stop_reason != "completed" or result.text != "done":
        raise SystemExit(f"tracing: the root's run ended {result.stop_reason}: {result.text!r}")
    return seconds, cpu


async def calls_per_delegation(n: int, provider) -> float:
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    try:
        await run(n, provider)
    finally:
        profile.disable()
    return pstats.Stats(profile).total_calls / n


async def main(n: int, repeat: int, calls: bool) -> None:
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        print("tracing: skipped (the otel extra is not installed)")
        return
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    await run(50, None)
    await run(50, provider)  # warm both paths
    off = on = off_cpu = on_cpu = float("inf")
    spans = 0
    for _ in range(repeat):
        wall, cpu = await run(n, None)
        off, off_cpu = min(off, wall), min(off_cpu, cpu)
        exporter.clear()
        wall, cpu = await run(n, provider)
        on, on_cpu = min(on, wall), min(on_cpu, cpu)
        spans = len(exporter.get_finished_spans())
    print(f"tracing: {n} sequential delegations ({spans} spans), best of {repeat}: "
          f"wall off {off / n * 1e6:.1f} us/delegation, on {on / n * 1e6:.1f}, ratio {on / off:.2f}; "
          f"cpu off {off_cpu / n * 1e6:.1f} us/delegation, on {on_cpu / n * 1e6:.1f}, "
          f"overhead {(on_cpu - off_cpu) / n * 1e6:.1f} us per delegation, ratio on/off {on_cpu / off_cpu:.2f}")
    if calls:
        off_calls, on_calls = await calls_per_delegation(n, None), await calls_per_delegation(n, provider)
        print(f"tracing: Python function calls per delegation: off {off_calls:.0f}, on {on_calls:.0f}, "
              f"overhead {on_calls - off_calls:.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", action="store_true", help="also count function calls per delegation")
    args = parser.parse_args()
    asyncio.run(main(args.n, args.repeat, args.calls))
