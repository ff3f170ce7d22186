"""``tn.RayProvider``: child agents whose agent loop, model calls and user tools run on a Ray cluster.

The split, and why: a Ray child is a toh_nb child of the driver's tree (the notebook) whose *turn
lifecycle* stays in the driver — inbox, statuses, turn records, waiters, budgets' diagnostics,
authorization, notices, listing, tables, widget and session log are the service's, so every text and
behaviour is the same as with ``spawn`` and the driver stays the one writer of the store (cold resume
works as usual, and a resumed child may land on another node). The *steps* of each turn (model call,
tools, model call, …) run on a small pool of async host actors (``toh_nb.providers.ray.host``), each serving many
children as coroutines: one Ray call per turn streams the turn's records and events back in batches
(``toh_nb.providers.ray.remote`` replays them in the driver), rather than a round trip per model call and per
tool call. The host caches each child's conversation, so a request never ships it whole twice.

- the child's **model** is built on its host from a picklable factory;
- the child's **user tools** (plain Python functions, ``tools=[fn]``) run on its host, or as Ray tasks
  reserving ``child_resources`` (real Ray resource accounting for tool-heavy children);
- toh_nb's own tools (``subagent``, ``job_*``, ``send_message``, ``interrupt_agent``, ``list_agents``,
  ``report``) act on the driver's tree: the host yields their calls and the driver runs and answers them.

Cancelling a turn (interrupt, kill, timeout, ``hub.close()``) stops its loop on the host (an actor
method; ``ray.cancel`` if the host does not answer) and keeps what the host did before the stop; the
driver commits the abort records. A host that dies ends the
turn of each child it was serving with ``error`` and a diagnostic naming the host's node; everything
logged before stays (the driver logged it), and the next turn runs on another host.

A provider may be shared by several hubs: each registration counts (``attach``), each ``hub.close()``
releases one, and the last kills the pool's actors.

Secrets: ``env_vars=["OPENAI_API_KEY"]`` copies those variables from the driver's environment into the
hosts' Ray ``runtime_env`` (or pass ``runtime_env=`` yourself); they appear in no log, event or repr.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import weakref
from typing import Any, Callable, Mapping, Sequence

from ...core.checks import MAX_COUNT, check_count, check_number
from ...core.errors import ModelError, UsageError
from ...core.secrets import hold as hold_secrets
from ...core.threads import run_engine
from ...core.tools import FunctionTool
from ..base import Capabilities, ChildInfo, ChildPlan
from .host import TASK_OPTIONS
from .pool import HostPool, HostRecord, call_failed_text, host_died_text, import_ray
from .remote import RemoteSteps


def _dumps(obj: Any, what: str, advice: str) -> bytes:
    from ray import cloudpickle

    try:
        return cloudpickle.dumps(obj)
    except Exception as error:
        raise UsageError(f"RayProvider cannot send {what} to a Ray actor: it could not be pickled "
                         f"({type(error).__name__}: {error}); {advice}") from None


def _picklable(obj: Any) -> bool:
    from ray import cloudpickle

    try:
        cloudpickle.dumps(obj)
        return True
    except Exception:
        return False


class _Blob:
    """Something pickled (a model, a child shape) once: a run's setup carries it inline to each host once
    (``RayProvider._inline``); a model call for an in-process child puts it into Ray's object store once."""

    __slots__ = ("key", "data", "box", "keep")

    def __init__(self, data: bytes, keep: Any) -> None:
        self.key = hashlib.sha1(data).hexdigest()
        self.data = data
        self.box: list | None = None  # [ObjectRef], made after Ray is connected
        self.keep = keep  # the original object(s), so an id() a blob is cached under is never reused

    def sent(self, ray: Any) -> tuple:
        if self.box is None:
            self.box = [ray.put(self.data)]
        return self.key, self.box


