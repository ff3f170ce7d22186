"""Budgets: max_steps, token budgets (own and ancestors'), wall-clock per turn; at the root and below."""

from __future__ import annotations

import asyncio
import random

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core import budget
from toh_nb.core.content import ToolCall

from ..helpers import seen_by_model, until


def looping(usage=(0, 0)):
    """A model that never ends its turn: every step calls job_list; each response reports ``usage``."""
    calls = []

    async def model(req):
        calls.append((req.agent_id, req.turn, req.step))
        return tn.ModelResponse(tool_calls=[ToolCall("job_list", {})], usage=tn.Usage(*usage))

    return model, calls


def _results_answer_every_call(session):
    calls = [b.id for e in session.events if e.message is not None and e.message.role == "assistant"
             for b in e.message.content if b.type == "tool-call"]
    answered = [e.message.tool_call_id for e in session.events if e.message is not None and e.message.role == "tool"]
    return calls == answered


def test_max_steps_ends_a_runaway_root_turn_with_its_own_reason():
    model, calls = looping()

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), max_steps=3) as hub:
            result = await hub.run("go")
            assert _results_answer_every_call(engine_of(hub).root.session)
            # the next turn gets a fresh step count
            assert (await hub.run("again")).stop_reason == "max-steps"
            return result

    result = asyncio.run(main())
    assert result.stop_reason == "max-steps"
    assert result.diagnostic == "the turn reached its step limit of 3 model calls (max_steps=3)"
    assert [step for _, turn, step in calls if turn == 1] == [1, 2, 3]


def test_default_max_steps_is_fifty():
    model, calls = looping()

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model)) as hub:
            return await hub.run("go")

    assert asyncio.run(main()).stop_reason == "max-steps"
    assert len(calls) == 50


def test_a_child_hitting_max_steps_reports_it_to_its_parent():
    async def model(req):
        if req.depth == 0:
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[ToolCall("subagent", {"description": "loop", "prompt": "p"},
                                                             id="c1")])
            return "root saw it"
        return tn.ModelResponse(tool_calls=[ToolCall("job_list", {})])

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", max_steps=4) as hub:
            assert (await hub.run("go")).text == "root saw it"
            return seen_by_model(engine_of(hub).runtime.store.open("root"))

    assert asyncio.run(main())[1] == (
        "TOOL-RESULT c1 (isError): Error: subagent run hit its step limit before finishing\n"
        "Diagnostic: the turn reached its step limit of 4 model calls (max_steps=4)")


def test_per_child_max_steps_and_the_continuable_notice():
    model, calls = looping()

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential") as hub:
            result = await hub.spawn("loop", label="one", max_steps=2)
            kid = await hub.start("loop", label="two", max_steps=3)
            await kid.wait(timeout=5)
            notices = [[b.text for b in m.content] for m in engine_of(hub).root.next_step_inbox]
            return result, notices

    result, notices = asyncio.run(main())
    assert (result.stop_reason, result.diagnostic) == (
        "max-steps", "the turn reached its step limit of 2 model calls (max_steps=2)")
    assert notices == [["Background subagent agent-2 hit its step limit before it finished.",
                        "It left no closing message."]]
    assert [c for c in calls if c[0] == "agent-2"] == [("agent-2", 1, 1), ("agent-2", 1, 2), ("agent-2", 1, 3)]


def test_root_token_budget_stops_the_turn_before_the_call_that_would_exceed_it():
    model, calls = looping(usage=(30, 10))

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), token_budget=100) as hub:
            result = await hub.run("go")
            assert _results_answer_every_call(engine_of(hub).root.session)
            rows = await hub.agents()
            return result, rows

    result, rows = asyncio.run(main())
    assert len(calls) == 3  # 40, 80, 120 tokens: the fourth call is not made
    assert result.stop_reason == "token-budget"
    assert result.diagnostic == "its token budget is spent: 120 of 100 tokens used (token_budget=100)"
    assert (rows[0]["subtree_tokens"], rows[0]["token_budget"], rows[0]["tokens_left"]) == (120, 100, 0)


