"""The agent tree as plain rows, and its static snapshots (text and HTML) — no widgets here.

One function reads the hub (:func:`tree_rows`, on the hub's loop thread); everything else renders
those rows: the live widget (:mod:`toh_nb.notebook.widget`), the static ``text/plain`` and ``text/html``
snapshots a stored notebook keeps when no kernel runs (nbconvert, GitHub, nbval), the Mermaid picture
(:mod:`toh_nb.notebook.graph`) and the JSON export. Rows are dicts: every column of
:func:`toh_nb.snapshots.agents` (whatever columns it grows) plus ``kind`` (``agent | job``), ``tree_parent``
(the row it sits under: a background job sits under its owner, the job's child under the job) and
``level`` (0 for the root), and how things ended (:func:`mark_outcomes`): ``outcome``, ``diagnostic``,
``failure`` and ``failures_below``.

Snapshots are deterministic: no clock times or durations (they would change run after run), ids as
given (``ids="sequential"`` keeps them stable), statuses in one vocabulary (:func:`display_status`).
"""

from __future__ import annotations

import html
from typing import Any

from ..costs import format_cost
from ..results import STATUS_COLOURS
from ..snapshots import AGENT_COLUMNS, FINISHED_AS
from .display import short_id

#: agent columns the snapshot table shows in their own way (the rest appear as plain extra columns,
#: so a column added to ``agent_rows`` shows up without touching this module)
SHOWN_APART = {"id", "parent", "depth", "label", "mode", "status", "started", "elapsed_s", "stop_reason", "subtree_tokens",
               "turns", "input_tokens", "output_tokens"}

#: the last stop reasons that mean an agent's work did not get done: the row is a failure and every row
#: above it says so (``aborted`` is the user's own stop, ``max-tokens`` a cut answer: shown, not failures)
FAILED_REASONS = ("error", "refusal", "max-steps", "token-budget", "max-time")
#: statuses (agents and jobs) that are failures whatever the stop reason
FAILED_STATUSES = ("failed", "corrupt")
#: the outcome mark of an agent whose turns completed while permissions were refused to it
DENIED_OUTCOME = "permission denied"
#: a diagnostic in the text snapshot: its first line, cut to this many characters (the full text is in
#: the HTML snapshot's hover title and in the live tree)
DIAGNOSTIC_CHARS = 120


#: rows a static snapshot lists (a bigger tree ends with a line counting the rest; the live widget and
#: ``tree.export_json()`` have them all): keeps stored notebooks small
STATIC_MAX_ROWS = 200


def display_status(row: dict) -> str:
    """``running | stopping | idle | ready | completed | failed | killed | corrupt`` for any row (rows
    from ``agent_rows`` already say so; a ``finished`` status from elsewhere maps by its stop reason)."""
    status = row.get("status") or "unknown"
    if row.get("kind", "agent") == "agent" and status == "finished":
        return FINISHED_AS.get(row.get("stop_reason") or "completed", "completed")
    return status


def tree_rows(hub: Any) -> list[dict]:
    """Every agent and background job of ``hub`` (an AsyncHub) in display order (pre-order, siblings
    by start time), each with ``kind``, ``tree_parent`` and ``level``. Call on the hub's loop thread
    (it reads the hub's public :class:`~toh_nb.hub.HubView`, ``hub.view``)."""
    agents = hub.view.agents()
    jobs = hub_jobs(hub)
    root = agents[0]["id"] if agents else None
    agent_ids = {row["id"] for row in agents}
    by_child = jobs_by_child(jobs)
    rows = [place_agent(dict(row, kind="agent"), by_child, agent_ids, root, hub.closed) for row in agents]
    rows += [job_row(job, agent_ids, root) for job in jobs]
    return mark_outcomes(preorder(rows))


def hub_jobs(hub: Any) -> list[dict]:
    """The hub's background jobs (``hub.view.jobs(child_ids=True)`` rows), oldest first."""
    return hub.view.jobs(child_ids=True)


def jobs_by_child(jobs: Any) -> dict:
    """The jobs that run a child agent, by that agent's id."""
    return {job["child_id"]: job for job in jobs if job["child_id"]}


def place_agent(row: dict, by_child: dict, agent_ids: Any, root: str | None, closed: bool) -> dict:
    """Set where an agent row sits (``tree_parent``: the job that runs it, else its parent agent, else
    the root) and whether the tree offers Send (``can_send``: a continuable child of the root)."""
    job = by_child.get(row["id"])
    if job is not None and job["owner"] == row["parent"]:
        row["tree_parent"] = job["id"]
    elif row["parent"] in agent_ids:
        row["tree_parent"] = row["parent"]
    else:
        row["tree_parent"] = None if row["id"] == root else root
    row["can_send"] = row["mode"] == "continuable" and row["parent"] == root and not closed
    return row


