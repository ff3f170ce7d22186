"""A small ACP agent written with the SDK, for the faults real agents cannot be made to show.

Run as ``python fake_agent.py [--no-load] [--hang-init] [--ignore-eof]``. Prompts are commands:

- anything else: answered ``echo: <prompt>`` in two chunks, after a ``tool_call`` and its update;
- ``SLOW``: streams ``working`` and waits for ``session/cancel`` (answers ``cancelled``);
- ``DEAF``: streams ``not listening`` and never answers, not even a cancel;
- ``CRASH``: writes to stderr and exits 3; ``GARBAGE``: prints a banner line on stdout;
- ``NONOBJECT``: prints a JSON array on stdout; ``HUGE``: prints one 60 MB line; ``FLOOD``: streams
  3000 chunks, then answers;
- ``STOP <reason>``: ends the turn with that stop reason;
- ``WRITE <path> <text>``: asks permission (edit), then ``fs/write_text_file`` if allowed;
- ``QUIET <path>``: like ``WRITE`` but says nothing when refused (an empty answer, ``end_turn``);
- ``READ <path>``: ``fs/read_text_file``; the answer is the content or the error message;
  ``READLINES <line> <limit> <path>``: the same for ``limit`` lines from ``line`` on;
- ``GRANDCHILD``: starts ``sleep 300`` in its process group and answers its pid;
- ``HELPERS``: starts ``setsid sleep 1000`` (holding stdout) and a double-forked daemon; answers both pids;
- ``ABANDON``: starts ``setsid sleep 1000`` holding stdout, names its pid on stderr and exits 5 mid-turn;
- ``HANG-HELD``: starts ``setsid sleep 1000`` holding stdout and never answers;
- ``ENV <name>``: answers the variable's value and the process's working directory;
- ``MCP``: answers the ``mcpServers`` its session was given, as JSON (``--mcp-http``: it advertises
  ``mcpCapabilities.http``);
- ``HISTORY``: answers the prompts this session has seen (kept in ``<cwd>/.fake-acp/<sid>.json``, so a
  session loads in a new process).
"""

from __future__ import annotations

import sys

ARGS = set(sys.argv[1:])
if "--hang-init" in ARGS:  # said first, so the stderr tail has it even if startup is slow
    print("fake agent: will hang in initialize", file=sys.stderr, flush=True)

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import uuid  # noqa: E402

import acp  # noqa: E402
from acp import schema  # noqa: E402


