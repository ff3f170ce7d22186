"""The provider seam: a third provider, written here, plugs in without touching the service.

``Remote`` stands for an agent that lives elsewhere (an ACP process, a Ray actor): its plan is a model
adapter (one turn = one prompt), it brings its own tools, records its activity into the child's
transcript, and holds a resource that must be released when the child is disposed.
"""

from __future__ import annotations

import asyncio

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.content import ToolCall
from toh_nb.core.tools import Tool

from ..helpers import seen_by_model, until


class Remote:
    capabilities = tn.Capabilities(persona=False, tool_filter=False, depth_limit=False)

    def __init__(self, name=None):
        self.name = name
        self.opened = []
        self.closed = []
        self.resumed = []
        self.requests = []

    def plan_for(self, child):
        handle = f"{child.id}#{len(self.opened) + 1}"
        self.opened.append(handle)
        provider = self

        class Adapter:
            async def request(self, req):
                provider.requests.append(req)
                child.record("tool_call", {"title": "read file", "status": "completed"})
                return tn.ModelResponse(text=f"remote answer to: {req.last_user_text}")

        async def close():
            self.closed.append(handle)

        return tn.ChildPlan(model=Adapter(), own_tools=True, close=close)

    async def plan(self, child):
        await asyncio.sleep(0)  # a real one starts a process here
        return self.plan_for(child)

    async def resume(self, child, session):
        self.resumed.append(child.id)
        await asyncio.sleep(0)
        return self.plan_for(child)


def test_one_shot_through_a_registered_provider_records_activity_and_releases_it():
    remote = Remote()

    async def main():
        async with tn.AsyncHub(ids="sequential", providers={"remote": remote}) as hub:
            result = await hub.spawn("do the thing", label="r", provider="remote")
            assert result.text == "remote answer to: do the thing"
            assert remote.closed == ["agent-1#1"]  # released when the run was disposed
            assert remote.requests[0].tools == []  # it brings its own tools
            kinds = [row["kind"] for row in await hub.transcript("agent-1", raw=True)]
            assert "external/tool_call" in kinds
            assert [r["mode"] for r in await hub.agents()] == ["root", "one-shot"]

    asyncio.run(main())


def test_continuable_child_settles_releases_and_cold_resumes_through_the_provider():
    remote = Remote()

    async def main():
        async with tn.AsyncHub(ids="sequential", providers={"remote": remote}) as hub:
            kid = await hub.start("first", label="coder", provider="remote")
            assert await kid.wait(timeout=2) == "remote answer to: first"
            await until(lambda: remote.closed == ["agent-1#1"], "the activation's resources to be released")
            await hub.send(kid.id, "second")
            assert await kid.wait(timeout=2) == "remote answer to: second"
            assert remote.resumed == ["agent-1"]
            await until(lambda: len(remote.closed) == 2, "the resumed activation's release")
            assert str(await hub.list_agents()) == "agent-1 [ready] \u2014 coder"

    asyncio.run(main())


def test_hub_close_releases_a_live_external_child():
    remote = Remote()

    async def slow_plan(child):
        plan = remote.plan_for(child)
        inner = plan.model

        class Hanging:
            async def request(self, req):
                await asyncio.Event().wait()
                return await inner.request(req)

        plan.model = Hanging()
        return plan

    remote.plan = slow_plan

    async def main():
        hub = tn.AsyncHub(ids="sequential", providers={"remote": remote})
        await hub.start("work forever", label="busy", provider="remote")
        await hub.close()

    asyncio.run(main())
    assert remote.closed == ["agent-1#1"]


def test_the_model_can_delegate_through_a_mounted_subagent_tool():
    remote = Remote()

    async def model(req):
        if req.step == 1:
            return tn.ModelResponse(tool_calls=[ToolCall("coder", {"description": "fix", "prompt": "fix it"},
                                                         id="c1")])
        return "root done"

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", max_depth=0,
                               providers={"remote": remote},
                               tools=[tn.SubagentTool(name="coder", provider="remote")]) as hub:
            assert {"subagent", "coder"} <= set(engine_of(hub).root.tools)
            assert (await hub.run("go")).text == "root done"
            return seen_by_model(engine_of(hub).runtime.store.open("root"))

    # max_depth=0 forbids spawn children, but the provider manages its own depth: no cap is sent
    assert asyncio.run(main())[1] == "TOOL-RESULT c1: remote answer to: fix it"


