"""The host actor's class, driven in-process (no cluster): how a turn's records are batched, what crosses
as bytes, and models and shapes sent inline once per host."""

from __future__ import annotations

import asyncio

import pytest

from .conftest import NO_RAY

cloudpickle = pytest.importorskip("ray.cloudpickle", reason=NO_RAY)  # module level: before the imports below

import toh_nb as tn  # noqa: E402
from toh_nb.core.content import Message, Text  # noqa: E402
from toh_nb.core.events import ALL_KINDS  # noqa: E402
from toh_nb.providers.ray.host import Host, pack, unpack  # noqa: E402


class Instant:
    async def request(self, request):
        return tn.ModelResponse(text="ok")


class Gated:
    """Answers once ``gate`` is set (a model call that takes a while)."""

    gate: asyncio.Event | None = None

    async def request(self, request):
        await Gated.gate.wait()
        return tn.ModelResponse(text="late")


def payload(child: str, model_blob: bytes | None, shape_blob: bytes | None, text: str = "go") -> bytes:
    setup = {"id": child, "shape": ("shape", shape_blob), "model": ("model", model_blob), "label": "k", "depth": 1,
             "path": f"root/{child}", "parent_id": "root", "max_tokens": None, "mode": "continuable",
             "max_parallel": 10, "resources": None}
    return pack({"setup": setup, "messages": [Message("user", [Text(text)])], "turn": 1, "wanted": ALL_KINDS,
                 "next_step": [], "steer": False, "max_steps": None, "budgeted": False, "forget": []})


SHAPE = cloudpickle.dumps(("", [], []))


async def batches(host: Host, key: str, sent: bytes) -> list[list]:
    return [unpack(batch) async for batch in host.run(key, 1, sent)]


def test_an_instant_turn_crosses_in_one_batch_with_its_end():
    out = asyncio.run(batches(Host(), "agent-1@1", payload("agent-1", cloudpickle.dumps(Instant()), SHAPE)))
    assert len(out) == 1
    assert [item[0] for item in out[0]] == ["event", "event", "log", "stop"]
    assert out[0][-1] == ("stop", "completed", None)


def test_a_turn_that_waits_ships_what_it_did_before_the_wait():
    async def main():
        Gated.gate = asyncio.Event()
        stream = Host().run("agent-1@1", 1, payload("agent-1", cloudpickle.dumps(Gated()), SHAPE))
        first = unpack(await asyncio.wait_for(stream.__anext__(), 5))  # the model still waits
        Gated.gate.set()
        rest = [unpack(batch) async for batch in stream]
        return first, rest

    first, rest = asyncio.run(main())
    assert [type(item[1]).__name__ for item in first] == ["ModelRequested"]
    assert rest[-1][-1] == ("stop", "completed", None)


def test_a_model_and_shape_go_to_a_host_once_and_by_key_after():
    async def main():
        host = Host()
        first = await batches(host, "agent-1@1", payload("agent-1", cloudpickle.dumps(Instant()), SHAPE))
        second = await batches(host, "agent-2@1", payload("agent-2", None, None))  # the host keeps them
        stranger = await batches(Host(), "agent-3@1", payload("agent-3", None, None))  # a host that never got them
        return first, second, stranger, host.stats()

    first, second, stranger, stats = asyncio.run(main())
    assert first[-1][-1] == second[-1][-1] == ("stop", "completed", None)
    assert stranger == [[("unknown",)]]  # the driver then sends the run whole
    assert (stats["models"], stats["shapes"], stats["children"]) == (1, 1, 2)


def test_what_plain_pickle_cannot_carry_crosses_with_cloudpickle():
    value = [("log", "tool/result", 1, None, {"fn": lambda x: x + 1})]
    assert unpack(pack(value))[0][4]["fn"](1) == 2
    assert unpack(pack([("event", "plain")])) == [("event", "plain")]


def test_spread_must_be_a_bool():
    with pytest.raises(tn.UsageError, match="spread must be True or False, got 'yes'"):
        tn.RayProvider(spread="yes")