def job_row(job: dict, agent_ids: Any, root: str | None) -> dict:
    """A background job's row (from ``hub.view.jobs(child_ids=True)``); it sits under its owner."""
    return {"kind": "job", "id": job["id"], "label": job["label"], "status": job["status"],
            "detail": job["detail"], "owner": job["owner"], "child_id": job["child_id"], "started": job["started"],
            "finished": job["finished"], "elapsed_s": job["elapsed_s"],
            "tree_parent": job["owner"] if job["owner"] in agent_ids else root}


def outcome_of(row: dict) -> str | None:
    """The mark shown next to an agent's status: its last stop reason when that is not ``completed``
    (``ready · aborted``, ``idle · error``), else ``permission denied`` when permissions were refused to
    it, else None. A job's status already says how it ended (None)."""
    if row.get("kind", "agent") != "agent":
        return None
    reason = row.get("stop_reason")
    if reason and reason != "completed":
        return reason
    return DENIED_OUTCOME if row.get("denied") else None


def diagnostic_of(row: dict) -> str | None:
    """Why the row ended as it did: an agent's last turn's error (or cause) or its corrupt log's problem
    (``agent_rows``'s ``diagnostic``), a failed or killed job's detail; None when there is nothing to
    say. (Refused permissions have their own ``denied`` column.)"""
    if row.get("kind", "agent") != "agent":
        return (row.get("detail") or None) if row.get("status") in ("failed", "killed") else None
    return row.get("diagnostic") or None


def is_failure(row: dict) -> bool:
    """A failed, corrupt or errored agent, one stopped by a limit, or a failed job."""
    if display_status(row) in FAILED_STATUSES:
        return True
    return row.get("kind", "agent") == "agent" and row.get("stop_reason") in FAILED_REASONS


def mark_outcomes(rows: list[dict]) -> list[dict]:
    """Set ``outcome``, ``diagnostic`` (:func:`diagnostic_of`), ``failure`` and ``failures_below`` (how
    many failures the row's subtree holds below it) on pre-ordered rows, in place; returns them."""
    by_id = {row["id"]: row for row in rows}
    for row in rows:
        row["outcome"] = outcome_of(row)
        row["diagnostic"] = diagnostic_of(row)
        row["failure"] = is_failure(row)
        row["failures_below"] = 0
    for row in reversed(rows):  # children come after their parent in pre-order
        parent = by_id.get(row.get("tree_parent"))
        if parent is not None:
            parent["failures_below"] += row["failures_below"] + row["failure"]
    return rows


def failures_text(count: int) -> str:
    """The mark of a row with failures in its subtree: ``1 failure below``, ``36 failures below``."""
    return f"{count} failure{'s' if count != 1 else ''} below"


def short_diagnostic(text: str, limit: int = DIAGNOSTIC_CHARS) -> str:
    """A diagnostic's first line, cut to ``limit`` characters with ``…`` when longer (or multi-line)."""
    lines = text.strip().splitlines() or [""]
    first = lines[0]
    if len(first) > limit:
        return first[:limit - 1] + "\u2026"
    return first + ("\u2026" if len(lines) > 1 else "")


def preorder(rows: list[dict]) -> list[dict]:
    """``rows`` in pre-order of ``tree_parent`` (siblings by start time, then id), with ``level``."""
    children: dict[str | None, list[dict]] = {}
    for row in rows:
        children.setdefault(row["tree_parent"], []).append(row)
    for siblings in children.values():
        siblings.sort(key=lambda r: (r.get("started") or 0.0, r["id"]))
    order: list[dict] = []
    stack = [(row, 0) for row in reversed(children.get(None, []))]
    while stack:
        row, level = stack.pop()
        row["level"] = level
        order.append(row)
        stack.extend((child, level + 1) for child in reversed(children.get(row["id"], [])))
    return order


def name_of(row: dict) -> str:
    """The row's human name: ``root (you)``, the label, or ``job <label>``."""
    if row.get("kind") == "job":
        return f"job {row.get('label') or ''}".rstrip()
    if row.get("mode") == "root":
        return "root (you)"
    return row.get("label") or ""


