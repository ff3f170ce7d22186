"""The tree's Timeline data (``tree.waterfall``): each shown agent's activations, only while the Timeline
is open, re-read only for agents that moved."""

from __future__ import annotations

import time

import pytest

import toh_nb as tn
from toh_nb.notebook import waterfall
from toh_nb.notebook.widget import AgentTree


def reply(request):
    return tn.ModelResponse(text=f"{request.label or 'root'}: {request.last_user_text}", usage=tn.Usage(100, 10))


def test_the_timeline_syncs_one_activation_per_turn_with_the_idle_gap_between_them(monkeypatch):
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        kid = hub.start("first", label="editor")
        kid.wait(timeout=5)
        time.sleep(0.4)  # the idle gap (times are synced to the millisecond: 0.3 must survive rounding)
        kid.send("second")
        kid.wait(timeout=5)
        tree = AgentTree(hub)
        sent: list = []
        monkeypatch.setattr(tree, "send", lambda content, buffers=None: sent.append(content))
        try:
            assert tree.waterfall == {} and tree.waterfall_live == {}  # the Tree view: nothing read
            tree.view = "timeline"
            tree.refresh()
            data, live = tree.waterfall, tree.waterfall_live
            # a click on the second turn's model call: its messages come back as one message
            start = data["agent-1"][1]["spans"][0][2]
            tree.act("span", "agent-1", {"turn": 2, "start": start}).result(timeout=5)
            asked = [message for message in sent if message.get("type") == "span"]
        finally:
            tree.close()
    assert list(data) == ["root", "agent-1"] and live == {}
    assert data["root"] == []  # the root never took a turn
    first, second = data["agent-1"]
    assert [(a["turn"], a["reason"], a["input_tokens"], a["output_tokens"]) for a in (first, second)] == [
        (1, "completed", 100, 10), (2, "completed", 100, 10)]
    assert second["start"] - first["end"] >= 0.3
    # the sync carries timing (to the millisecond) and tokens, each span as a list; the messages only on a click
    assert waterfall.SPAN_FIELDS == ("kind", "name", "start", "end", "input_tokens", "output_tokens", "is_error")
    ((kind, name, begin, end, inp, out, error),) = second["spans"]
    assert (kind, name, begin, inp, out, error) == ("model", "model", start, 100, 10, False)
    assert begin == round(begin, 3) and end == round(end, 3) and second["start"] <= begin <= end <= second["end"]
    assert asked == [{"type": "span", "id": "agent-1", "turn": 2, "start": start, "messages": [
        {"role": "user", "text": "second", "tool": None}, {"role": "assistant", "text": "editor: second", "tool": None}]}]


def test_running_agents_sync_apart_from_settled_ones():
    import threading

    release = threading.Event()

    def slow(request):
        if request.label == "hold":
            release.wait(10)
        return reply(request)

    with tn.Hub(tn.FunctionModel(slow), ids="sequential") as hub:
        hub.spawn("done", label="quick")
        hold = hub.start("wait", label="hold")
        tree = AgentTree(hub)
        try:
            tree.view = "timeline"
            tree.refresh()
            settled, live = dict(tree.waterfall), dict(tree.waterfall_live)
            release.set()
            hold.wait(timeout=5)
            tree.refresh()
            after = (sorted(tree.waterfall), tree.waterfall_live)
        finally:
            tree.close()
    assert sorted(settled) == ["agent-1", "root"] and list(live) == ["agent-2"]
    (running,) = live["agent-2"]
    assert running["end"] is None and [(s[0], s[3]) for s in running["spans"]] == [("model", None)]
    assert after == (["agent-1", "agent-2", "root"], {})


def test_a_span_click_for_a_call_that_is_not_there_says_so():
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        hub.spawn("a", label="alpha")
        tree = AgentTree(hub)
        try:
            future = tree.act("span", "agent-1", {"turn": 1, "start": 0.5})
            with pytest.raises(tn.UsageError, match=r"^no call of agent-1 turn 1 started at 0\.5$"):
                future.result(timeout=5)
            with pytest.raises(tn.UsageError, match=r"^span needs \{'turn', 'start'\}, got 'x'$"):
                tree.act("span", "agent-1", "x")
        finally:
            tree.close()


