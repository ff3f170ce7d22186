"""DataFrames of the hub's tables, built from the plain row dicts of :mod:`toh_nb.snapshots`.

Every frame has exactly the snapshot module's columns in its order, with fixed dtypes whether or not
it has rows (so an empty table still concatenates, filters and displays like a full one):

- times (``started``, ``finished``, ``time``) → ``datetime64[ns, UTC]`` from epoch seconds (``NaT``
  when unknown);
- durations (``elapsed_s``) → ``float64`` seconds (``NaN`` when unknown);
- counts (``depth``, ``turns``, tokens) → ``int64``; ``turn`` → nullable ``Int64`` (seed events have none);
- flags (``is_error``) → ``bool``;
- text (ids, labels, statuses, …) → ``object`` holding ``str`` or ``None``.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import pandas as pd

from ..snapshots import AGENT_COLUMNS, EVENT_COLUMNS, JOB_COLUMNS, TRANSCRIPT_COLUMNS

TIME = "time"
FLOAT = "float"
INT = "int"
NULLABLE_INT = "nullable-int"
BOOL = "bool"
TEXT = "text"

JOB_TYPES = {"id": TEXT, "label": TEXT, "status": TEXT, "detail": TEXT, "owner": TEXT, "started": TIME,
             "finished": TIME, "elapsed_s": FLOAT}
AGENT_TYPES = {"id": TEXT, "parent": TEXT, "depth": INT, "label": TEXT, "mode": TEXT, "status": TEXT,
               "turns": INT, "input_tokens": INT, "output_tokens": INT, "subtree_tokens": INT,
               "token_budget": NULLABLE_INT, "tokens_left": NULLABLE_INT, "started": TIME, "elapsed_s": FLOAT,
               "stop_reason": TEXT}
TRANSCRIPT_TYPES = {"turn": NULLABLE_INT, "kind": TEXT, "role": TEXT, "source": TEXT, "text": TEXT, "tool": TEXT,
                    "is_error": BOOL}
EVENT_TYPES = {"time": TIME, "kind": TEXT, "id": TEXT, "parent": TEXT, "label": TEXT, "provider": TEXT,
               "mode": TEXT, "run_id": TEXT, "stop_reason": TEXT, "job": TEXT, "status": TEXT, "detail": TEXT}


def _column(values: list, kind: str) -> pd.Series:
    if kind == TIME:
        seconds = pd.Series([float("nan") if v is None else float(v) for v in values], dtype="float64")
        return pd.to_datetime(seconds, unit="s", utc=True).astype("datetime64[ns, UTC]")
    if kind == FLOAT:
        return pd.Series([float("nan") if v is None else float(v) for v in values], dtype="float64")
    if kind == INT:
        return pd.Series([0 if v is None else int(v) for v in values], dtype="int64")
    if kind == NULLABLE_INT:
        return pd.Series([pd.NA if v is None else int(v) for v in values], dtype="Int64")
    if kind == BOOL:
        return pd.Series([bool(v) for v in values], dtype="bool")
    return pd.Series([None if v is None else str(v) for v in values], dtype="object")


def frame(rows: Iterable[Mapping], columns: list[str], types: Mapping[str, str]) -> pd.DataFrame:
    """A DataFrame with exactly ``columns`` (in order) typed by ``types``; missing keys become nulls."""
    rows = list(rows)
    data = {name: _column([row.get(name) for row in rows], types[name]) for name in columns}
    return pd.DataFrame(data, columns=columns)


def jobs_frame(rows: Iterable[Mapping]) -> pd.DataFrame:
    """``hub.jobs()``: id, label, status, detail, owner, started, finished, elapsed_s."""
    return frame(rows, JOB_COLUMNS, JOB_TYPES)


def agents_frame(rows: Iterable[Mapping]) -> pd.DataFrame:
    """``hub.agents()``: id, parent, depth, label, mode, status, turns, tokens (own, subtree, budget and what
    is left of it), started, elapsed_s, stop_reason."""
    return frame(rows, AGENT_COLUMNS, AGENT_TYPES)


def transcript_frame(rows: Iterable[Mapping]) -> pd.DataFrame:
    """``hub.transcript(id)``: one row per event: turn, kind, role, source, text, tool, is_error."""
    return frame(rows, TRANSCRIPT_COLUMNS, TRANSCRIPT_TYPES)


def events_frame(rows: Iterable[Mapping]) -> pd.DataFrame:
    """``hub.events()``: the lifecycle events (subagent/start|end, job/*) in order."""
    return frame(rows, EVENT_COLUMNS, EVENT_TYPES)