def summary(rows: list[dict]) -> str:
    """``3 agents (1 running) · 1 job (0 active) · 120 tokens``, then ``· cost 0.000045`` when a price
    table gives some agent a cost (the sum of the known costs)."""
    totals = [0, 0, 0, 0, 0, 0.0, 0]
    for row in rows:
        for at, value in enumerate(summary_counts(row)):
            totals[at] += value
    return summary_text(*totals)


def summary_counts(row: dict) -> tuple:
    """What one row adds to the summary: (agents, running, jobs, active jobs, tokens, cost, costed)."""
    if row["kind"] == "agent":
        cost = row.get("cost")
        return (1, row["status"] == "running", 0, 0, (row.get("input_tokens") or 0) + (row.get("output_tokens") or 0),
                cost or 0.0, cost is not None)
    return (0, 0, 1, row["status"] in ("running", "stopping"), 0, 0.0, 0)


def summary_text(agents: int, running: int, jobs: int, active: int, tokens: int, cost: float, costed: int) -> str:
    """The summary line from its counts (see :func:`summary`)."""
    return (f"{agents} agent{'s' if agents != 1 else ''} ({running} running) \u00b7 "
            f"{jobs} job{'s' if jobs != 1 else ''} ({active} active) \u00b7 {tokens} tokens"
            + (f" \u00b7 cost {format_cost(cost)}" if costed else ""))


def extra_columns() -> list[str]:
    """The ``agent_rows`` columns shown as plain extra columns (whatever the engine adds later)."""
    return [c for c in AGENT_COLUMNS if c not in SHOWN_APART]


#: extra columns with their own text form (costs: fixed decimals, never ``2.7e-05``)
FORMATS = {"cost": format_cost, "subtree_cost": format_cost}


#: extra columns whose usual value is not worth a place on every node (no abandoned sync calls)
QUIET = {"abandoned_tools": 0}


def extra_value(row: dict, column: str) -> Any:
    """An extra column's value on a node, or None when there is nothing to show."""
    value = row.get(column)
    if value is None or (column in QUIET and value == QUIET[column]):
        return None
    return value


def cell_text(column: str, value: Any) -> str:
    """An extra column's value as displayed (empty for None)."""
    if value is None:
        return ""
    return FORMATS.get(column, str)(value)


def _facts(row: dict) -> list[str]:
    if row["kind"] == "job":
        facts = [row["id"], display_status(row)]
        if row.get("detail"):
            facts.append(str(row["detail"]))
        if row.get("failures_below"):
            facts.append(failures_text(row["failures_below"]))
        return facts
    facts = [] if row.get("mode") == "root" and row["id"] == "root" else [short_id(row["id"])]
    if row.get("mode") and row.get("mode") != "root":
        facts.append(row["mode"])
    facts.append(display_status(row))
    if row.get("outcome"):
        facts.append(row["outcome"])
    facts += [f"turns {row.get('turns') or 0}",
              f"tokens {row.get('input_tokens') or 0} in / {row.get('output_tokens') or 0} out"]
    for column in extra_columns():
        value = extra_value(row, column)
        if value is not None:
            facts.append(f"{column.replace('_', ' ')} {cell_text(column, value)}")
    if row.get("failures_below"):
        facts.append(failures_text(row["failures_below"]))
    if row.get("diagnostic"):
        facts.append(f"diagnostic: {short_diagnostic(row['diagnostic'])}")
    return facts


def _marked(rows: list[dict]) -> list[dict]:
    """``rows`` with their outcome marks (rows built by hand, or by an older caller, get them here)."""
    return rows if all("failures_below" in row for row in rows) else mark_outcomes(rows)


def tree_text(rows: list[dict]) -> str:
    """The whole tree as deterministic text (the widget's ``text/plain``)::

        agent tree: 3 agents (0 running) · 1 job (0 active) · 54 tokens
        root (you) · idle · turns 1 · tokens 12 in / 18 out
        ├── notes · agent-1 · continuable · ready · turns 2 · tokens 8 in / 10 out
        └── job crawl · subagent-1 · completed
            └── crawl · agent-2 · one-shot · completed · turns 1 · tokens 3 in / 3 out
    """
    rows = _marked(rows)
    lines = [f"agent tree: {summary(rows)}"]
    prefixes: list[str] = []  # the continuation prefix of each open level
    for index, row in enumerate(rows[:STATIC_MAX_ROWS]):
        level = row["level"]
        del prefixes[level:]
        last = not any(r["level"] == level for r in _until_parent_level(rows, index + 1, level))
        name = name_of(row)
        text = " \u00b7 ".join(([name] if name else []) + _facts(row))
        if level == 0:
            lines.append(text)
        else:
            lines.append("".join(prefixes[1:level]) + ("\u2514\u2500\u2500 " if last else "\u251c\u2500\u2500 ") + text)
        prefixes.append("    " if last or level == 0 else "\u2502   ")
    if len(rows) > STATIC_MAX_ROWS:
        lines.append(_more(len(rows) - STATIC_MAX_ROWS))
    return "\n".join(lines)


