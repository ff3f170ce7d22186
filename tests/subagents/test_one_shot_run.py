"""A one-shot run's own machinery: its outcome reaches every waiter, a cancelled waiter never cancels
it, disposal is idempotent, and a foreground delegation creates one task (the child's driver)."""

from __future__ import annotations

import asyncio

import toh_nb as tn
from toh_nb.core.content import ToolCall
from toh_nb.subagents.one_shot import SubagentResult, SubagentRun


def test_a_cancelled_waiter_leaves_the_outcome_to_the_other_waiters():
    async def main():
        run = SubagentRun("a-1", "run-1", "spawn", None)
        first = asyncio.ensure_future(run.result)
        second = asyncio.ensure_future(run.result)
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        value = SubagentResult("completed", [])
        run.settled(value)
        assert await second is value
        assert await run.result is value
        assert first.cancelled()

    asyncio.run(main())


def test_a_failed_outcome_reaches_every_waiter_and_dispose_still_succeeds():
    async def main():
        run = SubagentRun("a-1", "run-1", "spawn", None)
        waiter = run.result
        run.settled(None, RuntimeError("model broke"))
        for future in (waiter, run.result):
            try:
                await future
            except RuntimeError as error:
                assert str(error) == "model broke"
            else:
                raise AssertionError("the outcome's error was not raised")
        await run.dispose()
        await run.dispose()  # idempotent
        assert run.cancelled

    asyncio.run(main())


def test_dispose_before_the_outcome_waits_for_it():
    async def main():
        run = SubagentRun("a-1", "run-1", "spawn", None)
        disposal = asyncio.ensure_future(run.dispose())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not disposal.done()
        run.settled(SubagentResult("completed", []))
        await disposal
        assert run.cancelled

    asyncio.run(main())


def _tasks_created(delegations: int) -> int:
    """Tasks the loop creates while a root delegates ``delegations`` times in sequence."""

    async def model(req):
        if req.depth > 0:
            return "child answer"
        if req.step <= delegations:
            return tn.ModelResponse(tool_calls=[ToolCall("subagent", {"description": "d", "prompt": "p"})])
        return "done"

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model)) as hub:
            loop = asyncio.get_running_loop()
            created = [0]

            def factory(loop, coro, **kwargs):
                created[0] += 1
                return asyncio.Task(coro, loop=loop, **kwargs)

            loop.set_task_factory(factory)
            try:
                assert (await hub.run("go")).text == "done"
            finally:
                loop.set_task_factory(None)
            return created[0]

    return asyncio.run(main())


def test_a_foreground_delegation_creates_one_task_the_childs_driver():
    assert _tasks_created(3) - _tasks_created(1) == 2


def test_a_run_whose_turn_is_cancelled_from_outside_ends_error_never_a_bare_cancelled_error(monkeypatch):
    """A turn's future cancelled by something other than an interrupt, a kill or a limit (the task of a
    crashed provider, a loop shutting down): the foreground spawn and the delegating model get a run that
    ended ``error`` and says why, never a ``CancelledError``."""
    from toh_nb.core.agent import Agent
    from toh_nb.subagents import texts

    turns = []
    submit = Agent.submit

    def recording_submit(self, message, **options):
        future = submit(self, message, **options)
        turns.append(future)
        return future

    monkeypatch.setattr(Agent, "submit", recording_submit)

    async def main():
        started = asyncio.Event()

        async def reply(request):
            if request.depth == 1:
                started.set()
                await asyncio.sleep(30)
            return "never"

        async with tn.AsyncHub(tn.FunctionModel(reply), ids="sequential") as hub:
            spawn = asyncio.create_task(hub.spawn("work", label="w", check=False))
            await started.wait()
            turns[-1].cancel()  # the child's turn outcome, cancelled from outside the turn
            return await asyncio.wait_for(spawn, 10)

    result = asyncio.run(main())
    assert (result.stop_reason, result.diagnostic) == ("error", texts.TURN_CANCELLED)