def test_a_grandchild_spends_its_ancestors_budget():
    """Root → child → grandchild; the grandchild's tokens count against the root's budget (and the child's)."""

    async def model(req):
        if req.depth < 2 and req.step == 1:
            return tn.ModelResponse(tool_calls=[ToolCall("subagent", {"description": f"level {req.depth + 1}",
                                                                      "prompt": "go deeper"}, id=f"d{req.depth}")],
                                    usage=tn.Usage(5, 5))
        if req.depth < 2:
            return tn.ModelResponse(text=f"level {req.depth} done", usage=tn.Usage(5, 5))
        return tn.ModelResponse(tool_calls=[ToolCall("job_list", {})], usage=tn.Usage(20, 10))

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", token_budget=200) as hub:
            result = await hub.run("go")
            rows = {r["id"]: r for r in await hub.agents()}
            return result, rows, seen_by_model(engine_of(hub).runtime.store.open("agent-1"))

    result, rows, child_seen = asyncio.run(main())
    # root 10 + child 10 + grandchild 30 per step: the grandchild stops once the tree has used 200
    assert child_seen[1].startswith("TOOL-RESULT d1 (isError): Error: subagent run ran out of its token budget "
                                    "before finishing\nDiagnostic: the token budget of its ancestor root is spent: ")
    assert result.stop_reason == "token-budget"  # the root's own next call is refused too
    assert rows["root"]["subtree_tokens"] == sum(r["input_tokens"] + r["output_tokens"] for r in rows.values())
    assert rows["root"]["subtree_tokens"] >= 200 and rows["root"]["tokens_left"] == 0
    assert rows["agent-2"]["token_budget"] is None


def test_a_child_budget_covers_its_own_subtree_only():
    async def model(req):
        if req.label == "capped":
            return tn.ModelResponse(tool_calls=[ToolCall("job_list", {})], usage=tn.Usage(10, 0))
        return tn.ModelResponse(text="free", usage=tn.Usage(10, 0))

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential") as hub:
            capped = await hub.spawn("work", label="capped", token_budget=25)
            free = await hub.spawn("work", label="free")
            rows = {r["id"]: r for r in await hub.agents()}
            return capped, free, rows

    capped, free, rows = asyncio.run(main())
    assert capped.stop_reason == "token-budget" and capped.usage.input_tokens == 30
    assert free.stop_reason == "completed"
    assert (rows["agent-1"]["token_budget"], rows["agent-1"]["tokens_left"]) == (25, 0)
    assert rows["root"]["subtree_tokens"] == 40


def test_turn_timeout_ends_the_turn_and_queued_messages_still_run():
    async def model(req):
        if req.last_user_text == "hang":
            await asyncio.Event().wait()
        return "answered " + req.last_user_text

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential") as hub:
            kid = await hub.start("hang", label="slow", turn_timeout=0.2)
            await hub.send(kid.id, "next")
            closing = await kid.wait(timeout=5)
            return closing, [e.data for e in engine_of(hub).runtime.store.open(kid.id).events if e.kind == "turn/end"]

    closing, ends = asyncio.run(main())
    assert closing == "answered next"
    assert ends == [{"reason": "max-time", "error": "the turn ran out of its time limit of 0.2 s (turn_timeout=0.2)"},
                    {"reason": "completed"}]


def test_hub_turn_timeout_applies_to_the_root():
    async def model(req):
        await asyncio.Event().wait()

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), turn_timeout=0.1) as hub:
            return await hub.run("go")

    result = asyncio.run(main())
    assert (result.stop_reason, result.diagnostic) == (
        "max-time", "the turn ran out of its time limit of 0.1 s (turn_timeout=0.1)")


