"""Where ipykernel handles the tree's clicks while a cell runs, whatever the front-end (issue 27 §1).

ipykernel handles the main shell's messages on its main thread, one at a time, so a widget message
sent on the main shell while a cell runs waits for the cell to end. JupyterLab >= 4.4 sends comm
messages on a kernel *subshell* (ipykernel >= 7 runs each subshell on its own thread) and a click is
handled at once; VS Code, Notebook 7 or JupyterLab with ``commsOverSubshells`` set to ``disabled``, and
any client speaking the plain protocol send them on the main shell.

Why not pump the main shell from inside the blocked cell (what ``jupyter-ui-poll`` does): it takes
messages out of the kernel's shell queue from inside a cell (``kernel.do_one_iteration()``), handles
*every* message it finds, replaces the kernel's ``execute_request`` handler to hold cells back and
replays them after ``post_run_cell``, and on ipykernel 7 swaps the kernel's main-shell lock for a
no-op. On ipykernel 7 the main shell's queue is an in-process socket fed by the shell-channel thread:
a message can only be taken, not looked at, so "handle only ours, leave the rest" means re-queuing
other people's messages (cells, other widgets, completions) behind the kernel's back, with the
kernel's own lock bypassed.

What this module does instead: ipykernel >= 7.4 asks each comm, on its shell-channel thread, which
subshell handles an incoming ``comm_msg``/``comm_close`` of that comm (the per-comm hook
``_reply_subshell_for``; the only seam there is, and private: every touch of the kernel's insides is in
:mod:`toh_nb.notebook.kernel_adapter`, behind its version checks). The tree's comm answers (:func:`route`):

- the subshell the front-end named, when it named one (JupyterLab's own; this also undoes ipykernel
  7.4's re-routing of replies to the subshell of the comm's last outgoing message, which sent every
  click of a tree refreshed from a cell back to the busy main shell);
- while a cell runs on the main shell (IPython's public ``pre_run_cell``/``post_run_cell`` events), a
  subshell of our own, created once per kernel with the protocol's ``create_subshell_request`` on the
  kernel's own control channel (:func:`prepare`; ``jupyter_client``, public);
- else the main shell, as before (between cells the order of clicks and cells is kept).

A subshell publishes ``busy``/``idle`` around each message it handles, with the front-end's message
as parent; front-ends read that ``idle`` as the kernel's (JupyterLab 4.6 does, with or without
subshells), and the kernel indicator would say idle while the cell still runs. After each message of
the tree handled on a subshell while a cell runs, the kernel's ``busy`` is therefore published again
for that cell (:func:`_busy_again`, under the lock that the cell's end takes, so it never lands after
the cell's own ``idle``).

Nothing is read from any queue: only the tree's own comm messages change threads; cells, ``input()``
(stdin), other widgets' messages and everything else stay where the kernel put them, in order; no cell
ever runs re-entrantly (the subshell runs the tree's message handler, which only hands work to the
hub's loop and sets traits: the same handler JupyterLab's subshell runs). A click is handled during
``time.sleep`` too, not only in the hub's blocking calls.

No effect outside an ipykernel (plain scripts, tests), on a kernel without subshells (ipykernel 6:
there the hub's blocking calls serve the tree's clicks, :mod:`toh_nb.notebook.kernel_pump`) or without
the hook (ipykernel 7.0–7.3: clicks sent on the main shell wait for the cell, as before), nor on a version
the adapter does not know (its :func:`~toh_nb.notebook.kernel_adapter.status` says why). Opt-out: the
environment variable ``TOH_NB_BUSY_CLICKS=off`` (read at each click) leaves the tree's messages where
the front-end sent them and publishes no status.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

from . import kernel_adapter as adapter

#: the environment variable that turns the busy-cell routing off (``off``, ``0``, ``false``, ``no``)
SWITCH = "TOH_NB_BUSY_CLICKS"
OFF = ("0", "off", "false", "no")
#: seconds the kernel's control channel gets to create the subshell
CREATE_TIMEOUT = 10.0

log = logging.getLogger("toh_nb")


class _State:
    """The process's one kernel: whether a cell runs on its main shell, and our subshell."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.shell: Any = None  # the IPython shell whose cell events we follow
        self.cell_running = False
        self.cell_parent: dict | None = None  # the running cell's request (the main shell's parent)
        self.subshell_id: str | None = None
        self.problem: str | None = None  # why there is no subshell (None: there is one, or not asked yet)
        self.ready = threading.Event()  # set when the subshell exists or cannot be had
        self.started = False
        self.routed = 0  # messages sent to our subshell (only the shell-channel thread counts)


_STATE = _State()


def enabled() -> bool:
    """False when ``TOH_NB_BUSY_CLICKS`` says ``off``."""
    return os.environ.get(SWITCH, "").strip().lower() not in OFF


