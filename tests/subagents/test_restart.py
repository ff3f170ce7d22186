"""Durable continuable children: list as ready and cold-resume after a restart (JSONL store)."""

from __future__ import annotations

import asyncio
import json

import toh_nb as tn
from toh_nb.testing import engine_of

from ..helpers import until

TOOLS = [{"tool_name": "subagent", "provider": "spawn", "background_mode": "continuable"}]


def model(req):
    if req.label is None:
        if req.step == 1 and req.last_user_text == "plan":
            return tn.ModelResponse(tool_calls=[tn.ToolCall("subagent", {"description": "researcher", "prompt": "research A"}),
                                                tn.ToolCall("subagent", {"description": "writer", "prompt": "write B"})])
        return "root ok"
    earlier = [m.text for m in req.messages if m.role == "user" and m.source.kind in ("user", "coordinator")]
    return f"{req.label} saw {' | '.join(earlier)} at depth {req.depth}"


async def settled(hub):
    await until(lambda: not engine_of(hub).service.activations and engine_of(hub).root.status == "idle", "the tree to settle")


def test_restart_round_trip(tmp_path):
    store = tmp_path / "runs"

    async def first():
        async with tn.AsyncHub(tn.FunctionModel(model), store=str(store), ids="sequential", delegation_tools=TOOLS) as hub:
            await hub.run("plan")
            await settled(hub)
            await hub.send("agent-1", "dig deeper")
            await settled(hub)
            return str(await hub.list_agents("descendants"))

    async def second():
        async with tn.AsyncHub(tn.FunctionModel(model), store=str(store), ids="sequential", delegation_tools=TOOLS) as hub:
            assert hub.root == "root"
            listing = str(await hub.list_agents())
            result = await hub.call_tool("send_message", subagent_id="agent-1", message="after restart")
            await settled(hub)
            closing = await hub.view.settled("agent-1")
            new = await hub.start("fresh work", label="third")
            await settled(hub)
            unknown = await hub.call_tool("send_message", subagent_id="agent-77", message="x")
            return listing, result.text, closing, new.id, unknown.text

    before = asyncio.run(first())
    assert before == ("agent-1 [ready] parent=root depth=1 \u2014 researcher\n"
                      "agent-2 [ready] parent=root depth=1 \u2014 writer")
    listing, sent, closing, new_id, unknown = asyncio.run(second())
    assert listing == "agent-1 [ready] \u2014 researcher\nagent-2 [ready] \u2014 writer"
    assert sent == "message queued as the next turn for subagent agent-1"
    # the resumed child sees its whole history, and its depth comes from the header
    assert closing == "researcher saw research A | dig deeper | after restart at depth 1"
    assert new_id == "agent-3"  # sequential ids continue after the stored ones
    assert unknown == 'Error: subagent "agent-77" is unavailable'
    lines = (store / "agent-1.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    assert header["parent_session"] == "root" and header["origin"] == "subagent" and header["delegation_depth"] == 1
    descriptors = [json.loads(l) for l in lines[1:] if json.loads(l)["kind"] == "subagent/descriptor"]
    assert len(descriptors) == 1  # cold resume never re-appends it


def test_one_shot_child_on_disk_is_not_resumable(tmp_path):
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "done"), store=str(tmp_path), ids="sequential") as hub:
            await hub.spawn("once", label="once")
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "done"), store=str(tmp_path), ids="sequential") as hub:
            result = await hub.call_tool("send_message", subagent_id="agent-1", message="again")
            assert result.text == ('Error: subagent "agent-1" has no supported continuation state and cannot be '
                                   "resumed; do not retry send_message with this id")

    asyncio.run(main())


def test_corrupt_child_log_lists_as_a_diagnostic(tmp_path):
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path), ids="sequential") as hub:
            kid = await hub.start("t", label="kid")
            await settled(hub)
            kid2 = await hub.start("u", label="kid2")
            await settled(hub)
        path = tmp_path / f"{kid.id}.jsonl"
        lines = path.read_text().splitlines()
        lines[2] = "{not json"
        path.write_text("\n".join(lines) + "\n")
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path), ids="sequential") as hub:
            problem = "line 3: JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
            assert str(await hub.list_agents()) == (f"{kid.id} [diagnostic: corrupt: {problem}]\n"
                                              f"{kid2.id} [ready] \u2014 kid2")
            result = await hub.call_tool("send_message", subagent_id=kid.id, message="x")
            assert result.text == (f'Error: subagent "{kid.id}" is unavailable: session log "{kid.id}" is corrupt: '
                                   f"{problem}")

    asyncio.run(main())


