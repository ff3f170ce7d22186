"""A permission request that waits for a person is an event of the hub's one stream: a script sees it
with ``hub.stream()``/``hub.astream()`` and answers it with ``hub.answer_permission`` — the same way the
tree's Allow/Deny buttons do — and nothing of it lives in a process-global registry."""

from __future__ import annotations

import asyncio

import pytest

import toh_nb as tn

pytest.importorskip("acp", reason="needs the acp extra: pip install 'toh-nb[acp]'")
from toh_nb.providers.acp.permissions import PENDING, AskUser

from .helpers import fake

WAIT = 60


@pytest.mark.parametrize("allowed", [True, False])
def test_a_script_sees_the_ask_on_astream_and_answers_it(tmp_path, allowed):
    target = tmp_path / "out.txt"

    async def main():
        coder = tn.AcpAgent(fake(), cwd=str(tmp_path), permissions="ask")
        async with tn.AsyncHub(ids="sequential", providers={"coder": coder}) as hub:
            job = await hub.spawn(f"WRITE {target} hello", label="writer", provider="coder", background=True)
            seen = []
            async for event in hub.astream(kinds=["permission/ask", "permission/answer"], timeout=WAIT):
                seen.append(event)
                if isinstance(event, tn.PermissionAsked):
                    assert await hub.pending_permissions() == [
                        {"id": event.ask_id, "agent": "agent-1", "title": f"Write {target}", "kind": "edit",
                         "tool_call_id": "w1"}]
                    assert PENDING.listing() == []  # nothing process-global
                    line = await hub.answer_permission(event.ask_id, allowed)
                    assert line == f"{'allowed' if allowed else 'denied'}: Write {target} (agent-1)"
                else:
                    break
            asked, answered = seen
            assert (asked.agent_id, asked.parent_id, asked.depth, asked.title, asked.tool_kind, asked.tool_call_id,
                    asked.timeout) == ("agent-1", "root", 1, f"Write {target}", "edit", "w1", 120.0)
            assert (answered.ask_id, answered.agent_id, answered.allowed, answered.by) == (
                asked.ask_id, "agent-1", allowed, "user")
            output = await job.output(wait=True, timeout=WAIT)
            with pytest.raises(tn.UsageError) as error:
                await hub.answer_permission(asked.ask_id, True)
            assert str(error.value) == (f"no pending permission request {asked.ask_id!r} "
                                        "(answered, timed out or cancelled)")
            return output, await hub.pending_permissions(), [r["kind"] for r in await hub.events()
                                                              if r["kind"].startswith("permission/")]

    output, pending, kinds = asyncio.run(main())
    assert output == (f"wrote {target}" if allowed else
                      f"permission refused\n\nPermission denied: Write {target} (edit)")
    assert target.exists() == allowed and pending == []
    assert kinds == ["permission/ask", "permission/answer"]  # lifecycle events: in hub.events() too


def test_the_sync_hub_streams_the_ask_and_a_timeout_is_an_answer_by_nobody(tmp_path):
    target = tmp_path / "out.txt"
    coder = tn.AcpAgent(fake(), cwd=str(tmp_path), permissions=AskUser(timeout=0.5))
    with tn.Hub(ids="sequential", providers={"coder": coder}) as hub:
        job = hub.spawn(f"WRITE {target} hello", provider="coder", background=True)
        events = []
        for event in hub.stream(kinds=["permission/ask", "permission/answer"], timeout=WAIT):
            events.append(event)
            if isinstance(event, tn.PermissionAnswered):
                break
        assert [type(e).__name__ for e in events] == ["PermissionAsked", "PermissionAnswered"]
        assert (events[1].allowed, events[1].by) == (False, "timeout")
        assert job.output(wait=True, timeout=WAIT) == f"permission refused\n\nPermission denied: Write {target} (edit)"
        assert hub.pending_permissions() == [] and not target.exists()
        with pytest.raises(tn.UsageError) as error:
            hub.answer_permission(events[0].ask_id, "yes")
        assert str(error.value) == "allowed must be True or False, got 'yes'"
