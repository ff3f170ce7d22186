"""toh_nb as an ACP agent: ``python -m toh_nb acp [--store DIR] [--model ...]``.

An ACP client (Zed, JetBrains, another toh_nb) drives a delegation tree over stdio. Each ACP session is
the root agent of its own hub (with ``--store``, its own directory ``DIR/<session id>/``, so
``session/load`` resumes it in a later process); a prompt is one root turn; the root's tool calls (subagent
starts, job tools, messages to children) are reported as ``tool_call`` / ``tool_call_update`` and its
text as ``agent_message_chunk``; ``session/cancel`` aborts the turn.

stdout carries only protocol messages: the real stdout is kept for the protocol and file descriptor 1 is
pointed at stderr, so a stray ``print`` (ours, a library's, a C extension's) cannot corrupt the stream.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import uuid
from typing import Any, Callable

from ..core.session import (
    ASSISTANT_MESSAGE,
    TOOL_CALL,
    TOOL_RESULT,
    Event,
    conversation_of,
)
from .link import _acp

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
    acp = _acp()
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


class _Served:
    """One ACP session: its hub, and the pump that turns root log events into session updates."""

    def __init__(self, session_id: str, hub: Any, cwd: str) -> None:
        self.id = session_id
        self.hub = hub
        self.cwd = cwd
        self.turn: asyncio.Task | None = None
        self.queue: asyncio.Queue = asyncio.Queue()
        session = hub.root_agent.session
        sink = session.sink

        def tee(log_session: Any, event: Event) -> None:
            if sink is not None:
                sink(log_session, event)
            if self.turn is not None:
                self.queue.put_nowait(event)

        session.sink = tee


class HubAgent:
    """The ACP ``Agent`` side: sessions are hubs (see the module docstring)."""

    def __init__(self, make_hub: Callable[[str, str | None], Any], store: str | None) -> None:
        self.make_hub = make_hub
        self.store = store
        self.sessions: dict[str, _Served] = {}
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> Any:
        acp = _acp()
        from .. import __version__

        return acp.InitializeResponse(
            protocol_version=min(protocol_version, acp.PROTOCOL_VERSION),
            agent_capabilities=acp.schema.AgentCapabilities(load_session=self.store is not None),
            agent_info=acp.schema.Implementation(name="toh_nb", title="toh_nb", version=__version__))

    def _directory(self, session_id: str) -> str | None:
        return None if self.store is None else os.path.join(self.store, session_id)

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> Any:
        acp = _acp()
        session_id = f"toh-{uuid.uuid4().hex[:12]}"
        self.sessions[session_id] = _Served(session_id, self.make_hub(session_id, self._directory(session_id)), cwd)
        log.info("session %s opened", session_id)
        return acp.NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any) -> Any:
        acp = _acp()
        served = self.sessions.get(session_id)
        if served is None:
            directory = self._directory(session_id)
            if directory is None or not session_id.startswith("toh-") or not os.path.isdir(directory):
                raise acp.RequestError.resource_not_found(session_id)
            served = _Served(session_id, self.make_hub(session_id, directory), cwd)
            self.sessions[session_id] = served
        # the history, replayed: the client's prompts and the root's answers (not notices or tool traffic)
        for message in conversation_of(served.hub.root_agent.session.events):
            if message.role == "user" and message.text and (message.source is None or message.source.kind == "user"):
                update = acp.update_user_message_text(message.text)
            elif message.role == "assistant" and message.text:
                update = acp.update_agent_message_text(message.text)
            else:
                continue
            await self.conn.session_update(session_id=session_id, update=update)
        return acp.LoadSessionResponse()

    def _served(self, session_id: str) -> _Served:
        served = self.sessions.get(session_id)
        if served is None:
            raise _acp().RequestError.invalid_params({"sessionId": session_id, "reason": "unknown session"})
        return served

    async def prompt(self, prompt: list, session_id: str, **kwargs: Any) -> Any:
        acp = _acp()
        served = self._served(session_id)
        if served.turn is not None:
            raise acp.RequestError.invalid_request({"reason": f"session {session_id} is already running a prompt"})
        text = "\n\n".join(block.text for block in prompt if getattr(block, "type", None) == "text"
                           and block.text)
        if not text:
            raise acp.RequestError.invalid_params({"reason": "the prompt has no text"})
        served.turn = asyncio.ensure_future(served.hub.run(text))
        pump = asyncio.ensure_future(self._pump(served))
        try:
            result = await asyncio.shield(served.turn)
        finally:
            served.turn = None
            served.queue.put_nowait(None)
            await pump
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
        served = self.sessions.get(session_id)
        if served is not None and served.turn is not None:
            served.hub.root_agent.cancel("user")

    async def close(self) -> None:
        for served in list(self.sessions.values()):
            await served.hub.close()
        self.sessions.clear()


def model_from(name: str, base_url: str | None, latency: float) -> Any:
    """``demo`` → the offline DemoModel; anything else → an OpenAI-compatible model of that name."""
    if name == "demo":
        from ..models.demo import DemoModel

        return DemoModel(latency=latency)
    from ..models.openai_chat import OpenAIChatModel

    return OpenAIChatModel(name, base_url=base_url) if base_url else OpenAIChatModel(name)


def _protocol_stdout() -> int:
    """A private duplicate of stdout for the protocol; fd 1 and ``sys.stdout`` then go to stderr."""
    protocol = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol


async def serve(*, model: Any, store: str | None, max_depth: int = 3) -> None:
    """Serve until the client closes stdin."""
    acp = _acp()
    from acp.stdio import _WritePipeProtocol

    from ..hub import AsyncHub

    out_fd = _protocol_stdout()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=50 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(_WritePipeProtocol, os.fdopen(out_fd, "wb", buffering=0))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)

    def make_hub(session_id: str, directory: str | None) -> Any:
        return AsyncHub(model, store=directory, root_id=session_id, max_depth=max_depth)

    agent = HubAgent(make_hub, store)
    try:
        await acp.run_agent(agent, input_stream=writer, output_stream=reader)
    finally:
        await agent.close()


def main(args: Any) -> int:
    """``python -m toh_nb acp`` (arguments parsed in ``toh_nb.__main__``)."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING,
                        format="toh_nb acp: %(message)s")
    store = os.path.abspath(args.store) if args.store else None
    if store is not None:
        os.makedirs(store, exist_ok=True)
    model = model_from(args.model, args.base_url, args.latency)
    asyncio.run(serve(model=model, store=store, max_depth=args.max_depth))
    return 0
