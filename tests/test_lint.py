"""Static checks: undefined names, unused imports and syntax errors fail the suite (ruff's F and E9), and no
module of the package reaches into another object's private members (ruff's SLF001)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def ruff(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("ruff") or str(pathlib.Path(sys.executable).with_name("ruff"))
    if not pathlib.Path(exe).exists():
        pytest.skip("ruff is not installed (it is in the dev extra)")
    return subprocess.run([exe, "check", "--no-cache", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_no_undefined_names_or_unused_imports():
    out = ruff("--select", "F,E9", "toh_nb", "tests", "bench", "notebooks/build.py")
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_private_member_access_in_the_package():
    """``obj._name`` outside ``obj``'s own class fails; an exception carries ``# noqa: SLF001`` and says why."""
    out = ruff("--select", "SLF001", "toh_nb")
    assert out.returncode == 0, out.stdout + out.stderr
