"""The live tree's rows, kept up to date from the hub's event stream (no widgets here).

Why: the tree used to rebuild every row on each refresh -- re-reading every agent's log on the engine's
loop thread (14 ms at 1,000 rows, 76 ms at 5,000, up to 187 ms with a long root log; a busy root ran at a
third of its speed with a tree open) -- and sent the whole row list to the page when one child changed.
Here the rows are read in full once (:meth:`LiveRows.update` with ``full=True``); after that each event
only notes which agents and jobs it touches (:meth:`LiveRows.note`, cheap, on the loop), and an update
re-reads those alone (``hub.agent_rows(ids)``, the jobs from the registry), recomputes the subtree
figures (tokens, cost, failures below, tokens left) along their ancestors only, and converts only the
rows that changed into the page's form. :class:`Change` says what to send: the rows that changed,
the ones that left, and whether the order changed.

The reads of the engine are the three functions at the top (``_read_all``, ``_read_agents``,
``_read_jobs``): the only lines to change when the hub grows other public ways to read them.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from .treeview import (diagnostic_of, extra_columns, hub_jobs, is_failure, job_row, jobs_by_child, outcome_of,
                       place_agent, summary_counts, summary_text, tree_rows)

#: statuses during which a row's elapsed time moves (the page counts it up)
ACTIVE = ("running", "stopping")


def _read_all(hub: Any) -> list[dict]:
    """Every row of the tree (pre-order, marked): one full read."""
    return tree_rows(hub)


def _read_agents(hub: Any, ids: list[str]) -> list[dict]:
    """The rows of these agents alone (own figures; no subtree columns)."""
    return hub.view.agent_rows(ids)


def _read_jobs(hub: Any) -> dict[str, Any]:
    """The hub's jobs by id."""
    return {job["id"]: job for job in hub_jobs(hub)}


@dataclass
class Change:
    """What an update changed: ``rows`` (ids of page rows that are new or differ), ``gone`` (ids no
    longer in the tree) and ``order`` (whether the pre-order of ids changed)."""

    rows: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    order: bool = False

    def __bool__(self) -> bool:
        return bool(self.rows or self.gone or self.order)


