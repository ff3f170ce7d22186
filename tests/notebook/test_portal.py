"""The portal: one loop thread per process, the submit path, the guard, KeyboardInterrupt, shutdown."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from queue import Empty, Queue

import pytest

import toh_nb as tn
from toh_nb.core.errors import ClosedError, UsageError
from toh_nb.notebook import portal as portals

from .lab import SOURCE_ROOT


async def _double(x):
    await asyncio.sleep(0)
    return 2 * x


async def _thread_name():
    return threading.current_thread().name


def test_call_runs_coroutines_and_plain_functions_on_the_loop_thread():
    portal = portals.get_portal()
    assert portal.call(_double, 21) == 42
    assert portal.call(_thread_name) == "toh_nb-portal"
    assert portal.call(lambda: threading.current_thread().name) == "toh_nb-portal"
    assert portals.call(_double, 2) == 4
    assert portals.get_portal() is portal  # one portal per process, reused


def test_errors_raised_on_the_loop_reach_the_caller_unchanged():
    async def boom():
        raise KeyError("missing thing")

    with pytest.raises(KeyError, match="missing thing"):
        portals.call(boom)
    with pytest.raises(ZeroDivisionError):
        portals.call(lambda: 1 / 0)
    assert portals.call(_double, 1) == 2  # still serving


def test_work_cancelled_on_the_loop_by_something_else_is_a_toh_error_never_a_bare_cancelled_error():
    async def cancelled_elsewhere():
        asyncio.current_task().cancel()  # as a close or an internal stop would
        await asyncio.sleep(0)

    with pytest.raises(tn.TohError) as caught:
        portals.call(cancelled_elsewhere)
    assert not isinstance(caught.value, asyncio.CancelledError)
    assert str(caught.value) == ("the call cancelled_elsewhere() was cancelled on the hub's event loop before it "
                                 "finished; what it started may still be running (see hub.agents())")
    assert portals.call(_double, 1) == 2  # still serving


def test_a_call_from_the_portal_thread_raises_usage_error_instead_of_deadlocking():
    portal = portals.get_portal()

    def nested():
        return portal.call(_double, 1)

    started = time.monotonic()
    with pytest.raises(UsageError, match="portal's own event-loop thread"):
        portal.call(nested)
    assert time.monotonic() - started < 2
    assert portal.call(_double, 3) == 6


def test_a_model_function_calling_the_sync_hub_gets_the_guard_error_as_its_diagnostic():
    holder = {}

    async def reply(request):  # async model functions run on the portal's loop thread
        if request.label == "inner":
            holder["hub"].list_agents()  # sync facade from the loop thread
        return "unreachable"

    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        holder["hub"] = hub
        result = hub.spawn("list yourself", label="inner", check=False)
        assert result.stop_reason == "error"
        assert "portal's own event-loop thread" in result.diagnostic
        assert "hub.async_hub" in result.diagnostic
        assert hub.spawn("still fine", label="other").text == "unreachable"  # the hub stays usable
        assert str(hub.list_agents()) == "(no subagents)"


def test_a_sync_model_function_runs_in_a_worker_thread_and_may_use_the_sync_hub():
    holder = {}

    def reply(request):
        if request.label == "inner":
            return str(holder["hub"].list_agents())  # a worker thread, not the loop: no deadlock, no guard
        return "other"

    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        holder["hub"] = hub
        assert hub.spawn("list yourself", label="inner").text == "(no subagents)"


def test_calls_from_several_plain_threads():
    with tn.Hub(tn.FunctionModel(lambda r: f"echo {r.last_user_text}"), ids="sequential") as hub:
        def work(n):
            values = [portals.call(_double, n * 100 + i) for i in range(50)]
            result = hub.spawn(f"task {n}", label=f"worker {n}")
            return values, result.text

        with ThreadPoolExecutor(max_workers=8) as pool:
            outcomes = list(pool.map(work, range(8)))
        for n, (values, text) in enumerate(outcomes):
            assert values == [2 * (n * 100 + i) for i in range(50)]
            assert text == f"echo task {n}"
        assert len(hub.agents()) == 9  # root + 8 children


def test_a_sync_hub_call_works_inside_a_running_event_loop(monkeypatch):
    """The notebook-cell situation: the caller's thread already runs an event loop. Outside a kernel that
    loop stands still meanwhile, which one RuntimeWarning says (``tests/notebook/test_blocking.py``)."""
    from toh_nb.notebook import blocking

    monkeypatch.setattr(blocking, "_decided", False)

    async def cell():
        asyncio.get_running_loop()  # we are inside a running loop
        with tn.Hub(tn.FunctionModel(lambda r: "inside"), ids="sequential") as hub:
            result = hub.spawn("hello", label="greeter")
            job = hub.spawn("bg", label="bg", background=True)
            return result.text, job.output(wait=True, timeout=5), job.status

    with pytest.warns(RuntimeWarning, match="^tn.Hub blocks this thread's running asyncio event loop"):
        assert asyncio.run(cell()) == ("inside", "inside", "completed")


def test_submit_does_not_block_and_returns_a_future():
    gate = threading.Event()

    async def slow():
        await asyncio.to_thread(gate.wait, 5)
        return "released"

    future = portals.submit(slow)
    assert not future.done()
    gate.set()
    assert future.result(timeout=5) == "released"
    with pytest.raises(ValueError):
        portals.submit(lambda: int("x")).result(timeout=5)


def test_wait_hooks_run_on_the_waiting_thread_while_a_call_blocks(monkeypatch, caplog):
    """``on_wait`` hooks run every POLL seconds on the thread that waits (the tree's clicks on ipykernel 6);
    a failing hook is logged and the call still returns its value; a hook is registered once."""
    monkeypatch.setattr(portals, "_WAIT_HOOKS", [])
    seen: list[str] = []

    def hook():
        seen.append(threading.current_thread().name)

    def broken():
        raise RuntimeError("hook trouble")

    portals.on_wait(hook)
    portals.on_wait(hook)
    portals.on_wait(broken)
    assert portals.wait_hooks() == [hook, broken]

    async def slow():
        await asyncio.sleep(5 * portals.POLL)
        return "done"

    with caplog.at_level("ERROR", logger="toh_nb"):
        assert portals.call(slow) == "done"
    assert len(seen) >= 3 and set(seen) == {threading.current_thread().name}
    assert "a portal wait hook failed" in caplog.text and "hook trouble" in caplog.text
    seen.clear()
    assert portals.call(_double, 2) == 4  # a quick call does not wait POLL seconds: no hook runs
    assert seen == []


def test_a_private_portal_stops_cleanly_and_refuses_calls_afterwards():
    portal = portals.Portal(name="toh_nb-test-portal")
    assert portal.call(_thread_name) == "toh_nb-test-portal"
    cancelled = threading.Event()

    async def forever():
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    outcome = {}

    def waiter():
        try:
            portal.call(forever)
        except BaseException as error:  # noqa: BLE001 - recorded for the assertion
            outcome["error"] = error

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.1)
    closed = []
    portal.register_closer(1, lambda: closed.append("closed"))
    portal.stop()
    thread.join(5)
    assert not portal.thread.is_alive()
    assert portal.loop.is_closed()
    assert closed == ["closed"]
    assert cancelled.is_set()
    assert isinstance(outcome["error"], ClosedError)
    assert "stopped while this call was running" in str(outcome["error"])
    with pytest.raises(ClosedError, match="portal loop is stopped"):
        portal.call(_double, 1)
    portal.stop()  # idempotent


def test_module_stop_closes_open_hubs_and_a_later_call_starts_a_fresh_portal():
    hub = tn.Hub(tn.FunctionModel(lambda r: "ok"), ids="sequential")
    old = portals.get_portal()
    portals.stop()
    assert not old.thread.is_alive()
    assert hub.async_hub.closed  # closed by the portal's shutdown
    with pytest.raises(ClosedError):
        hub.spawn("x", label="y")
    hub.close()  # still fine
    fresh = portals.get_portal()
    assert fresh is not old and fresh.call(_double, 5) == 10


def test_the_last_hub_to_close_stops_the_portal_thread():
    portals.stop()  # start from a fresh portal whatever earlier tests left behind
    first = tn.Hub(tn.FunctionModel(lambda r: "ok"))
    second = tn.Hub(tn.FunctionModel(lambda r: "ok"))
    portal = first.portal
    assert second.portal is portal and portal.users == 2
    first.close()
    assert portal.running and portal.thread.is_alive()
    assert second.spawn("x", label="y").text == "ok"
    second.close()
    assert not portal.running
    assert not portal.thread.is_alive()
    with tn.Hub(tn.FunctionModel(lambda r: "again")) as third:  # a new portal starts on demand
        assert third.portal is not portal
        assert third.spawn("x", label="y").text == "again"


def test_a_hub_that_fails_to_build_does_not_keep_the_portal_in_use():
    portals.stop()
    with pytest.raises(UsageError, match="ids must be"):
        tn.Hub(ids="random")
    portal = portals.current_portal()
    assert portal is None or portal.users == 0


SIGINT_SCRIPT = textwrap.dedent('''
    import asyncio, json, sys, time
    import toh_nb as tn
    from toh_nb.notebook import portal as portals

    def mark(text):
        print(text, flush=True)

    # 1. a raw portal call: the coroutine on the loop is cancelled
    seen = []
    async def slow_call():
        mark("READY call")
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
    started = time.monotonic()
    try:
        portals.call(slow_call)
    except KeyboardInterrupt:
        mark("INTERRUPTED call " + json.dumps({"seen": seen, "fast": time.monotonic() - started < 10}))

    # 2. a foreground hub.spawn: the child is aborted, the hub stays usable
    async def reply(request):
        if request.label == "slow":
            mark("READY spawn")
            await asyncio.sleep(30)
        return "quick answer"
    hub = tn.Hub(tn.FunctionModel(reply), ids="sequential")
    try:
        hub.spawn("take your time", label="slow")
    except KeyboardInterrupt:
        agents = hub.agents()
        child = agents[agents.label == "slow"].iloc[0]
        ends = hub.transcript(child.id, raw=True)
        ends = ends[ends.kind == "turn/end"].text.tolist()
        mark("INTERRUPTED spawn " + json.dumps({"id": child.id, "stop_reason": child.stop_reason,
                                                "turn_ends": ends, "status": child.status}))
    mark("AFTER " + hub.spawn("again", label="fast").text)

    # 3. waiting for a background job: the wait is cancelled, the job is not
    async def reply_bg(request):
        if request.label == "bg":
            mark("READY job")
            await asyncio.sleep(1.0)
        return "job result"
    hub2 = tn.Hub(tn.FunctionModel(reply_bg), ids="sequential")
    job = hub2.spawn("background work", label="bg", background=True)
    try:
        job.output(wait=True)
    except KeyboardInterrupt:
        mark("INTERRUPTED job " + job.status)
    mark("JOB " + job.output(wait=True, timeout=10) + " " + job.status)
    hub.close()
    hub2.close()
    mark("DONE")
''')


@pytest.mark.slow
def test_keyboard_interrupt_cancels_the_waiting_call_and_reraises(tmp_path):
    script = tmp_path / "interrupt.py"
    script.write_text(SIGINT_SCRIPT)
    lines: list[str] = []
    with subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, cwd=str(tmp_path)) as proc:
        queue: Queue = Queue()
        threading.Thread(target=lambda: [queue.put(x) for x in iter(proc.stdout.readline, "")] + [queue.put("")],
                         daemon=True).start()
        deadline = time.monotonic() + 20
        try:
            while time.monotonic() < deadline:
                try:
                    line = queue.get(timeout=max(0.01, deadline - time.monotonic()))
                except Empty:
                    break
                if not line:
                    break
                line = line.rstrip("\n")
                lines.append(line)
                if line.startswith("READY"):
                    time.sleep(0.2)  # let the waiting caller settle into its wait
                    proc.send_signal(signal.SIGINT)
                if line == "DONE":
                    break
            proc.wait(timeout=max(1, deadline - time.monotonic()))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stderr = proc.stderr.read()
    assert proc.returncode == 0, (lines, stderr)
    by_tag = {line.split(" ", 2)[1]: line.split(" ", 2)[2] for line in lines if line.startswith("INTERRUPTED")}
    assert json.loads(by_tag["call"]) == {"seen": ["cancelled"], "fast": True}
    spawn = json.loads(by_tag["spawn"])
    assert spawn == {"id": "agent-1", "stop_reason": "aborted", "turn_ends": ["aborted"], "status": "killed"}
    assert "AFTER quick answer" in lines
    assert by_tag["job"] == "running"
    assert "JOB job result completed" in lines
    assert lines[-1] == "DONE"
    assert "Traceback" not in stderr


KERNEL_MODE_SCRIPT = textwrap.dedent('''
    import asyncio, threading
    import toh_nb as tn

    def reply(request):
        return "kernel-mode " + request.last_user_text

    async def cell():
        hub = tn.Hub(tn.FunctionModel(reply), ids="sequential", loop="kernel")
        print(repr(hub))
        print(hub.spawn("hello", label="greeter").text)
        job = hub.spawn("bg", label="bg", background=True)
        print(job.output(wait=True, timeout=5), job.status)
        print(str(hub.list_agents()))
        print(len(hub.agents()))
        handed = []  # a widget click arrives on a kernel subshell's thread: the work must still run on the loop
        other = threading.Thread(target=lambda: handed.append(hub.portal.submit(
            lambda: threading.current_thread() is threading.main_thread())))
        other.start()
        other.join()
        await asyncio.sleep(0.05)
        print("submitted from another thread, ran on the loop's thread:", handed[0].result(timeout=1))
        hub.close()
        print("portal threads:", [t.name for t in threading.enumerate() if t.name.startswith("toh_nb-portal")])

    asyncio.run(cell())
    hub = tn.Hub(tn.FunctionModel(reply), loop="kernel")  # no running loop: it makes one
    print(hub.spawn("plain", label="p").text)
    hub.close()
''')


@pytest.mark.slow
def test_kernel_loop_mode_runs_on_the_callers_own_loop(tmp_path):
    script = tmp_path / "kernel_mode.py"
    script.write_text(KERNEL_MODE_SCRIPT)
    # the script imports this checkout's toh_nb, not whichever one the venv has installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Hub(root=root, model=FunctionModel, loop=kernel, open)",
        "kernel-mode hello",
        "kernel-mode bg completed",
        "(no subagents)",
        "3",
        "submitted from another thread, ran on the loop's thread: True",
        "portal threads: []",
        "kernel-mode plain",
    ]


def test_loop_mode_is_validated():
    with pytest.raises(UsageError, match='loop must be "portal" or "kernel"'):
        tn.Hub(loop="uvloop")


def test_submit_path_starts_no_thread_per_call(monkeypatch):
    """Speed is measured in bench/facade.py; here only the structure: calls reuse the portal thread."""
    portal = portals.get_portal()
    portal.call(_double, 1)
    started = []
    original = threading.Thread.start

    def counting_start(self, *args, **kwargs):
        started.append(self.name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(threading.Thread, "start", counting_start)
    for _ in range(500):
        assert portal.call(_double, 1) == 2
    assert started == []
    assert portals.get_portal() is portal


EXIT_SCRIPT = textwrap.dedent('''
    import asyncio, sys
    import toh_nb as tn

    async def reply(request):
        if request.label == "slow":
            await asyncio.sleep(30)
        return "ok"

    hub = tn.Hub(tn.FunctionModel(reply), ids="sequential", store=sys.argv[1])
    kid = hub.start("work for a long time", label="slow")
    job = hub.spawn("background", label="slow", background=True)
    print(kid.id, kid.status, job.status, flush=True)
    # no hub.close(): the interpreter exits with work running on the portal
''')


@pytest.mark.slow
def test_interpreter_exit_stops_the_portal_cleanly_and_closes_open_hubs(tmp_path):
    script = tmp_path / "leave.py"
    script.write_text(EXIT_SCRIPT)
    runs = tmp_path / "runs"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-W", "error", str(script), str(runs)], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "agent-1 running running\n"
    assert done.stderr == ""  # no "Task was destroyed but it is pending", no thread tracebacks
    assert time.monotonic() - started < 15
    # the hub was closed on the way out: the child's turn ended "aborted" (a crash would leave it open,
    # and reopening would repair it as "interrupted")
    with tn.Hub(tn.FunctionModel(lambda r: "resumed"), ids="sequential", store=str(runs)) as hub:
        assert str(hub.list_agents()) == "agent-1 [ready] \u2014 slow"
        transcript = hub.transcript("agent-1", raw=True)
        assert transcript[transcript.kind == "turn/end"].text.tolist() == ["aborted"]
