"""The driver's side of the host actors: connect to Ray, keep a small pool of hosts, place children.

Ray is connected (``ray.init(address=...)``, or a local cluster started) the first time a provider is
used, never on import. Hosts are created lazily up to ``size``, named (``toh_nb-host-…`` in the
``toh_nb`` namespace) so anyone can see what a hub holds, placed by Ray's scheduler under the
resources asked for. A child (named by its id and hub) is placed on the live host with the fewest
children and keeps it while that host lives — the host caches its conversation between turns; a host
found dead is dropped and replaced on the next placement, so a child whose host died continues on
another one (possibly another node) at its next turn.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from ...core.errors import UsageError
from .host import Host
from .ray_adapter import keep_on_loopback

NAMESPACE = "toh_nb"
NAME_PREFIX = "toh_nb-host-"
#: seconds to wait for a new host to report where it runs (a busy cluster queues it)
START_TIMEOUT = 120.0
#: seconds ``close`` lets cancelled calls unwind on their hosts before the hosts are killed
CANCEL_GRACE = 10.0


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("the ray provider needs Ray: pip install 'toh-nb[ray]' (plain `ray`)") from None
    return ray


_starter: queue.SimpleQueue | None = None
_starter_lock = threading.Lock()


def in_lasting_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` (``ray.init``) in a daemon thread that lives as long as the process, and return its result.

    Why: Ray starts a local cluster's processes (GCS, raylet) with a parent-death signal, which Linux
    sends when the *thread* that started them exits. Started from a short-lived worker thread (the
    event loop's executor, the notebook's portal), the cluster would be killed under the notebook a
    moment later; started from the main thread, a cell would block the kernel's loop. So one thread
    that never exits starts it.
    """
    global _starter
    with _starter_lock:
        if _starter is None:
            _starter = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(_starter,), name="toh_nb-ray-starter", daemon=True).start()
    done: concurrent.futures.Future = concurrent.futures.Future()
    _starter.put((fn, done))
    return done.result()


def _serve(requests: queue.SimpleQueue) -> None:
    while True:
        fn, done = requests.get()
        try:
            done.set_result(fn())
        except BaseException as error:
            done.set_exception(error)


def loopback_only() -> None:
    """Make a local cluster this process starts single-node, listening on 127.0.0.1 only.

    Ray resolves "localhost" to the machine's network address and its servers listen on every
    interface, so that other nodes can join; a cluster started for one notebook needs neither. Ray's
    single-node mode (the one it uses on macOS and Windows) keeps every server on loopback. Set
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1`` before starting to opt out. On a Ray version
    :mod:`~toh_nb.providers.ray.ray_adapter` does not know, only that variable is set (an imported Ray
    does not read it again) and the ``toh_nb`` log says so once.
    """
    keep_on_loopback()  # Ray's read switch set again (its adapter: a version check and a fallback)


@dataclass(slots=True, eq=False)
class HostRecord:
    """One host actor and where it runs."""

    name: str
    actor: Any
    node_id: str = ""
    node_ip: str = ""
    pid: int = 0
    children: set = field(default_factory=set)
    dead: bool = False
    #: keys of the blobs (models, child shapes) sent to this host inline (``RayProvider._inline``)
    blobs: set = field(default_factory=set)

    def describe(self) -> str:
        return f"host actor {self.name} (pid {self.pid}) on node {self.node_ip} [{self.node_id[:12]}]"


def host_died_text(host: HostRecord, error: BaseException) -> str:
    """The diagnostic of a turn whose host actor (or its node) died mid-call."""
    return f"the Ray {host.describe()} died during this call ({type(error).__name__})"


def call_failed_text(host: HostRecord, error: BaseException) -> str:
    """The diagnostic of a call that failed in Ray itself (a lost object, a system error)."""
    return f"Ray could not complete this call on the {host.describe()}: {type(error).__name__}"


