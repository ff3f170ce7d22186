"""Picklable models and tools for the Ray tests: hosts import this module (the tests' runtime_env puts
the repository on the workers' path), so everything here must be importable and deterministic."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import toh_nb as tn


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first
        b: the second
    """
    return a + b


def where() -> str:
    """Report the process this tool runs in."""
    return f"pid {os.getpid()}"


async def nap(marks: str) -> str:
    """Sleep until cancelled, leaving marks."""
    with open(marks, "a") as out:
        out.write(f"nap started in {os.getpid()}\n")
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        with open(marks, "a") as out:
            out.write("nap cancelled\n")
        raise
    return "never"


def hold(marks: str) -> str:
    """Leave a mark, then wait until a release file exists (a tool that holds its resources a while)."""
    import time

    with open(marks, "a") as out:
        out.write(f"hold started in {os.getpid()}\n")
    while not Path(marks + ".release").exists():
        time.sleep(0.02)
    return f"held in {os.getpid()}"


def stall(marks: str) -> str:
    """Block until killed, after leaving a mark."""
    with open(marks, "a") as out:
        out.write("tool started\n")
    import time

    time.sleep(3600)
    return "never"


class Script:
    """A scripted model whose reply depends on the latest instruction, the label and the step.

    ``marks``: a file the model appends to when a blocking turn starts and when it is cancelled, so a
    test can see that a cancellation reached the coroutine on the host.
    """

    def __init__(self, marks: str | None = None) -> None:
        self.marks = marks

    def _mark(self, line: str) -> None:
        if self.marks:
            with open(self.marks, "a") as out:
                out.write(line + "\n")

    async def request(self, req: tn.ModelRequest) -> tn.ModelResponse:
        text = req.last_user_text
        who = req.label or "root"
        last = req.messages[-1]
        first = req.messages[0].text if req.messages else ""
        if first == "fan":  # a background job, a waited read, then whatever arrived meanwhile
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("subagent", {"description": "bg", "prompt": "compute",
                                                                             "run_in_background": True}, id="b1")])
            if req.step == 2:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("job_output", {"job_id": "subagent-1", "wait": True},
                                                                id="o1")])
            return f"{who}: {last.role}: {last.text.splitlines()[0]}"
        if text == "five steps":  # five tool-calling steps, then who ran the model and the tools
            if req.step <= 5:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("where", {}, id=f"w{req.step}")],
                                        usage=tn.Usage(5, 1))
            tools = sorted({m.text for m in req.messages if m.role == "tool"})
            return f"{who}: model pid {os.getpid()}; tools {tools}"
        if text == "recall":
            return f"{who}: first was {first}"
        if text == "add five times":
            if req.step <= 5:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("add", {"a": req.step, "b": 1})], usage=tn.Usage(5, 1))
            return tn.ModelResponse(text=f"{who}: added", usage=tn.Usage(5, 1))
        if text == "nap then add":
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("nap", {"marks": self.marks}, id="n1"),
                                                    tn.ToolCall("add", {"a": 1, "b": 2}, id="a1")])
            return f"{who}: {last.text}"
        if text == "hold":
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("hold", {"marks": self.marks}, id="h1")])
            return f"{who}: {last.text}"
        if text == "delegate a block":
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("subagent", {"description": "inner",
                                                                             "prompt": "block inside"}, id="d1")])
            return f"{who}: {last.text}"
        if text.startswith("block"):
            self._mark(f"started {req.agent_id}")
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self._mark(f"cancelled {req.agent_id}")
                raise
        if text == "compute":
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("add", {"a": 2, "b": 3}, id="c1")])
            return tn.ModelResponse(text=f"{who}: the sum is {last.text}", usage=tn.Usage(12, 3))
        if text == "where":
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("where", {}, id="w1")])
            return f"{who}: {last.text}"
        if text == "go":
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("remote", {"description": "deeper",
                                                                           "prompt": "delegate"}, id="r1")])
            return f"{who}: {last.text}"
        if text == "delegate":
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("subagent", {"description": "deeper",
                                                                             "prompt": "more"}, id="d1")])
            return f"{who}: delegated: {last.text}"
        if text == "trace two":  # a Ray child that delegates twice in one step (tests/ray/test_tracing.py)
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("remote", {"description": "mid", "prompt": "two at once"},
                                                                id="r1")])
            return f"{who}: {last.text}"
        if text == "two at once":
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("subagent", {"description": f"g{i}", "prompt": f"hello {i}"},
                                                                id=f"g{i}") for i in (1, 2)])
            return f"{who}: both answered"
        if text == "stall":
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("stall", {"marks": self.marks}, id="s1")])
            return f"{who}: the tool came back: {last.text}"
        if text == "fan out":  # ten children at once through the "remote" tool, each spending 12 tokens
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("remote", {"description": f"s{i}", "prompt": "spend"},
                                                                id=f"f{i}") for i in range(10)])
            return f"{who}: fanned out"
        if text == "secret":
            key = os.environ.get("TOH_NB_TEST_KEY", "")
            return f"{who}: the key has {len(key)} characters"
        return tn.ModelResponse(text=f"{who}: {text}", usage=tn.Usage(10, 2))


def marks_of(path: str | Path) -> list[str]:
    try:
        return Path(path).read_text().splitlines()
    except FileNotFoundError:
        return []
