"""What an external ACP child costs: wall-clock phases per agent, beside the agent talking to the
SDK's own client with nothing of toh_nb in between (the floor).

    python bench/acp_agents.py [--n 3] [--json]

Agents measured: the SDK test agent (tests/acp/fake_agent.py), ``python -m toh_nb acp`` (DemoModel, zero
latency) and, when ``$TOH_NB_FAST_AGENT`` names it, fast-agent's passthrough model. Figures (medians of
``--n`` runs, seconds): ``one_shot`` (``hub.spawn`` start → answer → process gone), ``floor`` (spawn
the same command with the SDK client, initialize, new session, one prompt, close), ``follow_up`` (a
settled continuable child's next message: new process + ``session/load`` + prompt), and for the test
agent ``interrupt`` (interrupt → turn ``aborted``, agent acknowledging ``session/cancel``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import toh_nb as tn  # noqa: E402

FAKE = [sys.executable, os.path.join(ROOT, "tests", "acp", "fake_agent.py")]


def agents(cwd: str) -> dict[str, list[str]]:
    found = {"sdk_test_agent": FAKE,
             "toh_nb_acp": [sys.executable, "-m", "toh_nb", "acp", "--latency", "0", "--store",
                            os.path.join(cwd, "store")]}
    fast_agent = os.environ.get("TOH_NB_FAST_AGENT")
    if fast_agent and os.access(fast_agent, os.X_OK):
        found["fast_agent"] = [fast_agent, "acp", "--model", "passthrough"]
    return found


async def floor(command: list[str], cwd: str) -> float:
    import acp

    class Quiet:
        async def session_update(self, session_id, update, **kwargs):
            pass

    start = time.perf_counter()
    async with acp.spawn_agent_process(Quiet(), command[0], *command[1:], cwd=cwd, env=dict(os.environ)) as (conn, _):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("hello")])
    return time.perf_counter() - start


async def measure(command: list[str], cwd: str, interrupt: bool) -> dict[str, float]:
    agent = tn.AcpAgent(command, cwd=cwd)
    out = {}
    async with tn.AsyncHub(ids="sequential", providers={"x": agent}) as hub:
        start = time.perf_counter()
        result = await hub.spawn("hello", provider="x")
        out["one_shot"] = time.perf_counter() - start
        assert result.stop_reason == "completed", result
        kid = await hub.start("hello", label="kid", provider="x")
        await kid.wait(timeout=120)
        start = time.perf_counter()
        await kid.send("again")
        await kid.wait(timeout=120)
        out["follow_up"] = time.perf_counter() - start
        if interrupt:
            slow = await hub.start("SLOW", label="slow", provider="x")
            while "external/agent_message_chunk" not in {r["kind"] for r in await hub.transcript(slow.id, raw=True)}:
                await asyncio.sleep(0.005)
            start = time.perf_counter()
            await slow.interrupt()
            await slow.wait(timeout=60)
            out["interrupt"] = time.perf_counter() - start
    return out


async def main_async(n: int, as_json: bool) -> None:
    for name in agents("."):
        runs: dict[str, list[float]] = {}
        for _ in range(n):
            with tempfile.TemporaryDirectory() as cwd:
                command = agents(cwd)[name]
                runs.setdefault("floor", []).append(await floor(command, cwd))
                for key, value in (await measure(command, cwd, name == "sdk_test_agent")).items():
                    runs.setdefault(key, []).append(value)
        figure = {"name": f"acp_{name}", "n": n, **{k: round(statistics.median(v), 4) for k, v in runs.items()}}
        figure["overhead_s"] = round(figure["one_shot"] - figure["floor"], 4)
        if as_json:
            print(json.dumps(figure))
        else:
            print(f"{figure['name']:<22} " + "  ".join(f"{k}={v}" for k, v in figure.items() if k not in ("name",)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    asyncio.run(main_async(args.n, args.json))


if __name__ == "__main__":
    main()
