"""Failure, restart and teardown of Ray children: a host killed mid-turn, a resume after a hub restart,
``hub.close()`` leaving no actor, what cannot cross the process boundary, and secrets."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.session import TOOL_CALL, TURN_END
from toh_nb.providers.ray.pool import NAME_PREFIX

from ..helpers import render, until
from .scripts import Script, marks_of, stall

pytestmark = pytest.mark.slow
WAIT = 60.0


def placed(provider, child_id: str):
    """The host record of a child of the provider's first hub."""
    return provider.pool.placement[f"{child_id}@1"]


def host_actor_names(ray, provider) -> list[str]:
    prefix = NAME_PREFIX + provider.pool.token
    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith(prefix)]


def test_a_host_killed_mid_turn_ends_the_turn_error_naming_the_node_and_loses_nothing(ray_cluster, tmp_path):
    marks = str(tmp_path / "marks")

    async def main():
        provider = tn.RayProvider(Script(marks))
        async with tn.AsyncHub(ids="sequential", providers={"ray": provider}) as hub:
            kid = await hub.start("hello", label="victim", provider="ray")
            assert await kid.wait(timeout=WAIT) == "victim: hello"
            await hub.send(kid.id, "block until killed")
            await until(lambda: marks_of(marks) == ["started agent-1"], "the remote turn to start", WAIT)
            host = placed(provider, kid.id)
            os.kill(host.pid, signal.SIGKILL)
            with pytest.raises(tn.RunError) as died:  # a person's wait names the part that failed
                await kid.wait(timeout=WAIT)
            assert died.value.cause == "placement"
            session = engine_of(hub).runtime.store.open(kid.id)
            ended = [e.data for e in session.events if e.kind == TURN_END]
            lines = render(session)
            await hub.send(kid.id, "again")  # the next turn runs on a fresh host
            closing = await kid.wait(timeout=WAIT)
            return host, ended, lines, closing, list(provider.pool.hosts)

    host, ended, lines, closing, hosts = asyncio.run(main())
    assert ended[0] == {"reason": "completed"}
    assert ended[1]["reason"] == "error"
    assert ended[1]["error"].startswith(f"the Ray host actor {host.name} (pid {host.pid}) on node 127.0.0.1 [")
    assert ended[1]["error"].endswith("died during this call (ActorDiedError)")
    assert lines[1:] == ["-- turn 1 start", "USER [user]: hello", "ASSISTANT: victim: hello",
                         '-- turn 1 end: {"kind":"completed"}', "-- turn 2 start",
                         "USER [user]: block until killed", '-- turn 2 end: {"kind":"error"}']
    assert closing == "victim: again"
    assert len(hosts) == 2 and host.pid not in {h.pid for h in hosts}  # the pool replaced the dead host


def test_a_host_killed_during_a_user_tool_fails_the_call_and_ends_the_turn_error(ray_cluster, tmp_path):
    marks = str(tmp_path / "marks")

    async def main():
        provider = tn.RayProvider(Script(marks))
        async with tn.AsyncHub(ids="sequential", providers={"ray": provider}, tools=[stall]) as hub:
            job = await hub.spawn("stall", label="worker", background=True, provider="ray")
            await until(lambda: marks_of(marks) == ["tool started"], "the remote tool to start", WAIT)
            # records stream back in batches: kill once the driver has logged the call (what it lost is lost)
            await until(lambda: any(e.kind == TOOL_CALL for e in engine_of(hub).runtime.agents["agent-1"].session.events),
                        "the driver to log the call", WAIT)
            host = placed(provider, "agent-1")
            os.kill(host.pid, signal.SIGKILL)
            await job.output(wait=True, timeout=WAIT)
            session = engine_of(hub).runtime.store.open("agent-1")
            return host, job.status, render(session), [e.data for e in session.events if e.kind == TURN_END]

    host, status, lines, ended = asyncio.run(main())
    died = f"the Ray {host.describe()} died during this call (ActorDiedError)"
    assert status == "failed"
    assert ended == [{"reason": "error", "error": died}]  # the turn ends here, not on another host
    assert lines[-3:] == ["TOOL-CALL s1 stall", f"TOOL-RESULT s1 (isError): Error: {died}",
                          '-- turn 1 end: {"kind":"error"}']


