"""The served agent's stdio: standard streams made safe, and a JSON-RPC transport that survives bad lines.

Why not the SDK's stdio transport (agent-client-protocol 0.12): a valid-JSON line that is not an object
(``[1]``, ``42``) kills its receive loop, ``null`` ends it silently, malformed JSON is logged and gets no
reply, and its writer only accepts pipes (stdout redirected to a file fails at start). Here every line is
either one JSON-RPC message handed to the SDK (through its public message-level ``Transport`` seam of
``acp.run_agent``) or answered by the transport itself with the JSON-RPC 2.0 error it deserves
(``-32700`` parse error, ``-32600`` invalid request, id ``null`` unless the message carried a valid id),
and the server reads on. At end of input the running turns are cancelled and every request already
received still gets its answer before the connection closes.

The client side of toh_nb has its own transport (:mod:`.transport`) with the opposite policy: garbage
from an agent process ends that connection, since the agent is broken.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import sys
from collections.abc import Callable
from typing import Any

log = logging.getLogger("toh_nb.acp.server")

#: bytes of one incoming line at most (multimodal prompts are large; a runaway line is not)
LINE_LIMIT = 50 * 1024 * 1024
#: at most this many seconds, at end of input, for the requests in flight to be answered
EOF_GRACE = 30.0

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602

#: the ``message`` of the errors the transport answers itself (tested exactly)
NOT_JSON = "Parse error: the line is not valid JSON"
NOT_AN_OBJECT = "Invalid request: a JSON-RPC message is an object, got {kind}"
LINE_TOO_LONG = "Invalid request: the line exceeds {limit} bytes"
BAD_VERSION = 'Invalid request: "jsonrpc" must be "2.0"'
BAD_ID = 'Invalid request: "id" must be a string, an integer or null'
BAD_METHOD = 'Invalid request: "method" must be a string'
NO_METHOD = 'Invalid request: a message needs a "method" (or an "id" with a "result" or "error")'
BAD_PARAMS = 'Invalid params: "params" must be an object'

_KINDS = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number",
          type(None): "null"}


def _fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _plug(fd: int, flags: int) -> None:
    """Point a closed standard descriptor at /dev/null, so no file opened later takes its number."""
    spare = os.open(os.devnull, flags)
    if spare != fd:
        os.dup2(spare, fd)
        os.close(spare)


def protocol_streams() -> int | None:
    """Make file descriptors 0-2 safe for a server and return a private duplicate of stdout for the
    protocol (None when stdout was closed: answers are then discarded). fd 1 and ``sys.stdout`` then go
    to stderr, so a stray ``print`` (ours, a library's, a C extension's) cannot corrupt the stream.

    Call it first, before anything opens a file: with a standard descriptor closed, the next file opened
    (an event loop's selector, a session log) would get its number."""
    if sys.stdin is None or not _fd_open(0):
        _plug(0, os.O_RDONLY)
    if sys.stderr is None or not _fd_open(2):
        _plug(2, os.O_WRONLY)
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 - lives as long as the process
    protocol = os.dup(1) if sys.stdout is not None and _fd_open(1) else None
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol


class _Drain(asyncio.Protocol):
    """Flow control of a pipe writer: ``drained()`` waits while the pipe's buffer is full."""

    def __init__(self) -> None:
        self._resume: asyncio.Future | None = None
        self.lost = False

    def pause_writing(self) -> None:
        self._resume = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._resume is not None and not self._resume.done():
            self._resume.set_result(None)
        self._resume = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.resume_writing()

    async def drained(self) -> None:
        if self._resume is not None:
            await self._resume


class _Output:
    """Where protocol bytes go: a pipe, socket or terminal through the event loop; a regular file by
    plain writes (the loop refuses files); nowhere when stdout was closed."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        self._pipe: asyncio.WriteTransport | None = None
        self._drain: _Drain | None = None
        self._broken = False
        self._blocking = True

    async def open(self) -> None:
        if self.fd is None or stat.S_ISREG(os.fstat(self.fd).st_mode):
            return
        self._blocking = os.get_blocking(self.fd)
        pipe = open(self.fd, "wb", buffering=0, closefd=False)  # noqa: SIM115,ASYNC230 - owned by the transport
        self._pipe, self._drain = await asyncio.get_running_loop().connect_write_pipe(_Drain, pipe)

    async def write(self, data: bytes) -> None:
        if self.fd is None or self._broken:
            return
        try:
            if self._pipe is None:
                view = memoryview(data)
                while view:
                    view = view[os.write(self.fd, view):]
                return
            if self._pipe.is_closing() or self._drain.lost:
                raise BrokenPipeError("the client closed its end of stdout")
            self._pipe.write(data)
            await self._drain.drained()
        except OSError as error:  # the client went away: read on until stdin ends, answer nobody
            self._broken = True
            log.warning("protocol output failed, answers are discarded from now on: %s", error)

    async def close(self) -> None:
        self._broken = True  # nothing is written after this (a late update would block on a bare fd)
        if self._pipe is None:
            return
        self._pipe.set_write_buffer_limits(high=0)  # drained() now waits for an empty buffer
        try:  # the last answers are written before the loop stops (a slow reader gets a bound)
            await asyncio.wait_for(self._drain.drained(), EOF_GRACE)
        except TimeoutError:
            log.warning("protocol output: the client did not read the last answers")
        self._pipe.close()
        self._pipe = None
        _restore_blocking(self.fd, self._blocking)


def _never_blocks(fd: int) -> bool:
    """A regular file or /dev/null (a closed stdin is plugged with it): the event loop cannot watch
    them, and reading them never blocks."""
    found = os.fstat(fd)
    if stat.S_ISREG(found.st_mode):
        return True
    null = os.stat(os.devnull)
    return stat.S_ISCHR(found.st_mode) and found.st_rdev == null.st_rdev


class _Input:
    """A stream reader on the input: the loop's pipe reader, or chunks read by a task from a regular
    file or /dev/null (see :func:`_never_blocks`)."""

    def __init__(self, fd: int, limit: int) -> None:
        self.fd = fd
        self.reader = asyncio.StreamReader(limit=limit)
        self._pipe: asyncio.ReadTransport | None = None
        self._feeder: asyncio.Task | None = None
        self._blocking = True

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        if _never_blocks(self.fd):
            self._feeder = loop.create_task(self._feed())
            return
        self._blocking = os.get_blocking(self.fd)
        pipe = open(self.fd, "rb", buffering=0, closefd=False)  # noqa: SIM115,ASYNC230 - owned by the transport
        self._pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(self.reader), pipe)

    async def _feed(self) -> None:
        while chunk := os.read(self.fd, 1 << 16):
            self.reader.feed_data(chunk)
            await asyncio.sleep(0)
        self.reader.feed_eof()

    def close(self) -> None:
        if self._feeder is not None:
            self._feeder.cancel()
        if self._pipe is not None:
            self._pipe.close()
            self._pipe = None
            _restore_blocking(self.fd, self._blocking)


def _restore_blocking(fd: int | None, blocking: bool) -> None:
    """The event loop made the descriptor non-blocking; its open file may be shared with the parent
    (a terminal), which expects it as it was."""
    try:
        os.set_blocking(fd, blocking)
    except (OSError, TypeError):
        pass


def _valid_id(value: Any) -> bool:
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _field_errors(data: Any) -> str | None:
    """``sessionId: Field required; prompt.0.text: …`` from the pydantic errors the SDK puts in a -32602."""
    errors = data.get("errors") if isinstance(data, dict) else None
    if not isinstance(errors, list) or not errors:
        return None
    parts = []
    for error in errors:
        if isinstance(error, dict):
            where = ".".join(str(part) for part in error.get("loc") or ()) or "params"
            parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or None


class ServerTransport:
    """The SDK's message-level ``Transport`` over the server's stdin and the protocol stdout."""

    def __init__(self, source: _Input, output: _Output, limit: int) -> None:
        self._input = source
        self._reader = source.reader  # made with ``limit``: longer lines are refused, not buffered
        self._limit = limit
        self._output = output
        self._lock = asyncio.Lock()
        #: ids of requests received and not answered yet (counted: a client may reuse an id)
        self._open: dict[Any, int] = {}
        self._answered = asyncio.Event()
        #: called once at end of input, before waiting for the answers (the server cancels its turns)
        self.on_eof: Callable[[], None] | None = None

    @classmethod
    async def open(cls, input_fd: int, output_fd: int | None, limit: int = LINE_LIMIT) -> ServerTransport:
        output = _Output(output_fd)
        await output.open()
        source = _Input(input_fd, limit)
        await source.open()
        return cls(source, output, limit)

    # -- sending ---------------------------------------------------------------------------------

    async def send(self, message: dict[str, Any]) -> None:
        if "id" in message and "method" not in message:
            self._settle(message)
        data = (json.dumps(message, separators=(",", ":"), default=str) + "\n").encode("utf-8")
        async with self._lock:
            await self._output.write(data)

    def _settle(self, response: dict[str, Any]) -> None:
        """Bookkeeping of a response, and a readable message for the SDK's invalid-params errors."""
        key = self._key(response["id"])
        if key in self._open:
            self._open[key] -= 1
            if not self._open[key]:
                del self._open[key]
            self._answered.set()
        error = response.get("error")
        if isinstance(error, dict) and error.get("code") == INVALID_PARAMS and error.get("message") == "Invalid params":
            fields = _field_errors(error.get("data"))
            if fields:
                response["error"] = {**error, "message": f"Invalid params: {fields}"}

    @staticmethod
    def _key(request_id: Any) -> Any:
        return (type(request_id).__name__, request_id)

    async def refuse(self, code: int, message: str, request_id: Any = None, data: Any = None) -> None:
        """Answer a message the server cannot take with a JSON-RPC error (id ``None``: no valid id)."""
        await self._refuse(code, message, request_id if _valid_id(request_id) else None, data)

    async def _refuse(self, code: int, message: str, request_id: Any = None, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        await self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    # -- receiving -------------------------------------------------------------------------------

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if line is None:
                await self._end_of_input()
                return None
            if line is _TOO_LONG:
                await self._refuse(INVALID_REQUEST, LINE_TOO_LONG.format(limit=self._limit))
                continue
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except (ValueError, RecursionError) as error:
                await self._refuse(PARSE_ERROR, NOT_JSON, data={"details": str(error)[:200]})
                continue
            if await self._accepts(message):
                if "method" in message and "id" in message:
                    key = self._key(message["id"])
                    self._open[key] = self._open.get(key, 0) + 1
                return message

    async def _accepts(self, message: Any) -> bool:
        """Whether ``message`` is a JSON-RPC 2.0 message for the SDK; else it is answered here."""
        if not isinstance(message, dict):
            await self._refuse(INVALID_REQUEST, NOT_AN_OBJECT.format(kind=_KINDS.get(type(message), "a value")))
            return False
        has_id = "id" in message
        request_id = message.get("id")
        if has_id and not _valid_id(request_id):
            await self._refuse(INVALID_REQUEST, BAD_ID)
            return False
        if message.get("jsonrpc") != "2.0":
            problem = BAD_VERSION
        elif "method" in message and not isinstance(message["method"], str):
            problem = BAD_METHOD
        elif "method" not in message and not (has_id and ("result" in message or "error" in message)):
            problem = NO_METHOD
        elif "method" in message and message.get("params") is not None and not isinstance(message["params"], dict):
            if not has_id:  # a notification is never answered, not even with an error
                log.warning("notification %s ignored: its params are not an object", message["method"])
                return False
            await self._refuse(INVALID_PARAMS, BAD_PARAMS, request_id)
            return False
        else:
            return True
        await self._refuse(INVALID_REQUEST, problem, request_id)
        return False

    async def _read_line(self) -> bytes | object | None:
        """One line (None at end of input; ``_TOO_LONG`` for a line over the limit, which is skipped)."""
        too_long = False
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.LimitOverrunError as error:
                too_long = True
                await self._reader.readexactly(error.consumed)
                continue
            except asyncio.IncompleteReadError as error:  # end of input; a last line without newline counts
                if too_long:
                    return _TOO_LONG
                return error.partial if error.partial.strip() else None
            return _TOO_LONG if too_long else line

    async def _end_of_input(self) -> None:
        if self.on_eof is not None:
            self.on_eof()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + EOF_GRACE
        while self._open and loop.time() < deadline:
            self._answered.clear()
            try:
                await asyncio.wait_for(self._answered.wait(), deadline - loop.time())
            except TimeoutError:
                break
        if self._open:
            log.warning("input ended; %d request(s) left unanswered", sum(self._open.values()))

    async def close(self) -> None:
        self._input.close()
        async with self._lock:  # not in the middle of a write
            await self._output.close()


_TOO_LONG = object()
