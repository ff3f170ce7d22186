"""DataFrames of the hub's tables, built from the plain row dicts of :mod:`toh_nb.snapshots`.

Every frame has exactly the snapshot module's columns in its order, with fixed dtypes whether or not
it has rows (so an empty table still concatenates, filters and displays like a full one):

- times (``started``, ``finished``, ``time``) → ``datetime64[ns, UTC]`` from epoch seconds (``NaT``
  when unknown);
- durations (``elapsed_s``) → ``float64`` seconds (``NaN`` when unknown);
- counts (``depth``, ``turns``, tokens) → ``int64``; ``turn`` → nullable ``Int64`` (seed events have none);
- flags (``is_error``) → ``bool``;
- text (ids, labels, statuses, …) → ``object`` holding ``str`` or ``None``.

The frames are :class:`Table` objects: ordinary DataFrames (every pandas operation works and keeps the
full values) that *display* readably: no index column, long ids cut short (the full id on hover),
clock times as ``HH:MM:SS``, durations as ``12.3 s``, empty cells instead of ``None``/``NaT``/``False``.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import datetime
import html
import math
import numbers

import numpy as np
import pandas as pd

from ..conversation import CONVERSATION_COLUMNS
from ..costs import format_cost
from ..snapshots import AGENT_COLUMNS, EVENT_COLUMNS, JOB_COLUMNS, TRANSCRIPT_COLUMNS, chosen_columns
from .display import format_elapsed, short_id

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
               "token_budget": NULLABLE_INT, "tokens_left": NULLABLE_INT, "cost": FLOAT, "subtree_cost": FLOAT,
               "started": TIME, "elapsed_s": FLOAT,
               "stop_reason": TEXT, "abandoned_tools": INT, "denied": TEXT}
TRANSCRIPT_TYPES = {"turn": NULLABLE_INT, "kind": TEXT, "role": TEXT, "source": TEXT, "text": TEXT, "tool": TEXT,
                    "is_error": BOOL}
CONVERSATION_TYPES = {"turn": NULLABLE_INT, "role": TEXT, "source": TEXT, "text": TEXT, "tool": TEXT, "arguments": TEXT,
                      "is_error": BOOL, "input_tokens": NULLABLE_INT, "output_tokens": NULLABLE_INT, "elapsed_s": FLOAT}
EVENT_TYPES = {"time": TIME, "kind": TEXT, "id": TEXT, "parent": TEXT, "label": TEXT, "provider": TEXT,
               "mode": TEXT, "run_id": TEXT, "stop_reason": TEXT, "job": TEXT, "status": TEXT, "detail": TEXT}


#: money columns: fixed decimals (``0.000034``, never ``3.4200000000000005e-05``)
COST_COLUMNS = {"cost", "subtree_cost"}
#: columns that hold agent/job/run ids: shown short, full on hover
ID_COLUMNS = {"id", "parent", "owner", "run_id", "job", "child_id"}


def _is_number(value) -> bool:
    """A finite real number (not a flag): what a duration or a cost cell can format."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and math.isfinite(value)


def _cell(column, value, markup: bool = True) -> str:
    """One display cell: HTML-escaped text or markup (``markup=False``: plain text).

    A cell is formatted by its value first and by its column's name only when the value fits that column
    (``elapsed_s`` and the cost columns hold numbers): a renamed, assigned or user-built column of any
    content displays as its text instead of failing."""
    if value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, (pd.Timestamp, datetime.datetime)):
        return datetime.datetime.fromtimestamp(value.timestamp()).strftime("%H:%M:%S")
    if column == "elapsed_s" and _is_number(value):
        return format_elapsed(float(value))
    if column in COST_COLUMNS and _is_number(value):
        return format_cost(float(value))
    text = str(value)
    is_id = column in ID_COLUMNS and isinstance(value, str)
    if not markup:
        return short_id(text) if is_id else text
    if is_id:
        return f"<code title='{html.escape(text)}'>{html.escape(short_id(text))}</code>"
    return html.escape(text)


#: the columns ``hub.agents()`` displays by default, in AGENT_COLUMNS order; the others are in the DataFrame
#: and shown by ``hub.agents(columns="all")`` (or by selecting them)
AGENT_DEFAULT_COLUMNS = ("id", "parent", "label", "mode", "status", "turns", "input_tokens", "output_tokens",
                         "elapsed_s", "stop_reason")
