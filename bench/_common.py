"""Shared plumbing of the benchmark scripts: arguments, figures, output, memory probes, floors.

Every script measures one shape of work twice: through the engine (an ``AsyncHub`` with a
zero-latency :class:`toh_nb.FunctionModel`) and as the *floor* — the same shape of work written with
bare asyncio tasks, futures and queues, i.e. what any asyncio program must pay at least. A figure is
one dict, printed as one JSON line with ``--json`` (else as one readable line):

``name``, ``n``, ``ops`` (units of work the rate counts; ``n`` unless stated), ``seconds``,
``rate_per_s`` (ops / seconds), ``floor_seconds``, ``floor_rate_per_s``, ``ratio`` (seconds /
floor_seconds: how many times the physical limit the engine costs), ``target`` (the SPEC §8 bar, if
the figure has one) and ``meets_target``, ``rss_mb`` / ``peak_rss_mb`` (this process, after the run),
plus figure-specific fields (phases, bytes per child, …).

The scripts live outside the package on purpose; run them as ``python bench/<name>.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Awaitable, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:  # run from a checkout without installing: the package is next door
    sys.path.insert(0, REPO)


# -- arguments -------------------------------------------------------------------------------------


def _sizes(text: str) -> list[int]:
    out = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        value = int(part.replace("_", ""))
        if value < 1:
            raise argparse.ArgumentTypeError(f"sizes must be >= 1, got {value}")
        out.append(value)
    if not out:
        raise argparse.ArgumentTypeError("give at least one size")
    return out


class _Parser(argparse.ArgumentParser):
    """Opts the benchmark's hubs in to the GC policy (``toh_nb.core.gc_policy``: off by default, a
    library leaves the process's collector alone) as soon as the arguments are parsed, before any hub
    exists; ``--no-gc-policy`` leaves it off."""

    def parse_args(self, *args: Any, **kwargs: Any) -> Any:
        parsed = super().parse_args(*args, **kwargs)
        from toh_nb.core import gc_policy

        gc_policy.set_enabled(not getattr(parsed, "no_gc_policy", False))
        return parsed


def parser(description: str, default_n: list[int], *, store: bool = False) -> argparse.ArgumentParser:
    p = _Parser(description=description)
    p.add_argument("--no-gc-policy", action="store_true",
                   help="run without the GC policy the benchmarks opt in to (toh_nb.core.gc_policy), to measure what it changes")
    p.add_argument("--n", type=_sizes, default=default_n,
                   help=f"size(s), comma separated (default {','.join(map(str, default_n))})")
    p.add_argument("--json", action="store_true", help="print one JSON line per figure (machine readable)")
    p.add_argument("--repeat", type=int, default=1,
                   help="measure each figure this many times and keep the fastest run (default 1)")
    p.add_argument("--no-warmup", action="store_true", help="skip the small unreported warm-up run")
    if store:
        p.add_argument("--store", metavar="DIR", default=None,
                       help="use the JSONL store: each run writes a fresh sub-directory of DIR (removed after)")
        p.add_argument("--fsync", choices=("batch", "always", "never"), default=None,
                       help="JSONL fsync policy (default: the store's default)")
        p.add_argument("--keep", action="store_true", help="keep the JSONL run directories")
    return p


# -- figures ---------------------------------------------------------------------------------------


def proc_status_kb(field: str, pid: int | str = "self") -> int | None:
    """A ``/proc/<pid>/status`` field in kB (``VmRSS``, ``VmHWM``; this process by default); None where
    there is no procfs."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _mb(kb: int | None) -> float | None:
    return None if kb is None else round(kb / 1024, 1)


def figure(name: str, n: int, seconds: float, floor_seconds: float | None, *, ops: int | None = None,
           target: float | None = None, **extra: Any) -> dict:
    ops = n if ops is None else ops
    fig: dict = {"name": name, "n": n, "ops": ops, "seconds": round(seconds, 6),
                 "rate_per_s": round(ops / seconds, 1) if seconds > 0 else None}
    if floor_seconds is not None:
        fig["floor_seconds"] = round(floor_seconds, 6)
        fig["floor_rate_per_s"] = round(ops / floor_seconds, 1) if floor_seconds > 0 else None
        fig["ratio"] = round(seconds / floor_seconds, 1) if floor_seconds > 0 else None
    if target is not None:
        fig["target"] = target
        fig["meets_target"] = fig["rate_per_s"] is not None and fig["rate_per_s"] >= target
    fig.update(extra)
    fig["rss_mb"] = _mb(proc_status_kb("VmRSS"))
    fig["peak_rss_mb"] = _mb(proc_status_kb("VmHWM"))
    return fig


