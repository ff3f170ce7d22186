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

Threads and cost. The engine lives on the hub's portal loop (a daemon thread); its events reach the
widget's listener on that thread. The listener notes which agents and jobs the event touches
(:class:`~toh_nb.notebook.livetree.LiveRows`) and, if no refresh is pending, schedules one with
``loop.call_later(interval, …)``: however many events arrive, at most one refresh per ``interval`` (0.1 s
→ ≤ 10 per second), and after a refresh that took ``t`` on the engine's thread the next waits at least
``t / LOOP_SHARE`` (the tree keeps its share of that thread near 5 %). A refresh re-reads only what the
events touched and sends the page only the rows that changed (``{"type": "rows", "set", "drop",
"order", "now"}`` custom messages; a view that opens asks for all of them with ``hello``): one child
changing in a 10,000-row tree sends that child's row, not the list. Running rows are not sent again
every second: the page counts their elapsed time up from ``started``; a heartbeat only moves ``now``.
Actions run on the kernel's thread and hand their work to the portal without waiting; the outcome (the
same line a model would read, e.g. ``interrupt requested for agent agent-2``) appears in the tree's
message line (``message``).

Clicks while a cell runs. The tree exists to steer agents that are running, so a click must be handled
while a cell blocks in ``hub.run(...)``, ``kid.wait()`` or ``time.sleep``. ipykernel handles shell
messages on its main thread only between cells; JupyterLab >= 4.4 sends comm messages over a kernel
*subshell* (ipykernel >= 7 runs each subshell on its own thread), which is what makes a live click
possible. :mod:`toh_nb.notebook.kernel_routing` decides where the tree's messages are handled: on the
subshell the front-end chose (ipykernel 7.4 would send them back to the busy main shell), and, for a
front-end that sends them on the main shell (VS Code, ``commsOverSubshells`` off, a plain client)
while a cell runs there, on a subshell of our own. The tree's message handler is therefore
thread-safe (it only hands work to the portal and sets traits). On ipykernel 6 (no subshells) the
sync facade's blocking calls serve the tree's waiting messages themselves
(:mod:`toh_nb.notebook.kernel_pump`; a cell in ``time.sleep`` or ``input()`` does not). ipykernel
7.0–7.3 (subshells, no routing hook) still delivers main-shell clicks only between cells; the button
then stays pending until the kernel reads the click. What those two modules touch of the kernel's
insides is in :mod:`toh_nb.notebook.kernel_adapter`, each behind a version check (on a version it does
not know: as on ipykernel 7.0–7.3).

Every click of an action button carries a ``request`` number; the page marks the button pending at
once and the kernel answers ``{"type": "outcome", "request": n, "id", "action", "text", "error"}``
when the action finished (or could not run: the row then says why).

Displays: two outputs, the live view and then a static snapshot of the whole tree (``text/plain`` and
``text/html`` from :mod:`toh_nb.notebook.treeview`), so nbconvert, GitHub, nbval and a reopened notebook
show the tree without a kernel. The snapshot is kept current (when the tree settles, every
SNAPSHOT_EVERY seconds while something runs, after each cell); the page hides it beside the live view,
and it hides JupyterLab's "model not found" of a live view whose kernel is gone. ``close()`` (and
``hub.close()``) leaves the final snapshot and empties the live view's output.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import pathlib
import threading
import time
from typing import Any, Callable

import anywidget
import traitlets

from ..core.checks import check_count, check_seconds
from ..core.errors import TohError, UsageError
from .chat import chat_entries, chat_markdown
from . import kernel_pump
from .kernel_routing import keep_routing
from .display import short_id
from .livetree import Change, LiveRows
from .treeview import FORMATS, cell_text, display_status, extra_columns, extra_value, name_of, static_bundle, tree_rows
from .waterfall import Waterfall, span_message

