"""One activation of an external child: its agent process, the ACP connection and the ACP session.

Opened lazily by the first turn (so interrupts and turn timeouts cover the slow start of a real agent,
and a start failure is that turn's ``error`` with a diagnostic), closed by the plan's ``close``. Every
protocol step has a timeout; every failure names the command and carries the agent's stderr tail;
after a failure the process is disposed and the next turn of the same activation starts a new one
(reloading the ACP session when the agent supports ``session/load``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Sequence

from ...core.errors import ModelError
from ...core.model import ModelResponse
from ...core.session import permission_label
from ...core.threads import run_engine
from ...tracing.context import outbound_meta
from .permissions import PermissionPolicy, PermissionRequest, denied_line
from .process import AgentProcess
from .stops import response_for
from .transport import ProcessTransport
from .workspace import MAX_READ_BYTES, Workspace, WorkspaceError

#: session-event kind of the sidecar a resume reads (``external/session`` in the child's log)
SESSION_RECORD = "session"
#: seconds the agent gets to exit after a failure (stdin closed) before SIGTERM
FAILURE_EOF_GRACE = 1.0
#: seconds an exited agent's last answer gets to arrive before the step fails (it is already in the pipe)
EXIT_GRACE = 0.5
#: at most this many seconds for an agent to acknowledge session/cancel (real ones take milliseconds);
#: an interrupt or ``hub.close()`` never waits longer before the process is disposed
CANCEL_GRACE = 10.0


def acp_sdk():
    """The SDK, or a clear error naming the extra to install."""
    try:
        import acp
    except ImportError:  # pragma: no cover - exercised only without the extra
        from ...core.errors import UsageError

        raise UsageError("ACP needs the optional extra: pip install 'toh-nb[acp]' "
                         "(PyPI agent-client-protocol; not the unrelated PyPI package 'acp')") from None
    return acp


class _AgentExited(Exception):
    """The agent process exited while a request to it was pending."""


class _Handler:
    """The client side of the protocol for one link: session updates, permissions, files."""

    def __init__(self, link: "AgentLink") -> None:
        self.link = link

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        link = self.link
        kind = getattr(update, "session_update", None) or "unknown"
        if link.replaying:  # session/load replays the history we already logged
            return
        if kind == "agent_message_chunk":
            content = getattr(update, "content", None)
            if getattr(content, "type", None) == "text":
                link.answer.append(content.text)
        data = update.model_dump(mode="json", by_alias=True, exclude_none=True)
        data.pop("sessionUpdate", None)
        link.record(kind, data)

    async def request_permission(self, session_id: str, tool_call: Any, options: list, **kwargs: Any) -> Any:
        acp = acp_sdk()
        offered = [{"id": o.option_id, "name": o.name, "kind": o.kind} for o in options]
        request = PermissionRequest(session_id=session_id, title=tool_call.title or "",
                                    kind=tool_call.kind or "other", tool_call_id=tool_call.tool_call_id,
                                    options=offered, raw_input=tool_call.raw_input)
        asked = {"toolCallId": request.tool_call_id, "title": request.title, "kind": request.kind}
        try:
            decision = await self.link.policy.decide(  # "ask": announced in the child's log and stream
                request, self.link.agent_id, lambda ask: self.link.record("permission_request", ask), self.link.ask)
        except Exception as error:  # a failing policy refuses; the failure is on record
            self.link.denied.append(permission_label(asked))
            self.link.record("permission", {**asked, "allowed": False, "error": f"{type(error).__name__}: {error}"})
            return acp.RequestPermissionResponse(outcome=acp.schema.DeniedOutcome(outcome="cancelled"))
        if not decision.allowed:
            self.link.denied.append(permission_label(asked))
        self.link.record("permission", {**asked, "allowed": decision.allowed, "optionId": decision.option_id})
        if decision.option_id is None:
            return acp.RequestPermissionResponse(outcome=acp.schema.DeniedOutcome(outcome="cancelled"))
        return acp.RequestPermissionResponse(
            outcome=acp.schema.AllowedOutcome(outcome="selected", option_id=decision.option_id))

    async def read_text_file(self, session_id: str, path: str, line: int | None = None,
                             limit: int | None = None, **kwargs: Any) -> Any:
        acp = acp_sdk()
        try:  # off the loop: a slow disk or a large file delays only this request
            content = await run_engine(self.link.workspace.read, path, line, limit, self.link.max_read_bytes)
        except WorkspaceError as error:
            self.link.record("fs", {"op": "read", "path": path, "refused": str(error)})
            raise acp.RequestError(-32602, str(error), {"path": path}) from None
        self.link.record("fs", {"op": "read", "path": path, "chars": len(content)})
        return acp.ReadTextFileResponse(content=content)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        acp = acp_sdk()
        try:
            await run_engine(self.link.workspace.write, path, content)
        except WorkspaceError as error:
            self.link.record("fs", {"op": "write", "path": path, "refused": str(error)})
            raise acp.RequestError(-32602, str(error), {"path": path}) from None
        self.link.record("fs", {"op": "write", "path": path, "chars": len(content)})
        return acp.WriteTextFileResponse()


class AgentLink:
    """See the module docstring. ``session_id`` given: the link reloads that session (a resume)."""

    def __init__(self, *, command: list[str], env: dict[str, str], cwd: str, policy: PermissionPolicy,
                 timeout: float, prompt_timeout: float | None, eof_grace: float, kill_grace: float,
                 record: Callable[[str, dict], None], max_read_bytes: int = MAX_READ_BYTES, session_id: str | None = None,
                 agent_id: str | None = None, mcp_servers: Sequence[dict] = (),
                 ask: Callable[..., Any] | None = None) -> None:
        self.command = command
        #: ``session/new``'s ``mcpServers`` (the hub's MCP servers, as ACP entries: toh_nb.mcp.config)
        self.mcp_servers = list(mcp_servers)
        self.agent_id = agent_id  # the child this link serves (permission asks name it)
        self.env = env
        self.cwd = cwd
        self.policy = policy
        self.timeout = timeout
        self.prompt_timeout = prompt_timeout
        self.eof_grace = eof_grace
        self.kill_grace = kill_grace
        self.max_read_bytes = max_read_bytes  # of one fs/read_text_file (toh_nb.providers.acp.workspace)
        self.record = record
        self.ask = ask  # the hub's permission desk for this child (ChildInfo.ask)
        self.workspace = Workspace(cwd)
        self.session_id = session_id
        self.load_session: bool | None = None
        self.process: AgentProcess | None = None
        self.transport: ProcessTransport | None = None
        self.conn: Any = None
        self.replaying = False
        self.answer: list[str] = []
        #: the permissions refused during the current prompt ("title (kind)" each)
        self.denied: list[str] = []
        #: whether the current turn's prompt went out (a start failure leaves its text undelivered)
        self.delivered = False
        self.closed = False
        #: pids of every process this link started (tests check none is left)
        self.pids: list[int] = []

    @property
    def display(self) -> str:
        import shlex

        return shlex.join(self.command)

    # -- failures --------------------------------------------------------------------------------

    def _diagnostic(self, what: str) -> str:
        text = f"ACP agent `{self.display}` {what}"
        process = self.process
        if process is not None and process.returncode is not None:
            text += f"; exit code {process.returncode}"
        tail = process.tail() if process is not None else ""
        text += f"\nstderr (last lines):\n{tail}" if tail else "\n(nothing on stderr)"
        return text

    async def _fail(self, what: str) -> ModelError:
        """Dispose the broken process (its stderr drained), then the error naming what happened."""
        await self._discard(FAILURE_EOF_GRACE)
        return ModelError(self._diagnostic(what), cause="agent process")

    async def _step(self, name: str, call: Awaitable, timeout: float | None) -> Any:
        acp = acp_sdk()
        try:
            return await self._watched(call, timeout)
        except asyncio.TimeoutError:
            raise await self._fail(f"did not answer {name} within {timeout:g} s") from None
        except _AgentExited:
            raise await self._fail(f"exited during {name}") from None
        except ConnectionError:
            garbage = self.transport.garbage if self.transport is not None else None
            if garbage is not None:
                raise await self._fail(f"wrote non-protocol output to stdout during {name}: {garbage!r}") from None
            if self.process is not None and await self.process.exited(EXIT_GRACE):  # the usual end of a crash
                raise await self._fail(f"exited during {name}") from None
            raise await self._fail(f"closed the connection during {name}") from None
        except acp.RequestError as error:
            detail = f" ({error.data})" if error.data else ""
            raise await self._fail(f"refused {name}: {error}{detail}") from None
        except (ValueError, TypeError) as error:  # a malformed answer (pydantic validation)
            raise await self._fail(f"sent an invalid answer to {name}: {error}") from None

    async def _watched(self, call: Awaitable, timeout: float | None) -> Any:
        """``call``'s answer, watching the process itself rather than its stdout: a helper the agent
        started may hold the pipe open after the agent died, so end of file alone would never come.
        Raises ``asyncio.TimeoutError`` after ``timeout`` and :class:`_AgentExited` when the agent has
        exited without answering (what it wrote before exiting still counts)."""
        future = asyncio.ensure_future(call)
        ended = asyncio.ensure_future(self.process.ended.wait())
        try:
            done, _ = await asyncio.wait({future, ended}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if future not in done and ended in done:
                done, _ = await asyncio.wait({future}, timeout=EXIT_GRACE)  # its last lines, already in the pipe
                if future not in done:
                    raise _AgentExited()
            if future not in done:
                raise asyncio.TimeoutError()
            return future.result()
        finally:
            ended.cancel()
            if not future.done():
                future.cancel()

    # -- lifecycle -------------------------------------------------------------------------------

    async def open(self) -> None:
        """Start the process, initialize, then a new session (or load the one being resumed). Anything
        short of a usable session (an error, an interrupt) leaves no process behind."""
        try:
            await self._open()
        except BaseException:
            await self._discard(FAILURE_EOF_GRACE)
            raise

    async def _open(self) -> None:
        acp = acp_sdk()
        from ...version import __version__

        self.process = process = AgentProcess(self.command, env=self.env, cwd=self.cwd, kill_grace=self.kill_grace)
        await process.start()  # its own bound: the launcher is ours, the step timeouts are the agent's
        self.pids.append(process.pid)
        self.transport = ProcessTransport(process.proc.stdin, process.proc.stdout)
        self.conn = acp.connect_to_agent(_Handler(self), self.transport)
        capabilities = acp.schema.ClientCapabilities(
            fs=acp.schema.FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=False)
        init = await self._step("initialize", self.conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION, client_capabilities=capabilities,
            client_info=acp.schema.Implementation(name="toh_nb", title="toh_nb", version=__version__)),
            self.timeout)
        agent_caps = getattr(init, "agent_capabilities", None)
        self.load_session = bool(getattr(agent_caps, "load_session", False))
        info = getattr(init, "agent_info", None)
        servers = self._mcp_servers(getattr(agent_caps, "mcp_capabilities", None))
        if self.session_id is None:
            created = await self._step("session/new", self.conn.new_session(cwd=self.cwd, mcp_servers=servers),
                                       self.timeout)
            self.session_id = created.session_id
        else:
            if not self.load_session:
                raise await self._fail(f"cannot reload its session {self.session_id} (it does not support "
                                       "session/load)")
            self.replaying = True
            try:
                await self._step("session/load", self.conn.load_session(
                    cwd=self.cwd, session_id=self.session_id, mcp_servers=servers), self.timeout)
            finally:
                self.replaying = False
        self.record(SESSION_RECORD, {
            "session_id": self.session_id, "cwd": self.cwd, "load_session": self.load_session,
            "agent": getattr(info, "name", None), "agent_version": getattr(info, "version", None),
            "command": self.display, "pid": process.pid})

    def _mcp_servers(self, capabilities: Any) -> list:
        """The hub's MCP servers as the agent takes them: stdio ones always (every ACP agent must), HTTP
        ones when it advertises ``mcpCapabilities.http``; those it cannot take are recorded
        (``external/mcp_skipped``), never silently dropped."""
        schema = acp_sdk().schema
        servers, skipped = [], []
        for entry in self.mcp_servers:
            if entry.get("type") == "http":
                if getattr(capabilities, "http", False):
                    servers.append(schema.HttpMcpServer.model_validate(entry))
                else:
                    skipped.append(entry["name"])
            else:
                servers.append(schema.McpServerStdio.model_validate(entry))
        if skipped:
            self.record("mcp_skipped", {"servers": skipped, "reason": "the agent does not support MCP over HTTP"})
        return servers

    async def prompt(self, text: str) -> ModelResponse:
        """One turn: ``session/prompt``; cancelled → ``session/cancel`` and the turn's cancellation."""
        acp = acp_sdk()
        self.delivered = False
        if self.closed:
            raise ModelError(f"ACP agent `{self.display}`: the child's connection was closed", cause="agent process")
        if self.conn is None:
            await self.open()
        self.answer = []
        self.denied = []
        # a traced hub's model call context travels as ``_meta.traceparent`` (toh_nb.tracing.context)
        call = asyncio.ensure_future(self.conn.prompt(session_id=self.session_id, prompt=[acp.text_block(text)],
                                                      **outbound_meta()))
        self.delivered = True
        try:
            response = await self._step("session/prompt", asyncio.shield(call), self.prompt_timeout)
        except asyncio.CancelledError:
            await self._cancel(call)
            raise
        except BaseException:
            call.cancel()
            raise
        text = "".join(self.answer)
        if self.denied:  # a refusal must not read as a quiet success
            text = f"{text}\n\n{denied_line(self.denied)}" if text else denied_line(self.denied)
        return response_for(response.stop_reason, text, self.display)

    async def _cancel(self, call: asyncio.Future) -> None:
        """``session/cancel``, then the prompt's own answer (``cancelled``) within the timeout; an agent
        that does not settle is disposed (the next turn starts a new process)."""
        grace = min(self.timeout, CANCEL_GRACE)
        try:
            await self._watched(self.conn.cancel(session_id=self.session_id), grace)
            response = await self._watched(asyncio.shield(call), grace)
            self.record("cancelled", {"stopReason": response.stop_reason})
        except (asyncio.TimeoutError, ConnectionError, Exception):
            call.cancel()
            await self._discard(FAILURE_EOF_GRACE)

    async def _discard(self, eof_grace: float) -> None:
        """Drop the process and connection (the session id stays, for a reload)."""
        process, conn = self.process, self.conn
        self.conn = None
        if process is not None:
            await process.dispose(eof_grace, self.kill_grace)
        if conn is not None:
            try:
                await conn.close()
            except Exception:
                pass

    async def close(self) -> None:
        """Release everything (the plan's ``close``): the process is gone when this returns."""
        self.closed = True
        try:
            await self._discard(self.eof_grace)
        finally:
            self.workspace.close()
