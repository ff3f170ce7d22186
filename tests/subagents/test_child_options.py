"""A child's options are typed (``ChildOptions``); the old ``agent_options`` dict of a delegation-tool dict
and of ``StartRequest`` still works for one release, with one DeprecationWarning text."""

from __future__ import annotations

import asyncio

import pytest

import toh_nb as tn
from toh_nb.core.budget import Limits
from toh_nb.subagents.arguments import AGENT_OPTIONS_DEPRECATED, ChildOptions, StartRequest
from toh_nb.testing import engine_of


def test_the_deprecation_text():
    assert AGENT_OPTIONS_DEPRECATED == ("agent_options is deprecated and will be removed in the next release; "
                                        "use options=ChildOptions(model=..., max_tokens=..., limits=...)")


def test_a_start_request_reads_and_takes_the_old_dict_with_a_warning():
    options = ChildOptions(max_tokens=7, limits=Limits(3, None, None))
    request = StartRequest("p", None, "x", options=options)
    assert request.options is options
    with pytest.warns(DeprecationWarning, match="^agent_options is deprecated"):
        assert request.agent_options == {"max_tokens": 7, "limits": Limits(3, None, None)}
    with pytest.warns(DeprecationWarning, match="^agent_options is deprecated"):
        old = StartRequest("p", None, "x", {"max_tokens": 9})
    assert old.options == ChildOptions(max_tokens=9)
    assert StartRequest("p", None, "x").options is None


def seen_max_tokens(delegation_tool: dict, warns: bool) -> list:
    seen = []

    def reply(request):
        seen.append((request.label, request.max_tokens))
        if request.label is None and not any(m.role == "tool" for m in request.messages):
            return tn.ModelResponse(tool_calls=[tn.ToolCall("capped", {"description": "c", "prompt": "go"})])
        return "done"

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(reply), ids="sequential", max_tokens=100,
                               delegation_tools=[delegation_tool]) as hub:
            await hub.run("delegate")
            return engine_of(hub).root.id

    if warns:
        with pytest.warns(DeprecationWarning, match="^agent_options is deprecated"):
            asyncio.run(main())
    else:
        asyncio.run(main())
    return seen


def test_a_delegation_tool_dict_gives_its_children_typed_options_and_the_old_dict_still_works():
    assert seen_max_tokens({"tool_name": "capped", "max_tokens": 12}, warns=False) == [
        (None, 100), ("c", 12), (None, 100)]
    assert seen_max_tokens({"tool_name": "capped", "agent_options": {"max_tokens": 12}}, warns=True) == [
        (None, 100), ("c", 12), (None, 100)]


def test_an_option_given_twice_is_refused():
    with pytest.raises(tn.UsageError, match="^max_tokens given both in agent_options and as keywords; give each once$"), \
            pytest.warns(DeprecationWarning):
        tn.AsyncHub(delegation_tools=[{"tool_name": "t", "max_tokens": 1, "agent_options": {"max_tokens": 2}}])