HERE = pathlib.Path(__file__).resolve().parent
ACTION_TIMEOUT = 30.0  # seconds a synchronous refresh()/repr waits for the portal
HEARTBEAT = 1.0  # seconds between refreshes while something runs, so elapsed times keep moving
ACTIVE = ("running", "stopping")
LIVE = ("running", "stopping", "idle")
#: what the status filter offers (one vocabulary for agents and jobs)
STATUS_CHOICES = ("running", "stopping", "idle", "ready", "completed", "failed", "killed", "corrupt")
ACTIONS = ("interrupt", "send", "kill", "transcript", "close_transcript", "toggle", "export", "export_transcript",
           "allow", "deny", "span", "hello")
#: the widget-view MIME type (the live view's output)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: what the live view's output shows where there is no live view (an export, an untrusted notebook, after
#: close()): nothing -- the snapshot beside it shows the tree
NO_VIEW = {"text/html": ""}
#: while something runs, the displayed snapshot is brought up to date at most this often (seconds)
SNAPSHOT_EVERY = 5.0
#: when nothing runs, at most this often (a root that runs turn after turn settles after each)
SNAPSHOT_GAP = 1.0
#: the marker of the snapshot output beside a live view (``tree.css`` hides it while the view shows)
FALLBACK_CLASS = "toh-tree-fallback"
#: in the snapshot: where a saved notebook is reopened with no kernel that has the live view's model,
#: JupyterLab writes "Error displaying widget: model not found" in the live view's output (its widget
#: renderer then carries the class ``jupyter-widgets``, which it never has while it shows a view); this
#: rule hides that output in output areas that hold a snapshot (``:has`` may not nest: two compounds)
HIDE_DEAD_VIEW = ("<style>.jp-OutputArea:has(.toh-tree-fallback) > .jp-OutputArea-child:has(> "
                  ".jp-OutputArea-output.jupyter-widgets) { display: none; }</style>")
#: the share of the engine's loop thread an open tree may take: after a refresh that took ``t`` seconds
#: there, the next waits at least ``t / LOOP_SHARE`` (a 10,000-row tree refreshes less often, the
#: engine keeps at least 95 % of its thread)
LOOP_SHARE = 0.05


def _serve_while_busy(comm: Any) -> None:
    """Have the tree's clicks handled while a cell runs, whatever the kernel offers for it (see the
    module docstring): a subshell on ipykernel >= 7.4, the blocking hub calls' pump on ipykernel 6."""
    if comm is None:
        return
    keep_routing(comm)
    kernel_pump.register(comm)


def _resolve_hub(hub: Any) -> tuple[Any, Any]:
    """(the sync facade or None, the AsyncHub). The sync face is known by its public ``async_hub`` (an
    AsyncHub over the same engine), so this module never imports ``notebook/hub.py``, which imports it."""
    from ..hub import AsyncHub

    if isinstance(hub, AsyncHub):
        return None, hub
    inner = getattr(hub, "async_hub", None)
    if isinstance(inner, AsyncHub):
        return hub, inner
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
    extra = extra_columns()
    totals: dict[str, int] = {}
    counts: dict[str, int] = {}
    for row in reversed(rows):  # children come after their parent in pre-order
        total = own_tokens(row) + totals.get(row["id"], 0)
        totals[row["id"]] = total
        parent = row["tree_parent"]
        totals[parent] = totals.get(parent, 0) + total
        counts[parent] = counts.get(parent, 0) + 1
    return [page_row(row, totals[row["id"]], counts.get(row["id"], 0), extra) for row in rows]


def own_tokens(row: dict) -> int:
    """An agent's own tokens (in + out); a job has none of its own."""
    if row["kind"] != "agent":
        return 0
    return (row.get("input_tokens") or 0) + (row.get("output_tokens") or 0)


