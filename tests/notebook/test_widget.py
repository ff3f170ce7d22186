"""The agent-tree widget, tested without a browser: node states, buttons, coalescing, repr.

The engine runs on the real portal thread of a real ``tn.Hub``; the tests read the widget's model
(``tree.nodes``, traits of its ipywidgets) and click its buttons with ``Button.click()``.
"""

from __future__ import annotations

import asyncio
import threading
import time

import ipywidgets as widgets
import pytest

import toh_nb as tn
from toh_nb.notebook.widget import AgentTree, TreeNode

GATE_SECONDS = 30.0  # how long a "slow" child waits unless interrupted or killed


def wait_for(predicate, timeout: float = 5.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def labelled(request: tn.ModelRequest) -> str:
    """Children labelled ``slow…`` block (until interrupted or killed); others answer at once."""
    if request.label and request.label.startswith("slow"):
        await asyncio.sleep(GATE_SECONDS)
    return f"{request.label or 'root'} answered: {request.messages[-1].text}"


@pytest.fixture
def hub():
    h = tn.Hub(model=tn.FunctionModel(labelled), ids="sequential")
    yield h
    h.close()


@pytest.fixture
def tree(hub):
    t = hub.tree()
    yield t
    t.close()


def transcript_texts(hub, agent_id):
    frame = hub.transcript(agent_id)
    return list(zip(frame["kind"], frame["text"]))


# -- structure and node states -----------------------------------------------------------------


def test_tree_is_built_from_ipywidgets_only(tree, hub):
    assert isinstance(tree, widgets.VBox)
    assert list(tree.nodes) == ["root"]
    root = tree.nodes["root"]
    assert isinstance(root, TreeNode)
    assert root.kind == "agent" and root.mode == "root" and root.status == "idle"
    assert root.interrupt_button is None and root.send_button is None and root.kill_button is None
    assert isinstance(root.transcript_button, widgets.Button)
    assert tree.roots_box.children == (root.widget,)
    assert "root (you)" in root.info.value and "<code>root</code>" in root.info.value


def test_nodes_for_root_continuable_one_shot_and_job(tree, hub):
    before = tree.refresh_count
    kid = hub.start("research", label="researcher")
    kid.wait(timeout=5)
    res = hub.spawn("summarise", label="summary")
    assert res.text == "summary answered: summarise"
    job = hub.spawn("crawl", label="crawler", background=True)
    assert job.output(wait=True, timeout=5) == "crawler answered: crawl"

    # no manual refresh: engine events alone bring the tree up to date
    wait_for(lambda: tree.nodes.get(job.id) is not None and tree.nodes[job.id].status == "completed"
             and tree.nodes.get(job.child_id) is not None, what="live refresh after the job")
    assert tree.refresh_count > before

    nodes = tree.nodes
    assert set(nodes) == {"root", kid.id, res.agent_id, job.id, job.child_id}
    child = nodes[kid.id]
    assert (child.kind, child.label, child.mode, child.status, child.depth, child.turns) == \
        ("agent", "researcher", "continuable", "ready", 1, 1)
    assert child.parent == "root"
    assert isinstance(child.interrupt_button, widgets.Button)
    assert isinstance(child.send_text, widgets.Text) and isinstance(child.send_button, widgets.Button)
    assert child.kill_button is None
    assert child.interrupt_button.disabled  # nothing to interrupt while ready
    assert not child.send_button.disabled   # a ready child resumes on send

    one_shot = nodes[res.agent_id]
    assert (one_shot.label, one_shot.mode, one_shot.status, one_shot.parent) == \
        ("summary", "one-shot", "completed", "root")
    assert one_shot.interrupt_button is None and one_shot.send_button is None

    job_node = nodes[job.id]
    assert (job_node.kind, job_node.label, job_node.status, job_node.parent) == \
        ("job", "crawler", "completed", "root")
    assert job_node.kill_button.disabled
    # the job's child agent sits under its job, not beside it
    assert nodes[job.child_id].parent == job.id
    assert nodes[job.child_id].widget in job_node.children_box.children
    assert job_node.widget in nodes["root"].children_box.children
    assert child.widget in nodes["root"].children_box.children
    for text in ("researcher", kid.id, "continuable", "depth 1", "turns 1"):
        assert text in child.info.value
    assert "3 agents" not in tree.summary.value and "4 agents" in tree.summary.value


def test_running_child_shows_running_and_interrupt_enabled(tree, hub):
    kid = hub.start("dig", label="slow digger")
    wait_for(lambda: kid.id in tree.nodes and tree.nodes[kid.id].status == "running", what="running node")
    node = tree.nodes[kid.id]
    assert not node.interrupt_button.disabled
    assert "running" in node.info.value
    assert "1 running" in tree.summary.value
    hub.interrupt(kid.id)
    kid.wait(timeout=5)
    wait_for(lambda: tree.nodes[kid.id].status == "ready", what="ready after interrupt")


def test_expand_and_collapse(tree, hub):
    kid = hub.start("x", label="kid")
    kid.wait(timeout=5)
    tree.refresh()
    root = tree.nodes["root"]
    assert root.expanded and root.body.layout.display is None
    root.toggle.click()
    assert not root.expanded and root.body.layout.display == "none" and root.toggle.icon == "caret-right"
    tree.refresh()  # a rebuild keeps the user's choice
    assert not tree.nodes["root"].expanded
    root.toggle.click()
    assert root.expanded and root.body.layout.display is None and root.toggle.icon == "caret-down"


def test_a_node_gets_its_buttons_once_its_mode_is_known(tree, monkeypatch):
    base = {"kind": "agent", "id": "agent-7", "parent": "root", "depth": 1, "label": "late", "status": "running",
            "turns": 0, "input_tokens": 0, "output_tokens": 0, "started": 1.0, "elapsed_s": 0.0,
            "stop_reason": None, "tree_parent": "root", "can_send": False}
    root = dict(base, id="root", parent=None, depth=0, label=None, mode="root", tree_parent=None, started=0.0)
    rows = [root, dict(base, mode=None)]  # a child in its creation window: no descriptor yet
    monkeypatch.setattr(tree, "_snapshot", lambda: [dict(r) for r in rows])
    tree._rebuild()
    assert tree.nodes["agent-7"].interrupt_button is None
    tree.nodes["agent-7"].set_expanded(False)
    rows[1] = dict(base, mode="continuable", can_send=True)
    tree._rebuild()
    node = tree.nodes["agent-7"]
    assert node.interrupt_button is not None and not node.send_button.disabled
    assert not node.expanded  # the user's choice survives the rebuild
    assert tree.nodes["root"].children_box.children == (node.widget,)


# -- actions: handed to the portal, never blocking the caller -------------------------------------


def block_portal(hub, seconds: float) -> threading.Event:
    """Occupy the portal loop for ``seconds``; the event is set when it is free again."""
    free = threading.Event()

    def hog() -> None:
        time.sleep(seconds)
        free.set()

    hub.portal.submit(hog)
    return free


def test_interrupt_button_aborts_the_turn_without_blocking(tree, hub):
    kid = hub.start("dig", label="slow digger")
    wait_for(lambda: kid.id in tree.nodes and tree.nodes[kid.id].status == "running", what="running node")
    node = tree.nodes[kid.id]

    free = block_portal(hub, 0.5)
    node.interrupt_button.click()
    assert not free.is_set(), "the click waited for the busy portal loop"

    assert kid.wait(timeout=5) is None  # the aborted turn has no closing text
    wait_for(lambda: tree.last_message == f"interrupt requested for agent {kid.id}", what="interrupt reply")
    assert ("turn/end", "aborted") in transcript_texts(hub, kid.id)
    assert kid.status == "ready"
    wait_for(lambda: tree.nodes[kid.id].status == "ready", what="node ready")


def test_send_button_queues_a_new_turn(tree, hub):
    kid = hub.start("first", label="helper")
    kid.wait(timeout=5)
    tree.refresh()
    node = tree.nodes[kid.id]
    node.send_text.value = "second question"

    free = block_portal(hub, 0.5)
    node.send_button.click()
    assert not free.is_set(), "the click waited for the busy portal loop"
    assert node.send_text.value == ""  # the box is cleared for the next message

    wait_for(lambda: tree.last_message == f"message queued as the next turn for subagent {kid.id}",
             what="send reply")
    assert kid.wait(timeout=5) == "helper answered: second question"
    frame = hub.transcript(kid.id)
    users = frame[frame["kind"] == "user/message"]
    assert list(users["text"]) == ["first", "second question"]
    assert list(users["source"])[-1] == "user"
    assert list(users["turn"]) == [1, 2]
    wait_for(lambda: tree.nodes[kid.id].turns == 2, what="turn count 2 in the node")


def test_send_button_with_empty_text_sends_nothing(tree, hub):
    kid = hub.start("first", label="helper")
    kid.wait(timeout=5)
    tree.refresh()
    node = tree.nodes[kid.id]
    node.send_text.value = "   "
    node.send_button.click()
    assert tree.last_message == "Error: type a message first"
    assert list(hub.transcript(kid.id)["turn"].dropna()).count(2) == 0


def test_kill_button_ends_the_job_as_killed(tree, hub):
    job = hub.spawn("crawl forever", label="slow crawler", background=True)
    wait_for(lambda: job.id in tree.nodes, what="job node")
    node = tree.nodes[job.id]
    assert node.status == "running" and not node.kill_button.disabled

    free = block_portal(hub, 0.5)
    node.kill_button.click()
    assert not free.is_set(), "the click waited for the busy portal loop"

    assert job.output(wait=True, timeout=5) == ""
    assert job.status == "killed"
    wait_for(lambda: tree.last_message == f"requested cancellation of job {job.id}", what="kill reply")
    wait_for(lambda: tree.nodes[job.id].status == "killed", what="killed node")
    assert tree.nodes[job.id].kill_button.disabled


def test_transcript_button_renders_the_table(tree, hub):
    kid = hub.start("tell me", label="talker")
    kid.wait(timeout=5)
    tree.refresh()
    node = tree.nodes[kid.id]
    assert node.transcript.layout.display == "none"
    node.transcript_button.click()
    wait_for(lambda: "talker answered: tell me" in node.transcript.value, what="transcript html")
    assert "<table" in node.transcript.value and "user/message" in node.transcript.value
    assert node.transcript.layout.display is None and node.transcript_button.description == "Hide transcript"
    node.transcript_button.click()
    assert node.transcript.layout.display == "none" and node.transcript_button.description == "Transcript"


def test_action_errors_are_shown_not_raised(tree, hub):
    kid = hub.start("first", label="helper")
    kid.wait(timeout=5)
    tree.refresh()
    tree._interrupt("agent-99")  # unknown target: an accepted no-op in the reference
    wait_for(lambda: tree.last_message == "interrupt requested for agent agent-99", what="no-op reply")
    tree._interrupt("root")  # the user acts as root: it cannot interrupt itself
    wait_for(lambda: tree.last_message.startswith("Error: "), what="refusal")


# -- coalescing ----------------------------------------------------------------------------------


def test_a_burst_of_1000_events_gives_at_most_a_few_refreshes(tree, hub):
    runtime = hub.async_hub.runtime
    root = hub.async_hub.root_agent
    time.sleep(0.3)  # let any refresh from construction settle
    before = tree.refresh_count

    def burst() -> None:
        for i in range(500):
            runtime.bus.emit("test/burst", {"n": i}, record=False)
            for listener in list(runtime.status_listeners):
                listener(root)

    hub.portal.call(burst)
    assert tree.event_count >= 1000
    time.sleep(0.35)
    done = tree.refresh_count - before
    assert 1 <= done <= 3, done


def test_a_steady_stream_is_refreshed_at_most_ten_times_a_second(tree, hub):
    runtime = hub.async_hub.runtime
    time.sleep(0.3)
    before = tree.refresh_count

    async def stream() -> None:
        end = time.monotonic() + 0.6
        while time.monotonic() < end:
            runtime.bus.emit("test/stream", {}, record=False)
            await asyncio.sleep(0.001)

    hub.portal.call(stream)
    time.sleep(0.15)
    done = tree.refresh_count - before
    # 0.6 s of events at one refresh per 0.1 s: about 6, never one per event
    assert 3 <= done <= 8, done


def test_elapsed_times_move_while_something_runs_even_without_events(tree, hub):
    kid = hub.start("dig", label="slow digger")
    wait_for(lambda: kid.id in tree.nodes and tree.nodes[kid.id].status == "running", what="running node")
    time.sleep(0.3)  # the burst of start events is over
    count, events, elapsed = tree.refresh_count, tree.event_count, tree.nodes[kid.id].elapsed_s
    time.sleep(2.3)
    assert 2 <= tree.refresh_count - count <= 3  # one heartbeat a second, nothing more
    assert tree.nodes[kid.id].elapsed_s >= elapsed + 1.5
    assert tree.event_count - events == tree.refresh_count - count  # the heartbeats were the only events
    hub.interrupt(kid.id)
    kid.wait(timeout=5)
    time.sleep(1.3)  # a heartbeat armed while it ran may still fire once
    count = tree.refresh_count
    time.sleep(1.3)
    assert tree.refresh_count == count  # nothing runs: no more heartbeats


def test_close_unsubscribes(hub):
    tree = hub.tree()
    runtime = hub.async_hub.runtime
    assert tree._on_status in runtime.status_listeners
    tree.close()
    assert tree._on_status not in runtime.status_listeners
    count = tree.refresh_count
    kid = hub.start("after close", label="late")
    kid.wait(timeout=5)
    time.sleep(0.25)
    assert tree.refresh_count == count
    assert tree.nodes == {}
    assert tree.closed


# -- text/plain ------------------------------------------------------------------------------------


def test_repr_is_the_whole_tree_text():
    script = tn.ScriptedModel({
        "lead": [tn.ToolCall("subagent", {"description": "helper of the lead", "prompt": "help",
                                          "run_in_background": True}),
                 "lead started a helper"],
        "helper of the lead": ["helped"],
        "second": ["second done"],
    })
    with tn.Hub(model=script, ids="sequential", background_mode="continuable") as hub:
        tree = hub.tree()
        assert repr(tree) == ("agent tree: 1 agent (0 running) \u00b7 0 jobs (0 active) \u00b7 0 tokens\n"
                              "root (you) \u00b7 idle \u00b7 turns 0 \u00b7 tokens 0 in / 0 out")
        lead = hub.start("lead the work", label="lead")
        lead.wait(timeout=5)
        second = hub.start("more", label="second")
        second.wait(timeout=5)
        expected = "\n".join([
            "agent tree: 4 agents (0 running) \u00b7 0 jobs (0 active) \u00b7 0 tokens",
            "root (you) \u00b7 idle \u00b7 turns 0 \u00b7 tokens 0 in / 0 out",
            "\u251c\u2500\u2500 lead \u00b7 agent-1 \u00b7 continuable \u00b7 ready \u00b7 turns 2 \u00b7 tokens 0 in / 0 out",
            "\u2502   \u2514\u2500\u2500 helper of the lead \u00b7 agent-2 \u00b7 continuable \u00b7 ready \u00b7 turns 1 "
            "\u00b7 tokens 0 in / 0 out",
            "\u2514\u2500\u2500 second \u00b7 agent-3 \u00b7 continuable \u00b7 ready \u00b7 turns 1 \u00b7 tokens 0 in / 0 out"])
        assert repr(tree) == expected
        bundle = tree._repr_mimebundle_()
        assert bundle["text/plain"] == expected  # not cut at 110 characters like other widgets
        assert "application/vnd.jupyter.widget-view+json" in bundle
        tree.refresh()
        assert tree.nodes["agent-2"].parent == "agent-1" and tree.nodes["agent-2"].depth == 2
        # the grandchild can only be messaged by its own parent agent
        assert tree.nodes["agent-2"].send_button.disabled and not tree.nodes["agent-1"].send_button.disabled
        tree.close()


def test_accepts_an_async_hub_built_on_its_loop(hub):
    kid = hub.start("hi", label="kid")
    kid.wait(timeout=5)
    tree = hub.portal.call(lambda: AgentTree(hub.async_hub))
    try:
        assert set(tree.nodes) == {"root", kid.id}
        assert repr(tree).splitlines()[-1] == "\u2514\u2500\u2500 kid \u00b7 agent-1 \u00b7 continuable \u00b7 ready \u00b7 turns 1 \u00b7 tokens 0 in / 0 out"
        count = tree.refresh_count
        kid.send("again")
        kid.wait(timeout=5)
        wait_for(lambda: tree.refresh_count > count and tree.nodes[kid.id].turns == 2, what="live refresh")
    finally:
        hub.portal.call(tree.close)


def test_rejects_other_objects():
    with pytest.raises(tn.UsageError, match="AgentTree needs a toh_nb.Hub or AsyncHub"):
        AgentTree(object())
