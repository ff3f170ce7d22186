"""``tn.AcpAgent``: a subagent provider whose children are external agents speaking ACP.

An ACP child is an ordinary toh_nb child (same id, tree, tables, ``subagent`` result texts, job tools,
``send_message``/``interrupt_agent``) whose *model* is an adapter to an ACP session: one child turn is
one ``session/prompt``, a cancelled turn sends ``session/cancel``, the answer is the agent's message
chunks. The agent brings its own tools (``own_tools``) and manages its own depth. Everything it streams
is recorded into the child's transcript as ``external/<kind>`` events and onto the event bus.

One process and ACP session per activation: a one-shot child's run, or a continuable child's stretch
of turns until it settles. A later message to a settled continuable child resumes it with
``session/load`` (the ACP session id is kept in the child's own log as an ``external/session`` event),
across hub restarts too, when the agent advertises ``loadSession``; otherwise the message is refused
with ``NOT_RESUMABLE`` and the reason. A child whose agent never opened a session (it failed to start)
simply starts one, and its undelivered messages go with the next prompt.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from typing import Any, Mapping, Sequence

from ...core.checks import check_count, check_number
from ...core.secrets import hold as hold_secrets
from ...core.errors import SubagentError, UsageError
from ...core.model import ModelRequest, ModelResponse
from ..base import Capabilities, ChildInfo, ChildPlan
from .link import SESSION_RECORD, AgentLink, acp_sdk
from .permissions import PermissionPolicy
from .workspace import MAX_READ_BYTES, checked_directory

#: the session-event kind of the sidecar (what ChildInfo.record writes for SESSION_RECORD)
SESSION_EVENT = "external/" + SESSION_RECORD


def _seconds(value: Any, name: str, allow_none: bool = False) -> float | None:
    return check_number(value, name, positive=True, none="no limit" if allow_none else None)


class AcpModel:
    """The child's model: each request is one prompt on the link's ACP session.

    A prompt carries only the user messages the agent has not been sent yet: the agent keeps its own
    history, and a message whose turn failed (a crash mid-prompt) was already delivered to it, so it is
    not sent a second time with the next one. ``already_sent``: a resumed child's logged messages."""

    #: the tokens of a prompt are the external agent's own model calls, which ACP does not report: a
    #: prompt counts nothing against token budgets and reserves nothing (a spent budget on the child's
    #: path still stops its next prompt; see toh_nb.core.budget)
    reports_usage = False

    def __init__(self, link: AgentLink, already_sent: Sequence[Any] = ()) -> None:
        self.link = link
        #: the route name descriptors and tables show
        self.name = f"acp:{os.path.basename(link.command[0])}"
        self._sent: dict[int, Any] = {id(message): message for message in already_sent}  # keeps ids unique

    async def request(self, request: ModelRequest) -> ModelResponse:
        fresh = []
        for message in reversed(request.messages):
            if message.role == "assistant" or id(message) in self._sent:
                break
            if message.role == "user":
                fresh.append(message)
        fresh.reverse()
        for message in fresh:
            self._sent[id(message)] = message
        try:
            return await self.link.prompt("\n\n".join(m.text for m in fresh if m.text))
        except BaseException:
            if not self.link.delivered:  # the agent never got them (it did not start): send them next time
                for message in fresh:
                    self._sent.pop(id(message), None)
            raise


