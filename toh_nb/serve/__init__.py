"""Every face that serves a hub, or a model, to another program:

- :mod:`toh_nb.serve.acp`: ``python -m toh_nb acp``, a toh_nb hub over stdio as an Agent Client Protocol
  agent, so an ACP editor drives a delegation tree (:mod:`toh_nb.serve.stdio` is its transport);
- :mod:`toh_nb.serve.mcp`: ``python -m toh_nb mcp``, a hub's delegation tools served to MCP clients
  (:mod:`toh_nb.serve.mcp_entries` checks the MCP servers an ACP client hands a session);
- :mod:`toh_nb.serve.model`: ``python -m toh_nb serve-model``, a local GGUF model behind an
  OpenAI-compatible HTTP server (``start_model_server()`` from Python).

Servers sit at the top with the hubs: they import the engine's layers, nothing below imports them.
"""
