"""The provider contract, written once and run against every provider: ``spawn``, ``fork``, ``acp``
(fast-agent, offline: its ``passthrough`` and ``slow`` models) and ``ray`` (a local cluster on 127.0.0.1).

A provider contributes only what differs about its children (``toh_nb.providers.base``); everything a
child *is* to the tree — its log, its answer, follow-ups, interrupts, listing, capability refusals — must
read the same whichever provider made it. A provider that is not installed here skips with the reason.
"""

from __future__ import annotations

import asyncio
import os

import pytest

import toh_nb as tn
from toh_nb.core.errors import ProviderError

from ..helpers import until
from ..real_parts import FAST_AGENT
from .echo import Echo

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WAIT = 90


def _fast_agent(tmp_path, model):
    pytest.importorskip("acp", reason="needs the acp extra: pip install 'toh-nb[acp]'")
    if FAST_AGENT is None:
        pytest.skip("fast-agent not installed (set TOH_NB_FAST_AGENT or run .ci/run)")
    return tn.AcpAgent([FAST_AGENT, "acp", "--model", model], cwd=str(tmp_path))


@pytest.fixture(scope="module")
def ray_here():
    """A local Ray cluster (loopback only), started here unless this session already has one."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")
    from toh_nb.providers.ray.pool import loopback_only

    started = not ray.is_initialized()
    if started:
        loopback_only()
        path = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH", "")) if p)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(params=["spawn", "fork", "acp", "ray"])
def kind(request):
    if request.param == "ray":
        request.getfixturevalue("ray_here")
    return request.param


def providers_for(kind: str, tmp_path) -> dict:
    """Two providers of ``kind``: "p" (answers at once) and "slow" (a turn that waits to be interrupted)."""
    if kind == "spawn":
        return {"p": tn.SpawnProvider("p"), "slow": tn.SpawnProvider("slow")}
    if kind == "fork":
        return {"p": tn.ForkProvider("p"), "slow": tn.ForkProvider("slow")}
    if kind == "acp":
        return {"p": _fast_agent(tmp_path, "passthrough"), "slow": _fast_agent(tmp_path, "slow")}
    return {"p": tn.RayProvider(Echo(), host_actors=1, name="p"), "slow": tn.RayProvider(Echo(), host_actors=1, name="slow")}


def hub(kind: str, tmp_path) -> tn.AsyncHub:
    return tn.AsyncHub(Echo(), ids="sequential", store=str(tmp_path / "store"), providers=providers_for(kind, tmp_path),
                       turn_timeout=None)


def rows(transcript: list[dict], kind: str) -> list[str]:
    return [row["text"] for row in transcript if row["kind"] == kind]


def test_a_one_shot_child_answers_and_its_log_reads_the_same(kind, tmp_path):
    async def main():
        async with hub(kind, tmp_path) as h:
            result = await h.spawn("hello contract", label="once", provider="p")
            log = await h.transcript(result.agent_id, raw=True)
            return result, log

    result, log = asyncio.run(main())
    assert (result.text, result.stop_reason, result.label) == ("hello contract", "completed", "once")
    assert rows(log, "user/message") == ["hello contract"]
    assert rows(log, "turn/end") == ["completed"]
    assert rows(log, "assistant/message")[-1] == "hello contract"


def test_a_continuable_child_takes_follow_ups_and_lists_its_provider(kind, tmp_path):
    async def main():
        async with hub(kind, tmp_path) as h:
            kid = await h.start("first message", label="kid", provider="p")
            first = await kid.wait(timeout=WAIT)
            await kid.send("second message")
            second = await kid.wait(timeout=WAIT)
            listing = await h.list_agents()
            log = await h.transcript(kid.id, raw=True)
            return first, second, listing, log, kid.id

    first, second, listing, log, kid_id = asyncio.run(main())
    assert (first, second) == ("first message", "second message")
    assert rows(log, "turn/end") == ["completed", "completed"]
    assert [(entry.kind, entry.id, entry.label, entry.status) for entry in listing] == [("child", kid_id, "kid", "ready")]


def test_an_interrupted_turn_ends_aborted_and_the_child_takes_the_next_one(kind, tmp_path):
    async def main():
        async with hub(kind, tmp_path) as h:
            kid = await h.start("wait for it", label="slow", provider="slow")
            started = "external/session" if kind == "acp" else "turn/start"
            await until(lambda: any(row["kind"] == started for row in h.view.transcript(kid.id, raw=True)),
                        "the child's turn to run", WAIT)
            await asyncio.sleep(0.3)  # the turn is inside its model call (a process, a host) by now
            await kid.interrupt()
            await kid.wait(timeout=WAIT)
            return await h.transcript(kid.id, raw=True)

    log = asyncio.run(main())
    assert rows(log, "turn/end") == ["aborted"]
    assert rows(log, "user/message") == ["wait for it"]


def test_a_call_needing_a_capability_the_provider_lacks_is_refused_by_name(kind, tmp_path):
    async def main():
        async with hub(kind, tmp_path) as h:
            provider = providers_for(kind, tmp_path)["p"]  # the same class and capabilities as the hub's
            if provider.capabilities.persona:
                result = await h.spawn("with a persona", persona="You are terse.", provider="p")
                return provider.capabilities, result.stop_reason, None
            with pytest.raises(ProviderError) as refused:
                await h.spawn("with a persona", persona="You are terse.", provider="p")
            return provider.capabilities, None, str(refused.value)

    capabilities, stop, refusal = asyncio.run(main())
    if capabilities.persona:
        assert (stop, refusal) == ("completed", None)
    else:
        assert refusal == 'subagent provider "p" does not support the "persona" capability'
