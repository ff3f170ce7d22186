"""Job registry: ids, caps, the owner fence, wait, kill, and completion notices with the wake budget."""

from __future__ import annotations

import asyncio

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.content import user_message
from toh_nb.core.errors import JobError
from toh_nb.jobs import JobOutcome


async def sleeper(seconds, outcome=JobOutcome("completed", output="out")):
    async def run(job):
        await asyncio.sleep(seconds)
        return outcome
    return run


def hub():
    return tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), ids="sequential")


def test_ids_are_per_kind_and_the_owner_cap_is_ten():
    async def main():
        async with hub() as h:
            jobs, root = engine_of(h).jobs, engine_of(h).root
            run = await sleeper(10)
            ids = [jobs.start(kind, "label", root, run).id for kind in ("bash", "bash", "subagent", "workflow")]
            assert ids == ["bash-1", "bash-2", "subagent-1", "workflow-1"]
            for _ in range(6):
                jobs.start("subagent", "more", root, run)
            with pytest.raises(JobError, match=r"^background job limit reached for this owner \(limit: 10\); use "
                                               r"job_kill to stop an unneeded job, wait for it to finish, then retry$"):
                jobs.start("subagent", "one too many", root, run)
            assert "subagent-8" not in jobs.jobs  # a refusal allocates no id
            jobs.kill("bash-1", root)
            assert jobs.jobs["bash-1"].status == "stopping"  # a stopping job still occupies the bucket
            with pytest.raises(JobError, match="background job limit reached"):
                jobs.start("subagent", "still full", root, run)
            await asyncio.sleep(0.01)
            assert jobs.jobs["bash-1"].status == "killed"
            jobs.start("subagent", "room again", root, run)
            with pytest.raises(JobError, match="invalid job label: expected a non-empty string"):
                jobs.start("subagent", "", root, run)

    asyncio.run(main())


def test_owner_fence_unknown_ids_and_wait_timeouts():
    async def main():
        async with hub() as h:
            jobs, root = engine_of(h).jobs, engine_of(h).root
            job = jobs.start("subagent", "slow", root, await sleeper(10))
            stranger = type("Stranger", (), {"id": "other"})()
            with pytest.raises(JobError, match="^job subagent-1 belongs to another session$"):
                jobs.read("subagent-1", stranger)
            with pytest.raises(JobError, match="^unknown job subagent-9$"):
                jobs.read("subagent-9", root)
            live = await jobs.wait("subagent-1", 20, root)
            assert live is job and live.status == "running"  # a timeout returns the live job, not an error
            for bad in (0, -5, 600_001, "10", True):
                with pytest.raises(JobError, match="invalid wait timeout: expected a positive number of milliseconds "
                                                   "no greater than 600000"):
                    await jobs.wait("subagent-1", bad, root)
            assert jobs.list(stranger) == [] and jobs.list(root) == [job]

    asyncio.run(main())


def test_crashing_and_malformed_jobs_fail_without_hurting_the_registry():
    async def main():
        async with hub() as h:
            jobs, root = engine_of(h).jobs, engine_of(h).root

            async def boom(job):
                raise RuntimeError("transport exploded")

            async def wrong(job):
                return "not an outcome"

            a = jobs.start("x", "boom", root, boom)
            b = jobs.start("x", "wrong", root, wrong)
            await asyncio.sleep(0.01)
            assert (a.status, a.detail) == ("failed", "RuntimeError: transport exploded")
            assert (b.status, b.detail) == ("failed", "job returned str, not a JobOutcome")

    asyncio.run(main())


def test_completion_notices_wake_three_times_then_inject_and_refill_on_user_input():
    async def main():
        async with hub() as h:
            jobs, root = engine_of(h).jobs, engine_of(h).root
            turns_before = root.turns
            for i in range(4):
                jobs.start("subagent", f"j{i}", root, await sleeper(0))
                await asyncio.sleep(0.01)
                await root.when_idle()
            # three wakes (three turns), the fourth notice waits quietly for the next turn
            assert root.turns - turns_before == 3
            assert [m.text for m in root.next_step_inbox] == [
                "background job subagent-4 (subagent: j3) finished [status: completed]. Read its output with job_output."]
            await root.submit(user_message("user input refills the budget"))
            jobs.start("subagent", "j4", root, await sleeper(0))
            await asyncio.sleep(0.01)
            await root.when_idle()
            assert root.turns - turns_before == 5
            notice = [e.message for e in root.session.events if e.kind == "user/message"][-1]
            assert notice.source.kind == "plugin" and notice.source.plugin == "tool-jobs"
            assert notice.source.summary == "subagent j4 [status: completed]"

    asyncio.run(main())


def test_user_started_jobs_never_wake_the_root():
    async def main():
        async with hub() as h:
            job = await h.spawn("bg", label="bg", background=True)
            assert await job.output(wait=True, timeout=5) == "ok"
            await asyncio.sleep(0.01)
            assert engine_of(h).root.turns == 0 and engine_of(h).root.status == "idle"
            # the notice waits, unread, for the root's next turn (it is context for the root's model)
            assert [m.text for m in engine_of(h).root.next_step_inbox] == [
                "background job subagent-1 (subagent: bg) finished [status: completed]. Read its output with job_output."]

    asyncio.run(main())
