"""Shared by the ACP tests: the fake agent's command, process liveness, where the real agents are."""

from __future__ import annotations

import os
import shutil
import sys

FAKE_AGENT = os.path.join(os.path.dirname(__file__), "fake_agent.py")


def fake(*flags: str) -> list[str]:
    return [sys.executable, FAKE_AGENT, *flags]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie nobody reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def find_agent(env_var: str, *candidates: str) -> str | None:
    """A real agent's executable: ``$env_var``, then the well-known install paths, then ``PATH``."""
    for path in (os.environ.get(env_var), *candidates):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return shutil.which(os.path.basename(candidates[-1])) if candidates else None
