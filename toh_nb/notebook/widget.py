"""The live agent-tree widget (``hub.tree()``), built only from ipywidgets' own widgets.

One node per agent of the hub's tree (the root, continuable and one-shot children, live or stored) with
its label, id, mode, a status badge, depth, turns, tokens and elapsed time; background jobs sit under
their owner, with the job's child agent nested under the job. Every node can be expanded or collapsed
and carries its actions: *Interrupt* and *Send* (continuable children), *Kill* (jobs) and *Transcript*
(every agent: the transcript table rendered into the node).

Threads. The engine lives on the hub's portal loop (a daemon thread); status changes and lifecycle
events (``subagent/*``, ``job/*``) reach the widget's listeners on that thread. A listener only marks the
tree dirty and, if no refresh is pending, schedules one with ``loop.call_later(interval, …)``: however
many events arrive, the tree is rebuilt at most once per ``interval`` (0.1 s → ≤ 10 refreshes per
second), and the rebuild reads the engine on its own thread, so it never races it and never blocks the
kernel. While something runs, a heartbeat marks the tree dirty once a second so elapsed times move.
Button callbacks run on the kernel's thread; they hand their work to the portal (``hub.portal.submit``,
or ``run_coroutine_threadsafe`` for a bare AsyncHub) and return at once; the outcome (the same line a
model would read, e.g. ``interrupt requested for agent agent-2``) appears in the tree's message line.

``repr(tree)`` — the widget's ``text/plain`` — is the deterministic ``list_agents`` descendants text,
so a stored notebook output compares stably.

Testing without a browser: ``tree.nodes`` maps ids (agent ids and job ids) to :class:`TreeNode` objects
(``.status``, ``.label``, ``.interrupt_button``, ``.send_text``/``.send_button``, ``.kill_button``,
``.transcript_button``, ``.expanded``); ``tree.refresh()`` rebuilds synchronously; ``tree.refresh_count``
counts rebuilds; ``tree.close()`` unsubscribes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import html
import threading
from typing import Any, Callable

import ipywidgets as widgets

from ..core.checks import is_int_at_least
from ..core.errors import TohError, UsageError
from ..jobs import texts as job_texts
from ..results import STATUS_COLOURS
from .display import format_elapsed
from .tables import transcript_frame
from .treeview import static_bundle, tree_rows, tree_text

ACTION_TIMEOUT = 30.0  # seconds a synchronous refresh()/repr waits for the portal
HEARTBEAT = 1.0  # seconds between refreshes while something runs, so elapsed times keep moving


def _resolve_hub(hub: Any) -> tuple[Any, Any]:
    """(the facade or None, the AsyncHub-like object with ``.runtime``)."""
    if hasattr(hub, "runtime") and hasattr(hub, "agent_rows"):
        return None, hub
    for name in ("async_hub", "_async", "_hub", "_ahub", "aio", "_inner"):
        inner = getattr(hub, name, None)
        if inner is not None and hasattr(inner, "runtime") and hasattr(inner, "agent_rows"):
            return hub, inner
    raise UsageError(f"AgentTree needs a toh_nb.Hub or AsyncHub, got {type(hub).__name__}")


def _portal_of(facade: Any) -> Any:
    """The facade's portal (``.loop``, ``.call(fn)``, ``.submit(fn)``), if it exposes one."""
    if facade is None:
        return None
    for name in ("portal", "_portal"):
        portal = getattr(facade, name, None)
        if portal is not None and hasattr(portal, "submit") and hasattr(portal, "call"):
            return portal
    return None


def _portal_loop(facade: Any, portal: Any) -> asyncio.AbstractEventLoop | None:
    """The loop the facade runs the engine on, if it exposes one."""
    for owner in (portal, facade):
        if owner is None:
            continue
        for name in ("loop", "_loop"):
            loop = getattr(owner, name, None)
            if isinstance(loop, asyncio.AbstractEventLoop):
                return loop
    return None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _badge(status: str) -> str:
    colour = STATUS_COLOURS.get(status, "#424242")
    return (f"<span style='background:{colour};color:white;border-radius:8px;padding:0 6px;"
            f"font-size:85%'>{html.escape(status)}</span>")


