"""toh_nb as an MCP server: ``python -m toh_nb mcp [--store DIR] [--model ...] [--http PORT]``.

An MCP client (Claude Code, Cursor, fast-agent, the SDK's own client) delegates to a toh_nb tree. The
server holds one hub; the client acts as its root agent, the way the notebook user does: its tools are
the root's delegation surface — ``subagent`` (foreground, or ``run_in_background``), ``send_message``,
``interrupt_agent``, ``list_agents``, ``job_output``, ``job_list``, ``job_kill`` — with exactly the
descriptions, schemas and result texts a model in the tree reads (the tool objects are the hub's own).
With ``--store DIR`` the tree is logged there, and a notebook opens it with ``tn.Hub(store=DIR)`` once the
server has stopped (one writer per store), or watches it read-only meanwhile.

While a call runs, each step of the tree (a child's model call, tool call, turn end) is sent as a
``notifications/progress`` when the client asked for progress. A client's ``notifications/cancelled``
cancels the call like an interrupt: a foreground ``subagent`` run is stopped and disposed.

Transports: stdio (default; fds 0-2 made safe and the protocol on a private duplicate of stdout, so a
stray ``print`` cannot corrupt it), or streamable HTTP on ``127.0.0.1:PORT`` at ``/mcp`` (``--http PORT``).
Over stdio every line goes through the transport ``toh_nb acp`` uses (:mod:`toh_nb.serve.stdio`): a
line that is not a JSON-RPC message is answered ``-32700`` / ``-32600`` (the SDK's own stdio transport
drops it without a word) and the server reads on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any

from ..core.events import HubEvent
from ..mcp.config import sdk

log = logging.getLogger("toh_nb.mcp.server")  # the name from before the move: logging configs keep working

#: the root's tools an MCP client gets, in this order (the delegation surface of the reference)
DELEGATION_TOOLS = ("subagent", "send_message", "interrupt_agent", "list_agents", "job_output", "job_list",
                    "job_kill")
#: the tree's steps a progress notification reports
PROGRESS_KINDS = frozenset({"subagent/start", "subagent/end", "model/request", "tool/call", "turn/end",
                            "job/start", "job/end"})


#: seconds a call's answer waits for its last progress notifications to go out
PROGRESS_FLUSH = 5.0


def unknown_tool(name: str) -> str:
    return f'Error: unknown tool "{name}" (this server offers {", ".join(DELEGATION_TOOLS)})'


def progress_message(event: HubEvent) -> str:
    """One step of the tree, for a progress notification: ``toh-x: tool/call job_output``."""
    detail = (getattr(event, "name", None) or getattr(event, "reason", None) or getattr(event, "stop_reason", None)
              or getattr(event, "label", None))
    return f"{event.agent_id}: {event.kind}" + (f" {detail}" if detail else "")


def build_server(hub: Any) -> Any:
    """The low-level SDK server whose tools are ``hub``'s delegation tools (an :class:`~toh_nb.hub.AsyncHub`)."""
    sdk()
    from mcp.server.lowlevel import Server
    from mcp_types import CallToolResult, ListToolsResult, TextContent, Tool

    from ..version import __version__

    
    offered = hub.engine.root_port.tools(DELEGATION_TOOLS)

    async def list_tools(ctx: Any, params: Any) -> Any:
        return ListToolsResult(tools=[Tool(name=tool.name, description=tool.description, input_schema=tool.parameters)
                                      for tool in offered.values()])

    async def call_tool(ctx: Any, params: Any) -> Any:
        name = params.name
        if name not in offered:
            return CallToolResult(content=[TextContent(type="text", text=unknown_tool(name))], is_error=True)
        result = await with_progress(ctx, hub, hub.call_tool(name, **(params.arguments or {})))
        return CallToolResult(content=[TextContent(type="text", text=result.text)], is_error=result.is_error)

    return Server("toh_nb", version=__version__, title="toh_nb delegation tree",
                  instructions="Delegate tasks to toh_nb subagents: call subagent, then job_output for background "
                               "jobs; list_agents, send_message and interrupt_agent for continuable children.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def with_progress(ctx: Any, hub: Any, call: Any) -> Any:
    """Await ``call``, sending one progress notification per step of the tree meanwhile (a no-op when
    the client asked for none). Cancelling this cancels ``call``."""
    queue: asyncio.Queue = asyncio.Queue()

    def note(event: HubEvent) -> None:
        if event.kind in PROGRESS_KINDS and event.agent_id != hub.root:
            queue.put_nowait(progress_message(event))

    async def forward() -> None:
        count = 0
        while True:
            message = await queue.get()
            if message is None:  # the call is over: everything before it has been sent
                return
            count += 1
            try:
                await ctx.session.report_progress(count, None, message)
            except Exception as error:  # a client gone mid-call: the call's own answer says the rest
                log.info("progress notification failed: %s", error)
                return

    unsubscribe = hub.view.subscribe(note)
    forwarder = asyncio.ensure_future(forward())
    try:
        result = await call
        unsubscribe()
        queue.put_nowait(None)  # the steps of a quick call are still sent, before its answer
        await asyncio.wait({forwarder}, timeout=PROGRESS_FLUSH)
        return result
    finally:
        unsubscribe()
        forwarder.cancel()
        await asyncio.gather(forwarder, return_exceptions=True)


class _Lines:
    """The SDK's stdio server reads lines from this: only JSON-RPC messages the SDK can take; every
    other line is answered by the transport (``-32700`` / ``-32600``) and skipped."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport

    def __aiter__(self) -> "_Lines":
        return self

    async def __anext__(self) -> str:
        import pydantic
        from mcp_types import jsonrpc_message_adapter

        from .stdio import INVALID_REQUEST

        while True:
            message = await self._transport.receive()
            if message is None:
                raise StopAsyncIteration
            try:
                jsonrpc_message_adapter.validate_python(message, by_name=False)
            except pydantic.ValidationError as error:
                first = error.errors()[0]
                where = ".".join(str(part) for part in first.get("loc") or ()) or "message"
                await self._transport.refuse(INVALID_REQUEST, f"Invalid request: {where}: {first.get('msg')}",
                                             message.get("id"))
                continue
            return json.dumps(message)


class _Wire:
    """Where the SDK's stdio server writes its lines: the transport (one writer, answers counted)."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport

    async def write(self, line: str) -> None:
        await self._transport.send(json.loads(line))

    async def flush(self) -> None:
        return None


async def serve(*, model: Any, store: str | None, max_depth: int = 3, http_port: int | None = None,
                output_fd: int | None = None) -> None:
    """Serve one hub until the client closes stdin (stdio) or the process is stopped (HTTP).
    ``output_fd``: the protocol's stdout (:func:`toh_nb.serve.stdio.protocol_streams`)."""
    sdk()
    from ..hub import AsyncHub

    async with AsyncHub(model, store=store, max_depth=max_depth) as hub:
        server = build_server(hub)
        if http_port is None:
            from mcp.server.stdio import stdio_server

            from .stdio import ServerTransport

            transport = await ServerTransport.open(0, output_fd)
            try:
                async with stdio_server(_Lines(transport), _Wire(transport)) as (read_stream, write_stream):
                    await server.run(read_stream, write_stream, server.create_initialization_options())
            finally:
                await transport.close()
            return
        import uvicorn

        app = server.streamable_http_app(host="127.0.0.1")
        config = uvicorn.Config(app, host="127.0.0.1", port=http_port, log_level="warning")
        await uvicorn.Server(config).serve()


def main(args: Any) -> int:
    """``python -m toh_nb mcp`` (arguments parsed in ``toh_nb.__main__``)."""
    from ..core.errors import TohError
    from .command import prepare

    from .stdio import protocol_streams

    output_fd = protocol_streams() if args.http is None else None  # first: before anything opens a file
    prepared = prepare("mcp", args, sdk)
    if isinstance(prepared, int):
        return prepared
    model, store = prepared
    try:
        asyncio.run(serve(model=model, store=store, max_depth=args.max_depth, http_port=args.http,
                          output_fd=output_fd))
    except KeyboardInterrupt:
        pass
    except TohError as error:  # a store another process writes, a model that cannot be made
        print(f"toh-nb mcp: error: {error}", file=sys.stderr)
        return 2
    return 0
