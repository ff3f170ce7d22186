"""The Agent turn loop: tool loop, inbox verbs, cancellation, max_tokens, usage."""

from __future__ import annotations

import asyncio

import pydantic

from toh_nb.core.content import Source, ToolCall, Usage, user_message
from toh_nb.core.tools import STRICT, Tool
from toh_nb.models import FunctionModel, ModelResponse, ScriptedModel

from .harness import kinds, make_agent


class XArgs(pydantic.BaseModel):
    model_config = STRICT
    x: int


def double_tool(delay: float = 0.0):
    async def double(ctx, args):
        await asyncio.sleep(delay)
        return args.x * 2

    return Tool("double", "Double a number.", XArgs, double, concurrency_safe=True)


def test_tool_loop_runs_to_a_final_answer():
    async def main():
        model = ScriptedModel({"root": [ToolCall("double", {"x": 21}),
                                        lambda req: f"the answer is {req.messages[-1].text}"]})
        runtime, agent = make_agent(model, [double_tool()])
        outcome = await agent.submit(user_message("go"))
        assert outcome.reason == "completed"
        assert [b.text for b in outcome.output] == ["the answer is 42"]
        assert kinds(agent) == ["turn/start", "user/message", "assistant/message", "tool/call", "tool/result",
                                "assistant/message", "turn/end"]
        assert agent.status == "idle"
        request = model.requests[1]
        assert [m.role for m in request.messages] == ["user", "assistant", "tool"]
        assert request.messages[1].tool_calls[0].name == "double"
        assert request.tools[0].parameters["properties"]["x"]["type"] == "integer"

    asyncio.run(main())


def test_usage_is_accounted_per_turn_and_per_agent():
    async def main():
        model = ScriptedModel({"root": [ModelResponse(tool_calls=[ToolCall("double", {"x": 1})], usage=Usage(10, 3)),
                                        ModelResponse(text="done", usage=Usage(20, 5)),
                                        ModelResponse(text="again", usage=Usage(1, 1))]})
        runtime, agent = make_agent(model, [double_tool()])
        first = await agent.submit(user_message("a"))
        second = await agent.submit(user_message("b"))
        assert (first.usage.input_tokens, first.usage.output_tokens) == (30, 8)
        assert (second.usage.input_tokens, second.usage.output_tokens) == (1, 1)
        assert (agent.usage.input_tokens, agent.usage.output_tokens) == (31, 9)
        assert agent.turns == 2

    asyncio.run(main())


def test_model_exception_ends_the_turn_as_error_with_its_message():
    def broken(request):
        raise RuntimeError("simulated provider failure")

    async def main():
        runtime, agent = make_agent(FunctionModel(broken))
        outcome = await agent.submit(user_message("hi"))
        assert outcome.reason == "error"
        assert outcome.error == "simulated provider failure"
        assert agent.session.events[-1].data == {"reason": "error", "error": "simulated provider failure"}

    asyncio.run(main())


def test_max_tokens_ends_the_turn_as_max_tokens():
    async def main():
        model = ScriptedModel({"root": [ModelResponse(text="half an ans", stop_reason="max_tokens"),
                                        ModelResponse(text="way too long", usage=Usage(1, 50))]})
        runtime, agent = make_agent(model, max_tokens=10)
        first = await agent.submit(user_message("a"))
        assert first.reason == "max-tokens" and first.output[0].text == "half an ans"
        second = await agent.submit(user_message("b"))
        assert second.reason == "max-tokens"
        assert model.requests[0].max_tokens == 10

    asyncio.run(main())


def test_refusal_ends_the_turn_blocked():
    async def main():
        runtime, agent = make_agent(ScriptedModel({"root": [ModelResponse(text="no", stop_reason="refusal")]}))
        assert (await agent.submit(user_message("a"))).reason == "blocked"

    asyncio.run(main())


