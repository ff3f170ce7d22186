"""Plain-Python rows of the hub's tables (jobs, agents, transcript, events).

Built in one pass over the engine's state; ``toh_nb.notebook.tables`` turns them into DataFrames. No
pandas here, so scripts and the async face can use the rows directly.
"""

from __future__ import annotations

import time
from typing import Any

from .core.errors import UsageError
from .core.inbox_log import queued_message, queued_outcomes
from .core.session import (ASSISTANT_MESSAGE, MESSAGE_DISCARDED, MESSAGE_QUEUED, TOOL_CALL, TOOL_RESULT, TURN_END,
                           USER_MESSAGE, summarize)
from .results import TURN_TO_STOP
from .subagents import descriptor as descriptors

JOB_COLUMNS = ["id", "label", "status", "detail", "owner", "started", "finished", "elapsed_s"]
AGENT_COLUMNS = ["id", "parent", "depth", "label", "mode", "status", "turns", "input_tokens", "output_tokens",
                 "subtree_tokens", "token_budget", "tokens_left", "cost", "subtree_cost", "started", "elapsed_s",
                 "stop_reason", "abandoned_tools", "denied"]
TRANSCRIPT_COLUMNS = ["turn", "kind", "role", "source", "text", "tool", "is_error"]
#: one status vocabulary for agents and jobs: a finished one-shot agent's status says how it ended, in
#: the words a job uses (running | stopping | idle | ready | completed | failed | killed | corrupt)
FINISHED_AS = {"completed": "completed", "error": "failed", "aborted": "killed", "max-tokens": "completed",
               "refusal": "failed", "max-steps": "completed"}

EVENT_COLUMNS = ["time", "kind", "id", "parent", "label", "provider", "mode", "run_id", "stop_reason", "job",
                 "status", "detail"]


#: what ``columns=`` of the tables accepts besides a list of column names: every column
ALL_COLUMNS = "all"


def unknown_column(table: str, name: object, columns: list[str]) -> str:
    return f"{table}: no column {name!r}; columns: {', '.join(columns)} (or columns=\"all\")"


def bad_columns(table: str, choice: object) -> str:
    return f'{table}: columns must be None, "all" or a list of column names, got {choice!r}'


def chosen_columns(table: str, columns: list[str], choice: object) -> list[str] | None:
    """The ``columns=`` argument of ``table`` (``"hub.agents()"`` …) checked: None for None or ``"all"``
    (every column), else the list of names (each one of ``columns``); a UsageError naming what is wrong."""
    if choice is None or choice == ALL_COLUMNS:
        return None
    if isinstance(choice, str) or not isinstance(choice, (list, tuple)):
        raise UsageError(bad_columns(table, choice))
    for name in choice:
        if name not in columns:
            raise UsageError(unknown_column(table, name, columns))
    return list(choice)


def select_columns(table: str, rows: list[dict], columns: list[str], choice: object) -> list[dict]:
    """``rows`` with only the chosen columns (:func:`chosen_columns`), in that order."""
    names = chosen_columns(table, columns, choice)
    return rows if names is None else [{name: row.get(name) for name in names} for row in rows]


def job_rows(jobs: Any, child_ids: bool = False) -> list[dict]:
    """One row per background job (JOB_COLUMNS); ``child_ids=True`` adds each job's ``child_id``."""
    now = time.time()
    rows = []
    for job in list(jobs.jobs.values()):
        row = {"id": job.id, "label": job.label, "status": job.status, "detail": job.detail,
               "owner": job.owner_id, "started": job.started, "finished": job.finished,
               "elapsed_s": (job.finished or now) - job.started}
        if child_ids:
            row["child_id"] = job.child_id
        rows.append(row)
    return rows


def agent_rows(runtime: Any, root_id: str) -> list[dict]:
    """Every agent of the hub's tree (root first, then pre-order), live or stored: the AGENT_COLUMNS,
    plus ``diagnostic`` (what the tree shows of how the agent's last turn ended: the turn's error or
    cause, a corrupt log's problem; None when there is none), which the table leaves out."""
    store = runtime.store
    read = _row_reader(runtime)
    rows: list[dict] = []
    stack = [(root_id, 0)]
    while stack:
        agent_id, depth = stack.pop()
        row = read(agent_id, depth)
        rows.append(row)
        if row["status"] == "corrupt":
            continue
        children = sorted(store.children_of(agent_id), key=lambda h: (h.created, h.id))
        for child in reversed(children):
            stack.append((child.id, depth + 1))
    _subtree_totals(rows)
    return rows


def agent_rows_of(runtime: Any, agent_ids: Any) -> list[dict]:
    """The rows of these agents alone, as :func:`agent_rows` has them but without what depends on their
    subtree (``subtree_tokens`` is the agent's own, ``tokens_left`` None): what a live view that keeps
    its tree up to date from the event stream reads for the agents an event touched. ``depth`` is the
    delegation depth of the agent's header (a corrupt log's: None)."""
    read = _row_reader(runtime)
    return [read(agent_id, None) for agent_id in agent_ids]


