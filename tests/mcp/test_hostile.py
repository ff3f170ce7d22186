"""Misbehaving MCP servers: a crash mid-call, a call never answered, garbage on stdout, a 10 MB result, a
program that never speaks MCP. Each gives the turn a clear error within its timeout, never hangs the
hub, and leaves no process behind."""

from __future__ import annotations

import asyncio
import os
import shlex

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.mcp import texts

from ..helpers import alive
from .helpers import descendants, hostile, raw
from .servers import raw as raw_server

pytestmark = pytest.mark.timeout(120)


def results(hub) -> list[tuple[str, bool]]:
    return [(r["text"], r["is_error"]) for r in hub.view.transcript(hub.root, raw=True) if r["kind"] == "tool/result"]


def display(server: tn.MCPServer) -> str:
    return f'MCP server "{server.name}" (`{shlex.join(server.command)}`)'


def refused_run(server: tn.MCPServer) -> str:
    """The text of the ToolError a hub with ``server`` raises for ``run("go")``."""
    async def main():
        async with tn.AsyncHub(tn.ScriptedModel({"root": ["done"]}), tools=[server]) as hub:
            with pytest.raises(tn.ToolError) as caught:
                await hub.run("go")
            return str(caught.value)

    return asyncio.run(main())


def test_a_crash_mid_call_is_the_calls_error_and_the_next_call_restarts_the_server():
    before = descendants()
    server = tn.MCPServer(hostile(), name="h")
    model = tn.ScriptedModel({"root": [tn.ToolCall("pid", {}), tn.ToolCall("crash", {}), tn.ToolCall("pid", {}), "done"]})

    async def main():
        async with tn.AsyncHub(model, tools=[server]) as hub:
            result = await hub.run("go")
            return result, results(hub)

    result, seen = asyncio.run(main())
    assert result.text == "done"
    first_pid, crash, second_pid = seen
    assert crash == ("Error: " + texts.closed_during(display(server), "crash", "hostile: fatal: out of cheese"), True)
    assert crash[0].endswith("; it is restarted at the next call; its stderr ends: hostile: fatal: out of cheese")
    assert first_pid[0].isdigit() and second_pid[0].isdigit() and first_pid != second_pid
    assert descendants() - before == set()


def test_a_call_never_answered_times_out_is_cancelled_on_the_server_and_the_session_stays(tmp_path):
    marks = tmp_path / "marks"
    server = tn.MCPServer(hostile(), name="h", env={"HOSTILE_MARKS": str(marks)}, timeout=1)
    model = tn.ScriptedModel({"root": [tn.ToolCall("hang", {}), tn.ToolCall("echo", {"text": "still here"}), "done"]})

    async def main():
        async with tn.AsyncHub(model, tools=[server]) as hub:
            await hub.run("go")
            return results(hub)

    hang, echo = asyncio.run(main())
    assert hang == ("Error: " + texts.call_timeout(display(server), "hang", 1), True)
    assert hang[0] == (f'Error: {display(server)} did not answer tools/call "hang" within 1 s; the call was '
                       "cancelled on the server")
    assert echo == ("echo: still here", False)
    assert marks.read_text() == "cancelled\n"


def test_interrupting_a_turn_cancels_its_in_flight_mcp_call_on_the_server(tmp_path):
    marks = tmp_path / "marks"
    server = tn.MCPServer(hostile(), name="h", env={"HOSTILE_MARKS": str(marks)})
    model = tn.ScriptedModel({"root": [tn.ToolCall("hang", {})]})

    async def main():
        async with tn.AsyncHub(model, tools=[server]) as hub:
            result = await hub.run("go", timeout=3)
            for _ in range(100):  # the server records the cancel it was sent
                if marks.exists():
                    break
                await asyncio.sleep(0.05)
            return result, results(hub)

    result, seen = asyncio.run(main())
    assert result.stop_reason == "aborted"
    assert seen == [("Error: tool call was aborted before it finished", True)]
    assert marks.read_text() == "cancelled\n"


def test_garbage_on_stdout_is_skipped_and_the_answer_still_arrives():
    model = tn.ScriptedModel({"root": [tn.ToolCall("garbage", {}), tn.ToolCall("echo", {"text": "x"}), "done"]})

    async def main():
        async with tn.AsyncHub(model, tools=[tn.MCPServer(hostile(), name="h")]) as hub:
            await hub.run("go")
            return results(hub)

    assert asyncio.run(main()) == [("answered after garbage", False), ("echo: x", False)]


def test_a_10_mb_result_is_cut_for_the_model_and_says_so():
    model = tn.ScriptedModel({"root": [tn.ToolCall("big", {}), "done"]})

    async def main():
        async with tn.AsyncHub(model, tools=[tn.MCPServer(hostile(), name="h")]) as hub:
            await hub.run("go")
            return results(hub)

    [(text, is_error)] = asyncio.run(main())
    assert not is_error
    assert text == "x" * texts.MAX_RESULT_CHARS + texts.cut(10_000_000 - texts.MAX_RESULT_CHARS)
    assert text.endswith("[... 9900000 more characters cut: the MCP result was longer than 100000 characters]")