def route(data: Any, default: Any) -> Any:
    """Which subshell handles a front-end message of the tree's comm (ipykernel's shell-channel thread
    calls this): ``default`` is the subshell the front-end sent it on (None: the main shell)."""
    state = _STATE
    if default is None and state.cell_running and state.subshell_id is not None and enabled():
        state.routed += 1
        return state.subshell_id
    return default


def keep_routing(comm: Any) -> None:
    """Route the messages of ``comm`` (the tree's) with :func:`route`. A comm without the kernel's hook
    (ipykernel < 7.4, the ``comm`` package's own), or on a kernel version the adapter does not know, is
    left alone."""
    if adapter.route_comm(comm, route, _after_message):
        prepare()


def status() -> dict:
    """What the routing knows: ``cell_running``, ``subshell`` (its id, or None), ``problem`` (why there is
    none), ``enabled``, ``routed`` (how many messages went to our subshell)."""
    return {"cell_running": _STATE.cell_running, "subshell": _STATE.subshell_id, "problem": _STATE.problem,
            "enabled": enabled(), "routed": _STATE.routed}


def wait_ready(timeout: float = CREATE_TIMEOUT) -> bool:
    """Wait until :func:`prepare` has its subshell or knows it cannot have one; True if it has one
    (False at once where nothing was prepared: outside a kernel, or a comm without the routing hook)."""
    if _STATE.started:
        _STATE.ready.wait(timeout)
    return _STATE.subshell_id is not None


def prepare() -> None:
    """Follow the kernel's cells and create our subshell in the background (once per kernel process).
    A no-op outside an ipykernel; on a kernel without subshells it only notes why."""
    state = _STATE
    with state.lock:
        if state.started:
            return
        kernel, shell = adapter.kernel_and_shell()
        if kernel is None:
            return  # not in a kernel (yet): a later tree tries again
        state.started = True
        state.shell = shell
        shell.events.register("pre_run_cell", _cell_started)
        shell.events.register("post_run_cell", _cell_ended)
        if threading.current_thread() is threading.main_thread():
            state.cell_running = True  # a tree is made by a cell: this one runs already (its end says so)
            state.cell_parent = adapter.current_request(kernel)
    if not adapter.has_subshells(kernel):
        _give_up("the kernel has no subshells (ipykernel >= 7 has)")
        return
    threading.Thread(target=_create_subshell, name="toh_nb-subshell", daemon=True).start()


def _cell_started(*_: Any) -> None:
    if threading.current_thread() is threading.main_thread():  # a subshell's cell leaves the main shell free
        kernel, _ = adapter.kernel_and_shell()
        with _STATE.lock:
            _STATE.cell_running = True
            _STATE.cell_parent = adapter.current_request(kernel) if kernel is not None else None


def _cell_ended(*_: Any) -> None:
    if threading.current_thread() is threading.main_thread():
        with _STATE.lock:  # a pending _busy_again publishes before this cell's idle, or not at all
            _STATE.cell_running = False
            _STATE.cell_parent = None


def _after_message(msg: Any) -> None:
    """On a subshell's thread (ours, or the front-end's), after the tree's comm handled ``msg`` while a
    cell runs on the main shell: once the subshell published its ``idle`` (right after this returns,
    before its loop runs anything else), publish the running cell's ``busy`` again. JupyterLab 4.6 too
    shows a subshell's ``idle`` as the kernel's."""
    if not _STATE.cell_running or threading.current_thread() is threading.main_thread() or not enabled():
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    loop.call_soon(_busy_again)


def _busy_again() -> None:
    kernel, _ = adapter.kernel_and_shell()
    if kernel is None:
        return
    with _STATE.lock:
        parent = _STATE.cell_parent
        if not _STATE.cell_running or not parent or not parent.get("header"):
            return
        try:
            adapter.publish_busy(kernel, parent)
        except Exception as error:  # a status is advice to the front-end: never worth an error
            log.debug("toh_nb: could not publish the running cell's busy status: %s", error)


def _give_up(why: str) -> None:
    _STATE.problem = why
    _STATE.ready.set()
    log.debug("toh_nb: tree clicks sent on the main shell wait for the cell: %s", why)


def _create_subshell() -> None:
    """Ask the kernel, on its own control channel, for a subshell (``create_subshell_request``)."""
    try:
        _STATE.subshell_id = adapter.create_subshell(CREATE_TIMEOUT)
        _STATE.ready.set()
    except adapter.SubshellRefused as refused:
        _give_up(str(refused))
    except Exception as error:  # no connection file, no answer in time …: clicks wait for the cell
        _give_up(f"no subshell could be created ({type(error).__name__}: {error})")
