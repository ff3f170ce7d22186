"""Provider registry and the spawn/fork providers."""

from __future__ import annotations

import asyncio

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.content import ToolCall
from toh_nb.core.errors import SubagentError, UsageError
from toh_nb.subagents import SpawnProvider, StartRequest
from toh_nb.providers.base import Capabilities


def test_registry_refuses_duplicates_and_unknown_providers():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "x")) as hub:
            service = engine_of(hub).service
            with pytest.raises(SubagentError, match='a subagent provider named "spawn" is already registered') as info:
                service.register_provider(SpawnProvider())
            assert info.value.code == "DUPLICATE_PROVIDER"
            with pytest.raises(SubagentError, match='no subagent provider registered for "acp"'):
                await service.start("acp", StartRequest("p", engine_of(hub).root, "x"))

            class Limited:
                name = "limited"
                capabilities = Capabilities(continuable=False, persona=False, tool_filter=False, depth_limit=False)

                async def plan(self, child):
                    raise AssertionError("never planned: every call here is refused first")

            remove = service.register_provider(Limited())
            with pytest.raises(SubagentError, match='does not support the "depthLimit" capability'):
                await service.start("limited", StartRequest("p", engine_of(hub).root, "x"))
            with pytest.raises(SubagentError, match="does not support continuable children"):
                await service.start_continuable("limited", StartRequest("p", engine_of(hub).root, "x", max_depth=None))
            with pytest.raises(UsageError, match="cannot enforce maxDepth"):
                from toh_nb.subagents.tool import make_subagent_tool
                make_subagent_tool(service, None, provider="limited")
            remove()
            assert "limited" not in service.providers

    asyncio.run(main())


def test_fork_child_sees_the_parents_completed_turns_and_continues_numbering():
    seen = {}

    def fn(req):
        if req.label == "review":
            seen["messages"] = [m.text for m in req.messages if m.role != "tool"]
            seen["turn"] = req.turn
            return "reviewed"
        if req.turn == 2 and req.step == 1:
            return tn.ModelResponse(tool_calls=[ToolCall("fork", {"description": "review", "prompt": "review it"})])
        return f"answer {req.turn}"

    async def main():
        tools = [{"tool_name": "subagent", "provider": "spawn"},
                 {"tool_name": "fork", "provider": "fork"}]
        async with tn.AsyncHub(tn.FunctionModel(fn), ids="sequential", delegation_tools=tools) as hub:
            await hub.run("first question")
            result = await hub.run("second question")
            assert result.text == "answer 2"
            # the completed first turn is inherited, the in-flight second turn is not
            assert seen["messages"] == ["first question", "answer 1", "review it"]
            assert seen["turn"] == 2
            child = engine_of(hub).runtime.store.open("agent-1")
            assert child.header.seed_length == 4
            assert engine_of(hub).runtime.tools.get("fork").description.startswith("Hand a task to a subagent that starts from")

    asyncio.run(main())


def test_tool_configuration_errors():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "x")) as hub:
            from toh_nb.subagents.tool import make_subagent_tool
            service = engine_of(hub).service
            for bad in (-1, 1.5, "3", True, float("nan")):
                with pytest.raises(UsageError, match='max_depth must be an integer from 0 to 9007199254740991 or "provider-managed", got '):
                    make_subagent_tool(service, None, max_depth=bad)
            with pytest.raises(UsageError, match="background_mode"):
                make_subagent_tool(service, None, background_mode="forever")
            with pytest.raises(UsageError, match="already registered"):
                tn.AsyncHub(tn.FunctionModel(lambda r: "x"), delegation_tools=[{"tool_name": "job_list"}])
            tool = make_subagent_tool(service, None, tool_name="quiet", enable_run_in_background=False)
            assert list(tool.parameters["properties"]) == ["description", "prompt"]
            engine_of(hub).runtime.tools.add(tool)
            engine_of(hub).root.tools["quiet"] = tool
            refused = await hub.call_tool("quiet", description="d", prompt="p", run_in_background=True)
            assert refused.text == ("Error: run_in_background is disabled for this tool instance "
                                    "(enable_run_in_background=False)")

    asyncio.run(main())
