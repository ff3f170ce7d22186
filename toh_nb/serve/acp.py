"""toh_nb as an ACP agent: ``python -m toh_nb acp [--store DIR] [--model ...]``.

An ACP client (Zed, JetBrains, another toh_nb) drives a delegation tree over stdio. Each ACP session is
the root agent of its own hub (with ``--store``, its own directory ``DIR/<session id>/``, so
``session/load`` resumes it in a later process); a prompt is one root turn; the root's tool calls (subagent
starts, job tools, messages to children) are reported as ``tool_call`` / ``tool_call_update`` and its
text as ``agent_message_chunk``; ``session/cancel`` aborts the turn; ``session/close`` ends the session.
The ``mcpServers`` of ``session/new`` / ``session/load`` are mounted as tools of the session's hub
(:func:`mcp_servers_of`, checked by :mod:`toh_nb.serve.mcp_entries`) and stop with it.

stdout carries only protocol messages (see :mod:`.server_io`, which also answers malformed lines). Every
message is checked at this edge before anything touches the disk: a session id must match the store's id
grammar and its directory must lie beneath ``--store``; a bad one is a JSON-RPC error naming it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable
from typing import Any

from ..core.errors import TohError
from ..core.ids import is_valid_id
from ..core.session import (
    ASSISTANT_MESSAGE,
    TOOL_CALL,
    TOOL_RESULT,
    Event,
)
from ..tracing.context import receive
from ..tracing.environment import provider_from_environment
from ..providers.acp.link import acp_sdk
from .command import model_from, prepare  # noqa: F401 - model_from: re-exported (its old home)
from .stdio import ServerTransport, protocol_streams

log = logging.getLogger("toh_nb.acp.server")

#: toh_nb turn endings → ACP stop reasons (the other endings are errors with their diagnostic)
ACP_STOPS = {"completed": "end_turn", "aborted": "cancelled", "max-tokens": "max_tokens", "refusal": "refusal",
             "max-steps": "max_turn_requests"}
#: ACP tool kinds of the root's tools (anything else is "other")
TOOL_KINDS = {"job_output": "read", "list_agents": "read", "job_kill": "delete", "interrupt_agent": "delete"}


def tool_call_id(event: Event, call_id: str) -> str:
    """Unique in the ACP session: a model may reuse its call ids from one turn to the next."""
    return f"t{event.turn}-{call_id}"


def session_updates(event: Event, separate: bool = False) -> list[Any]:
    """The ACP session updates that one root log event becomes (none for most events). ``separate``: the
    turn already said something, so a new message starts a new paragraph of the one streamed answer."""
    acp = acp_sdk()
    if event.kind == ASSISTANT_MESSAGE and event.message is not None and event.message.text:
        return [acp.update_agent_message_text(("\n\n" if separate else "") + event.message.text)]
    if event.kind == TOOL_CALL and event.data:
        arguments = event.data.get("arguments") or {}
        title = event.data["name"]
        if isinstance(arguments, dict) and isinstance(arguments.get("description"), str):
            title += f": {arguments['description']}"
        return [acp.start_tool_call(tool_call_id(event, event.data["call_id"]), title, kind=TOOL_KINDS.get(event.data["name"], "other"),
                                    status="in_progress", raw_input=arguments)]
    if event.kind == TOOL_RESULT and event.message is not None and event.message.tool_call_id:
        message = event.message
        return [acp.update_tool_call(tool_call_id(event, message.tool_call_id), status="failed" if message.is_error else "completed",
                                     content=[acp.tool_content(acp.text_block(message.text))])]
    return []


#: the ``message`` of the JSON-RPC errors the server answers (tested exactly)
BAD_SESSION_ID = ("Invalid params: sessionId {session_id!r} is not a session id (1-128 letters, digits and "
                  "'_.:-', starting with a letter or digit, no '..')")
UNKNOWN_SESSION = "Invalid params: sessionId {session_id!r} is not a session of this server"
OUTSIDE_STORE = "Invalid params: sessionId {session_id!r} does not name a directory beneath --store"
RELATIVE_CWD = "Invalid params: cwd must be an absolute path, got {cwd!r}"
BUSY = "Invalid request: session {session_id} is already running a prompt"
NO_TEXT = "Invalid params: prompt has no text"
UNSUPPORTED_BLOCK = ("Invalid params: prompt.{index} is {kind} content, which this agent does not accept "
                     "(text, resource_link and text resources only)")
NOT_UNICODE = "Invalid params: prompt.{index} is not valid Unicode (a lone surrogate {char!r})"
BAD_MCP_SERVER = "Invalid params: {problem}"
#: logged (stderr) when a client sends MCP servers and the extra is missing: the session runs without them
NO_MCP_EXTRA = ("MCP servers %s not mounted: this agent needs the mcp extra to mount them "
                "(pip install 'toh-nb[mcp]')")
TURN_FAILED = "Internal error: {error}"
#: seconds ``session/close`` waits for a cancelled turn to end before closing its hub
CLOSE_WAIT = 30.0


def _invalid_params(message: str, **data: Any) -> Exception:
    return acp_sdk().RequestError(-32602, message, data or None)


def prompt_text(blocks: list) -> str:
    """The root turn's text: text blocks as they are, a ``resource_link`` as a markdown link line
    (``[name](uri)``), an embedded text resource as its text in a ``<context ref="uri">`` element;
    any other block (image, audio, binary resource) is refused with an error naming it, never dropped."""
    parts = []
    for index, block in enumerate(blocks):
        kind = getattr(block, "type", None)
        if kind == "text":
            part = block.text
        elif kind == "resource_link":
            part = f"[{block.name or block.uri}]({block.uri})"
        elif kind == "resource" and isinstance(getattr(block.resource, "text", None), str):
            part = f'<context ref="{block.resource.uri}">\n{block.resource.text}\n</context>'
        else:
            label = "binary resource" if kind == "resource" else str(kind)
            raise _invalid_params(UNSUPPORTED_BLOCK.format(index=index, kind=label), field=f"prompt.{index}")
        try:  # JSON can escape half a surrogate pair; no log file or model takes it
            part.encode("utf-8")
        except UnicodeEncodeError as error:
            raise _invalid_params(NOT_UNICODE.format(index=index, char=error.object[error.start]),
                                  field=f"prompt.{index}") from None
        if part:
            parts.append(part)
    text = "\n\n".join(parts)
    if not text.strip():
        raise _invalid_params(NO_TEXT, field="prompt")
    return text


def mcp_available() -> bool:
    """Whether the ``mcp`` extra is installed (this agent then mounts the MCP servers its client sends)."""
    import importlib.util

    return importlib.util.find_spec("mcp") is not None


def mcp_servers_of(entries: Any, cwd: str) -> list:
    """``mcpServers`` of ``session/new`` or ``session/load`` as ``tn.MCPServer`` objects (none started), each
    entry checked as untrusted input (:mod:`toh_nb.serve.mcp_entries`); a bad one is an invalid-params error
    naming its field. A stdio server runs in the session's ``cwd`` when that directory exists. Without the
    ``mcp`` extra the session runs without them, and stderr says so."""
    if not entries:
        return []
    if not mcp_available():
        log.warning(NO_MCP_EXTRA, [getattr(entry, "name", "?") for entry in entries])
        return []
    from .mcp_entries import EntryError, servers_from_entries

    try:
        return servers_from_entries(entries, cwd if os.path.isdir(cwd) else None)
    except EntryError as error:
        raise _invalid_params(BAD_MCP_SERVER.format(problem=error), field=error.field) from None


class _Served:
    """One ACP session: its hub, and the pump that turns root log events into session updates."""

    def __init__(self, session_id: str, hub: Any, cwd: str, servers: list | None = None) -> None:
        self.id = session_id
        self.hub = hub
        self.cwd = cwd
        #: the MCP servers the client sent for this session (mounted as tools of its hub)
        self.servers = list(servers or ())
        self.turn: asyncio.Task | None = None
        #: a session/cancel for the current prompt arrived (perhaps before its turn began)
        self.cancelled = False
        #: the current prompt's task has begun (``hub.run`` is starting the servers or running the turn)
        self.running = False
        self.queue: asyncio.Queue = asyncio.Queue()
        #: what this face drives of the root: its log as it is written, its conversation, cancelling it
        self.root = hub.engine.root_port

        def note(event: Event) -> None:
            if self.turn is not None:
                self.queue.put_nowait(event)

        self.root.tap(note)

    def start(self, text: str) -> asyncio.Task:
        self.cancelled = False
        self.running = False
        self.turn = asyncio.ensure_future(self._run(text))
        return self.turn

    async def _run(self, text: str) -> Any:
        if self.cancelled:  # cancelled before the turn began: it never runs
            return None
        self.running = True  # from now on a cancel stops the hub's wait for its servers, if it is in it
        try:
            # queued in this same step, so a cancel reaches it; a failed turn is answered with its stop reason
            # (check=False), never raised into the protocol loop
            return await self.hub.run(text, check=False)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self.cancelled and task is not None and task.uncancel() == 0:  # ours: the turn never began
                return None
            raise

    def cancel(self) -> None:
        if self.turn is not None and not self.turn.done():
            self.cancelled = True
            if self.root.status == "running":  # the turn runs: it ends aborted, its records kept
                self.root.cancel("user")
            elif self.running:  # still starting the session's MCP servers: nothing ran, stop the wait itself
                self.turn.cancel()


class HubAgent:
    """The ACP ``Agent`` side: sessions are hubs (see the module docstring)."""

    def __init__(self, make_hub: Callable[[str, str | None, list], Any], store: str | None) -> None:
        self.make_hub = make_hub
        self.store = os.path.realpath(store) if store is not None else None
        self.sessions: dict[str, _Served] = {}
        self.conn: Any = None
        #: the input ended: running turns are cancelled and no new one runs
        self.closing = False

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> Any:
        acp = acp_sdk()
        from ..version import __version__

        return acp.InitializeResponse(
            protocol_version=min(protocol_version, acp.PROTOCOL_VERSION),
            agent_capabilities=acp.schema.AgentCapabilities(
                load_session=self.store is not None,
                mcp_capabilities=acp.schema.McpCapabilities(http=mcp_available(), sse=False),
                session_capabilities=acp.schema.SessionCapabilities(close=acp.schema.SessionCloseCapabilities()),
                prompt_capabilities=acp.schema.PromptCapabilities(embedded_context=True)),
            agent_info=acp.schema.Implementation(name="toh_nb", title="toh_nb", version=__version__))

    @staticmethod
    def _checked_id(session_id: Any) -> str:
        """A session id from the client, checked against the id grammar before any use."""
        if not is_valid_id(session_id):
            raise _invalid_params(BAD_SESSION_ID.format(session_id=session_id), sessionId=session_id)
        return session_id

    @staticmethod
    def _checked_cwd(cwd: Any) -> str:
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise _invalid_params(RELATIVE_CWD.format(cwd=cwd), field="cwd")
        return cwd

    def _directory(self, session_id: str) -> str | None:
        """The session's directory, resolved (symbolic links too) and refused unless directly beneath
        ``--store``."""
        if self.store is None:
            return None
        directory = os.path.realpath(os.path.join(self.store, self._checked_id(session_id)))
        if os.path.dirname(directory) != self.store:
            raise _invalid_params(OUTSIDE_STORE.format(session_id=session_id), sessionId=session_id)
        return directory

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> Any:
        acp = acp_sdk()
        self._checked_cwd(cwd)
        servers = mcp_servers_of(mcp_servers, cwd)
        session_id = f"toh-{uuid.uuid4().hex[:12]}"
        self.sessions[session_id] = _Served(session_id, self.make_hub(session_id, self._directory(session_id), servers),
                                            cwd, servers)
        log.info("session %s opened%s", session_id, f" with MCP servers {[s.name for s in servers]}" if servers else "")
        return acp.NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any) -> Any:
        acp = acp_sdk()
        self._checked_id(session_id)
        self._checked_cwd(cwd)
        servers = mcp_servers_of(mcp_servers, cwd)
        served = self.sessions.get(session_id)
        if served is not None and [s.acp_entry() for s in servers] != [s.acp_entry() for s in served.servers]:
            # loaded again with other MCP servers: the session's hub is remade around them
            if served.turn is not None:
                raise acp.RequestError(-32600, BUSY.format(session_id=session_id), {"sessionId": session_id})
            del self.sessions[session_id]
            await served.hub.close()
            served = None
        if served is None:
            if self.store is None or not session_id.startswith("toh-"):
                raise acp.RequestError.resource_not_found(session_id)
            directory = self._directory(session_id)
            if not os.path.isdir(directory):
                raise acp.RequestError.resource_not_found(session_id)
            served = _Served(session_id, self.make_hub(session_id, directory, servers), cwd, servers)
            self.sessions[session_id] = served
        # the history, replayed: the client's prompts and the root's answers (not notices or tool traffic)
        for message in served.root.conversation():
            if message.role == "user" and message.text and (message.source is None or message.source.kind == "user"):
                update = acp.update_user_message_text(message.text)
            elif message.role == "assistant" and message.text:
                update = acp.update_agent_message_text(message.text)
            else:
                continue
            await self.conn.session_update(session_id=session_id, update=update)
        return acp.LoadSessionResponse()

    def _served(self, session_id: str) -> _Served:
        served = self.sessions.get(self._checked_id(session_id))
        if served is None:
            raise _invalid_params(UNKNOWN_SESSION.format(session_id=session_id), sessionId=session_id)
        return served

    async def prompt(self, prompt: list, session_id: str, **kwargs: Any) -> Any:
        acp = acp_sdk()
        served = self._served(session_id)
        if served.turn is not None:
            raise acp.RequestError(-32600, BUSY.format(session_id=session_id), {"sessionId": session_id})
        receive(kwargs)  # a client's ``_meta.traceparent``: this prompt's root turn continues its trace
        turn = served.start(prompt_text(prompt))
        if self.closing:  # it arrived with the end of input: answered, but not run
            served.cancel()
        pump = asyncio.ensure_future(self._pump(served))
        try:
            result = await asyncio.shield(turn)
        except TohError as error:  # the turn could not begin: an MCP server of the session did not start
            raise acp.RequestError(-32603, TURN_FAILED.format(error=error), {"details": str(error)}) from None
        finally:
            served.turn = None
            served.queue.put_nowait(None)
            await pump
        if result is None:  # cancelled before it began
            return acp.PromptResponse(stop_reason="cancelled")
        stop = ACP_STOPS.get(result.stop_reason)
        if stop is None:
            raise acp.RequestError.internal_error({"stopReason": result.stop_reason, "details": result.diagnostic})
        return acp.PromptResponse(stop_reason=stop)

    async def _pump(self, served: _Served) -> None:
        """Send the turn's updates in log order (the sink is synchronous; sending is not)."""
        spoke = False
        while True:
            event = await served.queue.get()
            if event is None:
                return
            updates = session_updates(event, separate=spoke)
            spoke = spoke or any(u.session_update == "agent_message_chunk" for u in updates)
            for update in updates:
                try:
                    await self.conn.session_update(session_id=served.id, update=update)
                except Exception as error:  # the client went away: the turn still ends normally
                    log.warning("session update not delivered: %s", error)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """A notification: nothing to answer, so a bad or unknown id is only logged."""
        if not is_valid_id(session_id) or session_id not in self.sessions:
            log.warning("session/cancel for %r ignored: no such session", session_id)
            return
        self.sessions[session_id].cancel()

    async def close_session(self, session_id: str, **kwargs: Any) -> Any:
        """``session/close``: the session's running turn is cancelled and its hub closed (its MCP servers
        stopped); with ``--store`` its log stays, so ``session/load`` reopens it."""
        acp = acp_sdk()
        served = self._served(session_id)
        del self.sessions[session_id]
        served.cancel()
        if served.turn is not None:
            await asyncio.wait({served.turn}, timeout=CLOSE_WAIT)
        await served.hub.close()
        log.info("session %s closed", session_id)
        return acp.schema.CloseSessionResponse()

    def cancel_all(self) -> None:
        """End of input: the client is gone, so every running turn is cancelled (its log keeps it)."""
        self.closing = True
        for served in self.sessions.values():
            served.cancel()

    async def close(self) -> None:
        for served in list(self.sessions.values()):
            await served.hub.close()
        self.sessions.clear()


