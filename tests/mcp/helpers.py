"""Where the MCP servers of the tests are, and how to see which processes a test left behind."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time

import pytest

from ..real_parts import MCP_NODE_BIN

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTILE = os.path.join(HERE, "servers", "hostile.py")
HTTP_SERVER = os.path.join(HERE, "servers", "http_server.py")
RAW = os.path.join(HERE, "servers", "raw.py")
NODE_BIN = MCP_NODE_BIN
EVERYTHING = os.path.join(NODE_BIN, "mcp-server-everything")
FILESYSTEM = os.path.join(NODE_BIN, "mcp-server-filesystem")

needs_everything = pytest.mark.skipif(not os.access(EVERYTHING, os.X_OK),
                                      reason=f"@modelcontextprotocol/server-everything not installed ({EVERYTHING})")
needs_filesystem = pytest.mark.skipif(not os.access(FILESYSTEM, os.X_OK),
                                      reason=f"@modelcontextprotocol/server-filesystem not installed ({FILESYSTEM})")


def hostile(*flags: str) -> list[str]:
    return [sys.executable, HOSTILE, *flags]


def raw(*flags: str) -> list[str]:
    """The hand-written server of ``servers/raw.py`` (answers the SDK cannot parse, on request)."""
    return [sys.executable, RAW, *flags]


def descendants() -> set[int]:
    """Live (not zombie) processes below this one."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    out: set[int] = set()
    todo = [os.getpid()]
    while todo:
        for pid in children.get(todo.pop(), []):
            out.add(pid)
            todo.append(pid)
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def http_server():
    """The SDK's MCPServer over streamable HTTP on 127.0.0.1 (a subprocess, stopped at the end): its URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, HTTP_SERVER, str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP MCP server did not start: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()
