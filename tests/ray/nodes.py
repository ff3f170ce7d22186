"""Real Ray nodes on this machine for the multi-node tests: each one a ``ray start --block`` process this
test starts, listening on 127.0.0.1 only, with its own temp directory and custom resources, stopped by
its pid (never ``ray stop``, which stops every Ray process of the machine, other people's included).

Why a launcher around ``ray start``: Ray resolves ``--node-ip-address=127.0.0.1`` (and a ``127.0.0.1``
address) to the machine's network address, so that other machines can join; its single-machine mode
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``) keeps loopback but refuses a second node ("Multi-node Ray
clusters are not supported on Windows and OSX"). The launcher keeps cluster mode and makes the one
function that does that resolution (``ray._private.services.get_node_ip_address``) answer 127.0.0.1, so
both nodes, their GCS/raylet servers and the driver stay on loopback.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

from .conftest import ray_path

LAUNCHER = """\
import sys
from ray._private import services
services.get_node_ip_address = lambda address=None: "127.0.0.1"  # loopback, in cluster mode
from ray.scripts.scripts import main
sys.argv = ["ray", *sys.argv[1:]]
main()
"""
#: seconds a node may take to start (a busy 2-core machine: each Ray process imports for seconds)
START_TIMEOUT = 180.0
STOP_TIMEOUT = 60.0


def auth(token: str) -> dict:
    """The environment of a process of the cluster (node or driver): Ray's token authentication with this
    cluster's own token (not the user's ``~/.ray/auth_token``, which other local clusters share)."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}


def free_port() -> int:
    with closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Node:
    """One ``ray start --block`` process: the head (``address=None``) or a node joining ``address``."""

    def __init__(self, directory: Path, name: str, resources: dict, token: str, address: str | None = None,
                 num_cpus: int = 1) -> None:
        self.name = name
        self.resources = resources
        self.token = token
        self.temp_dir = directory / name  # short: Ray's socket paths must fit 107 bytes
        self.temp_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port() if address is None else None
        self.address = address or f"127.0.0.1:{self.port}"
        command = [sys.executable, "-c", LAUNCHER, "start", "--block", "--node-ip-address=127.0.0.1",
                   f"--temp-dir={self.temp_dir}", f"--num-cpus={num_cpus}", f"--resources={json.dumps(resources)}",
                   "--disable-usage-stats", f"--dashboard-agent-listen-port={free_port()}"]
        command += ["--head", f"--port={self.port}", "--include-dashboard=false"] if address is None else [
            f"--address={address}"]
        env = {**os.environ, **auth(token), "PYTHONPATH": ray_path(), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1",
               "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0", "RAY_USAGE_STATS_ENABLED": "0"}
        env.pop("RAY_ADDRESS", None)
        self.log = directory / f"{name}.log"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)

    @property
    def pid(self) -> int:
        return self.process.pid

    def started(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"ray start ({self.name}) exited {self.process.returncode}:\n{self.tail()}")
        return "This command will now block forever" in self.log.read_text(errors="replace")

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def wait_started(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not self.started():
            if time.monotonic() > deadline:
                raise TimeoutError(f"ray start ({self.name}) did not start in {START_TIMEOUT:.0f} s:\n{self.tail()}")
            time.sleep(0.5)

    def stop(self) -> None:
        """SIGTERM to this node's ``ray start --block``: it stops the node's processes (raylet, workers,
        agents; Ray's own handler) and exits. Then SIGKILL what is left of its session, by pid."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT)
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def leftovers(self) -> list[int]:
        """Processes still running with this node's temp directory in their command line (its own)."""
        mark = str(self.temp_dir)
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if mark in command:
                found.append(int(entry.name))
        return found
