"""Newline-delimited JSON-RPC over an agent process's pipes, with garbage detection.

Why not the SDK's stdio transport: it logs and skips a line that is not JSON, so an agent that prints a
banner or a traceback to stdout would leave a prompt waiting forever. Here the first such line ends
the connection (every pending request fails at once) and is kept for the diagnostic.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

#: characters of an offending stdout line kept for the diagnostic
GARBAGE_CHARS = 200


class ProcessTransport:
    """The SDK's message-level ``Transport`` over ``process.stdin`` / ``process.stdout``."""

    def __init__(self, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self._lock = asyncio.Lock()
        #: the first line that was not a JSON-RPC object (None while the agent behaves)
        self.garbage: str | None = None

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        async with self._lock:
            if self._stdin.is_closing():
                raise ConnectionError("the agent's stdin is closed")
            self._stdin.write(data)
            await self._stdin.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                line = await self._stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):
                self.garbage = "(a line longer than the protocol limit)"
                return None
            if not line:
                return None
            text = line.decode("utf-8", "replace").strip()
            if not text:
                continue
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            if not isinstance(message, dict):
                self.garbage = text[:GARBAGE_CHARS]
                return None
            return message

    async def close(self) -> None:
        if not self._stdin.is_closing():
            self._stdin.close()
