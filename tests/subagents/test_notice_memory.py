"""Settlement notices waiting in a parent's inbox share their fixed blocks (memory per idle child)."""

from __future__ import annotations

import asyncio

import toh_nb as tn


def test_waiting_settlement_notices_share_their_fixed_blocks_and_read_the_same():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda req: "ok" if req.label == "a" else ""),
                               ids="sequential") as hub:
            for label in ("a", "b", "c"):
                child = await hub.start("work", label=label)
                await child.wait()
            inbox = list(hub.root_agent._next_turn) + list(hub.root_agent._next_step)
            notices = [m for m in inbox if m.source.kind == "subagent-settled"]
            assert [[b.text for b in m.content] for m in notices] == [
                ["Background subagent agent-1 finished and will do no further work unless you send it more.",
                 "Its closing message:", "ok"],
                ["Background subagent agent-2 finished and will do no further work unless you send it more.",
                 "It left no closing message."],
                ["Background subagent agent-3 finished and will do no further work unless you send it more.",
                 "It left no closing message."],
            ]
            assert notices[1].content[1] is notices[2].content[1]

    asyncio.run(main())
