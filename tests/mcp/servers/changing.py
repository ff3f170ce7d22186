"""An MCP server (the SDK's MCPServer over stdio) whose tool list changes, for the list_changed tests.

``open_archive`` adds ``read_archive`` and ``close_archive`` removes it, each then saying so (before its
answer). A tool with a name of 80 characters and one
with a dot in its name are there for the naming rules.
"""

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("changing", log_level="ERROR")
LONG = "summarise_the_whole_archive_of_notes_for_one_year_into_a_single_paragraph_please"  # 80 characters


async def changed(ctx: Context) -> None:
    """Say the tools changed: to ``subscriptions/listen`` streams (a 2026-07-28 connection), and as the
    unasked ``notifications/tools/list_changed`` of older protocol versions (dropped on a newer one)."""
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()


def read_archive(year: str) -> str:
    """A note from the archive."""
    return f"archive {year}: the beans did well"


@app.tool()
async def open_archive(ctx: Context) -> str:
    """Add the read_archive tool."""
    app.add_tool(read_archive)
    await changed(ctx)
    return "opened"


@app.tool()
async def close_archive(ctx: Context) -> str:
    """Remove the read_archive tool."""
    app.remove_tool("read_archive")
    await changed(ctx)
    return "closed"


@app.tool(name=LONG)
def summarise() -> str:
    """A tool whose name is longer than model APIs allow."""
    return "summary"


@app.tool(name="notes.count")
def count() -> str:
    """A tool whose name has a dot."""
    return "2 notes"


app.run()
