"""An MCP server (the SDK's MCPServer over stdio) that misbehaves on request, for the hostile-server tests.

Tools: ``echo``; ``crash`` (writes to stderr, exits 3 mid-call); ``garbage`` (writes a non-JSON line on
stdout, then answers); ``hang`` (never answers; when the client cancels it, appends ``cancelled`` to the
file named by ``$HOSTILE_MARKS``); ``big`` (a 10 MB text); ``fail`` (an ``isError`` result); ``pid``;
``detach`` (starts a ``setsid`` helper that ignores SIGTERM, returns its pid).
``--garbage-only``: prints a banner and never speaks MCP; ``--banner``: prints one, then speaks MCP. (The
SDK's server keeps its stdout for the protocol, so ``garbage`` writes its line where the client never
sees it; a banner written before the SDK starts does reach the client.)
"""

import os
import sys

if "--banner" in sys.argv:  # a line on the real stdout before the SDK guards it, then MCP as usual
    os.write(1, b"hostile 1.0 starting (not JSON-RPC)\n")

if "--garbage-only" in sys.argv:
    print("Welcome to not-an-MCP-server 1.0", flush=True)
    sys.stdin.read()
    sys.exit(0)

import anyio  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

app = MCPServer("hostile", log_level="ERROR")


@app.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@app.tool()
def crash() -> str:
    """Exit in the middle of the call."""
    sys.stderr.write("hostile: fatal: out of cheese\n")
    sys.stderr.flush()
    os._exit(3)


@app.tool()
def garbage() -> str:
    """Write a non-protocol line on stdout, then answer."""
    os.write(1, b"this is not json\n")
    return "answered after garbage"


@app.tool()
async def hang() -> str:
    """Never answer (until cancelled)."""
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        with open(os.environ["HOSTILE_MARKS"], "a") as marks:
            marks.write("cancelled\n")
        raise
    return "never"


@app.tool()
def big() -> str:
    """A 10 MB answer."""
    return "x" * 10_000_000


@app.tool()
def fail() -> str:
    """Fail with a message."""
    raise ToolError("the disk is made of cheese")


@app.tool()
def detach() -> str:
    """Start a helper that leaves this server's process group (``setsid``) and ignores SIGTERM; its pid."""
    import subprocess

    helper = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                               "signal.SIG_IGN); print('ready', flush=True); time.sleep(3600)"],
                              start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    helper.stdout.readline()  # its SIGTERM is ignored from now on
    return str(helper.pid)


@app.tool()
def pid() -> str:
    """This server's process id."""
    return str(os.getpid())


app.run()
