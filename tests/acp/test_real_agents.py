"""The ``acp`` provider against real agents no one here wrote: fast-agent and opencode, offline.

Where they are: ``$TOH_NB_FAST_AGENT`` / ``$TOH_NB_OPENCODE``, else ``.ci-agents/`` (what ``.ci/run``
installs), else ``PATH``; absent → the tests skip and say so. fast-agent runs with its ``passthrough``
model (echoes the prompt) and its ``slow`` model (answers after 3 s, for cancellation); opencode talks
to the scripted chat server of tests/models, with HOME in a temporary directory. Every process is
started by the tests (the hub, the server) and stopped by them.
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest

import toh_nb as tn

pytest.importorskip("acp", reason="needs the acp extra: pip install 'toh-nb[acp]'")

from ..helpers import until
from ..models.chat_server import (
    ChatServer,
    Reply,
    _chunk,
    stream_text,
    stream_tool_calls,
    text,
)
from ..real_parts import FAST_AGENT, OPENCODE
from .helpers import alive

pytestmark = pytest.mark.slow
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
needs_fast_agent = pytest.mark.skipif(FAST_AGENT is None, reason="fast-agent not installed (set TOH_NB_FAST_AGENT "
                                      "or run .ci/run, which installs it into .ci-agents/)")
needs_opencode = pytest.mark.skipif(OPENCODE is None, reason="opencode not installed (set TOH_NB_OPENCODE or run "
                                    ".ci/run, which installs it into .ci-agents/)")


def kinds(hub, agent_id):
    return [row["kind"] for row in hub.view.transcript(agent_id, raw=True)]


def sessions(hub, agent_id):
    return [json.loads(r["text"]) for r in hub.view.transcript(agent_id, raw=True) if r["kind"] == "external/session"]


# -- fast-agent --------------------------------------------------------------------------------------


def fast_agent(tmp_path, model="passthrough"):
    return tn.AcpAgent([FAST_AGENT, "acp", "--model", model], cwd=str(tmp_path))


@needs_fast_agent
def test_fast_agent_one_shot_continuable_and_cancel(tmp_path):
    async def main():
        agents = {"fa": fast_agent(tmp_path), "slow": fast_agent(tmp_path, "slow")}
        async with tn.AsyncHub(ids="sequential", providers=agents) as h:
            result = await h.spawn("hello fast-agent", label="echo", provider="fa")
            assert (result.text, result.stop_reason) == ("hello fast-agent", "completed")
            kid = await h.start("first message", label="coder", provider="fa")
            assert await kid.wait(timeout=60) == "first message"
            await kid.send("second message")  # a new process reloads the session (session/load)
            assert await kid.wait(timeout=60) == "second message"
            first, second = sessions(h, kid.id)
            assert first["session_id"] == second["session_id"] and first["pid"] != second["pid"]
            assert first["agent"] == "fast-agent-acp" and first["load_session"] is True
            slow = await h.start("take your time", label="slow", provider="slow")
            await until(lambda: "external/session" in kinds(h, slow.id), "the slow agent's session", timeout=60)
            await slow.interrupt()
            await slow.wait(timeout=60)
            rows = await h.transcript(slow.id, raw=True)
            assert [r["text"] for r in rows if r["kind"] == "turn/end"] == ["aborted"]
            assert [r["text"] for r in rows if r["kind"] == "external/cancelled"] == ['{"stopReason": "cancelled"}']
            pids = [pid for agent in agents.values() for link in agent.links for pid in link.pids]
        assert len(pids) == 4 and not any(alive(pid) for pid in pids)

    asyncio.run(main())


@needs_fast_agent
def test_fast_agent_child_resumes_after_a_hub_restart(tmp_path):
    store, work = tmp_path / "store", tmp_path / "work"
    work.mkdir()

    async def main():
        async with tn.AsyncHub(ids="sequential", store=str(store), providers={"fa": fast_agent(work)}) as h:
            kid = await h.start("before the restart", label="coder", provider="fa")
            assert await kid.wait(timeout=60) == "before the restart"
        async with tn.AsyncHub(ids="sequential", store=str(store), providers={"fa": fast_agent(work)}) as h:
            assert str(await h.list_agents()) == "agent-1 [ready] \u2014 coder"
            await h.send("agent-1", "after the restart")
            assert await (await h.child("agent-1")).wait(timeout=60) == "after the restart"
            first, second = sessions(h, "agent-1")
            assert first["session_id"] == second["session_id"]

    asyncio.run(main())


# -- opencode ----------------------------------------------------------------------------------------


def respond(body):
    """The scripted model behind opencode: ``RUNTOOL <tool> <json>`` calls a tool, ``SLOW`` stalls mid-stream,
    a tool result is echoed, anything else is answered ``answer to: <prompt>``; title requests get a title."""
    last = body["messages"][-1]
    content = last.get("content")
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    content = content or ""
    if not body.get("tools"):  # opencode's title request
        return stream_text(["a title"]) if body.get("stream") else text("a title")
    if last["role"] == "tool":
        return stream_text(["tool said: ", content])
    if content.startswith("RUNTOOL "):
        _, tool, arguments = content.split(" ", 2)
        return stream_tool_calls([("call_1", tool, [arguments])])
    if content.startswith("SLOW"):
        return Reply(events=[_chunk({"role": "assistant", "content": "thinking"}), 8, _chunk({"content": "."}),
                             _chunk({}, "stop")])
    return stream_text(["answer to: ", content])


@pytest.fixture
def chat():
    with ChatServer() as server:
        server.responder = respond
        yield server


def opencode(chat, tmp_path, work, **kwargs):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    config = {"$schema": "https://opencode.ai/config.json", "model": "local/test-model",
              "permission": {"edit": "ask", "bash": "ask"},
              "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "Local",
                                     "options": {"baseURL": chat.url, "apiKey": "sk-test"},
                                     "models": {"test-model": {"name": "Test model"}}}}}
    env = {"HOME": str(home), "OPENCODE_CONFIG_CONTENT": json.dumps(config), "OPENCODE_DISABLE_MODELS_FETCH": "1",
           "OPENCODE_DISABLE_AUTOUPDATE": "1"}
    return tn.AcpAgent([OPENCODE, "acp", "--pure"], cwd=str(work), env=env, **kwargs)


def user_texts(chat):
    out = []
    for body in chat.bodies:
        if body.get("tools"):
            for message in body["messages"]:
                content = message.get("content")
                if message["role"] == "user":
                    out.append(content if isinstance(content, str) else
                               " ".join(p.get("text", "") for p in content if isinstance(p, dict)))
    return out


@needs_opencode
def test_opencode_one_shot_follow_up_and_cancel(chat, tmp_path):
    work = tmp_path / "work"
    work.mkdir()

    async def main():
        agent = opencode(chat, tmp_path, work)
        async with tn.AsyncHub(ids="sequential", providers={"oc": agent}) as h:
            result = await h.spawn("hello opencode", label="hi", provider="oc")
            assert (result.text, result.stop_reason) == ("answer to: hello opencode", "completed")
            kid = await h.start("first question", label="coder", provider="oc")
            assert await kid.wait(timeout=60) == "answer to: first question"
            await kid.send("second question")
            assert await kid.wait(timeout=60) == "answer to: second question"
            # the reloaded session carried the conversation to the model
            assert user_texts(chat)[-2:] == ["first question", "second question"]
            slow = await h.start("SLOW please", label="slow", provider="oc")
            await until(lambda: "external/agent_message_chunk" in kinds(h, slow.id), "opencode to start answering",
                        timeout=60)
            await slow.interrupt()
            await slow.wait(timeout=60)
            rows = await h.transcript(slow.id, raw=True)
            assert [r["text"] for r in rows if r["kind"] == "turn/end"] == ["aborted"]
            assert [r["text"] for r in rows if r["kind"] == "external/cancelled"] == ['{"stopReason": "cancelled"}']
            pids = [pid for link in agent.links for pid in link.pids]
        assert len(pids) == 4 and not any(alive(pid) for pid in pids)

    asyncio.run(main())


@needs_opencode
def test_opencode_permission_granted_and_refused(chat, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    granted_file, refused_file = work / "granted.txt", work / "refused.txt"

    async def main():
        agents = {"deny": opencode(chat, tmp_path, work), "edit": opencode(chat, tmp_path, work, permissions={"edit"})}
        async with tn.AsyncHub(ids="sequential", providers=agents) as h:
            refused = await h.spawn("RUNTOOL write " + json.dumps({"filePath": str(refused_file), "content": "no"}),
                                    provider="deny")
            granted = await h.spawn("RUNTOOL write " + json.dumps({"filePath": str(granted_file), "content": "yes"}),
                                    provider="edit")
            permissions = [[json.loads(r["text"]) for r in await h.transcript(agent_id, raw=True)
                            if r["kind"] == "external/permission"] for agent_id in ("agent-1", "agent-2")]
            tools = [r for r in await h.transcript("agent-2", raw=True) if r["kind"] == "external/tool_call"]
            return refused, granted, permissions, tools

    refused, granted, (denied, allowed), tools = asyncio.run(main())
    assert not refused_file.exists() and refused.stop_reason == "completed"
    assert granted.text == "tool said: Wrote file successfully." and granted_file.read_text() == "yes"
    assert [(p["kind"], p["allowed"], p["optionId"]) for p in denied] == [("edit", False, "reject")]
    assert [(p["kind"], p["allowed"], p["optionId"]) for p in allowed] == [("edit", True, "once")]
    assert json.loads(tools[0]["text"])["title"] == "write"
