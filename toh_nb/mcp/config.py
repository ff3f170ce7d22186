"""``tn.MCPServer``: how to reach one MCP tool server (a command over stdio, or a streamable-HTTP URL).

Only a description: nothing starts when one is made. The hub that mounts it (``tn.Hub(tools=[...,
tn.MCPServer(...)])``) opens one session with it the first time its tools are needed (see
:mod:`toh_nb.mcp.mounts`). The same description is what an ACP child is handed in ``session/new``'s
``mcpServers`` (:meth:`MCPServer.acp_entry`), so an external agent reaches the same server.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

from ..core.checks import check_number
from ..core.errors import UsageError
from . import texts

#: what a model-facing tool name may contain (OpenAI and Anthropic both accept exactly this)
NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
#: the longest tool name every model API takes: OpenAI's function names are ``^[a-zA-Z0-9_-]{1,64}$``
#: (Anthropic's tool names allow 128 characters of the same set); a longer one is shortened
MAX_TOOL_NAME = 64
#: hex digits of the hash that makes a shortened or remapped name unique
HASH_DIGITS = 8


def sdk() -> Any:
    """The ``mcp`` SDK, or a clear error naming the extra to install."""
    try:
        import mcp
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise UsageError(texts.NO_SDK) from None
    return mcp


def tool_name_part(text: str) -> str:
    """``text`` as a piece of a tool name: characters a model API refuses become ``_``."""
    return NAME_CHARS.sub("_", text) or "_"


def name_hash(identity: str) -> str:
    """A short, stable hash of what a tool is (its server's name and its own name)."""
    return hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_DIGITS]


def fitted_name(name: str, identity: str, *, hashed: bool = False) -> str:
    """``name`` (already of model-safe characters) as a tool name of at most :data:`MAX_TOOL_NAME`
    characters: a longer one (or any, with ``hashed``) becomes its first characters, ``_`` and the hash
    of ``identity`` — deterministic, and unique as long as the identities differ."""
    if not hashed and len(name) <= MAX_TOOL_NAME:
        return name
    return f"{name[:MAX_TOOL_NAME - HASH_DIGITS - 1]}_{name_hash(identity)}"


class MCPServer:
    """An MCP tool server: ``MCPServer(command=["npx", "-y", "pkg"], env=None, cwd=None)`` (stdio) or
    ``MCPServer(url="http://127.0.0.1:8000/mcp", headers=None)`` (streamable HTTP).

    Args:
        command: the program and its arguments, for a server over stdio (give this or ``url``).
        url: the server's streamable-HTTP endpoint (``http`` or ``https``).
        env: variables added to the SDK's safe default environment (``HOME``, ``PATH``, ``USER`` …); the
            server never sees the rest of the notebook's environment (API keys) unless given here. Values
            never appear in reprs or diagnostics. Stdio only.
        cwd: the server process's working directory. Stdio only.
        headers: HTTP headers sent with every request (e.g. authorization); never shown. HTTP only.
        name: the server's name (default: the command's program name, or the URL's host and port); it
            prefixes its tools' names when they clash (``<name>_<tool>``).
        prefix: ``True`` always prefixes this server's tools with its name.
        timeout: seconds one ``tools/call`` may take (the call is then cancelled on the server and the
            turn reads an error).
        connect_timeout: seconds to start the server and finish the handshake; also the bound of one
            whole ``tools/list`` (all its pages).

    Raises:
        UsageError: neither or both of ``command`` and ``url``, an empty or non-string command, a URL that
            is not http(s), ``env``/``cwd`` with a URL or ``headers`` with a command, a mapping that is not
            of strings, a relative or missing ``cwd``, a bad name, flag or timeout, or the ``mcp`` extra is
            not installed.
    """

    __slots__ = ("command", "url", "cwd", "name", "prefix", "timeout", "connect_timeout", "_env", "_headers")

    def __init__(self, command: Sequence[str] | None = None, *, url: str | None = None,
                 env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
                 headers: Mapping[str, str] | None = None, name: str | None = None, prefix: bool = False,
                 timeout: float = 60.0, connect_timeout: float = 30.0) -> None:
        sdk()  # the extra is installed: say so now rather than at the first turn
        if (command is None) == (url is None):
            raise UsageError(texts.ONE_TRANSPORT)
        if command is not None:
            if isinstance(command, (str, bytes)) or not isinstance(command, Sequence) or not command:
                raise UsageError(texts.bad_command(command))
            if not all(isinstance(part, str) and part for part in command):
                raise UsageError(texts.bad_command_parts(command))
            if headers is not None:
                raise UsageError(texts.HEADERS_NEED_URL)
        else:
            if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
                raise UsageError(texts.bad_url(url))
            if env is not None or cwd is not None:
                raise UsageError(texts.ENV_NEEDS_COMMAND)
        for value, what in ((env, "env"), (headers, "headers")):
            if value is not None and (not isinstance(value, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
                raise UsageError(texts.not_str_mapping(what))
        if cwd is not None:
            cwd = os.fspath(cwd)
            if not os.path.isabs(cwd) or not os.path.isdir(cwd):
                raise UsageError(texts.bad_cwd(cwd))
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise UsageError(texts.bad_name(name))
        if not isinstance(prefix, bool):
            raise UsageError(f"prefix must be True or False, got {type(prefix).__name__}")
        self.command = list(command) if command is not None else None
        self.url = url
        self.cwd = cwd
        self._env = dict(env or {})
        self._headers = dict(headers or {})
        self.name = name if name is not None else _default_name(self.command, url)
        self.prefix = prefix
        self.timeout = check_number(timeout, "timeout", positive=True, none=None)
        self.connect_timeout = check_number(connect_timeout, "connect_timeout", positive=True, none=None)

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"

    @property
    def env(self) -> dict[str, str]:
        return dict(self._env)

    @property
    def headers(self) -> dict[str, str]:
        return dict(self._headers)

    @property
    def display(self) -> str:
        """How diagnostics name the server: its name and what it runs (never env or header values)."""
        where = f"`{shlex.join(self.command)}`" if self.command is not None else self.url
        return f'MCP server "{self.name}" ({where})'

    def acp_entry(self) -> dict:
        """This server as an ACP ``session/new`` ``mcpServers`` entry (the protocol's JSON shape)."""
        if self.command is not None:
            return {"name": self.name, "command": self.command[0], "args": self.command[1:],
                    "env": [{"name": k, "value": v} for k, v in self._env.items()]}
        return {"type": "http", "name": self.name, "url": self.url,
                "headers": [{"name": k, "value": v} for k, v in self._headers.items()]}

    def __repr__(self) -> str:
        if self.command is not None:
            env = f", env=<{len(self._env)} variables>" if self._env else ""
            return f"MCPServer(command={self.command!r}{env}, name={self.name!r})"
        headers = f", headers=<{len(self._headers)} headers>" if self._headers else ""
        return f"MCPServer(url={self.url!r}{headers}, name={self.name!r})"


def _default_name(command: list[str] | None, url: str | None) -> str:
    if command is not None:
        program = os.path.basename(command[0])
        if program in ("npx", "uvx", "node", "python", "python3", "deno", "bun") and len(command) > 1:
            # the package or script is the name worth showing, not the launcher
            program = next((part for part in command[1:] if not part.startswith("-")), program)
            program = os.path.basename(program.rstrip("/")).split("@")[0] or os.path.basename(command[0])
        return tool_name_part(os.path.splitext(program)[0])
    parts = urlsplit(url)
    return tool_name_part(parts.netloc)
