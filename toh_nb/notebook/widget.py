"""The live agent tree (``hub.tree()``): ONE anywidget model for the whole tree.

Why one model: the first tree built ~29 ipywidgets models per node (500 nodes → ~14,500 comms) and
diffed them by hand. Here the tree is a single :class:`anywidget.AnyWidget` (it builds on ipywidgets and
runs in JupyterLab, Notebook 7 and VS Code without a front-end extension): Python syncs plain rows
(``rows``), an ES-module renderer (``tree.js``) draws them, and the page's clicks come back as custom
messages (``{"action": "interrupt", "id": …}``). What users of trace viewers expect is there:
collapse/expand and "collapse finished", a status filter and a search box, token columns with subtree
totals and totals in the header, a timeline (Gantt) view of when each agent and job ran, a readable chat
view of any transcript (tool calls folded), exports (the tree as JSON, a transcript as Markdown),
costs when the hub has a price table, and the permission requests of ACP children set to
``permissions="ask"`` as prompts with Allow/Deny buttons (``asks``; unanswered ones are denied after
their timeout by the engine).

State and rules live in Python, so they are tested without a browser: which rows are visible
(``visible``: filter + collapse, ancestors of matches kept) is computed here from the synced UI state
(``query``, ``status_filter``, ``collapsed``, ``collapse_finished``); :meth:`AgentTree.act` is what a
click sends.

Threads. The engine lives on the hub's portal loop (a daemon thread); status changes and lifecycle
events reach the widget's listeners on that thread. A listener only marks the tree dirty and, if no
refresh is pending, schedules one with ``loop.call_later(interval, …)``: however many events arrive, the
rows are rebuilt at most once per ``interval`` (0.1 s → ≤ 10 refreshes per second), on the engine's own
thread, and synced only when they changed. While something runs, a heartbeat marks the tree dirty once a
second so elapsed times and the timeline move. Actions run on the kernel's thread and hand their work to
the portal without waiting; the outcome (the same line a model would read, e.g. ``interrupt requested
for agent agent-2``) appears in the tree's message line (``message``).

Clicks while a cell runs. The tree exists to steer agents that are running, so a click must be handled
while a cell blocks in ``hub.run(...)``, ``kid.wait()`` or ``time.sleep``. ipykernel handles shell
messages on its main thread only between cells; JupyterLab >= 4.4 sends comm messages over a kernel
*subshell* (ipykernel >= 7 runs each subshell on its own thread), which is what makes a live click
possible. ipykernel 7.4 however re-routes a comm's incoming messages to the subshell of whatever request
was the parent of the comm's last outgoing message (``Comm._reply_subshell_for``); the tree is created
by a cell and refreshed from the portal thread, whose parent is a cell's ``execute_request``, so every
click was sent back to the busy main shell and ran after the cell. The tree's comm therefore keeps the
subshell the front-end chose (:func:`_keep_frontend_routing`), and its message handler is thread-safe
(it only hands work to the portal and sets traits). Front-ends without subshells (JupyterLab < 4.4,
Notebook 7 with ``commsOverSubshells`` off, VS Code, ipykernel 6) still deliver clicks only between
cells; the button then stays pending until the kernel reads the click.

Every click of an action button carries a ``request`` number; the page marks the button pending at
once and the kernel answers ``{"type": "outcome", "request": n, "id", "action", "text", "error"}``
when the action finished (or could not run: the row then says why).

Displays: the live view plus a static snapshot of the whole tree (``text/plain`` and ``text/html`` from
:mod:`toh_nb.notebook.treeview`), so nbconvert, GitHub and nbval show the tree without a kernel;
``close()`` (and ``hub.close()``) replaces the live view by the final snapshot.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import pathlib
import sys
import threading
import time
from typing import Any, Callable

import anywidget
import traitlets

from ..core.checks import check_count, check_seconds
from ..core.errors import TohError, UsageError
from ..jobs import texts as job_texts
from .chat import chat_entries, chat_markdown
from .display import short_id
from .treeview import (FORMATS, cell_text, display_status, extra_columns, extra_value, name_of, static_bundle, summary,
                       tree_rows)

HERE = pathlib.Path(__file__).resolve().parent
ACTION_TIMEOUT = 30.0  # seconds a synchronous refresh()/repr waits for the portal
HEARTBEAT = 1.0  # seconds between refreshes while something runs, so elapsed times keep moving
ACTIVE = ("running", "stopping")
LIVE = ("running", "stopping", "idle")
#: what the status filter offers (one vocabulary for agents and jobs)
STATUS_CHOICES = ("running", "stopping", "idle", "ready", "completed", "failed", "killed", "corrupt")
ACTIONS = ("interrupt", "send", "kill", "transcript", "close_transcript", "toggle", "export", "export_transcript",
           "allow", "deny")
#: the per-comm hook ipykernel >= 7.4 asks which subshell handles a front-end message of a comm
KERNEL_ROUTING_HOOK = "_reply_subshell_for"
#: where ACP permission requests asked with ``permissions="ask"`` wait (loaded only when ACP is in use)
PERMISSIONS_MODULE = "toh_nb.providers.acp.permissions"


def _route_to_sender(data: Any, default: Any) -> Any:
    """Which subshell handles a front-end message of the tree's comm: the one the front-end sent it on."""
    return default


