"""MCP servers as tools: real servers (server-everything, server-filesystem, the SDK's MCPServer) called
by a scripted model through ``hub.run``, inherited by children, filtered, and closed with the hub."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.mcp import texts
from toh_nb.mcp.mounts import MCPTool

from .helpers import EVERYTHING, FILESYSTEM, descendants, hostile, http_server, needs_everything, needs_filesystem

pytestmark = pytest.mark.timeout(120)


def last_tool_text(request) -> str:
    return request.messages[-1].text


def run(coro):
    return asyncio.run(coro)


@needs_everything
def test_a_model_calls_server_everything_tools_through_hub_run():
    before = descendants()
    seen = {}

    def answer(request):
        seen["specs"] = {spec.name: spec for spec in request.tools}
        return "done"

    model = tn.ScriptedModel({"root": [tn.ToolCall("echo", {"message": "hi"}), tn.ToolCall("get-sum", {"a": 2, "b": 3}),
                                       tn.ToolCall("get-tiny-image", {}), answer]})

    async def main():
        async with tn.AsyncHub(model, tools=[tn.MCPServer([EVERYTHING], name="everything")], ids="sequential") as hub:
            result = await hub.run("go")
            rows = await hub.transcript(hub.root, raw=True)
            agents = await hub.agents()
            during = descendants() - before
        return result, rows, agents, during

    result, rows, agents, during = run(main())
    assert result.text == "done"
    results = [(r["tool"], r["text"], r["is_error"]) for r in rows if r["kind"] == "tool/result"]
    assert results[0] == ("echo", "Echo: hi", False)
    assert results[1] == ("get-sum", "The sum of 2 and 3 is 5.", False)
    assert results[2][1].startswith("Here's the image you requested:\n[image: image/png, ")
    assert [r["tool"] for r in rows if r["kind"] == "tool/call"] == ["echo", "get-sum", "get-tiny-image"]
    assert agents[0]["turns"] == 1 and agents[0]["stop_reason"] == "completed"
    # the model saw the server's own schema and description
    echo = seen["specs"]["echo"]
    assert echo.description == "Echoes back the input string"
    assert echo.parameters["properties"]["message"]["type"] == "string"
    assert echo.parameters["required"] == ["message"]
    assert during, "the server ran as a process below this one"
    assert descendants() - before == set(), "hub.close() left an MCP server process"


@needs_filesystem
def test_a_child_inherits_the_hubs_mcp_tools_and_tool_filter_applies(tmp_path):
    (tmp_path / "notes.txt").write_text("carrots in March")
    root = str(tmp_path)
    seen: dict[str, list[str]] = {}

    def child_reads(request):
        seen[request.label] = [spec.name for spec in request.tools]
        return tn.ToolCall("read_text_file", {"path": os.path.join(root, "notes.txt")})

    model = tn.ScriptedModel({
        "root": [tn.ToolCall("subagent", {"description": "reader", "prompt": "read the notes"}),
                 lambda r: "root: " + last_tool_text(r)],
        "reader": [child_reads, lambda r: "child read: " + last_tool_text(r)],
        "narrow": [lambda r: seen.setdefault("narrow", [s.name for s in r.tools]) and "ok"],
    })

    async def main():
        async with tn.AsyncHub(model, tools=[tn.MCPServer([FILESYSTEM, root], name="fs")], ids="sequential") as hub:
            result = await hub.run("go")
            narrow = await hub.spawn("look", label="narrow", tool_filter={"allow": ["list_directory"]})
            return result, narrow

    result, narrow = run(main())
    assert result.text == "root: child read: carrots in March"
    assert "read_text_file" in seen["reader"] and "list_directory" in seen["reader"]
    assert seen["narrow"] == ["list_directory"]
    assert narrow.text == "ok"


def test_two_servers_offering_the_same_tool_are_prefixed_with_their_names():
    async def main():
        async with tn.AsyncHub(tn.ScriptedModel({"root": [tn.ToolCall("a_echo", {"text": "1"}),
                                                          tn.ToolCall("b_echo", {"text": "2"}), "done"]}),
                               tools=[tn.MCPServer(hostile(), name="a"), tn.MCPServer(hostile(), name="b"),
                                      tn.MCPServer(hostile(), name="c", prefix=True)]) as hub:
            await hub.run("go")
            return engine_of(hub).root.tools, await hub.transcript(hub.root, raw=True)

    tools, rows = run(main())
    mcp_tools = [name for name, tool in tools.items() if isinstance(tool, MCPTool)]
    # a clash prefixes every server's copy; prefix=True prefixes all of a server's tools
    assert sorted(n for n in mcp_tools if n.endswith("echo")) == ["a_echo", "b_echo", "c_echo"]
    assert "c_pid" in mcp_tools and "a_pid" in mcp_tools
    assert [r["text"] for r in rows if r["kind"] == "tool/result"] == ["echo: 1", "echo: 2"]


def test_a_name_clashing_with_a_hub_tool_is_prefixed():
    def echo(text: str) -> str:
        """Local echo."""
        return text

    async def main():
        async with tn.AsyncHub(tn.ScriptedModel({"root": ["done"]}), tools=[echo, tn.MCPServer(hostile(), name="h")]) as hub:
            await hub.run("go")
            return sorted(engine_of(hub).root.tools)

    names = run(main())
    assert "echo" in names and "h_echo" in names and "pid" in names


def test_the_sdk_mcpserver_over_streamable_http_maps_structured_images_and_resources():
    model = tn.ScriptedModel({"root": [tn.ToolCall("add", {"a": 2, "b": 40}), tn.ToolCall("picture", {}),
                                       tn.ToolCall("note", {}), tn.ToolCall("add", {"a": "x"}), "done"]})
    with http_server() as url:
        async def main():
            async with tn.AsyncHub(model, tools=[tn.MCPServer(url=url, name="calc")]) as hub:
                await hub.run("go")
                return await hub.transcript(hub.root, raw=True)

        rows = run(main())
    results = [(r["text"], r["is_error"]) for r in rows if r["kind"] == "tool/result"]
    assert results[0] == ("42", False)
    assert results[1] == ("[image: image/png, 12 bytes base64]", False)
    assert results[2] == ("[resource note://1 (text/plain)]\nremember the milk", False)
    assert results[3][1] is True and results[3][0].startswith("Error: ")


def test_one_session_per_server_is_shared_by_the_agents_that_use_it():
    model = tn.ScriptedModel({"root": [tn.ToolCall("pid", {}), tn.ToolCall("subagent", {"description": "kid", "prompt": "p"}),
                                       "done"],
                              "kid": [tn.ToolCall("pid", {}), lambda r: last_tool_text(r)]})

    async def main():
        async with tn.AsyncHub(model, tools=[tn.MCPServer(hostile(), name="h")], ids="sequential") as hub:
            await hub.run("go")
            rows = await hub.transcript(hub.root, raw=True)
            return [r["text"] for r in rows if r["kind"] == "tool/result"]

    texts_ = run(main())
    pid = texts_[0]
    assert pid.isdigit()
    assert texts_[1] == pid  # the child's answer: the same server process answered it


def test_a_server_that_cannot_start_fails_the_run_with_its_reason_and_nothing_starts(tmp_path):
    missing = str(tmp_path / "no-such-server")

    async def main():
        async with tn.AsyncHub(tn.ScriptedModel({"root": ["done"]}), tools=[tn.MCPServer([missing], name="gone")]) as hub:
            with pytest.raises(tn.ToolError) as caught:
                await hub.run("go")
            return str(caught.value), await hub.agents()

    message, agents = run(main())
    assert message == (f'MCP server "gone" (`{missing}`) could not be started: No such file or directory: '
                       f"'{missing}'")
    assert agents[0]["turns"] == 0


def test_json_results_of_structured_only_tools_are_rendered():
    # server-everything's get-structured-content sends text too; the SDK's MCPServer add() sends both as well
    from toh_nb.mcp.results import tool_result
    from mcp.types import CallToolResult

    result = tool_result(CallToolResult(content=[], structured_content={"temperature": 3}))
    assert result.text == json.dumps({"temperature": 3}, indent=1) and not result.is_error
    assert texts.EMPTY_RESULT == tool_result(CallToolResult(content=[])).text


def test_a_childs_own_servers_are_seen_by_that_child_only_and_its_tool_filter_applies():
    seen: dict[str, list[str]] = {}

    def note(request):
        seen[request.label or "root"] = sorted(spec.name for spec in request.tools)
        return "ok"

    model = tn.ScriptedModel({"root": [note], "own": [tn.ToolCall("echo", {"text": "mine"}), lambda r: last_tool_text(r)],
                              "plain": [note], "narrow": [note]})

    async def main():
        async with tn.AsyncHub(model) as hub:
            own = await hub.spawn("use your tool", label="own", tools=[tn.MCPServer(hostile(), name="h")])
            await hub.spawn("nothing", label="plain")
            await hub.spawn("narrow", label="narrow", tools=[tn.MCPServer(hostile(), name="h")],
                            tool_filter={"allow": ["pid"]})
            await hub.run("root")
            with pytest.raises(tn.UsageError) as caught:
                await hub.spawn("x", tools=[print])
            running = descendants()
            with pytest.raises(tn.UsageError):  # refused before any server of it starts
                await hub.spawn("x", tools=[tn.MCPServer(hostile(), name="late")], tool_filter={"allow": []},
                                persona=3)
            assert descendants() == running
            return own, str(caught.value)

    own, refusal = run(main())
    assert own.text == "echo: mine"
    assert "echo" not in seen["plain"] and "echo" not in seen["root"]
    assert seen["narrow"] == ["pid"]
    assert refusal == "tools takes tn.MCPServer objects (functions go to tn.Hub(tools=...)), got builtin_function_or_method"


def test_a_delegation_tools_servers_reach_the_children_it_starts():
    seen: dict[str, list[str]] = {}

    def note(request):
        seen[request.label] = sorted(spec.name for spec in request.tools)
        return tn.ToolCall("echo", {"text": "via helper"})

    model = tn.ScriptedModel({"root": [tn.ToolCall("helper", {"description": "kid", "prompt": "p"}),
                                       lambda r: "root: " + last_tool_text(r)],
                              "kid": [note, lambda r: last_tool_text(r)]})

    async def main():
        helper = tn.SubagentTool(name="helper", tools=(tn.MCPServer(hostile(), name="h"),))
        async with tn.AsyncHub(model, delegation_tools=[helper]) as hub:
            result = await hub.run("go")
            return result, sorted(engine_of(hub).root.tools)

    result, root_tools = run(main())
    assert result.text == "root: echo: via helper"
    assert "echo" in seen["kid"] and "echo" not in root_tools


def test_the_notebook_hub_mounts_servers_and_its_close_leaves_no_process():
    before = descendants()
    model = tn.ScriptedModel({"root": [tn.ToolCall("echo", {"text": "sync"}), lambda r: last_tool_text(r)]})
    hub = tn.Hub(model, tools=[tn.MCPServer(hostile(), name="h")])
    try:
        assert hub.run("go").text == "echo: sync"
        frame = hub.transcript(hub.root, raw=True)
        assert list(frame[frame["kind"] == "tool/call"]["tool"]) == ["echo"]
        assert descendants() - before
    finally:
        hub.close()
    assert descendants() - before == set()


def test_a_one_shot_childs_own_server_stops_when_the_child_is_done_and_starts_again_for_the_next():
    def pid_call(request):  # the own server's pid tool, named own_pid beside the shared server's pid
        names = {spec.name for spec in request.tools}
        return tn.ToolCall("own_pid" if "own_pid" in names else "pid", {})

    model = tn.ScriptedModel({"root": ["done"]}, default=[pid_call, lambda r: r.messages[-1].text])

    async def main():
        before = descendants()
        own = tn.MCPServer(hostile(), name="own")
        async with tn.AsyncHub(model, tools=[tn.MCPServer(hostile(), name="shared")], ids="sequential") as hub:
            first = await hub.spawn("x", label="one")
            after_first = descendants() - before
            job = await hub.spawn("y", label="two", background=True, tools=[own])
            second = await job.result(wait=True, timeout=60)
            await until_gone(int(second.text), before)
            after_job = descendants() - before
            third = await hub.spawn("z", label="three", tools=[own])
            after_third = descendants() - before
            return first, third, after_first, after_job, after_third

    first, third, after_first, after_job, after_third = run(main())
    assert first.stop_reason == third.stop_reason == "completed"
    # the shared server (under its launcher) and nothing else stays; the child's own ran and is gone (twice)
    assert len(after_first) == 2 and after_job == after_first and after_third == after_first
    assert int(third.text) not in after_third and int(first.text) in after_first


async def until_gone(pid, before):
    for _ in range(400):
        if pid not in descendants() - before:
            return
        await asyncio.sleep(0.05)
