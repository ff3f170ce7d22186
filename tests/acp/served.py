"""A real ``python -m toh_nb acp`` subprocess driven line by line over pipes, every wait bounded."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from typing import Any

SERVER = [sys.executable, "-m", "toh_nb", "acp"]
#: seconds any single answer may take (generous: the machine is shared; nothing is timed)
WAIT = 60


class Served:
    """The server's stdin for writing, its stdout lines parsed as they come, its stderr kept."""

    def __init__(self, *args: str, stdout: Any = subprocess.PIPE, **popen: Any) -> None:
        self.process = subprocess.Popen([*SERVER, *args], stdin=subprocess.PIPE, stdout=stdout,
                                        stderr=subprocess.PIPE, **popen)
        self.lines: queue.Queue = queue.Queue()
        self.notifications: list[dict] = []
        self.stderr: list[bytes] = []
        self._ids = iter(range(1, 1_000_000))
        if self.process.stdout is not None:
            threading.Thread(target=self._pump, args=(self.process.stdout, self.lines.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.process.stderr, self.stderr.append), daemon=True).start()

    @staticmethod
    def _pump(stream: Any, put: Any) -> None:
        for line in iter(stream.readline, b""):
            put(line)

    def write(self, *lines: str | bytes) -> None:
        """Raw lines, all in one write (so the server may read them in one chunk)."""
        data = b"".join((line.encode() if isinstance(line, str) else line) + b"\n" for line in lines)
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, method: str, params: Any, request_id: Any = None) -> Any:
        request_id = next(self._ids) if request_id is None else request_id
        self.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        return request_id

    def next(self) -> dict:
        """The next message on stdout (it must be a JSON object)."""
        try:
            line = self.lines.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError(f"no message from the server; stderr: {self.err()}") from None
        return json.loads(line)

    def response(self, request_id: Any) -> dict:
        """The response to ``request_id``; notifications on the way are kept in ``notifications``."""
        while True:
            message = self.next()
            if "method" in message:
                self.notifications.append(message)
            elif message.get("id") == request_id:
                return message
            else:
                raise AssertionError(f"unexpected message {message}")

    def call(self, method: str, params: Any) -> dict:
        return self.response(self.send(method, params))

    def initialize(self) -> dict:
        return self.call("initialize", {"protocolVersion": 1})["result"]

    def new_session(self, cwd: str) -> str:
        return self.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]

    def prompt(self, session_id: str, *blocks: dict) -> dict:
        return self.call("session/prompt", {"sessionId": session_id, "prompt": list(blocks)})

    def err(self) -> str:
        return b"".join(self.stderr).decode(errors="replace")

    def close(self) -> int:
        """Close stdin (end of input) and wait for the exit status."""
        if not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            return self.process.wait(timeout=WAIT)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=WAIT)

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def text(value: str) -> dict:
    return {"type": "text", "text": value}