#: shown by default when one of their cells says something (a budget, a known cost, an abandoned call, a denial)
AGENT_WHEN_SET = ("token_budget", "tokens_left", "cost", "subtree_cost", "abandoned_tools", "denied")
#: the conversation's columns that show only when they say something (a non-user source, a tool call …)
CONVERSATION_ALWAYS = ("turn", "role", "text")


def hidden_columns_note(names: list[str]) -> str:
    """The line under a table that shows only its readable columns."""
    return (f"+ {len(names)} more column{'s' if len(names) != 1 else ''} in this DataFrame: {', '.join(names)} "
            f'(columns="all" shows every column)')


#: a column's value that says nothing more than an empty cell (a user message's source "user")
QUIET = {"source": "user"}


def _says_something(column: str, values: pd.Series) -> bool:
    """Whether a column holds anything a reader would miss: a value that is not null, 0, False, or
    the column's :data:`QUIET` value."""
    quiet = QUIET.get(column)
    for value in values.tolist():
        if value is None or value is pd.NA or value is pd.NaT or value is False or value == 0 or \
                (quiet is not None and value == quiet):
            continue
        if isinstance(value, float) and value != value:
            continue
        return True
    return False


class Table(pd.DataFrame):
    """A DataFrame of one of the hub's tables that displays readably (see the module docstring);
    filtering, slicing and concatenating keep it a Table.

    A table made with ``readable=(always, when_set)`` (``hub.agents()``, ``hub.transcript(id)``) displays
    its ``always`` columns plus those of ``when_set`` that say something, and names the others under the
    table; they are all in the DataFrame (select them, or ask for ``columns="all"``). Filtering, sorting or
    slicing rows keeps that display; once the columns change (a selection, a new column) it shows what
    the frame holds."""

    _metadata = ["_toh_readable"]
    _toh_readable: tuple | None = None  # (the full columns, always shown, shown when set)

    @property
    def _constructor(self):
        return Table

    @classmethod
    def of(cls, data: dict, columns: list[str], readable: tuple | None = None) -> "Table":
        """A table of ``data`` with ``columns``; ``readable``: ``(always, when_set)`` (see the class docstring)."""
        table = cls(data, columns=columns)
        if readable is not None:
            table._toh_readable = (tuple(columns), tuple(readable[0]), tuple(readable[1]))
        return table

    def _readable_columns(self) -> tuple[list, list]:
        """(the columns displayed, the columns left out of the display)."""
        spec = self._toh_readable
        columns = list(self.columns)
        if spec is None or tuple(columns) != spec[0]:
            return columns, []
        always, when_set = spec[1], spec[2]
        shown = [c for c in columns if c in always or (c in when_set and _says_something(c, self[c]))]
        return shown, [c for c in columns if c not in shown]

    def _display_frame(self, limit: int | None, markup: bool) -> pd.DataFrame:
        """The cells as text, column by column *by position*: a selection that repeats a column
        (``t[["id", "id"]]``), a rename onto another column's name, or non-string/MultiIndex column labels
        display like any other table. A named index (``set_index("id")``, a ``groupby``) is shown as
        the columns it came from; an unnamed one (row numbers, kept by filtering) is not."""
        rows = self if limit is None or len(self) <= limit else self.head(limit)
        shown, hidden = self._readable_columns()
        if hidden:
            rows = rows[shown]
        if any(name is not None for name in rows.index.names):
            rows = rows.reset_index(allow_duplicates=True)
        cells = {position: [_cell(column, value, markup) for value in rows.iloc[:, position].tolist()]
                 for position, column in enumerate(rows.columns)}
        shown = pd.DataFrame(cells, index=pd.RangeIndex(len(rows)), columns=list(cells))
        shown.columns = rows.columns
        return shown

    def _more(self, shown: int) -> str:
        more = len(self) - shown
        return f"\u2026 {more} more row{'s' if more != 1 else ''} (a DataFrame: filter or slice it)" if more else ""

    def _repr_html_(self) -> str:
        shown = self._display_frame(pd.get_option("display.max_rows"), markup=True)
        page = shown.to_html(index=False, escape=False, border=0, classes="toh-table")
        notes = [note for note in (self._more(len(shown)), self._hidden_note()) if note]
        return page + "".join(f"<div><i>{html.escape(note)}</i></div>" for note in notes)

    def _hidden_note(self) -> str:
        hidden = self._readable_columns()[1]
        return hidden_columns_note([str(c) for c in hidden]) if hidden else ""

    def __repr__(self) -> str:
        """Plain text like the HTML view (no index, short ids, friendly times); ``(no rows)`` when empty."""
        if not len(self):
            return f"(no rows; columns: {', '.join(map(str, self.columns))})"
        if not len(self.columns):
            return f"({len(self)} row{'s' if len(self) != 1 else ''}; no columns)"
        shown = self._display_frame(pd.get_option("display.max_rows"), markup=False)
        text = shown.to_string(index=False)
        notes = [note for note in (self._more(len(shown)), self._hidden_note()) if note]
        return "\n".join([text, *notes])


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


