"""MCP tool calls through a hub: the first call (server start, handshake, tools/list) and the cost of
one more call on the shared session, against the SDK's MCPServer over stdio (tests/mcp/servers/hostile.py).

    python bench/mcp_calls.py [calls]
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import toh_nb as tn

HOSTILE = os.path.join(os.path.dirname(__file__), "..", "tests", "mcp", "servers", "hostile.py")


async def main(calls: int) -> None:
    steps = [tn.ToolCall("echo", {"text": str(i)}) for i in range(calls)] + ["done"]
    model = tn.ScriptedModel({"root": [steps[0], "first done", *steps[1:]]})
    async with tn.AsyncHub(model, tools=[tn.MCPServer([sys.executable, HOSTILE], name="h")]) as hub:
        started = time.perf_counter()
        await hub.run("first")
        first = time.perf_counter() - started
        started = time.perf_counter()
        await hub.run("more")
        more = time.perf_counter() - started
        closing = time.perf_counter()
    closed = time.perf_counter() - closing
    print(f"first run (start + handshake + tools/list + 1 call): {first * 1000:.0f} ms")
    print(f"{calls - 1} more calls, one at a time: {more * 1000 / max(1, calls - 1):.2f} ms per call")
    print(f"hub.close() with the server running: {closed * 1000:.0f} ms")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
