"""ACP children get the hub's MCP servers: ``session/new``'s ``mcpServers`` (the fake SDK agent answers
what it was given; fast-agent, when installed, calls a tool of the server through its passthrough model)."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

import toh_nb as tn

pytest.importorskip("acp", reason="needs the acp extra: pip install 'toh-nb[acp]'")

from ..acp.helpers import FAKE_AGENT, fake  # noqa: E402
from ..real_parts import FAST_AGENT  # noqa: E402
from .helpers import HOSTILE, hostile, http_server  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]



def spawn_mcp(tmp_path, flags, servers):
    async def main():
        agent = tn.AcpAgent(fake(*flags), cwd=str(tmp_path), eof_grace=2.0)
        async with tn.AsyncHub(ids="sequential", providers={"coder": agent}, tools=servers) as hub:
            result = await hub.spawn("MCP", label="coder", provider="coder")
            return result, await hub.transcript(result.agent_id, raw=True)

    return asyncio.run(main())


def test_an_acp_child_is_handed_the_hubs_stdio_servers_and_http_ones_it_supports(tmp_path):
    assert os.path.exists(FAKE_AGENT)
    with http_server() as url:
        servers = [tn.MCPServer(hostile(), name="h", env={"HOSTILE_MARKS": "/dev/null"}),
                   tn.MCPServer(url=url, name="calc", headers={"X-Team": "blue"})]
        without, rows = spawn_mcp(tmp_path, (), servers)
        with_http, _ = spawn_mcp(tmp_path, ("--mcp-http",), servers)
    stdio = {"name": "h", "command": sys.executable, "args": [HOSTILE],
             "env": [{"name": "HOSTILE_MARKS", "value": "/dev/null"}]}
    assert json.loads(without.text) == [stdio]
    [skipped] = [r["text"] for r in rows if r["kind"] == "external/mcp_skipped"]
    assert json.loads(skipped) == {"servers": ["calc"], "reason": "the agent does not support MCP over HTTP"}
    assert json.loads(with_http.text) == [stdio, {"type": "http", "name": "calc", "url": url,
                                                  "headers": [{"name": "X-Team", "value": "blue"}]}]


@pytest.mark.skipif(FAST_AGENT is None, reason="fast-agent not installed (set TOH_NB_FAST_AGENT)")
def test_fast_agent_as_an_acp_child_calls_a_tool_of_the_hubs_mcp_server(tmp_path):
    """fast-agent's offline ``passthrough`` model calls a tool when the prompt reads
    ``***CALL_TOOL <tool> <arguments>``; fast-agent names a server's tools ``<server>__<tool>``."""
    async def main():
        agent = tn.AcpAgent([FAST_AGENT, "acp", "--model", "passthrough"], cwd=str(tmp_path), permissions="allow",
                            timeout=90)
        async with tn.AsyncHub(ids="sequential", providers={"fa": agent},
                               tools=[tn.MCPServer(hostile(), name="h")]) as hub:
            result = await hub.spawn('***CALL_TOOL h__echo {"text": "from fast-agent"}', label="fa", provider="fa")
            return result, await hub.transcript(result.agent_id, raw=True)

    result, rows = asyncio.run(main())
    assert (result.text, result.stop_reason) == ('{"result":"echo: from fast-agent"}', "completed")
    [call] = [json.loads(r["text"]) for r in rows if r["kind"] == "external/tool_call"]
    assert (call["title"], call["rawInput"]) == ("h/echo", {"text": "from fast-agent"})