def _more(count: int) -> str:
    return f"\u2026 {count} more rows (the live tree and tree.export_json() have them all)"


def _until_parent_level(rows: list[dict], start: int, level: int):
    """The rows after ``start`` up to the next row above ``level`` (this row's later siblings and their
    subtrees)."""
    for row in rows[start:]:
        if row["level"] < level:
            return
        yield row


def status_badge(status: str) -> str:
    colour = STATUS_COLOURS.get(status, "#455a64")
    return (f"<span style='background:{colour};color:#fff;border-radius:8px;padding:0 6px;"
            f"font-size:85%'>{html.escape(status)}</span>")


#: the static snapshot's outcome marks follow the page's theme (JupyterLab's variables; light defaults)
FAILURE_COLOUR = "var(--jp-error-color1, #c62828)"
OUTCOME_COLOUR = "var(--jp-ui-font-color2, #6d4c41)"


def outcome_html(row: dict) -> str:
    """The marks after a status badge: the outcome (its diagnostic on hover) and the failures below."""
    out = ""
    if row.get("outcome"):
        title = f" title='{html.escape(row['diagnostic'])}'" if row.get("diagnostic") else ""
        colour = FAILURE_COLOUR if row.get("failure") else OUTCOME_COLOUR
        out += (f" <span class='toh-outcome'{title} style='border:1px solid {colour};color:{colour};"
                f"border-radius:8px;padding:0 6px;font-size:85%'>{html.escape(row['outcome'])}</span>")
    if row.get("failures_below"):
        out += (f" <span class='toh-failures-below' style='color:{FAILURE_COLOUR};font-size:85%'>"
                f"\u26a0 {html.escape(failures_text(row['failures_below']))}</span>")
    return out


def tree_html(rows: list[dict]) -> str:
    """The whole tree as a static HTML table (the widget's ``text/html``: what a stored notebook shows
    without a kernel). Full ids are in each id's ``title`` (hover)."""
    esc = html.escape
    rows = _marked(rows)
    shown = rows[:STATIC_MAX_ROWS]
    extra = [c for c in extra_columns() if any(extra_value(row, c) is not None for row in shown)]  # no empty columns
    why = any(row.get("diagnostic") for row in shown)  # the diagnostic column, when some row has one
    head = "".join(f"<th>{esc(c.replace('_', ' '))}</th>" for c in ["agent / job", "id", "mode", "status",
                                                                   "turns", "tokens in", "tokens out"] + extra
                   + (["diagnostic"] if why else []))
    body = []
    for row in shown:
        indent = f"padding-left:{0.3 + 1.4 * row['level']:.1f}em;text-align:left"
        is_agent = row["kind"] == "agent"
        mode = (row.get("mode") or "") if is_agent else "background job"
        numbers = [row.get("turns"), row.get("input_tokens"), row.get("output_tokens")] if is_agent else [None] * 3
        cells = [f"<td style='{indent}'>{esc(name_of(row))}</td>",
                 f"<td style='text-align:left'><code title='{esc(row['id'])}'>{esc(short_id(row['id']))}</code></td>",
                 f"<td style='text-align:left'>{esc(mode)}</td>",
                 f"<td style='text-align:left'>{status_badge(display_status(row))}{outcome_html(row)}</td>"]
        cells += [f"<td>{'' if v is None else esc(str(v))}</td>" for v in numbers]
        cells += [f"<td>{esc(cell_text(c, extra_value(row, c)))}</td>" for c in extra]
        if why:
            text = row.get("diagnostic") or ""
            cells.append(f"<td style='text-align:left' title='{esc(text)}'>{esc(short_diagnostic(text) if text else '')}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    more = f"<div><i>{esc(_more(len(rows) - STATIC_MAX_ROWS))}</i></div>" if len(rows) > STATIC_MAX_ROWS else ""
    return (f"<div class='toh-tree-static'><div><b>agent tree</b> \u2014 {esc(summary(rows))}</div>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}</div>")


def static_bundle(rows: list[dict]) -> dict:
    """``{"text/plain": …, "text/html": …}``: the snapshot a display keeps without a kernel."""
    return {"text/plain": tree_text(rows), "text/html": tree_html(rows)}