def page_row(row: dict, subtree_tokens: int, children: int, extra: list[str] | None = None) -> dict:
    """One row as the page gets it (see :func:`widget_rows`). A running or stopping row's ``elapsed_s``
    is None: the page counts it up from ``started`` itself, so a running agent's row does not change
    (and is not sent again) every second."""
    extra = extra_columns() if extra is None else extra
    status = display_status(row)
    agent = row["kind"] == "agent"
    started = row.get("started")
    elapsed = None if status in ACTIVE else row.get("elapsed_s")
    return {
        # the root named "root" shows as "root (you)" alone, not "root (you) root"
        "id": row["id"], "short": "" if row.get("mode") == "root" and row["id"] == "root" else short_id(row["id"]),
        "kind": row["kind"], "parent": row["tree_parent"],
        "level": row["level"], "name": name_of(row), "label": row.get("label") or "",
        "mode": (row.get("mode") or "") if agent else "job", "status": status,
        "turns": row.get("turns") or 0 if agent else None,
        "input_tokens": row.get("input_tokens") or 0 if agent else None,
        "output_tokens": row.get("output_tokens") or 0 if agent else None,
        "own_tokens": own_tokens(row), "subtree_tokens": subtree_tokens, "children": children,
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


def in_latest_request(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` in an empty context: a display update sent from the engine's thread then belongs to
    the kernel's latest request (ipykernel falls back to it), not to the long-finished cell whose context
    the engine's callbacks inherited -- nbclient and the front-ends apply updates of a live request."""
    return contextvars.Context().run(fn, *args, **kwargs)


def saved_snapshot(static: dict) -> dict:
    """The snapshot output shown beside a live view: ``static`` with its HTML marked (so the page hides
    it while the live view shows) and the rule that hides a dead view's error beside it."""
    bundle = dict(static)
    if "text/html" in bundle:
        bundle["text/html"] = f"<div class='{FALLBACK_CLASS}'>{HIDE_DEAD_VIEW}{bundle['text/html']}</div>"
    return bundle


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

    # one ES module and one style sheet: the tree, then the Timeline's waterfall (its own files)
    _esm = "\n".join((HERE / name).read_text(encoding="utf-8") for name in ("waterfall.js", "tree.js"))
    _css = "\n".join((HERE / name).read_text(encoding="utf-8") for name in ("tree.css", "waterfall.css"))

    #: every row (the first ``max_nodes``), kept in the kernel: the page gets them as deltas
    #: (``{"type": "rows", …}`` messages, see :meth:`_publish`), never the whole list per change
    rows = traitlets.List()
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
    #: the Timeline's data while it is shown: {agent id: activations} of the agents not running, and of
    #: the running ones (:mod:`toh_nb.notebook.waterfall`). ``waterfall`` is kept in the kernel and the
    #: page gets it as deltas (``{"type": "waterfall", "set": {id: activations}, "drop": [ids]}``, every
    #: agent once when a view opens, :meth:`_sync_waterfall`): an agent that settles sends its own
    #: activations, not the whole waterfall; ``waterfall_live`` (running agents only: small) is synced
    waterfall = traitlets.Dict()
    waterfall_live = traitlets.Dict().tag(sync=True)

    def __init__(self, hub: Any, *, interval: float = 0.1, max_nodes: int = 5000, **kwargs: Any) -> None:
        facade, inner = _resolve_hub(hub)
        check_seconds(interval, "interval", positive=True, none=None)
        check_count(max_nodes, "max_nodes")
        super().__init__(**kwargs)
        _serve_while_busy(self.comm)
        self.observe(lambda change: _serve_while_busy(change["new"]), names=["comm"])
        self.hub = hub
        self._facade = facade
        self._hub = inner
        self._view = inner.view  # the hub's plain reads on its loop thread (and its event stream)
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
        self._handles: list = []  # (live view, snapshot) display handles of each display of this tree
        self._shown_static: dict | None = None  # the snapshot those displays show
        self._snapshot_at = 0.0  # when it was last updated (time.monotonic())
        self._shell: Any = None  # the IPython shell whose post_run_cell keeps the snapshot current
        self._snapshot_timer: Any = None  # a pending look at the snapshot after SNAPSHOT_GAP
        self._portal = _portal_of(facade)
        self._loop = _portal_loop(facade, self._portal) or _running_loop()
        self._unsubscribe: Callable[[], None] | None = None
        self._live = LiveRows(inner, page_row)
        self._publish_lock = threading.RLock()
        self._sent: dict[str, dict] = {}  # what the page was sent of each row
        self._sent_order: list[str] = []
        self._hint: Change | None = None  # what the engine-side update changed (else: diff everything)
        self.busy_seconds = 0.0  # time the tree's refreshes took on the engine's loop thread
        self.last_cost = 0.0  # the last event-driven refresh's time there: spaces refreshes (LOOP_SHARE)
        self.on_msg(self._on_message)
        self._waterfall = Waterfall()
        self._waterfall_due = False  # the Timeline needs its waterfall built though no event came
        self._waterfall_sent: dict[str, list] = {}  # what the page was sent of each settled agent's activations
        self.observe(self._timeline_changed, names=["view", "visible"])
        self.observe(self._publish, names=["rows"])
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

    def act(self, action: str, node_id: str | None = None, text: Any = None) -> Any:
        """Do what a click in the page does: ``interrupt``/``send``/``kill``/``transcript``/
        ``close_transcript``/``toggle``/``export``/``export_transcript``/``span`` on row ``node_id``
        (``text``: the message for ``send``; for ``span``, which call of the Timeline: ``{"turn", "start"}``), or ``allow``/``deny`` on the pending permission request ``node_id``
        (an id from ``asks``). Work for the engine is handed to the portal; the return value is its
        future (or None; the answer's line for ``allow``/``deny``)."""
        if action not in ACTIONS:
            raise UsageError(f"unknown tree action {action!r}; expected one of {', '.join(ACTIONS)}")
        if action == "hello":  # a view of the tree opened in the page: it gets every row once
            return self._send_rows(full=True)
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
        if action == "span":
            return self._show_span(node_id, text)
        return self._download(f"{node_id}.md", self.export_markdown(node_id), "text/markdown")


    def _subscribe(self) -> None:
        self._unsubscribe = self._view.subscribe(self._on_event)  # the hub's one event stream

    def _unsubscribe_all(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    # -- engine events (portal thread) -------------------------------------------------------------

    def _on_event(self, event: Any) -> None:
        """Every engine event (on the engine's loop thread, like the scheduled refresh): note what it
        touches; schedule a refresh unless one is pending already (then nothing else to do: the hot
        path of a busy engine)."""
        self._live.note(event)
        if self._pending is not None and not self._closed_tree:
            self.event_count += 1
            self._dirty = True  # the pending refresh runs on this same thread: no lock needed
            return
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
            self._pending = loop.call_later(self.refresh_delay(), self._scheduled_refresh)
            return
        try:
            loop.call_soon_threadsafe(self._schedule_on_loop)
        except RuntimeError:  # the loop closed meanwhile
            self._pending = None

    def _schedule_on_loop(self) -> None:
        with self._lock:
            if self._pending is True:
                self._pending = self._loop.call_later(self.refresh_delay(), self._scheduled_refresh)

    def refresh_delay(self) -> float:
        """How long a refresh waits: ``interval``, longer after a costly refresh (:data:`LOOP_SHARE`)."""
        return max(self.interval, self.last_cost / LOOP_SHARE)

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
        """While an agent or job runs, move ``now`` once per HEARTBEAT (the timeline's right edge; the
        page counts running rows' elapsed times up itself): no rows are read or sent."""
        loop = self._loop
        if self._heartbeat is not None or loop is None or _running_loop() is not loop:
            return
        self._heartbeat = loop.call_later(HEARTBEAT, self._beat)

    def _beat(self) -> None:
        self._heartbeat = None
        if self._closed_tree or getattr(self._hub, "closed", False):
            return
        self.now = time.time()
        try:
            self._show_asks()  # an ask may wait without any event
        except Exception as error:  # a display problem must never reach the engine's loop
            self.errors.append(f"{type(error).__name__}: {error}")
        if self._live.active():
            self._arm_heartbeat()

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

        async def run() -> str:  # the notebook user owns the whole tree: kill_job acts as the job's owner
            return await hub.kill_job(job_id, "killed from the agent tree")

        return self._submit(run, f"kill {job_id}")

    def _answer(self, ask_id: Any, allowed: bool) -> str | None:
        """Answer a pending permission request (its Allow/Deny buttons); the agent's turn goes on."""
        if not any(ask["id"] == ask_id for ask in self.asks):
            raise UsageError(f"no pending permission request {ask_id!r} in this tree")
        line = self._view.answer_permission(ask_id, allowed)  # thread-safe: the loop may be busy
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
                "entries": chat_entries(hub.view.transcript(agent_id))}

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
        return self._call(lambda: chat_markdown(agent_id, chat_entries(hub.view.transcript(agent_id)), label))

    # -- rebuilding (loop thread) ------------------------------------------------------------------

    def refresh(self) -> None:
        """Read the whole tree again now (synchronously; runs on the engine's thread)."""
        if self._closed_tree:
            return
        if getattr(self._hub, "closed", False):
            self._rebuild()  # only marks the tree as closed: no engine access
            return
        self._call(lambda: self._rebuild(full=True))

    def _rebuild(self, full: bool = False) -> None:
        """Bring the rows up to date (what the events since the last refresh touched; everything when
        ``full``) and send the page what changed. On the engine's loop thread."""
        if self._closed_tree:
            return
        if getattr(self._hub, "closed", False):
            self.hub_closed = True
            self.refresh_count += 1
            return
        started = time.perf_counter()
        try:
            change = self._live.update(full=full)
            if change or full:
                self._show(change)
            else:
                self._show_asks()
            if self.view == "timeline" and (change or full or self._waterfall_due):
                self._waterfall_due = False  # opened, or its filter changed, with no event since
                self._sync_waterfall()
            try:
                self._keep_snapshot()
            except Exception as error:  # a display problem must never reach the engine's loop
                self.errors.append(f"{type(error).__name__}: {error}")
        finally:
            took = time.perf_counter() - started
            self.busy_seconds += took
            if not full:  # a full read (construction, refresh()) says nothing of what events cost
                self.last_cost = took
        self.refresh_count += 1
        if self._live.active():
            self._arm_heartbeat()

    def _show(self, change: Change) -> None:
        """Set the traits from the live rows after ``change`` (the rows themselves go by :meth:`_publish`)."""
        live = self._live
        rows = live.page_rows(self.max_nodes)
        hidden = len(live.order) - len(rows)
        text = live.summary()
        shown = self.transcript.get("id") if self.transcript else None
        transcript = None
        if shown is not None and (shown in change.rows or not change.rows):
            try:
                transcript = self._transcript_state(self._hub, shown)
            except Exception as error:
                transcript = {"id": shown, "name": shown, "entries": [], "error": str(error)}
        with self.hold_sync():
            self.now = time.time()
            self._hint = change
            try:
                self.rows = rows
            finally:
                self._hint = None
            if text != self.summary:
                self.summary = text
            if hidden != self.hidden:
                self.hidden = hidden
            if transcript is not None and transcript != self.transcript:
                self.transcript = transcript
            self._show_asks()

    def _show_asks(self) -> None:
        """The pending permission requests of the tree's agents (ACP ``permissions="ask"``)."""
        asks = self._view.pending_permissions(self._live.agent_ids)
        if asks != self.asks:
            self.asks = asks

    # -- the rows on the page: deltas ------------------------------------------------------------------

    def _publish(self, change: Any) -> None:
        """``rows`` changed: recompute what is visible when it can have changed, and send the page the
        rows it does not have as they are now (one row's change sends that row), the ids that left,
        and the order of the ids when it changed."""
        hint = self._hint
        rows = change["new"]
        with self._publish_lock:
            sent = self._sent
            if hint is not None and not hint.order and not hint.gone:
                ids = [key for key in hint.rows if key in sent]  # the same rows as before, some changed
                by_id = {row["id"]: row for row in rows} if len(ids) > 64 else None
                fresh = [by_id[key] if by_id is not None else self._live.items[key] for key in ids]
                fresh = [row for row in fresh if sent.get(row["id"]) != row]
                gone: list[str] = []
                order = None
            else:
                fresh = [row for row in rows if sent.get(row["id"]) != row]
                keep = {row["id"] for row in rows}
                gone = [key for key in sent if key not in keep]
                order = [row["id"] for row in rows]
                if order == self._sent_order:
                    order = None
            if fresh or gone or order is not None:
                self._refilter_if(fresh, gone, order)
                for key in gone:
                    sent.pop(key, None)
                for row in fresh:
                    sent[row["id"]] = row
                if order is not None:
                    self._sent_order = order
                self._post({"type": "rows", "set": fresh, "drop": gone, "order": order, "now": time.time()})

    def _refilter_if(self, fresh: list[dict], gone: list[str], order: list[str] | None) -> None:
        """Recompute ``visible`` unless nothing that decides it changed."""
        if order is not None or gone:
            self._refilter()
            return
        if not (self.query or self.status_filter or self.collapse_finished or self.collapsed):
            return  # no filter, no fold: every row is visible whatever its figures
        keys = ("status", "name", "label", "failure", "failures_below", "children")
        if any(any(self._sent.get(row["id"], {}).get(k) != row[k] for k in keys) for row in fresh):
            self._refilter()

    def _send_rows(self, full: bool = True) -> str:
        """Send the page every row and their order, and the Timeline's settled activations when it has
        some (a view that just opened asks with ``hello``)."""
        with self._publish_lock:
            rows = list(self.rows)
            self._sent = {row["id"]: row for row in rows}
            self._sent_order = [row["id"] for row in rows]
            self._post({"type": "rows", "full": True, "set": rows, "drop": [], "order": self._sent_order,
                                "now": time.time()})
            self._waterfall_sent = dict(self.waterfall)
            if self._waterfall_sent:  # the Timeline's settled activations, when it was built
                self._post({"type": "waterfall", "full": True, "set": self._waterfall_sent, "drop": []})
        return ""

    def _post(self, message: dict) -> None:
        try:
            self.send(message)
        except Exception as problem:  # no comm (closed): nothing to tell
            self.errors.append(f"{type(problem).__name__}: {problem}")

    def _timeline_changed(self, change: Any) -> None:
        """The Timeline opened, or its rows changed (a filter): its waterfall follows on the next refresh."""
        if self.view == "timeline":
            self._waterfall_due = True
            self._mark_dirty()

    def _sync_waterfall(self) -> None:
        """The shown agents' activations (loop thread; while the Timeline is open): the page is sent the
        settled agents whose activations it does not have as they are now, and the ids that left."""
        settled, live = self._waterfall.build(self._hub, self.rows, self.visible)
        with self._publish_lock:
            sent = self._waterfall_sent
            # an agent that did not move keeps the same list (Waterfall's cache): identity first
            fresh = {key: acts for key, acts in settled.items()
                     if key not in sent or (sent[key] is not acts and sent[key] != acts)}
            gone = [key for key in sent if key not in settled]
            if fresh or gone:
                for key in gone:
                    del sent[key]
                sent.update(fresh)
                self._post({"type": "waterfall", "set": fresh, "drop": gone})
            self.waterfall = settled
        with self.hold_sync():
            if live != self.waterfall_live:
                self.waterfall_live = live

    def _show_span(self, agent_id: str, where: Any) -> Any:
        """A click on a span of the Timeline (``where``: ``{"turn", "start"}``): its messages go to the page."""
        if not isinstance(where, dict):
            raise UsageError(f"span needs {{'turn', 'start'}}, got {where!r}")
        hub, turn, start = self._hub, where.get("turn"), where.get("start")

        async def run() -> str:
            self.send(span_message(agent_id, hub.view.activations(agent_id), turn, start))
            return f"messages of {agent_id} turn {turn}"

        return self._submit(run, f"messages of {agent_id} turn {turn}")

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
        """Two outputs: the live view, then the static snapshot (:func:`saved_snapshot`), each with a
        display id. The snapshot is what a saved or exported notebook shows: it is kept current while the
        tree lives (:meth:`_keep_snapshot`; it is hidden beside the live view by ``tree.css``), and
        ``close()`` leaves the final snapshot and empties the live view's output. Updating the snapshot
        never touches the live view (updating an output re-creates the views in it)."""
        from IPython.display import display

        if self._closed_tree:
            display(self._bundle(), raw=True)
            return
        try:
            static = self.static()
        except Exception as error:  # a display must not raise
            static = {"text/plain": f"AgentTree(unavailable: {type(error).__name__})"}
        live = anywidget.AnyWidget._repr_mimebundle_(self)
        live = {k: v for k, v in dict(live[0] if isinstance(live, tuple) else live or {}).items() if k == WIDGET_VIEW}
        live.update(NO_VIEW)
        view = display(live, raw=True, display_id=True)
        snapshot = display(saved_snapshot(static), raw=True, display_id=True)
        if view is not None and snapshot is not None:
            with self._publish_lock:
                self._handles.append((view, snapshot))
                self._shown_static = static
            self._hook_cells()

    def _keep_snapshot(self, force: bool = False) -> None:
        """Bring the displayed snapshots up to date with the rows (on the engine's loop thread, after a
        refresh): when nothing runs any more, or every SNAPSHOT_EVERY seconds while something does."""
        if not self._handles or self._closed_tree:
            return
        now = time.monotonic()
        wait = (SNAPSHOT_EVERY if self._live.active() else SNAPSHOT_GAP) - (now - self._snapshot_at)
        if not force and wait > 0:
            if not self._live.active() and self._snapshot_timer is None and self._loop is not None:
                # settled within the gap: look again when it is over (no later event may come)
                self._snapshot_timer = self._loop.call_later(wait, self._snapshot_due)
            return
        static = static_bundle(self._live.rows())
        with self._publish_lock:
            if static == self._shown_static:
                return
            self._shown_static, self._snapshot_at = static, now
            for _, snapshot in self._handles:
                try:
                    in_latest_request(snapshot.update, saved_snapshot(static), raw=True)
                except Exception as problem:  # no kernel display machinery: nothing to keep
                    self.errors.append(f"{type(problem).__name__}: {problem}")

    def _snapshot_due(self) -> None:
        self._snapshot_timer = None
        try:
            self._keep_snapshot()
        except Exception as error:  # a display problem must never reach the engine's loop
            self.errors.append(f"{type(error).__name__}: {error}")

    def _after_cell(self, *_: Any) -> None:
        """After each cell (IPython's ``post_run_cell``): the snapshot is brought up to date while the
        cell's request is still the kernel's latest, so every front-end and nbclient apply it."""
        if self._closed_tree or not self._handles or getattr(self._hub, "closed", False):
            return
        try:
            self._call(lambda: self._keep_snapshot(force=True))
        except Exception as error:  # never into the user's cell
            self.errors.append(f"{type(error).__name__}: {error}")

    def _hook_cells(self) -> None:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None and self._shell is None:
            shell.events.register("post_run_cell", self._after_cell)
            self._shell = shell

    def _unhook_cells(self) -> None:
        shell, self._shell = self._shell, None
        if shell is not None:
            try:
                shell.events.unregister("post_run_cell", self._after_cell)
            except ValueError:
                pass

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
        with self._publish_lock:
            for view, snapshot in self._handles:
                try:
                    if final is not None:  # marked as while live: a tree that did not change stores the same
                        snapshot.update(saved_snapshot(final), raw=True)
                    view.update(NO_VIEW, raw=True)  # the live view's output empties; the snapshot stays
                except Exception:
                    pass
            self._handles.clear()
        self._unhook_cells()
        try:
            self._call(self._unsubscribe_all)
        except Exception:  # the hub's loop is gone: nothing runs the listeners any more
            self._unsubscribe_all()
        loop = self._loop
        for handle in (self._pending, self._heartbeat, self._snapshot_timer):
            if handle is not None and handle is not True and loop is not None and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(handle.cancel)
                except RuntimeError:
                    pass
        self._pending = self._heartbeat = self._snapshot_timer = None
        super().close()

    @property
    def closed(self) -> bool:
        return self._closed_tree
