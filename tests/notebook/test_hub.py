"""The sync facade: every public method of Hub, Job and Child; bad input; a closed hub."""

from __future__ import annotations

import asyncio
import gc
import time

import pandas as pd
import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.errors import ClosedError, JobError, SubagentError, UsageError
from toh_nb.notebook.display import AgentListing
from toh_nb.snapshots import AGENT_COLUMNS, EVENT_COLUMNS, JOB_COLUMNS, TRANSCRIPT_COLUMNS


async def reply(request: tn.ModelRequest):
    """Children labelled ``slow*`` take 30 s (until cancelled); ``nap*`` take 0.3 s; others echo."""
    label = request.label or ""
    if label.startswith("slow"):
        await asyncio.sleep(30)
    if label.startswith("nap"):
        await asyncio.sleep(0.3)
    if label.startswith("fail"):
        raise RuntimeError("the model broke")
    return f"{label or 'root'}: {request.last_user_text}"


@pytest.fixture
def hub():
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        yield hub


def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


# -- construction ----------------------------------------------------------------------------------


def test_a_hub_with_no_arguments_works_offline():
    with tn.Hub() as hub:
        assert type(hub.model).__name__ == "DemoModel"
        assert type(engine_of(hub).store).__name__ == "MemoryStore"
        result = hub.spawn("Summarise the meeting notes", label="summary")
        assert result.ok and result.text
        assert hub.loop == "portal"
        assert repr(hub) == f"Hub(root={hub.root}, model=DemoModel, loop=portal, open)"
    assert repr(hub) == f"Hub(root={hub.root}, model=DemoModel, loop=portal, closed)"


def test_the_async_hub_is_built_on_the_portal_thread(hub):
    assert hub.portal.call(lambda: engine_of(hub).root.session is not None)
    assert hub.root == "root"
    assert "<b>toh_nb Hub</b>" in hub._repr_html_()


# -- running work ----------------------------------------------------------------------------------


def test_run_gives_the_root_model_a_turn(hub):
    result = hub.run("hello there")
    assert isinstance(result, tn.RunResult)
    assert (result.text, result.stop_reason, result.agent_id) == ("root: hello there", "completed", "root")


def test_run_may_delegate_through_the_subagent_tool():
    model = tn.ScriptedModel({
        "root": [tn.ToolCall("subagent", {"description": "sum", "prompt": "add 2+2"}),
                 lambda req: f"child said {req.messages[-1].text}"],
        "sum": ["4"],
    })
    with tn.Hub(model, ids="sequential") as hub:
        result = hub.run("compute")
        assert result.text == "child said 4"
        agents = hub.agents()
        assert agents[["id", "parent", "label", "mode"]].values.tolist() == [
            ["root", None, None, "root"], ["agent-1", "root", "sum", "one-shot"]]


def test_run_timeout_aborts_the_turn():
    async def slow_root(request):
        await asyncio.sleep(30)

    with tn.Hub(tn.FunctionModel(slow_root), ids="sequential") as hub:
        started = time.monotonic()
        result = hub.run("take forever", timeout=0.2)
        assert result.stop_reason == "aborted"
        assert time.monotonic() - started < 5


def test_spawn_foreground_returns_a_run_result(hub):
    result = hub.spawn("say hi", label="greeter")
    assert (result.text, result.stop_reason, result.agent_id, result.label) == (
        "greeter: say hi", "completed", "agent-1", "greeter")
    failed = hub.spawn("x", label="fail", check=False)
    assert failed.stop_reason == "error" and failed.diagnostic == "the model broke"
    assert hub.spawn("default label please").label == "default label please"


def test_spawn_background_returns_a_job(hub):
    job = hub.spawn("crawl the site", label="nap crawl", background=True)
    assert isinstance(job, tn.Job)
    assert (job.id, job.label, job.status) == ("subagent-1", "nap crawl", "running")
    assert repr(job) == "Job(subagent-1 [running] \u2014 nap crawl)"
    assert job.output() == ""
    assert job.output(wait=True, timeout=0.01) == ""  # a wait that times out
    assert job.output(wait=True, timeout=5) == "nap crawl: crawl the site"
    assert job.status == "completed" and job.child_id == "agent-1"
    assert repr(job) == "Job(subagent-1 [completed] \u2014 nap crawl)"
    assert "<code title='subagent-1'>subagent-1</code>" in job._repr_html_() and "[completed]" in job._repr_html_()
    assert hub.job("subagent-1").output() == "nap crawl: crawl the site"