def test_delegation_tool_budgets_bound_the_children_it_starts():
    async def model(req):
        if req.depth == 0:
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[ToolCall("capped", {"description": "c", "prompt": "p"}, id="c1")])
            return "done"
        return tn.ModelResponse(tool_calls=[ToolCall("job_list", {})])

    tools = [{"tool_name": "capped", "max_steps": 2}]

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", delegation_tools=tools) as hub:
            await hub.run("go")
            return seen_by_model(engine_of(hub).runtime.store.open("root"))[1]

    assert asyncio.run(main()).startswith("TOOL-RESULT c1 (isError): Error: subagent run hit its step limit")


@pytest.mark.parametrize("kwargs, message", [
    ({"max_steps": 0}, "max_steps must be an integer >= 1 or None (no limit), got 0"),
    ({"max_steps": True}, "max_steps must be an integer >= 1 or None (no limit), got True"),
    ({"max_steps": 2.5}, "max_steps must be an integer >= 1 or None (no limit), got 2.5"),
    ({"token_budget": -1}, "token_budget must be an integer >= 1 (tokens) or None (no budget), got -1"),
    ({"token_budget": "100"}, "token_budget must be an integer >= 1 (tokens) or None (no budget), got '100'"),
    ({"turn_timeout": 0}, "turn_timeout must be a positive number of seconds or None (no limit), got 0"),
    ({"turn_timeout": float("nan")}, "turn_timeout must be a positive number of seconds or None (no limit), got nan"),
    ({"max_tokens": 0}, "max_tokens must be an integer >= 1 or None, got 0"),
])
def test_bad_budget_values_name_the_parameter(kwargs, message):
    with pytest.raises(tn.UsageError) as error:
        tn.AsyncHub(**kwargs)
    assert str(error.value) == message


def test_bad_per_child_budget_is_refused_and_nothing_starts():
    async def main():
        async with tn.AsyncHub(ids="sequential") as hub:
            with pytest.raises(tn.UsageError, match="token_budget must be an integer >= 1"):
                await hub.spawn("x", token_budget=0)
            with pytest.raises(tn.UsageError, match="max_steps must be an integer >= 1"):
                await hub.start("x", label="x", max_steps=False)
            with pytest.raises(tn.UsageError, match="agent_options takes only"), \
                    pytest.warns(DeprecationWarning, match="^agent_options is deprecated"):
                tn.AsyncHub(delegation_tools=[{"agent_options": {"budget": 1}}])
            with pytest.raises(TypeError, match="budget"):
                tn.AsyncHub(delegation_tools=[{"budget": 1}])
            return str(await hub.list_agents()), await hub.agents()

    listing, rows = asyncio.run(main())
    assert listing == "(no subagents)" and [r["id"] for r in rows] == ["root"]


def test_root_max_tokens_reaches_the_model_request_and_children_inherit_it():
    seen = {}

    async def model(req):
        seen[req.depth] = req.max_tokens
        if req.depth == 0 and req.step == 1:
            return tn.ModelResponse(tool_calls=[ToolCall("subagent", {"description": "c", "prompt": "p"})])
        return "ok"

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), max_tokens=256) as hub:
            await hub.run("go")

    asyncio.run(main())
    assert seen == {0: 256, 1: 256}


def test_a_resumed_child_keeps_its_budget_in_process():
    async def model(req):
        return tn.ModelResponse(tool_calls=[ToolCall("job_list", {})])

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential") as hub:
            kid = await hub.start("a", label="k", max_steps=2)
            await kid.wait(timeout=5)
            assert kid.status == "ready"
            await hub.send(kid.id, "b")  # cold resume in the same process
            await until(lambda: kid.status == "ready", "the resumed child to settle")
            return [e.data.get("error") for e in engine_of(hub).runtime.store.open(kid.id).events if e.kind == "turn/end"]

    assert asyncio.run(main()) == ["the turn reached its step limit of 2 model calls (max_steps=2)"] * 2