def test_a_ray_child_resumes_after_a_hub_restart_on_another_host(ray_cluster, tmp_path):
    store = str(tmp_path / "runs")

    async def first():
        provider = tn.RayProvider()
        async with tn.AsyncHub(Script(), ids="sequential", store=store, providers={"ray": provider}) as hub:
            kid = await hub.start("first", label="keeper", provider="ray")
            return await kid.wait(timeout=WAIT), placed(provider, kid.id).pid

    async def second():
        provider = tn.RayProvider()
        async with tn.AsyncHub(Script(), ids="sequential", store=store, providers={"ray": provider}) as hub:
            listed = str(await hub.list_agents())
            sent = await hub.call_tool("send_message", subagent_id="agent-1", message="second")
            closing = await hub.view.settled("agent-1", WAIT)
            return (listed, sent.text, closing, render(engine_of(hub).runtime.store.open("agent-1")),
                    placed(provider, "agent-1").pid, provider.messages_sent)

    closing, first_pid = asyncio.run(first())
    assert closing == "keeper: first"
    listed, sent, closing, lines, second_pid, messages_sent = asyncio.run(second())
    assert second_pid != first_pid  # a new pool: another host process took the whole conversation
    assert messages_sent == 3
    assert listed == "agent-1 [ready] \u2014 keeper"
    assert sent == "message queued as the next turn for subagent agent-1"
    assert closing == "keeper: second"
    assert [line for line in lines if line.startswith(("USER", "ASSISTANT"))] == [
        "USER [user]: first", "ASSISTANT: keeper: first",
        "USER [user]: second", "ASSISTANT: keeper: second"]


def test_hub_close_cancels_remote_work_and_leaves_no_actor(ray_cluster, tmp_path):
    marks = str(tmp_path / "marks")
    provider = tn.RayProvider(Script(marks))

    async def main():
        hub = tn.AsyncHub(ids="sequential", providers={"ray": provider})
        await hub.start("block a long time", label="busy", provider="ray")
        await hub.spawn("block too", label="job", background=True, provider="ray")
        await until(lambda: len(marks_of(marks)) == 2, "both remote turns to start", WAIT)
        assert len(host_actor_names(ray_cluster, provider)) == 2
        await hub.close()
        assert host_actor_names(ray_cluster, provider) == []  # gone when close() returns
        assert sorted(marks_of(marks)) == ["cancelled agent-1", "cancelled agent-2", "started agent-1",
                                           "started agent-2"]

    asyncio.run(main())


class Locked:
    def __init__(self) -> None:
        self.lock = threading.Lock()

    async def request(self, req):
        return "never"


def test_what_cannot_be_pickled_is_a_usage_error_naming_it(ray_cluster):
    with pytest.raises(tn.UsageError) as info:
        tn.RayProvider(Locked())
    assert str(info.value) == ("RayProvider cannot send the model (Locked) to a Ray actor: it could not be pickled "
                               "(TypeError: cannot pickle '_thread.lock' object); pass RayProvider(model=...) a "
                               "factory defined at module level, or a picklable model")
    lock = threading.Lock()

    def guarded(x: int) -> int:
        """Use the lock."""
        with lock:
            return x

    async def main():
        async with tn.AsyncHub(Script(), ids="sequential", tools=[guarded],
                               providers={"ray": tn.RayProvider(Script())}) as hub:
            with pytest.raises(tn.UsageError) as info:
                await hub.spawn("x", label="x", provider="ray")
            return str(info.value), str(await hub.list_agents()), await hub.agents()

    message, listed, rows = asyncio.run(main())
    assert message.startswith('RayProvider cannot send the tool "guarded" (test_what_cannot_be_pickled_is_a_usage'
                              "_error_naming_it.<locals>.guarded) to a Ray actor: it could not be pickled")
    assert listed == "(no subagents)" and [r["id"] for r in rows] == ["root"]
    with pytest.raises(tn.UsageError, match="host_actors must be an integer >= 1, got 0"):
        tn.RayProvider(host_actors=0)
    with pytest.raises(tn.UsageError, match='env_vars must be a list of variable names or a dict'):
        tn.RayProvider(env_vars="OPENAI_API_KEY")