def test_background_children_progress_while_the_caller_sleeps(hub):
    job = hub.spawn("background work", label="nap worker", background=True)
    kid = hub.start("continuable work", label="nap kid")
    assert job.status == "running" and kid.status == "running"
    time.sleep(1.0)  # plain synchronous code, no hub call in between
    assert job.status == "completed"
    assert kid.status == "ready"
    assert job.output() == "nap worker: background work"


def test_job_kill(hub):
    job = hub.spawn("never ends", label="slow job", background=True)
    assert job.kill("not needed") == "requested"
    # a killed job never reads like an empty success: the foreground rendering of the aborted run
    assert job.output(wait=True, timeout=5) == ('Error: subagent run was cancelled\n'
                                                'The child\'s whole run: hub.transcript("agent-1")')
    assert job.status == "killed" and job.result().stop_reason == "aborted"
    assert job.kill() == "already-finished"
    jobs = hub.jobs()
    assert jobs.loc[0, "status"] == "killed"


def test_start_send_wait_and_transcript_of_a_child(hub):
    kid = hub.start("first task", label="nap helper")
    assert isinstance(kid, tn.Child)
    assert (kid.id, kid.label) == ("agent-1", "nap helper")
    assert kid.wait(timeout=5) == "nap helper: first task"
    assert kid.status == "ready"
    assert repr(kid) == "Child(agent-1 [ready] \u2014 nap helper)"
    message_id = kid.send("second task")
    assert message_id.startswith("msg-")
    assert kid.status == "running"
    assert kid.wait() == "nap helper: second task"
    transcript = kid.transcript(raw=True)
    assert list(transcript.columns) == TRANSCRIPT_COLUMNS
    users = transcript[transcript.kind == "user/message"].text.tolist()
    assert users == ["first task", "second task"]
    assert "<code title='agent-1'>agent-1</code>" in kid._repr_html_()
    assert hub.send(kid.id, "third task").startswith("msg-")
    assert kid.wait(timeout=5) == "nap helper: third task"


def test_child_wait_timeout_returns_while_the_child_still_runs(hub):
    kid = hub.start("forever", label="slow kid")
    started = time.monotonic()
    assert kid.wait(timeout=0.1) is None  # no closing text yet
    assert time.monotonic() - started < 2
    assert kid.status == "running"


def test_interrupt_stops_only_the_current_turn(hub):
    kid = hub.start("long job", label="slow kid")
    assert wait_until(lambda: kid.status == "running")
    kid.interrupt()
    kid.wait(timeout=5)
    assert kid.status == "ready"
    ends = kid.transcript(raw=True)
    assert ends[ends.kind == "turn/end"].text.tolist() == ["aborted"]
    hub.interrupt(kid.id)  # a settled child: an accepted no-op
    hub.interrupt("agent-99")  # unknown: an accepted no-op too


def test_hub_child_returns_a_handle_on_an_existing_child(hub):
    kid = hub.start("task", label="nap named")
    same = hub.child(kid.id)
    assert (same.id, same.label) == (kid.id, "nap named")
    with pytest.raises(UsageError, match='no continuable child "agent-42"'):
        hub.child("agent-42")


def test_list_agents_is_the_tool_text(hub):
    assert str(hub.list_agents()) == "(no subagents)"
    hub.spawn("one-shot children are not listed", label="once")
    kid = hub.start("task", label="nap lister")
    listing = hub.list_agents()
    assert isinstance(listing, AgentListing)
    assert str(listing) == repr(listing) == "agent-2 [running] \u2014 nap lister"
    assert listing[0].id == kid.id and listing[0].status == "running"
    kid.wait(timeout=5)
    descendants = hub.list_agents("descendants")
    assert str(descendants) == "agent-2 [ready] parent=root depth=1 \u2014 nap lister"
    assert str(descendants) == hub.call_tool("list_agents", scope="descendants").text
    assert "<table class='toh-agents'>" in descendants._repr_html_()


