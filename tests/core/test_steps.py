"""The step loop seam (``toh_nb.core.steps``): the loop runs over any TurnContext, and an agent's turns
step in whatever StepLoop it was given while the agent keeps the lifecycle."""

from __future__ import annotations

import asyncio
from collections import deque

from toh_nb.core.budget import Limits
from toh_nb.core.content import Message, ToolCall, Usage, user_message
from toh_nb.core.events import EventBus
from toh_nb.core.model import ToolSpec
from toh_nb.core.session import ASSISTANT_MESSAGE, Session, SessionHeader
from toh_nb.core.steps import LOCAL_STEPS, Records, StepLoop, TurnContext, TurnOutcome
from toh_nb.core.tools import FunctionTool, ToolContext, invoke
from toh_nb.models.scripted import ScriptedModel

from .harness import kinds, make_agent


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Bare(Records):
    """A TurnContext that is not an Agent: what a provider running steps elsewhere builds."""

    def __init__(self, model):
        self.id, self.label, self.depth, self.path = "bare", None, 0, "root"
        self.model = model
        self.system = "system"
        tool = FunctionTool(add)
        self.tools = {tool.name: tool}
        self.tool_specs = [ToolSpec(tool.name, tool.description, tool.parameters)]
        self.max_tokens = None
        self.max_parallel_tool_calls = 10
        self.limits = Limits(max_steps=None)
        self.usage = Usage()
        self.messages = [user_message("add 2 and 3")]
        self.session = Session(SessionHeader("bare", 0.0))
        self.bus = EventBus(10)
        self.next_step_inbox, self.steer_pending, self.unyielded = deque(), False, 0  # the inbox a loop reads
        self.calls = 0

    def who(self):
        return {"agent_id": self.id, "parent_id": None, "depth": 0}

    def log_user(self, message, turn):
        self.session.append("user/message", turn=turn, message=message)
        self.messages.append(message)

    def claim(self, message, turn):
        self.log_user(message, turn)

    def queued(self):
        return list(self.next_step_inbox), self.steer_pending

    def new_call_id(self):
        self.calls += 1
        return f"bare-call-{self.calls}"

    def allowance(self, bound=None, reports_usage=None):
        return None

    def budgeted(self):
        return False

    def charge(self, usage, held=None):
        self.usage.add(usage)

    def call_tool(self, tool, call_id, args):
        return invoke(tool, ToolContext(self, None, call_id), args)


def test_the_local_loop_runs_over_a_context_that_is_not_an_agent():
    model = ScriptedModel({"bare": [[ToolCall("add", {"a": 2, "b": 3})], "5"]})
    context: TurnContext = Bare(model)
    state = TurnOutcome(1, "completed")
    asyncio.run(LOCAL_STEPS.run(context, state))
    assert (state.reason, state.error, [b.text for b in state.output]) == ("completed", None, ["5"])
    assert [e.kind for e in context.session.events] == ["assistant/message", "tool/call", "tool/result",
                                                        "assistant/message"]
    assert [(m.role, m.text) for m in context.messages] == [("user", "add 2 and 3"), ("assistant", ""),
                                                           ("tool", "5"), ("assistant", "5")]
    assert context.messages[1].content[0].id == "bare-call-1"  # the context named the call


class Elsewhere(StepLoop):
    """A provider's own loop: answers through the context, and sees messages steered in while it runs."""

    forwards_messages = True

    def __init__(self):
        self.delivered = []
        self.gate = None

    async def run(self, context, state):
        self.gate = asyncio.get_running_loop().create_future()
        await self.gate
        message = Message("assistant", f"answered elsewhere after {len(self.delivered)} delivered")
        context.session.append(ASSISTANT_MESSAGE, turn=state.turn, message=message)
        context.messages.append(message)
        state.output = message.content

    def deliver(self, context, message, steer):
        self.delivered.append((message.text, steer))


def test_an_agent_steps_in_the_loop_it_was_given_and_keeps_its_lifecycle():
    async def main():
        loop = Elsewhere()
        runtime, agent = make_agent(ScriptedModel({}))
        session = runtime.store.create(SessionHeader("child", 0.0, parent_session="root", origin="subagent"))
        child = runtime.create_agent(session, label="c", depth=1, parent=agent, mode="one-shot", steps=loop)
        done = child.submit(user_message("go"))
        while loop.gate is None:
            await asyncio.sleep(0)
        child.steer(user_message("steered"))
        child.inject(user_message("injected"))
        loop.gate.set_result(None)
        outcome = await done
        return type(child), child, outcome, loop

    kind, child, outcome, loop = asyncio.run(main())
    assert kind.__name__ == "Agent" and child.steps is loop
    assert (outcome.reason, [b.text for b in outcome.output]) == ("completed", ["answered elsewhere after 2 delivered"])
    assert loop.delivered == [("steered", True), ("injected", False)]
    assert kinds(child)[0] == "turn/start" and kinds(child)[-1] == "turn/end"


def test_every_agent_defaults_to_the_one_local_loop():
    runtime, agent = make_agent(ScriptedModel({}))
    assert agent.steps is LOCAL_STEPS


def test_the_seam_is_public():
    import toh_nb as tn
    from toh_nb.core import steps

    assert (tn.StepLoop, tn.LocalSteps, tn.TurnContext) == (steps.StepLoop, steps.LocalSteps, steps.TurnContext)
    assert {"StepLoop", "LocalSteps", "TurnContext"} <= set(tn.__all__)
