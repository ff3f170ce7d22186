"""MCP servers as an ACP client describes them (``session/new``'s and ``session/load``'s ``mcpServers``),
checked as hostile input and made :class:`~toh_nb.mcp.config.MCPServer` objects.

``python -m toh_nb acp`` mounts the servers its client sends (Zed passes the user's context servers
this way) as tools of that session's agent: the same shapes :meth:`MCPServer.acp_entry` writes for the
ACP children toh_nb starts. Stdio (``name``, ``command``, ``args``, ``env``) and streamable HTTP
(``type: "http"``, ``name``, ``url``, ``headers``) are accepted; SSE (deprecated by MCP, and not
advertised in ``mcpCapabilities``) is refused. Nothing here starts a process: a bad entry is refused
before anything runs, with :class:`EntryError` naming the field (``mcpServers.1.env.0.name``) and what is
wrong with it. Limits (counts and lengths below) keep a client from making the agent hold megabytes or
start hundreds of processes; the servers' waits are the :class:`MCPServer` defaults (30 s to start,
60 s per call).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from ..core.errors import UsageError
from ..mcp.config import MCPServer

#: servers one session may mount
MAX_SERVERS = 32
#: characters of a server name (it prefixes tool names, which are at most 64)
MAX_NAME = 64
#: arguments, environment variables and headers per server
MAX_ITEMS = 256
#: characters of a command, an argument, a URL, a variable or header value
MAX_TEXT = 8192

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: an HTTP header name (RFC 9110 token)
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class EntryError(ValueError):
    """An ``mcpServers`` entry that is refused: ``field`` (``mcpServers.0.command``) and ``problem``."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field = field
        self.problem = problem


def _plain(entry: Any) -> Any:
    """An entry as JSON data (the ACP SDK hands pydantic models; a raw client may send dicts)."""
    dump = getattr(entry, "model_dump", None)
    if callable(dump):
        return dump(by_alias=True, exclude_none=True)
    return entry


def _text(value: Any, field: str, *, empty: bool = False, limit: int = MAX_TEXT, controls: bool = False) -> str:
    if not isinstance(value, str):
        raise EntryError(field, f"must be a string, got {type(value).__name__}")
    if not value and not empty:
        raise EntryError(field, "must not be empty")
    if len(value) > limit:
        raise EntryError(field, f"is longer than {limit} characters ({len(value)})")
    if "\x00" in value or (not controls and CONTROL.search(value)):
        raise EntryError(field, "contains a control character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise EntryError(field, "is not valid Unicode (a lone surrogate)") from None
    return value


def _pairs(value: Any, field: str, check_name: re.Pattern, what: str) -> dict[str, str]:
    """``[{"name": ..., "value": ...}, ...]`` as a dict (ACP's shape for env and headers)."""
    if value is None:
        return {}
    if not isinstance(value, list):
        raise EntryError(field, f"must be a list of {{name, value}} objects, got {type(value).__name__}")
    if len(value) > MAX_ITEMS:
        raise EntryError(field, f"has more than {MAX_ITEMS} entries ({len(value)})")
    out: dict[str, str] = {}
    for index, item in enumerate(value):
        item = _plain(item)
        where = f"{field}.{index}"
        if not isinstance(item, dict):
            raise EntryError(where, f"must be a {{name, value}} object, got {type(item).__name__}")
        name = _text(item.get("name"), f"{where}.name", limit=256)
        if not check_name.fullmatch(name):
            raise EntryError(f"{where}.name", f"is not a valid {what} name: {name!r}")
        if name in out:
            raise EntryError(f"{where}.name", f"repeats {name!r}")
        out[name] = _text(item.get("value"), f"{where}.value", empty=True, controls=what == "environment variable")
    return out


def server_from_entry(entry: Any, index: int, cwd: str | None = None) -> MCPServer:
    """One ``mcpServers`` entry as an :class:`MCPServer` (``cwd``: the stdio server's working directory,
    the session's when it exists). Raises :class:`EntryError`."""
    field = f"mcpServers.{index}"
    data = _plain(entry)
    if not isinstance(data, dict):
        raise EntryError(field, f"must be an object, got {type(data).__name__}")
    kind = data.get("type", "stdio")
    name = _text(data.get("name"), f"{field}.name", limit=MAX_NAME)
    if name != name.strip():
        raise EntryError(f"{field}.name", "must not start or end with spaces")
    if kind == "stdio":
        command = _text(data.get("command"), f"{field}.command")
        args = data.get("args") if data.get("args") is not None else []
        if not isinstance(args, list):
            raise EntryError(f"{field}.args", f"must be a list of strings, got {type(args).__name__}")
        if len(args) > MAX_ITEMS:
            raise EntryError(f"{field}.args", f"has more than {MAX_ITEMS} entries ({len(args)})")
        args = [_text(arg, f"{field}.args.{i}", controls=True) for i, arg in enumerate(args)]
        env = _pairs(data.get("env"), f"{field}.env", ENV_NAME, "environment variable")
        try:
            return MCPServer([command, *args], env=env or None, cwd=cwd, name=name)
        except UsageError as error:  # what MCPServer itself refuses (an empty argument)
            raise EntryError(field, f"is refused: {error}") from None
    if kind == "http":
        url = _text(data.get("url"), f"{field}.url")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EntryError(f"{field}.url", f"must be an http:// or https:// URL with a host, got {url!r}")
        headers = _pairs(data.get("headers"), f"{field}.headers", HEADER_NAME, "header")
        return MCPServer(url=url, headers=headers or None, name=name)
    if kind == "sse":
        raise EntryError(f"{field}.type", 'is "sse", which this agent does not take (stdio and http only; MCP '
                                          "deprecated SSE for streamable HTTP)")
    if kind == "acp":
        raise EntryError(f"{field}.type", 'is "acp" (MCP over ACP), which this agent does not take (stdio and http '
                                          "only)")
    raise EntryError(f"{field}.type", f"is {kind!r}; expected stdio (no type) or \"http\"")


def servers_from_entries(entries: Any, cwd: str | None = None) -> list[MCPServer]:
    """Every entry of ``mcpServers`` (``None``: none), names unique. Raises :class:`EntryError`."""
    if entries is None:
        return []
    if not isinstance(entries, (list, tuple)):
        raise EntryError("mcpServers", f"must be a list, got {type(entries).__name__}")
    if len(entries) > MAX_SERVERS:
        raise EntryError("mcpServers", f"has more than {MAX_SERVERS} servers ({len(entries)})")
    servers: list[MCPServer] = []
    for index, entry in enumerate(entries):
        server = server_from_entry(entry, index, cwd)
        if any(other.name == server.name for other in servers):
            raise EntryError(f"mcpServers.{index}.name", f"repeats {server.name!r}; each server needs its own name")
        servers.append(server)
    return servers