def test_call_tool_returns_exactly_what_a_model_reads(hub):
    result = hub.call_tool("subagent", description="helper", prompt="do it", run_in_background=True)
    assert (result.text, result.is_error) == ("started background subagent job subagent-1", False)
    assert result.value == {"kind": "background", "job_id": "subagent-1"}
    output = hub.call_tool("job_output", job_id="subagent-1", wait=True)
    assert output.text == "helper: do it\n[status: completed]"
    unknown = hub.call_tool("nope")
    assert (unknown.text, unknown.is_error) == ('Error: unknown tool "nope"', True)
    invalid = hub.call_tool("job_output", job_id=5)
    assert invalid.is_error and 'invalid arguments for tool "job_output": job_id' in invalid.text


def test_tables_are_dataframes_with_the_documented_columns(hub):
    hub.spawn("a", label="first")
    hub.spawn("b", label="nap bg", background=True).output(wait=True, timeout=5)
    jobs, agents, transcript, events = hub.jobs(), hub.agents(), hub.transcript("root", raw=True), hub.events()
    for frame, columns in ((jobs, JOB_COLUMNS), (agents, AGENT_COLUMNS), (transcript, TRANSCRIPT_COLUMNS),
                           (events, EVENT_COLUMNS)):
        assert isinstance(frame, pd.DataFrame)
        assert list(frame.columns) == columns
    assert jobs[["id", "label", "status", "owner"]].values.tolist() == [["subagent-1", "nap bg", "completed", "root"]]
    assert agents.id.tolist() == ["root", "agent-1", "agent-2"]
    assert agents.turns.tolist() == [0, 1, 1]
    assert transcript.empty  # the root never took a turn
    child = hub.transcript("agent-1", raw=True)
    assert child[child.kind == "user/message"].text.tolist() == ["a"]
    kinds = events.kind.tolist()
    assert kinds.count("subagent/start") == 2 and kinds.count("job/end") == 1
    assert str(events.time.dtype) == "datetime64[ns, UTC]"


def test_tree_without_the_widget_module_is_a_usage_error(hub, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "toh_nb.notebook.widget" else real(name, *a))
    with pytest.raises(UsageError, match="agent-tree widget is not available"):
        hub.tree()
    assert hub.spawn("still usable", label="x").ok


def test_tree_returns_the_agent_tree_widget_when_available(hub):
    pytest.importorskip("toh_nb.notebook.widget")
    tree = hub.tree()
    assert type(tree).__name__ == "AgentTree"
    close = getattr(tree, "close", None)
    if close is not None:
        close()


def test_repr_is_deterministic_across_runs():
    def session():
        with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
            job = hub.spawn("bg", label="nap bg", background=True)
            kid = hub.start("kid", label="nap kid")
            job.output(wait=True, timeout=5)
            kid.wait(timeout=5)
            return [repr(hub), repr(job), repr(kid), repr(hub.list_agents("descendants")),
                    repr(hub.spawn("fg", label="fg"))]

    first, second = session(), session()
    assert first == second
    assert first[1:] == ["Job(subagent-1 [completed] \u2014 nap bg)", "Child(agent-2 [ready] \u2014 nap kid)",
                         "agent-2 [ready] parent=root depth=1 \u2014 nap kid",
                         "RunResult(agent=agent-3, stop_reason=completed, text='fg: fg', tokens=0/0)"]


# -- bad input ---------------------------------------------------------------------------------------