def _keep_frontend_routing(comm: Any) -> None:
    """Undo ipykernel 7.4's reply routing for this comm (see the module docstring): its messages are
    handled on the subshell the front-end addressed, not on the busy main shell. A comm without the
    hook (ipykernel < 7.4, the ``comm`` package's own) already routes that way."""
    if comm is not None and callable(getattr(comm, KERNEL_ROUTING_HOOK, None)):
        setattr(comm, KERNEL_ROUTING_HOOK, _route_to_sender)  # on this comm only: ipykernel looks it up per comm


def pending_asks(agent_ids: Any) -> list[dict]:
    """The ACP permission requests of these agents waiting for the user (``permissions="ask"``): each
    ``{"id", "agent", "title", "kind", "tool_call_id"}``. Empty unless the ACP provider is loaded."""
    module = sys.modules.get(PERMISSIONS_MODULE)
    return [] if module is None else module.PENDING.listing(agent_ids)


def _resolve_hub(hub: Any) -> tuple[Any, Any]:
    """(the sync facade or None, the AsyncHub): through their public types, nothing probed."""
    from ..hub import AsyncHub
    from .hub import Hub

    if isinstance(hub, AsyncHub):
        return None, hub
    if isinstance(hub, Hub):
        return hub, hub.async_hub
    raise UsageError(f"AgentTree needs a toh_nb.Hub or AsyncHub, got {type(hub).__name__}")


def _portal_of(facade: Any) -> Any:
    """The facade's portal (``.loop``, ``.call(fn)``, ``.submit(fn)``); None for an AsyncHub."""
    return None if facade is None else facade.portal


def _portal_loop(facade: Any, portal: Any) -> asyncio.AbstractEventLoop | None:
    """The loop the facade's portal runs the engine on (None: the caller's own loop)."""
    loop = getattr(portal, "loop", None)
    return loop if isinstance(loop, asyncio.AbstractEventLoop) else None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def widget_rows(rows: list[dict]) -> list[dict]:
    """The synced rows: JSON-safe, one per node in pre-order, with what the renderer shows and which
    actions apply (a disabled action is not offered at all). ``subtree_tokens``: the node's own tokens
    plus all its descendants' (jobs count their child agent's)."""
    out: list[dict] = []
    index: dict[str, dict] = {}
    extra = extra_columns()
    for row in rows:
        status = display_status(row)
        agent = row["kind"] == "agent"
        own = ((row.get("input_tokens") or 0) + (row.get("output_tokens") or 0)) if agent else 0
        started = row.get("started")
        elapsed = row.get("elapsed_s")
        item = {
            # the root named "root" shows as "root (you)" alone, not "root (you) root"
            "id": row["id"], "short": "" if row.get("mode") == "root" and row["id"] == "root" else short_id(row["id"]),
            "kind": row["kind"], "parent": row["tree_parent"],
            "level": row["level"], "name": name_of(row), "label": row.get("label") or "",
            "mode": (row.get("mode") or "") if agent else "job", "status": status,
            "turns": row.get("turns") or 0 if agent else None,
            "input_tokens": row.get("input_tokens") or 0 if agent else None,
            "output_tokens": row.get("output_tokens") or 0 if agent else None,
            "own_tokens": own, "subtree_tokens": own, "children": 0,
            "detail": row.get("detail") or "", "stop_reason": row.get("stop_reason") or "",
            "outcome": row.get("outcome") or "", "diagnostic": row.get("diagnostic") or "",
            "failure": bool(row.get("failure")), "failures_below": row.get("failures_below") or 0,
            "started": started, "elapsed_s": elapsed,
            "ended": None if status in LIVE or started is None or elapsed is None else started + elapsed,
            "can_interrupt": agent and row.get("mode") == "continuable" and status == "running",
            "can_send": bool(row.get("can_send")), "can_kill": not agent and status == "running",
            "has_transcript": agent,
            "extra": [[name, _extra_value(name, extra_value(row, name))] for name in extra
                      if extra_value(row, name) is not None],
        }
        out.append(item)
        index[item["id"]] = item
    for item in reversed(out):  # children come after their parent in pre-order
        parent = index.get(item["parent"])
        if parent is not None:
            parent["subtree_tokens"] += item["subtree_tokens"]
            parent["children"] += 1
    return out


