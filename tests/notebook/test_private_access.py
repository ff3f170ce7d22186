"""The notebook layer reaches the engine only through public names (ruff's SLF001 on toh_nb/notebook/)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_notebook_layer_uses_no_private_members_of_other_objects():
    ruff = shutil.which("ruff") or str(pathlib.Path(sys.executable).with_name("ruff"))
    if not pathlib.Path(ruff).exists():
        pytest.skip("ruff is not installed (it is in the dev extra)")
    out = subprocess.run([ruff, "check", "--select", "SLF001", "--no-cache", "toh_nb/notebook"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
