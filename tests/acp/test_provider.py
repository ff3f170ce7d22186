"""The ``acp`` provider against a small SDK agent (tests/acp/fake_agent.py): results, transcripts,
continuation and resume, cancellation, stop reasons, and every way an agent process can misbehave."""

from __future__ import annotations

import asyncio
import os

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of

pytest.importorskip("acp", reason="needs the acp extra: pip install 'toh-nb[acp]'")
from toh_nb.core.content import ToolCall

from ..helpers import seen_by_model, until
from .helpers import alive, fake

pytestmark = pytest.mark.slow


def hub(tmp_path, agent=None, **kwargs):
    agent = agent or tn.AcpAgent(fake(), cwd=str(tmp_path), eof_grace=2.0)
    return tn.AsyncHub(ids="sequential", providers={"coder": agent}, **kwargs), agent


def kinds(hub, agent_id):
    return [row["kind"] for row in hub.view.transcript(agent_id, raw=True)]


def test_one_shot_answers_records_the_stream_and_leaves_no_process(tmp_path):
    async def main():
        h, agent = hub(tmp_path)
        activity = []
        async with h:
            h.view.subscribe(lambda e: activity.append(e.activity) if e.kind == "subagent/activity"
                                    else None)
            result = await h.spawn("hello there", label="fix", provider="coder")
            assert (result.text, result.stop_reason) == ("echo: hello there", "completed")
            assert kinds(h, "agent-1") == [
                "subagent/descriptor", "turn/start", "user/message", "external/session", "external/tool_call",
                "external/tool_call_update", "external/agent_message_chunk", "external/agent_message_chunk",
                "assistant/message", "turn/end"]
            session = next(r for r in await h.transcript("agent-1", raw=True) if r["kind"] == "external/session")
            assert '"agent": "fake-acp"' in session["text"] and '"load_session": true' in session["text"]
            assert activity == ["session", "tool_call", "tool_call_update", "agent_message_chunk",
                                "agent_message_chunk"]
            [pid] = agent.links[0].pids
            assert not alive(pid)  # disposed with the run

    asyncio.run(main())


def test_the_model_delegates_through_a_subagent_tool_and_reads_the_usual_result_text(tmp_path):
    async def model(req):
        if req.step == 1:
            return tn.ModelResponse(tool_calls=[
                ToolCall("coder", {"description": "fix", "prompt": "fix the bug"}, id="c1"),
                ToolCall("coder", {"description": "crash", "prompt": "CRASH"}, id="c2")])
        return "root done"

    async def main():
        agent = tn.AcpAgent(fake(), cwd=str(tmp_path))
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", providers={"acp": agent},
                               tools=[tn.SubagentTool(name="coder", provider="acp")]) as h:
            assert (await h.run("go")).text == "root done"
            return seen_by_model(engine_of(h).runtime.store.open("root"))

    seen = asyncio.run(main())
    assert seen[1] == "TOOL-RESULT c1: echo: fix the bug"
    assert seen[2].startswith("TOOL-RESULT c2 (isError): Error: subagent run failed\nDiagnostic: ACP agent `")
    assert seen[2].endswith("fake_agent.py` exited during session/prompt; exit code 3\n"
                            "stderr (last lines):\nfake agent: fatal: out of cheese")


def test_continuable_child_follow_ups_reload_the_same_acp_session(tmp_path):
    async def main():
        h, agent = hub(tmp_path)
        async with h:
            kid = await h.start("first", label="coder", provider="coder")
            assert await kid.wait(timeout=30) == "echo: first"
            await kid.send("HISTORY")
            assert await kid.wait(timeout=30) == "first | HISTORY"
            first, second = agent.links
            assert first.session_id == second.session_id
            await until(lambda: not alive(first.pids[0]) and not alive(second.pids[0]), "both processes gone",
                        timeout=30)
            # the replay of session/load is not logged a second time
            assert "external/user_message_chunk" not in kinds(h, kid.id)
            assert str(await h.list_agents()) == "agent-1 [ready] \u2014 coder"

    asyncio.run(main())


