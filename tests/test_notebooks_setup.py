"""The notebook suite really compares stored outputs (strict nbval), and every tutorial cell is covered.

nbval silently skips the output comparison of a cell that was never executed in the stored notebook,
so a notebook saved without outputs would "pass" while checking nothing; the first tests guard that.
The slow test proves the strictness end to end: one changed character in a stored output fails the run.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TUTORIALS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
EXPECTED = ["01_quickstart.ipynb", "02_background_jobs.ipynb", "03_continuable_children.ipynb",
            "04_scripting_agent_trees.ipynb", "05_persistence.ipynb", "06_real_llm.ipynb", "07_local_model.ipynb",
            "08_big_trees.ipynb", "09_acp_agents.ipynb", "10_ray.ipynb", "11_tracing.ipynb",
            "12_mcp_tools.ipynb"]


def _skipped(cell) -> bool:
    return "nbval-skip" in cell.metadata.get("tags", [])


def test_the_tutorials_are_all_there():
    assert [p.name for p in TUTORIALS] == EXPECTED


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_every_tutorial_cell_was_executed_and_stored(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code" and not _skipped(c)]
    assert code, "a tutorial without code"
    unrun = [c.source.splitlines()[0] for c in code if c.execution_count is None]
    assert unrun == [], "cells without stored outputs are not compared by nbval; run notebooks/build.py"
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), "outputs must come from one clean top-to-bottom run"
    assert any(c.outputs for c in code)
    for cell in code:
        for output in cell.outputs:
            assert output.output_type != "error", f"a stored error in {cell.source.splitlines()[0]!r}"
            if output.output_type == "stream":
                assert output.name == "stdout", f"stderr stored in {cell.source.splitlines()[0]!r}: {output.text}"
    assert "widgets" not in nb.metadata, "widget state must not be stored (store_widget_state=False)"


def _run_nbval(notebook: pathlib.Path) -> subprocess.CompletedProcess:
    (notebook.parent / "pytest.ini").write_text("[pytest]\n")  # keep the repository's config out of it
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
         "--nbval-sanitize-with", str(NOTEBOOKS / "sanitize.cfg"), str(notebook)],
        cwd=notebook.parent, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.slow
def test_strict_nbval_fails_on_a_changed_output_and_passes_unchanged(tmp_path):
    source = NOTEBOOKS / "04_scripting_agent_trees.ipynb"
    nb = nbformat.read(source, as_version=4)

    good = tmp_path / "good" / source.name
    good.parent.mkdir()
    nbformat.write(nb, good)

    changed = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "stream" and "Stings and swarming." in output.text:
                output.text = output.text.replace("Stings and swarming.", "Stings and swarming!")
                changed += 1
    assert changed == 1
    bad = tmp_path / "bad" / source.name
    bad.parent.mkdir()
    nbformat.write(nb, bad)

    passed = _run_nbval(good)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert " passed" in passed.stdout and "failed" not in passed.stdout

    failed = _run_nbval(bad)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "1 failed" in failed.stdout, failed.stdout
    assert "Cell outputs differ" in failed.stdout and "mismatch 'stdout'" in failed.stdout
    assert "d swarming!" in failed.stdout  # the report shows the stored (reference) text


def test_the_replay_recording_is_stored_and_holds_no_key():
    recording = NOTEBOOKS / "recordings" / "06_real_llm.jsonl"
    lines = recording.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5
    for line in lines:
        entry = json.loads(line)
        assert entry["v"] == 1 and "response" in entry
    assert "sk-" not in recording.read_text(encoding="utf-8")
