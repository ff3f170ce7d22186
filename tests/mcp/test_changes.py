"""A server that changes its tools (``notifications/tools/list_changed``): the agents that see it are
offered the new list from their next step, children started later too; and a real server's over-long
and dotted tool names reach the model shortened and mapped, and are called by their server names."""

from __future__ import annotations

import asyncio
import os
import re
import sys

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.mcp.config import name_hash

from .helpers import HERE

pytestmark = pytest.mark.timeout(120)
CHANGING = [sys.executable, os.path.join(HERE, "servers", "changing.py")]
LONG = "summarise_the_whole_archive_of_notes_for_one_year_into_a_single_paragraph_please"
SHORT = LONG[:55] + "_" + name_hash("ch\x1f" + LONG)


def offered(request):
    return sorted(spec.name for spec in request.tools)


def test_the_next_step_after_a_call_that_changed_the_tools_sees_the_new_list():
    seen = []

    def step(result_check):
        def look(request):
            seen.append(offered(request))
            return result_check(request)
        return look

    model = tn.ScriptedModel({"root": [
        step(lambda r: tn.ToolCall("open_archive", {})),
        step(lambda r: tn.ToolCall("read_archive", {"year": "2025"})),
        step(lambda r: tn.ToolCall("close_archive", {})),
        step(lambda r: tn.ToolCall("read_archive", {"year": "2024"})),
        step(lambda r: "done"),
    ]})

    async def main():
        async with tn.AsyncHub(model, tools=[tn.MCPServer(CHANGING, name="ch")], ids="sequential") as hub:
            result = await hub.run("go")
            rows = await hub.transcript(hub.root, raw=True)
            return result, [(r["text"], r["is_error"]) for r in rows if r["kind"] == "tool/result"]

    result, results = asyncio.run(main())
    assert result.stop_reason == "completed"
    mcp = [[n for n in names if n in ("open_archive", "close_archive", "read_archive")] for names in seen]
    assert mcp == [["close_archive", "open_archive"], ["close_archive", "open_archive", "read_archive"],
                   ["close_archive", "open_archive", "read_archive"], ["close_archive", "open_archive"],
                   ["close_archive", "open_archive"]]
    assert results == [("opened", False), ("archive 2025: the beans did well", False), ("closed", False),
                       ('Error: unknown tool "read_archive"', True)]


def test_children_see_the_new_list_live_and_when_started_later_and_filters_still_apply():
    seen: dict[str, list] = {}

    def record(label):
        def look(request):
            seen.setdefault(label, []).append(offered(request))
            return "ok"
        return look

    model = tn.ScriptedModel({"root": [tn.ToolCall("open_archive", {}), "done"]},
                             default=lambda request: record(request.label)(request))

    async def main():
        async with tn.AsyncHub(model, tools=[tn.MCPServer(CHANGING, name="ch")], ids="sequential") as hub:
            early = await hub.start("wait", label="early")
            await early.wait(timeout=60)
            narrow = await hub.start("wait", label="narrow", tool_filter={"allow": ["open_archive"]})
            await narrow.wait(timeout=60)
            await hub.run("open it")
            await early.send("again")
            await early.wait(timeout=60)
            await narrow.send("again")
            await narrow.wait(timeout=60)
            await hub.spawn("later", label="later")
            return seen

    seen = asyncio.run(main())
    assert "read_archive" not in seen["early"][0] and "read_archive" in seen["early"][1]
    assert seen["narrow"] == [["open_archive", "report"]] * 2  # its allow list still holds
    assert "read_archive" in seen["later"][0]


def test_a_real_servers_long_and_dotted_names_are_mapped_and_called_by_their_server_names():
    model = tn.ScriptedModel({"root": [
        lambda request: tn.ToolCall(SHORT, {}) if SHORT in offered(request) else f"not offered: {offered(request)}",
        tn.ToolCall("notes_count", {}),
        "done",
    ]})

    async def main():
        async with tn.AsyncHub(model, tools=[tn.MCPServer(CHANGING, name="ch")], ids="sequential") as hub:
            await hub.run("go")
            rows = await hub.transcript(hub.root, raw=True)
            return [r["text"] for r in rows if r["kind"] == "tool/result"], sorted(engine_of(hub).root.tools)

    results, names = asyncio.run(main())
    assert results == ["summary", "2 notes"]
    assert len(SHORT) == 64 and all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) for n in names)


def test_a_childs_own_server_changing_retools_that_child():
    model = tn.ScriptedModel({"own": [
        tn.ToolCall("open_archive", {}),
        lambda request: tn.ToolCall("read_archive", {"year": "2023"}) if "read_archive" in offered(request)
        else f"not offered: {offered(request)}",
        lambda request: request.messages[-1].text,
    ]})

    async def main():
        async with tn.AsyncHub(model, ids="sequential") as hub:
            return await hub.spawn("use it", label="own", tools=[tn.MCPServer(CHANGING, name="ch")])

    result = asyncio.run(main())
    assert (result.stop_reason, result.text) == ("completed", "archive 2023: the beans did well")
