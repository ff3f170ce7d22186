"""The MCP servers of one hub: one session per server, and the toh_nb tools made from their tools.

**One session per server per hub, shared by every agent that sees its tools.** A JSON-RPC session
carries concurrent requests, so parallel tool calls of many agents need no more; a process per agent
would cost a server start (a second or more for ``npx``) per child of a tree of hundreds. A server whose
state must not be shared between agents (a browser tab, a shell) is mounted per child instead
(``hub.spawn(..., tools=[tn.MCPServer(...)])`` makes a fresh :class:`MCPServer` object per call, and
each server object has its own session).

**Names.** An MCP tool keeps its name (characters a model API refuses become ``_``) unless it clashes
with a tool of another mounted server or with a hub tool: then every server that offers it exposes it
as ``<server name>_<tool>``. ``MCPServer(prefix=True)`` always prefixes. ``tool_filter`` lists the
exposed names.

**Schemas.** The model sees each tool's ``inputSchema`` as its parameters and its description; the
server validates the arguments (a refusal is the tool's error result).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, Collection, Sequence

import pydantic

from ..core.errors import ToolError, UsageError
from ..core.tools import Tool, ToolContext
from . import texts
from .config import MCPServer, tool_name_part
from .connection import MCPConnection


class MCPArguments(pydantic.BaseModel):
    """Any JSON object: the server checks arguments against its own schema."""

    model_config = pydantic.ConfigDict(extra="allow")


class MCPTool(Tool):
    """A tool of an MCP server, as the agents see it (``mcp_name``: its name on the server)."""

    __slots__ = ("server", "mcp_name")

    def __init__(self, connection: MCPConnection, listed: Any, exposed: str) -> None:
        schema = dict(listed.input_schema or {})
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        description = listed.description or listed.title or f'Tool "{listed.name}" of MCP server "{connection.server.name}".'
        name = listed.name

        async def call(ctx: ToolContext, args: MCPArguments) -> Any:
            return await connection.call(name, dict(args.model_extra or {}))

        annotations = listed.annotations
        read_only = bool(annotations is not None and annotations.read_only_hint)
        super().__init__(exposed, description, MCPArguments, call, parameters=schema, concurrency_safe=read_only)
        self.server = connection.server
        self.mcp_name = name


class MCPMounts:
    """The sessions of one hub's MCP servers (keyed by server object) and their tools."""

    def __init__(self) -> None:
        self._connections: dict[int, MCPConnection] = {}
        self.closed = False

    def connection(self, server: MCPServer) -> MCPConnection:
        if self.closed:
            raise ToolError(texts.closed_hub(server.display))
        connection = self._connections.get(id(server))
        if connection is None or connection.server is not server:
            connection = MCPConnection(server)
            self._connections[id(server)] = connection
        return connection

    def connections(self) -> list[MCPConnection]:
        return list(self._connections.values())

    async def tools(self, servers: Sequence[MCPServer], taken: Collection[str] = ()) -> list[MCPTool]:
        """Start ``servers`` (those not started yet, concurrently), list their tools and name them;
        ``taken``: names of the tools they sit beside. A server that cannot start raises its ToolError."""
        connections = [self.connection(server) for server in servers]
        listings = await asyncio.gather(*(connection.list_tools() for connection in connections))
        offered = Counter(name for listing in listings for name in {tool_name_part(t.name) for t in listing})
        taken = set(taken)
        out: list[MCPTool] = []
        used: dict[str, str] = {}
        for connection, listing in zip(connections, listings):
            server = connection.server
            for listed in listing:
                exposed = tool_name_part(listed.name)
                if server.prefix or offered[exposed] > 1 or exposed in taken:
                    exposed = f"{tool_name_part(server.name)}_{exposed}"
                if exposed in used or exposed in taken:
                    raise UsageError(f'MCP tool name "{exposed}" is offered by {used.get(exposed, "a hub tool")} and '
                                     f'{server.display}; give one of the servers another name=')
                used[exposed] = server.display
                out.append(MCPTool(connection, listed, exposed))
        return out

    async def close(self) -> None:
        """Close every session (concurrently; each is bounded). Idempotent."""
        self.closed = True
        await asyncio.gather(*(connection.close() for connection in self._connections.values()))