def emit(fig: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(fig), flush=True)
        return
    print(describe(fig), flush=True)


def describe(fig: dict) -> str:
    """One readable line for a figure."""
    if "skipped" in fig:
        return f"{fig['name']:<28} skipped: {fig['skipped']}"
    parts = [f"{fig['name']:<28} n={fig['n']:<6}"]
    if "median_us" in fig:
        parts.append(f"median {fig['median_us']:.1f} µs  p99 {fig['p99_us']:.1f} µs"
                     + (f"  mean {fig['mean_us']:.1f} µs" if "mean_us" in fig else ""))
        if fig.get("floor_median_us") is not None:
            parts.append(f"| floor median {fig['floor_median_us']:.1f} µs  ×{fig['ratio']}")
    elif "bytes_per_child" in fig:
        parts.append(f"{fig['bytes_per_child'] / 1024:.1f} KB/child (tracemalloc)  "
                     f"{fig['rss_bytes_per_child'] / 1024:.1f} KB/child (RSS)")
        if fig.get("floor_bytes_per_child"):
            parts.append(f"| floor {fig['floor_bytes_per_child'] / 1024:.2f} KB/child  ×{fig['ratio']}")
    else:
        parts.append(f"{fig['seconds']:.3f} s  {fig['rate_per_s']:>10,.0f}/s")
        if fig.get("floor_seconds") is not None:
            parts.append(f"| floor {fig['floor_seconds']:.4f} s {fig['floor_rate_per_s']:>12,.0f}/s  ×{fig['ratio']}")
    if "memory_ratio" in fig:
        parts.append(f"| ×{fig['memory_ratio']} memory")
    if "target" in fig:
        parts.append(f"| target {fig['target']:,} {'met' if fig['meets_target'] else 'MISSED'}")
    if "fsyncs_per_s" in fig:
        parts.append(f"| {fig['fsyncs_per_s']:,.0f} fsyncs/s")
    if "gc_seconds" in fig:
        parts.append("| gc " + "/".join(f"{x:.2f}" for x in fig["gc_seconds"]) + " s (gen 0/1/2)"
                     f"  cpu {fig['cpu_seconds']:.3f} s")
    if "create_us" in fig:
        parts.append(f"| file creation {fig['create_us']} us")
    if "store_mb" in fig:
        parts.append(f"| {fig['store_mb']:,} MB of logs")
    if "target_seconds" in fig:
        parts.append(f"| target <= {fig['target_seconds']} s {'met' if fig['meets_target'] else 'MISSED'}")
    if "phases" in fig:
        parts.append("| " + " ".join(f"{k} {v:.3f}s" for k, v in fig["phases"].items()))
    if fig.get("peak_rss_mb") is not None:
        parts.append(f"| peak {fig['peak_rss_mb']} MB")
    return "  ".join(parts)


def skipped(name: str, reason: str, as_json: bool) -> None:
    emit({"name": name, "skipped": reason}, as_json)


# -- measuring -------------------------------------------------------------------------------------


class GcClock:
    """Seconds spent inside the cyclic collector per generation, and the process's CPU seconds, over a
    ``with`` block. CPU seconds are what another process on a shared machine disturbs least (wall
    time also counts the moments this process waited for a core), so scaling ratios are printed
    from both."""

    def __init__(self) -> None:
        self.gc_seconds = [0.0, 0.0, 0.0]
        self.collections = [0, 0, 0]
        self.cpu_seconds = 0.0
        self._started = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            generation = info.get("generation", 2)
            self.gc_seconds[generation] += time.perf_counter() - self._started
            self.collections[generation] += 1

    def __enter__(self) -> "GcClock":
        gc.callbacks.insert(0, self._callback)  # first: the hub's GC policy works after "stop", untimed
        self.cpu_seconds = time.process_time()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cpu_seconds = time.process_time() - self.cpu_seconds
        gc.callbacks.remove(self._callback)

    def fields(self) -> dict:
        return {"gc_seconds": [round(x, 4) for x in self.gc_seconds], "gc_collections": self.collections,
                "cpu_seconds": round(self.cpu_seconds, 6)}


