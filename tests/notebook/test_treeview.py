"""Static snapshots of the agent tree: rows, text, HTML, and what a display keeps after close()."""

from __future__ import annotations

import asyncio

import pytest

import toh_nb as tn
from toh_nb.notebook import treeview
from toh_nb.notebook.treeview import (
    display_status,
    preorder,
    static_bundle,
    tree_html,
    tree_rows,
    tree_text,
)
from toh_nb.notebook.widget import saved_snapshot


async def labelled(request: tn.ModelRequest) -> str:
    if (request.label or "").startswith("hold"):
        await asyncio.sleep(60)
    return f"{request.label or 'root'}: {request.last_user_text}"


@pytest.fixture
def hub():
    with tn.Hub(tn.FunctionModel(labelled), ids="sequential") as hub:
        yield hub


def snapshot(hub) -> list[dict]:
    return hub.portal.call(lambda: tree_rows(hub.async_hub))


def build(hub):
    hub.start("Keep notes", label="notes").wait()
    hub.spawn("Crawl the site", label="crawl", background=True).output(wait=True)
    hub.spawn("Sum it up", label="summary")


def test_rows_cover_agents_and_jobs_in_tree_order(hub):
    build(hub)
    rows = snapshot(hub)
    assert [(r["kind"], r["id"], r["tree_parent"], r["level"]) for r in rows] == [
        ("agent", "root", None, 0), ("agent", "agent-1", "root", 1), ("job", "subagent-1", "root", 1),
        ("agent", "agent-2", "subagent-1", 2), ("agent", "agent-3", "root", 1)]


def test_the_text_snapshot_is_the_whole_tree(hub):
    build(hub)
    assert tree_text(snapshot(hub)) == "\n".join([
        "agent tree: 4 agents (0 running) \u00b7 1 job (0 active) \u00b7 0 tokens",
        "root (you) \u00b7 idle \u00b7 turns 0 \u00b7 tokens 0 in / 0 out",
        "\u251c\u2500\u2500 notes \u00b7 agent-1 \u00b7 continuable \u00b7 ready \u00b7 turns 1 \u00b7 tokens 0 in / 0 out",
        "\u251c\u2500\u2500 job crawl \u00b7 subagent-1 \u00b7 completed",
        "\u2502   \u2514\u2500\u2500 crawl \u00b7 agent-2 \u00b7 one-shot \u00b7 completed \u00b7 turns 1 \u00b7 tokens 0 in / 0 out",
        "\u2514\u2500\u2500 summary \u00b7 agent-3 \u00b7 one-shot \u00b7 completed \u00b7 turns 1 \u00b7 tokens 0 in / 0 out"])


def test_the_html_snapshot_has_a_row_per_node_short_ids_and_full_ids_on_hover():
    rows = preorder([
        {"kind": "agent", "id": "0b0f6a52-5c1e-4e8e-9f0e-6f1d2f3a4b5c", "tree_parent": None, "mode": "root",
         "status": "idle", "turns": 1, "input_tokens": 5, "output_tokens": 7},
        {"kind": "job", "id": "subagent-1", "tree_parent": "0b0f6a52-5c1e-4e8e-9f0e-6f1d2f3a4b5c", "label": "crawl",
         "status": "killed", "started": 1.0}])
    page = tree_html(rows)
    assert page.count("<tr>") == 3
    assert ("<code title='0b0f6a52-5c1e-4e8e-9f0e-6f1d2f3a4b5c'>0b0f6a52\u2026</code>") in page
    assert "<td style='padding-left:0.3em;text-align:left'>root (you)</td>" in page
    assert "<td style='padding-left:1.7em;text-align:left'>job crawl</td>" in page
    assert tree_text(rows).splitlines()[1:] == [
        "root (you) \u00b7 0b0f6a52\u2026 \u00b7 idle \u00b7 turns 1 \u00b7 tokens 5 in / 7 out",
        "\u2514\u2500\u2500 job crawl \u00b7 subagent-1 \u00b7 killed"]


def test_one_status_vocabulary_for_finished_agents():
    assert [display_status({"kind": "agent", "status": "finished", "stop_reason": reason})
            for reason in ("completed", "error", "aborted", None)] == ["completed", "failed", "killed", "completed"]
    assert display_status({"kind": "job", "status": "running"}) == "running"
    assert display_status({"kind": "agent", "status": "ready"}) == "ready"


def test_columns_added_to_agent_rows_show_up_without_changes_here(monkeypatch):
    monkeypatch.setattr(treeview, "AGENT_COLUMNS", treeview.AGENT_COLUMNS + ["tokens_left"])
    rows = preorder([{"kind": "agent", "id": "root", "tree_parent": None, "mode": "root", "status": "idle",
                      "tokens_left": 900}])
    assert "<th>tokens left</th>" in tree_html(rows) and "<td>900</td>" in tree_html(rows)
    assert tree_text(rows).endswith("\u00b7 tokens left 900")


def test_abandoned_sync_calls_show_on_their_agent_only_when_there_are_some():
    rows = preorder([{"kind": "agent", "id": "root", "tree_parent": None, "mode": "root", "status": "idle",
                      "abandoned_tools": 0},
                     {"kind": "agent", "id": "agent-1", "tree_parent": "root", "mode": "one-shot",
                      "status": "finished", "stop_reason": "max-time", "abandoned_tools": 3}])
    assert tree_text(rows).splitlines()[1:] == [
        "root (you) \u00b7 idle \u00b7 turns 0 \u00b7 tokens 0 in / 0 out \u00b7 1 failure below",
        "\u2514\u2500\u2500 agent-1 \u00b7 one-shot \u00b7 completed \u00b7 max-time \u00b7 turns 0 \u00b7 tokens 0 in / 0 out "
        "\u00b7 abandoned tools 3"]
    assert "<th>abandoned tools</th>" in tree_html(rows) and "<td>3</td>" in tree_html(rows)
    assert "<th>abandoned tools</th>" not in tree_html(rows[:1])


