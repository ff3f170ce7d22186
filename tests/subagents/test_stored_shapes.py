"""Issue 26.3: a stored record of the wrong shape makes its own log corrupt, named wherever it shows; every
other child of the store keeps working."""

from __future__ import annotations

import asyncio
import json

import pytest

import toh_nb as tn
from toh_nb.core.errors import StoreError

from .test_restart import settled


def _two_children(tmp_path):
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path), ids="sequential") as hub:
            first = await hub.start("t", label="first")
            await settled(hub)
            second = await hub.start("u", label="second")
            await settled(hub)
            return first.id, second.id

    return asyncio.run(main())


def _rewrite(path, index, change):
    lines = path.read_text().splitlines()
    lines[index] = json.dumps(change(json.loads(lines[index])))
    path.write_text("\n".join(lines) + "\n")


def _reopen(tmp_path, bad):
    """What the user and the root's model see of a store holding one bad log."""
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "fine"), store=str(tmp_path), ids="sequential") as hub:
            listing = str(await hub.list_agents())
            descendants = str(await hub.list_agents("descendants"))
            with pytest.raises(StoreError) as transcript:
                await hub.transcript(bad, raw=True)
            with pytest.raises(tn.SubagentError) as send:
                await hub.send(bad, "x")
            with pytest.raises(tn.SubagentError) as child:  # issue 41.13: the same words as send
                await hub.child(bad)
            assert str(child.value) == str(send.value)
            tool = (await hub.call_tool("send_message", subagent_id=bad, message="x")).text
            await hub.send("agent-2", "again")  # a sibling is untouched
            await settled(hub)
            new = await hub.start("v", label="third")  # and so is starting another child
            await settled(hub)
            return listing, descendants, str(transcript.value), str(send.value), tool, new.id

    return asyncio.run(main())


@pytest.mark.parametrize("index, change, problem", [
    (3, lambda e: {**e, "message": 5}, "line 4: message: expected an object, got an integer (5)"),
    (1, lambda e: {**e, "data": [1]}, "line 2: data: expected an object or null, got an array"),
    (1, lambda e: {**e, "data": {**e["data"], "mode": "weird"}},
     "line 2: data: persisted subagent descriptor mode must be one-shot or continuable, got 'weird'"),
    (2, lambda e: {**e, "seq": 0}, "line 3: seq 0 does not follow seq 0 (seq must increase line by line)"),
    (0, lambda h: {**h, "delegation_depth": "1"},
     "line 1: invalid header (header delegation_depth: expected an integer >= 0, got a string ('1'))"),
    (0, lambda h: {**h, "id": "agent-9"}, "line 1: header names session 'agent-9', not the file's 'agent-1'"),
    (0, "", "line 1: empty log (no header)"),
])
def test_a_wrong_shaped_record_is_a_named_diagnostic_and_its_siblings_work(tmp_path, index, change, problem):
    first, second = _two_children(tmp_path)
    path = tmp_path / f"{first}.jsonl"
    if change == "":
        path.write_text("")
    else:
        _rewrite(path, index, change)
    listing, descendants, transcript, send, tool, new = _reopen(tmp_path, first)
    header_bad = index == 0
    rows = [f"{second} [ready] \u2014 second", f"{first} [diagnostic: corrupt: {problem}]"]
    if not header_bad:  # listed by its header, in creation order
        rows.reverse()
    assert listing == "\n".join(rows)
    assert f"{first} [diagnostic: corrupt: {problem}] parent=root depth=1" in descendants.splitlines()
    assert transcript == f'session log "{first}" is corrupt: {problem}'
    refusal = f'subagent "{first}" is unavailable: session log "{first}" is corrupt: {problem}'
    assert send == refusal
    assert tool == f"Error: {refusal}"
    assert new == "agent-3"
