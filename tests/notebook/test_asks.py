"""ACP permission requests asked in the notebook (``permissions="ask"``): pending prompts in the tree,
answered by the Allow/Deny messages the page sends, denied after the timeout. No browser: the tests send
what the buttons send (``toh_nb.testing.page_sends``: a comm message, as the page sends it)."""

from __future__ import annotations

import json
import time

import pytest

import toh_nb as tn
from toh_nb.testing import page_sends

pytest.importorskip("acp", reason="needs the acp extra: pip install 'toh-nb[acp]'")
from toh_nb.providers.acp.permissions import PENDING, AskUser, PermissionPolicy

from ..acp.helpers import fake


def poll(predicate, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def pending(tree):
    tree.refresh()
    return tree.asks


def permission_rows(hub, agent_id, kind="external/permission"):
    frame = hub.transcript(agent_id, raw=True)
    return [json.loads(text) for k, text in zip(frame["kind"], frame["text"]) if k == kind]


@pytest.mark.slow
@pytest.mark.parametrize(("click", "result"), [
    ("allow", "wrote {target}"),
    ("deny", "permission refused\n\nPermission denied: Write {target} (edit)")])  # a refusal is said (issue 26.13)
def test_an_asked_permission_is_a_prompt_in_the_tree_answered_by_its_button(tmp_path, click, result):
    target = tmp_path / "out.txt"
    coder = tn.AcpAgent(fake(), cwd=str(tmp_path), permissions="ask")
    with tn.Hub(ids="sequential", providers={"coder": coder}) as hub:
        tree = hub.tree()
        try:
            job = hub.spawn(f"WRITE {target} hello", label="writer", provider="coder", background=True)
            (ask,) = poll(lambda: pending(tree), "the pending permission request")
            assert ask == {"id": ask["id"], "agent": "agent-1", "title": f"Write {target}", "kind": "edit",
                           "tool_call_id": "w1"}
            assert permission_rows(hub, "agent-1", "external/permission_request") == [ask]  # in the log and stream
            page_sends(tree, {"action": click, "id": ask["id"]})  # what the button sends
            verb = "allowed" if click == "allow" else "denied"
            assert tree.message == f"{verb}: Write {target} (agent-1)" and not tree.message_error
            assert tree.asks == []
            assert job.output(wait=True, timeout=30) == result.format(target=target)
            assert target.exists() == (click == "allow")
            assert permission_rows(hub, "agent-1")[0]["allowed"] is (click == "allow")
            page_sends(tree, {"action": click, "id": ask["id"]})  # a second click: already answered
            assert tree.message == f"Error: no pending permission request {ask['id']!r} in this tree"
            assert tree.message_error
        finally:
            tree.close()
    assert PENDING.listing() == []


@pytest.mark.slow
def test_an_unanswered_permission_is_denied_after_its_timeout(tmp_path):
    target = tmp_path / "out.txt"
    coder = tn.AcpAgent(fake(), cwd=str(tmp_path), permissions=AskUser(timeout=0.5))
    with tn.Hub(ids="sequential", providers={"coder": coder}) as hub:
        tree = hub.tree()
        try:
            assert hub.spawn(f"WRITE {target} hello", provider="coder").text == \
                f"permission refused\n\nPermission denied: Write {target} (edit)"
            assert not target.exists()
            assert pending(tree) == []
            assert [row["allowed"] for row in permission_rows(hub, "agent-1")] == [False]
        finally:
            tree.close()


def test_ask_policies_and_bad_answers():
    assert PermissionPolicy("ask").ask == AskUser() and PermissionPolicy("ask").describe() == "ask"
    assert PermissionPolicy(AskUser(timeout=5)).describe() == "ask (timeout 5 s)"
    with pytest.raises(tn.UsageError) as error:
        AskUser(timeout=0)
    assert str(error.value) == "AskUser timeout must be a positive number of seconds, got 0"
    with pytest.raises(tn.UsageError) as error:
        PENDING.answer("perm-0", True)
    assert str(error.value) == "no pending permission request 'perm-0' (answered, timed out or cancelled)"
    with pytest.raises(tn.UsageError) as error:
        PermissionPolicy("maybe")
    assert str(error.value) == ('permissions must be "deny", "allow", "ask", AskUser(timeout), a collection of ACP '
                                "tool kinds or a callable, got 'maybe'")