def test_an_is_error_result_is_a_tool_error():
    model = tn.ScriptedModel({"root": [tn.ToolCall("fail", {}), "done"]})

    async def main():
        async with tn.AsyncHub(model, tools=[tn.MCPServer(hostile(), name="h")]) as hub:
            await hub.run("go")
            return results(hub)

    assert asyncio.run(main()) == [("Error: Error executing tool fail: the disk is made of cheese", True)]


def test_a_helper_that_left_the_servers_process_group_dies_with_hub_close():
    """Issue 41.12: a stdio server runs under the launcher an ACP agent has, so its whole tree (a
    ``setsid`` helper that ignores SIGTERM included) is gone when ``hub.close()`` returns."""
    before = descendants()
    server = tn.MCPServer(hostile(), name="h")
    model = tn.ScriptedModel({"root": [tn.ToolCall("detach", {}), "done"]})

    async def main():
        async with tn.AsyncHub(model, tools=[server]) as hub:
            result = await hub.run("go")
            (helper, is_error), = results(hub)
            assert (result.text, is_error) == ("done", False) and alive(int(helper))
        return int(helper)

    helper = asyncio.run(main())
    assert not alive(helper)
    assert descendants() - before == set()


def test_a_program_that_never_speaks_mcp_fails_within_the_connect_timeout_and_is_stopped():
    before = descendants()
    server = tn.MCPServer(hostile("--garbage-only"), name="g", connect_timeout=2)
    message = refused_run(server)
    # the banner it printed instead of JSON-RPC is named (the SDK also logs it on mcp.client.stdio)
    noise = texts.noise(1, "Welcome to not-an-MCP-server 1.0")
    assert message == texts.handshake_timeout(display(server), 2, "") + noise
    assert message == (f"{display(server)} did not complete the MCP handshake within 2 s; 1 line(s) it wrote on "
                       "stdout were not JSON-RPC, the first: 'Welcome to not-an-MCP-server 1.0'")
    assert descendants() - before == set()


def test_closing_the_hub_while_a_server_starts_stops_it_and_the_run_says_so():
    before = descendants()
    server = tn.MCPServer(hostile("--garbage-only"), name="g", connect_timeout=60)

    async def main():
        hub = tn.AsyncHub(tn.ScriptedModel({"root": ["done"]}), tools=[server])
        running = asyncio.ensure_future(hub.run("go"))
        for _ in range(200):  # until the server process exists
            if descendants() - before:
                break
            await asyncio.sleep(0.05)
        await hub.close()
        with pytest.raises(tn.ToolError) as caught:
            await running
        return str(caught.value)

    assert asyncio.run(main()) == texts.closed_hub(display(server)) == f"{display(server)}: the hub is closed"
    assert descendants() - before == set()


def test_a_crash_names_the_non_protocol_lines_of_that_session():
    server = tn.MCPServer(hostile("--banner"), name="h")
    model = tn.ScriptedModel({"root": [tn.ToolCall("echo", {"text": "x"}), tn.ToolCall("crash", {}),
                                       tn.ToolCall("crash", {}), "done"]})

    async def main():
        async with tn.AsyncHub(model, tools=[server]) as hub:
            await hub.run("go")
            return results(hub)

    echo, first, second = asyncio.run(main())
    assert echo == ("echo: x", False)  # the banner is skipped: the session works
    crashed = texts.closed_during(display(server), "crash", "hostile: fatal: out of cheese")
    assert first == ("Error: " + crashed + texts.noise(1, "hostile 1.0 starting (not JSON-RPC)"), True)
    assert first[0].endswith("; 1 line(s) it wrote on stdout were not JSON-RPC, the first: "
                             "'hostile 1.0 starting (not JSON-RPC)'")
    assert second == first  # the restarted session counts its own lines (one banner again, not two)


def test_an_answer_the_sdk_cannot_parse_is_named_not_called_a_silence():
    """Issue 41.13: a listing or call that ends because the server sent a line the SDK could not parse
    names that line instead of saying only that no answer came."""
    call = tn.MCPServer(raw("--garble-call"), name="c", timeout=1)
    listing = tn.MCPServer(raw("--garble-list"), name="l", connect_timeout=1)
    model = tn.ScriptedModel({"root": [tn.ToolCall("t", {}), "done"]})

    async def main():
        async with tn.AsyncHub(model, tools=[call]) as hub:
            await hub.run("go")
            return results(hub)

    called, listed = asyncio.run(main()), refused_run(listing)
    line = raw_server.GARBLED
    assert called == [("Error: " + texts.call_unparsed(display(call), "t", 1, line), True)]
    assert called[0][0] == (f'Error: {display(call)} failed tools/call "t": it sent a line that is not valid JSON-RPC '
                            f"instead of an answer (none came within 1 s): {line!r}")
    assert listed == texts.list_failed(display(listing), texts.unparsed(1, line))


