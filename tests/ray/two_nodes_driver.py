"""The driver of ``test_two_nodes``: a notebook's process connected to a two-node cluster the test started.

Run as ``python -m tests.ray.two_nodes_driver ADDRESS HEAD_TEMP_DIR SECOND_PID STORE MARKS OUT`` (its own
process: a process joins one Ray cluster, and the test session's may already be connected to its local
one). It starts four continuable Ray children with ``RayProvider(spread=True)``, blocks the children
placed on the second node mid-turn, acknowledges one more message for each of them while they block,
stops the second node (SIGTERM to its ``ray start --block`` process, which the test started and named),
lets every turn settle, resumes a child of the stopped node, and writes what it saw to OUT (JSON) for the
test to check.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import ray

import toh_nb as tn
from toh_nb.providers.ray.pool import loopback_only

from ..helpers import until
from .conftest import ray_path
from .scripts import Script, marks_of, where

WAIT = 120.0


def cluster() -> dict:
    """Every node Ray lists (alive or not) with its resources and address: what a failure report needs."""
    return {n["NodeID"]: {"alive": n["Alive"], "address": n.get("NodeManagerAddress"),
                          "port": n.get("NodeManagerPort"), "resources": n["Resources"]} for n in ray.nodes()}


def node_of(provider, child_id: str) -> str:
    return provider.pool.placement[f"{child_id}@1"].node_id


async def drive(address: str, second_pid: int, store: str, marks: str) -> dict:
    nodes = {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}
    second = next(node for node, resources in nodes.items() if "toh_second" in resources)
    head = next(node for node, resources in nodes.items() if "toh_head" in resources)
    provider = tn.RayProvider(Script(marks), address=address, host_actors=2, spread=True)
    sent: dict[str, list[str]] = {}
    async with tn.AsyncHub(store=store, ids="sequential", providers={"ray": provider}, tools=[where]) as hub:
        kids = []
        for i in range(4):
            kids.append(await hub.start(f"hello {i}", label=f"k{i}", provider="ray"))
            sent[kids[-1].id] = [f"hello {i}"]
        first = [await kid.wait(timeout=WAIT) for kid in kids]
        hosts = {h.name: h.node_id for h in provider.pool.hosts}
        nodes = cluster()  # when the hosts were placed
        placed = {kid.id: node_of(provider, kid.id) for kid in kids}
        victims = [kid for kid in kids if placed[kid.id] == second]
        if not victims:  # the test reports where the hosts went
            return {"head": head, "second": second, "hosts": hosts, "placed": placed, "first": first,
                    "nodes": nodes}
        for kid in victims:  # mid-turn on the second node: the model blocks until the node goes
            await hub.send(kid.id, "block until the node stops")
            sent[kid.id].append("block until the node stops")
        await until(lambda: len(marks_of(marks)) == len(victims), "the blocked turns to start", WAIT)
        for kid in victims:  # acknowledged while the turn runs: forwarded to the host, kept by the driver
            await hub.send(kid.id, "after the outage")
            sent[kid.id].append("after the outage")
        victim_hosts = {h.name: (h.pid, h.node_id) for h in provider.pool.hosts if h.node_id == second}
        os.kill(second_pid, signal.SIGTERM)  # the second node's `ray start --block`: stops that node only
        settled = [await kid.wait(timeout=WAIT) for kid in victims]  # the error turn, then the queued message's
        await hub.send(victims[0].id, "where")  # resumed: runs on a host of the remaining node
        sent[victims[0].id].append("where")
        resumed = await victims[0].wait(timeout=WAIT)
        resumed_node = node_of(provider, victims[0].id)
        survivors = {h.pid: h.node_id for h in provider.pool.hosts if not h.dead}
    async with tn.AsyncHub(store=store, ids="sequential") as reopened:  # what the store kept
        logged, ends = {}, {}
        for child_id in sent:
            rows = await reopened.transcript(child_id)
            logged[child_id] = [row["text"] for row in rows if row["role"] == "user"]
            ends[child_id] = [row["text"] for row in rows if row["role"] == "turn"]
    return {"head": head, "second": second, "hosts": hosts, "placed": placed, "first": first, "nodes": nodes,
            "victims": [kid.id for kid in victims], "victim_hosts": victim_hosts, "settled": settled,
            "resumed": resumed, "resumed_node": resumed_node, "survivors": {str(k): v for k, v in survivors.items()},
            "sent": sent, "logged": logged, "ends": ends}


def main() -> None:
    address, head_temp, second_pid, store, marks, out = sys.argv[1:]
    loopback_only()  # "127.0.0.1:port" stays loopback (Ray would resolve it to the machine's address)
    ray.init(address=address, _temp_dir=head_temp, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": ray_path()}})
    try:
        result = asyncio.run(drive(address, int(second_pid), store, marks))
    finally:
        ray.shutdown()
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
