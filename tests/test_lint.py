"""Static checks: undefined names, unused imports and syntax errors fail the suite (ruff's F and E9)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_no_undefined_names_or_unused_imports():
    ruff = shutil.which("ruff") or str(pathlib.Path(sys.executable).with_name("ruff"))
    if not pathlib.Path(ruff).exists():
        pytest.skip("ruff is not installed (it is in the dev extra)")
    out = subprocess.run([ruff, "check", "--select", "F,E9", "--no-cache", "toh_nb", "tests", "bench",
                          "notebooks/build.py"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
