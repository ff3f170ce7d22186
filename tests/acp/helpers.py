"""Shared by the ACP tests: the fake agent's command, process liveness, where the real agents are."""

from __future__ import annotations

import os
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