def kept_line(name: str, small: dict, large: dict) -> str:
    """Issue 18.2's figure: the throughput kept at the largest size against the smallest, from wall
    time and from CPU time, beside the floor's own (wall) ratio from the same runs."""
    wall = large["rate_per_s"] / small["rate_per_s"]
    parts = [f"{name}: throughput at {large['n']:,} / at {small['n']:,} = {wall:.2f}× wall"]
    if small.get("cpu_seconds") and large.get("cpu_seconds"):
        cpu = (large["ops"] / large["cpu_seconds"]) / (small["ops"] / small["cpu_seconds"])
        parts.append(f"{cpu:.2f}× CPU time")
    if small.get("floor_rate_per_s") and large.get("floor_rate_per_s"):
        parts.append(f"floor {large['floor_rate_per_s'] / small['floor_rate_per_s']:.2f}×")
    return ", ".join(parts)


def settle_gc() -> None:
    gc.collect()
    gc.collect()


async def best_of(repeat: int, run: Callable[[], Awaitable[Any]], key: Callable[[Any], float] = lambda r: r) -> Any:
    """Run ``run()`` ``repeat`` times (collecting garbage before each) and keep the fastest result."""
    best = None
    for _ in range(max(1, repeat)):
        settle_gc()
        result = await run()
        if best is None or key(result) < key(best):
            best = result
    return best


def run_main(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(main())


# -- JSONL store -----------------------------------------------------------------------------------


def jsonl_unavailable() -> str | None:
    """Why the JSONL store cannot be used, or None when it can."""
    try:
        from toh_nb.store.jsonl import JsonlStore  # noqa: F401
    except Exception as error:  # not written yet, or broken mid-edit
        return f"the JSONL store (toh_nb.store.jsonl.JsonlStore) is not available: {type(error).__name__}: {error}"
    return None


class RunDir:
    """A fresh directory for one JSONL run (under ``parent``), removed afterwards unless ``keep``."""

    def __init__(self, parent: str | None, keep: bool = False) -> None:
        self.parent = parent
        self.keep = keep
        self.path: str | None = None

    def __enter__(self) -> str | None:
        if self.parent is None:
            return None
        os.makedirs(self.parent, exist_ok=True)
        self.path = tempfile.mkdtemp(prefix="toh-bench-", dir=self.parent)
        return self.path

    def __exit__(self, *exc: Any) -> None:
        if self.path is not None and not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)


def store_variant(args: Any, name: str) -> str | None:
    """The figure's name for this run (``<name>_jsonl`` with ``--store``), or None after printing a
    ``skipped`` figure when the JSONL store cannot be used."""
    if args.store is None:
        return name
    name = f"{name}_jsonl"
    reason = jsonl_unavailable()
    if reason:
        skipped(name, reason, args.json)
        return None
    return name


async def warm_up(args: Any, engine: Callable[[str | None], Awaitable[Any]], floor: Callable[[], Awaitable[Any]]) -> None:
    """One small unreported run of the engine (in a throw-away store directory) and of the floor."""
    if args.no_warmup:
        return
    with RunDir(args.store) as d:
        await engine(d)
    await floor()


async def in_run_dir(args: Any, engine: Callable[[str | None], Awaitable[dict]]) -> dict:
    """Run the engine in a fresh store directory (when ``--store``) and add the bytes it left there."""
    with RunDir(args.store, args.keep) as d:
        out = await engine(d)
        out["store_bytes"] = dir_bytes(d)
    return out


def store_fields(args: Any, result: dict | None = None) -> dict:
    """The fields a JSONL figure adds (store, fsync policy, bytes written)."""
    if args.store is None:
        return {}
    fields = {"store": "jsonl", "fsync": args.fsync or "default"}
    if result is not None:
        fields["store_bytes"] = result["store_bytes"]
    return fields


def dir_bytes(path: str | None) -> int | None:
    if path is None:
        return None
    total = 0
    for entry in os.scandir(path):
        if entry.is_file(follow_symlinks=False):
            total += entry.stat(follow_symlinks=False).st_size
    return total


# -- the zero-latency model ------------------------------------------------------------------------


def model(fn: Callable) -> Any:
    """A zero-latency model: ``fn`` wrapped as an async function, so the figure is the engine's own cost
    (a sync model function runs in a worker thread, which a real model never needs)."""
    from toh_nb.models.function import FunctionModel

    async def instant(request: Any) -> Any:
        return fn(request)

    return FunctionModel(instant, name="bench")


def delegate_call(i: int, **extra: Any) -> Any:
    from toh_nb.core.content import ToolCall

    args = {"description": f"child {i}", "prompt": f"task {i}"}
    args.update(extra)
    return ToolCall("subagent", args)


def calls(tool_calls: list) -> Any:
    from toh_nb.core.model import ModelResponse

    return ModelResponse(tool_calls=tool_calls)


def now() -> float:
    return time.perf_counter()
