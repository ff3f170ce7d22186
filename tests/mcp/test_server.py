"""``python -m toh_nb mcp`` driven by the SDK's own client over stdio (and streamable HTTP): the
delegation tools with the hub's own texts, a foreground subagent call with progress, a cancel from the
client that stops the child, and a store a later hub opens."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.serve.mcp import DELEGATION_TOOLS, unknown_tool

from ..real_parts import FAST_AGENT
from .helpers import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def server_params(*args: str):
    from mcp import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=["-m", "toh_nb", "mcp", *args],
                                 env={"PYTHONPATH": REPO}, cwd=REPO)


def client(*args: str):
    from mcp import Client
    from mcp.client.stdio import stdio_client

    return Client(stdio_client(server_params(*args)))


def test_the_tools_are_the_hubs_delegation_tools_with_their_own_texts():
    async def main():
        async with client() as session:
            listed = (await session.list_tools()).tools
            unknown = await session.call_tool("bash", {})
        async with tn.AsyncHub() as hub:
            own = engine_of(hub).root.tools
            return listed, unknown, {name: (own[name].description, own[name].parameters) for name in DELEGATION_TOOLS}

    listed, unknown, own = asyncio.run(main())
    assert [tool.name for tool in listed] == list(DELEGATION_TOOLS) == [
        "subagent", "send_message", "interrupt_agent", "list_agents", "job_output", "job_list", "job_kill"]
    for tool in listed:
        assert (tool.description, tool.input_schema) == own[tool.name]
    assert unknown.is_error and unknown.content[0].text == unknown_tool("bash")
    assert unknown.content[0].text == ('Error: unknown tool "bash" (this server offers subagent, send_message, '
                                       "interrupt_agent, list_agents, job_output, job_list, job_kill)")


def test_a_foreground_subagent_call_reports_progress_and_answers_like_the_tool(tmp_path):
    store = str(tmp_path / "tree")
    arguments = {"description": "garden", "prompt": "Plan a garden"}

    async def main():
        progress: list[tuple[float, str | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, message))

        async with client("--store", store, "--latency", "0") as session:
            answer = await session.call_tool("subagent", arguments, progress_callback=on_progress)
            background = await session.call_tool("subagent", {**arguments, "run_in_background": True})
            output = await session.call_tool("job_output", {"job_id": "subagent-1", "wait": True})
        async with tn.AsyncHub(tn.DemoModel(latency=0)) as hub:
            expected = await hub.call_tool("subagent", **arguments)
        async with tn.AsyncHub(store=store) as reopened:  # the server's tree, as a notebook opens it
            rows = await reopened.agents()
        return answer, background, output, expected, progress, rows

    answer, background, output, expected, progress, rows = asyncio.run(main())
    assert (answer.is_error, answer.content[0].text) == (False, expected.text)
    assert background.content[0].text == "started background subagent job subagent-1"
    assert not output.is_error and output.content[0].text
    values = [value for value, _ in progress]
    assert values == list(range(1, len(values) + 1))
    messages = [message.split(": ", 1)[1] for _, message in progress]
    assert messages == ["subagent/start garden", "model/request", "turn/end completed", "subagent/end completed"]
    assert [row["label"] for row in rows][1:] == ["garden", "garden"]


def test_a_cancel_from_the_client_stops_the_foreground_child(tmp_path):
    store = str(tmp_path / "tree")

    async def main():
        started = asyncio.Event()

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            if message and message.endswith("model/request"):
                started.set()

        async with client("--store", store, "--latency", "60") as session:
            call = asyncio.ensure_future(session.call_tool(
                "subagent", {"description": "slow", "prompt": "take your time"}, progress_callback=on_progress))
            await asyncio.wait_for(started.wait(), 30)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            listing = await session.call_tool("job_list", {})
        async with tn.AsyncHub(store=store) as reopened:
            return listing, await reopened.agents()

    listing, rows = asyncio.run(main())
    assert listing.content[0].text == "(no background jobs)"
    [child] = rows[1:]
    assert (child["label"], child["stop_reason"]) == ("slow", "aborted")


def test_streamable_http_on_127_0_0_1():
    from mcp import Client

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "toh_nb", "mcp", "--http", str(port), "--latency", "0"],
                            cwd=REPO, env={**os.environ, "PYTHONPATH": REPO}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
            time.sleep(0.05)

        async def main():
            async with Client(f"http://127.0.0.1:{port}/mcp") as session:
                names = [tool.name for tool in (await session.list_tools()).tools]
                answer = await session.call_tool("subagent", {"description": "d", "prompt": "hello"})
                return names, answer

        names, answer = asyncio.run(main())
    finally:
        proc.terminate()
        proc.wait(15)
        proc.stderr.close()
    assert names == list(DELEGATION_TOOLS)
    assert not answer.is_error and answer.content[0].text




@pytest.mark.skipif(FAST_AGENT is None, reason="fast-agent not installed (set TOH_NB_FAST_AGENT or run .ci/run)")
def test_fast_agent_as_a_third_party_mcp_client_delegates_to_the_tree(tmp_path):
    """fast-agent's offline ``passthrough`` model calls ``subagent`` on ``python -m toh_nb mcp``; the
    answer is the tool's own text and the child is in the store a later hub opens."""
    store = str(tmp_path / "tree")
    server = f"env PYTHONPATH={REPO} {sys.executable} -m toh_nb mcp --latency 0 --store {store}"
    arguments = {"description": "garden", "prompt": "Plan a garden"}
    done = subprocess.run([FAST_AGENT, "go", "--model", "passthrough", "--isolated", "--stdio", server,
                           "--message", "***CALL_TOOL subagent " + json.dumps(arguments)],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-2000:]

    async def main():
        async with tn.AsyncHub(tn.DemoModel(latency=0)) as hub:
            expected = await hub.call_tool("subagent", **arguments)
        async with tn.AsyncHub(store=store) as reopened:
            return expected.text, await reopened.agents()

    expected, rows = asyncio.run(main())
    assert expected in done.stdout
    assert [(row["label"], row["stop_reason"]) for row in rows[1:]] == [("garden", "completed")]


def test_stdio_answers_lines_that_are_not_json_rpc_and_serves_on():
    """Issue 41.13: like ``toh_nb acp``, the stdio server answers a bad line ``-32700`` / ``-32600``
    (the SDK's own transport dropped it without a word) and keeps serving."""
    from toh_nb.serve import stdio

    proc = subprocess.Popen([sys.executable, "-m", "toh_nb", "mcp", "--latency", "0"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": REPO})
    lines = [b"this is not json", b"[1]", b'{"jsonrpc": "2.0", "id": 7, "method": 42}',
             b'{"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"cursor": 5}}',
             b'{"jsonrpc": "2.0", "id": 9, "method": "ping"}']
    out, err = proc.communicate(b"\n".join(lines) + b"\n", timeout=120)
    answers = [json.loads(line) for line in out.splitlines()]
    errors = [(a["id"], a["error"]["code"], a["error"]["message"]) for a in answers if "error" in a]
    assert errors[:3] == [(None, stdio.PARSE_ERROR, stdio.NOT_JSON),
                          (None, stdio.INVALID_REQUEST, stdio.NOT_AN_OBJECT.format(kind="an array")),
                          (7, stdio.INVALID_REQUEST, stdio.BAD_METHOD)]
    assert [a["id"] for a in answers] == [None, None, 7, 8, 9], (answers, err)
    assert answers[-1] == {"jsonrpc": "2.0", "id": 9, "result": {}}
    assert proc.returncode == 0, err
