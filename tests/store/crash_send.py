"""Helper process for the acknowledged-send crash tests (not a test module).

``python crash_send.py <store-dir> <fsync> <scenario>`` opens an ``AsyncHub(store=dir, fsync=...)``,
starts one continuable child and prints ``child <id>`` (flushed). The child's model waits an hour on
every message whose text starts with ``block`` and answers ``did <text>`` to any other, so nothing
but ``send`` itself can have made a blocked follow-up durable. Scenarios:

- ``loop``: send ``block follow-up <n>`` forever, printing ``sent <message id>`` (flushed) as soon as
  ``send`` returned, interrupting the child before every fourth send (the running turn aborts, the
  queued messages park until the send that follows); stops sending after 200 and waits to be killed.
  The test kills the process with SIGKILL 0-3 ms after reading a line.
- ``parked``: send ``block B`` and ``block C`` behind the blocked first turn, interrupt, wait until
  the child is idle (both parked), print their ids, and exit at once (``os._exit``: no close, no flush).
- ``consumed``: send ``block B``, ``block C``, ``block D``, interrupt (the first turn aborts; B..D
  park), send ``block E`` (B's turn starts and blocks: B is consumed), wait until B's
  ``user/message`` is recorded, print the four ids, and exit at once.
- ``killed``: send ``block B`` and ``block C`` behind the blocked first turn, kill the child, print
  their ids as soon as ``kill`` returned and exit at once (``os._exit``): the crash follows the kill
  by microseconds.
"""

from __future__ import annotations

import asyncio
import os
import sys

import toh_nb as tn
from toh_nb.testing import engine_of


async def _model(request):
    if request.last_user_text.startswith("block"):
        await asyncio.sleep(3600)
    return f"did {request.last_user_text}"


async def _idle(hub, child_id: str) -> None:
    while engine_of(hub).runtime.agents[child_id].status != "idle":
        await asyncio.sleep(0.001)


async def main() -> None:
    directory, fsync, scenario = sys.argv[1], sys.argv[2], sys.argv[3]
    async with tn.AsyncHub(tn.FunctionModel(_model), store=directory, fsync=fsync) as hub:
        kid = await hub.start("block task", label="kid")
        print(f"child {kid.id}", flush=True)
        if scenario == "loop":
            for count in range(1, 201):
                if count % 4 == 0:
                    await kid.interrupt()
                message_id = await kid.send(f"block follow-up {count}")
                print(f"sent {message_id}", flush=True)
            await asyncio.sleep(3600)
        elif scenario == "parked":
            ids = [await kid.send("block B"), await kid.send("block C")]
            await kid.interrupt()
            await _idle(hub, kid.id)
            print("sent " + " ".join(ids), flush=True)
            os._exit(0)
        elif scenario == "consumed":
            ids = [await kid.send(f"block {name}") for name in "BCD"]
            await kid.interrupt()
            ids.append(await kid.send("block E"))
            agent = engine_of(hub).runtime.agents[kid.id]
            while not any(e.kind == "user/message" and e.message.id == ids[0] for e in agent.session.events):
                await asyncio.sleep(0.001)
            await engine_of(hub).runtime.recorded(agent.session)
            print("sent " + " ".join(ids), flush=True)
            os._exit(0)
        elif scenario == "killed":
            ids = [await kid.send("block B"), await kid.send("block C")]
            await kid.kill()
            print("sent " + " ".join(ids), flush=True)
            os._exit(0)
        else:
            raise SystemExit(f"unknown scenario {scenario!r}")


if __name__ == "__main__":
    asyncio.run(main())