def test_resume_after_a_hub_restart(tmp_path):
    store = tmp_path / "store"
    work = tmp_path / "work"
    work.mkdir()

    async def main():
        agent = tn.AcpAgent(fake(), cwd=str(work))
        async with tn.AsyncHub(ids="sequential", store=str(store), providers={"coder": agent}) as h:
            kid = await h.start("remember me", label="coder", provider="coder")
            assert await kid.wait(timeout=30) == "echo: remember me"
        agent = tn.AcpAgent(fake(), cwd=str(work))
        async with tn.AsyncHub(ids="sequential", store=str(store), providers={"coder": agent}) as h:
            assert str(await h.list_agents()) == "agent-1 [ready] \u2014 coder"
            await h.send("agent-1", "HISTORY")
            assert await (await h.child("agent-1")).wait(timeout=30) == "remember me | HISTORY"

    asyncio.run(main())


def test_an_agent_without_load_session_cannot_resume_and_says_why(tmp_path):
    async def main():
        h, _ = hub(tmp_path, tn.AcpAgent(fake("--no-load"), cwd=str(tmp_path)))
        async with h:
            kid = await h.start("once", label="coder", provider="coder")
            assert await kid.wait(timeout=30) == "echo: once"
            # the listing already says why, before anyone tries to send
            assert str(await h.list_agents()) == (f'agent-1 [diagnostic: cannot resume: its ACP agent '
                                            f'`{" ".join(fake("--no-load"))}` does not support session/load]')
            with pytest.raises(tn.SubagentError) as info:
                await kid.send("again")
            assert info.value.code == "NOT_RESUMABLE"
            assert str(info.value) == (f'subagent "agent-1" cannot resume: its ACP agent `{" ".join(fake("--no-load"))}` '
                                       "does not support session/load")
            refused = await h.call_tool("send_message", subagent_id="agent-1", message="again")
            assert refused.text == f"Error: {info.value}"

    asyncio.run(main())


def test_interrupt_mid_answer_cancels_the_acp_turn(tmp_path):
    async def main():
        h, agent = hub(tmp_path)
        async with h:
            kid = await h.start("SLOW", label="slow", provider="coder")
            await until(lambda: "external/agent_message_chunk" in kinds(h, kid.id), "the agent to start answering",
                        timeout=30)
            await kid.interrupt()
            await kid.wait(timeout=30)
            rows = await h.transcript(kid.id, raw=True)
            assert [r["text"] for r in rows if r["kind"] == "turn/end"] == ["aborted"]
            assert [r["text"] for r in rows if r["kind"] == "external/cancelled"] == ['{"stopReason": "cancelled"}']
            await until(lambda: not alive(agent.links[0].pids[0]), "the process to be disposed", timeout=30)

    asyncio.run(main())


def test_an_agent_deaf_to_cancel_is_disposed_and_the_turn_still_ends_aborted(tmp_path):
    async def main():
        # a start bounded generously (the fake agent imports the ACP SDK: ~1 s on a slow CPU), then 1 s for
        # each protocol step of this link, which bounds how long a cancel is waited for
        agent = tn.AcpAgent(fake(), cwd=str(tmp_path), timeout=30, eof_grace=0.5, kill_grace=0.5)
        async with tn.AsyncHub(ids="sequential", providers={"coder": agent}) as h:
            kid = await h.start("DEAF", label="deaf", provider="coder")
            await until(lambda: "external/agent_message_chunk" in kinds(h, kid.id), "the agent to answer",
                        timeout=60)
            agent.links[0].timeout = 1
            await kid.interrupt()
            await kid.wait(timeout=30)
            rows = await h.transcript(kid.id, raw=True)
            assert [r["text"] for r in rows if r["kind"] == "turn/end"] == ["aborted"]
            assert "external/cancelled" not in kinds(h, kid.id)  # it never acknowledged
            assert not alive(agent.links[0].pids[0])  # disposed before the turn ended

    asyncio.run(main())


@pytest.mark.parametrize("reason, stop, diagnostic", [
    ("max_tokens", "max-tokens", None),
    ("refusal", "refusal", None),
    ("max_turn_requests", "error", "stopped at its own limit of model requests for one turn (stopReason "
                                   "max_turn_requests)"),
    ("weird", "error", "sent an invalid answer to session/prompt: 1 validation error for PromptResponse\nstopReason"),
])
def test_stop_reasons_map_to_turn_endings(tmp_path, reason, stop, diagnostic):
    async def main():
        h, _ = hub(tmp_path)
        async with h:
            return await h.spawn(f"STOP {reason}", provider="coder", check=False)

    result = asyncio.run(main())
    assert result.stop_reason == stop
    if diagnostic is None:
        assert result.diagnostic is None
    else:
        assert result.diagnostic.startswith(f"ACP agent `{' '.join(fake())}` {diagnostic}")


