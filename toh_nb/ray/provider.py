"""``tn.RayProvider``: child agents whose model calls and user tools run on a Ray cluster.

The split, and why: a Ray child is an ordinary toh_nb child in the driver (the notebook). Its inbox,
turns, budgets, authorization, notices, listing, tables, widget and session log are the service's, so
every text and behaviour is the same as with ``spawn`` and the driver stays the one writer of the
store (cold resume works as usual, and a resumed child may land on another node). What is *work* runs
remotely, on a small pool of async host actors (``toh_nb.ray.host``):

- the child's **model**: its plan's model is an adapter whose every request is answered on the child's
  host by the user's model, built there from a picklable factory;
- the child's **user tools** (plain Python functions, ``tools=[fn]``): each call is shipped to the host.

toh_nb's own tools (``subagent``, ``job_*``, ``send_message``, ``interrupt_agent``, ``list_agents``,
``report``) act on the driver's tree, so they stay in the driver. Cancelling a turn (interrupt, kill,
timeout, ``hub.close()``) cancels the awaited Ray task with ``ray.cancel``, which cancels the coroutine
on the host. A host that dies ends the turn of each child it was serving with ``error`` and a
diagnostic naming the host's node; everything logged before stays (the driver logged it).

Secrets: ``env_vars=["OPENAI_API_KEY"]`` copies those variables from the driver's environment into the
hosts' Ray ``runtime_env`` (or pass ``runtime_env=`` yourself); they appear in no log, event or repr.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
from typing import Any, Awaitable, Callable, Mapping, Sequence

from ..core.checks import is_int_at_least
from ..core.errors import ModelError, UsageError
from ..core.tools import FunctionTool, Tool
from ..subagents.provider import Capabilities, ChildInfo, ChildPlan
from .pool import HostPool, HostRecord, import_ray


def host_died_text(host: HostRecord, error: BaseException) -> str:
    """The diagnostic of a turn whose host actor (or its node) died mid-call."""
    return f"the Ray {host.describe()} died during this call ({type(error).__name__})"


def _dumps(obj: Any, what: str, advice: str) -> bytes:
    from ray import cloudpickle

    try:
        return cloudpickle.dumps(obj)
    except Exception as error:
        raise UsageError(f"RayProvider cannot send {what} to a Ray actor: it could not be pickled "
                         f"({type(error).__name__}: {error}); {advice}") from None


class _Blob:
    """A pickled model or function, put into Ray's object store once and fetched by each host once."""

    __slots__ = ("key", "data", "box", "keep")

    def __init__(self, data: bytes, keep: Any) -> None:
        self.key = hashlib.sha1(data).hexdigest()
        self.data = data
        self.box: list | None = None  # [ObjectRef], made after Ray is connected
        self.keep = keep  # the original object, so the id() it is cached under is never reused


class RayModel:
    """A Ray child's model in the driver: each request is answered on the child's host actor."""

    __slots__ = ("call", "lost", "child_id", "blob")

    def __init__(self, child_id: str, blob: _Blob, call: Callable[..., Awaitable[Any]], lost: dict[str, str]) -> None:
        self.child_id = child_id
        self.blob = blob
        #: the provider's host call and its record of hosts lost during a tool call (given, not reached into)
        self.call = call
        self.lost = lost

    async def request(self, request: Any) -> Any:
        lost = self.lost.pop(self.child_id, None)
        if lost is not None:  # its host died during one of this turn's tool calls
            raise ModelError(lost)
        # the conversation as a plain list; the hub's delta publisher stays in the driver (not picklable)
        payload = dataclasses.replace(request, messages=list(request.messages), on_delta=None)
        return await self.call(self.child_id, "request", self.blob, payload)