# -- reservations: parallel calls cannot jointly overshoot (toh_nb.core.budget) ----------------------------


def fan_out(count: int, tool: str = "subagent"):
    """The root's first answer holds ``count`` delegations, its second ends the turn."""
    return tn.ModelResponse(tool_calls=[ToolCall(tool, {"description": f"c{i}", "prompt": "p"}, id=f"c{i}")
                                        for i in range(count)])


def results_of(session):
    return [e.message.text for e in session.events if e.kind == "tool/result"]


def test_fifty_parallel_children_cannot_overshoot_the_roots_budget():
    """The issue's scenario: 50 children started by one answer, 200 tokens a call, 1,000 for the tree.
    Each child checked "0 of 1000 used" before any had charged: 10,000 tokens used."""
    calls = []

    async def model(req):
        if req.depth == 0:
            return fan_out(50) if req.step == 1 else "done"
        calls.append(req.agent_id)
        await asyncio.sleep(0.001)  # the calls overlap
        return tn.ModelResponse(text="child answer", usage=tn.Usage(150, 50))

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", token_budget=1000,
                               max_parallel_tool_calls=50) as hub:
            result = await hub.run("go")
            return result, engine_of(hub).root, await hub.agents(), results_of(engine_of(hub).root.session)

    result, root, rows, results = asyncio.run(main())
    # no max_tokens anywhere: each call reserves what is left, so they run one at a time
    assert len(calls) == 5 and root.subtree_tokens == 1000 and root.reserved_tokens == 0
    assert results.count("child answer") == 5
    refused = ("Error: subagent run ran out of its token budget before finishing\nDiagnostic: the token budget "
               "of its ancestor root is spent: 1000 of 1000 tokens used (token_budget=1000)")
    assert results.count(refused) == 45
    assert (result.stop_reason, result.diagnostic) == (
        "token-budget", "its token budget is spent: 1000 of 1000 tokens used (token_budget=1000)")
    assert rows[0]["tokens_left"] == 0 and rows[0]["subtree_tokens"] == 1000


def children_calls(count: int, usage=(80, 20), pause=0.001):
    """A model: the root fans out ``count`` children; each child's call overlaps others and reports
    ``usage``. Records the calls in flight at once and each child call's reservation estimate."""
    seen = {"most": 0, "in_flight": 0, "estimates": set(), "calls": 0}

    async def model(req):
        if req.depth == 0:
            return fan_out(count) if req.step == 1 else "done"
        seen["estimates"].add(budget.prompt_estimate(req.system, req.tools, req.messages))
        seen["calls"] += 1
        seen["in_flight"] += 1
        seen["most"] = max(seen["most"], seen["in_flight"])
        try:
            await asyncio.sleep(pause)
        finally:
            seen["in_flight"] -= 1
        return tn.ModelResponse(text="child answer", usage=tn.Usage(*usage))

    return model, seen


def run_fan_out(count: int, token_budget: int, **options):
    model, seen = children_calls(count, **options.pop("model_options", {}))

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", token_budget=token_budget,
                               max_parallel_tool_calls=count, **options) as hub:
            result = await hub.run("go")
            return result, engine_of(hub).root, results_of(engine_of(hub).root.session)

    return (*asyncio.run(main()), seen)


def test_with_max_tokens_parallel_calls_run_together_while_the_budget_has_room():
    """With an output bound, a call reserves its prompt estimate + max_tokens: calls run together while
    the budget has room for them, and wait (not fail) while calls in flight hold it."""
    *_, probe = run_fan_out(30, 10**9, max_tokens=20)
    assert len(probe["estimates"]) == 1 and probe["most"] == 30  # a large budget holds nobody back
    call = probe["estimates"].pop() + 20
    result, root, results, seen = run_fan_out(30, 3 * call - 10, max_tokens=20)
    assert seen["most"] == 3  # room for three reservations at a time (the fourth would start at 3 * call)
    assert results.count("child answer") == 30 and root.subtree_tokens == 3000  # they waited, then ran
    assert result.stop_reason == "completed" and root.reserved_tokens == 0