def test_capabilities_the_provider_lacks_are_usage_errors_naming_both():
    async def main():
        async with tn.AsyncHub(ids="sequential", providers={"remote": Remote()}) as hub:
            with pytest.raises(tn.UsageError, match='subagent provider "remote" does not support the "persona"'):
                await hub.spawn("x", provider="remote", persona="a pirate")
            with pytest.raises(tn.ProviderError, match='"remote" does not support the "toolFilter"') as info:
                await hub.start("x", label="x", provider="remote", tool_filter={"allow": []})
            assert info.value.code == "UNSUPPORTED_CAPABILITY"
            with pytest.raises(tn.UsageError, match='no subagent provider registered for "nope"'):
                await hub.spawn("x", provider="nope")
            with pytest.raises(tn.UsageError, match='does not support the "persona" capability'):
                tn.AsyncHub(providers={"remote": Remote()}, tools=[tn.SubagentTool(provider="remote", persona="p")])
            assert str(await hub.list_agents()) == "(no subagents)"

    asyncio.run(main())


def test_registration_errors():
    class NoCaps:
        name = None

        async def plan(self, child):
            return tn.ChildPlan()

    with pytest.raises(tn.UsageError, match=r'^providers\["bad"\] must be a subagent provider .*, got NoCaps$'):
        tn.AsyncHub(providers={"bad": NoCaps()})
    with pytest.raises(tn.UsageError, match='registered as "a" is named "b"'):
        tn.AsyncHub(providers={"a": Remote(name="b")})
    with pytest.raises(tn.SubagentError, match='"spawn" is already registered'):
        tn.AsyncHub(providers={"spawn": Remote()})
    with pytest.raises(tn.UsageError, match="providers must be a dict"):
        tn.AsyncHub(providers=[Remote()])


def test_a_child_whose_provider_is_not_registered_cannot_resume(tmp_path):
    async def main():
        async with tn.AsyncHub(ids="sequential", store=str(tmp_path), providers={"remote": Remote()}) as hub:
            kid = await hub.start("first", label="coder", provider="remote")
            await kid.wait(timeout=2)
        async with tn.AsyncHub(ids="sequential", store=str(tmp_path)) as hub:
            listing = str(await hub.list_agents())
            refused = await hub.call_tool("send_message", subagent_id="agent-1", message="again")
            return listing, refused.text

    listing, refused = asyncio.run(main())
    assert listing == 'agent-1 [diagnostic: cannot resume: provider "remote" is not registered on this hub]'
    assert refused == ('Error: subagent "agent-1" cannot resume: its provider "remote" is not '
                       "registered on this hub")


def test_a_plan_can_run_user_tools_elsewhere_and_a_provider_is_closed_with_the_hub():
    """``ChildPlan.wrap_tool`` swaps the child's user tools (toh_nb's own tools are the provider's to
    keep), ``ChildInfo.model`` is the model the child would run in-process, ``aclose`` runs at close."""
    seen = {}

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    class Elsewhere:
        name = "elsewhere"
        capabilities = tn.Capabilities()
        closed = 0

        async def plan(self, child):
            seen["model"] = child.model

            def wrap(tool):
                if tool.name != "add":
                    return tool
                return Tool(tool.name, tool.description, tool.args_model,
                               lambda ctx, args: f"elsewhere {args.a + args.b}", parameters=tool.parameters)

            return tn.ChildPlan(wrap_tool=wrap)

        async def aclose(self):
            self.closed += 1

    async def model(req):
        if req.label == "kid" and req.step == 1:
            return tn.ModelResponse(tool_calls=[ToolCall("add", {"a": 1, "b": 2}, id="a1")])
        return req.messages[-1].text

    provider = Elsewhere()
    function_model = tn.FunctionModel(model)

    async def main():
        async with tn.AsyncHub(function_model, ids="sequential", tools=[add],
                               providers={"elsewhere": provider}) as hub:
            result = await hub.spawn("sum", label="kid", provider="elsewhere")
            plain = await hub.spawn("sum", label="kid")
            assert provider.closed == 0
            return result.text, plain.text, engine_of(hub).root.tools["add"]

    text, plain, root_add = asyncio.run(main())
    assert (text, plain) == ("elsewhere 3", "3")
    assert seen["model"] is function_model and provider.closed == 1
    assert type(root_add).__name__ == "FunctionTool"  # the shared view is untouched


def test_a_provider_failing_to_close_is_reported_and_the_others_still_close(caplog):
    """A pool-level ``aclose`` that raises is a logged problem, never a failed ``hub.close()``."""

    class Pool:
        capabilities = tn.Capabilities()

        def __init__(self, name, error=None):
            self.name, self.error, self.closed = name, error, 0

        async def plan(self, child):
            return tn.ChildPlan()

        async def aclose(self):
            self.closed += 1
            if self.error is not None:
                raise self.error

    broken, fine = Pool("broken", RuntimeError("boom")), Pool("fine")

    async def main():
        hub = tn.AsyncHub(tn.FunctionModel(lambda req: "ok"), providers={"broken": broken, "fine": fine})
        await hub.close()

    with caplog.at_level("WARNING", logger="toh_nb"):
        asyncio.run(main())
    assert (broken.closed, fine.closed) == (1, 1)
    assert 'subagent: closing subagent provider "broken" failed: boom' in [
        f"{r.getMessage()}" for r in caplog.records if r.name == "toh_nb"]
