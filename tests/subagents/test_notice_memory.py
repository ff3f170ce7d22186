"""Settlement notices waiting in a parent's inbox share their fixed blocks (memory per idle child)."""

from __future__ import annotations

import asyncio

import toh_nb as tn
from toh_nb.testing import engine_of


def test_waiting_settlement_notices_share_their_fixed_blocks_and_read_the_same():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda req: "ok" if req.label == "a" else ""),
                               ids="sequential") as hub:
            for label in ("a", "b", "c"):
                child = await hub.start("work", label=label)
                await child.wait()
            inbox = list(engine_of(hub).root.next_turn_inbox) + list(engine_of(hub).root.next_step_inbox)
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


def test_a_waiting_notice_is_rendered_only_when_its_content_is_read_and_reads_like_the_eager_one():
    import copy
    import pickle

    from toh_nb.core.content import Message, Source, Text
    from toh_nb.subagents.settlement import SettlementNotice

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda req: "line one\nline two"), ids="sequential") as hub:
            child = await hub.start("work", label="a")
            await child.wait()
            (notice,) = list(engine_of(hub).root.next_turn_inbox) + list(engine_of(hub).root.next_step_inbox)
            return notice

    notice = asyncio.run(main())
    line = "Background subagent agent-1 finished and will do no further work unless you send it more."
    eager = Message("user", [Text(line), Text("Its closing message:"), Text("line one\nline two")], id="msg-2",
                    source=Source("subagent-settled", form="notice", sender="agent-1", summary=line))
    assert isinstance(notice, SettlementNotice)
    assert notice.packed is None  # nothing rendered while it waits
    assert notice.text == eager.text  # the stream's message/queued reads it without rendering it
    assert notice.source == eager.source
    assert notice.packed is None
    # a second render (a store's writer thread that read the slot just before the first render set it)
    # gives the same blocks: a copy taken before the first render renders the same data again
    unrendered = copy.copy(notice)
    assert notice.content == eager.content and notice.content is notice.content  # rendered once, then kept
    assert notice == eager and eager == notice and repr(notice) == repr(eager)
    assert unrendered.packed is None
    assert unrendered.content == eager.content and unrendered.text == eager.text
    for twin in (copy.copy(notice), pickle.loads(pickle.dumps(notice))):
        assert twin == eager and twin.text == eager.text


def test_the_live_registries_give_their_room_back_once_a_burst_of_children_settled():
    """After 2,000 continuable children settled, the runtime's agents and the service's activations
    hold tables sized for what is left, not for the burst (bench/memory.py, memory per idle child)."""
    import sys

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda req: "ok"), ids="sequential") as hub:
            children = [await hub.start("work", label=f"w{i}") for i in range(2000)]
            peak = sys.getsizeof(engine_of(hub).runtime.agents), sys.getsizeof(engine_of(hub).service.activations)
            for child in children:
                await child.wait()
            assert list(engine_of(hub).runtime.agents) == [engine_of(hub).root.id] and engine_of(hub).service.activations == {}
            return peak, (sys.getsizeof(engine_of(hub).runtime.agents), sys.getsizeof(engine_of(hub).service.activations))

    (agents_peak, activations_peak), (agents, activations) = asyncio.run(main())
    assert agents * 4 < agents_peak and activations * 4 < activations_peak