BAD_CALLS = [
    (lambda h: h.run(""), UsageError, "prompt must not be empty"),
    (lambda h: h.run(42), UsageError, "prompt must be a string"),
    (lambda h: h.run("x", timeout=-1), UsageError, "timeout must be a non-negative number"),
    (lambda h: h.run("x", timeout="soon"), UsageError, "timeout must be"),
    (lambda h: h.spawn("  "), UsageError, "prompt must not be empty"),
    (lambda h: h.spawn("x", label=""), UsageError, "label must not be empty"),
    (lambda h: h.spawn("x", background="yes"), UsageError, "background must be True or False"),
    (lambda h: h.spawn("x", persona=3), UsageError, "persona must be a string"),
    (lambda h: h.spawn("x", tool_filter=["subagent"]), UsageError, "tool_filter must be a dict"),
    (lambda h: h.spawn("x", tool_filter={"allow": ["no_such_tool"]}), UsageError, '"no_such_tool"'),
    (lambda h: h.spawn("x", model="gpt"), UsageError, 'model "gpt" names no backend; did you mean "openai:gpt"?'),
    (lambda h: h.spawn("x", model=3), UsageError, "model must be a model object"),
    (lambda h: h.spawn("x", max_tokens=0), UsageError, "max_tokens must be an integer >= 1"),
    (lambda h: h.spawn("x", provider="teleport"), SubagentError, 'no subagent provider registered for "teleport"'),
    (lambda h: h.start(""), UsageError, "prompt must not be empty"),
    (lambda h: h.start("x", label=5), UsageError, "label must be a string"),
    (lambda h: h.start("x", tool_filter={"allow": "subagent"}), UsageError, "tool_filter['allow'] must be a list"),
    (lambda h: h.send("", "hi"), UsageError, "agent_id must not be empty"),
    (lambda h: h.send("agent-9", ""), UsageError, "message must not be empty"),
    (lambda h: h.send("agent-9", "hi"), SubagentError, 'subagent "agent-9" is unavailable'),
    (lambda h: h.interrupt(None), UsageError, "agent_id must be a string"),
    (lambda h: h.interrupt("root"), SubagentError, 'agent "root" cannot interrupt itself'),
    (lambda h: h.list_agents("everyone"), UsageError, 'scope must be "children" or "descendants"'),
    (lambda h: h.call_tool(""), UsageError, "name must not be empty"),
    (lambda h: h.transcript("agent-77"), UsageError, 'unknown agent "agent-77"'),
    (lambda h: h.transcript(""), UsageError, "agent_id must not be empty"),
    (lambda h: h.child(""), UsageError, "child_id must not be empty"),
    (lambda h: h.job("subagent-9"), JobError, "unknown job subagent-9"),
]


@pytest.mark.parametrize("bad, error, message", BAD_CALLS, ids=[m for _, _, m in BAD_CALLS])
def test_bad_input_raises_a_documented_error_naming_the_problem(hub, bad, error, message):
    assert issubclass(error, tn.TohError)
    with pytest.raises(error) as caught:
        bad(hub)
    assert message in str(caught.value)
    # the hub stays usable and its state intact
    assert hub.spawn("after the error", label="check").text == "check: after the error"
    assert hub.jobs().empty or set(hub.jobs().status) <= {"running", "completed", "killed"}


def test_bad_input_to_job_and_child_methods(hub):
    job = hub.spawn("bg", label="nap bg", background=True)
    kid = hub.start("kid", label="nap kid")
    cases = [
        (lambda: job.output(wait="yes"), "wait must be True or False"),
        (lambda: job.output(wait=True, timeout=-0.5), "timeout must be a non-negative number"),
        (lambda: job.output(timeout=float("nan")), "timeout must be a non-negative number"),
        (lambda: job.kill(reason=7), "reason must be a string or None"),
        (lambda: kid.send(""), "message must not be empty"),
        (lambda: kid.send(None), "message must be a string"),
        (lambda: kid.wait(timeout=-1), "timeout must be a non-negative number"),
    ]
    for bad, message in cases:
        with pytest.raises(UsageError, match=message.replace("(", r"\(")):
            bad()
    assert job.output(wait=True, timeout=5) == "nap bg: bg"
    assert kid.wait(timeout=5) == "nap kid: kid"


def test_hub_construction_errors_are_usage_errors():
    with pytest.raises(UsageError, match="background_mode must be"):
        tn.Hub(background_mode="sometimes")
    with pytest.raises(UsageError, match="max_depth must be an integer from 0 to 9007199254740991"):
        tn.Hub(max_depth=-1)
    with pytest.raises(UsageError, match='^model "gpt-4o" names no backend; did you mean "openai:gpt-4o"\\?'):
        tn.Hub(model="gpt-4o")
    with pytest.raises(UsageError, match="tools must be a list"):
        tn.Hub(tools="search")


# -- closing -----------------------------------------------------------------------------------------


def test_a_closed_hub_raises_closed_error_everywhere():
    hub = tn.Hub(tn.FunctionModel(reply), ids="sequential")
    job = hub.spawn("bg", label="slow bg", background=True)
    kid = hub.start("kid", label="slow kid")
    hub.close()
    assert hub.closed
    hub.close()  # idempotent
    calls = [
        lambda: hub.run("x"), lambda: hub.spawn("x"), lambda: hub.start("x", label="y"),
        lambda: hub.send(kid.id, "x"), lambda: hub.interrupt(kid.id), lambda: hub.list_agents(),
        lambda: hub.call_tool("list_agents"), lambda: hub.jobs(), lambda: hub.agents(),
        lambda: hub.transcript("root"), lambda: hub.events(), lambda: hub.tree(), lambda: hub.child(kid.id),
        lambda: hub.job(job.id), lambda: job.output(), lambda: job.kill(), lambda: kid.send("x"),
        lambda: kid.wait(), lambda: kid.interrupt(), lambda: kid.transcript(),
    ]
    for call in calls:
        with pytest.raises(ClosedError, match="this hub is closed"):
            call()
    assert job.status == "killed"  # closing stopped the running work
    assert kid.status == "ready"
    assert repr(job) == "Job(subagent-1 [killed] \u2014 slow bg)"


