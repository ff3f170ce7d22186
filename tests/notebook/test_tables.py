"""DataFrames of the hub's tables: exact columns, fixed dtypes, empty tables keep both."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from toh_nb.core.errors import UsageError
from toh_nb.notebook.tables import agents_frame, conversation_frame, events_frame, jobs_frame, transcript_frame
from toh_nb.snapshots import AGENT_COLUMNS, EVENT_COLUMNS, JOB_COLUMNS, TRANSCRIPT_COLUMNS

UTC_TIME = "datetime64[ns, UTC]"
T0 = 1_700_000_000.25  # 2023-11-14T22:13:20.25Z

JOB_DTYPES = {"id": "object", "label": "object", "status": "object", "detail": "object", "owner": "object",
              "started": UTC_TIME, "finished": UTC_TIME, "elapsed_s": "float64"}
AGENT_DTYPES = {"id": "object", "parent": "object", "depth": "int64", "label": "object", "mode": "object",
                "status": "object", "turns": "int64", "input_tokens": "int64", "output_tokens": "int64",
                "subtree_tokens": "int64", "token_budget": "Int64", "tokens_left": "Int64", "cost": "float64",
                "subtree_cost": "float64", "started": UTC_TIME, "elapsed_s": "float64", "stop_reason": "object",
                "abandoned_tools": "int64", "denied": "object"}
TRANSCRIPT_DTYPES = {"turn": "Int64", "kind": "object", "role": "object", "source": "object", "text": "object",
                     "tool": "object", "is_error": "bool"}
EVENT_DTYPES = {"time": UTC_TIME, **{c: "object" for c in EVENT_COLUMNS if c != "time"}}

JOB_ROW = {"id": "subagent-1", "label": "crawl", "status": "completed", "detail": None, "owner": "root",
           "started": T0, "finished": T0 + 1.5, "elapsed_s": 1.5}
RUNNING_JOB = {"id": "subagent-2", "label": "wait", "status": "running", "detail": None, "owner": "root",
               "started": T0, "finished": None, "elapsed_s": 0.25}
AGENT_ROW = {"id": "agent-1", "parent": "root", "depth": 1, "label": "research", "mode": "one-shot",
             "status": "completed", "turns": 1, "input_tokens": 12, "output_tokens": 5, "subtree_tokens": 17,
             "token_budget": 100, "tokens_left": 83, "cost": 0.000012, "subtree_cost": 0.00002, "started": T0,
             "elapsed_s": 0.5, "stop_reason": "completed", "abandoned_tools": 2}
CORRUPT_AGENT = {"id": "agent-2", "parent": None, "depth": 1, "label": None, "mode": None, "status": "corrupt",
                 "turns": 0, "input_tokens": 0, "output_tokens": 0, "started": None, "elapsed_s": None,
                 "stop_reason": None, "abandoned_tools": 0}
TRANSCRIPT_ROWS = [
    {"turn": None, "kind": "descriptor", "role": None, "source": None, "text": "{}", "tool": None, "is_error": False},
    {"turn": 1, "kind": "tool/result", "role": "tool", "source": None, "text": "Error: x", "tool": "job_kill",
     "is_error": True},
]
EVENT_ROW = {"time": T0, "kind": "job/end", "id": "subagent-1", "parent": "root", "label": "crawl",
             "provider": None, "mode": "subagent", "run_id": None, "stop_reason": None, "job": "subagent-1",
             "status": "completed", "detail": None}

CASES = [
    (jobs_frame, JOB_COLUMNS, JOB_DTYPES, [JOB_ROW, RUNNING_JOB]),
    (agents_frame, AGENT_COLUMNS, AGENT_DTYPES, [AGENT_ROW, CORRUPT_AGENT]),
    (transcript_frame, TRANSCRIPT_COLUMNS, TRANSCRIPT_DTYPES, TRANSCRIPT_ROWS),
    (events_frame, EVENT_COLUMNS, EVENT_DTYPES, [EVENT_ROW]),
]


@pytest.mark.parametrize("build, columns, dtypes, rows", CASES, ids=["jobs", "agents", "transcript", "events"])
def test_columns_and_dtypes_with_rows_and_empty(build, columns, dtypes, rows):
    assert list(dtypes) == columns
    full = build(rows)
    empty = build([])
    assert isinstance(full, pd.DataFrame) and isinstance(empty, pd.DataFrame)
    assert list(full.columns) == list(empty.columns) == columns
    assert {c: str(t) for c, t in full.dtypes.items()} == dtypes
    assert {c: str(t) for c, t in empty.dtypes.items()} == dtypes
    assert len(full) == len(rows) and len(empty) == 0
    assert list(full.index) == list(range(len(rows)))
    assert pd.concat([empty, full]).dtypes.equals(full.dtypes)


def test_job_values():
    frame = jobs_frame([JOB_ROW, RUNNING_JOB])
    assert frame.loc[0, "started"] == pd.Timestamp("2023-11-14T22:13:20.25", tz="UTC")
    assert frame.loc[0, "finished"] == pd.Timestamp("2023-11-14T22:13:21.75", tz="UTC")
    assert frame.loc[1, "finished"] is pd.NaT
    assert frame.loc[0, "elapsed_s"] == 1.5
    assert frame.loc[0, "detail"] is None
    assert frame.id.tolist() == ["subagent-1", "subagent-2"]


def test_agent_values_with_unknowns():
    frame = agents_frame([AGENT_ROW, CORRUPT_AGENT])
    assert frame.loc[0, ["depth", "turns", "input_tokens", "output_tokens", "subtree_tokens", "token_budget",
                         "tokens_left"]].tolist() == [1, 1, 12, 5, 17, 100, 83]
    assert frame.loc[1, ["token_budget", "tokens_left", "cost", "subtree_cost"]].isna().tolist() == [True] * 4
    assert frame.loc[0, ["cost", "subtree_cost"]].tolist() == [0.000012, 0.00002]
    assert frame.loc[1, "started"] is pd.NaT
    assert math.isnan(frame.loc[1, "elapsed_s"])
    assert frame.loc[1, "label"] is None and frame.loc[1, "status"] == "corrupt"


def test_transcript_values():
    frame = transcript_frame(TRANSCRIPT_ROWS)
    assert frame.turn.isna().tolist() == [True, False]
    assert frame.loc[1, "turn"] == 1
    assert frame.is_error.tolist() == [False, True]
    assert frame.loc[1, "tool"] == "job_kill"


def test_missing_keys_become_nulls_and_extra_keys_are_ignored():
    frame = events_frame([{"time": T0, "kind": "subagent/start", "surprise": 1}])
    assert list(frame.columns) == EVENT_COLUMNS
    assert frame.loc[0, "kind"] == "subagent/start"
    assert frame.loc[0, "id"] is None


def test_rows_from_a_real_hub_convert():
    import toh_nb as tn

    with tn.Hub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as hub:
        hub.spawn("x", label="one")
        hub.spawn("y", label="two", background=True).output(wait=True, timeout=5)
        rows = hub.async_hub
        frames = [
            (jobs_frame, hub.portal.call(rows.jobs), JOB_DTYPES),
            (agents_frame, hub.portal.call(rows.agents), AGENT_DTYPES),
            (transcript_frame, hub.portal.call(rows.transcript, "agent-1"), TRANSCRIPT_DTYPES),
            (events_frame, hub.portal.call(rows.events), EVENT_DTYPES),
        ]
        for build, data, dtypes in frames:
            frame = build(data)
            assert len(frame) == len(data) > 0
            assert {c: str(t) for c, t in frame.dtypes.items()} == dtypes


# -- readable displays ------------------------------------------------------------------------------

LONG_ID = "0b0f6a52-5c1e-4e8e-9f0e-6f1d2f3a4b5c"


def clock(seconds: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(seconds).strftime("%H:%M:%S")


def test_tables_display_without_index_with_short_ids_and_friendly_times():
    frame = jobs_frame([dict(JOB_ROW, owner=LONG_ID), RUNNING_JOB])
    assert repr(frame).splitlines() == [
        "        id label    status detail     owner  started finished elapsed_s",
        f"subagent-1 crawl completed        0b0f6a52\u2026 {clock(T0)} {clock(T0 + 1.5)}     1.5 s",
        f"subagent-2  wait   running             root {clock(T0)}              0.2 s"]
    page = frame._repr_html_()
    assert f"<td><code title='{LONG_ID}'>0b0f6a52\u2026</code></td>" in page
    assert f"<td>{clock(T0)}</td>" in page and "<td>1.5 s</td>" in page
    assert "NaT" not in page and "None" not in page and "<th></th>" not in page
    assert frame.loc[0, "owner"] == LONG_ID  # the data keeps the full id


def test_costs_display_with_fixed_decimals_and_unknown_costs_empty():
    frame = agents_frame([dict(AGENT_ROW, cost=3.4200000000000005e-05, subtree_cost=0.000236), CORRUPT_AGENT])
    assert repr(frame[["id", "cost", "subtree_cost"]]).splitlines() == [
        "     id     cost subtree_cost", "agent-1 0.000034     0.000236", "agent-2                      "]
    assert "<td>0.000034</td>" in frame._repr_html_()


def test_filtering_keeps_the_readable_display_and_flags_show_as_yes():
    frame = transcript_frame(TRANSCRIPT_ROWS)
    errors = frame[frame["is_error"]]
    assert type(errors) is type(frame)
    assert repr(errors).splitlines()[1].split() == ["1", "tool/result", "tool", "Error:", "x", "job_kill", "yes"]
    assert "False" not in repr(frame) and "<NA>" not in repr(frame)


def test_an_empty_table_says_so_and_long_tables_say_how_many_rows_are_hidden():
    assert repr(jobs_frame([])) == "(no rows; columns: id, label, status, detail, owner, started, finished, elapsed_s)"
    many = jobs_frame([dict(JOB_ROW, id=f"subagent-{n}") for n in range(1, 8)])
    with pd.option_context("display.max_rows", 5):
        assert repr(many).splitlines()[-1] == "\u2026 2 more rows (a DataFrame: filter or slice it)"
        assert many._repr_html_().count("<tr>") == 5  # five rows (the header row is "<tr style=...>")


# -- any frame derived from a table displays ---------------------------------------------------------

FULL_TABLES = {"jobs": lambda: jobs_frame([JOB_ROW, RUNNING_JOB]),
               "agents": lambda: agents_frame([AGENT_ROW, CORRUPT_AGENT]),
               "transcript": lambda: transcript_frame(TRANSCRIPT_ROWS),
               "events": lambda: events_frame([EVENT_ROW])}
DERIVED = {
    "first column twice": lambda t: t[[t.columns[0], t.columns[0]]],
    "every column twice": lambda t: t[list(t.columns) * 2],
    "renamed onto another column": lambda t: t.rename(columns={t.columns[1]: t.columns[0]}),
    "renamed": lambda t: t.rename(columns=lambda c: f"my_{c}"),
    "filtered to nothing": lambda t: t[[False] * len(t)],
    "no columns": lambda t: t[[]],
    "no rows, repeated columns": lambda t: t.head(0)[[t.columns[0], t.columns[0]]],
    "text in every column": lambda t: t.assign(**{c: "n/a" for c in list(t.columns) + ["elapsed_s", "cost"]}),
    "infinities": lambda t: t.assign(elapsed_s=float("inf"), cost=float("-inf")),
    "numbered columns": lambda t: t.set_axis(range(len(t.columns)), axis=1),
    "two-level columns": lambda t: t.set_axis(pd.MultiIndex.from_tuples([(c, "x") for c in t.columns]), axis=1),
    "indexed by its first column": lambda t: t.set_index(t.columns[0]),
    "side by side with itself": lambda t: pd.concat([t, t], axis=1),
    "transposed": lambda t: t.T,
}


@pytest.mark.parametrize("derive", sorted(DERIVED))
@pytest.mark.parametrize("table", sorted(FULL_TABLES))
def test_any_selection_rename_or_filter_of_a_table_displays_as_text_and_html(table, derive):
    frame = DERIVED[derive](FULL_TABLES[table]())
    text, page = repr(frame), frame._repr_html_()
    assert isinstance(text, str) and text and isinstance(page, str) and page


def test_a_repeated_column_shows_each_copy():
    frame = jobs_frame([dict(JOB_ROW, owner=LONG_ID), RUNNING_JOB])
    assert repr(frame[["id", "owner", "id"]]).splitlines() == [
        "        id     owner         id", "subagent-1 0b0f6a52\u2026 subagent-1", "subagent-2      root subagent-2"]
    page = frame[["owner", "owner"]]._repr_html_()
    assert page.count(f"<td><code title='{LONG_ID}'>0b0f6a52\u2026</code></td>") == 2


def test_cells_are_formatted_by_value_so_renamed_columns_show_their_text():
    frame = agents_frame([AGENT_ROW]).rename(columns={"label": "elapsed_s", "elapsed_s": "x"})
    assert repr(frame[["elapsed_s", "x"]]).splitlines() == ["elapsed_s   x", " research 0.5"]
    odd = agents_frame([AGENT_ROW]).assign(cost="n/a", elapsed_s=float("inf"))[["cost", "elapsed_s"]]
    assert repr(odd).splitlines() == ["cost elapsed_s", " n/a       inf"]


def test_a_named_index_is_shown_and_a_table_without_columns_says_so():
    frame = agents_frame([AGENT_ROW, CORRUPT_AGENT])
    assert repr(frame.set_index("id")[["label"]]).splitlines() == ["     id    label", "agent-1 research",
                                                                    "agent-2         "]
    assert repr(frame[[]]) == "(2 rows; no columns)"
    assert repr(frame[frame.depth > 5][["id", "id"]]) == "(no rows; columns: id, id)"


# -- readable displays: hub.agents() and hub.transcript() show the columns that say something ----------

PLAIN_AGENT = {"id": "root", "parent": None, "depth": 0, "label": None, "mode": "root", "status": "idle", "turns": 2,
               "input_tokens": 30, "output_tokens": 4, "subtree_tokens": 34, "started": T0, "elapsed_s": 2.0,
               "stop_reason": "completed", "abandoned_tools": 0}


def test_agents_display_their_readable_columns_and_name_the_others():
    frame = agents_frame([PLAIN_AGENT, dict(AGENT_ROW, token_budget=None, tokens_left=None, cost=None,
                                            subtree_cost=None, abandoned_tools=0)])
    assert list(frame.columns) == AGENT_COLUMNS  # every column is in the DataFrame
    assert repr(frame).splitlines() == [
        "     id parent    label     mode    status turns input_tokens output_tokens elapsed_s stop_reason",
        "   root                     root      idle     2           30             4     2.0 s   completed",
        "agent-1   root research one-shot completed     1           12             5     0.5 s   completed",
        "+ 9 more columns in this DataFrame: depth, subtree_tokens, token_budget, tokens_left, cost, subtree_cost, "
        'started, abandoned_tools, denied (columns="all" shows every column)']
    page = frame._repr_html_()
    assert "<th>depth</th>" not in page and "<th>stop_reason</th>" in page
    assert page.endswith("<div><i>+ 9 more columns in this DataFrame: depth, subtree_tokens, token_budget, "
                         "tokens_left, cost, subtree_cost, started, abandoned_tools, denied "
                         "(columns=&quot;all&quot; shows every column)</i></div>")


def test_a_budget_a_cost_an_abandoned_call_or_a_denial_joins_the_display():
    frame = agents_frame([PLAIN_AGENT, dict(AGENT_ROW, denied="write x (edit)")])
    assert repr(frame).splitlines()[0].split() == [
        "id", "parent", "label", "mode", "status", "turns", "input_tokens", "output_tokens", "token_budget",
        "tokens_left", "cost", "subtree_cost", "elapsed_s", "stop_reason", "abandoned_tools", "denied"]
    assert repr(frame).splitlines()[-1] == ('+ 3 more columns in this DataFrame: depth, subtree_tokens, started '
                                            '(columns="all" shows every column)')


def test_filtering_and_sorting_keep_the_readable_display_and_a_selection_shows_what_it_selects():
    frame = agents_frame([PLAIN_AGENT, AGENT_ROW])
    assert repr(frame[frame.depth > 0].sort_values("id")).splitlines()[-1].startswith("+ 4 more columns")
    assert repr(frame[["id", "depth"]]).splitlines() == ["     id depth", "   root     0", "agent-1     1"]
    assert "more columns" not in repr(frame.assign(extra=1))


def test_columns_all_a_list_of_names_and_what_is_refused():
    rows = [PLAIN_AGENT, AGENT_ROW]
    everything = agents_frame(rows, columns="all")
    assert repr(everything).splitlines()[0].split() == AGENT_COLUMNS
    assert "more columns" not in repr(everything)
    assert list(agents_frame(rows, columns=["label", "id"]).columns) == ["label", "id"]
    with pytest.raises(UsageError) as error:
        agents_frame(rows, columns=["id", "tokens"])
    assert str(error.value) == ("hub.agents(): no column 'tokens'; columns: " + ", ".join(AGENT_COLUMNS)
                                + ' (or columns="all")')
    with pytest.raises(UsageError) as error:
        agents_frame(rows, columns="some")
    assert str(error.value) == "hub.agents(): columns must be None, \"all\" or a list of column names, got 'some'"


def test_the_conversation_displays_role_and_text_and_the_columns_that_say_something():
    rows = [{"turn": 1, "role": "user", "source": "user", "text": "Plan it"},
            {"turn": 1, "role": "assistant", "text": "", "input_tokens": 388, "output_tokens": 27},
            {"turn": 1, "role": "tool", "tool": "subagent", "arguments": '{"prompt": "p"}', "text": "found"},
            {"turn": 1, "role": "assistant", "text": "Done", "input_tokens": 412, "output_tokens": 31},
            {"turn": 1, "role": "turn", "text": "completed", "input_tokens": 800, "output_tokens": 58, "elapsed_s": 1.25}]
    frame = conversation_frame(rows)
    assert [str(t) for t in frame.dtypes] == ["Int64", "object", "object", "object", "object", "object", "bool",
                                              "Int64", "Int64", "float64"]
    assert repr(frame).splitlines() == [
        "turn      role     tool       arguments      text input_tokens output_tokens elapsed_s",
        "   1      user                            Plan it                                     ",
        "   1 assistant                                             388            27          ",
        "   1      tool subagent {\"prompt\": \"p\"}     found                                     ",
        "   1 assistant                               Done          412            31          ",
        "   1      turn                          completed          800            58     1.2 s",
        '+ 2 more columns in this DataFrame: source, is_error (columns="all" shows every column)']
    assert repr(conversation_frame([dict(rows[0], source="notice")])).splitlines()[0].split() == [
        "turn", "role", "source", "text"]
