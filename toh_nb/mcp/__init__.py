"""MCP both ways (the official ``mcp`` SDK, extra ``toh-nb[mcp]``).

- :class:`~toh_nb.mcp.config.MCPServer`: an MCP tool server whose tools agents use
  (``tn.Hub(tools=[..., tn.MCPServer(command=[...])])``); sessions and tool naming in :mod:`.mounts`,
  one session in :mod:`.connection`, results in :mod:`.results`.

The server face (``python -m toh_nb mcp``, a toh_nb tree served as an MCP server whose tools are the
delegation surface) lives with the other server faces in :mod:`toh_nb.serve.mcp`; this package is the
client plug-in only.
"""

from .config import MCPServer

__all__ = ["MCPServer"]
