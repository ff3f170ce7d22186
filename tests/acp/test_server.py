"""``python -m toh_nb acp``: a hub served as an ACP agent, driven by the SDK's client side (and by toh_nb's
own ``acp`` provider) spawning it as a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

acp = pytest.importorskip("acp", reason="needs the acp extra: pip install 'toh-nb[acp]'")

import toh_nb as tn

from ..helpers import until
from .helpers import alive
from .served import Served, text

pytestmark = pytest.mark.slow
SERVER = [sys.executable, "-m", "toh_nb", "acp"]


class Recorder:
    """The client side: keeps every session update."""

    def __init__(self):
        self.updates = []

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update)

    def texts(self, kind):
        return [u.content.text for u in self.updates if u.session_update == kind]



def test_a_prompt_is_a_root_turn_with_tool_calls_and_text(tmp_path):
    async def main():
        client = Recorder()
        async with acp.spawn_agent_process(client, *SERVER, "--store", str(tmp_path)) as (conn, _):
            init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            answer = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Plan a garden")])
            return init, session.session_id, answer, client.updates

    init, session_id, answer, updates = asyncio.run(main())
    assert init.agent_capabilities.load_session is True and init.agent_info.name == "toh_nb"
    assert answer.stop_reason == "end_turn"
    kinds = [u.session_update for u in updates]
    assert kinds[0] == "agent_message_chunk" and kinds[-1] == "agent_message_chunk"
    starts = [(u.tool_call_id, u.title, u.kind) for u in updates if u.session_update == "tool_call"]
    assert starts == [("t1-call-1", "subagent: research", "other"), ("t1-call-2", "subagent: analyse", "other"),
                      ("t1-call-3", "subagent: draft", "other"), ("t1-call-5", "subagent: review", "other"),
                      ("t1-call-6", "job_output", "read")]
    finished = {u.tool_call_id: u.status for u in updates if u.session_update == "tool_call_update"}
    assert finished == {call: "completed" for call, _, _ in starts}
    # one streamed answer: each later message of the turn starts a new paragraph
    assert updates[-1].content.text.startswith('\n\nSummary for "Plan a garden":\n- research: ')
    assert (tmp_path / session_id / f"{session_id}.jsonl").exists()


def test_load_resumes_a_session_in_a_new_process_and_replays_it(tmp_path):
    async def main():
        first = Recorder()
        async with acp.spawn_agent_process(first, *SERVER, "--store", str(tmp_path)) as (conn, _):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session_id = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=session_id, prompt=[acp.text_block("Plan a garden")])
        second = Recorder()
        async with acp.spawn_agent_process(second, *SERVER, "--store", str(tmp_path)) as (conn, _):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            await conn.load_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[])
            replayed = list(second.updates)
            answer = await conn.prompt(session_id=session_id, prompt=[acp.text_block("Thanks!")])
            with pytest.raises(acp.RequestError) as missing:
                await conn.load_session(cwd=str(tmp_path), session_id="toh-000000000000", mcp_servers=[])
        return first.updates, replayed, answer, second.updates[len(replayed):], missing.value

    first, replayed, answer, after, missing = asyncio.run(main())
    assert [u.session_update for u in replayed] == ["user_message_chunk", "agent_message_chunk",
                                                    "agent_message_chunk"]
    assert replayed[0].content.text == "Plan a garden"
    assert "\n\n" + replayed[-1].content.text == first[-1].content.text
    assert answer.stop_reason == "end_turn" and after[-1].session_update == "agent_message_chunk"
    assert missing.code == -32002


def test_cancel_aborts_the_running_turn(tmp_path):
    async def main():
        client = Recorder()
        async with acp.spawn_agent_process(client, *SERVER, "--latency", "2") as (conn, _):
            init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session_id = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            turn = asyncio.ensure_future(conn.prompt(session_id=session_id, prompt=[acp.text_block("Plan a garden")]))
            await until(lambda: any(u.session_update == "tool_call" for u in client.updates), "the first delegation",
                        timeout=60)
            await conn.cancel(session_id=session_id)
            return init, await asyncio.wait_for(turn, 60), client.updates

    init, answer, updates = asyncio.run(main())
    assert init.agent_capabilities.load_session is False  # no --store: nothing to load from
    assert answer.stop_reason == "cancelled"
    assert "Summary for" not in " ".join(u.content.text for u in updates if u.session_update == "agent_message_chunk")


def test_a_toh_nb_hub_delegates_to_a_toh_nb_agent_over_acp(tmp_path):
    async def main():
        agent = tn.AcpAgent([*SERVER, "--store", str(tmp_path / "served")], cwd=str(tmp_path))
        async with tn.AsyncHub(ids="sequential", providers={"toh": agent}) as hub:
            result = await hub.spawn("Plan a garden", provider="toh")
            calls = [json.loads(r["text"])["title"] for r in await hub.transcript(result.agent_id, raw=True)
                     if r["kind"] == "external/tool_call"]
            return result, calls, agent.links[0].pids

    result, calls, pids = asyncio.run(main())
    assert result.stop_reason == "completed" and result.text.startswith('Plan for "Plan a garden": research, ')
    assert 'then a background review.\n\nSummary for "Plan a garden":' in result.text
    assert calls == ["subagent: research", "subagent: analyse", "subagent: draft", "subagent: review", "job_output"]
    assert not any(alive(pid) for pid in pids)


def test_command_line_errors():
    done = subprocess.run([*SERVER, "--latency", "-1"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.endswith("error: --latency must be >= 0\n") and done.stdout == ""


def _tree(root, busy: str) -> dict:
    """Every file and directory under ``root`` with its size (what must not change), except inside the
    directory ``busy`` of the session being written."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if not path.startswith(busy + os.sep):
                found[os.path.relpath(path, root)] = None if os.path.isdir(path) else os.path.getsize(path)
    return found