def _row_reader(runtime: Any) -> Any:
    """``read(agent_id, depth) -> row`` over the runtime's live agents and its store."""
    store = runtime.store
    # a store that keeps what it read of each stored log answers without parsing it again: the live
    # tree refreshes this table up to ten times a second
    summary_of = store.summary
    now = time.time()
    #: sync calls whose turn ended while their thread still runs, per agent (toh_nb.core.threads)
    abandoned = runtime.user_threads.abandoned_by_owner()

    def read(agent_id: str, depth: int | None) -> dict:
        live = runtime.agents.get(agent_id)
        try:
            summary = summarize(live.session) if live is not None else summary_of(agent_id)
        except Exception as error:
            return {"id": agent_id, "parent": None, "depth": depth, "label": None, "mode": None,
                    "status": "corrupt", "turns": 0, "input_tokens": 0, "output_tokens": 0,
                    "subtree_tokens": 0, "token_budget": None, "tokens_left": None,
                    "cost": None, "subtree_cost": None, "started": None, "elapsed_s": None, "stop_reason": None,
                    "abandoned_tools": abandoned.get(agent_id, 0), "denied": None,
                    "diagnostic": str(error) or type(error).__name__}
        header = summary.header
        record = descriptors.identity(summary.descriptor) if summary.descriptor is not None else None
        mode = record["mode"] if record else ("root" if header.origin == "root" else None)
        label = record.get("label") if record else (live.label if live is not None else None)
        turns, inp, out = summary.turns, summary.input_tokens, summary.output_tokens
        reason, last = summary.last_reason, summary.last_time
        if live is not None:
            status = "running" if live.status == "running" else "idle"
        elif mode == "continuable":
            status = "ready"
        else:  # a settled one-shot agent: how its last turn ended
            status = FINISHED_AS.get(TURN_TO_STOP.get(reason) if reason else "completed", "completed")
        end = now if live is not None and live.status == "running" else (last or header.created)
        return {"id": agent_id, "parent": header.parent_session, "depth": header.delegation_depth,
                "label": label, "mode": mode, "status": status, "turns": turns, "input_tokens": inp,
                "output_tokens": out, "subtree_tokens": inp + out, "token_budget": runtime.budgets.get(agent_id),
                "tokens_left": None, "cost": None, "subtree_cost": None, "started": header.created,
                "elapsed_s": max(0.0, end - header.created),
                "stop_reason": TURN_TO_STOP.get(reason) if reason else None,
                "abandoned_tools": abandoned.get(agent_id, 0),
                # the permissions refused to an external (ACP) agent: a quiet "completed" may hide them
                "denied": "; ".join(summary.denied) or None, "diagnostic": summary.last_error}

    return read


def _subtree_totals(rows: list[dict]) -> None:
    """Fill ``subtree_tokens`` (the agent's tokens and its descendants') and ``tokens_left`` of its budget.
    Rows are in pre-order, so walking them backwards meets every child before its parent."""
    totals: dict[str, int] = {}
    for row in reversed(rows):
        total = row["input_tokens"] + row["output_tokens"] + totals.pop(row["id"], 0)
        row["subtree_tokens"] = total
        if row["parent"] is not None:
            totals[row["parent"]] = totals.get(row["parent"], 0) + total
        if row["token_budget"] is not None:
            row["tokens_left"] = max(0, row["token_budget"] - total)


def transcript_rows(session: Any) -> list[dict]:
    rows = []
    # a queued message its turn ran shows once, as that turn's user message; one still waiting, or one
    # a kill dropped, shows as queued
    consumed = {id(event) for event, fate in queued_outcomes(session.events) if fate == "consumed"}
    for event in session.events:
        kind = event.kind
        if consumed and id(event) in consumed:
            continue
        row = {"turn": event.turn, "kind": kind, "role": None, "source": None, "text": None, "tool": None,
               "is_error": False}
        message = event.message
        if message is not None:
            row["role"] = message.role
            row["text"] = message.text
            if kind == USER_MESSAGE and message.source is not None:
                row["source"] = message.source.kind
            if kind == ASSISTANT_MESSAGE:
                calls = message.tool_calls
                if calls:
                    row["tool"] = ", ".join(c.name for c in calls)
            if kind == TOOL_RESULT:
                row["tool"] = message.tool_name
                row["is_error"] = message.is_error
        elif kind == TOOL_CALL:
            row["tool"] = event.data["name"]
            row["text"] = _json(event.data.get("arguments"))
        elif kind == TURN_END:
            row["text"] = event.data.get("reason")
            if event.data.get("error"):
                row["text"] += f": {event.data['error']}"
        elif kind == MESSAGE_QUEUED:  # a message accepted and not run (yet)
            queued = queued_message(event.data)
            row["role"] = "user"
            row["source"] = queued.source.kind if queued.source is not None else None
            row["text"] = queued.text
        elif kind == MESSAGE_DISCARDED:  # follow-ups a kill dropped unread
            row["text"] = ", ".join(event.data["ids"])
        elif event.data is not None:
            row["text"] = _json(event.data)
        rows.append(row)
    return rows


def event_rows(bus: Any) -> list[dict]:
    """The recorded (lifecycle) events, oldest first, as rows of EVENT_COLUMNS."""
    rows = []
    for event in bus.history:
        own = event.fields()
        job = own.get("job")
        rows.append({"time": event.time, "kind": event.kind, "id": job or event.agent_id,
                     "parent": event.agent_id if job else event.parent_id, "label": own.get("label"),
                     "provider": own.get("provider"), "mode": own.get("mode") or own.get("job_kind"),
                     "run_id": own.get("run_id"), "stop_reason": own.get("stop_reason"), "job": job,
                     "status": own.get("status"), "detail": own.get("detail") or own.get("message")})
    return rows


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True)
