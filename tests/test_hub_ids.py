"""Issue 26.6 (the store's share): an id from outside is checked against the id grammar before anything
looks it up (the hub API refuses it by name; a tool call gets the reference's answer to an unknown id), and
a hub never opens (creates, locks, cleans) a store for a root id that is a path."""

from __future__ import annotations

import asyncio

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.errors import UsageError

GRAMMAR = "letters, digits, '-', '_', '.', ':' (no '..'), starting with a letter or digit, at most 128 characters"
BAD = ["x/../../victim", "..", "../victim", "a" * 129, "-x", "a\nb"]


@pytest.mark.parametrize("bad", BAD)
def test_hub_calls_refuse_an_id_that_is_no_id(tmp_path, bad):
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path / "s"), ids="sequential") as hub:
            kid = await hub.start("t", label="kid")
            await kid.wait()
            calls = {
                "send": lambda: hub.send(bad, "x"),
                "transcript": lambda: hub.transcript(bad),
                "interrupt": lambda: hub.interrupt(bad),
                "kill": lambda: hub.kill(bad),
                "child": lambda: hub.child(bad),
            }
            seen = {}
            for name, call in calls.items():
                with pytest.raises(UsageError) as caught:
                    result = call()
                    if asyncio.iscoroutine(result):
                        await result
                seen[name] = str(caught.value)
            tools = {
                "send_message": (await hub.call_tool("send_message", subagent_id=bad, message="x")).text,
                "interrupt_agent": (await hub.call_tool("interrupt_agent", agent_id=bad)).text,
            }
            unknown = (await hub.call_tool("send_message", subagent_id="agent-77", message="x")).text
            return seen, tools, unknown

    seen, tools, unknown = asyncio.run(main())
    name = {"child": "child_id"}
    assert seen == {call: f"{name.get(call, 'agent_id')} {bad!r} is not a valid id ({GRAMMAR})" for call in seen}
    # the model reads the reference's answers: an id that can name no child is one that is unknown
    assert tools == {"send_message": f'Error: subagent "{bad}" is unavailable',
                     "interrupt_agent": f"interrupt requested for agent {bad}"}
    assert unknown == 'Error: subagent "agent-77" is unavailable'


def test_a_root_id_that_is_a_path_touches_no_directory(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / ".agent-1.jsonl.tmp").write_text("someone's file")
    sessions = tmp_path / "sessions"
    (sessions / "toh-x").mkdir(parents=True)
    directory = str(sessions / "toh-x" / ".." / ".." / "victim")  # what an ACP session/load used to build
    expected = f"root_id 'toh-x/../../victim' is not a valid id ({GRAMMAR})"

    async def main():
        with pytest.raises(UsageError) as caught:
            tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=directory, root_id="toh-x/../../victim")
        return str(caught.value)

    assert asyncio.run(main()) == expected
    with pytest.raises(UsageError) as caught:
        tn.Hub(tn.FunctionModel(lambda r: "ok"), store=directory, root_id="toh-x/../../victim")
    assert str(caught.value) == expected
    assert sorted(p.name for p in victim.iterdir()) == [".agent-1.jsonl.tmp"]  # no .lock, nothing removed


def test_a_tool_call_with_an_id_that_is_no_id_never_reaches_the_store(tmp_path, monkeypatch):
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path / "s")) as hub:
            opened = []
            monkeypatch.setattr(engine_of(hub).store, "open", lambda session_id: opened.append(session_id))
            text = (await hub.call_tool("send_message", subagent_id="x/../../victim", message="x")).text
            return text, opened

    assert asyncio.run(main()) == ('Error: subagent "x/../../victim" is unavailable', [])
