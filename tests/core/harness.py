"""A bare runtime + root agent for engine tests (no hub, no subagent tools)."""

from __future__ import annotations

import time

from toh_nb.core.ids import IdSource
from toh_nb.core.runtime import Runtime
from toh_nb.core.session import SessionHeader
from toh_nb.store.memory import MemoryStore


def make_agent(model, tools=(), max_parallel_tool_calls=10, max_tokens=None):
    runtime = Runtime(model=model, store=MemoryStore(), ids=IdSource("sequential"),
                      max_parallel_tool_calls=max_parallel_tool_calls)
    for tool in tools:
        runtime.tools.add(tool)
    session = runtime.store.create(SessionHeader("root", time.time(), origin="root"))
    agent = runtime.create_agent(session, label=None, depth=0, parent=None, mode="root", max_tokens=max_tokens)
    return runtime, agent


def kinds(agent):
    return [e.kind for e in agent.session.events]