class LiveRows:
    """The rows of one hub's tree. ``note`` and ``update`` run on the hub's loop thread.

    ``page(row, subtree_tokens, children)`` turns a marked tree row into the page's row (the widget's
    :func:`~toh_nb.notebook.widget.page_row`)."""

    def __init__(self, hub: Any, page: Any) -> None:
        self.hub = hub
        self.page = page
        self.base: dict[str, dict] = {}  # tree rows (own figures, plus the subtree ones kept current)
        self.items: dict[str, dict] = {}  # page rows
        self.kids: dict[str | None, list[tuple]] = {}  # tree_parent -> [(started, id)] in sibling order
        self.order: list[str] = []  # ids in pre-order
        self.totals: dict[str, tuple[int, float | None, int]] = {}  # id -> (subtree tokens, cost, failures)
        self.root: str | None = None
        self.agent_ids: set[str] = set()
        self.counts: dict[str, tuple] = {}  # id -> what the row adds to the summary
        self.totals_line = [0, 0, 0, 0, 0, 0.0, 0]  # the summary's counts (summary_counts summed)
        self.active_ids: set[str] = set()  # rows running or stopping
        self.agents_touched: set[str] = set()
        self.jobs_touched: set[str] = set()
        self.stale = True  # nothing read yet: the next update reads everything

    # -- events (loop thread: cheap) -----------------------------------------------------------------

    def note(self, event: Any) -> None:
        """Remember what ``event`` touches (its agent, its job and the job's child)."""
        if event.agent_id is not None:
            self.agents_touched.add(event.agent_id)
        job = getattr(event, "job", None)
        if job is not None:
            self.jobs_touched.add(job)
        child = getattr(event, "child_id", None)
        if child is not None:
            self.agents_touched.add(child)

    @property
    def pending(self) -> bool:
        return self.stale or bool(self.agents_touched or self.jobs_touched)

    # -- updates (loop thread) -------------------------------------------------------------------------

    def update(self, full: bool = False) -> Change:
        """Bring the rows up to date: everything (``full``, or the first time), else what the noted
        events touched."""
        if full or self.stale:
            return self._update_all()
        agents, self.agents_touched = self.agents_touched, set()
        jobs, self.jobs_touched = self.jobs_touched, set()
        if not agents and not jobs:
            return Change()
        moved = False
        touched: list[str] = []
        fresh = [row for row in _read_agents(self.hub, sorted(agents)) if row["status"] != "corrupt"
                 or row["id"] in self.base]
        new = any(row["id"] not in self.base for row in fresh)
        all_jobs = _read_jobs(self.hub) if jobs or new else {}
        by_child = jobs_by_child(all_jobs.values())
        olds = {row["id"]: self.base.get(row["id"]) for row in fresh}
        for row in fresh:
            row["kind"] = "agent"
            self.agent_ids.add(row["id"])
        for row in fresh:
            old = olds[row["id"]]
            place_agent(row, by_child, self.agent_ids, self.root, self.hub.closed)
            if old is not None and not all_jobs and old.get("parent") == row["parent"]:
                row["tree_parent"] = old["tree_parent"]  # jobs not read: it stays where it was
            row["level"] = old.get("level", 0) if old is not None else 0
            self.base[row["id"]] = row
        for row in fresh:
            moved |= self._placed(row)
            touched.append(row["id"])
        for job_id in jobs:
            job = all_jobs.get(job_id)
            if job is None:
                continue
            row = job_row(job, self.agent_ids, self.root)
            old = self.base.get(job_id)
            row["level"] = old.get("level", 0) if old is not None else 0
            self.base[job_id] = row
            moved |= self._placed(row)
            touched.append(job_id)
            child = self.base.get(job["child_id"]) if job["child_id"] else None
            if child is not None and child.get("parent") == job["owner"] and child["tree_parent"] != job_id:
                child["tree_parent"] = job_id  # the job learned its child after the child's row was read
                moved |= self._placed(child)
                touched.append(child["id"])
        relevelled = self._reorder() if moved else set()
        return self._settle(touched, moved, relevelled)

    def _update_all(self) -> Change:
        self.stale = False
        self.agents_touched.clear()
        self.jobs_touched.clear()
        rows = _read_all(self.hub)
        self.root = rows[0]["id"] if rows else None
        previous = set(self.items)
        self.base = {row["id"]: row for row in rows}
        self.agent_ids = {row["id"] for row in rows if row["kind"] == "agent"}
        self.kids = {}
        for row in rows:  # pre-order: siblings already in order
            self.kids.setdefault(row["tree_parent"], []).append(self._key(row))
        old_order, self.order = self.order, [row["id"] for row in rows]
        self.totals = {}
        extra = extra_columns()
        changed: list[str] = []
        counts = {parent: len(kids) for parent, kids in self.kids.items()}
        for row in reversed(rows):  # children first: their totals are ready
            self._total(row)
        for row in rows:
            item = self.page(row, self.totals[row["id"]][0], counts.get(row["id"], 0), extra)
            if self.items.get(row["id"]) != item:
                self.items[row["id"]] = item
                changed.append(row["id"])
        gone = sorted(previous - set(self.base))
        for key in gone:
            self.items.pop(key, None)
        self.counts, self.totals_line, self.active_ids = {}, [0, 0, 0, 0, 0, 0.0, 0], set()
        for key in self.base:
            self._count(key)
        return Change(changed, gone, old_order != self.order)

    # -- structure ---------------------------------------------------------------------------------------

    @staticmethod
    def _key(row: dict) -> tuple:
        return (row.get("started") or 0.0, row["id"])

    def _placed(self, row: dict) -> bool:
        """Put ``row`` among its siblings (again); True when the tree's shape changed."""
        key = self._key(row)
        parent = row["tree_parent"]
        siblings = self.kids.setdefault(parent, [])
        at = bisect.bisect_left(siblings, key)
        if at < len(siblings) and siblings[at] == key:
            return False
        for other, kids in self.kids.items():  # it sat elsewhere (moved under its job), or is new
            if other != parent and key in kids:
                kids.remove(key)
                break
        siblings.insert(at, key)
        return True

    def _reorder(self) -> set[str]:
        """Pre-order of the ids with each row's ``level`` (after the shape changed); returns the rows
        whose level changed."""
        order: list[str] = []
        relevelled: set[str] = set()
        stack = [(key[1], 0) for key in reversed(self.kids.get(None, []))]
        while stack:
            node, level = stack.pop()
            row = self.base.get(node)
            if row is None:
                continue
            if row.get("level") != level:
                row["level"] = level
                relevelled.add(node)
            order.append(node)
            stack.extend((key[1], level + 1) for key in reversed(self.kids.get(node, [])))
        self.order = order
        return relevelled

    # -- subtree figures ------------------------------------------------------------------------------

    def _total(self, row: dict) -> None:
        """Recompute ``row``'s subtree figures from its own and its children's (already current)."""
        own = (row.get("input_tokens") or 0) + (row.get("output_tokens") or 0) if row["kind"] == "agent" else 0
        cost = row.get("cost") if row["kind"] == "agent" else None
        tokens, failures = own, 0
        for _, child in self.kids.get(row["id"], ()):
            below = self.totals.get(child)
            if below is None:
                continue
            tokens += below[0]
            if below[1] is not None:
                cost = below[1] + (cost or 0.0)
            failures += below[2] + bool(self.base[child].get("failure"))
        self.totals[row["id"]] = (tokens, cost, failures)
        if row["kind"] == "agent":
            row["subtree_tokens"] = tokens
            row["subtree_cost"] = cost
            budget = row.get("token_budget")
            row["tokens_left"] = None if budget is None else max(0, budget - tokens)
        row["failures_below"] = failures

    def _settle(self, touched: list[str], moved: bool, relevelled: set[str]) -> Change:
        """Mark the touched rows, recompute the figures of their ancestors (deepest first) and turn every
        row whose figures changed into its page row."""
        for key in touched:
            self._count(key)
            row = self.base[key]
            row["outcome"] = outcome_of(row)
            row["diagnostic"] = diagnostic_of(row)
            row["failure"] = is_failure(row)
        affected: set[str] = set()
        for key in touched:
            node: str | None = key
            while node is not None and node not in affected:
                affected.add(node)
                row = self.base.get(node)
                node = row["tree_parent"] if row is not None else None
        levels = sorted(affected, key=lambda key: -self.base[key].get("level", 0) if key in self.base else 0)
        for key in levels:
            if key in self.base:
                self._total(self.base[key])
        extra = extra_columns()
        changed: list[str] = []
        for key in [*levels, *(relevelled - affected)]:
            row = self.base.get(key)
            if row is None:
                continue
            item = self.page(row, self.totals[key][0], len(self.kids.get(key, ())), extra)
            if self.items.get(key) != item:
                self.items[key] = item
                changed.append(key)
        return Change(changed, [], moved)

    def _count(self, key: str) -> None:
        """Keep the summary's counts and the active rows current for row ``key``."""
        row = self.base.get(key)
        new = summary_counts(row) if row is not None else None
        old = self.counts.pop(key, None)
        line = self.totals_line
        for at, value in enumerate(old or ()):
            line[at] -= value
        for at, value in enumerate(new or ()):
            line[at] += value
        if new is not None:
            self.counts[key] = new
        if row is not None and row["status"] in ACTIVE:
            self.active_ids.add(key)
        else:
            self.active_ids.discard(key)

    # -- reading ---------------------------------------------------------------------------------------

    def summary(self) -> str:
        """The summary line (:func:`~toh_nb.notebook.treeview.summary` of the rows), from kept counts."""
        line = self.totals_line
        return summary_text(*line[:5], line[5] if line[6] else 0.0, line[6])

    def active(self) -> bool:
        """Whether some agent or job runs (or stops)."""
        return bool(self.active_ids)

    def rows(self) -> list[dict]:
        """The marked tree rows in pre-order (for the static snapshot and the summary)."""
        return [self.base[key] for key in self.order]

    def page_rows(self, limit: int | None = None) -> list[dict]:
        """The page rows in pre-order (the first ``limit``)."""
        order = self.order if limit is None else self.order[:limit]
        return [self.items[key] for key in order]
