"""The reference scenarios through ``provider="ray"``: every text the parent, the user and the log see
is the same as through ``spawn`` (each scenario runs both ways on one scripted model and compares the
rendered sessions), while the child's model and user tools run on the host actors."""

from __future__ import annotations

import asyncio
import os

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of

from ..helpers import render, until
from .scripts import Script, add, marks_of, where

pytestmark = pytest.mark.slow
WAIT = 60.0  # seconds: the machine is shared and a host may be starting


def sessions(hub) -> dict[str, list[str]]:
    """Every session rendered; the descriptor's provider name (and the marks file a tool may be given) are
    the expected differences."""
    store = engine_of(hub).runtime.store
    ids = [row["id"] for row in hub.view.agents()]
    return {agent_id: [line.replace('"provider":"ray"', '"provider":"spawn"').replace("/ray.marks", "/spawn.marks")
                       for line in render(store.open(agent_id))] for agent_id in ids}


def both_ways(scenario, tmp_path, **hub_options):
    """Run ``scenario(hub, provider_name, marks)`` through spawn and through ray; both results."""
    out = {}
    for name in ("spawn", "ray"):
        marks = str(tmp_path / f"{name}.marks")

        async def main():
            providers = {"ray": tn.RayProvider()} if name == "ray" else {}
            options = {"tools": [add], **hub_options}
            async with tn.AsyncHub(Script(marks), ids="sequential", providers=providers, **options) as hub:
                value = await scenario(hub, name, marks)
                return value, sessions(hub)

        out[name] = asyncio.run(main())
    return out


def test_foreground_child_runs_its_model_and_user_tool_on_a_host(ray_cluster, tmp_path):
    async def scenario(hub, provider, marks):
        result = await hub.spawn("compute", label="calc", provider=provider)
        return result.text, result.stop_reason, result.usage.input_tokens

    out = both_ways(scenario, tmp_path)
    assert out["ray"][0] == ("calc: the sum is 5", "completed", 12)
    assert out["ray"] == out["spawn"]


def test_user_tools_run_in_the_host_process_and_control_tools_in_the_driver(ray_cluster):
    async def main():
        provider = tn.RayProvider(Script())
        async with tn.AsyncHub(Script(), ids="sequential", providers={"ray": provider}, tools=[where]) as hub:
            result = await hub.spawn("where", label="w", provider="ray")
            return result.text, {h.pid for h in provider.pool.hosts}

    text, host_pids = asyncio.run(main())
    pid = int(text.rsplit(" ", 1)[1])
    assert text.startswith("w: pid ") and pid != os.getpid() and pid in host_pids


def test_background_job_and_its_completion_notice(ray_cluster, tmp_path):
    async def scenario(hub, provider, marks):
        job = await hub.spawn("compute", label="bg", background=True, provider=provider)
        return job.id, await job.output(wait=True, timeout=WAIT), job.status

    out = both_ways(scenario, tmp_path)
    assert out["ray"][0] == ("subagent-1", "bg: the sum is 5", "completed")
    assert out["ray"] == out["spawn"]


def test_continuable_child_takes_follow_ups_in_order_and_lists_the_same(ray_cluster, tmp_path):
    async def scenario(hub, provider, marks):
        kid = await hub.start("first", label="kid", provider=provider)
        await hub.send(kid.id, "second")
        await hub.send(kid.id, "third")
        closing = await kid.wait(timeout=WAIT)
        return closing, str(await hub.list_agents("descendants")), kid.status

    out = both_ways(scenario, tmp_path)
    assert out["ray"][0] == ("kid: third", "agent-1 [ready] parent=root depth=1 \u2014 kid", "ready")
    assert out["ray"] == out["spawn"]


def test_interrupt_cancels_the_remote_turn(ray_cluster, tmp_path):
    async def scenario(hub, provider, marks):
        kid = await hub.start("block here", label="blocker", provider=provider)
        await until(lambda: marks_of(marks) == ["started agent-1"], "the remote turn to start", WAIT)
        await hub.interrupt(kid.id)
        await kid.wait(timeout=WAIT)
        await until(lambda: "cancelled agent-1" in marks_of(marks), "the remote coroutine's cancellation", WAIT)
        await hub.send(kid.id, "after")
        return await kid.wait(timeout=WAIT), marks_of(marks)

    out = both_ways(scenario, tmp_path)
    assert out["ray"][0] == ("blocker: after", ["started agent-1", "cancelled agent-1"])
    assert out["ray"] == out["spawn"]


def test_job_kill_cancels_the_remote_turn(ray_cluster, tmp_path):
    async def scenario(hub, provider, marks):
        job = await hub.spawn("block forever", label="doomed", background=True, provider=provider)
        await until(lambda: marks_of(marks) == ["started agent-1"], "the remote turn to start", WAIT)
        killed = await job.kill("enough")
        await job.output(wait=True, timeout=WAIT)
        await until(lambda: "cancelled agent-1" in marks_of(marks), "the remote coroutine's cancellation", WAIT)
        return killed, job.status

    out = both_ways(scenario, tmp_path)
    assert out["ray"][0] == ("requested", "killed")
    assert out["ray"] == out["spawn"]


def test_depth_is_counted_in_the_driver_through_a_mounted_ray_subagent_tool(ray_cluster, tmp_path):
    out = {}
    for name in ("spawn", "ray"):
        async def main():
            providers = {"ray": tn.RayProvider()} if name == "ray" else {}
            async with tn.AsyncHub(Script(), ids="sequential", max_depth=1, providers=providers,
                                   tools=[add, tn.SubagentTool(name="remote", provider=name)]) as hub:
                return (await hub.run("go")).text, sessions(hub)

        out[name] = asyncio.run(main())
    text, logs = out["ray"]
    assert text == "root: deeper: delegated: Error: subagent depth 2 exceeds maxDepth 1"
    assert out["ray"] == out["spawn"]