def frame(rows: Iterable[Mapping], columns: list[str], types: Mapping[str, str],
          readable: tuple | None = None) -> pd.DataFrame:
    """A DataFrame with exactly ``columns`` (in order) typed by ``types``; missing keys become nulls.
    ``readable``: ``(always, when_set)``, the columns it displays (see :class:`Table`)."""
    rows = list(rows)
    data = {name: _column([row.get(name) for row in rows], types[name]) for name in columns}
    return Table.of(data, columns, readable)


def chosen(table: str, rows: Iterable[Mapping], columns: list[str], types: Mapping[str, str],
           readable: tuple | None, choice: object) -> pd.DataFrame:
    """A table by its ``columns=`` argument: None (the readable display of every column), ``"all"``
    (every column displayed) or a list of column names (exactly those, in that order)."""
    names = chosen_columns(table, columns, choice)
    if names is not None:
        return frame(rows, names, types)
    return frame(rows, columns, types, readable if choice is None else None)


def jobs_frame(rows: Iterable[Mapping]) -> pd.DataFrame:
    """``hub.jobs()``: id, label, status, detail, owner, started, finished, elapsed_s."""
    return frame(rows, JOB_COLUMNS, JOB_TYPES)


def agents_frame(rows: Iterable[Mapping], columns: object = None) -> pd.DataFrame:
    """``hub.agents()``: id, parent, depth, label, mode, status, turns, tokens (own, subtree, budget and what
    is left of it), cost and subtree_cost (from ``Hub(prices=...)``; NaN when unknown), started, elapsed_s,
    stop_reason, abandoned_tools (sync calls still running after their turn ended), denied (permissions refused
    to an external agent: "title (kind); …"). Displays :data:`AGENT_DEFAULT_COLUMNS` and the
    :data:`AGENT_WHEN_SET` columns that hold something; ``columns`` as in :func:`chosen`."""
    return chosen("hub.agents()", rows, AGENT_COLUMNS, AGENT_TYPES, (AGENT_DEFAULT_COLUMNS, AGENT_WHEN_SET), columns)


def transcript_frame(rows: Iterable[Mapping], columns: object = None) -> pd.DataFrame:
    """``hub.transcript(id, raw=True)``: one row per event: turn, kind, role, source, text, tool, is_error."""
    return chosen("hub.transcript(raw=True)", rows, TRANSCRIPT_COLUMNS, TRANSCRIPT_TYPES, None, columns)


def conversation_frame(rows: Iterable[Mapping], columns: object = None) -> pd.DataFrame:
    """``hub.transcript(id)``: the conversation (:mod:`toh_nb.conversation`): one row per message, tool call
    (with its result) and turn end (with the turn's tokens and duration). Displays turn, role and text,
    and the other columns when they say something (a tool call, a non-user source, tokens …)."""
    readable = (CONVERSATION_ALWAYS, tuple(c for c in CONVERSATION_COLUMNS if c not in CONVERSATION_ALWAYS))
    return chosen("hub.transcript()", rows, CONVERSATION_COLUMNS, CONVERSATION_TYPES, readable, columns)


def events_frame(rows: Iterable[Mapping]) -> pd.DataFrame:
    """``hub.events()``: the lifecycle events (subagent/start|end, job/*) in order."""
    return frame(rows, EVENT_COLUMNS, EVENT_TYPES)
