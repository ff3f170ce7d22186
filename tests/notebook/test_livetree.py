"""The tree's rows kept from the event stream (``toh_nb.notebook.livetree``) and what the widget sends the
page: one agent changing sends that agent's row (and its ancestors' when their subtree figures moved),
never the whole row list; a view that opens gets every row once (``hello``); the rows kept from events
equal a full read of the hub at every point."""

from __future__ import annotations

import asyncio
import time

import pytest

import toh_nb as tn
from toh_nb.testing import page_sends
from toh_nb.notebook.livetree import LiveRows
from toh_nb.notebook.treeview import tree_rows
from toh_nb.notebook.widget import page_row, widget_rows


def wait_for(predicate, timeout: float = 5.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def counted(request: tn.ModelRequest) -> tn.ModelResponse:
    """Answers with usage (so subtree token totals move); ``slow…`` children wait to be interrupted."""
    if request.label and request.label.startswith("slow"):
        await asyncio.sleep(30)
    return tn.ModelResponse(text=f"{request.label or 'root'}: {request.messages[-1].text}", usage=tn.Usage(5, 3))


@pytest.fixture
def hub():
    h = tn.Hub(model=tn.FunctionModel(counted), ids="sequential")
    yield h
    h.close()


def rows_messages(tree) -> list[dict]:
    """Record the row deltas the tree sends the page from now on."""
    sent: list[dict] = []
    tree.send = lambda message, buffers=None: message.get("type") == "rows" and sent.append(message)
    return sent


def settled(tree) -> None:
    time.sleep(3 * tree.interval)
    wait_for(lambda: not tree.refresh_pending, what="no pending refresh")


def test_one_child_changing_sends_that_row_and_its_ancestors_figures_only(hub):
    kid = hub.start("notes", label="notes")
    kid.wait(timeout=5)
    for i in range(30):
        hub.spawn(f"task {i}", label=f"worker {i}")
    tree = hub.tree(interval=0.05)
    try:
        settled(tree)
        sent = rows_messages(tree)
        before = {row["id"]: row for row in tree.rows}
        kid.send("more")
        kid.wait(timeout=5)
        wait_for(lambda: tree.nodes[kid.id].turns == 2, what="the second turn in the row")
        settled(tree)
        assert sent, "nothing was sent"
        ids = {row["id"] for message in sent for row in message["set"]}
        assert ids == {kid.id, "root"}  # the child, and the root's subtree tokens
        assert all(message["drop"] == [] and message["order"] is None for message in sent)
        after = {row["id"]: row for row in tree.rows}
        assert after[kid.id]["turns"] == 2 and after[kid.id]["own_tokens"] == before[kid.id]["own_tokens"] + 8
        assert after["root"]["subtree_tokens"] == before["root"]["subtree_tokens"] + 8
        assert {k for k in after if after[k] != before[k]} == {kid.id, "root"}
    finally:
        tree.close()


def test_a_new_child_sends_its_row_and_the_new_order(hub):
    tree = hub.tree(interval=0.05)
    try:
        hub.spawn("first", label="first")
        wait_for(lambda: "agent-1" in tree.nodes, what="first row")
        settled(tree)
        sent = rows_messages(tree)
        hub.spawn("second", label="second")
        wait_for(lambda: "agent-2" in tree.nodes, what="second row")
        settled(tree)
        new = [row for message in sent for row in message["set"] if row["id"] == "agent-2"]
        assert new and new[-1]["name"] == "second" and new[-1]["level"] == 1
        orders = [message["order"] for message in sent if message["order"] is not None]
        assert orders[-1] == ["root", "agent-1", "agent-2"]
        assert tree.visible == ["root", "agent-1", "agent-2"]
    finally:
        tree.close()


def test_a_view_that_opens_gets_every_row_once(hub):
    hub.spawn("first", label="first")
    tree = hub.tree()
    try:
        sent = rows_messages(tree)
        page_sends(tree, {"action": "hello"})
        assert len(sent) == 1
        assert sent[0]["full"] is True and sent[0]["order"] == ["root", "agent-1"] and sent[0]["drop"] == []
        assert sent[0]["set"] == tree.rows and isinstance(sent[0]["now"], float)
    finally:
        tree.close()


def test_assigning_rows_sends_only_the_rows_that_differ(hub):
    for i in range(5):
        hub.spawn(f"task {i}", label=f"worker {i}")
    tree = hub.tree()
    try:
        sent = rows_messages(tree)
        rows = [dict(row) for row in tree.rows]
        rows[2]["status"] = "failed"
        tree.rows = rows
        assert [[row["id"] for row in message["set"]] for message in sent] == [["agent-2"]]
        assert sent[0]["drop"] == [] and sent[0]["order"] is None
        tree.rows = rows[:3]
        assert sent[-1]["set"] == [] and sent[-1]["drop"] == ["agent-3", "agent-4", "agent-5"]
        assert sent[-1]["order"] == ["root", "agent-1", "agent-2"]
    finally:
        tree.close()


def full_read(hub) -> dict:
    """The page rows of a full read (what the tree showed before it kept rows from events)."""
    return {row["id"]: row for row in widget_rows(hub.portal.call(lambda: tree_rows(hub.async_hub)))}


def test_rows_kept_from_events_equal_a_full_read_at_every_step(hub):
    live = LiveRows(hub.async_hub, page_row)
    unsubscribe = hub.portal.call(lambda: hub.async_hub.view.subscribe(live.note))
    try:
        def check(what: str) -> None:
            hub.portal.call(live.update)
            kept = {key: live.items[key] for key in live.order}
            expected = full_read(hub)
            for row in expected.values():  # a running row's time moves between the two reads
                if row["elapsed_s"] is None:
                    kept[row["id"]] = dict(kept[row["id"]], started=row["started"])
            assert list(kept) == list(expected), what
            assert kept == expected, what
            assert live.summary() == hub.portal.call(lambda: __import__(
                "toh_nb.notebook.treeview", fromlist=["summary"]).summary(tree_rows(hub.async_hub))), what

        check("the first read")
        kid = hub.start("notes", label="notes")
        kid.wait(timeout=5)
        check("a continuable child")
        hub.spawn("sum", label="summary")
        check("a one-shot child")
        job = hub.spawn("crawl", label="crawler", background=True)
        job.output(wait=True, timeout=5)
        check("a finished background job and its child")
        slow = hub.spawn("dig", label="slow digger", background=True)
        wait_for(lambda: slow.status == "running", what="running job")
        check("a running job")
        slow.kill()
        wait_for(lambda: slow.status == "killed", what="killed job")
        check("a killed job")
        hub.run("again")
        kid.send("more")
        kid.wait(timeout=5)
        check("the root and the child ran again")
        sleeper = hub.start("sleep", label="slow sleeper")
        wait_for(lambda: sleeper.status == "running", what="running child")
        check("a running child")
        hub.interrupt(sleeper)
        sleeper.wait(timeout=5)
        check("an interrupted child")
    finally:
        hub.portal.call(unsubscribe)


def test_agent_rows_of_some_agents_are_their_agents_rows_without_the_subtree_columns(hub):
    kid = hub.start("notes", label="notes")
    kid.wait(timeout=5)
    hub.run("hello")
    table = {row["id"]: row for row in hub.portal.call(hub.async_hub.agents)}
    some = hub.portal.call(lambda: hub.async_hub.view.agent_rows(["root", kid.id]))
    assert [row["id"] for row in some] == ["root", kid.id]
    for row in some:
        full = table[row["id"]]
        own = full["input_tokens"] + full["output_tokens"]
        assert row["subtree_tokens"] == own and row["tokens_left"] is None and row["subtree_cost"] == row["cost"]
        same = {k for k in full if k not in ("subtree_tokens", "tokens_left", "subtree_cost", "elapsed_s")}
        assert {k: row[k] for k in same} == {k: full[k] for k in same}
    assert table["root"]["subtree_tokens"] > some[0]["subtree_tokens"]  # the child's tokens are below it


def test_a_costly_refresh_spaces_the_next_to_keep_the_engines_share(hub):
    """After a refresh that took ``t`` on the engine's thread, the next waits ``t / LOOP_SHARE`` (never
    less than ``interval``)."""
    from toh_nb.notebook.widget import LOOP_SHARE

    tree = hub.tree(interval=0.1)
    try:
        tree.last_cost = 0.001
        assert tree.refresh_delay() == 0.1
        tree.last_cost = 0.2
        assert tree.refresh_delay() == pytest.approx(0.2 / LOOP_SHARE) and LOOP_SHARE == 0.05
    finally:
        tree.close()
