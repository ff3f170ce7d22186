"""The host actor: the code that runs inside Ray, one process serving many children.

One actor per child costs a process each (~47 MiB and ~0.44 s to start on this kind of machine), so a
small pool of *async* actors hosts every child as coroutines. A host answers two kinds of call, both
for a child whose agent loop and tree live in the driver:

- ``request``: one model call, answered by the user's model built on the host from a pickled factory
  (built once per host, shared by its children as one model object is shared in-process);
- ``call``: one call of a user tool (a plain Python function), run on the host: async functions on its
  loop, sync ones in a worker thread so a slow tool never stalls the other children.

Failures travel back as values (``(False, exception)``) rather than as Ray task errors, so the driver
raises the user's own exception and the diagnostic a model or user reads is the same text as with
``spawn``. Cancelling the Ray task (``ray.cancel``) cancels the coroutine, which cancels the model's
or tool's awaitable just as an in-process interrupt does.

Nothing here imports the driver's tree: a host knows no agents, stores or tools of toh_nb.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from ..core.errors import ModelError
from ..core.model import call_off_loop, coerce_response


def load(blob: bytes) -> Any:
    from ray import cloudpickle

    return cloudpickle.loads(blob)


def portable(error: BaseException) -> BaseException:
    """The exception itself when it survives pickling (same text on the driver), else its text."""
    from ray import cloudpickle

    try:
        cloudpickle.loads(cloudpickle.dumps(error))
        return error
    except Exception:
        return ModelError(str(error) or type(error).__name__)


def build_model(obj: Any) -> Any:
    """A model object as sent, or what a zero-argument factory returns."""
    model = obj if callable(getattr(obj, "request", None)) else obj()
    if not callable(getattr(model, "request", None)):
        raise ModelError(f"the RayProvider model factory returned {type(model).__name__}, which has no request() method")
    return model


class Host:
    """An async Ray actor hosting many children's model calls and user tool calls."""

    def __init__(self) -> None:
        self._models: dict[str, Any] = {}
        self._functions: dict[str, Any] = {}
        self.calls = 0

    def where(self) -> dict:
        """Which node and process this host runs on (named in diagnostics if it dies)."""
        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "node_ip": ray.util.get_node_ip_address(),
                "pid": os.getpid()}

    async def _resolved(self, cache: dict, key: str, box: list, build) -> Any:
        value = cache.get(key)
        if value is None:
            value = build(load(await box[0]))  # box: [ObjectRef] so Ray does not resolve it on every call
            cache[key] = value
        return value

    async def request(self, key: str, box: list, request: Any) -> tuple[bool, Any]:
        self.calls += 1
        try:
            model = await self._resolved(self._models, key, box, build_model)
            return True, coerce_response(await call_off_loop(model.request, request))
        except Exception as error:
            return False, portable(error)

    async def call(self, key: str, box: list, arguments: dict) -> tuple[bool, Any]:
        from ray import cloudpickle

        self.calls += 1
        try:
            function = await self._resolved(self._functions, key, box, lambda fn: fn)
            if asyncio.iscoroutinefunction(function):
                value = await function(**arguments)
            else:
                value = await asyncio.to_thread(function, **arguments)
            try:
                cloudpickle.dumps(value)
            except Exception:
                value = str(value)  # what the driver would render anyway
            return True, value
        except Exception as error:
            return False, portable(error)

    def stats(self) -> dict:
        return {"calls": self.calls, "models": len(self._models), "functions": len(self._functions),
                "pid": os.getpid()}
