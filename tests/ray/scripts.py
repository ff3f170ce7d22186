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
        if text == "stall":
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[tn.ToolCall("stall", {"marks": self.marks}, id="s1")])
            return f"{who}: the tool came back: {last.text}"
        if text == "secret":
            key = os.environ.get("TOH_NB_TEST_KEY", "")
            return f"{who}: the key has {len(key)} characters"
        return tn.ModelResponse(text=f"{who}: {text}", usage=tn.Usage(10, 2))


def marks_of(path: str | Path) -> list[str]:
    try:
        return Path(path).read_text().splitlines()
    except FileNotFoundError:
        return []
