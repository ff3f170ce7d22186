"""The agent loop of a Ray child runs on its host actor: one Ray call per turn streams the turn's records
back, whatever the number of steps; toh_nb's own tools run in the driver for the host; messages that
reach a child mid-loop (notices) are read at the host's next step boundary; a cut turn gets the
in-process abort records; and what a child runs on may be given Ray resources of its own."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.session import conversation_of
from toh_nb.core.tools import ABORTED_BEFORE_DISPATCH, ABORTED_DURING_CALL

from ..helpers import render, until
from .scripts import Script, add, hold, marks_of, nap, where
from .test_scenarios import WAIT, both_ways

pytestmark = pytest.mark.slow


def test_five_tool_calling_steps_cost_one_ray_call_and_run_in_the_host_process(ray_cluster):
    async def main():
        provider = tn.RayProvider(Script())
        async with tn.AsyncHub(Script(), ids="sequential", providers={"ray": provider}, tools=[where]) as hub:
            await hub.spawn("warm", label="warm", provider="ray")
            before = provider.round_trips
            result = await hub.spawn("five steps", label="stepper", provider="ray")
            lines = render(engine_of(hub).runtime.store.open(result.agent_id))
            return result, provider.round_trips - before, {h.pid for h in provider.pool.hosts}, lines

    result, round_trips, host_pids, lines = asyncio.run(main())
    assert round_trips == 1  # one streamed call for the whole turn: not one per model call or tool call
    model_pid = int(result.text.split("model pid ")[1].split(";")[0])
    assert model_pid != os.getpid() and model_pid in host_pids
    assert result.text.endswith(f"tools ['pid {model_pid}']")  # the user tool ran in the same host process
    assert result.usage.input_tokens == 25 and result.usage.output_tokens == 5
    assert [line.split(" ")[0] for line in lines if line.startswith(("TOOL", "ASSISTANT"))] == \
        ["ASSISTANT:", "TOOL-CALL", "TOOL-RESULT"] * 5 + ["ASSISTANT:"]


def test_a_notice_that_arrives_mid_loop_is_read_at_the_next_step_as_with_spawn(ray_cluster, tmp_path):
    async def scenario(hub, provider, marks):
        kid = await hub.start("fan", label="fanner", provider=provider)
        closing = await kid.wait(timeout=WAIT)
        return closing

    out = both_ways(scenario, tmp_path)
    closing, logs = out["ray"]
    notice = "background job subagent-1 (subagent: bg) finished [status: completed]. Read its output with job_output."
    assert closing == f"fanner: user: {notice}"
    # read at the step after the waited job_output, inside the turn the host was running
    assert logs["agent-1"][-4:] == ["TOOL-RESULT o1: bg: the sum is 5\n[status: completed]",
                                    f"USER [plugin notice tool-jobs]: {notice}", f"ASSISTANT: fanner: user: {notice}",
                                    '-- turn 1 end: {"kind":"completed"}']
    assert out["ray"] == out["spawn"]


def test_interrupt_mid_loop_commits_the_in_process_abort_records(ray_cluster, tmp_path):
    async def scenario(hub, provider, marks):
        kid = await hub.start("nap then add", label="napper", provider=provider)
        await until(lambda: any(m.startswith("nap started") for m in marks_of(marks)), "the nap to start", WAIT)
        if provider == "ray":  # the driver must have seen the call start (records stream back in batches)
            await until(lambda: "TOOL-CALL n1 nap" in render(engine_of(hub).runtime.agents[kid.id].session),
                        "the driver to log the call", WAIT)
        await hub.interrupt(kid.id)
        await kid.wait(timeout=WAIT)
        await until(lambda: "nap cancelled" in marks_of(marks), "the remote nap's cancellation", WAIT)
        await hub.send(kid.id, "compute")
        return await kid.wait(timeout=WAIT)

    out = both_ways(scenario, tmp_path, tools=[add, nap])
    closing, logs = out["ray"]
    assert closing == "napper: the sum is 5"
    assert logs["agent-1"][4:8] == ["TOOL-CALL n1 nap", f"TOOL-RESULT n1 (isError): Error: {ABORTED_DURING_CALL}",
                                    f"TOOL-RESULT a1 (isError): Error: {ABORTED_BEFORE_DISPATCH}",
                                    '-- turn 1 end: {"kind":"aborted"}']
    assert out["ray"] == out["spawn"]


def test_interrupting_a_child_inside_its_own_subagent_call_keeps_that_tools_abort_rendering(ray_cluster, tmp_path):
    async def scenario(hub, provider, marks):
        kid = await hub.start("delegate a block", label="outer", provider=provider)
        await until(lambda: marks_of(marks) == ["started agent-2"], "the inner turn to start", WAIT)
        await hub.interrupt(kid.id)
        await kid.wait(timeout=WAIT)
        return kid.status

    out = both_ways(scenario, tmp_path)
    status, logs = out["ray"]
    assert status == "ready"
    assert logs["agent-1"][-2:] == ["TOOL-RESULT d1 (isError): Error: subagent run was cancelled",
                                    '-- turn 1 end: {"kind":"aborted"}']
    assert out["ray"] == out["spawn"]


def test_child_resources_run_a_childs_tool_calls_as_ray_tasks_holding_them(ray_cluster, tmp_path):
    marks = str(tmp_path / "marks")

    async def main():
        provider = tn.RayProvider(Script(marks), child_resources=lambda child: (
            {"num_cpus": 1} if child.label == "heavy" else None))
        async with tn.AsyncHub(Script(marks), ids="sequential", providers={"ray": provider}, tools=[hold]) as hub:
            job = await hub.spawn("hold", label="heavy", background=True, provider="ray")
            await until(lambda: len(marks_of(marks)) == 1, "the tool to start", WAIT)
            await until(lambda: ray_cluster.available_resources().get("CPU") == 1.0, "Ray to account the CPU", WAIT)
            Path(marks + ".release").touch()
            heavy = await job.output(wait=True, timeout=WAIT)
            light = (await hub.spawn("hold", label="light", provider="ray")).text
            return heavy, light, {h.pid for h in provider.pool.hosts}

    heavy, light, host_pids = asyncio.run(main())
    heavy_pid, light_pid = int(heavy.rsplit(" ", 1)[1]), int(light.rsplit(" ", 1)[1])
    assert heavy_pid not in host_pids and heavy_pid != os.getpid()  # a Ray task's worker, not the host
    assert light_pid in host_pids  # without child resources the tool runs on the child's host
    with pytest.raises(tn.UsageError) as info:
        tn.RayProvider(child_resources={"cpus": 1})
    assert str(info.value) == "child_resources names 'cpus'; allowed: num_cpus, num_gpus, memory, resources"


def test_the_host_keeps_the_conversation_so_each_turn_sends_only_new_messages(ray_cluster, tmp_path):
    marks = str(tmp_path / "marks")

    async def main():
        provider = tn.RayProvider(Script(marks))
        async with tn.AsyncHub(Script(marks), ids="sequential", providers={"ray": provider}) as hub:
            kid = await hub.start("one", label="kid", provider="ray")
            sent = []
            for message in ("two", "three"):
                await kid.wait(timeout=WAIT)  # settled: the next message resumes it (a new activation)
                sent.append(provider.messages_sent)
                await hub.send(kid.id, message)
            await kid.wait(timeout=WAIT)
            sent.append(provider.messages_sent)
            await hub.send(kid.id, "block me")  # cut by an interrupt: the host's copy is no longer trusted
            await until(lambda: len(marks_of(marks)) == 1, "the remote turn to start", WAIT)
            await hub.interrupt(kid.id)
            await kid.wait(timeout=WAIT)
            before = provider.messages_sent
            await hub.send(kid.id, "four")
            closing = await kid.wait(timeout=WAIT)
            conversation = conversation_of(engine_of(hub).runtime.store.open(kid.id).events)
            return sent, provider.messages_sent - before, len(conversation), closing

    sent, after_cut, conversation, closing = asyncio.run(main())
    assert sent == [1, 2, 3]  # one new user message per turn, never the conversation so far
    assert closing == "kid: four"
    assert after_cut == conversation - 1  # everything again, except the answer the host then adds itself


def test_a_provider_shared_by_two_hubs_keeps_their_children_apart_and_its_pool_until_the_last_closes(ray_cluster):
    from .test_failures import host_actor_names

    async def main():
        provider = tn.RayProvider(Script())
        first = tn.AsyncHub(Script(), ids="sequential", providers={"ray": provider})
        second = tn.AsyncHub(Script(), ids="sequential", providers={"ray": provider})
        answers = []
        for hub, prompt in ((first, "alpha"), (second, "beta")):  # both children are agent-1
            kid = await hub.start(prompt, label="kid", provider="ray")
            await kid.wait(timeout=WAIT)
        for hub in (first, second):
            await hub.send("agent-1", "recall")
            answers.append(await hub.view.settled("agent-1", WAIT))
        await first.close()
        alive = host_actor_names(ray_cluster, provider)
        answers.append((await second.spawn("from the second", label="b", provider="ray")).text)
        await second.close()
        return answers, alive, host_actor_names(ray_cluster, provider)

    answers, alive, left = asyncio.run(main())
    assert answers == ["kid: first was alpha", "kid: first was beta", "b: from the second"]
    assert len(alive) == 2  # the first hub's close left the shared pool to the second
    assert left == []


def stream_of(events: list) -> list[tuple]:
    """The stream as a listener reads it, without the clocks."""
    return [(type(e).__name__, e.agent_id, e.parent_id, e.depth,
             tuple(sorted({**e.fields(), **({"provider": "spawn"} if "provider" in e.fields() else {})}.items(),
                          key=repr))) for e in events]


def test_the_event_stream_and_host_minted_call_ids_read_as_with_spawn(ray_cluster, tmp_path):
    async def scenario(hub, provider, marks):
        events: list = []
        hub.view.subscribe(events.append)
        result = await hub.spawn("add five times", label="adder", provider=provider)
        return result.text, stream_of(events)

    out = both_ways(scenario, tmp_path)
    (text, stream), logs = out["ray"]
    assert text == "adder: added"
    assert "TOOL-CALL call-1 add" in logs["agent-1"]  # the driver's ids, not the host's
    assert [kind for kind, agent, *_ in stream if agent == "agent-1"].count("ToolReturned") == 5
    assert out["ray"] == out["spawn"]


def test_ray_children_fanned_out_at_once_share_the_roots_budget_as_in_process(ray_cluster, tmp_path):
    """Ten Ray children started by one answer, 12 tokens each, 60 for the tree: each child's call is
    reserved on the driver's tree (no max_tokens: all the room left, so one at a time), as in-process.
    Before, each host had the whole allowance of its turn's start: all ten ran, 120 tokens."""
    out = {}
    for name in ("spawn", "ray"):
        async def main():
            providers = {"ray": tn.RayProvider()} if name == "ray" else {}
            async with tn.AsyncHub(Script(), ids="sequential", max_depth=1, providers=providers, token_budget=60,
                                   tools=[tn.SubagentTool(name="remote", provider=name)]) as hub:
                result = await hub.run("fan out")
                root = engine_of(hub).root
                # which five children get the budget depends on how their calls interleave
                return result.stop_reason, root.subtree_tokens, root.reserved_tokens, sorted(
                    re.sub(r"^s\d: spend$", "<child>: spend", e.message.text)
                    for e in root.session.events if e.kind == "tool/result")

        out[name] = asyncio.run(main())
    stop, used, reserved, results = out["ray"]
    assert (stop, used, reserved) == ("token-budget", 60, 0)
    assert results.count("<child>: spend") == 5
    assert results.count("Error: subagent run ran out of its token budget before finishing\nDiagnostic: the token "
                         "budget of its ancestor root is spent: 60 of 60 tokens used (token_budget=60)") == 5
    assert out["ray"] == out["spawn"]