def test_crash_garbage_missing_and_hang_end_the_turn_with_a_diagnostic_and_spare_the_hub(tmp_path):
    command = " ".join(fake())

    async def main():
        agents = {"coder": tn.AcpAgent(fake(), cwd=str(tmp_path)),
                  "missing": tn.AcpAgent(["/nonexistent/agent-bin", "acp"], cwd=str(tmp_path)),
                  "hang": tn.AcpAgent(fake("--hang-init"), cwd=str(tmp_path), timeout=2, eof_grace=0.5)}
        async with tn.AsyncHub(ids="sequential", providers=agents) as h:
            crash = await h.spawn("CRASH", provider="coder", check=False)
            garbage = await h.spawn("GARBAGE", provider="coder", check=False)
            missing = await h.spawn("x", provider="missing", check=False)
            hang = await h.spawn("x", provider="hang", check=False)
            after = await h.spawn("still fine?", provider="coder")
            pids = [pid for agent in agents.values() for link in agent.links for pid in link.pids]
            return crash, garbage, missing, hang, after, pids

    crash, garbage, missing, hang, after, pids = asyncio.run(main())
    assert [r.stop_reason for r in (crash, garbage, missing, hang)] == ["error"] * 4
    assert [r.cause for r in (crash, garbage, missing)] == ["agent process"] * 3  # what tn.RunError names
    assert crash.diagnostic == (f"ACP agent `{command}` exited during session/prompt; exit code 3\n"
                                "stderr (last lines):\nfake agent: fatal: out of cheese")
    assert garbage.diagnostic.startswith(f"ACP agent `{command}` wrote non-protocol output to stdout during "
                                         "session/prompt: 'Welcome to fake agent v1 (not JSON)'; exit code ")
    assert missing.diagnostic == ("ACP agent `/nonexistent/agent-bin acp` could not be started: command not found: "
                                  "'/nonexistent/agent-bin'")
    assert hang.diagnostic.startswith(f"ACP agent `{command} --hang-init` did not answer initialize within 2 s; "
                                      "exit code ")
    assert hang.diagnostic.endswith("\nstderr (last lines):\nfake agent: will hang in initialize")
    assert after.text == "echo: still fine?"
    assert len(pids) == 4 and not any(alive(pid) for pid in pids)


def test_hub_close_leaves_no_process_behind_even_helpers_and_stubborn_agents(tmp_path):
    async def main():
        stubborn = tn.AcpAgent(fake("--ignore-eof"), cwd=str(tmp_path), eof_grace=0.3, kill_grace=0.3)
        agent = tn.AcpAgent(fake(), cwd=str(tmp_path))
        h = tn.AsyncHub(ids="sequential", providers={"coder": agent, "stubborn": stubborn})
        helper = await h.spawn("GRANDCHILD", provider="coder")
        busy = await h.start("SLOW", label="busy", provider="coder")
        mule = await h.start("SLOW", label="mule", provider="stubborn")
        await until(lambda: len(agent.links) == 2 and stubborn.links and agent.links[1].pids
                    and stubborn.links[0].pids and "external/agent_message_chunk" in kinds(h, busy.id)
                    and "external/agent_message_chunk" in kinds(h, mule.id), "both agents answering", timeout=30)
        pids = [int(helper.text)] + agent.links[1].pids + stubborn.links[0].pids
        assert all(alive(pid) for pid in pids[1:])
        await h.close()
        return pids

    pids = asyncio.run(main())
    assert [alive(pid) for pid in pids] == [False, False, False]


