"""Permission policy and workspace-confined file serving, alone and through the fake agent."""

from __future__ import annotations

import asyncio
import json
import os
import typing

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of

pytest.importorskip("acp", reason="needs the acp extra: pip install 'toh-nb[acp]'")
from toh_nb.core.asks import PermissionDesk
from toh_nb.providers.acp.permissions import (PENDING, TOOL_KINDS, AskUser, PendingAsks, PermissionPolicy,
                                             PermissionRequest, answer)
from toh_nb.providers.acp.workspace import Workspace, WorkspaceError

from .helpers import fake

OPTIONS = [{"id": "yes", "name": "Allow", "kind": "allow_once"}, {"id": "always", "name": "Always", "kind": "allow_always"},
           {"id": "no", "name": "Reject", "kind": "reject_once"}]


def test_the_tool_kinds_are_the_sdks():
    """TOOL_KINDS is a copy of the SDK's ``ToolKind``: an SDK upgrade that adds or renames a kind fails here."""
    from acp.schema import ToolKind

    assert TOOL_KINDS == typing.get_args(ToolKind)


def test_the_kinds_the_acp_server_reports_are_the_sdks():
    from toh_nb.serve.acp import TOOL_KINDS as SERVED

    assert set(SERVED.values()) | {"other"} <= set(TOOL_KINDS)  # "other": a tool the map does not name


def request(kind="edit", options=OPTIONS):
    return PermissionRequest(session_id="s", title="Write a.txt", kind=kind, tool_call_id="w1", options=options)


def decide(spec, req=None):
    decision = asyncio.run(PermissionPolicy(spec).decide(req or request()))
    return decision.allowed, decision.option_id


def test_policy_denies_by_default_and_allows_by_kind_or_callable():
    assert decide("deny") == (False, "no")
    assert decide(None) == (False, "no")
    assert decide("allow") == (True, "yes")
    assert decide({"edit", "read"}) == (True, "yes")
    assert decide(["read"]) == (False, "no")
    assert decide(lambda r: r.kind == "edit" and r.title == "Write a.txt") == (True, "yes")
    assert decide(lambda r: "always") == (True, "always")
    assert decide(lambda r: "bogus") == (False, "no")  # an option the agent did not offer is a refusal

    async def ask(r):
        return False

    assert decide(ask) == (False, "no")
    # no option of the wanted sense: the request is answered "cancelled"
    assert decide("deny", request(options=OPTIONS[:2])) == (False, None)


def test_an_ask_outside_a_hub_waits_on_the_process_wide_desk_and_is_answered_there():
    """A policy used without a hub's desk asks on :data:`PENDING`: the hub's own desk class, publishing
    nothing; ``answer()`` settles it from any thread, and nobody answering denies it after the timeout."""
    assert isinstance(PENDING, PermissionDesk) and type(PENDING) is PendingAsks

    async def main():
        seen = []
        asking = asyncio.ensure_future(PermissionPolicy("ask").decide(request(), "agent-9", notify=seen.append))
        while not seen:
            await asyncio.sleep(0.001)
        (ask,) = seen
        assert PENDING.listing() == PENDING.pending(["agent-9"]) == [ask] and PENDING.pending(["x"]) == []
        line = await asyncio.to_thread(answer, ask["id"], True)  # from another thread, as a button would
        decision = await asking
        late = await PermissionPolicy(AskUser(timeout=0.05)).decide(request(), "agent-9")
        return ask, line, (decision.allowed, decision.option_id), (late.allowed, late.option_id), PENDING.listing()

    ask, line, decision, late, left = asyncio.run(main())
    assert ask == {"id": ask["id"], "agent": "agent-9", "title": "Write a.txt", "kind": "edit", "tool_call_id": "w1"}
    assert ask["id"].startswith("perm-") and line == "allowed: Write a.txt (agent-9)"
    assert decision == (True, "yes") and late == (False, "no") and left == []
    with pytest.raises(tn.UsageError) as error:
        answer(ask["id"], False)
    assert str(error.value) == f"no pending permission request {ask['id']!r} (answered, timed out or cancelled)"


