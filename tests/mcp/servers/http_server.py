"""A FastMCP-style server (the SDK's MCPServer) over streamable HTTP on 127.0.0.1:<port> at /mcp.

Tools: ``add`` (structured output), ``picture`` (an image), ``note`` (an embedded text resource).
Run as ``python http_server.py PORT``; callers poll the port until it answers.
"""

import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import EmbeddedResource, ImageContent, TextResourceContents

app = MCPServer("calc", log_level="WARNING")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def picture() -> list:
    """A one-pixel picture."""
    return [ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")]


@app.tool()
def note() -> list:
    """A note as an embedded resource."""
    return [EmbeddedResource(type="resource", resource=TextResourceContents(uri="note://1", mime_type="text/plain",
                                                                             text="remember the milk"))]


app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