def test_the_context_manager_closes_the_hub():
    with tn.Hub(tn.FunctionModel(reply)) as hub:
        assert not hub.closed
    assert hub.closed
    with pytest.raises(ClosedError):
        hub.spawn("x")


def test_a_dropped_hub_is_closed_on_its_loop():
    hub = tn.Hub(tn.FunctionModel(reply), ids="sequential")
    hub.spawn("bg", label="slow bg", background=True)
    inner = hub.async_hub
    del hub
    gc.collect()
    assert wait_until(lambda: inner.closed)


def test_handles_are_accepted_wherever_an_id_is_and_kill_stops_a_child():
    import asyncio as _asyncio

    async def slow(req):
        if req.label == "slow":
            await _asyncio.Event().wait()
        return "ok"

    with tn.Hub(tn.FunctionModel(slow), ids="sequential") as hub:
        kid = hub.start("work", label="slow")
        hub.send(kid, "queued behind")          # a Child handle instead of its id
        assert "turn/start" in set(hub.transcript(kid, raw=True)["kind"])
        assert hub.child(kid).id == kid.id
        assert kid.kill() is True               # aborts the turn, drops the queue, settles
        assert kid.wait(timeout=5) is None
        assert kid.status == "ready"
        assert hub.kill(kid) is False           # nothing left to stop: an accepted no-op
        job = hub.spawn("bg", label="bg", background=True)
        assert hub.job(job.id).id == job.id
        events = hub.events()
        assert "agent/interrupt" in set(events["kind"])


def test_html_displays_show_long_ids_short_with_the_full_id_on_hover():
    with tn.Hub(tn.FunctionModel(reply)) as hub:  # uuid ids
        kid = hub.start("first task", label="nap helper")
        kid.wait(timeout=5)
        short = kid.id[:8] + "\u2026"
        assert f"<code title='{kid.id}'>{short}</code>" in kid._repr_html_()
        assert f"<code title='{kid.id}'>{short}</code>" in hub.list_agents()._repr_html_()
        assert repr(kid) == f"Child({kid.id} [ready] \u2014 nap helper)"  # text keeps the full id
        result = hub.spawn("x", label="quick")
        assert f"<code title='{result.agent_id}'>{result.agent_id[:8]}\u2026</code>" in result._repr_html_()


def test_the_store_opens_in_the_callers_thread_not_on_the_shared_loop(tmp_path, monkeypatch):
    """A slow directory scan (a network disk) delays only the cell making the hub, never other hubs."""
    import threading

    from toh_nb.store import jsonl

    threads = []
    original = jsonl.JsonlStore.__init__

    def spy(self, *args, **kwargs):
        threads.append(threading.current_thread().name)
        original(self, *args, **kwargs)

    monkeypatch.setattr(jsonl.JsonlStore, "__init__", spy)
    with tn.Hub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path)) as hub:
        assert hub.spawn("x").text == "ok"
    assert threads == [threading.current_thread().name]  # not the portal's loop thread


def test_reopening_reads_the_roots_log_in_the_callers_thread(tmp_path, monkeypatch):
    import threading

    from toh_nb.store import jsonl

    with tn.Hub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path)) as hub:
        hub.run("remember this")
        root = hub.root
    reads = []
    original = jsonl.parse_log  # every full read of a log parses it there

    def spy(data, session_id):
        reads.append((session_id, threading.current_thread().name))
        return original(data, session_id)

    monkeypatch.setattr(jsonl, "parse_log", spy)
    with tn.Hub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path)) as hub:
        assert hub.root == root
        assert hub.run("and now?").text == "ok"
    assert (root, threading.current_thread().name) in reads
    assert all(name == threading.current_thread().name for session_id, name in reads if session_id == root)