@pytest.mark.parametrize("limits, reason", [({"max_steps": 3}, "max-steps"), ({"token_budget": 14}, "token-budget")])
def test_budgets_stop_the_remote_loop_with_the_in_process_diagnostic(ray_cluster, tmp_path, limits, reason):
    async def scenario(hub, provider, marks):
        result = await hub.spawn("add five times", label="adder", provider=provider, **limits)
        return result.stop_reason, result.text, (await hub.agents())[1]["stop_reason"]

    out = both_ways(scenario, tmp_path)
    (stop, text, row), logs = out["ray"]
    assert (stop, row) == (reason, reason)
    assert out["ray"] == out["spawn"]


def test_a_turn_timeout_cuts_the_remote_loop_like_in_process(ray_cluster, tmp_path):
    async def scenario(hub, provider, marks):
        result = await hub.spawn("nap then add", label="slow", provider=provider, turn_timeout=3)
        await until(lambda: "nap cancelled" in marks_of(marks), "the nap's cancellation", WAIT)
        return result.stop_reason, result.text

    out = both_ways(scenario, tmp_path, tools=[add, nap])
    (stop, text), logs = out["ray"]
    assert stop == "max-time"
    assert logs["agent-1"][-3:] == [f"TOOL-RESULT n1 (isError): Error: {ABORTED_DURING_CALL}",
                                    f"TOOL-RESULT a1 (isError): Error: {ABORTED_BEFORE_DISPATCH}",
                                    '-- turn 1 end: {"kind":"max-time"}']
    assert out["ray"] == out["spawn"]