def test_environment_and_workspace_are_the_ones_given(tmp_path, monkeypatch):
    monkeypatch.setenv("TOH_INHERITED", "from-parent")

    async def main():
        agents = {"a": tn.AcpAgent(fake(), cwd=str(tmp_path), env={"TOH_SECRET": "s3cret"}),
                  "b": tn.AcpAgent(fake(), cwd=str(tmp_path), env={"PATH": os.environ["PATH"]}, inherit_env=False),
                  "t": tn.AcpAgent(fake())}
        async with tn.AsyncHub(ids="sequential", providers=agents) as h:
            given = await h.spawn("ENV TOH_SECRET", provider="a")
            inherited = await h.spawn("ENV TOH_INHERITED", provider="b")
            temp = await h.spawn("ENV HOME", provider="t")
            return given.text, inherited.text, temp.text, repr(agents["a"])

    given, inherited, temp, shown = asyncio.run(main())
    assert given == f"TOH_SECRET=s3cret cwd={tmp_path}"
    assert inherited == f"TOH_INHERITED=<unset> cwd={tmp_path}"
    workspace = temp.rsplit("cwd=", 1)[1]
    assert os.path.basename(workspace).startswith("toh_nb-acp-agent-3-") and workspace != os.getcwd()
    assert "s3cret" not in shown and "env=<1 variables>" in shown


def test_configuration_errors_are_usage_errors(tmp_path):
    with pytest.raises(tn.UsageError, match=r"cwd must be an absolute path \(the agent's workspace\), got 'rel'"):
        tn.AcpAgent(fake(), cwd="rel")
    with pytest.raises(tn.UsageError, match="is not an existing directory"):
        tn.AcpAgent(fake(), cwd=str(tmp_path / "nope"))
    with pytest.raises(tn.UsageError, match="command must be a non-empty list of arguments"):
        tn.AcpAgent("opencode acp")
    with pytest.raises(tn.UsageError, match="unknown ACP tool kind"):
        tn.AcpAgent(fake(), permissions={"write"})
    with pytest.raises(tn.UsageError, match="timeout must be a positive number of seconds"):
        tn.AcpAgent(fake(), timeout=0)

    async def main():
        h, _ = hub(tmp_path)
        async with h:
            with pytest.raises(tn.ProviderError, match='"coder" does not support the "persona"'):
                await h.spawn("x", provider="coder", persona="a pirate")

    asyncio.run(main())


def test_a_continuable_child_recovers_from_a_crash_by_reloading_its_session(tmp_path):
    async def main():
        h, agent = hub(tmp_path)
        async with h:
            kid = await h.start("CRASH", label="coder", provider="coder")
            await kid.wait(timeout=30, check=False)
            ends = [r["text"] for r in await h.transcript(kid.id, raw=True) if r["kind"] == "turn/end"]
            assert ends[0].startswith("error: ACP agent `") and ends[0].endswith("out of cheese")
            await kid.send("HISTORY")
            assert await kid.wait(timeout=30) == "CRASH | HISTORY"
            assert agent.links[0].session_id == agent.links[1].session_id

    asyncio.run(main())


def test_background_children_run_as_jobs_and_job_kill_cancels_the_acp_turn(tmp_path):
    async def main():
        h, agent = hub(tmp_path)
        activity = []
        async with h:
            h.view.subscribe(lambda e: activity.append((e.agent_id, e.activity, e.data))
                                    if e.kind == "subagent/activity" else None)
            done = await h.spawn("in the background", label="bg", provider="coder", background=True)
            assert await done.output(wait=True, timeout=30) == "echo: in the background"
            slow = await h.spawn("SLOW", label="slow", provider="coder", background=True)
            await until(lambda: len(agent.links) == 2 and agent.links[1].session_id is not None
                        and "external/agent_message_chunk" in kinds(h, "agent-2"), "the slow job to answer",
                        timeout=30)
            await slow.kill()
            await slow.output(wait=True, timeout=30)
            assert [r["text"] for r in await h.transcript("agent-2", raw=True) if r["kind"] == "turn/end"] == ["aborted"]
            # the child was disposed with its job, so the agent's acknowledgement reaches only the event stream
            assert ("agent-2", "cancelled", {"stopReason": "cancelled"}) in activity
            await until(lambda: not alive(agent.links[1].pids[0]), "the killed job's process to go", timeout=30)

    asyncio.run(main())