class FakeAgent:
    def __init__(self) -> None:
        self.conn = None
        self.cancelled: dict[str, asyncio.Event] = {}
        self.cwd: dict[str, str] = {}
        self.mcp: dict[str, list] = {}

    def on_connect(self, conn) -> None:
        self.conn = conn

    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kwargs):
        if "--hang-init" in ARGS:
            await asyncio.Event().wait()
        return acp.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(
                load_session="--no-load" not in ARGS, mcp_capabilities=schema.McpCapabilities(http="--mcp-http" in ARGS)),
            agent_info=schema.Implementation(name="fake-acp", version="1.0"))

    def _store(self, sid: str) -> str:
        return os.path.join(self.cwd[sid], ".fake-acp", f"{sid}.json")

    def _history(self, sid: str) -> list:
        try:
            with open(self._store(sid)) as handle:
                return json.load(handle)
        except FileNotFoundError:
            return []

    async def new_session(self, cwd, mcp_servers=None, **kwargs):
        sid = f"fake-{uuid.uuid4().hex[:8]}"
        self.cwd[sid] = cwd
        self.mcp[sid] = [server.model_dump(mode="json", by_alias=True, exclude_none=True) for server in mcp_servers or ()]
        os.makedirs(os.path.dirname(self._store(sid)), exist_ok=True)
        with open(self._store(sid), "w") as handle:
            json.dump([], handle)
        return acp.NewSessionResponse(session_id=sid)

    async def load_session(self, cwd, session_id, mcp_servers=None, **kwargs):
        self.cwd[session_id] = cwd
        if not os.path.exists(self._store(session_id)):
            raise acp.RequestError.resource_not_found(session_id)
        for text in self._history(session_id):  # replay, as real agents do
            await self.conn.session_update(session_id=session_id, update=acp.update_user_message_text(text))
        return acp.LoadSessionResponse()

    async def cancel(self, session_id, **kwargs):
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def say(self, sid: str, text: str) -> None:
        await self.conn.session_update(session_id=sid, update=acp.update_agent_message_text(text))

    async def prompt(self, prompt, session_id, **kwargs):
        sid = session_id
        text = "".join(block.text for block in prompt if getattr(block, "type", None) == "text")
        history = self._history(sid) + [text]
        with open(self._store(sid), "w") as handle:
            json.dump(history, handle)
        self.cancelled[sid] = asyncio.Event()
        word, _, rest = text.partition(" ")
        if word == "SLOW":
            await self.say(sid, "working")
            await self.cancelled[sid].wait()
            return acp.PromptResponse(stop_reason="cancelled")
        if word == "DEAF":  # ignores session/cancel
            await self.say(sid, "not listening")
            await asyncio.Event().wait()
        if word == "MCP":
            await self.say(sid, json.dumps(self.mcp.get(sid), sort_keys=True))
            return acp.PromptResponse(stop_reason="end_turn")
        if word == "CRASH":
            print("fake agent: fatal: out of cheese", file=sys.stderr, flush=True)
            os._exit(3)
        if word == "GARBAGE":
            print("Welcome to fake agent v1 (not JSON)", flush=True)
            await asyncio.Event().wait()
        if word == "NONOBJECT":
            print('[1, 2, 3]', flush=True)
            await asyncio.Event().wait()
        if word == "HUGE":
            os.set_blocking(1, True)  # the SDK made it non-blocking; this line must go out whole
            data = memoryview(b"x" * (60 * 1024 * 1024) + b"\n")
            while data:
                data = data[os.write(1, data):]
            await asyncio.Event().wait()
        if word == "FLOOD":
            for _ in range(3000):
                await self.say(sid, ".")
            return acp.PromptResponse(stop_reason="end_turn")
        if word == "STOP":
            await self.say(sid, "partial")
            return acp.PromptResponse.model_construct(stop_reason=rest)  # unchecked: unknown reasons too
        if word in ("WRITE", "QUIET"):
            path, _, content = rest.partition(" ")
            call = acp.start_edit_tool_call("w1", f"Write {path}", path, content)
            await self.conn.session_update(session_id=sid, update=call)
            answer = await self.conn.request_permission(
                session_id=sid, tool_call=schema.ToolCallUpdate(tool_call_id="w1", title=f"Write {path}", kind="edit"),
                options=[schema.PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                         schema.PermissionOption(option_id="no", name="Reject", kind="reject_once")])
            outcome = answer.outcome
            if outcome.outcome == "selected" and outcome.option_id == "yes":
                try:
                    await self.conn.write_text_file(session_id=sid, path=path, content=content)
                except acp.RequestError as error:
                    await self.say(sid, f"write failed: {error}")
                    return acp.PromptResponse(stop_reason="end_turn")
                await self.say(sid, f"wrote {path}")
            elif word == "WRITE":
                await self.say(sid, "permission refused")
            return acp.PromptResponse(stop_reason="end_turn")
        if word in ("READ", "READLINES"):
            span = {}
            if word == "READLINES":
                line, limit, rest = rest.split(" ", 2)
                span = {"line": int(line), "limit": int(limit)}
            try:
                got = await self.conn.read_text_file(session_id=sid, path=rest, **span)
                await self.say(sid, f"content: {got.content}")
            except acp.RequestError as error:
                await self.say(sid, f"read failed: {error}")
            return acp.PromptResponse(stop_reason="end_turn")
        if word == "GRANDCHILD":
            child = subprocess.Popen(["sleep", "300"])
            await self.say(sid, str(child.pid))
            return acp.PromptResponse(stop_reason="end_turn")
        if word == "HELPERS":
            helper = subprocess.Popen(["setsid", "sleep", "1000"])
            await self.say(sid, f"{helper.pid} {daemonize(['sleep', '1001'])}")
            return acp.PromptResponse(stop_reason="end_turn")
        if word == "ABANDON":
            helper = subprocess.Popen(["setsid", "sleep", "1000"])
            print(f"fake agent: helper {helper.pid} holds my stdout; dying", file=sys.stderr, flush=True)
            os._exit(5)
        if word == "HANG-HELD":
            helper = subprocess.Popen(["setsid", "sleep", "1000"])
            await self.say(sid, str(helper.pid))
            await asyncio.Event().wait()
        if word == "ENV":
            await self.say(sid, f"{rest}={os.environ.get(rest, '<unset>')} cwd={os.getcwd()}")
            return acp.PromptResponse(stop_reason="end_turn")
        if word == "HISTORY":
            await self.say(sid, " | ".join(history))
            return acp.PromptResponse(stop_reason="end_turn")
        await self.conn.session_update(session_id=sid, update=acp.start_tool_call("t1", "think hard", kind="think",
                                                                                  status="pending"))
        await self.conn.session_update(session_id=sid, update=acp.update_tool_call("t1", status="completed"))
        await self.say(sid, "echo: ")
        await self.say(sid, text)
        return acp.PromptResponse(stop_reason="end_turn")


def daemonize(argv: list) -> int:
    """Run ``argv`` as a classic double-forked daemon (its own session, re-parented away from us); its pid."""
    read, write = os.pipe()
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(write, str(os.getpid()).encode())
            os.execvp(argv[0], argv)
        os._exit(0)
    os.waitpid(first, 0)
    os.close(write)
    pid = int(os.read(read, 64))
    os.close(read)
    return pid


async def main() -> None:
    if "--ignore-eof" in ARGS:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    await acp.run_agent(FakeAgent())
    if "--ignore-eof" in ARGS:
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
