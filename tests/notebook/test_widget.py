"""The agent-tree widget (one anywidget model), tested without a browser: rows, actions, filters,
coalescing, displays.

The engine runs on the real portal thread of a real ``tn.Hub``; the tests read the widget's synced state
(``tree.rows``, ``tree.visible``, ``tree.nodes``) and send what the page's clicks send
(``page_sends(tree, {...})``: a comm message, as the page sends it; or ``tree.act(...)``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import anywidget
import pytest
import traitlets

import toh_nb as tn
from toh_nb.testing import engine_of, page_sends
from toh_nb.core.events import StatusChanged
from toh_nb.notebook.widget import AgentTree, visible_ids

from .kernel_comms import subshell_for

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
    frame = hub.transcript(agent_id, raw=True)
    return list(zip(frame["kind"], frame["text"]))


# -- one model, rows and their actions --------------------------------------------------------------


def widget_count() -> int:
    """How many widget models (comms) exist in this process."""
    from ipywidgets.widgets.widget import _instances

    return len(_instances)


def test_the_tree_is_one_anywidget_model_whatever_its_size(hub):
    before = widget_count()
    small = hub.tree()
    per_tree = widget_count() - before
    for n in range(30):
        hub.spawn(f"task {n}", label=f"worker {n}")
    big = hub.tree()
    try:
        assert isinstance(small, anywidget.AnyWidget)
        assert len(big.rows) == 31
        assert widget_count() - before == 2 * per_tree  # 31 nodes cost what 1 node costs
        assert per_tree <= 2  # the tree and its layout
    finally:
        small.close()
        big.close()


def test_rows_for_root_continuable_one_shot_and_job(tree, hub):
    before = tree.refresh_count
    kid = hub.start("research", label="researcher")
    kid.wait(timeout=5)
    res = hub.spawn("summarise", label="summary")
    assert res.text == "summary answered: summarise"
    job = hub.spawn("crawl", label="crawler", background=True)
    assert job.output(wait=True, timeout=5) == "crawler answered: crawl"

    # no manual refresh: engine events alone bring the tree up to date
    wait_for(lambda: job.id in tree.nodes and tree.nodes[job.id].status == "completed"
             and job.child_id in tree.nodes, what="live refresh after the job")
    assert tree.refresh_count > before
    assert tree.visible == ["root", kid.id, res.agent_id, job.id, job.child_id]
    nodes = tree.nodes
    root = nodes["root"]
    assert (root.name, root.short, root.mode, root.status, root.level) == ("root (you)", "", "root", "idle", 0)
    assert not (root.can_interrupt or root.can_send or root.can_kill) and root.has_transcript
    child = nodes[kid.id]
    assert (child.kind, child.label, child.mode, child.status, child.depth, child.turns, child.parent) == \
        ("agent", "researcher", "continuable", "ready", 1, 1, "root")
    assert not child.can_interrupt  # nothing to interrupt while ready: the button is not offered
    assert child.can_send  # a ready child resumes on send
    one_shot = nodes[res.agent_id]
    assert (one_shot.label, one_shot.mode, one_shot.status, one_shot.parent) == \
        ("summary", "one-shot", "completed", "root")
    assert not one_shot.can_send and not one_shot.can_interrupt
    job_node = nodes[job.id]
    assert (job_node.kind, job_node.label, job_node.status, job_node.parent, job_node.mode) == \
        ("job", "crawler", "completed", "root", "job")
    assert not job_node.can_kill and not job_node.has_transcript
    assert nodes[job.child_id].parent == job.id  # the job's child agent sits under its job
    assert job_node.children == 1 and root.children == 3
    assert tree.summary == "4 agents (0 running) \u00b7 1 job (0 active) \u00b7 0 tokens"


def test_token_columns_carry_subtree_totals(hub):
    script = tn.ScriptedModel({
        "lead": [tn.ToolCall("subagent", {"description": "helper", "prompt": "help"}), "lead done"],
        "helper": ["helped"],
    })
    with tn.Hub(model=script, ids="sequential") as scripted:
        scripted.spawn("lead the work", label="lead")
        tree = scripted.tree()
        try:
            rows = {row["id"]: row for row in tree.rows}
            lead, helper = rows["agent-1"], rows["agent-2"]
            assert lead["own_tokens"] == lead["input_tokens"] + lead["output_tokens"]
            assert lead["subtree_tokens"] == lead["own_tokens"] + helper["own_tokens"]
            assert rows["root"]["subtree_tokens"] == sum(r["own_tokens"] for r in tree.rows)
            assert tree.summary.endswith(f"\u00b7 {rows['root']['subtree_tokens']} tokens")
        finally:
            tree.close()


def priced(request: tn.ModelRequest) -> tn.ModelResponse:
    return tn.ModelResponse(text="done", usage=tn.Usage(1000, 100))  # 0.000210 at (0.15, 0.60) per million


def test_costs_show_in_rows_header_and_static_snapshot():
    with tn.Hub(model=tn.FunctionModel(priced, name="gpt-4o-mini"), ids="sequential",
                prices={"gpt-4o-mini": (0.15, 0.60)}) as priced_hub:
        priced_hub.spawn("sum it up", label="summary")
        priced_hub.spawn("other", label="other", model=tn.FunctionModel(priced, name="unpriced"))
        tree = priced_hub.tree()
        try:
            rows = {row["id"]: row for row in tree.rows}
            assert rows["agent-1"]["extra"] == [["cost", "0.000210"], ["subtree_cost", "0.000210"]]
            assert rows["root"]["extra"] == [["cost", "0.000000"], ["subtree_cost", "0.000210"]]
            assert rows["agent-2"]["extra"] == []  # no price for its model: no cost, not zero
            assert tree.summary == "3 agents (0 running) \u00b7 0 jobs (0 active) \u00b7 2200 tokens \u00b7 cost 0.000210"
            text = tree.text().splitlines()
            assert text[2] == ("\u251c\u2500\u2500 summary \u00b7 agent-1 \u00b7 one-shot \u00b7 completed \u00b7 turns 1 "
                               "\u00b7 tokens 1000 in / 100 out \u00b7 cost 0.000210 \u00b7 subtree cost 0.000210")
            assert text[3].endswith("\u00b7 tokens 1000 in / 100 out")
            html = tree.static()["text/html"]
            assert "<th>cost</th><th>subtree cost</th>" in html and "<td>0.000210</td>" in html
        finally:
            tree.close()


def test_the_static_table_has_no_cost_columns_without_prices(tree, hub):
    hub.spawn("sum it up", label="summary")
    tree.refresh()
    assert "<th>cost</th>" not in tree.static()["text/html"]
    assert "cost" not in tree.summary


def test_a_running_child_offers_interrupt(tree, hub):
    kid = hub.start("dig", label="slow digger")
    wait_for(lambda: kid.id in tree.nodes and tree.nodes[kid.id].status == "running", what="running node")
    assert tree.nodes[kid.id].can_interrupt
    assert "(1 running)" in tree.summary
    hub.interrupt(kid.id)
    kid.wait(timeout=5)
    wait_for(lambda: tree.nodes[kid.id].status == "ready", what="ready after interrupt")
    assert not tree.nodes[kid.id].can_interrupt


# -- collapse, filter, search ------------------------------------------------------------------------


def build_family(hub):
    script = tn.ScriptedModel({
        "lead": [tn.ToolCall("subagent", {"description": "helper of the lead", "prompt": "help"}), "lead done"],
        "helper of the lead": ["helped"],
    })
    return script


def test_collapse_expand_and_collapse_finished(tree, hub):
    hub.start("x", label="kid").wait(timeout=5)
    hub.spawn("y", label="once")
    tree.refresh()
    assert tree.visible == ["root", "agent-1", "agent-2"]
    page_sends(tree, {"action": "toggle", "id": "root"})  # what the caret sends
    assert tree.collapsed == ["root"] and tree.visible == ["root"]
    tree.refresh()  # a refresh keeps the user's choice
    assert tree.visible == ["root"]
    tree.act("toggle", "root")
    assert tree.collapsed == [] and tree.visible == ["root", "agent-1", "agent-2"]
    tree.collapse_finished = True  # the root is idle (live): it stays open
    assert tree.visible == ["root", "agent-1", "agent-2"]


def test_visible_rows_rules():
    rows = [
        {"id": "root", "parent": None, "level": 0, "name": "root (you)", "label": "", "status": "idle", "children": 2},
        {"id": "agent-1", "parent": "root", "level": 1, "name": "lead", "label": "lead", "status": "completed",
         "children": 1},
        {"id": "agent-2", "parent": "agent-1", "level": 2, "name": "helper", "label": "helper", "status": "failed",
         "children": 0},
        {"id": "subagent-1", "parent": "root", "level": 1, "name": "job crawl", "label": "crawl",
         "status": "running", "children": 0},
    ]
    everything = ["root", "agent-1", "agent-2", "subagent-1"]
    assert visible_ids(rows) == everything
    assert visible_ids(rows, collapse_finished=True) == ["root", "agent-1", "subagent-1"]
    assert visible_ids(rows, collapsed=["agent-1"]) == ["root", "agent-1", "subagent-1"]
    assert visible_ids(rows, query="HELP") == ["root", "agent-1", "agent-2"]  # ancestors of a match stay
    assert visible_ids(rows, query="subagent-1") == ["root", "subagent-1"]  # ids match too
    assert visible_ids(rows, status="failed", collapsed=["agent-1"]) == ["root", "agent-1", "agent-2"]
    assert visible_ids(rows, status="running", query="crawl") == ["root", "subagent-1"]
    assert visible_ids(rows, status="killed") == []


def test_filter_and_search_state_from_the_page(tree, hub):
    hub.start("x", label="alpha").wait(timeout=5)
    hub.start("y", label="beta").wait(timeout=5)
    tree.refresh()
    tree.set_state({"query": "alp"})  # what typing in the search box syncs
    assert tree.visible == ["root", "agent-1"]
    tree.set_state({"query": "", "status_filter": "ready"})
    assert tree.visible == ["root", "agent-1", "agent-2"]
    tree.set_state({"status_filter": "running"})
    assert tree.visible == []
    with pytest.raises(traitlets.TraitError, match="'status_filter' trait of an AgentTree instance expected any of"):
        tree.status_filter = "finished"
    with pytest.raises(traitlets.TraitError, match="'view' trait of an AgentTree instance expected any of"):
        tree.view = "gantt"
    tree.view = "timeline"


# -- actions: handed to the portal, never blocking the caller -------------------------------------


def block_portal(hub, seconds: float) -> threading.Event:
    """Occupy the portal loop for ``seconds``; the event is set when it is free again."""
    free = threading.Event()

    def hog() -> None:
        time.sleep(seconds)
        free.set()

    hub.portal.submit(hog)
    return free


def test_interrupt_aborts_the_turn_without_blocking(tree, hub):
    kid = hub.start("dig", label="slow digger")
    wait_for(lambda: kid.id in tree.nodes and tree.nodes[kid.id].can_interrupt, what="running node")
    free = block_portal(hub, 0.5)
    page_sends(tree, {"action": "interrupt", "id": kid.id})
    assert not free.is_set(), "the click waited for the busy portal loop"
    assert kid.wait(timeout=5) is None  # the aborted turn has no closing text
    wait_for(lambda: tree.last_message == f"interrupt requested for agent {kid.id}", what="interrupt reply")
    assert tree.message == tree.last_message and not tree.message_error
    assert ("turn/end", "aborted") in transcript_texts(hub, kid.id)
    wait_for(lambda: tree.nodes[kid.id].status == "ready", what="node ready")


def test_send_queues_a_new_turn(tree, hub):
    kid = hub.start("first", label="helper")
    kid.wait(timeout=5)
    tree.refresh()
    free = block_portal(hub, 0.5)
    page_sends(tree, {"action": "send", "id": kid.id, "text": "second question"})
    assert not free.is_set(), "the click waited for the busy portal loop"
    wait_for(lambda: tree.last_message == f"message queued as the next turn for subagent {kid.id}",
             what="send reply")
    assert kid.wait(timeout=5) == "helper answered: second question"
    frame = hub.transcript(kid.id, raw=True)
    users = frame[frame["kind"] == "user/message"]
    assert list(users["text"]) == ["first", "second question"]
    assert list(users["source"])[-1] == "user"
    wait_for(lambda: tree.nodes[kid.id].turns == 2, what="turn count 2 in the row")


def test_send_with_empty_text_or_to_a_row_without_send_does_nothing(tree, hub):
    kid = hub.start("first", label="helper")
    kid.wait(timeout=5)
    res = hub.spawn("once", label="once")
    tree.refresh()
    tree.act("send", kid.id, "   ")
    assert tree.last_message == "Error: type a message first" and tree.message_error
    assert tree.act("send", res.agent_id, "hello") is None
    assert tree.last_message == f"Error: send is not available for {res.agent_id} [completed]"
    assert list(hub.transcript(kid.id, raw=True)["turn"].dropna()).count(2) == 0


def test_kill_ends_the_job_as_killed(tree, hub):
    job = hub.spawn("crawl forever", label="slow crawler", background=True)
    wait_for(lambda: job.id in tree.nodes and tree.nodes[job.id].can_kill, what="job row")
    free = block_portal(hub, 0.5)
    page_sends(tree, {"action": "kill", "id": job.id})
    assert not free.is_set(), "the click waited for the busy portal loop"
    # a killed job's handle says so, as a foreground delegation would, and where its run is (issue 32.3)
    assert job.output(wait=True, timeout=5) == \
        f'Error: subagent run was cancelled\nThe child\'s whole run: hub.transcript("{job.child_id}")'
    assert job.status == "killed"
    wait_for(lambda: tree.last_message == f"requested cancellation of job {job.id}", what="kill reply")
    wait_for(lambda: tree.nodes[job.id].status == "killed", what="killed row")
    assert not tree.nodes[job.id].can_kill


def test_transcript_shows_a_chat_view_that_follows_the_agent(tree, hub):
    kid = hub.start("tell me", label="talker")
    kid.wait(timeout=5)
    tree.refresh()
    tree.act("transcript", kid.id).result(5)
    assert tree.transcript == {"id": kid.id, "name": "talker", "entries": [
        {"role": "turn", "text": "turn 1"},
        {"role": "user", "text": "tell me", "source": "user"},
        {"role": "assistant", "text": "talker answered: tell me", "calls": []}]}
    kid.send("more")
    kid.wait(timeout=5)
    wait_for(lambda: len(tree.transcript["entries"]) == 6, what="the open chat view follows new turns")
    page_sends(tree, {"action": "close_transcript"})
    assert tree.transcript == {}


def test_exports_the_tree_as_json_and_a_transcript_as_markdown(tree, hub):
    kid = hub.start("tell me", label="talker")
    kid.wait(timeout=5)
    tree.refresh()
    page_sends(tree, {"action": "export"})
    sent = tree.downloads[-1]
    assert (sent["type"], sent["filename"], sent["mime"]) == ("download", "agent-tree.json", "application/json")
    data = json.loads(sent["text"])
    assert data["summary"] == tree.summary and [r["id"] for r in data["rows"]] == ["root", kid.id]
    assert tree.last_message == "exported agent-tree.json"
    tree.act("export_transcript", kid.id)
    assert tree.downloads[-1]["filename"] == f"{kid.id}.md"
    assert tree.downloads[-1]["text"] == (
        f"# talker ({kid.id})\n\n---  *turn 1*\n\n**user**: tell me\n\n**assistant**: talker answered: tell me\n")


def test_action_errors_are_shown_not_raised(tree, hub):
    kid = hub.start("first", label="helper")
    kid.wait(timeout=5)
    tree.refresh()
    page_sends(tree, {"action": "interrupt", "id": "agent-99"})
    assert tree.last_message == "Error: no row 'agent-99' in this tree" and tree.message_error
    page_sends(tree, {"action": "explode", "id": kid.id})
    assert tree.last_message.startswith("Error: unknown tree action 'explode'; expected one of interrupt, ")
    with pytest.raises(tn.UsageError, match="is a job; its transcript is its child agent's"):
        job = hub.spawn("x", label="quick", background=True)
        job.output(wait=True, timeout=5)
        tree.refresh()
        tree.act("transcript", job.id)


# -- coalescing ----------------------------------------------------------------------------------


def test_a_burst_of_1000_events_gives_at_most_a_few_refreshes(tree, hub):
    runtime = engine_of(hub).runtime
    root = engine_of(hub).root
    time.sleep(0.3)  # let any refresh from construction settle
    before = tree.refresh_count

    def burst() -> None:
        for i in range(500):
            runtime.bus.publish(StatusChanged(agent_id=root.id, status="running"))
            runtime.bus.publish(StatusChanged(agent_id=root.id, status="idle"))

    hub.portal.call(burst)
    assert tree.event_count >= 1000
    time.sleep(0.35)
    done = tree.refresh_count - before
    assert 1 <= done <= 3, done


def test_a_steady_stream_is_refreshed_at_most_ten_times_a_second(tree, hub):
    runtime = engine_of(hub).runtime
    time.sleep(0.3)
    before = tree.refresh_count

    async def stream() -> None:
        end = time.monotonic() + 0.6
        while time.monotonic() < end:
            runtime.bus.publish(StatusChanged(agent_id="root", status="idle"))
            await asyncio.sleep(0.001)

    hub.portal.call(stream)
    time.sleep(0.15)
    done = tree.refresh_count - before
    # 0.6 s of events at one refresh per 0.1 s: about 6, never one per event
    assert 3 <= done <= 8, done


def test_a_running_row_is_not_sent_again_while_only_its_time_moves(tree, hub):
    """The page counts a running row's elapsed time up from ``started``: without events nothing is
    read or sent; only ``now`` moves (the timeline's right edge), once a second."""
    kid = hub.start("dig", label="slow digger")
    wait_for(lambda: kid.id in tree.nodes and tree.nodes[kid.id].status == "running", what="running node")
    time.sleep(0.3)  # the burst of start events is over
    row = tree.nodes[kid.id]
    assert row.elapsed_s is None and row.ended is None and row.started > 0
    sent: list[dict] = []
    tree.send = lambda message, buffers=None: sent.append(message)
    count, now = tree.refresh_count, tree.now
    time.sleep(2.3)
    assert tree.refresh_count == count and sent == []
    assert tree.now >= now + 1.5
    hub.interrupt(kid.id)
    kid.wait(timeout=5)
    wait_for(lambda: tree.nodes[kid.id].status == "ready", what="ready node")
    assert tree.nodes[kid.id].elapsed_s > 0  # settled: the row says how long it ran
    time.sleep(1.3)  # a heartbeat armed while it ran may still fire once
    now = tree.now
    time.sleep(1.3)
    assert tree.now == now  # nothing runs: no more heartbeats


def test_close_unsubscribes(hub):
    tree = hub.tree()
    runtime = engine_of(hub).runtime
    assert runtime.bus.listening
    tree.close()
    assert not runtime.bus.listening  # its one subscription to the event stream is gone
    count = tree.refresh_count
    kid = hub.start("after close", label="late")
    kid.wait(timeout=5)
    time.sleep(0.25)
    assert tree.refresh_count == count
    assert list(tree.nodes) == ["root"]  # the rows stay as they were when it closed
    assert tree.closed


# -- text/plain ------------------------------------------------------------------------------------


def test_repr_is_the_whole_tree_text():
    script = tn.ScriptedModel({
        "lead": [tn.ToolCall("subagent", {"description": "helper of the lead", "prompt": "help",
                                          "run_in_background": True}),
                 "lead started a helper", "lead read the helper's report"],  # turn 2: the settlement notice
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
        # the grandchild can only be messaged by its own parent agent: no Send offered
        assert not tree.nodes["agent-2"].can_send and tree.nodes["agent-1"].can_send
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


def test_a_row_shows_its_token_budget_and_what_is_left():
    async def costly(request):
        return tn.ModelResponse(text="done", usage=tn.Usage(30, 10))

    with tn.Hub(model=tn.FunctionModel(costly), ids="sequential", token_budget=500) as hub:
        hub.spawn("work", label="capped", token_budget=100)
        tree = hub.tree()
        try:
            rows = {row["id"]: dict(row["extra"]) for row in tree.rows}
            assert rows["agent-1"] == {"token_budget": 100, "tokens_left": 60}
            assert rows["root"] == {"token_budget": 500, "tokens_left": 460}
            assert "token budget 100 \u00b7 tokens left 60" in str(tree) or "tokens left 60" in tree._repr_mimebundle_()[0]["text/plain"]
        finally:
            tree.close()


# -- clicks while a cell runs: the request/outcome protocol and the comm's routing -------------------


def outcomes_of(tree, monkeypatch) -> list[dict]:
    """The click outcomes the tree sends the page (its row deltas left out)."""
    sent: list[dict] = []
    monkeypatch.setattr(tree, "send", lambda message, buffers=None: message.get("type") == "outcome"
                        and sent.append(message))
    return sent


def test_a_click_with_a_request_number_gets_its_outcome(tree, hub, monkeypatch):
    sent = outcomes_of(tree, monkeypatch)
    kid = hub.start("dig", label="slow digger")
    wait_for(lambda: kid.id in tree.nodes and tree.nodes[kid.id].can_interrupt, what="running node")
    page_sends(tree, {"action": "interrupt", "id": kid.id, "request": 7})
    wait_for(lambda: sent, what="the outcome message")
    assert sent == [{"type": "outcome", "request": 7, "action": "interrupt", "id": kid.id,
                     "text": f"interrupt requested for agent {kid.id}", "error": False}]
    assert kid.wait(timeout=5) is None


def test_a_click_that_cannot_run_says_why_at_once(tree, hub, monkeypatch):
    sent = outcomes_of(tree, monkeypatch)
    res = hub.spawn("once", label="once")
    tree.refresh()
    page_sends(tree, {"action": "kill", "id": res.agent_id, "request": 1})
    page_sends(tree, {"action": "interrupt", "id": "agent-99", "request": 2})
    page_sends(tree, {"action": "allow", "id": "ask-9", "request": 3})
    page_sends(tree, {"action": "send", "id": res.agent_id, "text": "hi", "request": 4})
    assert sent == [
        {"type": "outcome", "request": 1, "action": "kill", "id": res.agent_id,
         "text": f"Error: kill is not available for {res.agent_id} [completed]", "error": True},
        {"type": "outcome", "request": 2, "action": "interrupt", "id": "agent-99",
         "text": "Error: no row 'agent-99' in this tree", "error": True},
        {"type": "outcome", "request": 3, "action": "allow", "id": "ask-9",
         "text": "Error: no pending permission request 'ask-9' in this tree", "error": True},
        {"type": "outcome", "request": 4, "action": "send", "id": res.agent_id,
         "text": f"Error: send is not available for {res.agent_id} [completed]", "error": True}]
    assert tree.message == f"Error: send is not available for {res.agent_id} [completed]" and tree.message_error


def test_a_click_on_a_closed_hub_is_an_error_outcome(hub, monkeypatch):
    tree = AgentTree(hub, interval=0.05)
    sent = outcomes_of(tree, monkeypatch)
    kid = hub.start("dig", label="slow digger")
    wait_for(lambda: kid.id in tree.nodes and tree.nodes[kid.id].can_interrupt, what="running node")
    hub.close()
    page_sends(tree, {"action": "interrupt", "id": kid.id, "request": 5})
    assert sent == [{"type": "outcome", "request": 5, "action": "interrupt", "id": kid.id,
                     "text": f"Error: interrupt {kid.id}: the hub is closed", "error": True}]


def test_a_click_without_a_request_number_gets_no_outcome_message(tree, hub, monkeypatch):
    sent = outcomes_of(tree, monkeypatch)
    page_sends(tree, {"action": "toggle", "id": "root"})
    page_sends(tree, {"action": "toggle", "id": "root", "request": 2})
    assert sent == [{"type": "outcome", "request": 2, "action": "toggle", "id": "root", "text": "",
                     "error": False}]


def test_the_trees_comm_keeps_the_subshell_the_front_end_chose(hub, monkeypatch):
    """ipykernel 7.4 routes a comm's incoming messages to the subshell of the request that was the parent
    of its last outgoing message; for a tree created and refreshed by a running cell that is the busy
    main shell (None), so a click waited for the cell. The tree's comm keeps the front-end's subshell."""
    ipykernel_comm = pytest.importorskip("ipykernel.comm.comm")
    import comm

    if not hasattr(ipykernel_comm.BaseComm, "_reply_subshell_for"):
        pytest.skip("this ipykernel does not re-route comm messages (< 7.4)")
    monkeypatch.setattr(comm, "create_comm", lambda **kwargs: ipykernel_comm.BaseComm(**kwargs))
    plain = ipykernel_comm.BaseComm(target_name="jupyter.widget")
    assert subshell_for(plain, "custom", "subshell-1") is None  # the kernel's routing
    tree = AgentTree(hub, interval=0.05)
    try:
        assert subshell_for(tree.comm, "custom", "subshell-1") == "subshell-1"
        assert subshell_for(tree.comm, "update", None) is None  # no subshell: the main shell
    finally:
        tree.close()


# -- how things ended: outcome marks, diagnostics, failures kept in sight ----------------------------


def failing_tree(request: tn.ModelRequest):
    """A lead delegating to two checks (``check 1`` fails); ``hold…`` blocks until interrupted."""
    label = request.label or "root"
    if label.startswith("hold"):
        return asyncio.sleep(GATE_SECONDS, result="late")
    if label == "lead" and not any(m.role == "tool" for m in request.messages):
        return [tn.ToolCall("subagent", {"description": f"check {c}", "prompt": "check"}) for c in range(2)]
    if label == "check 1":
        raise RuntimeError("the check could not reach its source")
    return f"{label}: done"


async def failing_model(request: tn.ModelRequest):
    answer = failing_tree(request)
    return await answer if asyncio.iscoroutine(answer) else answer


@pytest.fixture
def failing_hub():
    with tn.Hub(model=tn.ScriptedModel(default=failing_model), ids="sequential") as h:
        yield h


def test_rows_say_how_each_agent_ended_and_mark_the_ancestors_of_failures(failing_hub):
    hub = failing_hub
    hub.start("lead it", label="lead").wait(timeout=5)
    hold = hub.start("wait", label="hold on")
    wait_for(lambda: ("agent-4", "running") in set(zip(hub.agents()["id"], hub.agents()["status"])),
             what="hold runs")
    hold.interrupt()
    hold.wait(timeout=5)
    tree = hub.tree()
    nodes = tree.nodes
    marks = {i: (nodes[i].status, nodes[i].outcome, nodes[i].diagnostic, nodes[i].failure, nodes[i].failures_below)
             for i in ("root", "agent-1", "agent-2", "agent-3", "agent-4")}
    assert marks == {
        "root": ("idle", "", "", False, 1),
        "agent-1": ("ready", "", "", False, 1),  # the lead carried on: not a failure, one below it
        "agent-2": ("completed", "", "", False, 0),
        "agent-3": ("failed", "error", "the check could not reach its source", True, 0),
        "agent-4": ("ready", "aborted", "stopped by parent", False, 0)}  # interrupted: ready · aborted
    assert tree.text().splitlines()[1:] == [
        "root (you) \u00b7 idle \u00b7 turns 0 \u00b7 tokens 0 in / 0 out \u00b7 1 failure below",
        "\u251c\u2500\u2500 lead \u00b7 agent-1 \u00b7 continuable \u00b7 ready \u00b7 turns 1 \u00b7 tokens 0 in / 0 out "
        "\u00b7 1 failure below",
        "\u2502   \u251c\u2500\u2500 check 0 \u00b7 agent-2 \u00b7 one-shot \u00b7 completed \u00b7 turns 1 "
        "\u00b7 tokens 0 in / 0 out",
        "\u2502   \u2514\u2500\u2500 check 1 \u00b7 agent-3 \u00b7 one-shot \u00b7 failed \u00b7 error \u00b7 turns 1 "
        "\u00b7 tokens 0 in / 0 out \u00b7 diagnostic: the check could not reach its source",
        "\u2514\u2500\u2500 hold on \u00b7 agent-4 \u00b7 continuable \u00b7 ready \u00b7 aborted \u00b7 turns 1 "
        "\u00b7 tokens 0 in / 0 out \u00b7 diagnostic: stopped by parent"]
    tree.close()


def test_collapse_finished_keeps_failures_and_the_way_to_them_in_sight(failing_hub):
    hub = failing_hub
    hub.start("lead it", label="lead").wait(timeout=5)
    tree = hub.tree()
    assert tree.visible == ["root", "agent-1", "agent-2", "agent-3"] and tree.folded == []
    tree.collapse_finished = True
    # the lead (settled) folds: its finished check hides, the failed one stays under it
    assert tree.visible == ["root", "agent-1", "agent-3"] and tree.folded == ["agent-1"]  # the caret shows ▸
    tree.act("toggle", "agent-1")  # the caret of a row "collapse finished" folded opens it
    assert tree.visible == ["root", "agent-1", "agent-2", "agent-3"] and tree.folded == []
    assert tree.expanded == ["agent-1"] and tree.collapsed == []
    tree.act("toggle", "agent-1")  # and folds it again, wholly: the user's own fold hides everything
    assert tree.visible == ["root", "agent-1"] and tree.folded == ["agent-1"]
    assert tree.expanded == [] and tree.collapsed == ["agent-1"]
    tree.act("toggle", "agent-1")
    tree.collapse_finished = False
    assert tree.visible == ["root", "agent-1", "agent-2", "agent-3"] and tree.folded == []
    tree.close()


def test_visible_rows_under_a_finished_fold_are_failures_and_their_ancestors_only():
    def row(ident, parent, level, status, children=0, failure=False, below=0):
        return {"id": ident, "parent": parent, "level": level, "name": ident, "label": "", "status": status,
                "children": children, "failure": failure, "failures_below": below}

    rows = [row("root", None, 0, "idle", 2, below=1),
            row("team", "root", 1, "ready", 2, below=1),
            row("ok", "team", 2, "completed", 1),
            row("ok-check", "ok", 3, "completed"),
            row("worker", "team", 2, "completed", 2, below=1),
            row("fine", "worker", 3, "completed"),
            row("bad", "worker", 3, "failed", failure=True),
            row("done", "root", 1, "completed", 1),
            row("done-check", "done", 2, "completed")]
    assert visible_ids(rows, collapse_finished=True) == ["root", "team", "worker", "bad", "done"]
    assert visible_ids(rows, collapse_finished=True, expanded=["worker"]) == [
        "root", "team", "worker", "fine", "bad", "done"]
    assert visible_ids(rows, collapse_finished=True, expanded=["team"]) == [
        "root", "team", "ok", "worker", "bad", "done"]
    assert visible_ids(rows, collapse_finished=True, collapsed=["worker"]) == ["root", "team", "worker", "done"]