def node_shape(kind: str, row: dict) -> tuple:
    """What decides a node's widgets (its buttons): a change rebuilds the node."""
    return (kind, row.get("mode") == "continuable")


class TreeNode:
    """One row of the tree: an agent (``kind="agent"``) or a background job (``kind="job"``).

    Plain attributes mirror the last snapshot (``status``, ``label``, ``mode``, ``depth``, ``turns``,
    ``input_tokens``, ``output_tokens``, ``elapsed_s``, ``parent`` = the node it sits under); the widgets
    are attributes too, ``None`` where an action does not apply.
    """

    def __init__(self, tree: "AgentTree", kind: str, node_id: str, row: dict) -> None:
        self.tree = tree
        self.kind = kind
        self.id = node_id
        self.shape = node_shape(kind, row)
        self.row: dict = {}
        self.parent: str | None = None
        self.expanded = True
        self.transcript_shown = False
        self.toggle = widgets.Button(description="", icon="caret-down", tooltip="collapse",
                                     layout=widgets.Layout(width="28px", padding="0"))
        self.toggle.on_click(lambda _: self.set_expanded(not self.expanded))
        self.info = widgets.HTML(layout=widgets.Layout(flex="1 1 auto"))
        small = widgets.Layout(width="auto")
        self.interrupt_button: widgets.Button | None = None
        self.send_text: widgets.Text | None = None
        self.send_button: widgets.Button | None = None
        self.kill_button: widgets.Button | None = None
        self.transcript_button: widgets.Button | None = None
        buttons: list = []
        rows: list = []
        if kind == "job":
            self.kill_button = widgets.Button(description="Kill", icon="stop", button_style="danger",
                                              tooltip=f"kill job {node_id}", layout=small)
            self.kill_button.on_click(lambda _: tree._kill(self.id))
            buttons.append(self.kill_button)
        else:
            if row.get("mode") == "continuable":
                self.interrupt_button = widgets.Button(description="Interrupt", icon="pause", button_style="warning",
                                                       tooltip=f"stop the current turn of {node_id}", layout=small)
                self.interrupt_button.on_click(lambda _: tree._interrupt(self.id))
                buttons.append(self.interrupt_button)
                self.send_text = widgets.Text(placeholder=f"message for {node_id}",
                                              layout=widgets.Layout(width="360px"))
                self.send_button = widgets.Button(description="Send", icon="paper-plane", tooltip=f"message {node_id}",
                                                  layout=small)
                self.send_button.on_click(lambda _: tree._send(self.id))
                rows.append(widgets.HBox([self.send_text, self.send_button]))
            self.transcript_button = widgets.Button(description="Transcript", icon="list", layout=small,
                                                    tooltip=f"show the transcript of {node_id}")
            self.transcript_button.on_click(lambda _: tree._toggle_transcript(self.id))
            buttons.append(self.transcript_button)
        self.transcript = widgets.HTML(layout=widgets.Layout(display="none", overflow="auto", max_height="320px"))
        self.children_box = widgets.VBox(layout=widgets.Layout(margin="0 0 0 22px",
                                                               border_left="1px solid #ddd"))
        self.body = widgets.VBox(rows + [self.transcript, self.children_box],
                                 layout=widgets.Layout(margin="0 0 0 22px" if rows else "0"))
        self.header = widgets.HBox([self.toggle, self.info] + buttons,
                                   layout=widgets.Layout(align_items="center"))
        self.widget = widgets.VBox([self.header, self.body])
        self.update(row)

    # -- snapshot fields ---------------------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        row = self.__dict__.get("row")
        if row is not None and name in row:
            return row[name]
        raise AttributeError(name)

    @property
    def status(self) -> str:
        return self.row.get("status") or "unknown"

    @property
    def label(self) -> str | None:
        return self.row.get("label")

    def update(self, row: dict) -> None:
        self.row = row
        self.parent = row.get("tree_parent")
        value = self._info_html()
        if self.info.value != value:
            self.info.value = value
        if self.interrupt_button is not None:
            disabled = self.status != "running"
            if self.interrupt_button.disabled != disabled:
                self.interrupt_button.disabled = disabled
        if self.send_button is not None:
            disabled = not row.get("can_send", False)
            if self.send_button.disabled != disabled:
                self.send_button.disabled = disabled
                self.send_text.disabled = disabled
        if self.kill_button is not None:
            disabled = self.status not in ("running",)
            if self.kill_button.disabled != disabled:
                self.kill_button.disabled = disabled

    def _info_html(self) -> str:
        row = self.row
        esc = html.escape
        if self.kind == "job":
            parts = ["background job", f"owner {row.get('owner') or '-'}"]
            if row.get("child_id"):
                parts.append(f"child {row['child_id']}")
            if row.get("detail"):
                parts.append(str(row["detail"]))
            parts.append(format_elapsed(row.get("elapsed_s")))
            return (f"<b>{esc(row.get('label') or '')}</b> <code>{esc(self.id)}</code> {_badge(self.status)} "
                    f"<small style='color:#666'>{esc(' · '.join(p for p in parts if p))}</small>")
        label = row.get("label") or ("root (you)" if row.get("mode") == "root" else "")
        parts = [row.get("mode") or "agent", f"depth {row.get('depth', 0)}",
                 f"turns {row.get('turns', 0)}",
                 f"tokens {row.get('input_tokens', 0)} in / {row.get('output_tokens', 0)} out",
                 format_elapsed(row.get("elapsed_s"))]
        if row.get("stop_reason") and row.get("stop_reason") != "completed":
            parts.append(f"last stop: {row['stop_reason']}")
        return (f"<b>{esc(label)}</b> <code>{esc(self.id)}</code> {_badge(self.status)} "
                f"<small style='color:#666'>{esc(' · '.join(p for p in parts if p))}</small>")

    def set_children(self, children: list) -> None:
        boxes = tuple(child.widget for child in children)
        if self.children_box.children != boxes:
            self.children_box.children = boxes
        self._sync_toggle()

    def set_expanded(self, expanded: bool) -> None:
        self.expanded = bool(expanded)
        display = None if self.expanded else "none"
        if self.body.layout.display != display:
            self.body.layout.display = display
        self._sync_toggle()

    def _sync_toggle(self) -> None:
        icon = "caret-down" if self.expanded else "caret-right"
        if self.toggle.icon != icon:
            self.toggle.icon = icon
        tip = "collapse" if self.expanded else "expand"
        if self.toggle.tooltip != tip:
            self.toggle.tooltip = tip

    def close(self) -> None:
        for w in (self.widget, self.header, self.body, self.children_box, self.toggle, self.info, self.transcript,
                  self.interrupt_button, self.send_text, self.send_button, self.kill_button, self.transcript_button):
            if w is not None:
                w.close()

    def __repr__(self) -> str:
        return f"TreeNode({self.kind} {self.id} [{self.status}] \u2014 {self.label or ''})"