def test_a_server_listing_a_name_twice_degrades_only_itself_and_says_so_once():
    """Issue 41.11: the duplicates are refused by name in one line (a problem event, once per listing);
    that server's other tools and the hub's other servers work in every run."""
    twice = tn.MCPServer(raw("--twice"), name="twice")
    other = tn.MCPServer(hostile(), name="other")
    model = tn.ScriptedModel({"root": [tn.ToolCall("t", {}), tn.ToolCall("u", {}), tn.ToolCall("echo", {"text": "x"}),
                                       "done", tn.ToolCall("t", {}), "again"]})
    problems: list = []

    async def main():
        async with tn.AsyncHub(model, tools=[twice, other]) as hub:
            engine_of(hub).runtime.bus.subscribe(lambda e: problems.append(e.message) if type(e).__name__ == "Problem" else None)
            first = await hub.run("go")
            second = await hub.run("go again")
            specs = {tool.name: tool.description for tool in engine_of(hub).root.tools.values() if tool.name in ("t", "u")}
            return first.text, second.text, results(hub), specs

    first, second, seen, specs = asyncio.run(main())
    assert (first, second) == ("done", "again")
    assert seen == [("ok t", False), ("ok u", False), ("echo: x", False), ("ok t", False)]
    assert specs == {"t": "t number 0", "u": "u number 2"}  # the first of each name
    assert problems == [texts.listed_twice(display(twice), ["t", "u"])]
    assert problems[0] == (f"{display(twice)} lists tool name(s) more than once: 't', 'u'; only the first tool "
                           "of each name is offered")


def test_a_listing_has_one_deadline_for_all_its_pages():
    """Issue 41.6: ``connect_timeout`` bounds the whole ``tools/list``, not each of its 100 pages (a
    page every 0.3 s never met a per-page bound of 1 s)."""
    server = tn.MCPServer(raw("--slow-pages"), name="pages", connect_timeout=1)
    message = refused_run(server)
    pages = [n for n in range(1, 4) if message == texts.list_failed(display(server), texts.list_timeout(1, n))]
    assert len(pages) == 1, message
    assert message.startswith(f"{display(server)} could not list its tools: the listing was not complete within 1 s (")


@pytest.mark.parametrize("bound", ["timeout", "turn_timeout"])
def test_a_run_timeout_and_turn_timeout_bound_the_wait_for_the_servers(bound):
    """Issue 41.6: a run's ``timeout=`` and the root's ``turn_timeout`` cover starting and listing its
    servers (the listing's own bound, ``connect_timeout``, is 60 s here)."""
    server = tn.MCPServer(raw("--slow-pages"), name="pages", connect_timeout=60)
    before = descendants()

    async def main():
        options = {"turn_timeout": 1} if bound == "turn_timeout" else {}
        async with tn.AsyncHub(tn.ScriptedModel({"root": ["done"]}), tools=[server], **options) as hub:
            with pytest.raises(tn.ToolError) as failed:
                await hub.run("go", **({"timeout": 1} if bound == "timeout" else {}))
            return str(failed.value), (await hub.agents())[0]["turns"]

    message, turns = asyncio.run(main())
    assert message == texts.not_ready(1) == (
        "the hub's MCP servers were not started and listed within 1 s (the call's timeout= or the root's "
        "turn_timeout); nothing ran, and the next call tries again")
    assert turns == 0
    assert descendants() - before == set()


def test_an_answer_still_arriving_at_the_timeout_is_not_called_a_silence():
    """Issue 41.13: a large result on its way when the call's timeout passed is said to be arriving
    (with how much of it was sent), not "did not answer"; a server that sent nothing still gets that."""
    slow = tn.MCPServer(raw("--slow-answer"), name="slow", timeout=1)
    silent = tn.MCPServer(hostile(), name="silent", timeout=1, env={"HOSTILE_MARKS": os.devnull})
    model = tn.ScriptedModel({"root": [tn.ToolCall("t", {}), tn.ToolCall("hang", {}), "done"]})

    async def main():
        async with tn.AsyncHub(model, tools=[slow, silent]) as hub:
            await hub.run("go")
            return results(hub)

    (arriving, error), (nothing, _) = asyncio.run(main())
    assert error is True
    assert arriving == "Error: " + texts.still_sending(display(slow), "t", 1, 1_000_000)
    assert arriving == (f'Error: {display(slow)} was still sending its answer to tools/call "t" when 1 s had passed '
                        "(about 1.0 MB of it sent); the call was cancelled: a larger timeout= would let a result "
                        "that large arrive")
    assert nothing == "Error: " + texts.call_timeout(display(silent), "hang", 1)
