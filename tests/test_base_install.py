"""A base install (``pip install toh-nb``, no extras) imports, runs the demo, runs a hub, and names the
extra to install when an extra's part is asked for. ``base_install.py`` hides every installed package
outside the base dependencies, so this holds in the full-extras venv too (the release's wheel-only
virtualenv in ``.ci/run`` is where a base import of ``anyio`` was first caught)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).with_name("base_install.py")


def test_a_base_install_runs_the_hub_and_names_each_extra(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == [
        "blocking anyio: True",
        "exports resolved",
        "demo: 0 True",
        "agent tree: 6 agents (0 running) · 1 job (0 active) · 1949 tokens",
        "jobs table: ['id', 'label']",
        *(f"{extra}: True" for extra in ("openai", "local", "acp", "ray", "mcp", "otel")),
    ], out.stderr[-3000:]
