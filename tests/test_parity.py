"""The two faces are twins by construction: the same script of calls — good ids, labels where ids belong,
unknown ids, handles, bad values — run on ``tn.AsyncHub`` and on ``tn.Hub`` gives the same outcomes and
the same error types and texts (the decisions live once, in ``toh_nb.engine``).

Names map ``astream`` -> ``stream``; tables compare by their rows' content (the sync face's DataFrames
against the async face's lists of dicts). ``tests/test_surfaces.py`` checks the names and signatures;
this file checks behaviour.
"""

from __future__ import annotations

import asyncio
import inspect
import math

import pytest

import toh_nb as tn
from toh_nb.results import AgentListing

KID = object()  # stands for the face's own Child / AsyncChild handle in a script
JOB = object()  # the face's Job / AsyncJob handle
NAMES = {"astream": "stream"}  # async name -> sync name
VOLATILE = {"started", "finished", "elapsed_s", "created", "time", "at", "start", "end", "seconds"}


def reply(request):
    text = request.messages[-1].text if request.messages else ""
    return f"ok: {text}"


#: (target, method, args, kwargs): target "hub", "kid" (the handle of the first start) or "job"
SCRIPT = [
    ("hub", "start", ("work",), {"label": "w"}),
    ("kid", "wait", (), {"timeout": 30}),
    ("hub", "spawn", ("bg",), {"label": "b", "background": True}),
    ("job", "output", (), {"wait": True, "timeout": 30}),
    # a label where an id belongs: the same UsageError on both faces, for every call naming an agent
    ("hub", "send", ("w", "more"), {}),
    ("hub", "interrupt", ("w",), {}),
    ("hub", "kill", ("w",), {}),
    ("hub", "child", ("w",), {}),
    ("hub", "transcript", ("w",), {}),
    ("hub", "activations", ("w",), {}),
    # unknown ids: each call's own answer (the tool's no-op for interrupt and kill)
    ("hub", "send", ("agent-99", "more"), {}),
    ("hub", "interrupt", ("agent-99",), {}),
    ("hub", "kill", ("agent-99",), {}),
    ("hub", "child", ("agent-99",), {}),
    ("hub", "transcript", ("agent-99",), {}),
    ("hub", "activations", ("agent-99",), {}),
    ("hub", "job", ("subagent-99",), {}),
    ("hub", "kill_job", ("subagent-99",), {}),
    # values of the wrong type or range
    ("hub", "send", (42, "more"), {}),
    ("hub", "send", ("agent-1", ""), {}),
    ("hub", "interrupt", (None,), {}),
    ("hub", "kill", ([],), {}),
    ("hub", "child", ("",), {}),
    ("hub", "transcript", ("agent-1",), {"raw": "yes"}),
    ("hub", "transcript", ("agent-1",), {"columns": ["nope"]}),
    ("hub", "agents", (), {"columns": ["nope"]}),
    ("hub", "list_agents", ("everyone",), {}),
    ("hub", "call_tool", ("no_such_tool",), {}),
    ("hub", "call_tool", ("subagent",), {"prompt": 5}),
    ("hub", "run", ("",), {}),
    ("hub", "run", ("hi",), {"timeout": -1}),
    ("hub", "spawn", ("",), {}),
    ("hub", "spawn", ("x",), {"label": 5}),
    ("hub", "spawn", ("x",), {"background": "yes"}),
    ("hub", "spawn", ("x",), {"provider": "nope"}),
    ("hub", "spawn", ("x",), {"tool_filter": {"allow": "subagent"}}),
    ("hub", "spawn", ("x",), {"max_steps": 0}),
    ("hub", "spawn", ("x",), {"tools": "server"}),
    ("hub", "start", ("x",), {"persona": 3}),
    ("hub", "start", ("x",), {"model": "not a model object"}),
    ("hub", "start", ("x",), {"max_tokens": -1}),
    ("hub", "kill_job", ("subagent-1",), {"reason": 7}),
    ("hub", "pending_permissions", (), {}),
    ("hub", "answer_permission", ("ask-1", True), {}),
    ("hub", "answer_permission", ("ask-1", "yes"), {}),
    ("job", "output", (), {"timeout": 1}),
    ("job", "kill", (), {"reason": 3}),
    ("kid", "send", ("",), {}),
    ("kid", "wait", (), {"timeout": -5}),
    # good ids and handles: the same answers
    ("hub", "send", (KID, "more"), {}),
    ("kid", "wait", (), {"timeout": 30}),
    ("hub", "child", ("agent-1",), {}),
    ("hub", "interrupt", (KID,), {}),
    ("hub", "kill", ("agent-1",), {}),
    ("hub", "list_agents", ("descendants",), {}),
    ("hub", "call_tool", ("list_agents",), {}),
    ("hub", "spawn", ("fore",), {"label": "f"}),
    ("hub", "run", ("hello",), {}),
    ("hub", "transcript", (KID,), {}),
    ("hub", "transcript", ("agent-1",), {"raw": True}),
    ("hub", "activations", ("agent-1",), {}),
    ("hub", "agents", (), {}),
    ("hub", "jobs", (), {}),
    ("hub", "kill_job", (JOB,), {}),
    ("job", "result", (), {}),
]