def test_a_large_store_without_an_index_lists_from_log_heads_and_finds_corruption_when_used(tmp_path, monkeypatch):
    import toh_nb.store.jsonl as jsonl_module

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path), ids="sequential") as hub:
            kids = [await hub.start(f"t{i}", label=f"kid{i}") for i in range(3)]
            await settled(hub)
        (tmp_path / ".toh-index.json").unlink()  # e.g. the process that wrote it was killed
        path = tmp_path / f"{kids[1].id}.jsonl"
        lines = path.read_text().splitlines()
        lines[2] = "{not json"
        path.write_text("\n".join(lines) + "\n")
        monkeypatch.setattr(jsonl_module, "LISTING_CHECK_BYTES", 0)  # as if the store were large
        parsed = []
        real_parse = jsonl_module.parse_log
        monkeypatch.setattr(jsonl_module, "parse_log", lambda data, sid: parsed.append(sid) or real_parse(data, sid))
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path), ids="sequential") as hub:
            parsed.clear()  # the root's own log is loaded when the hub opens
            rows = [f"{k.id} [ready] \u2014 kid{i}" for i, k in enumerate(kids)]
            assert str(await hub.list_agents()) == "\n".join(rows)
            assert parsed == []  # listed from each log's head
            result = await hub.call_tool("send_message", subagent_id=kids[1].id, message="x")
            problem = "line 3: JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
            assert result.text == (f'Error: subagent "{kids[1].id}" is unavailable: session log "{kids[1].id}" is '
                                   f"corrupt: {problem}")
            rows[1] = f"{kids[1].id} [diagnostic: corrupt: {problem}]"
            assert str(await hub.list_agents()) == "\n".join(rows)

    asyncio.run(main())


def test_the_agents_table_of_a_reopened_store_reads_each_stored_log_once(tmp_path, monkeypatch):
    import toh_nb.store.jsonl as jsonl_module

    usage = tn.Usage(input_tokens=7, output_tokens=3)

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: tn.ModelResponse(text="ok", usage=usage)),
                               store=str(tmp_path), ids="sequential") as hub:
            kids = [await hub.start(f"t{i}", label=f"kid{i}") for i in range(3)]
            await settled(hub)
            await kids[0].send("again")
            await settled(hub)
            before = await hub.agents()
        parsed = []
        real_parse = jsonl_module.parse_log
        monkeypatch.setattr(jsonl_module, "parse_log", lambda data, sid: parsed.append(sid) or real_parse(data, sid))
        monkeypatch.setattr(jsonl_module, "RECENT_SESSIONS", 0)  # nothing held between calls
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path), ids="sequential") as hub:
            parsed.clear()  # the root's own log is loaded when the hub opens
            assert [{k: r[k] for k in ("id", "turns", "input_tokens")} for r in await hub.agents()] == [
                {k: r[k] for k in ("id", "turns", "input_tokens")} for r in before]
            assert parsed == []  # the index kept each log's summary
        (tmp_path / ".toh-index.json").unlink()  # a killed process leaves none
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path), ids="sequential") as hub:
            parsed.clear()
            first, second = await hub.agents(), await hub.agents()
            assert sorted(parsed) == sorted(k.id for k in kids)  # each stored child once, for both tables
            keep = ["id", "label", "mode", "turns", "input_tokens", "output_tokens", "stop_reason", "started"]
            for rows in (first, second):
                assert [{k: r[k] for k in keep} for r in rows[1:]] == [{k: r[k] for k in keep} for r in before[1:]]
                assert [r["status"] for r in rows[1:]] == ["ready"] * 3
            assert [r["turns"] for r in first[1:]] == [2, 1, 1]

    asyncio.run(main())


def test_a_turn_cut_by_a_crash_is_closed_before_resuming(tmp_path):
    """A log whose last turn never ended (the process died mid-tool-call) resumes with a valid history."""
    from toh_nb.core.content import Message, ToolCallBlock, user_message
    from toh_nb.core.session import ASSISTANT_MESSAGE, TOOL_CALL, TURN_START, USER_MESSAGE

    async def first():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path), ids="sequential") as hub:
            kid = await hub.start("t", label="kid")
            await settled(hub)
            # what a crash mid-turn leaves behind: a turn with an assistant message, one dispatched call
            session = engine_of(hub).store.open(kid.id)
            session.append(TURN_START, turn=2)
            session.append(USER_MESSAGE, turn=2, message=user_message("crash now"))
            session.append(ASSISTANT_MESSAGE, turn=2, message=Message("assistant", [
                ToolCallBlock("c1", "job_list", {}), ToolCallBlock("c2", "job_list", {})]))
            session.append(TOOL_CALL, turn=2, data={"call_id": "c1", "name": "job_list", "arguments": {}})
            return kid.id

    seen = {}

    def model(req):
        seen["roles"] = [m.role for m in req.messages]
        seen["results"] = [m.text for m in req.messages if m.role == "tool"]
        return "resumed"

    async def second(child_id):
        async with tn.AsyncHub(tn.FunctionModel(model), store=str(tmp_path), ids="sequential") as hub:
            await hub.send(child_id, "go on")
            await settled(hub)
            ends = [e.data["reason"] for e in engine_of(hub).store.open(child_id).events if e.kind == "turn/end"]
            return ends

    child_id = asyncio.run(first())
    ends = asyncio.run(second(child_id))
    assert ends == ["completed", "interrupted", "completed"]
    assert seen["roles"] == ["user", "assistant", "user", "assistant", "tool", "tool", "user"]
    assert seen["results"] == [
        "Error: the session ended before this tool call finished; its outcome is unknown",
        "Error: tool call aborted before dispatch"]
