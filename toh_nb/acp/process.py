"""One external agent process, owned from start to end.

Why a class of its own: an agent that misbehaves must never take the hub (or the machine) with it. The
process runs in its own process group (so its helpers die with it), gets an explicit environment, has
its stderr drained continuously into a bounded tail (a chatty agent cannot fill the pipe and stall; the
tail goes into diagnostics), and is disposed in escalating steps: close stdin (the polite ACP way to
say goodbye) → wait → SIGTERM to the group → wait → SIGKILL to the group.
"""

from __future__ import annotations

import asyncio
import collections
import os
import shlex
import signal
from typing import Mapping, Sequence

from ..core.errors import ModelError

#: bytes a single protocol line may have (images and file contents travel inline)
LINE_LIMIT = 50 * 1024 * 1024
#: lines and characters of stderr kept for diagnostics
TAIL_LINES = 40
TAIL_CHARS = 4000


class AgentStartError(ModelError):
    """The agent process could not be started (missing binary, not executable, bad cwd)."""


class AgentProcess:
    """A subprocess speaking ACP on stdin/stdout; see the module docstring."""

    def __init__(self, command: Sequence[str], *, env: Mapping[str, str], cwd: str) -> None:
        self.command = list(command)
        self.env = dict(env)
        self.cwd = cwd
        self.proc: asyncio.subprocess.Process | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._drain: asyncio.Task | None = None

    @property
    def display(self) -> str:
        """The command as a shell line (for diagnostics: the environment is never shown)."""
        return shlex.join(self.command)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode if self.proc is not None else None

    async def start(self) -> None:
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=self.env, cwd=self.cwd, start_new_session=True,
                limit=LINE_LIMIT)
        except FileNotFoundError:
            raise AgentStartError(f"ACP agent `{self.display}` could not be started: command not found: "
                                  f"{self.command[0]!r}") from None
        except PermissionError as error:
            raise AgentStartError(f"ACP agent `{self.display}` could not be started: {error.strerror}: "
                                  f"{self.command[0]!r}") from None
        except OSError as error:
            raise AgentStartError(f"ACP agent `{self.display}` could not be started: {error}") from None
        self._drain = asyncio.get_running_loop().create_task(self._drain_stderr(self.proc.stderr))

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await stream.readline()
            except (ValueError, asyncio.LimitOverrunError):  # an endless line: keep its start
                line = (await stream.read(TAIL_CHARS)) or b""
            if not line:
                return
            self._tail.append(line.decode("utf-8", "replace").rstrip("\n")[:TAIL_CHARS])

    def tail(self) -> str:
        """The last lines the agent wrote to stderr (at most :data:`TAIL_CHARS` characters)."""
        text = "\n".join(self._tail)
        return text[-TAIL_CHARS:]

    async def exited(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the process to end; whether it has."""
        if self.proc is None:
            return True
        try:
            await asyncio.wait_for(asyncio.shield(self.proc.wait()), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    def _signal_group(self, sig: int) -> bool:
        """Signal the whole process group; whether any member was still there."""
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    async def dispose(self, eof_grace: float = 6.0, kill_grace: float = 3.0) -> None:
        """Close stdin → wait ``eof_grace`` → SIGTERM the group → wait ``kill_grace`` → SIGKILL the group.
        Members of the group that outlive their leader are killed too. Safe to call twice."""
        proc = self.proc
        if proc is None:
            return
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        if not await self.exited(eof_grace):
            self._signal_group(signal.SIGTERM)
            if not await self.exited(kill_grace):
                self._signal_group(signal.SIGKILL)
                await self.exited(kill_grace)
        self._signal_group(signal.SIGKILL)  # helpers the agent left behind in its group
        if self._drain is not None:
            try:
                await asyncio.wait_for(self._drain, 1.0)
            except (asyncio.TimeoutError, Exception):
                self._drain.cancel()
