"""Agent Client Protocol (ACP) in both directions.

- Client: :class:`~toh_nb.providers.acp.provider.AcpAgent` is a subagent provider whose children are external
  coding agents (fast-agent, opencode, Claude Code, Gemini CLI …) run as subprocesses speaking ACP over
  stdio. ``tn.Hub(providers={"coder": tn.AcpAgent(["opencode", "acp"], cwd="/abs/workspace")})``.
- Agent: ``python -m toh_nb acp`` serves a toh_nb hub over stdio (:mod:`toh_nb.serve.acp`), so an ACP
  editor drives a delegation tree.

Needs the optional extra ``toh-nb[acp]`` (PyPI ``agent-client-protocol``, imported as ``acp``); nothing
here is imported by ``import toh_nb`` until ``tn.AcpAgent`` is used.
"""

from .provider import AcpAgent

__all__ = ["AcpAgent"]