class AcpAgent:
    """An external agent over the Agent Client Protocol as a subagent provider (extra ``acp``).

    Any ACP agent (fast-agent, opencode, Claude Code, Gemini CLI, or ``python -m toh_nb acp``) becomes a
    provider: ``tn.Hub(providers={"coder": tn.AcpAgent([...])})``. Its children are ordinary children of
    the tree; their "model" is an ACP session in an agent process toh_nb starts (one per activation) and
    owns, with its whole process tree, until the child is disposed. One child turn is one
    ``session/prompt``; the agent brings its own tools and manages its own depth, so a persona or a tool
    filter for it is refused.

    Args:
        command: the agent's argv, a list of arguments run without a shell
            (``["opencode", "acp", "--pure"]``).
        env: variables added to (``inherit_env=True``, default) or replacing the environment; values never
            appear in reprs, logs or diagnostics.
        cwd: the agent's workspace, an absolute directory path. ``None``: each child gets a fresh temporary
            directory (never the notebook's working directory by accident), removed when the child is done:
            a one-shot child's at the end of its run, a continuable child's at ``hub.close()`` (a later hub
            cannot resume that child: its workspace is gone).
        permissions: ``"deny"`` (default), ``"allow"``, a collection of ACP tool kinds to allow
            (``{"read", "edit"}``), a callable ``(PermissionRequest) -> bool | option id`` (sync or async),
            or ``"ask"`` / ``AskUser(timeout)``: the notebook user answers in ``hub.tree()`` (denied on
            timeout).
        timeout: seconds for each protocol step (start and initialize, ``session/new``, ``session/load``,
            and the acknowledgement of a cancel).
        name: the provider's name; ``None``: the key it is registered under in ``providers=``.
        prompt_timeout: seconds for a whole prompt (default none: the hub's ``turn_timeout`` bounds turns).
        inherit_env: whether the agent inherits the notebook's environment (plus ``env``).
        eof_grace: seconds disposal waits after closing the agent's stdin before SIGTERM.
        kill_grace: seconds disposal waits after SIGTERM before SIGKILL of the process tree.
        max_read_bytes: bytes of a file one ``fs/read_text_file`` of the agent may read at most (default
            16 MiB, :data:`toh_nb.providers.acp.workspace.MAX_READ_BYTES`); a request that would read
            more is refused with a text naming this limit. Only the lines asked for are read.

    Raises:
        UsageError: the ``acp`` extra is missing (naming it), ``command`` is not a non-empty list of
            non-empty strings, ``env`` is not a mapping of str to str, ``cwd`` is not an existing absolute
            directory, ``permissions`` is not a policy, a timeout is out of range, or ``name`` is empty.
    """

    capabilities = Capabilities(continuable=True, persona=False, tool_filter=False, depth_limit=False)

    def __init__(self, command: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None,
                 permissions: Any = "deny", timeout: float = 60.0, name: str | None = None, *,
                 prompt_timeout: float | None = None, inherit_env: bool = True, eof_grace: float = 6.0,
                 kill_grace: float = 3.0, max_read_bytes: int = MAX_READ_BYTES) -> None:
        acp_sdk()  # the SDK is there (a clear error naming the extra, now rather than at the first turn)
        if isinstance(command, (str, bytes)) or not isinstance(command, Sequence) or not command:
            raise UsageError(f"command must be a non-empty list of arguments (no shell), got {command!r}")
        if not all(isinstance(part, str) and part for part in command):
            raise UsageError(f"command arguments must be non-empty strings, got {list(command)!r}")
        if env is not None and (not isinstance(env, Mapping)
                                or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
            raise UsageError("env must be a mapping of str to str")
        self.command = list(command)
        self._env = dict(env or {})
        self.inherit_env = bool(inherit_env)
        self.cwd = None if cwd is None else checked_directory(cwd)
        self.policy = PermissionPolicy(permissions)
        self.timeout = _seconds(timeout, "timeout")
        self.prompt_timeout = _seconds(prompt_timeout, "prompt_timeout", allow_none=True)
        self.eof_grace = _seconds(eof_grace, "eof_grace")
        self.kill_grace = _seconds(kill_grace, "kill_grace")
        self.max_read_bytes = check_count(max_read_bytes, "max_read_bytes", note="bytes")
        if name is not None and (not isinstance(name, str) or not name):
            raise UsageError(f"name must be a non-empty string, got {name!r}")
        self.name = name  # the hub names it after its registration key when None
        #: every link opened, newest last (tests and diagnostics read pids from here)
        self.links: list[AgentLink] = []
        #: temporary workspaces made for ``cwd=None`` children and not removed yet
        self.temp_dirs: set[str] = set()
        self._hubs = 0
        self._secrets: Any = None  # releases the env values (toh_nb.core.secrets)

    def __repr__(self) -> str:
        env = f", env=<{len(self._env)} variables>" if self._env else ""
        return (f"AcpAgent({shlex.join(self.command)!r}{env}, cwd={self.cwd!r}, "
                f"permissions={self.policy.describe()!r})")

    def environment(self) -> dict[str, str]:
        base = dict(os.environ) if self.inherit_env else {}
        base.update(self._env)
        return base

    # -- the Provider protocol -------------------------------------------------------------------

    def _link(self, child: ChildInfo, cwd: str, session_id: str | None = None,
              already_sent: Sequence[Any] = ()) -> ChildPlan:
        link = AgentLink(command=self.command, env=self.environment(), cwd=cwd, policy=self.policy,
                         timeout=self.timeout, prompt_timeout=self.prompt_timeout, eof_grace=self.eof_grace,
                         kill_grace=self.kill_grace, max_read_bytes=self.max_read_bytes,
                         record=child.record, session_id=session_id,
                         agent_id=child.id, mcp_servers=[server.acp_entry() for server in child.mcp_servers],
                         ask=child.ask if child.desk is not None else None)
        self.links.append(link)
        close = link.close
        if cwd in self.temp_dirs and child.mode == "one-shot":  # nobody comes back to a one-shot's workspace
            async def close() -> None:
                try:
                    await link.close()
                finally:
                    self._remove_temp(cwd)
        return ChildPlan(model=AcpModel(link, already_sent), own_tools=True, close=close)

    async def plan(self, child: ChildInfo) -> ChildPlan:
        if self.cwd is not None:
            cwd = checked_directory(self.cwd)  # it may have gone since construction
        else:
            cwd = tempfile.mkdtemp(prefix=f"toh_nb-acp-{child.id}-")
            self.temp_dirs.add(cwd)
        return self._link(child, cwd)

    def _remove_temp(self, path: str) -> None:
        self.temp_dirs.discard(path)
        shutil.rmtree(path, ignore_errors=True)

    def attach(self) -> None:
        """A hub registered this agent. A provider shared by hubs cleans up at the last close; until then
        its ``env`` values stay out of the HTTP libraries' logs (toh_nb.core.secrets)."""
        self._hubs += 1
        if self._secrets is None:
            self._secrets = hold_secrets(self._env.values())

    async def aclose(self) -> None:
        """At ``hub.close()`` (every child disposed), once the last hub using this provider closes: remove
        the temporary workspaces still kept for continuable children and release the ``env`` values."""
        self._hubs = max(0, self._hubs - 1)
        if self._hubs == 0:
            for path in sorted(self.temp_dirs):
                self._remove_temp(path)
            if self._secrets is not None:
                self._secrets()
                self._secrets = None

    def _resume_refusal(self, record: dict) -> str | None:
        """Why a child with this session record cannot resume (None: it can)."""
        if not record.get("load_session"):
            return (f"cannot resume: its ACP agent `{record.get('command') or shlex.join(self.command)}` "
                    "does not support session/load")
        try:
            checked_directory(record.get("cwd"))
        except UsageError as error:
            return f"cannot resume: its workspace is gone ({error})"
        return None

    def resume_problem(self, child_id: str, store: Any) -> str | None:
        """For its ``list_agents`` row: why a settled child could not resume (None: it can)."""
        record = last_session_record(store.open(child_id).events)
        return None if record is None else self._resume_refusal(record)

    async def resume(self, child: ChildInfo, session: Any) -> ChildPlan:
        record = last_session_record(session.events)
        if record is None:  # the agent never got anything (it never started): begin its session now
            return await self.plan(child)
        refusal = self._resume_refusal(record)
        if refusal is not None:
            raise SubagentError(f'subagent "{child.id}" {refusal}', "NOT_RESUMABLE")
        cwd = checked_directory(record.get("cwd"))
        logged = [event.message for event in session.events if event.message is not None]
        return self._link(child, cwd, session_id=record["session_id"], already_sent=logged)


def last_session_record(events: Sequence[Any]) -> dict | None:
    """The newest ``external/session`` sidecar in a child's log."""
    for event in reversed(events):
        if event.kind == SESSION_EVENT and isinstance(event.data, dict) and event.data.get("session_id"):
            return event.data
    return None