def _outcome(future: Any, what: str) -> tuple[str, bool]:
    """(the line, whether it is an error) for the finished future of action ``what``."""
    if future.cancelled():
        return f"Error: {what}: cancelled before it finished", True
    error = future.exception()
    if error is not None:
        return (f"Error: {error}" if isinstance(error, TohError) else f"Error: {type(error).__name__}: {error}"), True
    return str(future.result()), False


def _extra_value(column: str, value: Any) -> Any:
    """What the page shows for an extra column: numbers stay numbers, costs are fixed-decimal text."""
    if column in FORMATS:
        return cell_text(column, value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def folded_ids(rows: list[dict], collapsed: Any = (), collapse_finished: bool = False,
               expanded: Any = ()) -> tuple[set[str], set[str]]:
    """(rows folded by the user: their whole subtree hidden, rows folded by ``collapse_finished``:
    every settled row with children that the user has not ``expanded`` again). A finished fold never
    hides a failure: its subtree keeps the failures and the rows on the way to them."""
    own = {row["id"] for row in rows if row["children"]} & set(collapsed)
    finished: set[str] = set()
    if collapse_finished:
        opened = set(expanded)
        finished = {row["id"] for row in rows if row["children"] and row["status"] not in LIVE
                    and row["id"] not in opened and row["id"] not in own}
    return own, finished


def visible_ids(rows: list[dict], query: str = "", status: str = "", collapsed: Any = (),
                collapse_finished: bool = False, expanded: Any = ()) -> list[str]:
    """Which rows the tree shows, in order.

    A filter (``query``: case-insensitive substring of name, label or id; ``status``: one status)
    keeps the matching rows and their ancestors (so a match is seen in place). A collapsed row hides
    its descendants; ``collapse_finished`` collapses every settled row (not running, stopping or idle)
    that has children, except those in ``expanded`` (opened again with their caret), and keeps the
    failures below it in sight (each with the rows on its way up). While a filter is on, collapsing
    does not hide matches.
    """
    by_id = {row["id"]: row for row in rows}
    needle = query.strip().lower()
    filtering = bool(needle or status)
    if filtering:
        keep: set[str] = set()
        for row in rows:
            text = f"{row['name']}\n{row['label']}\n{row['id']}".lower()
            if (not needle or needle in text) and (not status or row["status"] == status):
                node: dict | None = row
                while node is not None and node["id"] not in keep:
                    keep.add(node["id"])
                    node = by_id.get(node["parent"])
        return [row["id"] for row in rows if row["id"] in keep]
    own, finished = folded_ids(rows, collapsed, collapse_finished, expanded)
    shown: set[str] = set()
    out: list[str] = []
    for row in rows:
        parent = by_id.get(row["parent"])
        if parent is not None:
            if parent["id"] not in shown or parent["id"] in own:
                continue
            # under a finished fold: only failures and the rows on the way to them
            if parent["id"] in finished and not (row.get("failure") or row.get("failures_below")):
                continue
        shown.add(row["id"])
        out.append(row["id"])
    return out


class NodeView:
    """A read-only view of one synced row (``tree.nodes[id]``): ``.kind .id .status .label .parent``
    (the row it sits under) and every other row field as an attribute."""

    __slots__ = ("row",)

    def __init__(self, row: dict) -> None:
        self.row = row

    def __getattr__(self, name: str) -> Any:
        row = object.__getattribute__(self, "row")
        if name in row:
            return row[name]
        raise AttributeError(name)

    @property
    def depth(self) -> int:
        return self.row["level"]

    def __repr__(self) -> str:
        return f"NodeView({self.row['kind']} {self.row['id']} [{self.row['status']}] \u2014 {self.row['label']})"


class AgentTree(anywidget.AnyWidget):
    """The live tree of a hub's agents and jobs. Create with ``hub.tree()`` or ``AgentTree(hub)``.

    ``hub`` is a :class:`toh_nb.Hub` (the sync facade) or an :class:`toh_nb.AsyncHub`. ``interval`` is the
    coalescing delay in seconds (at most one refresh per interval, whatever the event rate);
    ``max_nodes`` caps how many rows are synced (the rest are counted in ``hidden``).
    """

    _esm = (HERE / "tree.js").read_text(encoding="utf-8")
    _css = (HERE / "tree.css").read_text(encoding="utf-8")

    rows = traitlets.List().tag(sync=True)
    visible = traitlets.List().tag(sync=True)
    summary = traitlets.Unicode().tag(sync=True)
    hidden = traitlets.Int(0).tag(sync=True)
    message = traitlets.Unicode().tag(sync=True)
    message_error = traitlets.Bool(False).tag(sync=True)
    query = traitlets.Unicode().tag(sync=True)
    status_filter = traitlets.Enum(("",) + STATUS_CHOICES, default_value="").tag(sync=True)
    collapsed = traitlets.List().tag(sync=True)
    collapse_finished = traitlets.Bool(False).tag(sync=True)
    expanded = traitlets.List().tag(sync=True)  # rows opened again under "collapse finished"
    folded = traitlets.List().tag(sync=True)  # rows shown folded (their caret: ▸), whatever folded them
    view = traitlets.Enum(("tree", "timeline"), default_value="tree").tag(sync=True)
    statuses = traitlets.List(list(STATUS_CHOICES)).tag(sync=True)  # the filter's options, for the page
    transcript = traitlets.Dict().tag(sync=True)
    asks = traitlets.List().tag(sync=True)  # pending permission requests (Allow/Deny prompts)
    now = traitlets.Float(0.0).tag(sync=True)
    hub_closed = traitlets.Bool(False).tag(sync=True)

    def __init__(self, hub: Any, *, interval: float = 0.1, max_nodes: int = 5000, **kwargs: Any) -> None:
        facade, inner = _resolve_hub(hub)
        check_seconds(interval, "interval", positive=True, none=None)
        check_count(max_nodes, "max_nodes")
        super().__init__(**kwargs)
        _keep_frontend_routing(self.comm)
        self.observe(lambda change: _keep_frontend_routing(change["new"]), names=["comm"])
        self.hub = hub
        self._facade = facade
        self._hub = inner
        self._runtime = inner.runtime
        self.interval = float(interval)
        self.max_nodes = max_nodes
        self.refresh_count = 0
        self.event_count = 0
        self.errors: list[str] = []
        self.last_message = ""
        self.downloads: list[dict] = []  # what the export actions sent to the page (for tests)
        self._lock = threading.Lock()
        self._filter_lock = threading.RLock()  # the portal thread and a subshell both recompute `visible`
        self._local = threading.local()  # what _say said while one page request is handled
        self._dirty = False
        self._pending: Any = None
        self._heartbeat: Any = None
        self._closed_tree = False
        self._last_static: dict | None = None
        self._handles: list = []  # displays of this tree, updated to the final snapshot on close()
        self._portal = _portal_of(facade)
        self._loop = _portal_loop(facade, self._portal) or _running_loop()
        self._unsubscribe: Callable[[], None] | None = None
        self.on_msg(self._on_message)
        self.observe(self._refilter, names=["query", "status_filter", "collapsed", "collapse_finished", "expanded"])
        # the engine iterates its listener lists on its own thread: change them there
        self._call(self._subscribe)
        self.refresh()

    @property
    def nodes(self) -> dict[str, NodeView]:
        """Every synced row by id (agents and jobs)."""
        return {row["id"]: NodeView(row) for row in self.rows}

    # -- filtering and collapsing (state in traits; rules in visible_ids) ---------------------------

    def _refilter(self, change: Any = None) -> None:
        with self._filter_lock, self.hold_sync():
            visible = visible_ids(self.rows, self.query, self.status_filter, self.collapsed, self.collapse_finished,
                                  self.expanded)
            own, finished = folded_ids(self.rows, self.collapsed, self.collapse_finished, self.expanded)
            folded = [row["id"] for row in self.rows if row["id"] in own or row["id"] in finished]
            if folded != self.folded:
                self.folded = folded
            if visible != self.visible:
                self.visible = visible

    def toggle(self, node_id: str) -> None:
        """Collapse an expanded row, expand a folded one, whether the user or "collapse finished"
        folded it (what its caret does)."""
        if node_id in self.folded:
            self.collapsed = [i for i in self.collapsed if i != node_id]
            if self.collapse_finished and node_id not in self.expanded:
                self.expanded = [*self.expanded, node_id]
        else:
            self.expanded = [i for i in self.expanded if i != node_id]
            if node_id not in self.collapsed:
                self.collapsed = [*self.collapsed, node_id]

    # -- clicks from the page -------------------------------------------------------------------------

    def _on_message(self, widget: Any, content: Any, buffers: Any) -> None:
        """A click from the page (on a subshell thread while a cell runs, see the module docstring)."""
        if not isinstance(content, dict):
            return
        request = content.get("request")
        action, node_id = content.get("action"), content.get("id")
        self._local.said = self._local.what = None
        try:
            result = self.act(action, node_id, content.get("text"))
        except Exception as error:  # a bad message from the page is shown, never raised into the kernel
            self._say(f"Error: {error}", error=True)
            result = None
        said, self._local.said = self._local.said, None
        if request is None:
            return
        if isinstance(result, (concurrent.futures.Future, asyncio.Future)):
            what = self._local.what
            result.add_done_callback(lambda f: self._reply(request, action, node_id, *_outcome(f, what)))
        elif said is not None:
            self._reply(request, action, node_id, *said)
        else:
            self._reply(request, action, node_id, result if isinstance(result, str) else "", False)

    def _reply(self, request: Any, action: Any, node_id: Any, text: str, error: bool) -> None:
        """Tell the page that request ``request`` is over: its button leaves the pending state and the
        row shows ``text``."""
        if self._closed_tree:
            return
        try:
            self.send({"type": "outcome", "request": request, "action": action, "id": node_id, "text": text,
                       "error": bool(error)})
        except Exception as problem:  # the comm is gone: nothing to tell
            self.errors.append(f"{type(problem).__name__}: {problem}")

    def act(self, action: str, node_id: str | None = None, text: str | None = None) -> Any:
        """Do what a click in the page does: ``interrupt``/``send``/``kill``/``transcript``/
        ``close_transcript``/``toggle``/``export``/``export_transcript`` on row ``node_id`` (``text``:
        the message for ``send``), or ``allow``/``deny`` on the pending permission request ``node_id``
        (an id from ``asks``). Work for the engine is handed to the portal; the return value is its
        future (or None; the answer's line for ``allow``/``deny``)."""
        if action not in ACTIONS:
            raise UsageError(f"unknown tree action {action!r}; expected one of {', '.join(ACTIONS)}")
        if action == "export":
            return self._download("agent-tree.json", self.export_json(), "application/json")
        if action in ("allow", "deny"):
            return self._answer(node_id, action == "allow")
        if action == "close_transcript":
            self.transcript = {}
            return None
        rows = {row["id"]: row for row in self.rows}
        if not isinstance(node_id, str) or node_id not in rows:
            raise UsageError(f"no row {node_id!r} in this tree")
        row = rows[node_id]
        needs = {"interrupt": "can_interrupt", "send": "can_send", "kill": "can_kill"}.get(action)
        if needs is not None and not row[needs]:  # the page offers no such button; a stale page may
            self._say(f"Error: {action} is not available for {node_id} [{row['status']}]", error=True)
            return None
        if action == "toggle":
            return self.toggle(node_id)
        if action == "interrupt":
            return self._interrupt(node_id)
        if action == "send":
            return self._send_message(node_id, text)
        if action == "kill":
            return self._kill(node_id)
        if row["kind"] != "agent":
            raise UsageError(f"{node_id} is a job; its transcript is its child agent's")
        if action == "transcript":
            return self._show_transcript(node_id)
        return self._download(f"{node_id}.md", self.export_markdown(node_id), "text/markdown")


    def _subscribe(self) -> None:
        self._unsubscribe = self._runtime.bus.subscribe(self._on_event)  # the hub's one event stream

    def _unsubscribe_all(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    # -- engine events (portal thread) -------------------------------------------------------------

    def _on_event(self, event: Any) -> None:
        self._mark_dirty()

    def _mark_dirty(self) -> None:
        """Called for every engine event: cheap; schedules at most one pending refresh."""
        self.event_count += 1
        if self._closed_tree:
            return
        with self._lock:
            self._dirty = True
            if self._pending is not None:
                return
            running = _running_loop()
            if self._loop is None:
                self._loop = running
            loop = self._loop
            if loop is None or loop.is_closed():
                return  # no loop to refresh on: a manual refresh() shows the change
            self._pending = True
        if running is loop:
            self._pending = loop.call_later(self.interval, self._scheduled_refresh)
            return
        try:
            loop.call_soon_threadsafe(self._schedule_on_loop)
        except RuntimeError:  # the loop closed meanwhile
            self._pending = None

    def _schedule_on_loop(self) -> None:
        with self._lock:
            if self._pending is True:
                self._pending = self._loop.call_later(self.interval, self._scheduled_refresh)

    def _scheduled_refresh(self) -> None:
        with self._lock:
            self._pending = None
            dirty, self._dirty = self._dirty, False
        if dirty and not self._closed_tree:
            try:
                self._rebuild()
            except Exception as error:  # a display problem must never reach the engine's loop
                self.errors.append(f"{type(error).__name__}: {error}")

    def _arm_heartbeat(self) -> None:
        """While an agent or job runs, refresh once per HEARTBEAT even without events (elapsed times)."""
        loop = self._loop
        if self._heartbeat is not None or loop is None or _running_loop() is not loop:
            return
        self._heartbeat = loop.call_later(HEARTBEAT, self._beat)

    def _beat(self) -> None:
        self._heartbeat = None
        if not self._closed_tree:
            self._mark_dirty()  # through the coalescing path: still at most one refresh per interval

    @property
    def refresh_pending(self) -> bool:
        return self._pending is not None

    # -- running on the portal ---------------------------------------------------------------------

    def _on_loop_thread(self) -> bool:
        loop = self._loop
        return loop is None or not loop.is_running() or _running_loop() is loop

    def _call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the engine's loop thread and wait for it (refresh(), repr)."""
        portal = self._portal
        if portal is not None:
            if portal.in_portal_thread():
                return fn()
            return portal.call(fn)
        if self._on_loop_thread():
            return fn()

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(ACTION_TIMEOUT)

    def _submit(self, make: Callable[[], Any], what: str) -> concurrent.futures.Future | asyncio.Future | None:
        """Hand ``make()`` (a coroutine factory) to the portal and return at once; report the outcome."""
        self._local.what = what
        if self._closed_tree:
            self._say(f"Error: {what}: this tree is closed", error=True)
            return None
        if getattr(self._hub, "closed", False):
            self._say(f"Error: {what}: the hub is closed", error=True)
            return None
        self._say(f"{what} \u2026")
        if self._portal is not None:
            try:
                future: Any = self._portal.submit(make)
            except TohError as error:
                self._say(f"Error: {error}", error=True)
                return None
            future.add_done_callback(lambda f: self._finished(f, what))
            return future
        loop = self._loop or _running_loop()
        if loop is None or not loop.is_running():
            self._say(f"Error: {what}: the hub's loop is not running", error=True)
            return None
        if _running_loop() is loop:
            future = loop.create_task(make())
        else:
            future = asyncio.run_coroutine_threadsafe(make(), loop)
        future.add_done_callback(lambda f: self._finished(f, what))
        return future

    def _finished(self, future: Any, what: str) -> None:
        self._say(*_outcome(future, what))
        if not future.cancelled():
            self._mark_dirty()

    def _say(self, text: str, error: bool = False) -> None:
        error = bool(error or text.startswith("Error:"))
        self.last_message = text
        self._local.said = (text, error)
        with self.hold_sync():
            self.message = text
            self.message_error = error

    # -- actions (kernel thread: submit and return) ------------------------------------------------

    def _interrupt(self, agent_id: str) -> Any:
        hub = self._hub

        async def run() -> str:
            result = await hub.call_tool("interrupt_agent", agent_id=agent_id)
            return result.text

        return self._submit(run, f"interrupt {agent_id}")

    def _send_message(self, agent_id: str, text: Any) -> Any:
        if not isinstance(text, str) or not text.strip():
            self._say("Error: type a message first", error=True)
            return None
        hub = self._hub

        async def run() -> str:
            result = await hub.call_tool("send_message", subagent_id=agent_id, message=text)
            return result.text

        return self._submit(run, f"send to {agent_id}")

    def _kill(self, job_id: str) -> Any:
        hub = self._hub

        async def run() -> str:
            registry = hub.job_registry
            job = registry.jobs.get(job_id)
            if job is None:
                raise UsageError(f"{job_id} is not a job")
            # the notebook user owns the whole tree: act as the job's owner
            outcome = registry.kill(job_id, job.owner, "killed from the agent tree")
            if outcome == "requested":
                return job_texts.kill_requested(job_id)
            return job_texts.kill_already_finished(job_id, job.status, job.detail)

        return self._submit(run, f"kill {job_id}")

    def _answer(self, ask_id: Any, allowed: bool) -> str | None:
        """Answer a pending permission request (its Allow/Deny buttons); the agent's turn goes on."""
        if not any(ask["id"] == ask_id for ask in self.asks):
            raise UsageError(f"no pending permission request {ask_id!r} in this tree")
        module = sys.modules[PERMISSIONS_MODULE]
        line = module.answer(ask_id, allowed)
        self.asks = [ask for ask in self.asks if ask["id"] != ask_id]
        self._say(line)
        self._mark_dirty()
        return line

    def _show_transcript(self, agent_id: str) -> Any:
        hub = self._hub

        async def run() -> str:
            self.transcript = self._transcript_state(hub, agent_id)
            return f"transcript of {agent_id}"

        return self._submit(run, f"transcript of {agent_id}")

    def _transcript_state(self, hub: Any, agent_id: str) -> dict:
        row = next((r for r in self.rows if r["id"] == agent_id), None)
        return {"id": agent_id, "name": row["name"] if row else agent_id,
                "entries": chat_entries(hub.transcript(agent_id))}

    def _download(self, filename: str, text: str, mime: str) -> None:
        """Hand a file to the page, which saves it (the export buttons)."""
        message = {"type": "download", "filename": filename, "mime": mime, "text": text}
        self.downloads.append(message)
        self.send(message)
        self._say(f"exported {filename}")

    def export_json(self) -> str:
        """The whole tree (every agent and job row, as synced) as JSON text."""
        rows = [{k: v for k, v in row.items() if not k.startswith("can_")} for row in self.rows]
        return json.dumps({"summary": self.summary, "rows": rows}, ensure_ascii=False, indent=1)

    def export_markdown(self, agent_id: str) -> str:
        """An agent's transcript as Markdown (the chat view's export)."""
        hub = self._hub
        label = next((r["label"] for r in self.rows if r["id"] == agent_id), None)
        return self._call(lambda: chat_markdown(agent_id, chat_entries(hub.transcript(agent_id)), label))

    # -- rebuilding (loop thread) ------------------------------------------------------------------

    def refresh(self) -> None:
        """Rebuild the rows now (synchronously; runs on the engine's thread)."""
        if self._closed_tree:
            return
        if getattr(self._hub, "closed", False):
            self._rebuild()  # only marks the tree as closed: no engine access
            return
        self._call(self._rebuild)

    def _rebuild(self) -> None:
        if self._closed_tree:
            return
        if getattr(self._hub, "closed", False):
            self.hub_closed = True
            self.refresh_count += 1
            return
        base = tree_rows(self._hub)
        kept = base[:self.max_nodes]
        rows = widget_rows(kept)
        text = summary(base)
        shown = self.transcript.get("id") if self.transcript else None
        transcript = None
        if shown is not None:
            try:
                transcript = self._transcript_state(self._hub, shown)
            except Exception as error:
                transcript = {"id": shown, "name": shown, "entries": [], "error": str(error)}
        with self.hold_sync():
            self.now = time.time()
            if rows != self.rows:
                self.rows = rows
                self._refilter()
            if text != self.summary:
                self.summary = text
            if len(base) - len(kept) != self.hidden:
                self.hidden = len(base) - len(kept)
            if transcript is not None and transcript != self.transcript:
                self.transcript = transcript
            asks = pending_asks(row["id"] for row in rows)
            if asks != self.asks:
                self.asks = asks
        self.refresh_count += 1
        if any(row["status"] in ACTIVE for row in rows):
            self._arm_heartbeat()

    # -- display -----------------------------------------------------------------------------------

    def text(self) -> str:
        """The whole tree (agents and jobs) as deterministic text: what ``repr`` shows."""
        return self.static()["text/plain"]

    def static(self) -> dict:
        """The static snapshot ``{"text/plain": …, "text/html": …}`` of the whole tree, as a stored
        notebook shows it without a kernel; after ``close()`` (or once the hub closed) the last one."""
        if self._closed_tree or getattr(self._hub, "closed", False):
            return self._last_static or {"text/plain": "agent tree: (hub closed)",
                                         "text/html": "<i>agent tree: the hub is closed</i>"}
        bundle = self._call(lambda: static_bundle(tree_rows(self._hub)))
        self._last_static = bundle
        return bundle

    def __repr__(self) -> str:
        try:
            return self.text()
        except Exception as error:  # repr must not raise
            return f"AgentTree(unavailable: {type(error).__name__})"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict | None:
        return self._bundle(**kwargs)

    def _bundle(self, **kwargs: Any) -> dict:
        """The live view plus the static snapshot; a closed tree shows only its last snapshot."""
        try:
            static = self.static()
        except Exception as error:  # a display must not raise
            static = {"text/plain": f"AgentTree(unavailable: {type(error).__name__})"}
        if self._closed_tree:
            return dict(static)
        live = anywidget.AnyWidget._repr_mimebundle_(self, **kwargs)
        bundle = dict(live[0] if isinstance(live, tuple) else live or {})
        bundle.update(static)
        return bundle

    def _ipython_display_(self) -> None:
        """Display with a display id, so ``close()`` can replace the live view by the final snapshot
        (a stored notebook then shows the tree, not a blank cell)."""
        from IPython.display import display

        handle = display(self._bundle(), raw=True, display_id=True)
        if handle is not None and not self._closed_tree:
            self._handles.append(handle)

    def close(self) -> None:
        """Leave the final snapshot in every display of the tree, unsubscribe from the engine and close
        the widget model. Idempotent."""
        if self.__dict__.get("_closed_tree", True):
            if "_closed_tree" not in self.__dict__:  # construction failed before subscribing
                super().close()
            return
        try:
            final = self.static()
        except Exception:  # the hub's loop is gone: keep the last snapshot taken
            final = self._last_static
        self._closed_tree = True
        for handle in self._handles:
            if final is not None:
                try:
                    handle.update(final, raw=True)
                except Exception:
                    pass
        self._handles.clear()
        try:
            self._call(self._unsubscribe_all)
        except Exception:  # the hub's loop is gone: nothing runs the listeners any more
            self._unsubscribe_all()
        loop = self._loop
        for handle in (self._pending, self._heartbeat):
            if handle is not None and handle is not True and loop is not None and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(handle.cancel)
                except RuntimeError:
                    pass
        self._pending = self._heartbeat = None
        super().close()

    @property
    def closed(self) -> bool:
        return self._closed_tree
