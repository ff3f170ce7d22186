"""One external agent process, owned from start to end.

Why a class of its own: an agent that misbehaves must never take the hub (or the machine) with it. The
agent is started through :mod:`toh_nb.core.launcher`, a small subreaper process that owns the agent's
whole process tree (helpers that ``setsid`` or daemonise included) and kills all of it when the agent
exits, when we say so, or when our process dies. The agent inherits the pipes directly (the launcher
relays nothing of the protocol); the launcher tells us over a separate socket, the *lifeline*, the
agent's pid and the moment it exits, so a crash is noticed even while a helper still holds its stdout.

The agent gets an explicit environment, its stderr is drained continuously into a bounded tail (a
chatty agent cannot fill the pipe and stall; the tail goes into diagnostics), and disposal goes in
escalating steps: close stdin (the polite ACP way to say goodbye) → wait for the agent to exit → close
the lifeline (the launcher sends SIGTERM to the tree, SIGKILL after ``kill_grace``) → SIGKILL the
launcher's group as a last resort.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import json
import os
import shlex
import signal
import socket
import sys
from typing import Mapping, Sequence

from ...core.errors import ModelError
from ...core.launcher import LAUNCHER  # run as a file: it imports nothing of toh_nb

#: bytes a single protocol line may have (images and file contents travel inline)
LINE_LIMIT = 50 * 1024 * 1024
#: lines and characters of stderr kept for diagnostics
TAIL_LINES = 40
TAIL_CHARS = 4000
#: seconds the launcher gets to start and start the agent (a Python with no site: milliseconds)
LAUNCH_TIMEOUT = 30.0
#: characters of a lifeline line we accept (they are short; anything longer is not our launcher)
STATUS_LIMIT = 64 * 1024


class AgentStartError(ModelError):
    """The agent process could not be started (missing binary, not executable, bad cwd)."""

    cause = "agent process"


class AgentProcess:
    """An agent speaking ACP on stdin/stdout, under a launcher; see the module docstring."""

    def __init__(self, command: Sequence[str], *, env: Mapping[str, str], cwd: str, kill_grace: float = 3.0) -> None:
        self.command = list(command)
        self.env = dict(env)
        self.cwd = cwd
        self.kill_grace = kill_grace
        #: the launcher (our child); its stdin/stdout/stderr are the agent's
        self.proc: asyncio.subprocess.Process | None = None
        #: the agent's pid and, once it exited, its return code (negative: the signal that killed it)
        self.agent_pid: int | None = None
        self.agent_returncode: int | None = None
        #: set when the agent has exited (or the launcher is gone, so it cannot be told)
        self.ended = asyncio.Event()
        self._launcher_gone = asyncio.Event()
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._drain: asyncio.Task | None = None
        self._watch: asyncio.Task | None = None
        self._lifeline: asyncio.StreamWriter | None = None

    @property
    def display(self) -> str:
        """The command as a shell line (for diagnostics: the environment is never shown)."""
        return shlex.join(self.command)

    @property
    def pid(self) -> int | None:
        """The agent's pid (not the launcher's)."""
        return self.agent_pid

    @property
    def launcher_pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def returncode(self) -> int | None:
        """The agent's exit status once it has exited (the launcher's, if it died before telling)."""
        if self.agent_returncode is not None:
            return self.agent_returncode
        return self.proc.returncode if self.proc is not None and self._launcher_gone.is_set() else None

    def _start_error(self, reason: str) -> AgentStartError:
        return AgentStartError(f"ACP agent `{self.display}` could not be started: {reason}")

    async def start(self, timeout: float = LAUNCH_TIMEOUT) -> None:
        """Start the launcher, hand it the command, and wait for the agent to be running. Raises
        :class:`AgentStartError` (nothing left behind) when it cannot be."""
        if not sys.executable:
            raise self._start_error("no Python interpreter to run the launcher (sys.executable is empty)")
        ours, theirs = socket.socketpair()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-S", LAUNCHER, str(theirs.fileno()), str(os.getpid()),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd, start_new_session=True, limit=LINE_LIMIT, pass_fds=(theirs.fileno(),))
        except OSError as error:
            ours.close()
            raise self._start_error(f"{error.strerror or error}: {error.filename or self.cwd!r}") from None
        finally:
            theirs.close()
        loop = asyncio.get_running_loop()
        self._drain = loop.create_task(self._drain_stderr(self.proc.stderr))
        reader, self._lifeline = await asyncio.open_unix_connection(sock=ours, limit=STATUS_LIMIT)
        try:
            config = {"command": self.command, "env": self.env, "cwd": self.cwd, "grace": self.kill_grace}
            self._lifeline.write((json.dumps(config) + "\n").encode())
            first = await asyncio.wait_for(self._status(reader), timeout)
        except BaseException:
            await self.dispose(0.0, self.kill_grace)
            raise
        if first is None:
            await self.dispose(0.0, self.kill_grace)
            tail = self.tail()
            raise self._start_error("its launcher exited" + (f"; stderr:\n{tail}" if tail else ""))
        word, _, rest = first.partition(" ")
        if word == "failed":
            await self.dispose(0.0, self.kill_grace)
            raise self._start_error(_exec_failure(rest, self.command[0], self.cwd))
        self.agent_pid = int(rest)
        self._watch = loop.create_task(self._watch_agent(reader))

    async def _status(self, reader: asyncio.StreamReader) -> str | None:
        """The launcher's next line; None when it is gone."""
        try:
            line = await reader.readline()
        except (ValueError, ConnectionError, asyncio.LimitOverrunError):
            return None
        return line.decode("utf-8", "replace").strip() or None

    async def _watch_agent(self, reader: asyncio.StreamReader) -> None:
        """Note the agent's exit (``exited N``) and the launcher's end (end of file on the lifeline)."""
        try:
            while True:
                line = await self._status(reader)
                if line is None:
                    return
                word, _, rest = line.partition(" ")
                if word == "exited":
                    try:
                        self.agent_returncode = int(rest)
                    except ValueError:
                        pass
                    self.ended.set()
        finally:
            if self.proc is not None:  # the launcher closed its end: it is exiting; let its status land
                for _ in range(50):
                    if self.proc.returncode is not None:
                        break
                    await asyncio.sleep(0.01)
            self._launcher_gone.set()
            self.ended.set()

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
        """Wait up to ``timeout`` seconds for the agent to end; whether it has."""
        return await _within(self.ended, timeout)

    def _kill_launcher(self) -> None:
        """Last resort: SIGKILL the launcher's group (the launcher could not end the tree itself)."""
        for target in (lambda: os.killpg(self.proc.pid, signal.SIGKILL),
                       lambda: os.kill(self.proc.pid, signal.SIGKILL)):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass

    async def dispose(self, eof_grace: float = 6.0, kill_grace: float = 3.0) -> None:
        """Close stdin → wait ``eof_grace`` for the agent → close the lifeline (the launcher ends the whole
        tree: SIGTERM, SIGKILL after its grace) → SIGKILL the launcher if it does not go. Safe to call
        twice; the whole tree is gone when this returns."""
        proc = self.proc
        if proc is None:
            return
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        watched = self._watch is not None  # False: the start failed half-way, the launcher is ours to kill
        if watched:
            await self.exited(eof_grace)
        lifeline = self._lifeline
        if lifeline is not None and not lifeline.is_closing():
            try:
                lifeline.write_eof()  # "end the tree now"; its answers can still arrive
            except (OSError, RuntimeError):
                lifeline.close()
        if not (watched and await _within(self._launcher_gone, kill_grace + 2.0)):
            self._kill_launcher()
            if watched:
                await _within(self._launcher_gone, kill_grace)
        if lifeline is not None:
            lifeline.close()
        for task in (self._drain, self._watch):
            if task is not None and not task.done():
                try:
                    await asyncio.wait_for(asyncio.shield(task), 1.0)
                except (asyncio.TimeoutError, Exception):
                    task.cancel()


async def _within(event: asyncio.Event, timeout: float) -> bool:
    """Whether ``event`` is set within ``timeout`` seconds."""
    if event.is_set():
        return True
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except asyncio.TimeoutError:
        return False
    return True


def _exec_failure(detail: str, program: str, cwd: str) -> str:
    """What the launcher's ``failed`` line says, in the words of a start failure."""
    try:
        data = json.loads(detail)
    except ValueError:
        return detail
    if not isinstance(data, dict):
        return detail
    if data.get("errno") == errno.ENOENT and data.get("filename") == cwd:
        return f"{data.get('strerror')}: workspace {cwd!r}"
    if data.get("errno") == errno.ENOENT:
        return f"command not found: {program!r}"
    if data.get("errno") == errno.EACCES:
        return f"{data.get('strerror')}: {program!r}"
    return str(data.get("message") or detail)