def test_a_filter_narrows_the_timeline_and_settled_agents_are_not_read_again(monkeypatch):
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        hub.spawn("a", label="alpha")
        hub.spawn("b", label="beta")
        read: list[str] = []
        view_class = type(hub.async_hub.view)
        original = view_class.activations
        monkeypatch.setattr(view_class, "activations",
                            lambda self, agent_id: read.append(agent_id) or original(self, agent_id))
        tree = AgentTree(hub)
        try:
            tree.view = "timeline"
            tree.refresh()
            assert sorted(tree.waterfall) == ["agent-1", "agent-2", "root"] and tree.waterfall_live == {}
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
    with tn.Hub(tn.FunctionModel(reply)) as hub:
        tree = hub.tree()
        try:
            state = tree.get_state()  # what the page is sent: anywidget syncs the module and style
        finally:
            tree.close()
    assert "function makeWaterfall(model, rowList, storeOfModel)" in state["_esm"]
    assert state["_esm"].rstrip().endswith("export default { render };")
    assert ".toh-wf-tick" in state["_css"] and ".toh-row" in state["_css"]


def test_opening_the_timeline_after_the_run_builds_its_waterfall_without_a_new_event():
    """The Timeline opened on a tree whose agents are all settled (no event comes any more) still gets
    every activation: opening it is what asks for the waterfall, not the next engine event."""
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        kid = hub.start("a", label="k")
        kid.wait(timeout=5)
        kid.send("b")
        kid.wait(timeout=5)
        tree = AgentTree(hub)
        try:
            assert tree.waterfall == {}
            tree.view = "timeline"
            deadline = time.monotonic() + 10
            while "agent-1" not in tree.waterfall and time.monotonic() < deadline:
                time.sleep(0.02)
            assert [a["turn"] for a in tree.waterfall["agent-1"]] == [1, 2]
        finally:
            tree.close()


def test_an_agent_that_settles_sends_its_own_activations_not_the_whole_waterfall(monkeypatch):
    """The settled activations go to the page as deltas: a child that takes one more turn sends its own
    activations (and its drop while it runs), never the other agents'; a refresh where nothing moved sends
    nothing; a view that opens gets them all once."""
    import json

    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        kids = [hub.start(f"task {i}", label=f"kid {i}") for i in range(30)]
        for kid in kids:
            kid.wait(timeout=10)
            kid.send("again")
            kid.wait(timeout=10)
        tree = AgentTree(hub)
        sent: list = []
        monkeypatch.setattr(tree, "send", lambda content, buffers=None: sent.append(content))
        try:
            tree.view = "timeline"
            tree.refresh()
            (first,) = [m for m in sent if m.get("type") == "waterfall"]
            whole = len(json.dumps(first))
            sent.clear()
            tree.refresh()  # nothing moved
            assert [m for m in sent if m.get("type") == "waterfall"] == []

            kids[7].send("one more")
            kids[7].wait(timeout=10)
            tree.refresh()
            changes = [m for m in sent if m.get("type") == "waterfall"]
            sent.clear()
            tree.act("hello")
            (hello,) = [m for m in sent if m.get("type") == "waterfall"]
            settled = dict(tree.waterfall)
        finally:
            tree.close()
    assert sorted(first["set"]) == sorted(["root", *(kid.id for kid in kids)]) and first["drop"] == []
    assert changes, "the turn's activations were not sent"
    assert {key for m in changes for key in m["set"]} == {kids[7].id}
    assert {key for m in changes for key in m["drop"]} <= {kids[7].id}
    assert [a["turn"] for a in changes[-1]["set"][kids[7].id]] == [1, 2, 3]
    changed = sum(len(json.dumps(m)) for m in changes)
    assert changed * 10 < whole, (changed, whole)  # one agent of 31: its own activations, not the waterfall
    assert hello["full"] is True and hello["set"] == settled and len(settled) == 31
