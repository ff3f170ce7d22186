"""Ordinary notebook habits: re-running cells, pressing ■ (kernel interrupt), and the paper cuts."""

from __future__ import annotations

import _thread
import asyncio
import functools
import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.errors import StoreError, SubagentError, UsageError
from toh_nb.notebook.display import SendReceipt
from toh_nb.notebook.interrupts import Interrupted


async def reply(request: tn.ModelRequest):
    """``hold*`` labels (and the root when told to hold) wait until cancelled; others echo."""
    label = request.label or ""
    if label.startswith("hold") or (not label and "hold" in request.last_user_text):
        await asyncio.sleep(60)
    return f"{label or 'root'}: {request.last_user_text}"


@pytest.fixture(autouse=True)
def _sigint_raises():
    """A process started in the background by a shell (``cmd &``) inherits SIGINT ignored, and Python then
    leaves it ignored: ``_thread.interrupt_main()`` does nothing there. A kernel's ■ relies on Python's own
    handler, so these tests install it (and put back what was there)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def interrupt_when(predicate, timeout: float = 30.0) -> threading.Thread:
    """A helper thread that raises KeyboardInterrupt in the main thread once ``predicate()`` holds
    (what the kernel's ■ does)."""

    def run() -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                return
            time.sleep(0.005)
        _thread.interrupt_main()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def waiting_in_portal(hub, fn, of=None) -> bool:
    """True once the main thread blocks in a portal call of ``fn`` (a bound method or its partial);
    with ``of``, ``fn`` is a method's name and the call is that method of the async handle ``of`` names
    (a sync handle's id: its async twin has the same one)."""
    for submitted in hub.portal.waiting():
        target = submitted.func if isinstance(submitted, functools.partial) else submitted
        if of is None and target == fn:
            return True
        if of is not None and getattr(target, "__name__", None) == fn \
                and getattr(getattr(target, "__self__", None), "id", None) == of:
            return True
    return False


# -- re-running `hub = tn.Hub(store=d)` -----------------------------------------------------------


def test_a_new_hub_on_the_same_store_takes_over_from_the_previous_one(tmp_path, capsys):
    store = tmp_path / "runs"
    first = tn.Hub(tn.FunctionModel(reply), store=store, ids="sequential")
    kid = first.start("Keep notes", label="notes")
    kid.wait()
    second = tn.Hub(tn.FunctionModel(reply), store=store, ids="sequential")
    try:
        assert capsys.readouterr().out == (
            f"toh_nb: closed the previous Hub on store {store} (root root) and took it over; its continuable "
            f"children stay resumable here\n")
        assert first.closed
        assert str(second.list_agents()) == str(tn.Hub.list_agents.__doc__ and second.list_agents())
        assert [(e.id, e.status) for e in second.list_agents()] == [("agent-1", "ready")]
        second.send("agent-1", "More notes")
        assert second.child("agent-1").wait() == "notes: More notes"
    finally:
        second.close()
    assert capsys.readouterr().out == ""


def test_a_closed_or_dropped_previous_hub_is_taken_over_silently(tmp_path, capsys):
    store = tmp_path / "runs"
    tn.Hub(store=store).close()
    dropped = tn.Hub(store=store)
    del dropped
    gc.collect()
    with tn.Hub(store=store) as hub:
        assert not hub.closed
    assert capsys.readouterr().out == ""


def test_another_process_holding_the_store_is_still_refused(tmp_path):
    store = tmp_path / "runs"
    script = textwrap.dedent(f"""
        import sys, toh_nb as tn
        hub = tn.Hub(store={str(store)!r})
        print("ready", flush=True)
        sys.stdin.readline()
        hub.close()
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout.readline() == "ready\n"
        with pytest.raises(StoreError, match=f"is in use by another hub \\(pid {proc.pid}\\)"):
            tn.Hub(store=store)
    finally:
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=30)
    with tn.Hub(store=store):  # the refusal took nothing over and left no lock behind
        pass


# -- re-running `kid = hub.start(..., label=...)` --------------------------------------------------


def test_start_with_the_label_of_an_existing_child_returns_that_child(capsys):
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        kid = hub.start("Keep notes", label="hold-notes")
        again = hub.start("Keep notes", label="hold-notes")
        assert capsys.readouterr().out == (
            'toh_nb: the root already has a child labelled "hold-notes": agent-1 [running]; returned it and did '
            "not send the prompt (kid.send(...) sends more; another label starts a second child)\n")
        assert again.id == kid.id and again.label == "hold-notes"
        kid.interrupt()
        kid.wait()
        assert hub.start("Keep notes", label="hold-notes").id == "agent-1"
        assert "agent-1 [ready]" in capsys.readouterr().out
        assert [e.id for e in hub.list_agents()] == ["agent-1"]
        assert hub.agents()["turns"].tolist() == [0, 1]  # the prompt was not sent again
        assert hub.start("Keep notes", label="notes-2").id == "agent-2"
        assert hub.start("Keep notes").id == "agent-3"  # no explicit label: always a new child
        assert hub.start("Keep notes").id == "agent-4"


def test_start_with_the_label_of_a_stored_child_returns_it_after_a_restart(tmp_path, capsys):
    store = tmp_path / "runs"
    with tn.Hub(tn.FunctionModel(reply), store=store, ids="sequential") as hub:
        hub.start("Keep notes", label="notes").wait()
    with tn.Hub(tn.FunctionModel(reply), store=store, ids="sequential") as hub:
        kid = hub.start("Keep notes", label="notes")
        assert kid.id == "agent-1" and kid.status == "ready"
        kid.send("More")
        assert kid.wait() == "notes: More"
    assert capsys.readouterr().out == (
        'toh_nb: the root already has a child labelled "notes": agent-1 [ready]; returned it and did not send '
        "the prompt (kid.send(...) sends more; another label starts a second child)\n")


# -- paper cuts ------------------------------------------------------------------------------------


def test_a_label_where_an_id_belongs_says_labels_are_not_ids():
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        hub.start("a", label="researcher").wait()
        hub.start("b", label="researcher-2").wait()
        expected = ('"researcher" is a label, not an agent id; agents labelled "researcher": agent-1 '
                    '(use the Child handle, or hub.send("agent-1", ...))')
        for call in (lambda: hub.send("researcher", "hi"), lambda: hub.interrupt("researcher"),
                     lambda: hub.child("researcher"), lambda: hub.transcript("researcher")):
            with pytest.raises(UsageError) as caught:
                call()
            assert str(caught.value) == expected
        with pytest.raises(SubagentError, match='subagent "nobody" is unavailable'):
            hub.send("nobody", "hi")  # not a label either: the engine's own error


def test_job_output_with_a_timeout_but_no_wait_is_a_usage_error():
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        job = hub.spawn("x", label="quick", background=True)
        with pytest.raises(UsageError) as caught:
            job.output(timeout=1)
        assert str(caught.value) == ("timeout only applies when waiting: job.output(wait=True, timeout=1.0) "
                                     "waits up to 1.0 s; job.output() reads the result now")
        assert job.output(wait=True, timeout=30) == "quick: x"


def test_send_returns_a_displayable_receipt_that_is_the_message_id():
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        kid = hub.start("a", label="notes")
        kid.wait()
        receipt = kid.send("more")
        assert isinstance(receipt, SendReceipt) and isinstance(receipt, str)
        assert receipt == "msg-3" and receipt.message_id == "msg-3" and receipt.agent_id == "agent-1"
        assert repr(receipt) == "sent message msg-3 to agent-1"
        assert receipt._repr_html_() == ("<div class='toh-sent'>sent message <code title='msg-3'>msg-3</code> "
                                         "to <code title='agent-1'>agent-1</code></div>")
        kid.wait()
        assert repr(hub.send("agent-1", "again")) == "sent message msg-5 to agent-1"


def test_long_ids_show_short_in_a_receipt_and_full_on_hover():
    receipt = SendReceipt("0b0f6a52-5c1e-4e8e-9f0e-6f1d2f3a4b5c", "agent-1")
    assert receipt._repr_html_() == (
        "<div class='toh-sent'>sent message <code title='0b0f6a52-5c1e-4e8e-9f0e-6f1d2f3a4b5c'>0b0f6a52\u2026</code>"
        " to <code title='agent-1'>agent-1</code></div>")


# -- pressing ■ while a cell waits -------------------------------------------------------------------


def _no_portal_frames(error: BaseException) -> None:
    files = [frame.filename for frame in traceback.extract_tb(error.__traceback__)]
    assert not any(name.endswith(os.path.join("notebook", "portal.py")) for name in files), files


def test_interrupting_hub_run_aborts_the_root_turn_and_says_what_still_runs():
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        job = hub.spawn("x", label="hold-job", background=True)
        interrupt_when(lambda: waiting_in_portal(hub, hub.async_hub.run)
                       and engine_of(hub).root.status == "running")
        with pytest.raises(KeyboardInterrupt) as caught:
            hub.run("please hold")
        assert isinstance(caught.value, Interrupted)
        assert str(caught.value) == ("root turn aborted; still running: job subagent-1 "
                                     "(hub.agents() and hub.jobs() list them)")
        assert caught.value._render_traceback_() == [f"KeyboardInterrupt: {caught.value}"]
        _no_portal_frames(caught.value)
        assert hub.agents().loc[0, "stop_reason"] == "aborted"
        assert job.status == "running"


def test_interrupting_a_foreground_spawn_aborts_that_child():
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        interrupt_when(lambda: waiting_in_portal(hub, hub.async_hub.spawn)
                       and any(a.status == "running" for a in list(engine_of(hub).runtime.agents.values())))
        with pytest.raises(Interrupted) as caught:
            hub.spawn("x", label="hold-fg")
        assert str(caught.value) == "foreground child 'hold-fg' aborted; nothing else is running"
        _no_portal_frames(caught.value)


def test_interrupting_a_job_wait_leaves_the_job_running():
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        job = hub.spawn("x", label="hold-job", background=True)
        interrupt_when(lambda: waiting_in_portal(hub, "output", of=job.id))
        with pytest.raises(Interrupted) as caught:
            job.output(wait=True)
        assert str(caught.value) == "stopped waiting \u2014 job subagent-1 is still running: job.kill() stops it"
        _no_portal_frames(caught.value)
        assert job.status == "running"
        assert job.kill() == "requested"


def test_interrupting_a_child_wait_leaves_the_child_running():
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        kid = hub.start("x", label="hold-kid")
        interrupt_when(lambda: waiting_in_portal(hub, "wait", of=kid.id))
        with pytest.raises(Interrupted) as caught:
            kid.wait()
        assert str(caught.value) == "stopped waiting \u2014 agent-1 is still running: kid.interrupt() stops its turn"
        assert kid.status == "running"


def test_toh_errors_render_message_first_with_only_the_callers_frames():
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        with pytest.raises(SubagentError) as caught:
            hub.send("nobody", "hi")
    lines = caught.value._render_traceback_()
    assert lines[0] == 'SubagentError: subagent "nobody" is unavailable'
    assert lines[1].startswith("Traceback (most recent call last; ") and lines[1].endswith(" toh_nb frames hidden):")
    assert len(lines) == 3 and __file__ in lines[2] and "hub.send(\"nobody\", \"hi\")" in lines[2]