def test_a_message_the_agent_never_got_is_sent_with_the_next_one(tmp_path):
    """A turn that failed before its prompt went out (the agent did not start) leaves its text to the next
    prompt — in the same activation, and after the child settled; a turn whose prompt went out (the crash
    above) does not."""
    async def main():
        agent = tn.AcpAgent(fake("--hang-init"), cwd=str(tmp_path), timeout=1, eof_grace=0.5)
        async with tn.AsyncHub(ids="sequential", providers={"coder": agent}) as h:
            kid = await h.start("first", label="same", provider="coder")
            await h.send(kid.id, "second")  # queued behind the first turn, same activation
            await until(lambda: agent.links and agent.links[0].pids, "the hanging agent to start", timeout=30)
            agent.links[0].command, agent.links[0].timeout = fake(), 60  # the next start of this activation works
            await kid.wait(timeout=30)
            same = [r["text"] for r in await h.transcript(kid.id, raw=True) if r["kind"] in ("turn/end", "assistant/message")]
            agent.command = ["/nonexistent/agent-bin"]
            later = await h.start("third", label="later", provider="coder")
            await later.wait(timeout=30, check=False)
            agent.command, agent.timeout = fake(), 60  # it never opened a session: the next message starts one
            await h.send(later.id, "fourth")
            assert await later.wait(timeout=30) == "echo: third\n\nfourth"
            return same

    same = asyncio.run(main())
    assert same[0].startswith("error: ACP agent `") and " did not answer initialize within 1 s" in same[0]
    assert same[1:] == ["echo: first\n\nsecond", "completed"]


def test_env_values_are_held_out_of_http_logs_until_the_last_hub_closes():
    from toh_nb.core import secrets

    agent = tn.AcpAgent(["true"], env={"TOKEN": "sk-acp-held-0123456789", "SHORT": "x"})

    async def main():
        async with tn.AsyncHub(providers={"acp": agent}):
            async with tn.AsyncHub(providers={"acp": agent}):
                pass
            still = secrets.held()  # the first hub still uses the agent
        return still

    assert asyncio.run(main()) == ("sk-acp-held-0123456789",)
    assert secrets.held() == ()


def test_temporary_workspaces_are_removed_when_their_child_is_done():
    """``cwd=None``: a one-shot child's workspace goes at the end of its run, a continuable child's stays
    for its follow-ups and goes at ``hub.close()``."""
    async def main():
        agent = tn.AcpAgent(fake())
        async with tn.AsyncHub(ids="sequential", providers={"t": agent}) as h:
            one = (await h.spawn("ENV HOME", provider="t")).text.rsplit("cwd=", 1)[1]
            one_left = os.path.exists(one)
            kid = await h.start("ENV HOME", label="kept", provider="t")
            kept = (await kid.wait(timeout=30)).rsplit("cwd=", 1)[1]
            await h.send(kid.id, "HISTORY")  # the follow-up reloads its session from the same workspace
            history = await kid.wait(timeout=30)
            kept_there = os.path.isdir(kept)
        return one_left, kept_there, history, os.path.exists(kept), agent.temp_dirs

    assert asyncio.run(main()) == (False, True, "ENV HOME | HISTORY", False, set())


def test_a_hostile_stdout_ends_the_turn_with_a_diagnostic_and_spares_the_hub(tmp_path):
    command = " ".join(fake())

    async def main():
        agent = tn.AcpAgent(fake(), cwd=str(tmp_path), eof_grace=0.5, kill_grace=0.5)
        async with tn.AsyncHub(ids="sequential", providers={"coder": agent}) as h:
            results = [await h.spawn(prompt, provider="coder", check=False) for prompt in ("NONOBJECT", "HUGE", "FLOOD")]
            return results, agent

    (nonobject, huge, flood), agent = asyncio.run(main())
    assert nonobject.stop_reason == huge.stop_reason == "error"
    assert nonobject.diagnostic.startswith(f"ACP agent `{command}` wrote non-protocol output to stdout during "
                                           "session/prompt: '[1, 2, 3]'; exit code ")
    assert huge.diagnostic.startswith(f"ACP agent `{command}` wrote non-protocol output to stdout during "
                                      "session/prompt: '(a line longer than the protocol limit)'; exit code ")
    assert flood.text == "." * 3000
    assert not any(alive(pid) for link in agent.links for pid in (*link.pids, link.process.launcher_pid))