def host_grants(ray) -> int:
    """How many reservation requests the hosts of this cluster have had answered (their ``stats``)."""
    from toh_nb.providers.ray.pool import NAME_PREFIX, NAMESPACE

    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith(NAME_PREFIX)]
    return sum(ray.get(ray.get_actor(n, namespace=NAMESPACE).stats.remote())["grants"] for n in names)


def test_a_budget_spent_by_a_sibling_mid_turn_stops_the_remote_loop_at_its_next_call(ray_cluster, tmp_path):
    """The budgets live in the driver's tree: before each model call, a budgeted Ray child's loop asks the
    driver for its reservation (one round trip per call), so it sees what a sibling spent meanwhile."""
    async def scenario(hub, provider, marks):
        before = host_grants(ray_cluster) if provider == "ray" else 0
        holder = await hub.start("hold", label="holder", provider=provider)
        await until(lambda: any(m.startswith("hold started") for m in marks_of(marks)), "the hold to start", WAIT)
        spender = await hub.spawn("spend", label="spender", provider=provider)  # 12 tokens: the root's 10 spent
        Path(marks + ".release").touch()
        await holder.wait(timeout=WAIT)
        row = next(r for r in await hub.agents() if r["id"] == holder.id)
        grants = host_grants(ray_cluster) - before if provider == "ray" else 3
        return spender.stop_reason, row["stop_reason"], grants, engine_of(hub).root.reserved_tokens

    out = both_ways(scenario, tmp_path, tools=[hold], token_budget=10)
    (spender, holder, grants, reserved), logs = out["ray"]
    assert (spender, holder, reserved) == ("completed", "token-budget", 0)
    assert grants == 3  # the holder's two calls (the second refused) and the spender's one
    assert logs["agent-1"][-1].startswith('-- turn 1 end: {"kind":"token-budget"')

    def same(value):  # the hold tool names its process
        return re.sub(r"held in \d+", "held in <pid>", str(value))

    assert same(out["ray"]) == same(out["spawn"])
