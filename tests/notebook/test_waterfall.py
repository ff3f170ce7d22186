"""The tree's Timeline data (``tree.waterfall``): each shown agent's activations, only while the Timeline
is open, re-read only for agents that moved."""

from __future__ import annotations

import time

import toh_nb as tn
from toh_nb.notebook import waterfall
from toh_nb.notebook.widget import AgentTree


def reply(request):
    return tn.ModelResponse(text=f"{request.label or 'root'}: {request.last_user_text}", usage=tn.Usage(100, 10))


def test_the_timeline_syncs_one_activation_per_turn_with_the_idle_gap_between_them():
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        kid = hub.start("first", label="editor")
        kid.wait(timeout=5)
        time.sleep(0.3)
        kid.send("second")
        kid.wait(timeout=5)
        tree = AgentTree(hub)
        try:
            assert tree.waterfall == {}  # the Tree view: nothing read for the timeline
            tree.view = "timeline"
            tree.refresh()
            data = tree.waterfall
        finally:
            tree.close()
    assert list(data) == ["root", "agent-1"]
    assert data["root"] == []  # the root never took a turn
    first, second = data["agent-1"]
    assert [(a["turn"], a["reason"], a["input_tokens"], a["output_tokens"]) for a in (first, second)] == [
        (1, "completed", 100, 10), (2, "completed", 100, 10)]
    assert second["start"] - first["end"] >= 0.3
    assert [s["messages"] for s in second["spans"]] == [[{"role": "user", "text": "second", "tool": None},
                                                         {"role": "assistant", "text": "editor: second", "tool": None}]]


def test_a_filter_narrows_the_timeline_and_settled_agents_are_not_read_again(monkeypatch):
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        hub.spawn("a", label="alpha")
        hub.spawn("b", label="beta")
        read: list[str] = []
        inner = hub.async_hub
        original = inner.activations
        monkeypatch.setattr(inner, "activations", lambda agent_id: read.append(agent_id) or original(agent_id))
        tree = AgentTree(hub)
        try:
            tree.view = "timeline"
            tree.refresh()
            assert sorted(tree.waterfall) == ["agent-1", "agent-2", "root"]
            tree.refresh()  # nothing moved: nothing read again
            assert sorted(read) == ["agent-1", "agent-2", "root"]
            tree.query = "beta"
            tree.refresh()
            assert list(tree.waterfall) == ["root", "agent-2"]  # the match and its ancestor
        finally:
            tree.close()


def test_at_most_max_agents_are_synced(monkeypatch):
    monkeypatch.setattr(waterfall, "MAX_AGENTS", 2)
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        for label in ("a", "b", "c"):
            hub.spawn(label, label=label)
        tree = AgentTree(hub)
        try:
            tree.view = "timeline"
            tree.refresh()
            assert list(tree.waterfall) == ["root", "agent-1"]
        finally:
            tree.close()


def test_the_waterfall_is_part_of_the_widgets_module_and_style():
    assert "function makeWaterfall(model)" in AgentTree._esm
    assert AgentTree._esm.rstrip().endswith("export default { render };")
    assert ".toh-wf-tick" in AgentTree._css and ".toh-row" in AgentTree._css