def test_followups_run_as_separate_turns_in_fifo_order():
    async def main():
        seen = []

        async def model(request):
            seen.append(request.last_user_text)
            await asyncio.sleep(0)
            return f"re: {request.last_user_text}"

        runtime, agent = make_agent(FunctionModel(model))
        futures = [agent.submit(user_message(f"m{i}")) for i in range(5)]
        outcomes = await asyncio.gather(*futures)
        assert seen == ["m0", "m1", "m2", "m3", "m4"]
        assert [o.turn for o in outcomes] == [1, 2, 3, 4, 5]
        users = [e.message.text for e in agent.session.events if e.kind == "user/message"]
        assert users == seen

    asyncio.run(main())


def test_steer_is_read_at_the_next_step_and_wakes_an_idle_agent():
    async def main():
        gate = asyncio.Event()
        requests = []

        async def model(request):
            requests.append([m.text for m in request.messages if m.role == "user"])
            if request.step == 1 and request.turn == 1:
                await gate.wait()
                return ModelResponse(tool_calls=[ToolCall("double", {"x": 1})])
            return "ok"

        runtime, agent = make_agent(FunctionModel(model), [double_tool()])
        done = agent.submit(user_message("task"))
        await asyncio.sleep(0)
        agent.steer(user_message("steered"))
        gate.set()
        await done
        assert requests[1] == ["task", "steered"]  # read before the second model call of the same turn
        assert agent.turns == 1
        # idle: steer starts a turn of its own
        agent.steer(user_message("wake up"))
        assert agent.status == "running"
        await agent.when_idle()
        assert agent.turns == 2 and requests[-1][-1] == "wake up"

    asyncio.run(main())


def test_inject_does_not_wake_but_is_read_by_the_next_turn():
    async def main():
        runtime, agent = make_agent(FunctionModel(lambda r: "ok"))
        agent.inject(user_message("quiet notice", source=Source("plugin", form="notice")))
        await asyncio.sleep(0.01)
        assert agent.status == "idle" and agent.turns == 0 and agent.pending == 1
        await agent.submit(user_message("next"))
        users = [e.message.text for e in agent.session.events if e.kind == "user/message"]
        assert users == ["next", "quiet notice"]

    asyncio.run(main())


def test_cancel_mid_model_call_aborts_and_leaves_a_consistent_log(no_leftover_tasks):
    async def main():
        started = asyncio.Event()

        async def slow(request):
            started.set()
            await asyncio.sleep(60)

        runtime, agent = make_agent(FunctionModel(slow))
        done = agent.submit(user_message("work"))
        await started.wait()
        assert agent.cancel("user") is True
        outcome = await done
        assert outcome.reason == "aborted"
        assert kinds(agent) == ["turn/start", "user/message", "turn/end"]
        assert agent.session.events[-1].data == {"reason": "aborted", "cause": "user"}
        await agent.when_idle()
        assert agent.status == "idle"
        no_leftover_tasks()

    asyncio.run(main())


def test_cancel_mid_tool_call_commits_results_for_every_call():
    async def main():
        started = asyncio.Event()

        async def hang(ctx, args):
            started.set()
            await asyncio.sleep(60)

        tools = [Tool("hang", "Hang.", XArgs, hang, concurrency_safe=False), double_tool()]
        model = ScriptedModel({"root": [[ToolCall("hang", {"x": 1}), ToolCall("double", {"x": 2})]]})
        runtime, agent = make_agent(model, tools)
        done = agent.submit(user_message("work"))
        await started.wait()
        agent.cancel("parent")
        outcome = await done
        assert outcome.reason == "aborted"
        results = [(e.message.tool_call_id, e.message.text) for e in agent.session.events if e.kind == "tool/result"]
        assert results == [("call-1", "Error: tool call was aborted before it finished"),
                           ("call-2", "Error: tool call aborted before dispatch")]
        # every assistant tool call has a result: the conversation stays valid for a later turn
        conversation = agent.conversation
        assert [m.role for m in conversation] == ["user", "assistant", "tool", "tool"]

    asyncio.run(main())


