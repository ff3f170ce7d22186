"""Where the tree's clicks are handled while a cell runs (:mod:`toh_nb.notebook.kernel_routing`).

The unit tests check :func:`route`'s rule without a kernel. The kernel test starts a real ipykernel with
``jupyter_client`` (this checkout on its ``PYTHONPATH``) and speaks the plain protocol, like a front-end
without subshells (VS Code, ``commsOverSubshells`` off): the tree's comm messages go on the main shell
with no ``subshell_id``. A click sent while a cell blocks (in ``input()`` and then in ``kid.wait()``)
must take effect before the cell ends; an ``execute_request`` sent meanwhile must run after it, in order;
``input()`` still gets its answer; with ``TOH_NB_BUSY_CLICKS=off`` the click waits for the cell.
"""

from __future__ import annotations

import json
import os
import pathlib
import queue
import subprocess
import threading
import time

import pytest

import toh_nb as tn
from toh_nb.notebook import kernel_adapter, kernel_routing
from toh_nb.notebook.widget import AgentTree

from .. import real_parts
from .kernel_comms import subshell_for

SOURCE_ROOT = pathlib.Path(__file__).resolve().parents[2]


# -- the rule, without a kernel ------------------------------------------------------------------


@pytest.fixture
def routing(monkeypatch):
    """The module's state as a kernel with a cell running and our subshell ``ours`` would have it."""
    state = kernel_routing._State()  # noqa: SLF001 - kernel_routing.py is not ours to change now (issue 43's kernel adapter)
    state.cell_running, state.subshell_id = True, "ours"
    monkeypatch.setattr(kernel_routing, "_STATE", state)
    monkeypatch.delenv(kernel_routing.SWITCH, raising=False)
    return state


def test_a_message_the_front_end_sent_on_a_subshell_stays_there(routing):
    assert kernel_routing.route({"method": "custom"}, "theirs") == "theirs"
    routing.cell_running = False
    assert kernel_routing.route({"method": "custom"}, "theirs") == "theirs"


def test_a_main_shell_message_moves_to_our_subshell_only_while_a_cell_runs(routing):
    assert kernel_routing.route({"method": "custom"}, None) == "ours"
    assert kernel_routing.route({"method": "update"}, None) == "ours"
    routing.cell_running = False  # between cells: the main shell, in order with the cells
    assert kernel_routing.route({"method": "custom"}, None) is None
    routing.cell_running, routing.subshell_id = True, None  # no subshell (yet): the main shell
    assert kernel_routing.route({"method": "custom"}, None) is None
    assert kernel_routing.status()["routed"] == 2


@pytest.mark.parametrize("value", ["off", "0", "False", " no "])
def test_the_switch_turns_the_routing_off(routing, monkeypatch, value):
    monkeypatch.setenv(kernel_routing.SWITCH, value)
    assert not kernel_routing.enabled()
    assert kernel_routing.route({"method": "custom"}, None) is None
    assert kernel_routing.route({"method": "custom"}, "theirs") == "theirs"
    monkeypatch.setenv(kernel_routing.SWITCH, "on")
    assert kernel_routing.route({"method": "custom"}, None) == "ours"


def test_outside_a_kernel_nothing_is_prepared(monkeypatch):
    state = kernel_routing._State()  # noqa: SLF001 - a fresh module state (kernel_routing.py: see above)
    monkeypatch.setattr(kernel_routing, "_STATE", state)
    kernel_routing.prepare()
    assert kernel_routing.wait_ready(30) is False  # at once: nothing to wait for
    assert kernel_routing.status() == {"cell_running": False, "subshell": None, "problem": None, "enabled": True,
                                       "routed": 0}
    assert state.started is False and state.shell is None


def test_the_trees_comm_routes_with_the_rule(routing, monkeypatch):
    """ipykernel 7.4 asks each comm which subshell handles its messages: the tree's comm answers with
    :func:`kernel_routing.route` (the kernel's own answer is the subshell of its last reply's parent)."""
    ipykernel_comm = pytest.importorskip("ipykernel.comm.comm")
    import comm

    if not hasattr(ipykernel_comm.BaseComm, kernel_adapter.KERNEL_ROUTING_HOOK):
        pytest.skip("this ipykernel does not ask comms where to route (< 7.4)")
    monkeypatch.setattr(comm, "create_comm", lambda **kwargs: ipykernel_comm.BaseComm(**kwargs))
    with tn.Hub(ids="sequential") as hub:
        tree = AgentTree(hub, interval=0.05)
        try:
            assert subshell_for(tree.comm, "custom", "theirs") == "theirs"
            assert subshell_for(tree.comm, "custom", None) == "ours"
        finally:
            tree.close()


