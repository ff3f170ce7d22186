"""One live session with one MCP server, through the official SDK's ``mcp.Client``.

The SDK's client is an anyio context that must be entered and left by the same task, so each session
has an *owner* task that opens it, hands the connected client out and holds it open until it is told to
stop. Calls are made from the agents' own tasks (JSON-RPC requests on one session run concurrently); a
cancelled call is cancelled on the server by the SDK (``notifications/cancelled``).

Every wait is bounded: the start and handshake by ``connect_timeout``, a whole ``tools/list`` (all its
pages) by ``connect_timeout`` again, a call by ``timeout`` (the SDK's
read timeout, and an outer bound a little later in case the transport itself is stuck), the shutdown
by :data:`CLOSE_GRACE` per step. A server that closes the connection (it exited or crashed) fails the
call in flight with a diagnostic carrying the end of its stderr; the session is dropped and the next
call starts a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from typing import Any, Callable

from ..core.errors import ToolError, describe
from ..core.launcher import STARTED, start_failure, started_pid, stdio_command
from ..core.tools import ToolResult
from . import texts
from .config import MCPServer, sdk
from .results import tool_result

log = logging.getLogger("toh_nb.mcp")

#: bytes a stdio server must have written on stdout during a call that timed out for its answer to
#: count as still arriving (a large result), not as never sent
SENDING = 64 * 1024
#: seconds a stdio server's tree gets between SIGTERM and SIGKILL under its launcher: below the SDK's
#: own wait (2 s) before it SIGKILLs the process group, the launcher among it
STDIO_GRACE = 1.0
#: seconds each shutdown step may take (the SDK's own stdio shutdown is bounded at about 6 s)
CLOSE_GRACE = 10.0
#: seconds past a call's timeout after which the call is abandoned even if the SDK has not given up
HARD_MARGIN = 5.0
#: characters of a server's stderr that a diagnostic quotes
STDERR_TAIL = 400
#: pages of tools/list read at most (a server whose cursor never ends cannot hang the mount)
MAX_PAGES = 100


def reason_of(error: BaseException) -> str:
    """The innermost cause of a failed start (anyio wraps them in exception groups)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, OSError) and error.strerror:
        where = f": {error.filename!r}" if error.filename else ""
        return f"{error.strerror}{where}"
    return describe(error)


def launch_reason(failure: dict) -> str:
    """The launcher's report of a command it could not start, in :func:`reason_of`'s words."""
    strerror, filename = failure.get("strerror"), failure.get("filename")
    if not strerror:
        return str(failure.get("message"))
    return f"{strerror}: {filename!r}" if filename else str(strerror)


def noise_line(error: Exception) -> str:
    """The offending stdout line of a parse error (pydantic keeps it as the error's input)."""
    errors = getattr(error, "errors", None)
    if callable(errors):
        try:
            value = errors()[0].get("input")
        except Exception:  # not pydantic's shape after all
            value = None
        if isinstance(value, (str, bytes)):
            return value if isinstance(value, str) else value.decode("utf-8", "replace")
    return describe(error)