BAD_IDS = ["{sid}/../../victim", "../victim", "{victim}", "toh-..", "toh-a/b", "toh-a\\b", "", ".hidden",
           "toh-" + "a" * 200, "toh-a\x00b", "toh-\u00e9", " toh-a", "toh-a\n"]


def test_session_ids_from_the_client_are_checked_before_any_file_is_touched(tmp_path):
    store, victim = tmp_path / "store", tmp_path / "victim"
    victim.mkdir()
    (victim / ".old.jsonl.tmp").write_text("keep me")
    (victim / "victim.jsonl").write_text("{}\n")
    with Served("--latency", "0", "--store", str(store)) as server:
        server.initialize()
        sid = server.new_session(str(tmp_path))
        os.symlink(victim, store / "toh-link")  # a valid id whose directory lies outside the store
        before = _tree(tmp_path, str(store / sid))
        for bad in BAD_IDS:
            bad = bad.format(sid=sid, victim=victim)
            message = ("Invalid params: sessionId {!r} is not a session id (1-128 letters, digits and '_.:-', "
                       "starting with a letter or digit, no '..')").format(bad)
            for method, params in [("session/load", {"cwd": str(tmp_path), "mcpServers": []}),
                                   ("session/prompt", {"prompt": [text("hi")]})]:
                answer = server.call(method, {**params, "sessionId": bad})
                assert answer["error"] == {"code": -32602, "message": message, "data": {"sessionId": bad}}, (method, bad)
            server.write(json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": bad}}))
        answer = server.call("session/load", {"cwd": str(tmp_path), "mcpServers": [], "sessionId": "toh-link"})
        assert answer["error"] == {"code": -32602, "message": "Invalid params: sessionId 'toh-link' does not name a "
                                   "directory beneath --store", "data": {"sessionId": "toh-link"}}
        answer = server.call("session/prompt", {"sessionId": "toh-000000000000", "prompt": [text("hi")]})
        assert answer["error"] == {"code": -32602, "message": "Invalid params: sessionId 'toh-000000000000' is not a "
                                   "session of this server", "data": {"sessionId": "toh-000000000000"}}
        answer = server.call("session/load", {"cwd": "relative/dir", "mcpServers": [], "sessionId": sid})
        assert answer["error"] == {"code": -32602, "message": "Invalid params: cwd must be an absolute path, got "
                                   "'relative/dir'", "data": {"field": "cwd"}}
        assert _tree(tmp_path, str(store / sid)) == before  # nothing created, nothing deleted, inside the store or out
        assert server.prompt(sid, text("Plan a garden"))["result"] == {"stopReason": "end_turn"}
    assert server.process.returncode == 0 and "Traceback" not in server.err()
    assert sorted(os.listdir(victim)) == [".old.jsonl.tmp", "victim.jsonl"]
    assert (victim / ".old.jsonl.tmp").read_text() == "keep me"


def test_a_cancel_sent_right_after_its_prompt_cancels_it(tmp_path):
    with Served("--latency", "2") as server:
        server.initialize()
        sid = server.new_session(str(tmp_path))
        for attempt in range(1, 4):
            prompt = {"jsonrpc": "2.0", "id": f"p{attempt}", "method": "session/prompt",
                      "params": {"sessionId": sid, "prompt": [text("Plan a garden")]}}
            cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
            server.write(json.dumps(prompt), json.dumps(cancel))  # one write: read in one chunk
            assert server.response(f"p{attempt}")["result"] == {"stopReason": "cancelled"}, attempt
        assert not any("Summary for" in json.dumps(n) for n in server.notifications)


def test_resource_links_and_text_resources_are_part_of_the_prompt_other_blocks_are_refused(tmp_path):
    link = {"type": "resource_link", "uri": "file:///work/plan.md", "name": "plan.md"}
    embedded = {"type": "resource", "resource": {"uri": "file:///work/notes.txt", "text": "water daily"}}
    with Served("--latency", "0", "--store", str(tmp_path / "store")) as server:
        assert server.initialize()["agentCapabilities"]["promptCapabilities"] == {"embeddedContext": True}
        sid = server.new_session(str(tmp_path))
        for index, block, kind in [(1, {"type": "image", "data": "AAAA", "mimeType": "image/png"}, "image"),
                                   (0, {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}, "audio"),
                                   (1, {"type": "resource", "resource": {"uri": "file:///a.bin", "blob": "AAAA"}},
                                    "binary resource")]:
            blocks = [block] if index == 0 else [text("Look"), block]
            answer = server.prompt(sid, *blocks)["error"]
            assert answer == {"code": -32602, "data": {"field": f"prompt.{index}"},
                              "message": f"Invalid params: prompt.{index} is {kind} content, which this agent does "
                                         "not accept (text, resource_link and text resources only)"}
        assert server.prompt(sid, {**link})["result"] == {"stopReason": "end_turn"}  # a link alone is a prompt
        assert server.prompt(sid, text("Summarise"), link, embedded)["result"] == {"stopReason": "end_turn"}
        server.notifications.clear()
        server.call("session/load", {"cwd": str(tmp_path), "mcpServers": [], "sessionId": sid})
    said = [n["params"]["update"]["content"]["text"] for n in server.notifications
            if n["params"]["update"]["sessionUpdate"] == "user_message_chunk"]
    assert said == ["[plan.md](file:///work/plan.md)",
                    'Summarise\n\n[plan.md](file:///work/plan.md)\n\n<context ref="file:///work/notes.txt">\n'
                    "water daily\n</context>"]


def test_prompts_without_text_or_with_broken_unicode_are_refused_and_the_session_serves_on(tmp_path):
    with Served("--latency", "0", "--store", str(tmp_path / "store")) as server:
        server.initialize()
        sid = server.new_session(str(tmp_path))
        for blocks in ([], [text("")], [text("  \n")]):
            assert server.prompt(sid, *blocks)["error"] == {"code": -32602, "message": "Invalid params: prompt has no text",
                                                            "data": {"field": "prompt"}}
        server.write('{"jsonrpc":"2.0","id":"u","method":"session/prompt","params":{"sessionId":"%s","prompt":'
                     '[{"type":"text","text":"ok"},{"type":"text","text":"hi \\ud800 there"}]}}' % sid)
        assert server.response("u")["error"] == {
            "code": -32602, "data": {"field": "prompt.1"},
            "message": "Invalid params: prompt.1 is not valid Unicode (a lone surrogate '\\ud800')"}
        assert server.prompt(sid, text("Plan a garden"))["result"] == {"stopReason": "end_turn"}
    assert server.process.returncode == 0 and "Traceback" not in server.err()
    assert "surrogates not allowed" not in server.err()


def test_end_of_input_cancels_the_running_prompt_and_still_answers_it(tmp_path):
    with Served("--latency", "2", "--store", str(tmp_path / "store")) as server:
        server.initialize()
        sid = server.new_session(str(tmp_path))
        request = server.send("session/prompt", {"sessionId": sid, "prompt": [text("Plan a garden")]})
        server.process.stdin.close()
        assert server.response(request)["result"] == {"stopReason": "cancelled"}
    assert server.process.returncode == 0 and "Traceback" not in server.err()
    assert (tmp_path / "store" / sid / f"{sid}.jsonl").exists()


def test_a_store_that_is_not_a_directory_is_one_error_line(tmp_path):
    (tmp_path / "file").write_text("x")
    done = subprocess.run([*SERVER, "--store", str(tmp_path / "file")], input="", capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"toh-nb acp: error: --store {str(tmp_path / 'file')!r} is not a usable directory: File exists\n"


def test_a_second_prompt_while_one_runs_is_refused_and_the_first_still_cancels(tmp_path):
    with Served("--latency", "2") as server:
        server.initialize()
        sid = server.new_session(str(tmp_path))
        first = server.send("session/prompt", {"sessionId": sid, "prompt": [text("Plan a garden")]})
        second = server.send("session/prompt", {"sessionId": sid, "prompt": [text("And a pond")]})
        assert server.response(second)["error"] == {
            "code": -32600, "message": f"Invalid request: session {sid} is already running a prompt",
            "data": {"sessionId": sid}}
        server.write(json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}))
        assert server.response(first)["result"] == {"stopReason": "cancelled"}