class RayProvider:
    """Children whose model calls and user tools run in a pool of Ray actors (see the module docstring).

    ``model``: what the hosts run: a model object or a zero-argument factory returning one, pickled
    (cloudpickle: importable callables by reference, notebook functions by value). ``None``: the model
    the child would use in-process (its ``model=`` option, else its parent's), which must pickle.
    ``address``: an existing cluster (``"ray://head:10001"``, ``"auto"``); ``None`` connects to the
    cluster this process is already connected to, else starts a local one (at first use, never on
    import). ``host_actors``: the pool size. ``num_cpus``/``resources``: what each host actor reserves
    (Ray places hosts on nodes that have it; tool-heavy children want CPUs). ``max_concurrency``: calls
    one host runs at once.
    """

    capabilities = Capabilities()

    def __init__(self, model: Any = None, *, address: str | None = None, host_actors: int = 2,
                 num_cpus: float = 0, resources: Mapping[str, float] | None = None,
                 env_vars: Sequence[str] | Mapping[str, str] = (), runtime_env: Mapping[str, Any] | None = None,
                 max_concurrency: int = 10_000, init_options: Mapping[str, Any] | None = None,
                 name: str = "ray") -> None:
        import_ray()
        if not is_int_at_least(host_actors, 1):
            raise UsageError(f"host_actors must be an integer >= 1, got {host_actors!r}")
        if not is_int_at_least(max_concurrency, 1):
            raise UsageError(f"max_concurrency must be an integer >= 1, got {max_concurrency!r}")
        if isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float)) or num_cpus < 0:
            raise UsageError(f"num_cpus must be a number >= 0, got {num_cpus!r}")
        if address is not None and not isinstance(address, str):
            raise UsageError(f"address must be a string such as 'auto' or 'ray://host:10001', got {address!r}")
        self.name = name
        self.address = address
        self.host_actors = host_actors
        self._env_vars = self._check_env(env_vars)
        self._runtime_env = dict(runtime_env or {})
        self._model_blob = None if model is None else self._blob_of_model(model)
        self._blobs: dict[int, _Blob] = {}  # id(model or function) -> its blob
        self._tools: dict[int, Tool] = {}  # id(user FunctionTool) -> its remote twin
        self._lost: dict[str, str] = {}  # child id -> diagnostic of a host lost during a tool call
        self._cancelling: set = set()  # cancelled calls whose coroutines are still unwinding on a host
        actor_options: dict[str, Any] = {"num_cpus": num_cpus, "max_concurrency": max_concurrency}
        if resources:
            actor_options["resources"] = dict(resources)
        self._actor_options = actor_options
        self._pool = HostPool(size=host_actors, address=address, init_options=dict(init_options or {}),
                              actor_options=actor_options)

    def __repr__(self) -> str:  # no runtime_env: it may hold secrets
        return f"RayProvider(name={self.name!r}, address={self.address!r}, host_actors={self.host_actors})"

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

    def _blob_for(self, obj: Any, make) -> _Blob:
        blob = self._blobs.get(id(obj))
        if blob is None:
            blob = make(obj)
            self._blobs[id(obj)] = blob
        return blob

    def _function_blob(self, tool: FunctionTool) -> _Blob:
        def make(fn: Any) -> _Blob:
            data = _dumps(fn, f'the tool "{tool.name}" ({getattr(fn, "__qualname__", type(fn).__name__)})',
                          "define it at module level (or in the notebook), without unpicklable state")
            return _Blob(data, fn)

        return self._blob_for(tool.function, make)

    def _child_model_blob(self, child: ChildInfo) -> _Blob:
        if self._model_blob is not None:
            return self._model_blob
        if child.model is None:
            raise UsageError("RayProvider(model=None) needs the child's model; pass RayProvider(model=...)")
        return self._blob_for(child.model, self._blob_of_model)

    def _user_tools(self, child: ChildInfo) -> list[FunctionTool]:
        request = child.request
        if request is None:
            return []
        return [t for t in request.parent.runtime.tools if isinstance(t, FunctionTool)]

    # -- the provider protocol -------------------------------------------------------------------

    async def plan(self, child: ChildInfo) -> ChildPlan:
        blob = self._child_model_blob(child)  # refused here, before anything is created
        for tool in self._user_tools(child):
            self._function_blob(tool)
        if not self._pool.ready:
            if self._pool.actor_options.get("runtime_env") is None:
                runtime_env = self._host_runtime_env()
                if runtime_env:
                    self._pool.actor_options["runtime_env"] = runtime_env
            await asyncio.to_thread(self._pool.ensure)
        child_id = child.id

        async def close() -> None:
            self._pool.release(child_id)
            self._lost.pop(child_id, None)

        return ChildPlan(model=RayModel(child_id, blob, self._call, self._lost), close=close, wrap_tool=self._wrap_tool)

    async def resume(self, child: ChildInfo, session: Any) -> ChildPlan:
        """The log is the whole state: a resumed child gets a host (any node) and goes on."""
        return await self.plan(child)

    async def aclose(self) -> None:
        """Kill every host actor (``hub.close()``): no actor is left behind."""
        cancelling, self._cancelling = list(self._cancelling), set()
        await asyncio.to_thread(self._pool.close, cancelling)
        for blob in [self._model_blob, *self._blobs.values()]:
            if blob is not None:
                blob.box = None

    # -- remote execution ------------------------------------------------------------------------

    def _wrap_tool(self, tool: Any) -> Any:
        """A user function tool runs on the child's host; toh_nb's own tools stay in the driver."""
        if not isinstance(tool, FunctionTool):
            return tool
        twin = self._tools.get(id(tool))
        if twin is None:
            blob = self._function_blob(tool)
            names = tuple(tool.args_model.model_fields)
            provider = self

            async def run_remotely(ctx: Any, args: Any) -> Any:
                return await provider._call(ctx.agent.id, "call", blob, {k: getattr(args, k) for k in names})

            twin = Tool(tool.name, tool.description, tool.args_model, run_remotely, render=tool.render,
                        concurrency_safe=tool.concurrency_safe, guidance=tool.guidance,
                        guidance_order=tool.guidance_order, parameters=tool.parameters)
            self._tools[id(tool)] = twin
        return twin

    async def _call(self, child_id: str, method: str, blob: _Blob, payload: Any) -> Any:
        ray = import_ray()
        host = self._pool.host_of(child_id)
        if host is None:  # every host died (or the pool was closed): refill it
            await asyncio.to_thread(self._pool.ensure)
            host = self._pool.host_of(child_id)
        if blob.box is None:
            blob.box = [ray.put(blob.data)]
        ref = getattr(host.actor, method).remote(blob.key, blob.box, payload)
        try:
            ok, value = await ref
        except asyncio.CancelledError:
            ray.cancel(ref)  # reaches the coroutine on the host
            self._cancelling.add(ref)
            raise
        except ray.exceptions.RayActorError as error:
            self._pool.mark_dead(host)
            text = host_died_text(host, error)
            if method == "call":
                self._lost[child_id] = text
            raise ModelError(text) from None
        except ray.exceptions.RayError as error:  # the call itself failed in Ray (a lost object, a system error)
            raise ModelError(f"Ray could not complete this call on the {host.describe()}: "
                             f"{type(error).__name__}") from None
        if ok:
            return value
        raise value
