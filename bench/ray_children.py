"""Ray children: continuable children on 2 host actors vs in-process (``provider="spawn"``).

Needs the ``ray`` extra (``pip install -e '.[ray]'``); it starts a local single-node cluster
(``num_cpus=2``, loopback only) and shuts it down at the end. Figures:

- ``ray_children``: N continuable children started with ``provider="ray"``, one turn each (one model
  step, run in a host actor's step loop), all settled, answered and listed ``ready``; ``rate_per_s`` is
  children per second; ``cpu_ms_per_child``: CPU milliseconds per child of this process (all threads)
  and of the host actors, beside the in-process run's (``floor_cpu_ms_per_child``). Its "floor" is the same work in-process (``provider="spawn"``), so ``ratio`` is what
  moving the loops to the cluster costs. ``rss_bytes_per_child`` / ``floor_rss_bytes_per_child``: the
  driver's RSS growth per child (the driver keeps each child's log, tree node and a small link; the
  hosts hold the model and the cached conversation). The first batch also pays the growth of Ray's own
  driver-side core worker (task and event buffers). ``round_trips_per_child``: Ray calls the driver
  made per child (a turn's stream, forwarded messages, answers to toh_nb's own tools).
- ``ray_tool_steps``: M one-shot children whose model makes 5 tool-calling steps (a user tool on the
  host) before answering: children per second vs in-process, and Ray round trips per child (a model
  call and a tool call each cost one before the loop moved to the hosts: 11 per child).
- ``ray_turn_latency``: one one-step turn of a Ray child, sequential, send to settled (median, p99) vs
  the same in-process: what each turn pays for the cluster.
- ``ray_event_latency``: how long after it happened on the host an event reaches the driver's stream
  (``ToolCalled``, ``ToolReturned``, ``ModelResponded``; host wall clock to driver wall clock, same
  machine): the delay a live display sees, for ``--calls`` 5-step children run one after another, and
  (``loaded_*``) for the ``ray_tool_steps`` run, where M children's events queue behind each other.

What a real multi-node cluster changes: each turn's stream and each event batch cross the network
(≈0.1–1 ms on one rack) instead of loopback, and the first turn of a child on a host ships the child's
shape (system prompt, tool schemas: once per shape and host) and the model factory (once per host).
Throughput scales with host actors across nodes (``host_actors`` = a few per node): model calls and
user tools run there, and the driver only replays records and writes the store, at a cost per child
of about one in-process turn's bookkeeping plus one Ray call per turn, so one driver sustains roughly
the ``ray_children`` rate here whatever the cluster size; model latency (seconds for a real LLM)
dominates long before that. Memory per child in the driver does not change with nodes.
"""

from __future__ import annotations

import asyncio
import cProfile
import inspect
import os
import pstats
import statistics
import sys
import tempfile
import time

import _common as c

#: a directory put first on the Ray processes' path (tests/ray/lean_imports/rfc3987_syntax.py says why)
LEAN_IMPORTS = os.path.join(c.REPO, "tests", "ray", "lean_imports")


def ray_provider_class():
    """``RayProvider`` from where this checkout keeps it (``toh_nb.providers.ray``; before #28: ``toh_nb.ray``),
    so the same script measures the code before and after the provider seam."""
    try:
        from toh_nb.providers.ray import RayProvider
        from toh_nb.providers.ray.pool import loopback_only
    except ImportError:
        from toh_nb.ray import RayProvider
        from toh_nb.ray.pool import loopback_only
    return RayProvider, loopback_only


async def listed(hub) -> list:
    rows = hub.list_agents()  # a coroutine since #28, a plain call before
    return await rows if inspect.isawaitable(rows) else rows


def subscribe(hub, listener) -> None:
    """Listen to the hub's stream the way the notebook's live tree does (``hub.view`` since #28)."""
    view = getattr(hub, "view", None)
    if view is not None:
        view.subscribe(listener)
    else:  # the tree before #28 (the "before" of this bench)
        hub.runtime.bus.subscribe(listener)


class Instant:
    """A zero-latency model, pickled to the hosts (this file is ``__main__``, so by value)."""

    async def request(self, request):
        from toh_nb.core.model import ModelResponse

        return ModelResponse(text="ok")


