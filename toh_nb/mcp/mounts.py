"""The MCP servers of one hub: one session per server, and the toh_nb tools made from their tools.

**One session per server per hub, shared by every agent that sees its tools.** A JSON-RPC session
carries concurrent requests, so parallel tool calls of many agents need no more; a process per agent
would cost a server start (a second or more for ``npx``) per child of a tree of hundreds. A server whose
state must not be shared between agents (a browser tab, a shell) is mounted per child instead
(``hub.spawn(..., tools=[tn.MCPServer(...)])`` makes a fresh :class:`MCPServer` object per call, and
each server object has its own session).

**Names.** Model APIs take tool names of ``^[a-zA-Z0-9_-]{1,64}$`` (OpenAI's rule; Anthropic's allows
128 characters), MCP allows more (dots, 128 characters), so an MCP tool's name is mapped:

1. characters outside ``[a-zA-Z0-9_-]`` become ``_`` (``files.read`` → ``files_read``);
2. when the name clashes with a tool of another mounted server or with a hub tool, every server that
   offers it exposes it as ``<server name>_<tool>``; ``MCPServer(prefix=True)`` always prefixes (a
   server that lists one name twice offers only the first of them, and a problem event says so);
3. a name longer than 64 characters is cut to its first 55 and given ``_`` and 8 hex digits of the
   SHA-256 of ``<server name>`` U+001F ``<tool name>`` (64 in all): the same tool of the same server is
   always named the same, and two tools whose names share their first 55 characters differ;
4. a remapped or cut name that meets another name (``files.read`` beside ``files_read``) takes the
   hash too; names the server sent exactly keep theirs.

``tool_filter`` lists the exposed names; ``MCPTool.mcp_name`` keeps the server's name, which is what
``tools/call`` sends.

**Changes.** A server that sends ``notifications/tools/list_changed`` is listed again (and its group's
names worked out again): the agents that see its tools see the new list from their next step (the
hub's servers: every agent; a child's own: that child), and children started later get it too. When
the notification comes while a call of that server runs (the call added or removed tools), the call's
result waits (up to ``connect_timeout``) for the new list, so the calling agent's next step has it.
A failed re-listing is reported as a problem (``hub.events()``) and the agents keep the tools they had.

**Schemas.** The model sees each tool's ``inputSchema`` as its parameters and its description; the
server validates the arguments (a refusal is the tool's error result).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, Callable, Collection, Sequence

import pydantic

from ..core.errors import ToolError, UsageError
from ..core.tools import Tool, ToolContext
from . import texts
from .config import MAX_TOOL_NAME, MCPServer, fitted_name, tool_name_part
from .connection import MCPConnection


def exposed_names(tools: Sequence[tuple[MCPServer, str]], taken: Collection[str] = ()) -> list[str]:
    """The names the model sees for ``tools`` (each: its server and its name on the server, in listing
    order), beside the hub's tools named ``taken``; see the module docstring for the rules.

    Raises:
        UsageError: two tools would still share a name (two servers with the same ``name=``).
    """
    taken = set(taken)
    bases = [tool_name_part(name) for _, name in tools]
    offered = Counter(base for _, base in {(id(server), base) for (server, _), base in zip(tools, bases)})
    wanted: list[tuple[str, str, bool]] = []
    for (server, name), base in zip(tools, bases):
        prefixed = server.prefix or offered[base] > 1 or base in taken
        candidate = f"{tool_name_part(server.name)}_{base}" if prefixed else base
        # a name whose characters were remapped or that is cut may meet another: it is the one that yields
        altered = base != name or len(candidate) > MAX_TOOL_NAME
        wanted.append((candidate, f"{server.name}\x1f{name}", altered))
    out: list[str] = [""] * len(tools)
    used: dict[str, str] = {}
    for index in sorted(range(len(tools)), key=lambda i: wanted[i][2]):  # exact names claim theirs first
        candidate, identity, altered = wanted[index]
        exposed = fitted_name(candidate, identity)
        if altered and (exposed in used or exposed in taken):
            exposed = fitted_name(candidate, identity, hashed=True)
        server = tools[index][0]
        if exposed in used or exposed in taken:
            raise UsageError(texts.name_clash(exposed, used.get(exposed, "a hub tool"), server.display))
        used[exposed] = server.display
        out[index] = exposed
    return out


class MCPArguments(pydantic.BaseModel):
    """Any JSON object: the server checks arguments against its own schema."""

    model_config = pydantic.ConfigDict(extra="allow")


class MCPTool(Tool):
    """A tool of an MCP server, as the agents see it (``mcp_name``: its name on the server)."""

    __slots__ = ("server", "mcp_name", "connection")

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
        self.connection = connection


class MountGroup:
    """Servers mounted together (the hub's, or one child's or delegation tool's): their tools are named
    together, so a change of one server's list renames within the group."""

    __slots__ = ("servers", "taken", "shared", "tools")

    def __init__(self, servers: tuple, taken: tuple, shared: bool) -> None:
        self.servers = servers
        self.taken = taken
        #: the hub's own servers: every agent sees them (else: the agents holding one of their tools)
        self.shared = shared
        #: the tools last made for the group
        self.tools: list[MCPTool] = []


def connection_of(tool: Tool) -> MCPConnection | None:
    """The MCP session ``tool`` calls through; None for a tool that is not an MCP server's."""
    return tool.connection if isinstance(tool, MCPTool) else None


class MCPMounts:
    """The sessions of one hub's MCP servers (keyed by server object) and their tools.

    ``on_change(old, new, shared)``: after a server of a group said ``notifications/tools/list_changed``
    and the group was listed again, the hub swaps ``old`` for ``new`` in the agents that use them;
    ``on_problem(text)``: a re-listing that failed (the agents keep the tools they had)."""

    def __init__(self, on_change: Callable[[list, list, bool], None] | None = None,
                 on_problem: Callable[[str], None] | None = None) -> None:
        self._connections: dict[int, MCPConnection] = {}
        self._groups: dict[tuple, MountGroup] = {}
        self._refresh_lock: asyncio.Lock | None = None
        self.on_change = on_change
        self.on_problem = on_problem
        self.closed = False

    def connection(self, server: MCPServer) -> MCPConnection:
        if self.closed:
            raise ToolError(texts.closed_hub(server.display))
        connection = self._connections.get(id(server))
        if connection is None or connection.server is not server:
            connection = MCPConnection(server)
            connection.on_change = self._changed
            self._connections[id(server)] = connection
        return connection

    def connections(self) -> list[MCPConnection]:
        return list(self._connections.values())

    async def tools(self, servers: Sequence[MCPServer], taken: Collection[str] = (), *,
                    shared: bool = False) -> list[MCPTool]:
        """Start ``servers`` (those not started yet, concurrently), list their tools and name them;
        ``taken``: names of the tools they sit beside; ``shared``: the hub's own servers (every agent
        sees them). A server that cannot start raises its ToolError."""
        connections = [self.connection(server) for server in servers]
        listings = await asyncio.gather(*(connection.list_tools() for connection in connections))
        pairs = [(connection, listed) for connection, listing in zip(connections, listings)
                 for listed in self._first_of_each_name(connection, listing)]
        names = exposed_names([(connection.server, listed.name) for connection, listed in pairs], taken)
        made = [MCPTool(connection, listed, name) for (connection, listed), name in zip(pairs, names)]
        key = (tuple(id(server) for server in servers), shared)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = MountGroup(tuple(servers), tuple(taken), shared)
        group.tools = made
        return made

    def _first_of_each_name(self, connection: MCPConnection, listing: list) -> list:
        """``listing`` without the later tools of a name it already had: a server that lists a name twice
        degrades itself only (the duplicates are refused, said once per listing as a problem), never
        the hub's other tools or servers."""
        seen: set[str] = set()
        kept, twice = [], []
        for listed in listing:
            if listed.name in seen:
                if listed.name not in twice:
                    twice.append(listed.name)
                continue
            seen.add(listed.name)
            kept.append(listed)
        if twice and connection.told_twice is not listing:  # once per listing, not once per run
            connection.told_twice = listing
            if self.on_problem is not None:
                self.on_problem(texts.listed_twice(connection.server.display, twice))
        return kept

    # -- notifications/tools/list_changed -------------------------------------------------------------

    def _changed(self, connection: MCPConnection) -> None:
        """A server's tools changed: list its groups again (in order with earlier changes)."""
        if self.closed:
            return
        previous = connection.refreshing
        connection.refreshing = asyncio.get_running_loop().create_task(
            self._refresh(connection, previous), name=f"toh_nb mcp refresh {connection.server.name}")

    async def _refresh(self, connection: MCPConnection, previous: asyncio.Task | None) -> None:
        if previous is not None and not previous.done():
            await asyncio.wait({previous})
        if self._refresh_lock is None:
            self._refresh_lock = asyncio.Lock()
        async with self._refresh_lock:
            for group in list(self._groups.values()):
                if self.closed or not any(server is connection.server for server in group.servers):
                    continue
                old = group.tools
                try:
                    new = await self.tools(group.servers, group.taken, shared=group.shared)
                except (ToolError, UsageError) as error:
                    if self.on_problem is not None:
                        self.on_problem(texts.relist_failed(connection.server.display, str(error)))
                    continue
                if self.on_change is not None:
                    self.on_change(old, new, group.shared)

    def hold(self, servers: Sequence[MCPServer]) -> list[MCPConnection]:
        """One more user of each server's session (made now if there is none): :meth:`release` closes a
        session only when its last holder lets go."""
        held = [self.connection(server) for server in servers]
        for connection in held:
            connection.holders += 1
        return held

    async def release(self, held: Sequence[MCPConnection], in_use: Collection[int] = ()) -> None:
        """Let go of ``held`` (from :meth:`hold`): a session nobody holds any more, whose ``id`` is not in
        ``in_use``, is closed and forgotten (a later use of the same server object starts a new one)."""
        closing = []
        for connection in held:
            connection.holders -= 1
            if connection.holders > 0 or id(connection) in in_use or connection.closed:
                continue
            server = connection.server
            if self._connections.get(id(server)) is connection:
                del self._connections[id(server)]
            for key in [key for key, group in self._groups.items() if any(s is server for s in group.servers)]:
                del self._groups[key]
            if connection.refreshing is not None:
                connection.refreshing.cancel()
            closing.append(connection.close())
        await asyncio.gather(*closing)

    async def close(self) -> None:
        """Close every session (concurrently; each is bounded). Idempotent."""
        self.closed = True
        refreshing = [c.refreshing for c in self._connections.values() if c.refreshing is not None]
        for task in refreshing:
            task.cancel()
        await asyncio.gather(*refreshing, return_exceptions=True)
        await asyncio.gather(*(connection.close() for connection in self._connections.values()))
