"""Shared test helpers: render a session log the way the reference transcripts print it."""

from __future__ import annotations

import asyncio
import json

from toh_nb.core.session import (ASSISTANT_MESSAGE, DESCRIPTOR, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START,
                                 USER_MESSAGE)


def _source(message) -> str:
    source = message.source
    if source is None:
        return "user"
    parts = [source.kind]
    if source.form:
        parts.append(source.form)
    if source.plugin:
        parts.append(source.plugin)
    if source.sender and source.kind != "plugin":
        parts.append(f"from={source.sender}")
    return " ".join(parts)


def render(session) -> list[str]:
    """One string per event, in the reference transcript notation."""
    lines = []
    for event in session.events:
        kind = event.kind
        if kind == TURN_START:
            lines.append(f"-- turn {event.turn} start")
        elif kind == TURN_END:
            data = {"kind": event.data["reason"]}
            lines.append(f"-- turn {event.turn} end: {json.dumps(data, separators=(',', ':'))}")
        elif kind == DESCRIPTOR:
            lines.append("DESCRIPTOR " + json.dumps(event.data, separators=(",", ":")))
        elif kind == USER_MESSAGE:
            blocks = [b.text for b in event.message.content]
            if len(blocks) == 1:
                lines.append(f"USER [{_source(event.message)}]: {blocks[0]}")
            else:
                joined = json.dumps(blocks, separators=(",", ":"), ensure_ascii=False)
                lines.append(f"USER [{_source(event.message)}]: {len(blocks)} blocks {joined}")
        elif kind == ASSISTANT_MESSAGE:
            parts = []
            for block in event.message.content:
                if block.type == "text":
                    parts.append(block.text)
                else:
                    args = json.dumps(block.arguments, separators=(",", ":"))
                    parts.append(f"<tool-call {block.id} {block.name} {args}>")
            lines.append("ASSISTANT: " + " ".join(parts))
        elif kind == TOOL_CALL:
            lines.append(f"TOOL-CALL {event.data['call_id']} {event.data['name']}")
        elif kind == TOOL_RESULT:
            message = event.message
            flag = " (isError)" if message.is_error else ""
            lines.append(f"TOOL-RESULT {message.tool_call_id}{flag}: {message.text}")
    return lines


def seen_by_model(session) -> list[str]:
    """Only what the parent model receives: user messages and tool results, in order."""
    return [line for line in render(session) if line.startswith(("USER", "TOOL-RESULT"))]


async def until(predicate, what: str = "condition", timeout: float = 2.0) -> None:
    """Poll ``predicate`` on the running loop until it holds, failing after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.001)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie nobody reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")