def test_a_server_that_ignores_max_tokens_is_charged_what_it_reports():
    """The settle charges the reported usage, whatever was reserved; the overshoot is bounded by the
    calls in flight when the last one was admitted (here three, each 980 tokens over its reservation)."""
    *_, probe = run_fan_out(30, 10**9, max_tokens=20)
    call = probe["estimates"].pop() + 20
    result, root, results, seen = run_fan_out(30, 3 * call - 10, max_tokens=20,
                                              model_options={"usage": (call, 1000)})
    assert seen["most"] == 3 and seen["calls"] == 3  # after them, the budget is spent: no more calls
    assert root.subtree_tokens == 3 * (call + 1000) and root.reserved_tokens == 0
    # an output over max_tokens also ends each of those turns max-tokens, as before
    assert results.count("Error: subagent run hit its token limit before finishing\nPartial output before the run "
                         "ended:\nchild answer") == 3
    assert results.count("Error: subagent run ran out of its token budget before finishing\nDiagnostic: the token "
                         f"budget of its ancestor root is spent: {3 * (call + 1000)} of {3 * call - 10} tokens used "
                         f"(token_budget={3 * call - 10})") == 27
    assert result.stop_reason == "token-budget"


def test_a_depth_three_chain_and_a_delegation_tools_budget_bound_their_subtrees():
    """Root (1,000) → a child given 500 by its delegation tool's token_budget → 20 parallel grandchildren,
    100 tokens a call: the child's budget is what stops them, at exactly 500."""
    grandchildren = []

    async def model(req):
        if req.depth == 0:
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[ToolCall("capped", {"description": "c", "prompt": "p"}, id="c")])
            return "root done"
        if req.depth == 1:
            return fan_out(20) if req.step == 1 else "child done"
        grandchildren.append(req.agent_id)
        await asyncio.sleep(0.001)
        return tn.ModelResponse(text="grandchild answer", usage=tn.Usage(60, 40))

    tools = [{"tool_name": "capped", "token_budget": 500}, {"tool_name": "subagent"}]

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", token_budget=1000, delegation_tools=tools,
                               max_parallel_tool_calls=20) as hub:
            result = await hub.run("go")
            child = engine_of(hub).runtime.agents.get("agent-1")
            return result, engine_of(hub).root, results_of(engine_of(hub).runtime.store.open("agent-1")), child

    result, root, child_results, child = asyncio.run(main())
    assert len(grandchildren) == 5 and root.subtree_tokens == 500 and root.reserved_tokens == 0
    assert child_results.count("grandchild answer") == 5
    assert child_results.count("Error: subagent run ran out of its token budget before finishing\nDiagnostic: the "
                               "token budget of its ancestor agent-1 is spent: 500 of 500 tokens used "
                               "(token_budget=500)") == 15
    assert result.stop_reason == "completed" and result.text == "root done"


class Holding:
    """A model whose calls for a prompt starting with "hold" wait until released; others answer at once,
    reporting 100 tokens. ``reports_usage``/``max_tokens``: what the model declares (class attributes)."""

    def __init__(self):
        self.release = asyncio.Event()
        self.calls: list[str] = []
        self.reserved: list[int] = []

    async def request(self, req):
        self.calls.append(req.last_user_text)
        if req.depth == 0:
            return "root"
        self.reserved.append(self.root.reserved_tokens)
        if req.last_user_text.startswith("hold"):
            await self.release.wait()
        return tn.ModelResponse(text="answered " + req.last_user_text, usage=tn.Usage(70, 30))


