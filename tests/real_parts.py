"""Where the tests find the real third-party parts they drive: one place for every suite.

Each is ``$TOH_NB_<NAME>`` when set, else what ``.ci/run`` installs into ``.ci-agents/`` of the checkout,
else (for programs) the ``PATH``. A part that is absent makes its tests skip, naming how to install it.
"""

from __future__ import annotations

import os
import shutil

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CI_AGENTS = os.path.join(REPO, ".ci-agents")


def _program(env_var: str, installed: str) -> str | None:
    for path in (os.environ.get(env_var), installed):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return shutil.which(os.path.basename(installed))


#: fast-agent (``fast-agent-mcp``, its own Python >= 3.12 venv): an ACP agent and an MCP client
FAST_AGENT = _program("TOH_NB_FAST_AGENT", os.path.join(CI_AGENTS, "fast-agent", "bin", "fast-agent"))
#: opencode (npm ``opencode-linux-x64``): an ACP agent
OPENCODE = _program("TOH_NB_OPENCODE", os.path.join(CI_AGENTS, "opencode", "node_modules", "opencode-linux-x64",
                                                    "bin", "opencode"))
#: the npm MCP servers' ``.bin`` (``@modelcontextprotocol/server-everything``, ``server-filesystem``)
MCP_NODE_BIN = os.environ.get("TOH_NB_MCP_NODE_BIN") or os.path.join(CI_AGENTS, "mcp", "node_modules", ".bin")
#: a virtualenv holding Arize Phoenix (``arize-phoenix``; heavy, so never an extra of ours)
PHOENIX = os.environ.get("TOH_NB_PHOENIX") or os.path.join(CI_AGENTS, "phoenix")


def _python(env_var: str, venv: str) -> str | None:
    return next((path for path in (os.environ.get(env_var), os.path.join(CI_AGENTS, venv, "bin", "python"))
                 if path and os.path.isfile(path) and os.access(path, os.X_OK)), None)


#: Pythons whose ipykernel is another than the test venv's, in front of the test venv's packages (``.ci/run``
#: makes each in ``.ci-agents/``): the tree's clicks on each kind of kernel. ipykernel 6 has no subshells;
IPYKERNEL6_PYTHON = _python("TOH_NB_IPYKERNEL6_PYTHON", "ipykernel6")
#: ipykernel 7.3 has subshells but no per-comm routing hook;
IPYKERNEL7_3_PYTHON = _python("TOH_NB_IPYKERNEL7_3_PYTHON", "ipykernel7.3")
#: the newest ipykernel 7.x has both
IPYKERNEL7_PYTHON = _python("TOH_NB_IPYKERNEL7_PYTHON", "ipykernel7")
#: the ipykernel a test needs -> (its Python or None, the variable that names it, its venv in ``.ci-agents``)
IPYKERNELS = {
    "6.31": (IPYKERNEL6_PYTHON, "TOH_NB_IPYKERNEL6_PYTHON", "ipykernel6"),
    "7.3": (IPYKERNEL7_3_PYTHON, "TOH_NB_IPYKERNEL7_3_PYTHON", "ipykernel7.3"),
    "7.x": (IPYKERNEL7_PYTHON, "TOH_NB_IPYKERNEL7_PYTHON", "ipykernel7"),
}