def test_secrets_travel_in_the_runtime_env_never_in_logs_events_or_reprs(ray_cluster, monkeypatch):
    secret = "sk-toh-nb-test-0123456789"
    monkeypatch.setenv("TOH_NB_TEST_KEY", secret)
    provider = tn.RayProvider(Script(), env_vars=["TOH_NB_TEST_KEY"])

    async def main():
        async with tn.AsyncHub(Script(), ids="sequential", providers={"ray": provider}) as hub:
            result = await hub.spawn("secret", label="s", provider="ray")
            logged = "\n".join(render(engine_of(hub).runtime.store.open("agent-1")))
            events = repr(engine_of(hub).runtime.bus.history)
            return result.text, logged + events + repr(provider)

    text, everything = asyncio.run(main())
    assert text == f"s: the key has {len(secret)} characters"
    assert secret not in everything
    with pytest.raises(tn.UsageError, match='env_vars names "TOH_NB_MISSING", which is not set'):
        asyncio.run(tn.RayProvider(Script(), env_vars=["TOH_NB_MISSING"]).plan(
            tn.ChildInfo("agent-1", "one-shot", "x", 1, "root", None, lambda *a: None)))


def test_what_cannot_be_pickled_at_a_resume_after_a_restart_is_named(ray_cluster, tmp_path):
    store = str(tmp_path / "runs")
    lock = threading.Lock()

    def guarded(x: int) -> int:
        """Use the lock."""
        with lock:
            return x

    async def first():
        async with tn.AsyncHub(Script(), ids="sequential", store=store, providers={"ray": tn.RayProvider()}) as hub:
            kid = await hub.start("first", label="keeper", provider="ray")
            return await kid.wait(timeout=WAIT)

    async def resume(model, tools):
        async with tn.AsyncHub(model, ids="sequential", store=store, tools=tools,
                               providers={"ray": tn.RayProvider()}) as hub:
            sent = await hub.call_tool("send_message", subagent_id="agent-1", message="second")
            return sent.text, str(await hub.list_agents()), sorted(engine_of(hub).runtime.agents)

    assert asyncio.run(first()) == "keeper: first"
    tool_text, listed, live = asyncio.run(resume(Script(), [guarded]))
    assert tool_text.startswith('Error: RayProvider cannot send the tool "guarded" (test_what_cannot_be_pickled_at_a_'
                                "resume_after_a_restart_is_named.<locals>.guarded) to a Ray actor: it could not be "
                                "pickled (TypeError: cannot pickle '_thread.lock' object)")
    assert listed == "agent-1 [ready] \u2014 keeper" and live == ["root"]  # nothing half-made stays registered
    model_text, _, _ = asyncio.run(resume(Locked(), []))
    assert model_text == ("Error: RayProvider cannot send the model (Locked) to a Ray actor: it could not be pickled "
                          "(TypeError: cannot pickle '_thread.lock' object); pass RayProvider(model=...) a factory "
                          "defined at module level, or a picklable model")


def test_env_vars_values_are_held_out_of_http_logs_while_a_hub_uses_the_provider(monkeypatch):
    from toh_nb.core import secrets

    monkeypatch.setenv("TOH_NB_TEST_HELD", "sk-ray-held-0123456789")
    provider = tn.RayProvider(Script(), env_vars=["TOH_NB_TEST_HELD"],
                              runtime_env={"env_vars": {"OTHER": "sk-ray-given-9876543210"}})

    async def main():
        async with tn.AsyncHub(Script(), providers={"ray": provider}):
            return secrets.held()

    assert asyncio.run(main()) == ("sk-ray-given-9876543210", "sk-ray-held-0123456789")
    assert secrets.held() == ()
