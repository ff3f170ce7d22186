"""Every user-visible string of the MCP package, in one place (tests assert them exactly)."""

from __future__ import annotations

from typing import Any

NO_SDK = "MCP needs the optional extra: pip install 'toh-nb[mcp]' (PyPI mcp, the official SDK)"
ONE_TRANSPORT = "tn.MCPServer takes either command=[...] (stdio) or url=... (streamable HTTP), exactly one"
HEADERS_NEED_URL = "headers only apply to an HTTP server (url=...); a stdio server takes env=..."
ENV_NEEDS_COMMAND = "env and cwd only apply to a stdio server (command=[...]); an HTTP server takes headers=..."


def bad_command(command: Any) -> str:
    return f"command must be a non-empty list of arguments (no shell), got {command!r}"


def bad_command_parts(command: Any) -> str:
    return f"command arguments must be non-empty strings, got {list(command)!r}"


def bad_url(url: Any) -> str:
    return f"url must be an http:// or https:// URL, got {url!r}"


def not_str_mapping(what: str) -> str:
    return f"{what} must be a mapping of str to str"


def bad_cwd(cwd: str) -> str:
    return f"cwd must be an existing absolute directory, got {cwd!r}"


def bad_name(name: Any) -> str:
    return f"name must be a non-empty string, got {name!r}"


def name_clash(name: str, first: str, second: str) -> str:
    return f'MCP tool name "{name}" is offered by {first} and {second}; give one of the servers another name='


def listed_twice(display: str, names: list[str]) -> str:
    """One line for a server whose listing names tools more than once: only the first of each is mounted."""
    return (f"{display} lists tool name(s) more than once: {', '.join(repr(n) for n in names)}; "
            "only the first tool of each name is offered")


def not_a_server(item: Any) -> str:
    return f"tools= of spawn/start takes tn.MCPServer objects, got {type(item).__name__}"


# -- failures a turn reads (after "Error: ") ---------------------------------------------------------

RESTART_NOTE = "it is restarted at the next call"


def start_failed(display: str, reason: str, stderr: str) -> str:
    return f"{display} could not be started: {reason}{_tail(stderr)}"


def handshake_timeout(display: str, seconds: float, stderr: str) -> str:
    return f"{display} did not complete the MCP handshake within {seconds:g} s{_tail(stderr)}"


def closed_during(display: str, tool: str, stderr: str) -> str:
    return (f'{display} closed the connection during tools/call "{tool}" (the server exited or crashed); '
            f"{RESTART_NOTE}{_tail(stderr)}")


def call_timeout(display: str, tool: str, seconds: float) -> str:
    return (f'{display} did not answer tools/call "{tool}" within {seconds:g} s; the call was cancelled '
            "on the server")


def still_sending(display: str, tool: str, seconds: float, sent: int) -> str:
    """A call whose answer was still arriving when its timeout passed (a large result, not a silence)."""
    return (f'{display} was still sending its answer to tools/call "{tool}" when {seconds:g} s had passed '
            f"(about {sent / 1e6:.1f} MB of it sent); the call was cancelled: a larger timeout= would let a "
            "result that large arrive")


def refused(display: str, tool: str, message: str) -> str:
    return f'{display} refused tools/call "{tool}": {message}'


def invalid_answer(display: str, tool: str, problem: str) -> str:
    return f'{display} sent an invalid answer to tools/call "{tool}": {problem}'


def list_failed(display: str, problem: str) -> str:
    return f"{display} could not list its tools: {problem}"


def list_timeout(seconds: float, pages: int) -> str:
    """Why a listing failed when its deadline (``connect_timeout``, for all its pages) passed."""
    if pages <= 0:
        return f"no answer within {seconds:g} s"
    return f"the listing was not complete within {seconds:g} s ({pages} page(s) read)"


def not_ready(seconds: float) -> str:
    """A run (or any hub call) whose MCP servers were not started and listed within its time."""
    return (f"the hub's MCP servers were not started and listed within {seconds:g} s (the call's timeout= or "
            "the root's turn_timeout); nothing ran, and the next call tries again")


def relist_failed(display: str, problem: str) -> str:
    return f"{display} said its tools changed, but listing them again failed: {problem}"


def closed_hub(display: str) -> str:
    return f"{display}: the hub is closed"


#: characters of a non-protocol stdout line a diagnostic quotes
NOISE_QUOTE = 120


def _quoted(line: str) -> str:
    return repr(line if len(line) <= NOISE_QUOTE else line[:NOISE_QUOTE] + "\u2026")


def noise(count: int, first: str) -> str:
    """Said after a failure diagnostic: the server's stdout lines that were not JSON-RPC."""
    return f"; {count} line(s) it wrote on stdout were not JSON-RPC, the first: {_quoted(first)}"


def unparsed(seconds: float, line: str) -> str:
    """Why a request got no answer when the server sent a line the SDK could not parse meanwhile."""
    return (f"it sent a line that is not valid JSON-RPC instead of an answer (none came within {seconds:g} s): "
            f"{_quoted(line)}")


def call_unparsed(display: str, tool: str, seconds: float, line: str) -> str:
    return f'{display} failed tools/call "{tool}": {unparsed(seconds, line)}'


def _tail(stderr: str) -> str:
    return f"; its stderr ends: {stderr}" if stderr else ""


# -- results --------------------------------------------------------------------------------------

#: at most this many characters of one MCP result reach the model (the rest is cut, and it says so)
MAX_RESULT_CHARS = 100_000


def cut(extra: int) -> str:
    return f"\n[... {extra} more characters cut: the MCP result was longer than {MAX_RESULT_CHARS} characters]"


def image(kind: str, mime: str, size: int) -> str:
    return f"[{kind}: {mime}, {size} bytes base64]"


def resource_text(uri: str, mime: str | None, text: str) -> str:
    return f"[resource {uri}{f' ({mime})' if mime else ''}]\n{text}"


def resource_blob(uri: str, mime: str | None, size: int) -> str:
    return f"[resource {uri}{f' ({mime})' if mime else ''}: {size} bytes base64]"


def resource_link(uri: str, name: str | None) -> str:
    return f"[resource link {uri}{f' ({name})' if name else ''}]"


def unknown_block(kind: str) -> str:
    return f"[{kind} content]"


EMPTY_RESULT = "(the tool returned no content)"
