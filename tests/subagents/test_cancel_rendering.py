"""A cancelled parent turn commits each tool's own abort rendering (reference §5), not the loop's generic text.

The texts stay in the conversation the next turn reads, so they are checked there (``seen_by_model``).
"""

from __future__ import annotations

import asyncio

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.content import ToolCall

from ..helpers import seen_by_model, until


def _hub(model, **kwargs):
    return tn.AsyncHub(tn.FunctionModel(model), ids="sequential", **kwargs)


async def _never():
    await asyncio.Event().wait()


def _delegating(calls):
    """Root: first step makes ``calls``; children hang until cancelled; later root turns answer."""

    async def model(req):
        if req.depth > 0:
            await _never()
        if req.turn == 1 and req.step == 1:
            return tn.ModelResponse(tool_calls=calls)
        return "done"

    return model


SUB = {"description": "slow child", "prompt": "work"}


def test_foreground_subagent_cancelled_by_run_timeout_reads_its_own_text():
    async def main():
        async with _hub(_delegating([ToolCall("subagent", SUB, id="c1")])) as hub:
            result = await hub.run("go", timeout=0.3)
            assert result.stop_reason == "aborted"
            assert seen_by_model(engine_of(hub).runtime.store.open(hub.root)) == [
                "USER [user]: go",
                "TOOL-RESULT c1 (isError): Error: subagent run was cancelled",
            ]
            # the next turn reads the same text (it stays in the conversation)
            assert (await hub.run("again")).text == "done"
            assert "Error: subagent run was cancelled" in [m.text for m in engine_of(hub).root.conversation]

    asyncio.run(main())


def test_parallel_subagent_calls_cancelled_by_root_cancel_each_read_their_own_text():
    calls = [ToolCall("subagent", SUB, id="c1"), ToolCall("subagent", {**SUB, "description": "other"}, id="c2")]

    async def main():
        async with _hub(_delegating(calls)) as hub:
            run = asyncio.ensure_future(hub.run("go"))
            await until(lambda: len(engine_of(hub).runtime.agents) == 3, "both children to start")
            engine_of(hub).root.cancel("user")
            assert (await run).stop_reason == "aborted"
            assert seen_by_model(engine_of(hub).runtime.store.open(hub.root))[1:] == [
                "TOOL-RESULT c1 (isError): Error: subagent run was cancelled",
                "TOOL-RESULT c2 (isError): Error: subagent run was cancelled",
            ]
            assert set(engine_of(hub).runtime.agents) == {hub.root}  # both children disposed

    asyncio.run(main())


def test_partial_child_output_is_kept_in_the_cancelled_rendering():
    async def model(req):
        if req.depth > 0:
            if req.step == 1:
                return tn.ModelResponse(text="halfway there", tool_calls=[ToolCall("job_list", {}, id="j")])
            await _never()
        if req.turn == 1 and req.step == 1:
            return tn.ModelResponse(tool_calls=[ToolCall("subagent", SUB, id="c1")])
        return "done"

    async def main():
        async with _hub(model) as hub:
            await hub.run("go", timeout=0.3)
            assert seen_by_model(engine_of(hub).runtime.store.open(hub.root))[1] == (
                "TOOL-RESULT c1 (isError): Error: subagent run was cancelled\n"
                "Partial output before the run ended:\nhalfway there")

    asyncio.run(main())


def test_job_output_wait_cancelled_reads_wait_aborted():
    async def model(req):
        if req.depth > 0:
            await _never()
        if req.turn == 1 and req.step == 1:
            return tn.ModelResponse(tool_calls=[ToolCall("subagent", {**SUB, "run_in_background": True}, id="c1")])
        if req.turn == 1 and req.step == 2:
            return tn.ModelResponse(tool_calls=[ToolCall("job_output", {"job_id": "subagent-1", "wait": True,
                                                                        "timeout_ms": 60000}, id="c2")])
        return "done"

    async def main():
        async with _hub(model) as hub:
            assert (await hub.run("go", timeout=0.3)).stop_reason == "aborted"
            assert seen_by_model(engine_of(hub).runtime.store.open(hub.root))[1:] == [
                "TOOL-RESULT c1: started background subagent job subagent-1",
                "TOOL-RESULT c2 (isError): Error: wait aborted",
            ]

    asyncio.run(main())


def test_tools_without_their_own_rendering_keep_the_generic_text():
    async def slow_tool(x: int) -> str:
        """Sleeps.

        x: anything
        """
        await _never()
        return "never"

    calls_one = [ToolCall("slow_tool", {"x": 1}, id="t1")]

    async def model(req):
        if req.turn == 1 and req.step == 1:
            return tn.ModelResponse(tool_calls=calls_one)
        return "done"

    async def main():
        async with _hub(model, tools=[slow_tool]) as hub:
            await hub.run("go", timeout=0.2)
            assert seen_by_model(engine_of(hub).runtime.store.open(hub.root))[1:] == [
                "TOOL-RESULT t1 (isError): Error: tool call was aborted before it finished",
            ]

    asyncio.run(main())
