"""Shared by the ACP tests: the fake agent's command, process liveness, where the real agents are."""

from __future__ import annotations

import os
import sys

from ..helpers import alive  # noqa: F401  (the ACP tests import it from here)

FAKE_AGENT = os.path.join(os.path.dirname(__file__), "fake_agent.py")


def fake(*flags: str) -> list[str]:
    return [sys.executable, FAKE_AGENT, *flags]