async def children(n: int, provider_name: str, providers: dict) -> dict:
    from toh_nb.hub import AsyncHub

    hub = AsyncHub(Instant(), ids="sequential", providers=providers)
    try:
        if provider_name == "ray":  # warm the pool so the figure is the steady state, not Ray's start
            await hub.spawn("warm up", label="warm", provider="ray")
        warm = await round_trips_of(providers.get("ray")) or 0
        c.settle_gc()
        before = c.proc_status_kb("VmRSS")
        cpu = cpu_seconds(providers.get("ray"))
        start = c.now()
        kids = [await hub.start(f"task {i}", label=f"worker {i}", provider=provider_name) for i in range(n)]
        answers = [await kid.wait() for kid in kids]
        seconds = c.now() - start
        cpu = {k: round((v - cpu[k]) * 1e3 / n, 3) for k, v in cpu_seconds(providers.get("ray")).items()}
        del kids
        c.settle_gc()
        after = c.proc_status_kb("VmRSS")
        listing = await listed(hub)
        if len(listing) != n or any(e.status != "ready" for e in listing) or set(answers) != {"ok"}:
            raise SystemExit(f"ray_children: {len(listing)} listed of {n}, not all ready and answered "
                             f"(answers: {sorted(set(map(str, answers)))[:3]})")
        trips = await round_trips_of(providers.get("ray"))
        return {"seconds": seconds, "cpu_ms_per_child": cpu,
                "rss_bytes_per_child": round((after - before) * 1024 / n) if after else None,
                "round_trips_per_child": round((trips - warm) / n, 2) if trips is not None else None}
    finally:
        await hub.close()


def cpu_seconds(provider) -> dict:
    """CPU seconds used so far by this process (all its threads: Ray's core worker too) and by the
    provider's host actors (``hosts``): a cost per child that a busy machine's wall clock blurs less."""
    import psutil

    used = {"driver": sum(psutil.Process().cpu_times()[:2])}
    if provider is not None:
        hosts = 0.0
        for host in provider.pool.hosts:  # the pool's host records: their pids
            try:
                hosts += sum(psutil.Process(host.pid).cpu_times()[:2])
            except psutil.Error:
                pass
        used["hosts"] = hosts
    return used


async def round_trips_of(provider) -> int | None:
    """Ray calls the driver made through ``provider`` so far."""
    return None if provider is None else provider.round_trips


class Steps:
    """Five tool-calling steps, then an answer (zero latency; pickled to the hosts by value)."""

    async def request(self, request):
        from toh_nb.core.model import ModelResponse, ToolCall

        if request.step <= 5:
            return ModelResponse(tool_calls=[ToolCall("bump", {"x": request.step})])
        return ModelResponse(text="done")


def bump(x: int) -> int:
    """Add one.

    Args:
        x: a number
    """
    return x + 1


async def tool_steps(m: int, provider_name: str, providers: dict, sequential: bool = False) -> dict:
    from toh_nb.hub import AsyncHub

    seen: list[float] = []
    hub = AsyncHub(Steps(), ids="sequential", providers=providers, tools=[bump])
    try:
        if provider_name == "ray":
            await hub.spawn("warm up", label="warm", provider="ray")
        warm = await round_trips_of(providers.get("ray")) or 0

        def listen(event) -> None:
            if type(event).__name__ in ("ToolCalled", "ToolReturned", "ModelResponded"):
                seen.append(time.time() - event.time)

        subscribe(hub, listen)
        start = c.now()
        if sequential:
            results = [await hub.spawn(f"task {i}", label=f"stepper {i}", provider=provider_name) for i in range(m)]
        else:
            results = await asyncio.gather(*[hub.spawn(f"task {i}", label=f"stepper {i}", provider=provider_name)
                                             for i in range(m)])
        seconds = c.now() - start
        if any(r.text != "done" for r in results):
            raise SystemExit("ray_tool_steps: a child did not finish")
        trips = await round_trips_of(providers.get("ray"))
        return {"seconds": seconds, "latencies": seen,
                "round_trips_per_child": round((trips - warm) / m, 2) if trips is not None else None}
    finally:
        await hub.close()


async def turn_latency(calls: int, provider_name: str, providers: dict) -> list[float]:
    """Sequential one-step turns of one continuable child: send to settled."""
    from toh_nb.hub import AsyncHub

    hub = AsyncHub(Instant(), ids="sequential", providers=providers)
    try:
        kid = await hub.start("first", label="probe", provider=provider_name)
        await kid.wait()
        out = []
        for i in range(calls):
            start = c.now()
            await kid.send(f"turn {i}")
            await kid.wait()
            out.append(c.now() - start)
        return out
    finally:
        await hub.close()


def _us(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))] * 1e6, 1)


def _mean_us(values: list[float]) -> float:
    return round(statistics.fmean(values) * 1e6, 1)