def test_cancel_when_idle_is_a_noop_and_does_not_arm():
    async def main():
        runtime, agent = make_agent(FunctionModel(lambda r: "fine"))
        assert agent.cancel("user") is False
        outcome = await agent.submit(user_message("later"))
        assert outcome.reason == "completed"

    asyncio.run(main())


def test_cancel_with_keep_inbox_parks_queued_messages_until_a_waking_send():
    async def main():
        started = asyncio.Event()

        async def model(request):
            if request.last_user_text == "A":
                started.set()
                await asyncio.sleep(60)
            return f"did {request.last_user_text}"

        runtime, agent = make_agent(FunctionModel(model))
        agent.followup(user_message("A"))
        agent.followup(user_message("B"))
        agent.followup(user_message("C"))
        await started.wait()
        agent.cancel("parent", keep_inbox=True)
        await agent.when_idle()
        await asyncio.sleep(0.01)
        assert agent.turns == 1 and agent.pending == 2 and agent.parked
        agent.followup(user_message("D"))
        await agent.when_idle()
        ends = [e.data["reason"] for e in agent.session.events if e.kind == "turn/end"]
        users = [e.message.text for e in agent.session.events if e.kind == "user/message"]
        assert ends == ["aborted", "completed", "completed", "completed"]
        assert users == ["A", "B", "C", "D"]

    asyncio.run(main())


def test_cancel_without_keep_inbox_discards_queued_messages():
    async def main():
        started = asyncio.Event()

        async def model(request):
            started.set()
            await asyncio.sleep(60)

        runtime, agent = make_agent(FunctionModel(model))
        first = agent.submit(user_message("A"))
        second = agent.submit(user_message("B"))
        await started.wait()
        agent.cancel("user")
        assert (await first).reason == "aborted"
        assert (await second).reason == "aborted"  # never ran
        await agent.when_idle()
        assert agent.turns == 1 and agent.pending == 0

    asyncio.run(main())


def test_a_turn_of_instant_steps_yields_so_timeouts_and_other_agents_run():
    """A model that calls a non-awaiting tool forever must not starve the loop: the run's timeout fires."""
    import toh_nb as tn

    async def model(req):  # answers at once, never awaits
        return tn.ModelResponse(tool_calls=[tn.ToolCall("list_agents", {})])

    other = []

    async def ticker():
        for _ in range(3):
            await asyncio.sleep(0)
            other.append(1)

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), max_steps=None) as hub:
            tick = asyncio.ensure_future(ticker())
            result = await hub.run("loop forever", timeout=0.2)
            await tick
            return result

    result = asyncio.run(main())
    assert result.stop_reason == "aborted"
    assert other == [1, 1, 1]


def test_back_to_back_instant_turns_still_yield_every_few_turns():
    """Queued turns of an instant model may run back to back, but never more than TURNS_PER_YIELD
    between two passes through the loop: a model that queues itself a new turn from each turn (and
    never awaits) still lets another task run."""
    from toh_nb.core.agent import TURNS_PER_YIELD

    async def main():
        ticks: list[int] = []
        holder = {}

        async def model(req):  # never awaits; each turn queues another, up to 20 loop-holding batches
            if req.turn < 20 * TURNS_PER_YIELD:
                holder["agent"].followup(user_message(f"again {req.turn}"))
            return "ok"

        runtime, agent = make_agent(FunctionModel(model))
        holder["agent"] = agent

        async def ticker():
            while agent.status != "idle" or not ticks:
                ticks.append(agent.turns)
                await asyncio.sleep(0)

        agent.followup(user_message("go"))
        tick = asyncio.ensure_future(ticker())
        await agent.when_idle()
        await tick
        runtime.closed = True  # the model's closure holds the runtime in a cycle: release its GC hold now
        return agent.turns, ticks

    turns, ticks = asyncio.run(main())
    assert turns == 20 * TURNS_PER_YIELD
    # the other task ran once per TURNS_PER_YIELD turns, from the first turn to the last batch
    assert ticks == list(range(1, 20 * TURNS_PER_YIELD, TURNS_PER_YIELD))
