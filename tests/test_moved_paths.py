"""Every module moved by issue #28 keeps its old import path for one release: importing it gives one
DeprecationWarning naming the new path, and its names are the new module's own objects."""

from __future__ import annotations

import json
import subprocess
import sys

from toh_nb._moved import MOVED, moved_text

PROBE = """
import importlib, json, warnings
import toh_nb as tn
from toh_nb._moved import MOVED
out = {}
for old, new in MOVED.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        space = {}
        exec(compile(f"import {old} as module", "<user code>", "exec"), space)
        module = space["module"]
    target = importlib.import_module(new)
    public = [n for n in dir(target) if not n.startswith("__")]
    out[old] = {"warnings": [(w.category.__name__, str(w.message), w.filename) for w in caught
                             if w.category is DeprecationWarning and "toh_nb" in str(w.message)],
                "same": all(getattr(module, n) is getattr(target, n) for n in public),
                "dir": sorted(dir(module)) == sorted(dir(target))}
import toh_nb.acp, toh_nb.ray, toh_nb.subagents.provider as old_base
out["public"] = [tn.AcpAgent is toh_nb.acp.AcpAgent, tn.RayProvider is toh_nb.ray.RayProvider,
                 tn.ChildPlan is old_base.ChildPlan]
print(json.dumps(out))
"""


def test_every_old_path_warns_once_and_forwards_to_the_new_module():
    run = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out.pop("public") == [True, True, True]
    for old in MOVED:
        entry = out[old]
        # a submodule's first import also imports its old package (which warned in its own entry)
        assert [(category, text) for category, text, _ in entry["warnings"]] == [
            ("DeprecationWarning", moved_text(old))], old
        assert entry["warnings"][0][2] == "<user code>", old  # the warning points at the importing line
        assert entry["same"] and entry["dir"], old


def test_the_warning_text():
    assert moved_text("toh_nb.acp.server") == (
        "toh_nb.acp.server moved to toh_nb.serve.acp; the old import path will be removed in the next release")
