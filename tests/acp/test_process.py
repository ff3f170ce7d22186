"""The agent's process tree under its launcher: helpers that leave the agent's process group or
daemonise die with it (at ``hub.close()``, at the end of a one-shot run, when our own process is
killed), and an agent that dies while a helper holds its stdout ends the turn at once."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import toh_nb as tn

pytest.importorskip("acp", reason="needs the acp extra: pip install 'toh-nb[acp]'")

from .helpers import alive, fake

pytestmark = pytest.mark.slow


def launchers(agent):
    return [link.process.launcher_pid for link in agent.links if link.process is not None]


def test_helpers_that_leave_the_group_or_daemonise_die_with_the_agent(tmp_path):
    async def main():
        agent = tn.AcpAgent(fake(), cwd=str(tmp_path), eof_grace=1.0, kill_grace=0.5)
        async with tn.AsyncHub(ids="sequential", providers={"coder": agent}) as h:
            one_shot = await h.spawn("HELPERS", provider="coder")
            after_run = [int(pid) for pid in one_shot.text.split()]
            still = [alive(pid) for pid in after_run]
            kid = await h.start("HELPERS", label="kept", provider="coder")
            kept = [int(pid) for pid in (await kid.wait(timeout=30)).split()]
            await h.send(kid.id, "HELPERS")  # a second activation's helpers too
            kept += [int(pid) for pid in (await kid.wait(timeout=30)).split()]
        return after_run, still, kept, agent

    after_run, still, kept, agent = asyncio.run(main())
    assert still == [False, False]  # gone when the one-shot run ended
    assert [alive(pid) for pid in kept] == [False] * 4  # gone when hub.close() returned
    everything = [pid for link in agent.links for pid in link.pids] + launchers(agent)
    assert len(everything) == 6 and not any(alive(pid) for pid in everything)


def test_an_agent_that_dies_while_a_helper_holds_its_stdout_ends_the_turn_error(tmp_path):
    """No turn timeout: without watching the process itself this turn would never end."""
    command = " ".join(fake())

    async def main():
        agent = tn.AcpAgent(fake(), cwd=str(tmp_path))
        async with tn.AsyncHub(ids="sequential", providers={"coder": agent}) as h:
            result = await h.spawn("ABANDON", provider="coder", check=False)
            after = await h.spawn("still fine?", provider="coder")
            return result, after, agent

    result, after, agent = asyncio.run(main())
    assert result.stop_reason == "error"
    helper = int(re.search(r"helper (\d+) holds", result.diagnostic).group(1))
    assert result.diagnostic == (f"ACP agent `{command}` exited during session/prompt; exit code 5\n"
                                 f"stderr (last lines):\nfake agent: helper {helper} holds my stdout; dying")
    assert after.text == "echo: still fine?"
    assert not alive(helper) and not any(alive(pid) for pid in launchers(agent))


@pytest.mark.parametrize("face", ["async", "sync"])
def test_a_turn_timeout_with_a_setsid_helper_holding_stdout_ends_the_turn_not_the_caller(tmp_path, face):
    """The turn times out; the agent and its helper are disposed; the caller gets a result, never a
    bare CancelledError."""
    def providers():
        return {"coder": tn.AcpAgent(fake(), cwd=str(tmp_path), eof_grace=0.5, kill_grace=0.5)}

    if face == "sync":
        agents = providers()
        with tn.Hub(ids="sequential", providers=agents, turn_timeout=2) as h:
            result = h.spawn("HANG-HELD", provider="coder")
            transcript = h.transcript("agent-1", raw=True).to_dict("records")  # the sync face gives a DataFrame
    else:
        async def main():
            agents = providers()
            async with tn.AsyncHub(ids="sequential", providers=agents, turn_timeout=2) as h:
                return await h.spawn("HANG-HELD", provider="coder"), await h.transcript("agent-1", raw=True), agents

        result, transcript, agents = asyncio.run(main())
    assert result.stop_reason == "max-time"
    helper = int(next(row["text"] for row in transcript if row["kind"] == "external/agent_message_chunk")
                 .split('"text": "')[1].split('"')[0])
    agent = agents["coder"]
    assert not alive(helper) and not any(alive(pid) for link in agent.links for pid in link.pids)
    assert not any(alive(pid) for pid in launchers(agent))


SCRIPT = textwrap.dedent("""
    import asyncio, sys
    import toh_nb as tn

    async def main():
        agent = tn.AcpAgent({command!r}, cwd={cwd!r})
        h = tn.AsyncHub(ids="sequential", providers={{"coder": agent}})
        kid = await h.start("HELPERS", label="kept", provider="coder")
        pids = (await kid.wait(timeout=60)).split()
        await h.send(kid.id, "SLOW")
        while not any(r["kind"] == "external/agent_message_chunk" and "working" in r["text"]
                      for r in await h.transcript(kid.id, raw=True)):
            await asyncio.sleep(0.01)
        print(" ".join(pids + [str(agent.links[-1].pids[0]), str(agent.links[-1].process.launcher_pid)]), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
""")


def test_the_tree_dies_when_our_own_process_is_killed(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(SCRIPT.format(command=fake(), cwd=str(tmp_path)))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    driver = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, cwd=root,
                              env={**os.environ, "PYTHONPATH": root})
    try:
        pids = [int(pid) for pid in driver.stdout.readline().split()]
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    assert len(pids) == 4
    deadline = time.monotonic() + 30  # a bound on the wait, not a measurement
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [alive(pid) for pid in pids] == [False] * 4