class MCPConnection:
    """The hub's session with ``server`` (started on first use, restarted after the server died)."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        #: sessions opened so far (1 after the first start; each restart adds one)
        self.starts = 0
        #: one-shot children holding this session (``MCPMounts.hold``/``release``)
        self.holders = 0
        #: lines the server wrote on stdout that are not JSON-RPC (this session), and the first of them
        self.noise = 0
        self.first_noise: str | None = None
        #: the latest such line: what a request that timed out after it names as the likely cause
        self.last_noise: str | None = None
        #: the listing whose names given twice were last reported (each listing is reported once)
        self.told_twice: list | None = None
        #: the stdio server's own pid (its launcher says it on stderr), once read
        self._server_pid: int | None = None
        self.closed = False
        self._client: Any = None
        self._owner: asyncio.Task | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._stderr: Any = None
        self._listing: list | None = None
        #: ``notifications/tools/list_changed`` received so far
        self.changes = 0
        #: called (on the loop) when the server says its tool list changed; set by the mounts
        self.on_change: Callable[["MCPConnection"], None] | None = None
        #: the re-listing that follows the last change (a call that caused one waits for it)
        self.refreshing: asyncio.Task | None = None

    @property
    def connected(self) -> bool:
        return self._client is not None

    # -- the session ---------------------------------------------------------------------------

    async def client(self) -> Any:
        """The connected SDK client, starting a session if there is none."""
        if self.closed:
            raise ToolError(texts.closed_hub(self.server.display))
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._client is not None:
                return self._client
            if self.closed:
                raise ToolError(texts.closed_hub(self.server.display))
            return await self._start()

    async def _start(self) -> Any:
        server = self.server
        ready: asyncio.Future = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self.noise, self.first_noise, self.last_noise = 0, None, None
        self._server_pid = None
        if server.command is not None:
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        self._owner = asyncio.get_running_loop().create_task(self._own(ready, self._stop, self._stderr),
                                                             name=f"toh_nb mcp {server.name}")
        try:
            self._client = await asyncio.wait_for(asyncio.shield(ready), server.connect_timeout)
        except asyncio.TimeoutError:
            stderr = self.stderr_tail()
            await self._teardown()
            raise ToolError(self.noted(texts.handshake_timeout(server.display, server.connect_timeout, stderr))) from None
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self.closed and ready.cancelled() and not (current is not None and current.cancelling()):
                raise ToolError(texts.closed_hub(server.display)) from None  # hub.close() stopped the start
            await self._teardown()
            raise
        except Exception as error:
            failure = start_failure(self._stderr_text())  # the launcher could not start the command
            reason = reason_of(error) if failure is None else launch_reason(failure)
            stderr = "" if failure is not None else self.stderr_tail()
            await self._teardown()
            raise ToolError(self.noted(texts.start_failed(server.display, reason, stderr))) from None
        if self.closed:  # the hub closed while this session started: it is not handed out
            await self._teardown()
            raise ToolError(texts.closed_hub(server.display))
        self.starts += 1
        return self._client

    async def _own(self, ready: asyncio.Future, stop: asyncio.Event, stderr: Any) -> None:
        """The owner task: enter the SDK client, hand it out, hold it until ``stop``, leave it."""
        mcp = sdk()
        from ..version import __version__

        server = self.server
        try:
            info = mcp.Implementation(name="toh_nb", version=__version__)
            if server.command is not None:
                from mcp.client.stdio import stdio_client

                command = stdio_command(server.command, STDIO_GRACE)  # the server's whole tree goes with it
                params = mcp.StdioServerParameters(command=command[0], args=command[1:],
                                                   env=server.env or None, cwd=server.cwd)
                async with mcp.Client(stdio_client(params, errlog=stderr), client_info=info,
                                      message_handler=self._message) as client:
                    async with self._listening(client):
                        ready.set_result(client)
                        await stop.wait()
            else:
                import httpx2
                from mcp.client.streamable_http import streamable_http_client

                # the SDK's transport timeouts: 30 s to connect or write, 300 s to read a response stream
                async with httpx2.AsyncClient(headers=server.headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http:
                    async with mcp.Client(streamable_http_client(server.url, http_client=http), client_info=info,
                                          message_handler=self._message) as client:
                        async with self._listening(client):
                            ready.set_result(client)
                            await stop.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as error:  # a failed start is the starter's to report; a later one the call's
            if not ready.done():
                ready.set_exception(error if isinstance(error, Exception) else RuntimeError(describe(error)))

    @contextlib.asynccontextmanager
    async def _listening(self, client: Any) -> Any:
        """Ask for tool-list changes: on a 2026-07-28 connection a server sends them only on a
        ``subscriptions/listen`` stream, held open here for the session's life (an older server sends
        ``notifications/tools/list_changed`` unasked). Either way they reach :meth:`_message`. A server
        that refuses or never acknowledges (within ``connect_timeout``) is used without."""
        import anyio  # the SDK's dependency: the ``mcp`` extra; never imported by a hub without MCP servers
        from mcp.client.subscriptions import ListenNotSupportedError

        async with contextlib.AsyncExitStack() as stack:
            subscription = None
            try:
                with anyio.fail_after(self.server.connect_timeout):
                    subscription = await stack.enter_async_context(client.listen(tools_list_changed=True))
            except ListenNotSupportedError:
                pass  # an older protocol: the notification comes unasked
            except Exception as error:  # refused, lost or unanswered: the tools still work, unchanged
                log.info("%s: no tools/list_changed subscription: %s", self.server.display, describe(error))
            if subscription is None:
                yield
                return
            async with anyio.create_task_group() as group:
                group.start_soon(self._drain, subscription)
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()

    @staticmethod
    async def _drain(subscription: Any) -> None:
        """Read the subscription's events (the same changes reach :meth:`_message`), so none pile up."""
        try:
            async for _ in subscription:
                pass
        except Exception as error:  # the stream was lost: changes after it are missed until a restart
            log.info("tools/list_changed subscription ended: %s", describe(error))

    async def _message(self, message: Any) -> None:
        """The SDK's message handler: server notifications (and transport faults, which the calls in
        flight report themselves). ``notifications/tools/list_changed`` makes the listing stale; the
        mounts list again and re-offer the tools."""
        from mcp_types import ToolListChangedNotification

        if isinstance(message, Exception):  # a line on stdout that is not JSON-RPC (the SDK logs it too)
            self.noise += 1
            self.last_noise = noise_line(message)
            if self.first_noise is None:
                self.first_noise = self.last_noise
            return
        if isinstance(getattr(message, "root", message), ToolListChangedNotification):
            self._tools_changed()

    def _tools_changed(self) -> None:
        self.changes += 1
        self._listing = None
        if self.on_change is not None:
            self.on_change(self)

    def noted(self, message: str) -> str:
        """A failure diagnostic, with the stdout lines of this session that were not JSON-RPC when there
        were some (the SDK logs each at ERROR on ``mcp.client.stdio``; the turn's error says it too)."""
        if self.noise:
            return message + texts.noise(self.noise, self.first_noise or "")
        return message

    def stderr_tail(self) -> str:
        """The end of what the server wrote to stderr (one line, for a diagnostic; the launcher's
        own line left out)."""
        text = "\n".join(line for line in self._stderr_text(from_end=True).splitlines()
                         if not line.startswith(STARTED))
        return " ".join(text.split())[-STDERR_TAIL:]

    def _output_mark(self) -> "tuple[int, int, int] | None":
        """(server pid, bytes it has written, bytes of its stderr): what :meth:`_sent_since` compares
        with; None where that cannot be known (an HTTP server, no ``/proc``, another user's process)."""
        file = self._stderr
        if file is None or file.closed:
            return None
        if self._server_pid is None:
            self._server_pid = started_pid(self._stderr_text())
        pid = self._server_pid
        try:
            with open(f"/proc/{pid}/io") as io:
                written = next(int(line.split()[1]) for line in io if line.startswith("wchar:"))
            file.flush()
            return pid, written, os.fstat(file.fileno()).st_size
        except (OSError, StopIteration, ValueError, TypeError):
            return None

    def _sent_since(self, mark: "tuple[int, int, int] | None") -> int:
        """About how many bytes the server wrote on stdout since ``mark`` (what it wrote, less its stderr)."""
        now = self._output_mark()
        if mark is None or now is None or now[0] != mark[0]:
            return 0
        return max(0, (now[1] - mark[1]) - (now[2] - mark[2]))

    def _stderr_text(self, from_end: bool = False) -> str:
        """What the server wrote to stderr: its first ``4 * STDERR_TAIL`` characters, or its last."""
        file = self._stderr
        if file is None or file.closed:
            return ""
        try:
            file.flush()
            size = file.seek(0, 2)
            file.seek(max(0, size - 4 * STDERR_TAIL) if from_end else 0)
            text = file.read(4 * STDERR_TAIL)
            # the server writes through the same open file (one offset): leave it at the end again
            file.seek(0, 2)
            return text
        except (OSError, ValueError):
            return ""

    async def _teardown(self) -> None:
        """Leave the session: the owner closes the SDK client (stdio: stdin closed, then the process
        tree terminated, then killed), each step bounded."""
        owner, stop, stderr, connected = self._owner, self._stop, self._stderr, self._client is not None
        self._client = self._owner = self._stop = self._stderr = None
        if stop is not None:
            stop.set()
        if owner is not None:
            if not connected:  # still starting (a handshake that never ends): no reason to wait for it
                owner.cancel()
            done, _ = await asyncio.wait({owner}, timeout=CLOSE_GRACE)
            if not done:
                owner.cancel()
                await asyncio.wait({owner}, timeout=CLOSE_GRACE)
            if owner.done() and not owner.cancelled():
                owner.exception()  # retrieved: the owner reports nothing of its own
        if stderr is not None:
            stderr.close()

    async def _drop(self, client: Any) -> None:
        """The session ``client`` is dead: tear it down (once) so that the next call starts a new one."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._client is client:
                await self._teardown()

    async def close(self) -> None:
        """At ``hub.close()``: no process or connection is left behind. Idempotent."""
        self.closed = True
        await self._teardown()

    # -- requests ------------------------------------------------------------------------------

    async def list_tools(self) -> list:
        """The server's tools (``mcp.types.Tool``), listed once per hub (a restart keeps them) and again
        after the server said they changed."""
        if self._listing is not None:
            return self._listing
        changes = self.changes
        client = await self.client()
        seen = self.noise
        tools: list = []
        cursor = None
        pages = 0
        seconds = self.server.connect_timeout
        try:
            async with asyncio.timeout(seconds):  # one deadline for the whole listing, every page
                for pages in range(1, MAX_PAGES + 1):
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
        except TimeoutError:
            if self.noise > seen:
                problem = texts.unparsed(seconds, self.last_noise or "")
            else:
                problem = texts.list_timeout(seconds, pages - 1)
            raise ToolError(texts.list_failed(self.server.display, problem)) from None
        except Exception as error:
            stderr = self.stderr_tail()
            await self._drop(client)
            raise ToolError(self.noted(texts.list_failed(self.server.display, reason_of(error)) + (
                f"; its stderr ends: {stderr}" if stderr else ""))) from None
        if self.changes == changes:  # a change noted meanwhile leaves it stale: the next asker lists again
            self._listing = tools
        return tools

    def _no_answer(self, tool: str, seen: int, mark: "tuple[int, int, int] | None") -> str:
        """A call that got no answer in time; when the server sent a line the SDK could not parse since
        it began (``seen``: the count before), that line is the likely answer, and is named; when it
        was still writing on stdout (``mark``: what it had written before), its answer was arriving."""
        server = self.server
        if self.noise > seen:
            return texts.call_unparsed(server.display, tool, server.timeout, self.last_noise or "")
        sent = self._sent_since(mark)
        if sent >= SENDING:
            return texts.still_sending(server.display, tool, server.timeout, sent)
        return texts.call_timeout(server.display, tool, server.timeout)

    async def call(self, tool: str, arguments: dict) -> ToolResult:
        """One ``tools/call``, as the result a model reads; every failure is a :class:`ToolError`."""
        mcp = sdk()
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
        import pydantic

        server = self.server
        client = await self.client()
        seen, mark = self.noise, self._output_mark()
        try:
            result = await asyncio.wait_for(
                client.call_tool(tool, arguments, read_timeout_seconds=server.timeout), server.timeout + HARD_MARGIN)
        except mcp.MCPError as error:
            if error.code == CONNECTION_CLOSED:
                stderr = self.stderr_tail()
                await self._drop(client)
                raise ToolError(self.noted(texts.closed_during(server.display, tool, stderr))) from None
            if error.code == REQUEST_TIMEOUT:
                raise ToolError(self._no_answer(tool, seen, mark)) from None
            raise ToolError(texts.refused(server.display, tool, error.error.message)) from None
        except asyncio.TimeoutError:
            raise ToolError(self._no_answer(tool, seen, mark)) from None
        except pydantic.ValidationError as error:
            raise ToolError(texts.invalid_answer(server.display, tool, f"{error.error_count()} validation "
                                                 f"error(s), first: {error.errors()[0]['msg']}")) from None
        except (RuntimeError, ValueError) as error:
            raise ToolError(texts.invalid_answer(server.display, tool, describe(error))) from None
        await asyncio.sleep(0)  # a change notified before the answer is being handled: let it start
        refreshing = self.refreshing
        if refreshing is not None and not refreshing.done():
            # the call changed the server's tools (it said so before answering): the caller's next step
            # sees the new list
            await asyncio.wait({refreshing}, timeout=server.connect_timeout)
        return tool_result(result)