def test_workspace_refuses_relative_traversal_and_symlinks_out(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("top secret")
    (root / "link").symlink_to(outside)
    (root / "dirlink").symlink_to(tmp_path)
    ws = Workspace(str(root))
    ws.write(str(root / "sub" / "a.txt"), "one\ntwo\nthree\n")
    assert ws.read(str(root / "sub" / "a.txt")) == "one\ntwo\nthree\n"
    assert ws.read(str(root / "sub" / "a.txt"), line=2, limit=1) == "two\n"
    for bad, message in [("sub/a.txt", "path must be absolute: 'sub/a.txt'"),
                         (str(root / ".." / "secret.txt"), f"path is outside the workspace {root}: "),
                         (str(root / "link"), f"path is outside the workspace {root}: "),
                         (str(root / "dirlink" / "secret.txt"), f"path is outside the workspace {root}: ")]:
        with pytest.raises(WorkspaceError) as info:
            ws.read(bad)
        assert str(info.value).startswith(message)
        with pytest.raises(WorkspaceError):
            ws.write(bad, "pwned")
    assert outside.read_text() == "top secret"
    with pytest.raises(WorkspaceError, match="no such file"):
        ws.read(str(root / "missing.txt"))


def permission_rows(h, agent_id):
    return [json.loads(r["text"]) for r in h.view.transcript(agent_id, raw=True) if r["kind"] == "external/permission"]


@pytest.mark.slow
def test_permission_granted_and_refused_through_the_agent(tmp_path):
    target = tmp_path / "out.txt"
    seen = []

    def only_out_txt(req):
        seen.append((req.kind, req.title, [o["kind"] for o in req.options]))
        return req.title.endswith("out.txt")

    async def main():
        agents = {"deny": tn.AcpAgent(fake(), cwd=str(tmp_path)),
                  "edit": tn.AcpAgent(fake(), cwd=str(tmp_path), permissions={"edit"}),
                  "ask": tn.AcpAgent(fake(), cwd=str(tmp_path), permissions=only_out_txt)}
        async with tn.AsyncHub(ids="sequential", providers=agents) as h:
            refused = await h.spawn(f"WRITE {target} hello", provider="deny")
            assert not target.exists()
            granted = await h.spawn(f"WRITE {target} hello", provider="edit")
            asked = await h.spawn(f"WRITE {tmp_path / 'other.txt'} no", provider="ask")
            return (refused.text, granted.text, asked.text, permission_rows(h, "agent-1"),
                    permission_rows(h, "agent-2"))

    refused, granted, asked, denied_rows, granted_rows = asyncio.run(main())
    assert refused == f"permission refused\n\nPermission denied: Write {target} (edit)"
    assert granted == f"wrote {target}" and target.read_text() == "hello"
    assert asked == f"permission refused\n\nPermission denied: Write {tmp_path / 'other.txt'} (edit)" and not (tmp_path / "other.txt").exists()
    assert seen == [("edit", f"Write {tmp_path / 'other.txt'}", ["allow_once", "reject_once"])]
    assert denied_rows == [{"toolCallId": "w1", "title": f"Write {target}", "kind": "edit", "allowed": False,
                            "optionId": "no"}]
    assert granted_rows[0]["allowed"] is True and granted_rows[0]["optionId"] == "yes"


@pytest.mark.slow
def test_file_requests_are_served_only_inside_the_workspace(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("top secret")
    (work / "escape").symlink_to(tmp_path / "secret.txt")

    async def main():
        agent = tn.AcpAgent(fake(), cwd=str(work), permissions="allow")
        async with tn.AsyncHub(ids="sequential", providers={"coder": agent}) as h:
            texts = [(await h.spawn(prompt, provider="coder")).text for prompt in (
                f"READ {work / 'notes.txt'}", f"READ {work / '..' / 'secret.txt'}", f"READ {work / 'escape'}",
                f"WRITE {work / '..' / 'pwned.txt'} x", f"WRITE {work / 'escape'} x")]
            fs = [json.loads(r["text"]) for r in await h.transcript("agent-2", raw=True) if r["kind"] == "external/fs"]
            return texts, fs

    texts, fs = asyncio.run(main())
    assert texts[0] == "content: inside"
    outside = f"path is outside the workspace {work}: "
    assert texts[1] == f"read failed: {outside}{work / '..' / 'secret.txt'}"
    assert texts[2] == f"read failed: {outside}{work / 'escape'}"
    assert texts[3] == f"write failed: {outside}{work / '..' / 'pwned.txt'}"
    assert texts[4] == f"write failed: {outside}{work / 'escape'}"
    assert fs == [{"op": "read", "path": str(work / ".." / "secret.txt"),
                   "refused": f"{outside}{work / '..' / 'secret.txt'}"}]
    assert (tmp_path / "secret.txt").read_text() == "top secret" and not (tmp_path / "pwned.txt").exists()
    assert set(os.listdir(work)) == {"notes.txt", "escape", ".fake-acp"}


@pytest.mark.slow
def test_a_refused_permission_is_said_to_the_delegating_model_the_notice_and_the_tables(tmp_path):
    """Under the default deny policy an agent whose write was refused may end ``completed`` saying
    nothing: the result, the settlement notice and ``hub.agents()`` still say what was denied."""
    from toh_nb.core.content import ToolCall
    from toh_nb.snapshots import agent_rows

    from ..helpers import seen_by_model

    target = tmp_path / "out.txt"

    async def model(req):
        if req.step == 1:
            return tn.ModelResponse(tool_calls=[ToolCall("coder", {"description": "fix", "prompt": f"QUIET {target} x"},
                                                         id="c1")])
        return "root done"

    async def main():
        agent = tn.AcpAgent(fake(), cwd=str(tmp_path))
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", providers={"acp": agent},
                               tools=[tn.SubagentTool(name="coder", provider="acp")]) as h:
            assert (await h.run("go")).text == "root done"
            seen = seen_by_model(engine_of(h).runtime.store.open("root"))
            kid = await h.start(f"QUIET {target} y", label="bg", provider="acp")
            closing = await kid.wait(timeout=30)
            rows = {row["id"]: row for row in agent_rows(engine_of(h).runtime, "root")}
            return seen, closing, rows

    seen, closing, rows = asyncio.run(main())
    line = f"Permission denied: Write {target} (edit)"
    assert seen[1] == f"TOOL-RESULT c1: {line}"
    assert closing == line
    assert (rows["agent-1"]["stop_reason"], rows["agent-1"]["denied"]) == ("completed", line.split(": ", 1)[1])
    assert rows["agent-2"]["denied"] == f"Write {target} (edit)" and rows["root"]["denied"] is None
    assert not target.exists()


@pytest.mark.slow
def test_file_reads_run_off_the_loop_read_only_the_lines_asked_for_and_keep_to_max_read_bytes(tmp_path, monkeypatch):
    """Issue 41.8, through a real ACP connection: ``fs/read_text_file`` runs on the engine's threads."""
    import threading

    from toh_nb.providers.acp import workspace as workspace_module

    work = tmp_path / "work"
    work.mkdir()
    big = work / "big.log"
    with open(big, "wb") as handle:
        handle.write(b"one\ntwo\nthree\n")
        handle.truncate(64 * 1024 * 1024)
    threads = []
    real_read = workspace_module.Workspace.read

    def read(self, *args):
        threads.append(threading.current_thread())
        return real_read(self, *args)

    monkeypatch.setattr(workspace_module.Workspace, "read", read)

    async def main():
        agent = tn.AcpAgent(fake(), cwd=str(work), permissions="allow", max_read_bytes=4096)
        async with tn.AsyncHub(ids="sequential", providers={"coder": agent}) as h:
            return [(await h.spawn(prompt, provider="coder")).text
                    for prompt in (f"READLINES 2 1 {big}", f"READ {big}")], threading.current_thread()

    texts, loop_thread = asyncio.run(main())
    assert texts == ["content: two\n", f"read failed: {workspace_module.too_large(str(big), 4096)}"]
    assert len(threads) == 2 and loop_thread not in threads
    with pytest.raises(tn.UsageError, match=r"max_read_bytes must be an integer >= 1 \(bytes\), got 0"):
        tn.AcpAgent(fake(), max_read_bytes=0)