def test_an_interrupted_call_releases_its_reservation_and_the_waiting_call_runs():
    async def main():
        model = Holding()
        async with tn.AsyncHub(model, ids="sequential", token_budget=1000) as hub:
            model.root = root = engine_of(hub).root
            holder = await hub.start("hold", label="holder")
            await until(lambda: model.calls == ["hold"], "the holder's call")
            held = root.reserved_tokens
            waiter = await hub.start("next", label="waiter")
            await until(lambda: root.budget_waiters, "the waiter to wait for room")
            assert model.calls == ["hold"]
            await holder.interrupt()
            assert await waiter.wait(timeout=5) == "answered next"
            rows = {r["id"]: r for r in await hub.agents()}
            return held, root, rows, model

    held, root, rows, model = asyncio.run(main())
    # no max_tokens: each call reserves all the room left (its prompt estimate when larger), so the
    # waiter's call ran alone once the interrupt released the holder's
    assert held >= 1000 and model.reserved == [held, held]
    assert (root.subtree_tokens, root.reserved_tokens, root.budget_waiters) == (100, 0, None)
    assert rows["agent-1"]["stop_reason"] == "aborted" and rows["agent-2"]["subtree_tokens"] == 100


def test_a_call_waiting_for_room_ends_with_its_turn_timeout_and_holds_nothing():
    async def main():
        model = Holding()
        async with tn.AsyncHub(model, ids="sequential", token_budget=1000) as hub:
            model.root = root = engine_of(hub).root
            holder = await hub.start("hold", label="holder")
            await until(lambda: model.calls == ["hold"], "the holder's call")
            held = root.reserved_tokens
            waiter = await hub.start("next", label="waiter", turn_timeout=0.2)
            await waiter.wait(timeout=5)
            ends = [e.data for e in engine_of(hub).runtime.store.open(waiter.id).events if e.kind == "turn/end"]
            assert root.reserved_tokens == held  # the timed-out waiter never reserved
            model.release.set()
            assert await holder.wait(timeout=5) == "answered hold"
            return ends, root, model

    ends, root, model = asyncio.run(main())
    assert ends == [{"reason": "max-time", "error": "the turn ran out of its time limit of 0.2 s (turn_timeout=0.2)"}]
    assert model.calls == ["hold"]
    assert (root.subtree_tokens, root.reserved_tokens, root.budget_waiters) == (100, 0, None)


def test_a_model_that_reports_no_usage_reserves_nothing_but_a_spent_budget_still_stops_it():
    """ACP agents: their tokens are the external agent's, never reported; their calls run together."""

    class Unreported(Holding):
        reports_usage = False

    async def main():
        model = Unreported()
        async with tn.AsyncHub(model, ids="sequential", token_budget=1000) as hub:
            model.root = root = engine_of(hub).root
            first = await hub.start("hold one", label="one")
            second = await hub.start("hold two", label="two")
            await until(lambda: len(model.calls) == 2, "both calls to run at once")
            model.release.set()
            await first.wait(timeout=5)
            await second.wait(timeout=5)
            root.subtree_tokens = 1000  # spent (as by another child)
            refused = await hub.spawn("third", label="three")
            return model, root, refused

    model, root, refused = asyncio.run(main())
    assert model.reserved == [0, 0] and root.reserved_tokens == 0
    assert (refused.stop_reason, refused.diagnostic) == (
        "token-budget", "the token budget of its ancestor root is spent: 1000 of 1000 tokens used (token_budget=1000)")


