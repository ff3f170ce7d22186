"""``python -m toh_nb acp`` mounts the MCP servers its ACP client sends in ``session/new`` and
``session/load`` (Zed passes the user's context servers this way): stdio and HTTP ones become tools of
that session's root (and its children), checked as hostile input first, and stopped with the session."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

acp = pytest.importorskip("acp", reason="needs the acp extra: pip install 'toh-nb[acp]'")

import toh_nb as tn  # noqa: E402
from toh_nb.serve import mcp_entries as entries  # noqa: E402

from ..acp.served import Served  # noqa: E402
from .helpers import HERE, HOSTILE, descendants, hostile, http_server  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
AGENT = [sys.executable, os.path.join(HERE, "servers", "acp_agent.py")]


class Recorder:
    def __init__(self):
        self.updates = []

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update)

    def said(self):
        return "".join(u.content.text for u in self.updates if u.session_update == "agent_message_chunk")


def stdio_entry(name="h", marks="/dev/null"):
    return acp.schema.McpServerStdio(name=name, command=sys.executable, args=[HOSTILE],
                                     env=[acp.schema.EnvVariable(name="HOSTILE_MARKS", value=marks)])


async def prompt(conn, client, session_id, text):
    client.updates.clear()
    answer = await conn.prompt(session_id=session_id, prompt=[acp.text_block(text)])
    return answer.stop_reason, client.said()


def test_stdio_and_http_servers_of_session_new_are_tools_of_that_sessions_root(tmp_path):
    async def main(url):
        client = Recorder()
        ours = descendants()  # the HTTP server
        async with acp.spawn_agent_process(client, *AGENT) as (conn, process):
            init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            http = acp.schema.HttpMcpServer(type="http", name="calc", url=url,
                                            headers=[acp.schema.HttpHeader(name="X-Team", value="blue")])
            with_tools = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[stdio_entry(), http])).session_id
            without = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            out = {
                "tools": await prompt(conn, client, with_tools, "tools?"),
                "echo": await prompt(conn, client, with_tools, 'call echo {"text": "from Zed"}'),
                "add": await prompt(conn, client, with_tools, 'call add {"a": 2, "b": 40}'),
                "plain": await prompt(conn, client, without, "tools?"),
            }
            servers = descendants() - ours - {process.pid}
            await conn.close_session(session_id=with_tools)
            after = descendants() - ours - {process.pid}
            return init, out, servers, after

    with http_server() as url:
        init, out, servers, after = asyncio.run(main(url))
    caps = init.agent_capabilities
    assert caps.mcp_capabilities.http is True and caps.mcp_capabilities.sse is False
    stop, names = out["tools"]
    assert stop == "end_turn" and {"echo", "pid", "hang", "add", "picture", "subagent"} <= set(names.split())
    assert out["echo"] == ("end_turn", "result: echo: from Zed")
    assert out["add"][1].startswith("result: 42")
    assert "echo" not in out["plain"][1].split() and "subagent" in out["plain"][1].split()
    # the stdio server ran below the agent while its session was open, and is gone once it is closed
    assert servers and not (after & servers)


def test_the_session_cwd_is_the_stdio_servers_directory_and_env_reaches_it(tmp_path):
    marks = tmp_path / "marks"

    async def main():
        client = Recorder()
        async with acp.spawn_agent_process(client, *AGENT) as (conn, _):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[stdio_entry(marks=str(marks))])).session_id
            conn_task = asyncio.ensure_future(prompt(conn, client, session, "call hang {}"))
            for _ in range(600):
                if any(u.session_update == "tool_call" for u in client.updates):
                    break
                await asyncio.sleep(0.05)
            await conn.cancel(session_id=session)
            return await asyncio.wait_for(conn_task, 60)

    stop, _ = asyncio.run(main())
    assert stop == "cancelled"
    # the cancelled call was cancelled on the MCP server too, which wrote where its env= said
    for _ in range(100):
        if marks.exists():
            break
        asyncio.run(asyncio.sleep(0.05))
    assert marks.read_text() == "cancelled\n"


def test_load_session_mounts_the_servers_it_is_sent(tmp_path):
    store = tmp_path / "store"

    async def main():
        first = Recorder()
        async with acp.spawn_agent_process(first, *AGENT, str(store)) as (conn, _):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session_id = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            before = await prompt(conn, first, session_id, "tools?")
        second = Recorder()
        async with acp.spawn_agent_process(second, *AGENT, str(store)) as (conn, _):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            await conn.load_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[stdio_entry()])
            after = await prompt(conn, second, session_id, 'call echo {"text": "reloaded"}')
            # loaded again in the same process without them: the session's tools are remade without them
            await conn.load_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[])
            again = await prompt(conn, second, session_id, "tools?")
        return before, after, again

    before, after, again = asyncio.run(main())
    assert "echo" not in before[1].split()
    assert after == ("end_turn", "result: echo: reloaded")
    assert "echo" not in again[1].split() and "subagent" in again[1].split()


def test_a_server_that_cannot_start_fails_the_prompt_with_its_diagnostic(tmp_path):
    async def main():
        client = Recorder()
        async with acp.spawn_agent_process(client, *AGENT) as (conn, _):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            missing = acp.schema.McpServerStdio(name="gone", command=str(tmp_path / "no-such-server"), args=[], env=[])
            session = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[missing])).session_id
            with pytest.raises(acp.RequestError) as failed:
                await conn.prompt(session_id=session, prompt=[acp.text_block("tools?")])
            # the agent is still there for other sessions
            other = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            return failed.value, await prompt(conn, client, other, "tools?")

    error, other = asyncio.run(main())
    assert error.code == -32603
    assert str(error).startswith('Internal error: MCP server "gone"') and "could not be started" in str(error)
    assert other[0] == "end_turn"


BAD = [
    ({"name": "", "command": "x", "args": [], "env": []}, "mcpServers.0.name", "must not be empty"),
    ({"name": "a\nb", "command": "x", "args": [], "env": []}, "mcpServers.0.name", "contains a control character"),
    ({"name": "n" * 65, "command": "x", "args": [], "env": []}, "mcpServers.0.name", "is longer than 64 characters (65)"),
    ({"name": "s", "command": "", "args": [], "env": []}, "mcpServers.0.command", "must not be empty"),
    ({"name": "s", "command": "x\u0000y", "args": [], "env": []}, "mcpServers.0.command", "contains a control character"),
    ({"name": "s", "command": "x", "args": ["a\u0000"], "env": []}, "mcpServers.0.args.0", "contains a control character"),
    ({"name": "s", "command": "x", "args": ["a"] * 257, "env": []}, "mcpServers.0.args", "has more than 256 entries (257)"),
    ({"name": "s", "command": "x", "args": [], "env": [{"name": "A=B", "value": "1"}]}, "mcpServers.0.env.0.name",
     "is not a valid environment variable name: 'A=B'"),
    ({"name": "s", "command": "x", "args": [], "env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]},
     "mcpServers.0.env.1.name", "repeats 'A'"),
    ({"type": "http", "name": "h", "url": "file:///etc/passwd", "headers": []}, "mcpServers.0.url",
     "must be an http:// or https:// URL with a host, got 'file:///etc/passwd'"),
    ({"type": "http", "name": "h", "url": "http://127.0.0.1:1/mcp", "headers": [{"name": "X", "value": "a\r\nInjected: 1"}]},
     "mcpServers.0.headers.0.value", "contains a control character"),
    ({"type": "http", "name": "h", "url": "http://127.0.0.1:1/mcp", "headers": [{"name": "Bad Header", "value": "v"}]},
     "mcpServers.0.headers.0.name", "is not a valid header name: 'Bad Header'"),
    ({"type": "sse", "name": "s", "url": "http://127.0.0.1:1/sse", "headers": []}, "mcpServers.0.type",
     'is "sse", which this agent does not take (stdio and http only; MCP deprecated SSE for streamable HTTP)'),
]


@pytest.mark.parametrize(("entry", "field", "problem"), BAD)
def test_hostile_entries_are_refused_before_anything_starts(entry, field, problem):
    with pytest.raises(entries.EntryError) as caught:
        entries.servers_from_entries([entry])
    assert (caught.value.field, caught.value.problem) == (field, problem)


def test_too_many_or_same_named_servers_are_refused():
    one = {"name": "s", "command": "x", "args": [], "env": []}
    with pytest.raises(entries.EntryError) as many:
        entries.servers_from_entries([dict(one, name=f"s{i}") for i in range(33)])
    assert str(many.value) == "mcpServers has more than 32 servers (33)"
    with pytest.raises(entries.EntryError) as twice:
        entries.servers_from_entries([one, one])
    assert str(twice.value) == "mcpServers.1.name repeats 's'; each server needs its own name"


def test_entries_become_servers_with_their_env_headers_and_the_session_directory(tmp_path):
    stdio, http = entries.servers_from_entries([
        {"name": "h", "command": sys.executable, "args": [HOSTILE], "env": [{"name": "HOSTILE_MARKS", "value": "/x"}]},
        {"type": "http", "name": "calc", "url": "https://example.org/mcp", "headers": [{"name": "Authorization",
                                                                                        "value": "Bearer s3cret"}]},
    ], cwd=str(tmp_path))
    assert (stdio.command, stdio.env, stdio.cwd, stdio.name) == ([sys.executable, HOSTILE], {"HOSTILE_MARKS": "/x"},
                                                                  str(tmp_path), "h")
    assert (http.url, http.headers, http.name) == ("https://example.org/mcp", {"Authorization": "Bearer s3cret"}, "calc")
    assert "s3cret" not in repr(http)
    # what toh_nb hands its own ACP children reads back as the same server
    [again] = entries.servers_from_entries([stdio.acp_entry()])
    assert (again.command, again.env) == (stdio.command, stdio.env)


def test_a_bad_entry_is_an_invalid_params_error_naming_the_field(tmp_path):
    with Served("--latency", "0") as server:
        server.initialize()
        answer = server.call("session/new", {"cwd": str(tmp_path), "mcpServers": [
            {"name": "ok", "command": sys.executable, "args": [], "env": []},
            {"name": "evil", "command": sys.executable, "args": [], "env": [{"name": "LD_PRELOAD=", "value": "x"}]}]})
        still = server.new_session(str(tmp_path))
    assert answer["error"]["code"] == -32602
    assert answer["error"]["message"] == ("Invalid params: mcpServers.1.env.0.name is not a valid environment variable "
                                          "name: 'LD_PRELOAD='")
    assert answer["error"]["data"] == {"field": "mcpServers.1.env.0.name"}
    assert still.startswith("toh-")


def test_a_toh_nb_hub_hands_its_servers_to_a_served_toh_nb_which_calls_them(tmp_path):
    """Both ways at once: a hub's MCP server reaches its ACP child (a served toh_nb) in session/new,
    and that child's root calls it."""
    async def main():
        agent = tn.AcpAgent(AGENT, cwd=str(tmp_path))
        async with tn.AsyncHub(ids="sequential", providers={"toh": agent},
                               tools=[tn.MCPServer(hostile(), name="h", env={"HOSTILE_MARKS": "/dev/null"})]) as hub:
            return await hub.spawn('call echo {"text": "nested"}', provider="toh")

    result = asyncio.run(main())
    assert (result.stop_reason, result.text) == ("completed", "result: echo: nested")


def test_session_cancel_stops_a_prompt_still_starting_its_servers(tmp_path):
    """Issue 41.6: a ``session/cancel`` while the session's servers are being listed ends the prompt
    ``cancelled`` at once (it waited for the listing's whole ``connect_timeout`` before)."""
    from .helpers import raw

    async def main():
        client = Recorder()
        async with acp.spawn_agent_process(client, *AGENT) as (conn, _):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            command = raw("--slow-pages")
            slow = acp.schema.McpServerStdio(name="pages", command=command[0], args=command[1:], env=[])
            session = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[slow])).session_id
            asking = asyncio.ensure_future(conn.prompt(session_id=session, prompt=[acp.text_block("tools?")]))
            await asyncio.sleep(0.5)  # the prompt is in the listing (it never ends)
            await conn.cancel(session_id=session)
            try:
                return (await asking).stop_reason
            except acp.RequestError as error:  # what it did: wait out connect_timeout, then fail the prompt
                return str(error)

    assert asyncio.run(main()) == "cancelled"
