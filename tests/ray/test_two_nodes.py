"""A real two-node Ray cluster on this machine (``ray start --head`` and ``ray start --address=...``,
both on 127.0.0.1, each with its own temp directory and custom resource): children are placed on both
nodes (``RayProvider(spread=True)``), the second node stopped mid-turn ends its children's turns
``error`` with a diagnostic naming that node while every acknowledged message stays in the store, and a
child of the stopped node, sent a new message, runs on the remaining node.

The nodes are ``ray start --block`` processes this test starts and stops by pid (``tests/ray/nodes.py``);
the notebook side runs in its own process (``tests/ray/two_nodes_driver.py``), since a process joins one
cluster and this session may be connected to its local one."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest

from .conftest import ROOT, ray_path
from .nodes import Node, auth

pytestmark = pytest.mark.slow
DRIVER_TIMEOUT = 600
#: seconds a SIGTERM'd `ray start --block` may take to stop its node's processes and exit
NODE_EXIT_TIMEOUT = 120


@pytest.fixture
def two_nodes(tmp_path_factory):
    directory = tmp_path_factory.mktemp("rn", numbered=True)
    token = secrets.token_hex(16)
    head = Node(directory, "head", {"toh_head": 1}, token)
    nodes = [head]
    try:
        head.wait_started()
        second = Node(directory, "second", {"toh_second": 1}, token, address=head.address)
        nodes.append(second)
        second.wait_started()
        yield head, second
    finally:
        for node in reversed(nodes):
            node.stop()
        assert not [pid for node in nodes for pid in node.leftovers()], "a node's process outlived its stop"


def test_children_on_two_nodes_survive_losing_one(two_nodes, tmp_path):
    head, second = two_nodes
    out, marks = tmp_path / "out.json", tmp_path / "marks"
    run = subprocess.run([sys.executable, "-m", "tests.ray.two_nodes_driver", head.address, str(head.temp_dir),
                          str(second.pid), str(tmp_path / "store"), str(marks), str(out)],
                         cwd=ROOT, env={**os.environ, **auth(head.token), "PYTHONPATH": ray_path()}, capture_output=True,
                         text=True,
                         timeout=DRIVER_TIMEOUT)
    assert run.returncode == 0, run.stderr[-4000:]
    seen = json.loads(out.read_text())
    try:  # the driver stopped the second node: its `ray start --block` exits (its cleanup takes seconds under load)
        second.process.wait(timeout=NODE_EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the second node's ray start (pid {second.pid}) still runs {NODE_EXIT_TIMEOUT} s after "
                    "the driver sent it SIGTERM")

    # placed on both nodes: one host actor each (spread), children on both
    assert sorted(seen["hosts"].values()) == sorted([seen["head"], seen["second"]]), json.dumps(
        {key: seen[key] for key in ("head", "second", "hosts", "nodes")}, indent=1)
    assert set(seen["placed"].values()) == {seen["head"], seen["second"]}
    assert seen["first"] == [f"k{i}: hello {i}" for i in range(4)]

    # the second node stopped mid-turn: its children's turns end error, naming the node
    victims = seen["victims"]
    assert victims and all(seen["placed"][v] == seen["second"] for v in victims)
    (pid, node), = seen["victim_hosts"].values()
    for child in victims:
        turns = seen["ends"][child]
        assert turns[0] == "completed"
        assert turns[1].startswith("error: the Ray host actor toh_nb-host-")
        assert f"(pid {pid}) on node 127.0.0.1 [{seen['second'][:12]}] died during this call" in turns[1]

    # nothing acknowledged is lost: the store has every message the hub acknowledged, in order
    for child, messages in seen["sent"].items():
        assert seen["logged"][child] == messages

    # resumed: the queued message and a new one ran on the remaining node
    assert seen["settled"] == [f"k{int(v.split('-')[1]) - 1}: after the outage" for v in victims]
    assert seen["resumed_node"] == seen["head"]
    assert set(seen["survivors"].values()) == {seen["head"]}
    resumed_pid = int(seen["resumed"].rsplit("pid ", 1)[1])
    assert seen["survivors"][str(resumed_pid)] == seen["head"]
