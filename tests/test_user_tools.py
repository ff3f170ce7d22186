"""The user's own tools (``Hub(tools=[...])``): seen by the root and children, filtered, off-loop."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of


def test_user_tools_are_seen_by_children_and_sync_ones_do_not_stall_other_agents():
    threads = []
    finished = []

    def slow_lookup(city: str) -> str:
        """Look up a city (slow, blocking)."""
        threads.append(threading.current_thread().name)
        time.sleep(0.5)
        finished.append(time.monotonic())
        return f"{city}: sunny"

    async def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    progress = []

    async def model(req):
        if req.label == "weather":
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("slow_lookup", {"city": "Oslo"})])
            return req.messages[-1].text
        if req.label == "ticker":
            for _ in range(5):  # keeps stepping on the loop while the other child's tool blocks a thread
                progress.append(time.monotonic())
                await asyncio.sleep(0.02)
            return "ticked"
        if req.label == "shouter":
            assert "slow_lookup" not in req.tool_names  # the child's filter hides it
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("loud", {"text": "hi"})])
            return req.messages[-1].text
        return "root"

    async def main():
        tools = [slow_lookup, tn.Tool(shout, name="loud", concurrency_safe=True)]
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", tools=tools) as hub:
            spec = {t.name: t for t in engine_of(hub).root.tool_specs}
            assert spec["slow_lookup"].parameters["properties"]["city"]["type"] == "string"
            assert spec["loud"].description == "Upper-case a text."
            weather, ticker = await asyncio.gather(hub.spawn("w", label="weather"), hub.spawn("t", label="ticker"))
            assert weather.text == "Oslo: sunny" and ticker.text == "ticked"
            assert threads and threads[0] != "MainThread"
            assert progress[-1] < finished[0]  # the ticker kept stepping while the lookup blocked its thread
            shouted = await hub.spawn("s", label="shouter", tool_filter={"deny": ["slow_lookup"]})
            assert shouted.text == "HI"
            direct = await hub.call_tool("slow_lookup", city="Rome")
            assert (direct.text, direct.is_error) == ("Rome: sunny", False)
            bad = await hub.call_tool("slow_lookup", town="Rome")
            assert bad.is_error and "city: Field required" in bad.text and "town: unexpected argument" in bad.text

    asyncio.run(main())


def test_bad_user_tools_are_refused_at_construction():
    with pytest.raises(tn.UsageError, match="already registered"):
        tn.AsyncHub(tn.FunctionModel(lambda r: "x"), tools=[tn.Tool(lambda text: text, name="subagent")])
    with pytest.raises(tn.UsageError, match="must be a callable"):
        tn.AsyncHub(tn.FunctionModel(lambda r: "x"), tools=[42])


def test_a_refused_configuration_releases_the_store(tmp_path):
    with pytest.raises(tn.UsageError, match="already registered"):
        tn.AsyncHub(tn.FunctionModel(lambda r: "x"), store=str(tmp_path), tools=[tn.Tool(lambda text: text, name="job_list")])
    hub = tn.AsyncHub(tn.FunctionModel(lambda r: "x"), store=str(tmp_path))  # the lock was released
    asyncio.run(hub.close())


def test_call_tool_passes_arguments_that_share_the_facade_parameter_names():
    def greet(name: str, self: str = "me") -> str:
        """Greet someone.

        name: who to greet
        self: who greets
        """
        return f"{self} greets {name}"

    async def main():
        async with tn.AsyncHub(tools=[greet]) as hub:
            assert (await hub.call_tool("greet", name="Bob", self="Ann")).text == "Ann greets Bob"

    asyncio.run(main())
    with tn.Hub(tools=[greet]) as hub:
        assert hub.call_tool("greet", name="Bob").text == "me greets Bob"