def test_the_pump_does_nothing_outside_an_ipykernel_6_kernel(monkeypatch):
    from toh_nb.notebook import kernel_pump

    state = kernel_pump._Pump()  # noqa: SLF001 - a fresh pump state (kernel_pump.py is not ours to change now)
    monkeypatch.setattr(kernel_pump, "_PUMP", state)
    with tn.Hub(ids="sequential") as hub:
        tree = AgentTree(hub, interval=0.05)
        try:
            assert kernel_pump.register(tree.comm) is False
            kernel_pump.pump()  # no kernel: nothing to read
            assert kernel_pump.status() == {"comms": 0, "served": 0, "queued": 0}
            assert state.hooked is False and state.kernel is None
        finally:
            tree.close()


# -- a real kernel, a front-end without subshells --------------------------------------------------

SETUP = """\
import asyncio, os, time
import toh_nb as tn
from toh_nb.notebook import kernel_adapter, kernel_routing

async def reply(request):
    if request.label == 'slow':
        await asyncio.sleep(60)  # until interrupted
    if (request.label or '').startswith('waiter'):
        await asyncio.sleep(float(request.last_user_text))
    return f'{request.label}: done'

hub = tn.Hub(tn.FunctionModel(reply), ids='sequential')
slow = hub.start('Work slowly', label='slow')
tree = hub.tree()
print('model', tree.model_id)
print('subshell ready', kernel_routing.wait_ready(10), kernel_routing.status()['problem'])
"""

#: blocks in input() (the client answers only after its click took effect), then in kid.wait()
BLOCKED = """\
answer = input('go? ')
waiter = hub.start('{seconds}', label='{label}')
started = time.monotonic()
waiter.wait(timeout=30)
print('cell done', answer, slow.status, round(time.monotonic() - started, 1))
"""

AFTER = "print('after', waiter.status, slow.status)"


