"""Profile one benchmark's engine run (not its floor): where the time goes, by file:line.

    python bench/profile_engine.py sequential --n 10000
    python bench/profile_engine.py continuable --n 10000 --sort cumulative
    python bench/profile_engine.py sequential --n 1000 --store /tmp/bench-runs      # the JSONL store
    python bench/profile_engine.py one_message --n 10000 --arg 10                   # extra positional args
    python bench/profile_engine.py background_jobs --n 10000 --arg None --no-gc     # without the cyclic GC
    python bench/profile_engine.py sequential --n 10000 --pyinstrument              # call tree (if installed)

Runs a small warm-up first, then the script's ``engine(n, *args)`` under cProfile (default) or
pyinstrument, and prints the top entries, then ``per_delegation``: the Python calls (cProfile's count,
primitive and recursive) and the event loop's passes (iterations of its run loop, counted by a loop
subclass) of the profiled run divided by ``n`` — one delegation per unit of ``n`` in every script
here. Both are independent of the machine's speed, so they compare two versions of the engine. ``--no-gc`` disables the cyclic garbage collector for the
profiled run, to separate GC pauses (which cProfile charges to whatever function was allocating)
from the engine's own work. ``--store DIR`` passes a fresh sub-directory of DIR as the engine's
``store`` argument (sequential and continuable only).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib
import io
import os
import pstats
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _common as c  # noqa: E402


def _value(text: str):
    if text == "None":
        return None
    try:
        return int(text)
    except ValueError:
        return text


class CountingLoop(asyncio.SelectorEventLoop):
    """The default loop, counting its passes (one per run of ready callbacks after a select)."""

    passes = 0

    def _run_once(self) -> None:
        self.passes += 1
        super()._run_once()


def per_delegation(n: int, calls: int, passes: int) -> str:
    """The line the figures are read from (a fixed format: compared between two versions)."""
    return (f"per_delegation: n={n} python_calls={calls / n:.1f} loop_passes={passes / n:.2f} "
            f"(total calls {calls}, passes {passes})")


async def _run(args: argparse.Namespace) -> None:
    module = importlib.import_module(args.bench)
    extra = [_value(a) for a in args.arg]

    def call(n: int, directory: str | None):
        if args.store is not None:
            return module.engine(n, directory, *extra)
        return module.engine(n, *extra)

    with c.RunDir(args.store) as d:
        await call(20, d)
    c.settle_gc()
    if args.no_gc:
        gc.disable()
    with c.RunDir(args.store) as d:
        if args.pyinstrument:
            from pyinstrument import Profiler

            profiler = Profiler(async_mode="enabled", interval=0.0005)
            profiler.start()
            result = await call(args.n, d)
            profiler.stop()
            print(result)
            print(profiler.output_text(unicode=True, color=False, show_all=False))
        else:
            loop = asyncio.get_running_loop()
            profile = cProfile.Profile()
            passes = loop.passes
            profile.enable()
            result = await call(args.n, d)
            profile.disable()
            passes = loop.passes - passes
            print(result)
            for sort in args.sort:
                out = io.StringIO()
                stats = pstats.Stats(profile, stream=out)
                stats.sort_stats(sort).print_stats(args.top)
                print(out.getvalue().replace(os.path.dirname(HERE) + os.sep, ""))
            print(per_delegation(args.n, pstats.Stats(profile).total_calls, passes))
    gc.enable()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bench", choices=["sequential", "one_message", "many_roots", "background_jobs", "continuable"],
                   help="the benchmark script (without .py)")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--arg", action="append", default=[], help="extra positional argument of engine() (repeatable)")
    p.add_argument("--store", default=None, metavar="DIR", help="JSONL store: runs go to fresh sub-directories of DIR")
    p.add_argument("--sort", action="append", default=None, help="pstats sort key(s) (default: tottime, cumulative)")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--no-gc", action="store_true", help="disable the cyclic GC during the profiled run")
    p.add_argument("--pyinstrument", action="store_true", help="use pyinstrument (call tree) instead of cProfile")
    args = p.parse_args()
    args.sort = args.sort or ["tottime", "cumulative"]
    with asyncio.Runner(loop_factory=CountingLoop) as runner:
        runner.run(_run(args))


if __name__ == "__main__":
    main()