class Profiled:
    """cProfile around the driver's side of one figure (``--profile``): the functions with the most own
    time, and Python calls per child, printed to stderr."""

    def __init__(self, enabled: bool, label: str, per: int) -> None:
        self.profile = cProfile.Profile() if enabled else None
        self.label, self.per = label, per

    def __enter__(self) -> "Profiled":
        if self.profile is not None:
            self.profile.enable()
        return self

    def __exit__(self, *exc) -> None:
        if self.profile is None:
            return
        self.profile.disable()
        stats = pstats.Stats(self.profile, stream=sys.stderr)
        calls = sum(entry[1] for entry in stats.stats.values())
        print(f"--- profile of {self.label}: {calls / self.per:.0f} Python calls per child", file=sys.stderr)
        stats.sort_stats("tottime").print_stats(25)


async def main() -> None:
    p = c.parser(__doc__.splitlines()[0], [10000])
    p.add_argument("--steps-children", type=int, default=1000, help="children of ray_tool_steps (default 1000)")
    p.add_argument("--calls", type=int, default=200, help="sequential turns for ray_turn_latency, children for ray_event_latency (default 200)")
    p.add_argument("--host-actors", type=int, default=2)
    p.add_argument("--profile", action="store_true", help="cProfile the driver during ray_children and ray_tool_steps (stderr)")
    args = p.parse_args()
    try:
        import ray
    except ImportError:
        c.skipped("ray_children", "ray is not installed (pip install -e '.[ray]')", args.json)
        return
    RayProvider, loopback_only = ray_provider_class()

    loopback_only()
    # the cluster's processes (raylet agents inherit this environment, workers get ``runtime_env``) import
    # this checkout, and skip a module whose import costs seconds per process (see the lean_imports module)
    path = os.pathsep.join(x for x in (LEAN_IMPORTS, c.REPO, os.environ.get("PYTHONPATH", "")) if x)
    os.environ["PYTHONPATH"] = path
    scratch = tempfile.mkdtemp(prefix="tnray-")  # this cluster's own files (not /tmp/ray, which others use)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=scratch,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        for n in args.n:
            providers = {"ray": RayProvider(host_actors=args.host_actors)}
            with Profiled(args.profile, f"ray_children n={n}", n):
                result = await children(n, "ray", providers)
            base = await children(n, "spawn", {})
            c.emit(c.figure("ray_children", n, result["seconds"], base["seconds"], host_actors=args.host_actors,
                            cpu_ms_per_child=result["cpu_ms_per_child"],
                            floor_cpu_ms_per_child=base["cpu_ms_per_child"]["driver"],
                            rss_bytes_per_child=result["rss_bytes_per_child"],
                            floor_rss_bytes_per_child=base["rss_bytes_per_child"],
                            round_trips_per_child=result["round_trips_per_child"]), args.json)
        m = args.steps_children
        with Profiled(args.profile, f"ray_tool_steps m={m}", m):
            result = await tool_steps(m, "ray", {"ray": RayProvider(host_actors=args.host_actors)})
        base = await tool_steps(m, "spawn", {})
        loaded = result["latencies"]
        c.emit(c.figure("ray_tool_steps", m, result["seconds"], base["seconds"], host_actors=args.host_actors,
                        round_trips_per_child=result["round_trips_per_child"],
                        events=len(loaded), late_mean_ms=round(statistics.fmean(loaded) * 1e3, 1),
                        late_p99_ms=round(_us(loaded, 0.99) / 1e3, 1),
                        floor_late_mean_ms=round(statistics.fmean(base["latencies"]) * 1e3, 2)), args.json)
        result = await tool_steps(args.calls, "ray", {"ray": RayProvider(host_actors=args.host_actors)}, True)
        base = await tool_steps(args.calls, "spawn", {}, True)
        latencies = result["latencies"]
        fig = {"name": "ray_event_latency", "n": len(latencies), "median_us": _us(latencies, 0.5),
               "mean_us": _mean_us(latencies), "p99_us": _us(latencies, 0.99),
               "floor_median_us": _us(base["latencies"], 0.5),
               "loaded_n": len(loaded), "loaded_median_us": _us(loaded, 0.5), "loaded_mean_us": _mean_us(loaded),
               "loaded_p99_us": _us(loaded, 0.99)}
        fig["ratio"] = round(fig["median_us"] / fig["floor_median_us"], 1) if fig["floor_median_us"] else None
        c.emit(fig, args.json)
        remote = await turn_latency(args.calls, "ray", {"ray": RayProvider(host_actors=args.host_actors)})
        local = await turn_latency(args.calls, "spawn", {})
        fig = {"name": "ray_turn_latency", "n": args.calls, "median_us": _us(remote, 0.5), "p99_us": _us(remote, 0.99),
               "mean_us": _mean_us(remote), "floor_median_us": _us(local, 0.5), "floor_mean_us": _mean_us(local)}
        fig["ratio"] = round(fig["median_us"] / fig["floor_median_us"], 1) if fig["floor_median_us"] else None
        c.emit(fig, args.json)
    finally:
        ray.shutdown()
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    c.run_main(main)
