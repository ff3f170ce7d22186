"""Parallel tool calls: rolling pool size, barriers, results committed in model order."""

from __future__ import annotations

import asyncio

import pydantic
import pytest

from toh_nb.core.content import ToolCall, user_message
from toh_nb.core.tools import STRICT, Tool
from toh_nb.models import ScriptedModel

from .harness import make_agent


class DelayArgs(pydantic.BaseModel):
    model_config = STRICT
    delay: float
    tag: str


class Probe:
    def __init__(self):
        self.active = 0
        self.peak = 0
        self.order: list[str] = []

    def tool(self, name="wait", safe=True):
        async def run(ctx, args):
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.order.append(f"start {args.tag}")
            try:
                await asyncio.sleep(args.delay)
            finally:
                self.active -= 1
            self.order.append(f"end {args.tag}")
            return f"done {args.tag}"

        return Tool(name, "Wait a while.", DelayArgs, run, concurrency_safe=safe)


def run_calls(calls, tools, pool):
    async def main():
        model = ScriptedModel({"root": [calls, "finished"]})
        runtime, agent = make_agent(model, tools, max_parallel_tool_calls=pool)
        await agent.submit(user_message("go"))
        return agent

    return asyncio.run(main())


@pytest.mark.parametrize("pool, expected_peak", [(1, 1), (3, 3), (10, 10)])
def test_pool_size_is_respected(pool, expected_peak):
    probe = Probe()
    calls = [ToolCall("wait", {"delay": 0.01, "tag": str(i)}) for i in range(12)]
    run_calls(calls, [probe.tool()], pool)
    assert probe.peak == expected_peak


def test_results_are_committed_in_model_order_while_calls_overlap():
    probe = Probe()
    calls = [ToolCall("wait", {"delay": 0.05, "tag": "slow"}), ToolCall("wait", {"delay": 0.0, "tag": "fast"})]
    agent = run_calls(calls, [probe.tool()], 10)
    assert probe.order == ["start slow", "start fast", "end fast", "end slow"]  # really overlapped
    log = [(e.kind, (e.data or {}).get("call_id") or (e.message.tool_call_id if e.message else None))
           for e in agent.session.events if e.kind in ("tool/call", "tool/result")]
    assert log == [("tool/call", "call-1"), ("tool/call", "call-2"),
                   ("tool/result", "call-1"), ("tool/result", "call-2")]


def test_unsafe_calls_are_barriers():
    probe = Probe()
    calls = [ToolCall("wait", {"delay": 0.02, "tag": "a"}), ToolCall("wait", {"delay": 0.02, "tag": "b"}),
             ToolCall("excl", {"delay": 0.0, "tag": "x"}), ToolCall("wait", {"delay": 0.0, "tag": "c"})]
    run_calls(calls, [probe.tool(), probe.tool("excl", safe=False)], 10)
    assert probe.order.index("start x") > probe.order.index("end a")
    assert probe.order.index("start x") > probe.order.index("end b")
    assert probe.order.index("start c") > probe.order.index("end x")


def test_a_throwing_classifier_means_exclusive():
    probe = Probe()
    tool = probe.tool()
    tool.concurrency_safe = lambda args: 1 / 0
    calls = [ToolCall("wait", {"delay": 0.01, "tag": "a"}), ToolCall("wait", {"delay": 0.01, "tag": "b"})]
    run_calls(calls, [tool], 10)
    assert probe.peak == 1


def test_invalid_calls_in_a_group_get_their_error_in_order():
    probe = Probe()
    calls = [ToolCall("wait", {"delay": 0.01, "tag": "a"}), ToolCall("wait", {"tag": "b"}),
             ToolCall("wait", {"delay": 0.0, "tag": "c"})]
    agent = run_calls(calls, [probe.tool()], 10)
    results = [e.message.text for e in agent.session.events if e.kind == "tool/result"]
    assert results[0] == "done a" and results[2] == "done c"
    assert results[1] == 'Error: invalid arguments for tool "wait": delay: Field required'


def test_pool_watches_each_task_with_one_callback():
    """Each pooled call's task gets one completion callback, however many calls run beside it
    (``asyncio.wait`` per wake-up re-registered one on every running task: O(pool) per finished call)."""
    registrations: list[str] = []

    class CountingTask(asyncio.Task):
        def add_done_callback(self, fn, *, context=None):
            if self.get_coro().__name__ == "pooled":  # toh_nb.core.steps.pooled
                registrations.append(self.get_name())
            return super().add_done_callback(fn, context=context)

    async def staggered(ctx, args):  # calls finish on different loop iterations: many wake-ups
        for _ in range(int(args.tag) % 4 + 1):
            await asyncio.sleep(0)
        return f"done {args.tag}"

    async def main():
        asyncio.get_running_loop().set_task_factory(lambda loop, coro, **kw: CountingTask(coro, loop=loop, **kw))
        model = ScriptedModel({"root": [[ToolCall("wait", {"delay": 0, "tag": str(i)}) for i in range(30)],
                                        "finished"]})
        runtime, agent = make_agent(model, [Tool("wait", "Wait.", DelayArgs, staggered, concurrency_safe=True)],
                                    max_parallel_tool_calls=10)
        await agent.submit(user_message("go"))
        return agent

    agent = asyncio.run(main())
    assert [m.text for m in agent.conversation if m.role == "tool"] == [f"done {i}" for i in range(30)]
    assert len(registrations) == 30 and len(set(registrations)) == 30