def _rows(value) -> list[dict]:
    rows = value.to_dict("records") if hasattr(value, "to_dict") else list(value)
    return [{key: _plain(item) for key, item in row.items() if key not in VOLATILE} for row in rows]


def _plain(value):
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items() if key not in VOLATILE}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        return value.item()
    return value


def _normal(value):
    """An outcome both faces can be compared by."""
    if isinstance(value, (tn.Child, tn.AsyncChild)):
        return ("child", value.id, value.label, value.reused)
    if isinstance(value, (tn.Job, tn.AsyncJob)):
        return ("job", value.id, value.label)
    if isinstance(value, tn.RunResult):
        return ("result", value.text, value.stop_reason, value.agent_id)
    if isinstance(value, tn.ToolResult):
        return ("tool", value.text, value.is_error)
    if isinstance(value, AgentListing):
        return ("listing", str(value))
    if hasattr(value, "to_dict") or (isinstance(value, list) and value and isinstance(value[0], dict)):
        return ("rows", _rows(value))
    if isinstance(value, str):
        return ("text", str(value))  # a SendReceipt is a str
    return ("value", value)


def _resolve(arg, handles):
    if arg is KID:
        return handles["kid"]
    if arg is JOB:
        return handles["job"]
    return arg


def _note(handles, target, method, value) -> None:
    if target == "hub" and method == "start" and "kid" not in handles:
        handles["kid"] = value
    if target == "hub" and method == "spawn" and isinstance(value, (tn.Job, tn.AsyncJob)):
        handles["job"] = value


async def _run_async() -> list:
    outcomes = []
    async with tn.AsyncHub(tn.FunctionModel(reply), ids="sequential") as hub:
        handles = {"hub": hub}
        for target, method, args, kwargs in SCRIPT:
            call = getattr(handles[target], method)
            try:
                value = call(*(_resolve(a, handles) for a in args), **kwargs)
                if inspect.isawaitable(value):
                    value = await value
            except tn.TohError as error:
                outcomes.append(("raises", type(error).__name__, str(error)))
                continue
            _note(handles, target, method, value)
            outcomes.append(_normal(value))
    return outcomes


def _run_sync() -> list:
    outcomes = []
    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        handles = {"hub": hub}
        for target, method, args, kwargs in SCRIPT:
            call = getattr(handles[target], NAMES.get(method, method))
            try:
                value = call(*(_resolve(a, handles) for a in args), **kwargs)
            except tn.TohError as error:
                outcomes.append(("raises", type(error).__name__, str(error)))
                continue
            _note(handles, target, method, value)
            outcomes.append(_normal(value))
    return outcomes


@pytest.fixture(scope="module")
def both():
    return asyncio.run(_run_async()), _run_sync()


@pytest.mark.parametrize("step", range(len(SCRIPT)), ids=[f"{t}.{m}{a!r}"[:60] for t, m, a, _ in SCRIPT])
def test_both_faces_answer_each_call_alike(both, step):
    async_outcomes, sync_outcomes = both
    assert sync_outcomes[step] == async_outcomes[step], SCRIPT[step]


def test_a_label_where_an_id_belongs_is_the_same_usage_error_for_every_call(both):
    async_outcomes, _ = both
    message = ('"w" is a label, not an agent id; agents labelled "w": agent-1 '
               '(use the Child handle, or hub.send("agent-1", ...))')
    labelled = [i for i, (_, _, args, _) in enumerate(SCRIPT) if args[:1] == ("w",)]
    assert [SCRIPT[i][1] for i in labelled] == ["send", "interrupt", "kill", "child", "transcript", "activations"]
    assert {async_outcomes[i] for i in labelled} == {("raises", "UsageError", message)}


def test_the_script_exercises_errors_and_successes(both):
    """A script of only refusals (or only successes) would compare little."""
    outcomes, _ = both
    kinds = {outcome[0] for outcome in outcomes}
    raised = {outcome[1] for outcome in outcomes if outcome[0] == "raises"}
    assert {"raises", "child", "job", "result", "tool", "listing", "rows", "text"} <= kinds
    assert {"UsageError", "SubagentError", "JobError"} <= raised, raised
