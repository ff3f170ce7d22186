"""Tutorial 09 drives a real ACP agent (fast-agent); without it (or without the ``acp`` extra) that
notebook is skipped with the reason, instead of failing on a missing install."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


def _fast_agent() -> str | None:
    for path in (os.environ.get("TOH_NB_FAST_AGENT"), shutil.which("fast-agent"),
                 str(REPO / ".ci-agents" / "fast-agent" / "bin" / "fast-agent")):
        if path and os.access(path, os.X_OK):
            return path
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    if importlib.util.find_spec("acp") is None:
        reason = "09_acp_agents needs the acp extra: pip install 'toh-nb[acp]'"
    elif _fast_agent() is None:
        reason = ("09_acp_agents needs fast-agent (set TOH_NB_FAST_AGENT, or run .ci/run, which installs it into "
                  ".ci-agents/)")
    if reason is None:
        return
    for item in items:
        if pathlib.Path(str(item.fspath)).name == "09_acp_agents.ipynb":
            item.add_marker(pytest.mark.skip(reason=reason))
