"""Dependencies point one way: the engine never imports Jupyter, widgets or pandas."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1] / "toh_nb"
FORBIDDEN = re.compile(r"^\s*(import|from)\s+(ipywidgets|IPython|pandas|toh_nb\.notebook)\b", re.M)


def test_engine_packages_import_no_notebook_libraries():
    offenders = []
    for package in ("core", "models", "store", "jobs", "subagents", "acp", "ray", "mcp"):
        for path in (ROOT / package).rglob("*.py"):
            if FORBIDDEN.search(path.read_text()):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_running_the_async_engine_loads_neither_pandas_nor_widgets():
    code = (
        "import asyncio, sys\n"
        "import toh_nb as tn\n"
        "async def main():\n"
        "    async with tn.AsyncHub(tn.FunctionModel(lambda r: 'ok'), ids='sequential') as hub:\n"
        "        await hub.spawn('hello', label='x')\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in ('pandas', 'ipywidgets', 'IPython') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_core_does_not_import_model_implementations():
    """The model protocol lives in the core (``core/model.py``); ``models/`` depends on it, never back."""
    offenders = [str(path.relative_to(ROOT)) for path in (ROOT / "core").rglob("*.py")
                 if re.search(r"^\s*from\s+(\.\.models|toh_nb\.models)\b", path.read_text(), re.M)]
    assert offenders == []


def test_the_async_face_imports_no_notebook_layer():
    """hub.py returns plain rows; DataFrames, widgets and pictures are made in notebook/ (one direction)."""
    relative = re.compile(r"^\s*from\s+\.notebook\b", re.M)
    offenders = [name for name in ("hub.py", "results.py", "snapshots.py", "costs.py")
                 if FORBIDDEN.search((ROOT / name).read_text()) or relative.search((ROOT / name).read_text())]
    assert offenders == []