def check_task_options(options: Any, what: str = "child_resources") -> dict | None:
    """Ray task options for a child's user tool calls: a dict of ``num_cpus``/``num_gpus``/``memory``/
    ``resources``, or None."""
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise UsageError(f"{what} must be a dict of Ray task options ({', '.join(TASK_OPTIONS)}), got {options!r}")
    unknown = sorted(set(options) - set(TASK_OPTIONS))
    if unknown:
        raise UsageError(f"{what} names {', '.join(map(repr, unknown))}; allowed: {', '.join(TASK_OPTIONS)}")
    for key, value in options.items():
        if key == "resources":
            if not isinstance(value, Mapping) or not all(isinstance(v, (int, float)) and v >= 0 for v in value.values()):
                raise UsageError(f"{what}['resources'] must map resource names to amounts >= 0, got {value!r}")
        else:
            check_number(value, f"{what}['{key}']", unit="", none=None, maximum=MAX_COUNT)
    return {k: (dict(v) if k == "resources" else v) for k, v in options.items()} or None


class RayProvider:
    """Children whose turns' steps run in a pool of Ray actors: model calls and user tools on a cluster (extra ``ray``).

    A Ray child is an ordinary child of the notebook's tree (listing, messages, interrupts, tables, the
    widget and the store behave as with ``spawn``); its agent loop runs on a small pool of async *host
    actors*, each serving many children as coroutines. toh_nb's own tools (``subagent``, job and control
    tools) still act on the notebook's tree. The provider connects at first use, never on import.

    Args:
        model: what the hosts run: a model object or a zero-argument factory returning one, pickled
            (cloudpickle: importable callables by reference, notebook functions by value). ``None``: the
            model the child would use in-process (its ``model=`` option, else its parent's), which must
            pickle.
        address: an existing cluster (``"ray://head:10001"``, ``"auto"``); ``None`` connects to the cluster
            this process is already connected to, else starts a local one.
        host_actors: the pool size.
        num_cpus: CPUs each host actor reserves (Ray places hosts on nodes that have them).
        resources: custom Ray resources each host actor reserves.
        env_vars: names of variables copied from this process's environment into the hosts'
            ``runtime_env`` (or a dict of names and values); they appear in no log, event or repr.
        runtime_env: Ray's ``runtime_env`` for the hosts (``{"pip": [...], "working_dir": "..."}``).
        max_concurrency: calls one host actor runs at once.
        init_options: keyword arguments for ``ray.init`` when the provider connects or starts a cluster.
        spread: place the host actors over the cluster's live nodes, each new host on the node with the
            fewest (a node affinity; nodes whose resources cannot hold a host's ``num_cpus``/``resources``
            are left out, and if none can, Ray places it), instead of wherever Ray packs them. Children go
            to the least-loaded live host, so with ``host_actors`` at least the number of nodes every node
            runs children; the children of a node that leaves continue on the other nodes' hosts at their
            next turn.
        child_resources: what each *user tool call* of a child reserves: a dict of Ray task options
            (``{"num_cpus": 1}``, ``num_gpus``, ``memory``, ``resources``), or a function of the child's
            ``ChildInfo`` returning one or ``None``; such calls run as Ray tasks scheduled wherever those
            resources are free (other children's tools stay on their host, in threads).
        name: the provider's name.

    Raises:
        UsageError: the ``ray`` extra is missing (naming it), a count or resource is out of range,
            ``address`` is not a string, ``env_vars`` names a variable that is not set, ``model`` is neither a
            model nor a factory, or (at ``spawn``/``start``) something the hosts need cannot be pickled.
        ModelError: (ending that child's turn ``error``) a host actor or its node died during a call; the
            diagnostic names the host and node.
    """

    capabilities = Capabilities()

    def __init__(self, model: Any = None, *, address: str | None = None, host_actors: int = 2,
                 num_cpus: float = 0, resources: Mapping[str, float] | None = None,
                 env_vars: Sequence[str] | Mapping[str, str] = (), runtime_env: Mapping[str, Any] | None = None,
                 max_concurrency: int = 10_000, init_options: Mapping[str, Any] | None = None,
                 child_resources: Mapping[str, Any] | Callable[[ChildInfo], Any] | None = None,
                 spread: bool = False, name: str = "ray") -> None:
        import_ray()
        check_count(host_actors, "host_actors")
        check_count(max_concurrency, "max_concurrency")
        check_number(num_cpus, "num_cpus", unit="", none=None, maximum=MAX_COUNT)
        if not isinstance(spread, bool):
            raise UsageError(f"spread must be True or False, got {spread!r}")
        if address is not None and not isinstance(address, str):
            raise UsageError(f"address must be a string such as 'auto' or 'ray://host:10001', got {address!r}")
        self.name = name
        self.address = address
        self.host_actors = host_actors
        self._env_vars = self._check_env(env_vars)
        self._runtime_env = dict(runtime_env or {})
        self._child_resources = child_resources if callable(child_resources) else check_task_options(child_resources)
        self._model_blob = None if model is None else self._blob_of_model(model)
        self._blobs: dict[int, _Blob] = {}  # id(model) -> its blob
        self._checked: dict[int, Any] = {}  # id(user function) -> the function, known to pickle
        self._shapes: dict[tuple, _Blob] = {}  # a child shape (system prompt, tools) -> its blob
        self._hosted: dict[str, tuple[HostRecord, int]] = {}  # child -> (host, conversation messages it holds)
        self._forget: dict[HostRecord, list[str]] = {}  # finished one-shot children a host may drop
        self._cancelling: set = set()  # cancelled streams whose loops are still unwinding on a host
        self._hubs = 0
        self._secrets: Callable[[], None] | None = None  # releases the env_vars values (toh_nb.core.secrets)
        self._hub_numbers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # runtime -> its number here
        #: Ray calls the driver made (a turn's stream, a forwarded message, a tool answer): what the
        #: remote step loop saves is a call per model request and per tool call
        self.round_trips = 0
        #: conversation messages sent to hosts (each is sent once per host; a cut turn sends all again)
        self.messages_sent = 0
        actor_options: dict[str, Any] = {"num_cpus": num_cpus, "max_concurrency": max_concurrency}
        if resources:
            actor_options["resources"] = dict(resources)
        self.spread = spread
        self._actor_options = actor_options
        #: the host actors and which child runs on which (``placement``); read it, never change it
        self.pool = HostPool(size=host_actors, address=address, init_options=dict(init_options or {}),
                             actor_options=actor_options, spread=spread)

    def __repr__(self) -> str:  # no runtime_env: it may hold secrets
        spread = ", spread=True" if self.spread else ""
        return f"RayProvider(name={self.name!r}, address={self.address!r}, host_actors={self.host_actors}{spread})"

    # -- what crosses the process boundary -------------------------------------------------------

    @staticmethod
    def _check_env(env_vars: Any) -> Any:
        if isinstance(env_vars, Mapping):
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()):
                raise UsageError("env_vars must map variable names to string values")
            return dict(env_vars)
        if isinstance(env_vars, str) or not all(isinstance(n, str) for n in env_vars):
            raise UsageError(f"env_vars must be a list of variable names or a dict, got {env_vars!r}")
        return list(env_vars)

    def _host_runtime_env(self) -> dict:
        env = dict(self._env_vars) if isinstance(self._env_vars, dict) else {}
        for name in self._env_vars if isinstance(self._env_vars, list) else ():
            if name not in os.environ:
                raise UsageError(f'env_vars names "{name}", which is not set in this process\'s environment')
            env[name] = os.environ[name]
        runtime_env = dict(self._runtime_env)
        if env:
            runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}), **env}
        return runtime_env

    def _blob_of_model(self, model: Any) -> _Blob:
        if not callable(getattr(model, "request", None)) and not callable(model):
            raise UsageError(f"RayProvider model must be a model object or a zero-argument factory, got "
                             f"{type(model).__name__}")
        data = _dumps(model, f"the model ({type(model).__name__})",
                      "pass RayProvider(model=...) a factory defined at module level, or a picklable model")
        return _Blob(data, model)

    def _child_model_blob(self, child: ChildInfo) -> _Blob:
        if self._model_blob is not None:
            return self._model_blob
        if child.model is None:
            raise UsageError("RayProvider(model=None) needs the child's model; pass RayProvider(model=...)")
        blob = self._blobs.get(id(child.model))
        if blob is None:
            blob = self._blobs[id(child.model)] = self._blob_of_model(child.model)
        return blob

    def _check_tool(self, tool: Any) -> Any:
        """``wrap_tool``: a user function tool must pickle (it runs on the host); every tool stays as it is
        in the driver, where only toh_nb's own tools are ever dispatched (for the host)."""
        if isinstance(tool, FunctionTool) and id(tool.function) not in self._checked:
            fn = tool.function
            _dumps(fn, f'the tool "{tool.name}" ({getattr(fn, "__qualname__", type(fn).__name__)})',
                   "define it at module level (or in the notebook), without unpicklable state")
            self._checked[id(fn)] = fn
        return tool

    def _resources_of(self, child: ChildInfo) -> dict | None:
        chosen = self._child_resources
        if callable(chosen):
            chosen = check_task_options(chosen(child), "child_resources(child)")
        return chosen

    # -- the provider protocol -------------------------------------------------------------------

    def attach(self) -> None:
        """A hub registered this provider (its ``close`` calls ``aclose``; the last one kills the pool)."""
        self._hubs += 1
        if self._secrets is None:  # the env_vars values stay out of the HTTP libraries' logs meanwhile
            listed = self._env_vars.values() if isinstance(self._env_vars, dict) else [
                os.environ.get(name) for name in self._env_vars]
            given = self._runtime_env.get("env_vars")
            self._secrets = hold_secrets([*listed, *(given.values() if isinstance(given, Mapping) else ())])

    async def plan(self, child: ChildInfo) -> ChildPlan:
        blob = self._child_model_blob(child)  # refused here, before anything is created
        if child.request is not None:
            for tool in child.request.parent.runtime.tools:
                self._check_tool(tool)
        resources = self._resources_of(child)
        if not self.pool.ready:
            if self.pool.actor_options.get("runtime_env") is None:
                runtime_env = self._host_runtime_env()
                if runtime_env:
                    self.pool.actor_options["runtime_env"] = runtime_env
            await run_engine(self.pool.ensure)
        one_shot = child.mode == "one-shot"
        link = RemoteSteps(self, child.id, self.key_of(child), blob, resources, child.mode)

        async def close() -> None:
            key = link.key
            if one_shot:  # never resumed: its host may drop its copy (told with its next run)
                self.forget_sync(key)
                host = self.pool.placement.get(key)
                if host is not None:
                    self._forget.setdefault(host, []).append(key)
                self.pool.release(key)

        return ChildPlan(model=link, close=close, wrap_tool=self._check_tool, steps=link)

    async def resume(self, child: ChildInfo, session: Any) -> ChildPlan:
        """The log is the whole state: a resumed child gets a host (any node) and goes on."""
        return await self.plan(child)

    async def aclose(self) -> None:
        """Kill every host actor (``hub.close()``): no actor is left behind. Shared by several hubs, the
        provider keeps its pool until the last of them closes."""
        self._hubs -= 1
        if self._hubs > 0:
            return
        self._hubs = 0
        if self._secrets is not None:
            self._secrets()
            self._secrets = None
        cancelling, self._cancelling = list(self._cancelling), set()
        await run_engine(self.pool.close, cancelling)
        self._hosted.clear()
        self._forget.clear()
        for blob in [self._model_blob, *self._blobs.values(), *self._shapes.values()]:
            if blob is not None:
                blob.box = None

    # -- what a RemoteSteps asks of its provider ----------------------------------------------------

    def ray(self) -> Any:
        return import_ray()

    def key_of(self, child: ChildInfo) -> str:
        """A child's name on the hosts: its id and its hub (a provider shared by hubs sees two ``agent-1``)."""
        if child.hub is None:  # a ChildInfo made without its hub (one hub only)
            return f"{child.id}@0"
        hub = self._hub_numbers.get(child.hub)
        if hub is None:
            hub = self._hub_numbers[child.hub] = len(self._hub_numbers) + 1
        return f"{child.id}@{hub}"

    async def host_for(self, key: str) -> HostRecord:
        host = self.pool.host_of(key)
        if host is None:  # every host died (or the pool was closed): refill it
            await run_engine(self.pool.ensure)
            host = self.pool.host_of(key)
        return host

    def payload(self, link: RemoteSteps, agent: Any, state: Any, host: HostRecord, whole: bool) -> dict:
        """What one turn's run needs: the child's setup and whole conversation when the host lacks them
        (first turn there, a resume, a cut turn), else only the messages it has not seen. ``agent``: the
        child's ``TurnContext`` (``toh_nb.core.steps``)."""
        messages = agent.messages
        length = len(messages)
        hosted = self._hosted.pop(link.key, None)  # until this run ends cleanly
        setup = None
        if whole or hosted is None or hosted[0] is not host or hosted[1] > length:
            setup = {"id": agent.id, "shape": self._inline(host, self._shape_of(agent), whole),
                     "model": self._inline(host, link.model_blob, whole),
                     "label": agent.label, "depth": agent.depth, "path": agent.path,
                     "parent_id": agent.who()["parent_id"], "max_tokens": agent.max_tokens, "mode": link.mode,
                     "max_parallel": agent.max_parallel_tool_calls, "resources": link.resources}
            sent = messages[0:]
        else:
            sent = messages[hosted[1]:]
        self.messages_sent += len(sent)
        next_step, steer = agent.queued()
        return {"setup": setup, "messages": sent, "turn": state.turn, "wanted": agent.bus.wanted,
                "next_step": next_step, "steer": steer,
                "max_steps": agent.limits.max_steps, "budgeted": agent.budgeted(),
                "forget": self._forget.pop(host, [])}

    @staticmethod
    def _inline(host: HostRecord, blob: _Blob, whole: bool) -> tuple:
        """A blob as a run's setup carries it: ``(key, bytes)`` the first time this host is sent it (or when
        the run is sent whole), ``(key, None)`` after — the host builds it once and keeps it. Inline rather
        than through Ray's object store: an ObjectRef inside an argument makes the host a borrower of it,
        which costs Ray calls on every run that carries one."""
        if whole or blob.key not in host.blobs:
            host.blobs.add(blob.key)
            return blob.key, blob.data
        return blob.key, None

    def forget_host_blobs(self, host: HostRecord) -> None:
        """A host answered that it lacks a child's state: send it every blob again."""
        host.blobs.clear()

    def _shape_of(self, agent: Any) -> _Blob:
        """The system prompt and tools of a child, pickled once per shape (children of one shape share it)."""
        tools = agent.tools
        key = (id(agent.tool_specs), agent.system, tuple(id(t) for t in tools.values()))
        blob = self._shapes.get(key)
        if blob is None:
            entries = []
            for name, tool in tools.items():
                if isinstance(tool, FunctionTool):
                    entries.append(("local", name, tool.function, tool.description, tool.concurrency_safe))
                elif _picklable((tool.args_model, tool.concurrency_safe)):
                    entries.append(("proxy", name, tool.description, tool.args_model, tool.parameters,
                                    tool.concurrency_safe))
                else:  # validated by the driver instead; runs alone
                    entries.append(("proxy", name, tool.description, None, tool.parameters, False))
            data = _dumps((agent.system, agent.tool_specs, entries), "the child's tools", "")
            blob = self._shapes[key] = _Blob(data, (agent.tool_specs, list(tools.values())))
        return blob

    async def ask_model(self, link: RemoteSteps, request: Any) -> Any:
        ray = import_ray()
        host = await self.host_for(link.key)
        ref = host.actor.request.remote(link.model_blob.sent(ray), request)
        self.round_trips += 1
        try:
            ok, value = await ref
        except asyncio.CancelledError:
            self.cancelled_call(ref)
            raise
        except ray.exceptions.RayActorError as error:
            raise ModelError(self.host_died(host, error)) from None
        except ray.exceptions.RayError as error:
            raise ModelError(call_failed_text(host, error)) from None
        if ok:
            return value
        raise value

    def synced(self, key: str, host: HostRecord, messages: int) -> None:
        self._hosted[key] = (host, messages)

    def forget_sync(self, key: str) -> None:
        self._hosted.pop(key, None)

    def count_round_trip(self) -> None:
        self.round_trips += 1

    def call(self, host: HostRecord, method: str, *args: Any) -> None:
        """A one-way call to a host (its answer is not awaited: a dead host fails the turn's stream)."""
        self.round_trips += 1
        getattr(host.actor, method).remote(*args)

    def cancelled(self, stream: Any) -> None:
        """A turn's stream cancelled: reach its loop on the host; ``aclose`` waits for it to unwind."""
        import_ray().cancel(stream)
        self._cancelling.add(stream.completed())

    def cancelled_call(self, ref: Any) -> None:
        import_ray().cancel(ref)
        self._cancelling.add(ref)

    def host_died(self, host: HostRecord, error: BaseException) -> str:
        self.pool.mark_dead(host)
        for key in [k for k, (h, _) in self._hosted.items() if h is host]:
            del self._hosted[key]
        self._forget.pop(host, None)
        return host_died_text(host, error)
