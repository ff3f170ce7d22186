"""ScriptedModel and FunctionModel: scripts per label/path, twins, exhaustion, sync/async functions."""

from __future__ import annotations

import asyncio

import pytest

import toh_nb as tn
from toh_nb.core.errors import ScriptExhausted, UsageError
from toh_nb.models import FunctionModel, ModelResponse, ScriptedModel
from toh_nb.core.model import ModelRequest


def make_request(label=None, path="root", agent="root"):
    from toh_nb.core.content import user_message

    return ModelRequest(agent, label, 0, "", [user_message("hi")], [], path=path)


def run(coro):
    return asyncio.run(coro)


def test_scripts_are_found_by_path_then_label_then_root():
    model = ScriptedModel({"root/a/b": ["by path"], "b": ["by label"], "root": ["by root"]})
    assert run(model.request(make_request("b", "root/a/b", "x1"))).text == "by path"
    assert run(model.request(make_request("b", "root/c/b", "x2"))).text == "by label"
    assert run(model.request(make_request(None, "root", "root"))).text == "by root"


def test_each_agent_has_its_own_cursor_so_twins_run_the_whole_script():
    model = ScriptedModel({"twin": ["one", "two"]})
    assert [run(model.request(make_request("twin", agent=a))).text for a in ("t1", "t2", "t1")] == ["one", "one", "two"]


def test_steps_may_be_tool_calls_lists_responses_and_functions():
    async def later(req):
        return "async step"

    model = ScriptedModel({"root": [tn.ToolCall("x", {"a": 1}), [tn.ToolCall("y"), tn.ToolCall("z")],
                                    ModelResponse(text="r", stop_reason="max_tokens"), lambda req: "fn", later]})
    responses = [run(model.request(make_request())) for _ in range(5)]
    assert [c.name for c in responses[0].tool_calls] == ["x"] and responses[0].stop_reason == "tool_use"
    assert [c.name for c in responses[1].tool_calls] == ["y", "z"]
    assert responses[2].stop_reason == "max_tokens"
    assert [r.text for r in responses[3:]] == ["fn", "async step"]


def test_running_out_fails_loudly_naming_the_agent_and_step():
    model = ScriptedModel({"worker": ["only"]})
    run(model.request(make_request("worker", agent="agent-7")))
    with pytest.raises(ScriptExhausted) as info:
        run(model.request(make_request("worker", agent="agent-7")))
    message = str(info.value)
    assert 'script "worker" ran out for agent agent-7' in message and "step 2 was requested" in message
    with pytest.raises(ScriptExhausted, match="has no script for agent"):
        run(model.request(make_request("stranger", agent="agent-8")))


def test_a_script_running_out_ends_the_childs_turn_with_a_diagnostic():
    async def main():
        model = ScriptedModel({"root": [tn.ToolCall("subagent", {"description": "helper", "prompt": "p"}),
                                        lambda req: req.messages[-1].text]})
        async with tn.AsyncHub(model, ids="sequential") as hub:
            result = await hub.run("go")
            assert result.text.startswith("Error: subagent run failed\nDiagnostic: ScriptedModel has no script")

    asyncio.run(main())


def test_bad_scripts_are_refused_at_construction():
    with pytest.raises(UsageError, match='script "a" must be a list of steps'):
        ScriptedModel({"a": "not a list"})
    with pytest.raises(UsageError, match="mapping"):
        ScriptedModel(42)


def test_function_model_sync_async_and_bad_returns():
    async def slow(req):
        await asyncio.sleep(0)
        return ModelResponse(text="async")

    assert run(FunctionModel(lambda r: "sync").request(make_request())).text == "sync"
    assert run(FunctionModel(slow).request(make_request())).text == "async"
    with pytest.raises(tn.ModelError, match="must return a ModelResponse or a str, got int"):
        run(FunctionModel(lambda r: 3).request(make_request()))
    with pytest.raises(UsageError, match="needs a callable"):
        FunctionModel("nope")
    with pytest.raises(tn.ModelError, match="unknown stop_reason"):
        ModelResponse(text="x", stop_reason="done")