class AgentTree(widgets.VBox):
    """The live tree of a hub's agents and jobs. Create with ``hub.tree()`` or ``AgentTree(hub)``.

    ``hub`` is a :class:`toh_nb.Hub` (the sync facade) or an :class:`toh_nb.AsyncHub`. ``interval`` is the
    coalescing delay in seconds (at most one rebuild per interval, whatever the event rate);
    ``max_nodes`` caps how many nodes are drawn (the rest are counted in the summary line).
    """

    def __init__(self, hub: Any, *, interval: float = 0.1, max_nodes: int = 500, **kwargs: Any) -> None:
        facade, inner = _resolve_hub(hub)
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
            raise UsageError(f"interval must be a positive number of seconds, got {interval!r}")
        if not is_int_at_least(max_nodes, 1):
            raise UsageError(f"max_nodes must be an integer >= 1, got {max_nodes!r}")
        self.summary = widgets.HTML()
        self.message = widgets.HTML()
        self.roots_box = widgets.VBox()
        super().__init__([self.summary, self.roots_box, self.message], **kwargs)
        self.hub = hub
        self._facade = facade
        self._hub = inner
        self._runtime = inner.runtime
        self.interval = float(interval)
        self.max_nodes = max_nodes
        self.nodes: dict[str, TreeNode] = {}
        self.refresh_count = 0
        self.event_count = 0
        self.errors: list[str] = []
        self.last_message = ""
        self._lock = threading.Lock()
        self._dirty = False
        self._pending: Any = None
        self._heartbeat: Any = None
        self._closed_tree = False
        self._last_static: dict | None = None
        self._handles: list = []  # displays of this tree, updated to the final snapshot on close()
        self._portal = _portal_of(facade)
        self._loop = _portal_loop(facade, self._portal) or _running_loop()
        self._unsubscribe: Callable[[], None] | None = None
        # the engine iterates its listener lists on its own thread: change them there
        self._call(self._subscribe)
        self.refresh()

    def _subscribe(self) -> None:
        self._runtime.status_listeners.append(self._on_status)
        self._unsubscribe = self._runtime.bus.subscribe(self._on_event)

    def _unsubscribe_all(self) -> None:
        try:
            self._runtime.status_listeners.remove(self._on_status)
        except ValueError:
            pass
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    # -- engine events (portal thread) -------------------------------------------------------------

    def _on_status(self, agent: Any) -> None:
        self._mark_dirty()

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
        if self._closed_tree:
            self._say(f"{what}: this tree is closed")
            return None
        if getattr(self._hub, "closed", False):
            self._say(f"{what}: the hub is closed")
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
            self._say(f"{what}: the hub's loop is not running")
            return None
        if _running_loop() is loop:
            future = loop.create_task(make())
        else:
            future = asyncio.run_coroutine_threadsafe(make(), loop)
        future.add_done_callback(lambda f: self._finished(f, what))
        return future

    def _finished(self, future: Any, what: str) -> None:
        if future.cancelled():
            self._say(f"{what}: cancelled")
            return
        error = future.exception()
        if error is not None:
            self._say(f"Error: {error}" if isinstance(error, TohError) else f"Error: {type(error).__name__}: {error}",
                      error=True)
        else:
            self._say(str(future.result()))
        self._mark_dirty()

    def _say(self, text: str, error: bool = False) -> None:
        self.last_message = text
        colour = "#c62828" if error or text.startswith("Error:") else "#444"
        self.message.value = f"<pre style='margin:2px 0;color:{colour};white-space:pre-wrap'>{html.escape(text)}</pre>"

    # -- actions (kernel thread: submit and return) ------------------------------------------------

    def _interrupt(self, agent_id: str) -> Any:
        hub = self._hub

        async def run() -> str:
            result = await hub.call_tool("interrupt_agent", agent_id=agent_id)
            return result.text

        return self._submit(run, f"interrupt {agent_id}")

    def _send(self, agent_id: str) -> Any:
        node = self.nodes.get(agent_id)
        if node is None or node.send_text is None:
            return None
        text = node.send_text.value
        if not text.strip():
            self._say("Error: type a message first", error=True)
            return None
        node.send_text.value = ""
        hub = self._hub

        async def run() -> str:
            result = await hub.call_tool("send_message", subagent_id=agent_id, message=text)
            return result.text

        return self._submit(run, f"send to {agent_id}")

    def _kill(self, job_id: str) -> Any:
        hub = self._hub

        async def run() -> str:
            registry = hub._jobs
            job = registry.jobs.get(job_id)
            if job is None:
                raise UsageError(f"unknown job {job_id}")
            # the notebook user owns the whole tree: act as the job's owner
            outcome = registry.kill(job_id, job.owner, "killed from the agent tree")
            if outcome == "requested":
                return job_texts.kill_requested(job_id)
            return job_texts.kill_already_finished(job_id, job.status, job.detail)

        return self._submit(run, f"kill {job_id}")

    def _toggle_transcript(self, agent_id: str) -> Any:
        node = self.nodes.get(agent_id)
        if node is None:
            return None
        if node.transcript_shown:
            node.transcript_shown = False
            node.transcript.layout.display = "none"
            node.transcript_button.description = "Transcript"
            return None
        node.transcript_shown = True
        node.transcript_button.description = "Hide transcript"
        node.transcript.layout.display = None
        if not node.expanded:
            node.set_expanded(True)
        hub = self._hub

        async def run() -> str:
            node.transcript.value = self._transcript_html(hub.transcript_rows(agent_id))
            return f"transcript of {agent_id}"

        return self._submit(run, f"transcript of {agent_id}")

    @staticmethod
    def _transcript_html(rows: list[dict]) -> str:
        frame = transcript_frame(rows)
        if not len(frame):
            return "<i>(empty transcript)</i>"
        return frame.to_html(index=False, na_rep="", escape=True, border=0)

    # -- rebuilding (loop thread) ------------------------------------------------------------------

    def refresh(self) -> None:
        """Rebuild the tree now (synchronously; runs on the engine's thread)."""
        if self._closed_tree:
            return
        if getattr(self._hub, "closed", False):
            self._rebuild()  # only marks the tree as closed: no engine access
            return
        self._call(self._rebuild)

    def _snapshot(self) -> list[dict]:
        """Every node's row in display order (pre-order), with ``tree_parent``."""
        return tree_rows(self._hub)

    def _rebuild(self) -> None:
        if self._closed_tree:
            return
        if getattr(self._hub, "closed", False):
            self.summary.value = "<i>the hub is closed</i>"
            self.refresh_count += 1
            return
        rows = self._snapshot()
        children: dict[str | None, list[dict]] = {}
        for row in rows:
            children.setdefault(row["tree_parent"], []).append(row)
        for siblings in children.values():
            siblings.sort(key=lambda r: (r.get("started") or 0.0, r["id"]))
        # pre-order walk from the top, bounded by max_nodes
        order: list[dict] = []
        stack = list(reversed(children.get(None, [])))
        while stack and len(order) < self.max_nodes:
            row = stack.pop()
            order.append(row)
            stack.extend(reversed(children.get(row["id"], [])))
        shown = {row["id"] for row in order}
        for row in order:
            node = self.nodes.get(row["id"])
            expanded = True
            if node is not None and node.shape != node_shape(row["kind"], row):
                # e.g. a child first seen in its creation window, before its descriptor says continuable
                expanded = node.expanded
                node.close()
                node = None
            if node is None:
                node = self.nodes[row["id"]] = TreeNode(self, row["kind"], row["id"], row)
                if not expanded:
                    node.set_expanded(False)
            else:
                node.update(row)
        for gone in [key for key in self.nodes if key not in shown]:
            self.nodes.pop(gone).close()
        for row in order:
            node = self.nodes[row["id"]]
            node.set_children([self.nodes[c["id"]] for c in children.get(row["id"], []) if c["id"] in shown])
            if node.transcript_shown and node.kind == "agent":
                try:
                    value = self._transcript_html(self._hub.transcript_rows(node.id))
                except Exception as error:
                    value = f"<i>{html.escape(str(error))}</i>"
                if node.transcript.value != value:
                    node.transcript.value = value
        tops = tuple(self.nodes[row["id"]].widget for row in children.get(None, []) if row["id"] in shown)
        if self.roots_box.children != tops:
            self.roots_box.children = tops
        agents = [r for r in rows if r["kind"] == "agent"]
        jobs = [r for r in rows if r["kind"] == "job"]
        running = sum(1 for r in agents if r["status"] == "running")
        active_jobs = sum(1 for r in jobs if r["status"] in ("running", "stopping"))
        hidden = len(rows) - len(order)
        summary = (f"<b>agent tree</b> \u2014 {len(agents)} agent{'s' if len(agents) != 1 else ''}, "
                   f"{running} running; {len(jobs)} job{'s' if len(jobs) != 1 else ''}, {active_jobs} active")
        if hidden:
            summary += f" <i>({hidden} more not shown; max_nodes={self.max_nodes})</i>"
        if self.summary.value != summary:
            self.summary.value = summary
        self.refresh_count += 1
        if running or active_jobs:
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
        """The live view plus the static snapshot (text/plain untruncated: ipywidgets cuts reprs at 110
        characters); a closed tree shows only its last snapshot."""
        try:
            static = self.static()
        except Exception as error:  # a display must not raise
            static = {"text/plain": f"AgentTree(unavailable: {type(error).__name__})"}
        if self._closed_tree:
            return dict(static)
        bundle = widgets.VBox._repr_mimebundle_(self, **kwargs) or {}
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
        """Unsubscribe from the engine and close every widget of the tree. Idempotent."""
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
        for node in self.nodes.values():
            node.close()
        self.nodes.clear()
        for w in (self.summary, self.message, self.roots_box):
            w.close()
        super().close()

    @property
    def closed(self) -> bool:
        return self._closed_tree