@pytest.mark.parametrize("hub_max_tokens, bound", [(None, 7), (5, 5)])
def test_a_call_reserves_its_prompt_estimate_plus_the_effective_max_tokens(hub_max_tokens, bound):
    """The output bound: the agent's max_tokens (inherited from the hub), else the model's own default
    (its integer ``max_tokens`` attribute). The prompt estimate: the previous call's reported size plus
    the messages since, at 4 characters a token; the first call's, everything at that rate."""

    class Bounded:
        max_tokens = 7

        def __init__(self):
            self.seen = []

        async def request(self, req):
            self.seen.append((self.root.reserved_tokens, req.system, list(req.tools), list(req.messages)))
            if req.step == 1:
                return tn.ModelResponse(tool_calls=[ToolCall("job_list", {})], usage=tn.Usage(300, 4))
            return tn.ModelResponse(text="done", usage=tn.Usage(330, 3))

    async def main():
        model = Bounded()
        async with tn.AsyncHub(model, token_budget=10_000, max_tokens=hub_max_tokens) as hub:
            model.root = engine_of(hub).root
            await hub.run("go")
            return model.seen, engine_of(hub).root

    seen, root = asyncio.run(main())
    (first, system, tools, messages), (second, *_, later) = seen
    chars = len(system) + len("go") + sum(len(t.name) + len(t.description) + len(repr(t.parameters)) for t in tools)
    assert first == -(-chars // 4) + bound
    result = later[-1].text  # the job_list result, the only message after the first answer
    assert second == 300 + 4 + -(-len(result) // 4) + bound
    assert (root.subtree_tokens, root.reserved_tokens) == (637, 0)


class Node:
    """A budgeted agent, as much of it as toh_nb.core.budget reads."""

    def __init__(self, token_budget):
        self.id, self.parent, self.limits = "node", None, budget.Limits(token_budget=token_budget)
        self.subtree_tokens = self.reserved_tokens = 0
        self.budget_waiters = None


@pytest.mark.parametrize("honest", [True, False])
def test_the_guarantee_holds_for_any_interleaving_of_calls_and_settles(honest):
    """The README's guarantee, checked over random interleavings: tokens used never exceed
    budget - 1 + R of the last call admitted + what the calls in flight then used beyond their R."""
    rng = random.Random(26)
    for _ in range(300):
        node = Node(rng.randint(1, 3000))
        limit = node.limits.token_budget
        in_flight = []  # [reservation, tokens it will report]
        bound = None  # budget - 1 + R of the last admission + the errors of the calls then in flight
        for _ in range(rng.randint(1, 60)):
            if in_flight and rng.random() < 0.45:
                held, actual = in_flight.pop(rng.randrange(len(in_flight)))
                node.subtree_tokens += actual
                budget.release(held)
                continue
            output = rng.choice([None, rng.randint(1, 400)])
            held = budget.reserve(node, [node], output, lambda: rng.randint(0, 300))
            if held.__class__ is str:
                assert node.subtree_tokens >= limit
                assert held == f"its token budget is spent: {node.subtree_tokens} of {limit} tokens used " \
                              f"(token_budget={limit})"
                continue
            if held.__class__ is not budget.Reservation:  # calls in flight hold the room: it would wait
                held.close()
                assert node.subtree_tokens < limit <= node.subtree_tokens + node.reserved_tokens
                continue
            error = rng.randint(0, 500) if not honest and rng.random() < 0.3 else 0
            in_flight.append([held, rng.randint(0, held.tokens) + error])
            bound = limit - 1 + held.tokens + sum(max(0, a - h.tokens) for h, a in in_flight)
        for held, actual in in_flight:
            node.subtree_tokens += actual
            budget.release(held)
        assert node.reserved_tokens == 0
        if bound is not None:
            assert node.subtree_tokens <= bound


def test_a_response_that_breaks_the_turn_after_the_call_still_gives_its_reservation_back():
    async def model(req):
        return tn.ModelResponse(text="x", usage=None)  # no Usage object: the turn fails after the call

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), token_budget=1000) as hub:
            hub.view.subscribe(lambda event: None)  # the stream reads the usage too
            return await hub.run("go", check=False), engine_of(hub).root

    result, root = asyncio.run(main())
    assert result.stop_reason == "error" and (root.reserved_tokens, root.subtree_tokens) == (0, 0)