class FakeHandle:
    def __init__(self, bundle):
        self.shown = [bundle]

    def update(self, bundle, raw=False):
        self.shown.append(bundle)


def test_a_displayed_tree_leaves_its_final_snapshot_when_closed(hub, monkeypatch):
    import IPython.display

    handles = []

    def display(bundle, raw=False, display_id=None):
        handles.append(FakeHandle(bundle))
        return handles[-1]

    monkeypatch.setattr(IPython.display, "display", display)
    tree = hub.tree()
    tree._ipython_display_()  # displayed before anything was started: the live view, then its snapshot
    view, first = handles[0].shown[0], handles[1].shown[0]
    assert set(view) == {"application/vnd.jupyter.widget-view+json", "text/html"} and view["text/html"] == ""
    assert first["text/plain"].startswith("agent tree: 1 agent (0 running)")
    build(hub)
    tree.close()
    final = handles[1].shown[-1]
    assert handles[0].shown[-1] == {"text/html": ""}  # no dead widget view: nothing
    assert final == saved_snapshot(static_bundle(snapshot(hub)))  # the static snapshot
    assert final["text/plain"].startswith("agent tree: 4 agents (0 running) \u00b7 1 job (0 active)")
    tree._ipython_display_()  # a closed tree displays its last snapshot
    assert handles[2].shown == [static_bundle(snapshot(hub))]


def test_closing_the_hub_closes_its_trees_with_their_final_snapshot():
    hub = tn.Hub(tn.FunctionModel(labelled), ids="sequential")
    tree = hub.tree()
    hub.start("Keep notes", label="notes").wait()
    hub.close()
    assert tree.closed
    assert repr(tree).splitlines()[-1] == ("\u2514\u2500\u2500 notes \u00b7 agent-1 \u00b7 continuable \u00b7 ready "
                                           "\u00b7 turns 1 \u00b7 tokens 0 in / 0 out")


def test_static_snapshots_of_big_trees_end_with_a_count_of_the_rest(monkeypatch):
    monkeypatch.setattr(treeview, "STATIC_MAX_ROWS", 3)
    rows = preorder([{"kind": "agent", "id": "root", "tree_parent": None, "mode": "root", "status": "idle"}] + [
        {"kind": "agent", "id": f"agent-{n}", "tree_parent": "root", "mode": "one-shot", "status": "completed",
         "label": f"w{n}", "started": float(n)} for n in range(1, 6)])
    lines = tree_text(rows).splitlines()
    assert len(lines) == 5 and lines[-1] == "\u2026 3 more rows (the live tree and tree.export_json() have them all)"
    assert lines[-2].startswith("\u251c\u2500\u2500 w2")  # still drawn as a middle sibling
    page = tree_html(rows)
    assert page.count("<tr>") == 4 and "\u2026 3 more rows" in page


def test_the_html_snapshot_shows_outcomes_with_their_diagnostic_on_hover_and_failures_below():
    rows = preorder([
        {"kind": "agent", "id": "root", "tree_parent": None, "mode": "root", "status": "idle"},
        {"kind": "agent", "id": "agent-1", "tree_parent": "root", "mode": "one-shot", "status": "failed",
         "stop_reason": "error", "diagnostic": "RuntimeError: <no source>\nat line 2"},
        {"kind": "agent", "id": "agent-2", "tree_parent": "root", "mode": "continuable", "status": "ready",
         "stop_reason": "completed", "denied": "rm -rf (execute)"}])
    page = tree_html(rows)
    assert ("<span class='toh-failures-below' style='color:var(--jp-error-color1, #c62828);font-size:85%'>\u26a0 1 failure below</span>"
            in page)
    assert ("<span class='toh-outcome' title='RuntimeError: &lt;no source&gt;\nat line 2' style='border:1px solid "
            "var(--jp-error-color1, #c62828);color:var(--jp-error-color1, #c62828);border-radius:8px;padding:0 6px;font-size:85%'>error</span>") in page
    assert ("<td style='text-align:left' title='RuntimeError: &lt;no source&gt;\nat line 2'>RuntimeError: "
            "&lt;no source&gt;\u2026</td>") in page and "<th>diagnostic</th>" in page
    assert "<span class='toh-outcome' style='border:1px solid var(--jp-ui-font-color2, #6d4c41);" in page  # not a failure
    assert tree_text(rows).splitlines()[1:] == [
        "root (you) \u00b7 idle \u00b7 turns 0 \u00b7 tokens 0 in / 0 out \u00b7 1 failure below",
        "\u251c\u2500\u2500 agent-1 \u00b7 one-shot \u00b7 failed \u00b7 error \u00b7 turns 0 \u00b7 tokens 0 in / 0 out "
        "\u00b7 diagnostic: RuntimeError: <no source>\u2026",
        "\u2514\u2500\u2500 agent-2 \u00b7 continuable \u00b7 ready \u00b7 permission denied \u00b7 turns 0 "
        "\u00b7 tokens 0 in / 0 out \u00b7 denied rm -rf (execute)"]
    assert "<th>diagnostic</th>" not in tree_html(rows[2:])  # no empty column


def test_a_long_diagnostic_is_cut_in_the_text_snapshot():
    assert treeview.short_diagnostic("x" * 200) == "x" * 119 + "\u2026"
    assert treeview.short_diagnostic("short") == "short"
