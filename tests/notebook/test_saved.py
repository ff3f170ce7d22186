"""A saved or exported notebook shows the tree's latest state (issue 27 §4).

The tree displays two outputs: the live view, then a static snapshot that is kept current while the
tree lives (the page hides it beside the live view). A notebook executed in a real kernel by nbclient
and exported by nbconvert, with the tree never closed, shows the snapshot of how things ended, not of
when the tree was first drawn; without a browser, the display calls are checked directly.
"""

from __future__ import annotations

import asyncio
import time
import warnings

import pytest

import toh_nb as tn
from toh_nb.notebook import widget
from toh_nb.notebook.widget import FALLBACK_CLASS, HIDE_DEAD_VIEW, WIDGET_VIEW


class Handle:
    def __init__(self, shown: list, data: dict) -> None:
        self.shown = shown
        self.data = data

    def update(self, data: dict, raw: bool = False) -> None:
        self.data = data
        self.shown.append(("update", self, data))


@pytest.fixture
def displays(monkeypatch):
    """What the tree displays (IPython's ``display`` replaced): [(kind, handle, data)]."""
    import IPython.display

    shown: list = []

    def display(data, raw=False, display_id=None):
        handle = Handle(shown, data)
        shown.append(("display", handle, data))
        return handle if display_id else None

    monkeypatch.setattr(IPython.display, "display", display)
    return shown


async def slow(request: tn.ModelRequest) -> str:
    if request.label == "slow":
        await asyncio.sleep(1.0)
    return "done"


def wait_for(predicate, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_snapshot_beside_the_live_view_follows_the_tree_and_stays_after_close(displays):
    hub = tn.Hub(tn.FunctionModel(slow), ids="sequential")
    try:
        kid = hub.start("work", label="slow")
        tree = hub.tree(interval=0.05)
        tree._ipython_display_()
        (_, view, live), (_, snapshot, first) = [entry for entry in displays if entry[0] == "display"]
        assert set(live) == {WIDGET_VIEW, "text/html"} and live["text/html"] == ""  # the view, else nothing
        assert "(1 running)" in first["text/plain"] and "slow \u00b7 agent-1 \u00b7 continuable \u00b7 running" \
            in first["text/plain"]
        assert first["text/html"].startswith(f"<div class='{FALLBACK_CLASS}'>{HIDE_DEAD_VIEW}<div class='toh-tree-static'>")
        kid.wait(timeout=10)
        wait_for(lambda: "(0 running)" in snapshot.data["text/plain"], what="the settled snapshot")
        assert "slow \u00b7 agent-1 \u00b7 continuable \u00b7 ready" in snapshot.data["text/plain"]
        assert snapshot.data["text/html"].startswith(f"<div class='{FALLBACK_CLASS}'>")
        assert view.data == live  # the live view's output was never updated (that would re-create the view)
        tree.close()
        assert view.data == {"text/html": ""} and snapshot.data == widget.saved_snapshot(tree.static())  # the final snapshot, the view's output empty
    finally:
        hub.close()


NOTEBOOK = [
    "import asyncio\nimport toh_nb as tn\n"
    "async def reply(request):\n"
    "    if request.label == 'slow':\n"
    "        await asyncio.sleep(1.5)\n"
    "    return 'done'\n"
    "hub = tn.Hub(tn.FunctionModel(reply), ids='sequential')\n"
    "kid = hub.start('work', label='slow')",
    "hub.tree()",
    "kid.wait(timeout=30)\nimport time\ntime.sleep(1)\nprint(hub.agents()[['id', 'status']].to_string())",
]


def test_an_exported_notebook_shows_how_things_ended(tmp_path):
    """Executed by nbclient (a real kernel), never closed, exported to HTML: the tree's snapshot says
    ``0 running`` and ``ready`` beside a table saying the same, not its first ``1 running``."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nbconvert = pytest.importorskip("nbconvert")
    import os
    import pathlib

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in NOTEBOOK])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    root = str(pathlib.Path(widget.__file__).resolve().parents[2])
    env_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env_path]))
    try:
        nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}},
                                store_widget_state=False).execute()
    finally:
        if env_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_path
    outputs = nb.cells[1].outputs
    assert [sorted(o.get("data", {})) for o in outputs] == [[WIDGET_VIEW, "text/html"], ["text/html", "text/plain"]]
    snapshot = outputs[1]["data"]["text/plain"]
    assert "(0 running)" in snapshot and "slow \u00b7 agent-1 \u00b7 continuable \u00b7 ready" in snapshot, snapshot
    printed = "".join(o.get("text", "") for o in nb.cells[2].outputs if o["output_type"] == "stream")
    assert "agent-1  ready" in printed, printed
    tree_only = nbformat.v4.new_notebook(cells=nb.cells[:2], metadata=nb.metadata)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every output of the tree can be represented
        nbconvert.HTMLExporter().from_notebook_node(tree_only)
    html, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    assert "2 agents (0 running)" in html and "2 agents (1 running)" not in html
