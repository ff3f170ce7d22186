"""Ray children: 10,000 continuable children on 2 host actors vs in-process (``provider="spawn"``).

Needs the ``ray`` extra (``pip install -e '.[ray]'``); it starts a local single-node cluster
(``num_cpus=2``, loopback only) and shuts it down at the end. Figures:

- ``ray_children``: N continuable children started with ``provider="ray"`` (each turn: one model call
  answered on one of 2 host actors), all settled and listed ``ready``; ``rate_per_s`` is children per
  second. Its "floor" is the same work in-process (``provider="spawn"``), so ``ratio`` is what moving
  the model calls to the cluster costs. ``rss_bytes_per_child`` / ``floor_rss_bytes_per_child``: the
  driver's RSS growth per child (the driver keeps each child's log and tree node either way; the Ray
  side adds the per-child placement and model adapter, while the hosts hold the model). The first
  batch also pays the growth of Ray's own driver-side core worker (task and event buffers), about
  four fifths of the figure here: a second batch of the same size grows the RSS by ~10 KB per child,
  of which ~4 KB are Python objects (tracemalloc).
- ``ray_round_trip``: one model request through the driver's adapter to a host actor and back (the
  latency each step of a Ray child pays on top of its model), median and p99 over ``--calls``
  sequential requests; the floor is the same request to the model in-process.

What a real multi-node cluster changes: the round trip adds the network (≈0.1–1 ms on one rack) to
the ~sub-millisecond local figure, and the first call of each host adds shipping the model factory once;
throughput then scales with host actors across nodes (``host_actors`` = a few per node) until the
driver — the one writer of the store, which runs every child's loop and logs every event — is the
limit: its per-child cost is the in-process one plus a round trip per model call, so one driver
sustains roughly the ``ray_children`` rate here whatever the cluster size, and model latency (seconds
for a real LLM) dominates long before that. Memory per child in the driver does not change with nodes.
"""

from __future__ import annotations

import statistics

import _common as c


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
        c.settle_gc()
        before = c.proc_status_kb("VmRSS")
        start = c.now()
        kids = [await hub.start(f"task {i}", label=f"worker {i}", provider=provider_name) for i in range(n)]
        for kid in kids:
            await kid.wait()
        seconds = c.now() - start
        del kids
        c.settle_gc()
        after = c.proc_status_kb("VmRSS")
        listing = hub.list_agents()
        if len(listing) != n or any(e.status != "ready" for e in listing):
            raise SystemExit(f"ray_children: {len(listing)} listed of {n}, not all ready")
        return {"seconds": seconds, "rss_bytes_per_child": round((after - before) * 1024 / n) if after else None}
    finally:
        await hub.close()


async def round_trips(calls: int, host_actors: int) -> tuple[list[float], list[float]]:
    """Time one model request through a Ray child's adapter, and the same request in-process."""
    from toh_nb.core.model import ModelRequest
    from toh_nb.ray import RayProvider
    from toh_nb.subagents.provider import ChildInfo

    provider = RayProvider(Instant(), host_actors=host_actors)
    plan = await provider.plan(ChildInfo("probe-1", "one-shot", "probe", 1, "root", None, lambda kind, data: None))
    request = ModelRequest("probe-1", "probe", 1, "system", [], [])
    model = Instant()
    remote, local = [], []
    try:
        await plan.model.request(request)  # the host loads the model once
        for _ in range(calls):
            start = c.now()
            await plan.model.request(request)
            remote.append(c.now() - start)
            start = c.now()
            await model.request(request)
            local.append(c.now() - start)
    finally:
        await plan.close()
        await provider.aclose()
    return remote, local


def _us(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))] * 1e6, 1)


async def main() -> None:
    p = c.parser(__doc__.splitlines()[0], [10000])
    p.add_argument("--calls", type=int, default=500, help="sequential requests for ray_round_trip (default 500)")
    p.add_argument("--host-actors", type=int, default=2)
    args = p.parse_args()
    try:
        import ray
    except ImportError:
        c.skipped("ray_children", "ray is not installed (pip install -e '.[ray]')", args.json)
        return
    import os

    from toh_nb.ray import RayProvider
    from toh_nb.ray.pool import loopback_only

    loopback_only()
    path = os.pathsep.join(x for x in (c.REPO, os.environ.get("PYTHONPATH", "")) if x)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        for n in args.n:
            providers = {"ray": RayProvider(host_actors=args.host_actors)}
            result = await children(n, "ray", providers)
            base = await children(n, "spawn", {})
            c.emit(c.figure("ray_children", n, result["seconds"], base["seconds"], host_actors=args.host_actors,
                            rss_bytes_per_child=result["rss_bytes_per_child"],
                            floor_rss_bytes_per_child=base["rss_bytes_per_child"]), args.json)
        remote, local = await round_trips(args.calls, args.host_actors)
        fig = {"name": "ray_round_trip", "n": args.calls, "median_us": _us(remote, 0.5), "p99_us": _us(remote, 0.99),
               "mean_us": round(statistics.fmean(remote) * 1e6, 1), "floor_median_us": _us(local, 0.5)}
        fig["ratio"] = round(fig["median_us"] / fig["floor_median_us"], 1) if fig["floor_median_us"] else None
        c.emit(fig, args.json)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    c.run_main(main)