class HostPool:
    """A pool of async host actors shared by every child of one provider."""

    def __init__(self, *, size: int, address: str | None, init_options: dict, actor_options: dict,
                 spread: bool = False) -> None:
        self.size = size
        self.spread = spread
        self.address = address
        self.init_options = init_options
        self.actor_options = actor_options
        self.token = uuid.uuid4().hex[:8]
        self.hosts: list[HostRecord] = []
        self.placement: dict[str, HostRecord] = {}
        self._serial = itertools.count(1)
        self._lock = threading.Lock()
        self._remote_class: Any = None

    @property
    def ready(self) -> bool:
        return len(self.hosts) == self.size and not any(h.dead for h in self.hosts)

    def connect(self) -> Any:
        """Connect to Ray (an existing cluster at ``address``, or a new local one) unless connected."""
        ray = import_ray()
        if not ray.is_initialized():
            if self.address is None and not os.environ.get("RAY_ADDRESS"):
                loopback_only()
            options = {"include_dashboard": False, **self.init_options}
            in_lasting_thread(lambda: ray.init(address=self.address, **options))
        return ray

    def ensure(self) -> None:
        """Fill the pool (blocking: call it off the event loop). Thread-safe."""
        with self._lock:
            ray = self.connect()
            self.hosts = [h for h in self.hosts if not h.dead]
            if len(self.hosts) >= self.size:
                return
            if self._remote_class is None:
                self._remote_class = ray.remote(Host)
            fresh = []
            nodes = self.spread_over(ray) if self.spread else None
            while len(self.hosts) + len(fresh) < self.size:
                name = f"{NAME_PREFIX}{self.token}-{next(self._serial)}"
                options = dict(self.actor_options)
                if nodes:
                    options["scheduling_strategy"] = self.next_node(ray, nodes)
                actor = self._remote_class.options(name=name, namespace=NAMESPACE, max_restarts=0,
                                                   lifetime=None, **options).remote()
                fresh.append(HostRecord(name, actor))
            where = ray.get([h.actor.where.remote() for h in fresh], timeout=START_TIMEOUT)
            for host, info in zip(fresh, where):
                host.node_id, host.node_ip, host.pid = info["node_id"], info["node_ip"], info["pid"]
            self.hosts.extend(fresh)

    def spread_over(self, ray: Any) -> dict[str, int]:
        """``spread``: the cluster's live nodes that can hold a host (their total resources cover what a
        host reserves), each with the number of live hosts it runs."""
        wanted = {"CPU": self.actor_options.get("num_cpus") or 0, **(self.actor_options.get("resources") or {})}
        nodes = {n["NodeID"]: 0 for n in ray.nodes() if n.get("Alive")
                 and all(n.get("Resources", {}).get(name, 0) >= amount for name, amount in wanted.items() if amount)}
        for host in self.hosts:
            if host.node_id in nodes:
                nodes[host.node_id] += 1
        return nodes

    @staticmethod
    def next_node(ray: Any, nodes: dict[str, int]) -> Any:
        """The node with the fewest hosts, as a node affinity. A hard one: the node can hold a host
        (``spread_over``), and with a soft one Ray at times placed a host beside the previous one on a
        live, idle node (the two-node test: both hosts on one node in 3 runs of 6). A node that dies before
        the host starts fails its start (``ensure`` raises; the next call places it again)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        node = min(nodes, key=lambda n: (nodes[n], n))
        nodes[node] += 1
        return NodeAffinitySchedulingStrategy(node_id=node, soft=False)

    def host_of(self, child_id: str) -> HostRecord | None:
        """The child's live host, placing it on the least-loaded live host if it has none."""
        host = self.placement.get(child_id)
        if host is not None and not host.dead:
            return host
        if host is not None:
            host.children.discard(child_id)
        live = [h for h in self.hosts if not h.dead]
        if not live:
            return None
        host = min(live, key=lambda h: len(h.children))
        host.children.add(child_id)
        self.placement[child_id] = host
        return host

    def release(self, child_id: str) -> None:
        host = self.placement.pop(child_id, None)
        if host is not None:
            host.children.discard(child_id)

    def mark_dead(self, host: HostRecord) -> None:
        host.dead = True

    def close(self, cancelling: list = ()) -> None:
        """Kill every host actor (blocking), once the cancelled calls have unwound (their coroutines'
        cleanup runs, bounded by ``CANCEL_GRACE``). The pool refills on next use."""
        with self._lock:
            hosts, self.hosts = self.hosts, []
            self.placement.clear()
            if not hosts:
                return
            ray = import_ray()
            if cancelling:
                ray.wait(list(cancelling), num_returns=len(cancelling), timeout=CANCEL_GRACE)
            for host in hosts:
                try:
                    ray.kill(host.actor, no_restart=True)
                except Exception:  # already gone with its node
                    pass
            names = {h.name for h in hosts}
            deadline = time.monotonic() + CANCEL_GRACE
            while time.monotonic() < deadline:  # return once the cluster no longer lists them
                try:
                    listed = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)}
                except Exception:
                    return
                if not names & listed:
                    return
                time.sleep(0.05)