class Kernel:
    """A real ipykernel and a plain client (no subshells), with every iopub message timed on arrival."""

    def __init__(self, extra_env: dict | None = None, python: str | None = None, specs: pathlib.Path | None = None) -> None:
        from jupyter_client import KernelManager

        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SOURCE_ROOT), env.get("PYTHONPATH", "")]))
        env.update(extra_env or {})
        if python is None:
            self.manager = KernelManager(kernel_name="python3")
        else:  # a kernel of another interpreter (another ipykernel): a kernelspec of its own
            from jupyter_client.kernelspec import KernelSpecManager

            spec = specs / "other"
            spec.mkdir(parents=True)
            spec.joinpath("kernel.json").write_text(json.dumps({
                "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "other", "language": "python"}))
            self.manager = KernelManager(kernel_name="other", kernel_spec_manager=KernelSpecManager(
                kernel_dirs=[str(specs)]))
        self.manager.start_kernel(env=env)
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)
        self.iopub: list[tuple[float, dict]] = []
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                msg = self.client.get_iopub_msg(timeout=0.1)
            except queue.Empty:
                continue
            self.iopub.append((time.monotonic(), msg))

    def close(self) -> None:
        self._stop.set()
        self._reader.join(5)
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)

    def run(self, code: str, timeout: float = 60) -> str:
        """Execute ``code`` and wait for its reply; its printed text."""
        msg_id = self.client.execute(code, allow_stdin=False)
        deadline = time.monotonic() + timeout
        while True:  # replies to earlier requests (kernel_info, cells sent without waiting) are skipped
            reply = self.client.get_shell_msg(timeout=max(0.01, deadline - time.monotonic()))
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        assert reply["content"]["status"] == "ok", reply["content"]
        return self.text_of(msg_id, timeout)

    def text_of(self, msg_id: str, timeout: float = 30) -> str:
        """The stdout of request ``msg_id`` once the kernel went idle after it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                   and m["parent_header"].get("msg_id") == msg_id for _, m in list(self.iopub)):
                break
            time.sleep(0.02)
        return "".join(m["content"]["text"] for _, m in list(self.iopub)
                       if m["msg_type"] == "stream" and m["parent_header"].get("msg_id") == msg_id)

    def click(self, comm_id: str, content: dict) -> str:
        """What the page sends for a click, on the main shell, with no subshell id."""
        msg = self.client.session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "custom",
                                                                                  "content": content}})
        assert "subshell_id" not in msg["header"]
        self.client.shell_channel.send(msg)
        return msg["header"]["msg_id"]

    def outcome(self, request: int, timeout: float = 30) -> tuple[float, dict]:
        """(arrival time, data) of the tree's answer to click ``request``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, m in list(self.iopub):
                data = m["content"].get("data", {}) if m["msg_type"] == "comm_msg" else {}
                content = data.get("content", {}) if data.get("method") == "custom" else {}
                if content.get("type") == "outcome" and content.get("request") == request:
                    return at, content
            time.sleep(0.02)
        raise AssertionError(f"no outcome for click {request} within {timeout} s")

    def idle_at(self, msg_id: str, timeout: float = 60) -> float:
        """When the kernel went idle after request ``msg_id`` (its cell ended)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, m in list(self.iopub):
                if (m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                        and m["parent_header"].get("msg_id") == msg_id):
                    return at
            time.sleep(0.02)
        raise AssertionError(f"request {msg_id} did not end within {timeout} s")

    def input_request(self, timeout: float = 30) -> dict:
        return self.client.get_stdin_msg(timeout=timeout)


@pytest.fixture(params=["test venv", "7.x"], ids=["the test venv's ipykernel", "the newest ipykernel 7.x"])
def kernel(request, tmp_path):
    """A kernel whose comms have ipykernel's routing hook: the test venv's own (its python3 kernelspec),
    and the newest ipykernel 7.x (``.ci-agents/ipykernel7``, tests/real_parts.py)."""
    if request.param == "7.x":
        python, variable, venv = real_parts.IPYKERNELS["7.x"]
        if not python:
            pytest.skip(f"no Python with ipykernel 7.x: .ci/run makes one in .ci-agents/{venv}, or set {variable}")
        started = Kernel(python=python, specs=tmp_path / "kernels")
    else:
        from jupyter_client.kernelspec import KernelSpecManager

        if "python3" not in KernelSpecManager().find_kernel_specs():
            pytest.skip("no python3 kernelspec (install one with: python -m ipykernel install --sys-prefix)")
        started = Kernel()
    try:
        yield started
    finally:
        started.close()


def comm_id_of(setup_text: str) -> str:
    return next(line.split()[1] for line in setup_text.splitlines() if line.startswith("model "))


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_main_shell_click_takes_effect_while_the_cell_blocks_and_cells_keep_their_order(kernel):
    has_hook = kernel.run("import ipykernel.comm\nfrom toh_nb.notebook import kernel_adapter\n"
                          "print(hasattr(ipykernel.comm.Comm, kernel_adapter.KERNEL_ROUTING_HOOK))")
    if has_hook != "True\n":
        pytest.skip("this kernel's ipykernel does not ask comms where to route (< 7.4)")
    setup = kernel.run(SETUP)
    assert "subshell ready True None" in setup, setup
    comm_id = comm_id_of(setup)
    kernel.run("time.sleep(0.5)\nprint(slow.status)")  # the slow child runs

    blocked = kernel.client.execute(BLOCKED.format(seconds=4, label='waiter'), allow_stdin=True)
    prompt = kernel.input_request()
    assert prompt["content"]["prompt"] == "go? "
    # while the cell waits in input(): Interrupt on the slow child
    clicked = time.monotonic()
    first_click = kernel.click(comm_id, {"action": "interrupt", "id": "agent-1", "request": 1})
    at, outcome = kernel.outcome(1)
    assert outcome == {"type": "outcome", "request": 1, "action": "interrupt", "id": "agent-1",
                       "text": "interrupt requested for agent agent-1", "error": False}
    kernel.client.input("yes")  # stdin still works: the cell goes on into waiter.wait()
    # while the cell blocks in kid.wait(): a cell is queued, then a click (it must not wait for that cell)
    queued = kernel.client.execute(AFTER)
    time.sleep(0.5)
    clicked_in_wait = time.monotonic()
    click_in_wait = kernel.click(comm_id, {"action": "transcript", "id": "agent-1", "request": 2})
    at_in_wait, in_wait = kernel.outcome(2)
    assert in_wait["text"] == "transcript of agent-1" and in_wait["error"] is False
    ended = kernel.idle_at(blocked)
    assert at < ended and at_in_wait < ended, (at - clicked, at_in_wait - clicked_in_wait, ended - clicked)
    assert at - clicked < 3.0 and at_in_wait - clicked_in_wait < 3.0
    print(f"\nclick in input(): handled after {at - clicked:.2f} s; in kid.wait(): {at_in_wait - clicked_in_wait:.2f} s; "
          f"the cell ended {ended - clicked:.2f} s after the first click")
    assert kernel.text_of(blocked).startswith("cell done yes ready ")  # the interrupt had stopped the slow turn
    # the cell sent meanwhile ran after the blocked one, not inside it
    assert kernel.idle_at(queued) > ended
    assert kernel.text_of(queued) == "after ready ready\n"
    inputs = [m["parent_header"]["msg_id"] for _, m in kernel.iopub if m["msg_type"] == "execute_input"]
    assert inputs.index(blocked) < inputs.index(queued)
    # each click's idle (published by the subshell) is followed by the running cell's busy again, and the
    # cell's own idle comes last: a front-end without subshells keeps showing the kernel busy
    statuses = [(m["parent_header"].get("msg_id"), m["content"]["execution_state"]) for _, m in kernel.iopub
                if m["msg_type"] == "status"]
    for click_id in (first_click, click_in_wait):
        after = statuses[statuses.index((click_id, "idle")) + 1:]
        assert after[0] == (blocked, "busy"), after[:3]
    mine = [state for msg_id, state in statuses if msg_id == blocked]
    assert mine[-1] == "idle" and statuses.index((blocked, "idle")) > statuses.index((click_in_wait, "idle"))

    # the switch: the same click now waits for the cell
    kernel.run("os.environ['TOH_NB_BUSY_CLICKS'] = 'off'\nslow.send('again')\ntime.sleep(0.5)\nprint(slow.status)")
    blocked = kernel.client.execute(BLOCKED.replace("answer = input('go? ')", "answer = 'off'").format(seconds=3, label='waiter 2'))
    time.sleep(0.5)
    kernel.click(comm_id, {"action": "interrupt", "id": "agent-1", "request": 3})
    ended = kernel.idle_at(blocked)
    at, outcome = kernel.outcome(3)
    assert at > ended, "with TOH_NB_BUSY_CLICKS=off the click is handled after the cell"
    assert kernel.text_of(blocked).startswith("cell done off running ")
    assert outcome["text"] == "interrupt requested for agent agent-1"


# -- ipykernel 6: no subshells; the blocking hub calls serve the tree's messages -----------------------

#: where a Python whose ipykernel is 6.x is named (its kernel imports this checkout): tests/real_parts.py
IPYKERNEL6 = "TOH_NB_IPYKERNEL6_PYTHON"

SETUP6 = SETUP.replace("print('subshell ready'", "import ipywidgets\nother = ipywidgets.IntSlider()\n"
                       "print('other', other.model_id)\nprint('subshell ready'").replace("wait_ready(10)",
                                                                                    "wait_ready(0.1)")
BLOCKED6 = """\
answer = input('go? ')
waiter = hub.start('4', label='waiter')
waiter.wait(timeout=30)
print('cell done', answer, slow.status, other.value)
"""


@pytest.fixture
def kernel6(tmp_path):
    python = real_parts.IPYKERNEL6_PYTHON
    if not python:
        pytest.skip(f"no Python with ipykernel 6: .ci/run makes one in .ci-agents/ipykernel6, or set {IPYKERNEL6}")
    version = subprocess.run([python, "-c", "import ipykernel; print(ipykernel.version_info[0])"],
                             capture_output=True, text=True, timeout=60)
    assert version.stdout.strip() == "6", f"{IPYKERNEL6}={python}: not an ipykernel 6 Python ({version})"
    started = Kernel(python=python, specs=tmp_path / "kernels")
    try:
        yield started
    finally:
        started.close()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_on_ipykernel_6_a_blocking_hub_call_serves_the_trees_clicks_and_queues_the_rest(kernel6):
    kernel = kernel6
    setup = kernel.run(SETUP6)
    assert "subshell ready False None" in setup, setup  # ipykernel 6's comms have no routing hook: no subshell
    comm_id = comm_id_of(setup)
    other_id = next(line.split()[1] for line in setup.splitlines() if line.startswith("other "))
    kernel.run("time.sleep(0.5)\nfrom toh_nb.notebook import kernel_pump\nprint(kernel_pump.status(), slow.status)")

    blocked = kernel.client.execute(BLOCKED6, allow_stdin=True)
    assert kernel.input_request()["content"]["prompt"] == "go? "
    clicked = time.monotonic()  # during input(): no hub call waits, so the click waits in the socket
    kernel.click(comm_id, {"action": "interrupt", "id": "agent-1", "request": 1})
    time.sleep(0.5)
    assert not any(m["msg_type"] == "comm_msg" for _, m in list(kernel.iopub)
                   if m["content"].get("data", {}).get("content", {}).get("request") == 1)
    answered = time.monotonic()
    kernel.client.input("yes")  # the cell goes on into waiter.wait(): the waiting click is served
    at, outcome = kernel.outcome(1)
    assert outcome["text"] == "interrupt requested for agent agent-1" and outcome["error"] is False
    # another widget's message and a cell, in that order, then a click: the click is served, the rest queued
    update = kernel.client.session.msg("comm_msg", {"comm_id": other_id, "data": {
        "method": "update", "state": {"value": 5}, "buffer_paths": []}})
    kernel.client.shell_channel.send(update)
    queued = kernel.client.execute("print('after', other.value, waiter.status)")
    clicked_in_wait = time.monotonic()
    kernel.click(comm_id, {"action": "transcript", "id": "agent-1", "request": 2})
    at_in_wait, in_wait = kernel.outcome(2)
    assert in_wait["text"] == "transcript of agent-1"
    ended = kernel.idle_at(blocked)
    assert at < ended and at_in_wait < ended
    assert at - answered < 1.5 and at_in_wait - clicked_in_wait < 1.5
    print(f"\nipykernel 6: click served {at - answered:.2f} s after input() returned, {at_in_wait - clicked_in_wait:.2f} s "
          f"after it was sent in kid.wait(); the cell ended {ended - clicked:.2f} s after the first click")
    # the other widget's update waited for the cell (0 there) and ran before the queued cell (5 there)
    assert kernel.text_of(blocked) == "cell done yes ready 0\n"
    assert kernel.idle_at(queued) > ended
    assert kernel.text_of(queued) == "after 5 ready\n"
    status = kernel.run("print(kernel_pump.status())")
    assert status == "{'comms': 1, 'served': 2, 'queued': 2}\n"


# -- each kind of kernel: what the adapter turns on there, and the fallback ----------------------------------


@pytest.fixture
def kernel_of(tmp_path):
    """``kernel_of("6.31" | "7.3" | "7.x")``: a real kernel of that ipykernel (tests/real_parts.py IPYKERNELS;
    skips, naming how to get one, where it is absent)."""
    started: list[Kernel] = []

    def start(version: str) -> Kernel:
        python, variable, venv = real_parts.IPYKERNELS[version]
        if not python:
            pytest.skip(f"no Python with ipykernel {version}: .ci/run makes one in .ci-agents/{venv}, or set {variable}")
        started.append(Kernel(python=python, specs=tmp_path / f"kernels-{len(started)}"))
        return started[-1]

    yield start
    for kernel in started:
        kernel.close()


REPORT = """\
import ipykernel
from toh_nb.notebook import kernel_pump
hook = kernel_adapter.KERNEL_ROUTING_HOOK
print('version', ipykernel.__version__)
print('toh_nb', tn.__file__)
print('status', kernel_adapter.status())
print('hook', callable(getattr(type(tree.comm), hook, None)), getattr(tree.comm, hook, None) is kernel_routing.route)
print('pumped', kernel_pump.status()['comms'])
"""

#: what each kernel has: (routing hook on its comms, our route installed, trees pumped)
HAS = {"6.31": (False, False, 1), "7.3": (False, False, 0), "7.x": (True, True, 0)}


def report_of(text: str) -> dict:
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in text.splitlines() if " " in line}


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("version", list(HAS))
def test_each_kernel_turns_on_the_quirks_its_version_has_and_they_match_its_insides(kernel_of, version):
    from .test_kernel_adapter import OUTSIDE

    kernel = kernel_of(version)
    report = report_of(kernel.run(SETUP.replace("wait_ready(10)", "wait_ready(0.1)") + REPORT))
    installed = report["version"]
    assert installed.startswith({"6.31": "6.31.", "7.3": "7.3.", "7.x": "7."}[version]), report
    assert report["toh_nb"].startswith(str(SOURCE_ROOT)), report  # the kernel runs this checkout
    ipykernel = f"ipykernel {installed}"
    expected = {
        "6.31": {"routing": OUTSIDE.format(ipykernel, "7.4", "8"), "busy_again": OUTSIDE.format(ipykernel, "7.4", "8"),
                 "pump": None},
        "7.3": {"routing": OUTSIDE.format(ipykernel, "7.4", "8"), "busy_again": OUTSIDE.format(ipykernel, "7.4", "8"),
                "pump": OUTSIDE.format(ipykernel, "6", "7")},
        "7.x": {"routing": None, "busy_again": None, "pump": OUTSIDE.format(ipykernel, "6", "7")},
    }[version]
    assert report["status"] == repr(expected)
    hook, routed, pumped = HAS[version]
    assert report["hook"] == f"{hook} {routed}" and report["pumped"] == str(pumped)
    assert report["subshell"] == ("ready True None" if version == "7.x" else "ready False None")


#: before the tree exists, the kernel is made to look like one of a version the adapter does not know
FAKED = {"7.x": "{'ipykernel': (8, 0, 0), 'pyzmq': (27, 3, 0)}", "6.31": "{'ipykernel': (6, 31, 0), 'pyzmq': (28, 0, 0)}"}


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("version, faked", [("7.3", None), ("7.x", FAKED["7.x"]), ("6.31", FAKED["6.31"])],
                         ids=["ipykernel 7.3", "newest 7.x faked as ipykernel 8", "ipykernel 6 faked with pyzmq 28"])
def test_where_no_quirk_is_known_to_work_a_main_shell_click_waits_for_the_cell(kernel_of, version, faked):
    """The fallback: no kernel internal is touched, the click sent on the main shell while the cell blocks
    in ``kid.wait()`` is handled when the cell ends, and the cells keep their order."""
    kernel = kernel_of(version)
    if faked:
        kernel.run(f"from toh_nb.notebook import kernel_adapter\nkernel_adapter.versions = lambda: {faked}")
    setup = kernel.run(SETUP.replace("wait_ready(10)", "wait_ready(0.1)") + REPORT)
    assert "subshell ready False None" in setup, setup
    report = report_of(setup)
    assert report["hook"].endswith(" False") and report["pumped"] == "0", report
    comm_id = comm_id_of(setup)
    kernel.run("time.sleep(0.5)\nprint(slow.status)")
    blocked = kernel.client.execute(BLOCKED.replace("answer = input('go? ')", "answer = 'fallback'").format(
        seconds=3, label="waiter"))
    time.sleep(0.5)
    kernel.click(comm_id, {"action": "interrupt", "id": "agent-1", "request": 1})
    queued = kernel.client.execute(AFTER)
    ended = kernel.idle_at(blocked)
    at, outcome = kernel.outcome(1)
    assert at > ended, "the click is handled after the cell"
    assert kernel.text_of(blocked).startswith("cell done fallback running ")  # the slow turn ran on meanwhile
    assert outcome == {"type": "outcome", "request": 1, "action": "interrupt", "id": "agent-1",
                       "text": "interrupt requested for agent agent-1", "error": False}
    assert kernel.idle_at(queued) > ended
    assert kernel.run("print(kernel_routing.status()['routed'])") == "0\n"