async def serve(*, model: Any, store: str | None, max_depth: int = 3, output_fd: int | None = None) -> None:
    """Serve until the client closes stdin (``output_fd``: from :func:`.server_io.protocol_streams`)."""
    acp = acp_sdk()
    from ..hub import AsyncHub

    transport = await ServerTransport.open(0, output_fd)

    tracing = provider_from_environment()  # OTEL_TRACES_EXPORTER=otlp|console: traced (toh_nb.tracing.environment)

    def make_hub(session_id: str, directory: str | None, servers: list) -> Any:
        return AsyncHub(model, store=directory, root_id=session_id, max_depth=max_depth, tracing=tracing,
                        tools=servers)

    agent = HubAgent(make_hub, store)
    transport.on_eof = agent.cancel_all
    try:
        # the unstable routes answer only where HubAgent has the method: session/close
        await acp.run_agent(agent, input_stream=transport, use_unstable_protocol=True)
    finally:
        await agent.close()
        if tracing is not None:
            tracing.shutdown()  # exports the spans still queued


def main(args: Any) -> int:
    """``python -m toh_nb acp`` (arguments parsed in ``toh_nb.__main__``)."""
    output_fd = protocol_streams()  # first: before anything opens a file
    prepared = prepare("acp", args, acp_sdk)
    if isinstance(prepared, int):
        return prepared
    model, store = prepared
    asyncio.run(serve(model=model, store=store, max_depth=args.max_depth, output_fd=output_fd))
    return 0
