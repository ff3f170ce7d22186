"""FunctionModel: a model that is a plain Python function of the request (sync or async)."""

from __future__ import annotations

from typing import Awaitable, Callable, Union

from ..core.errors import UsageError
from ..core.model import ModelRequest, ModelResponse, call_off_loop, coerce_response

ModelFunction = Callable[[ModelRequest], Union[ModelResponse, str, Awaitable[Union[ModelResponse, str]]]]


class FunctionModel:
    """A model that is a plain Python function of the request: deterministic agents for tests and tutorials.

    ``fn(request)`` returns a ``str`` (a final answer) or a ``ModelResponse`` (text, tool calls, usage). An
    exception it raises ends the turn with stop reason ``error``, its message becoming the diagnostic. An
    async ``fn`` may await and is cancelled on interrupt or kill; a sync ``fn`` runs in a worker thread, so a
    slow one never stalls other agents, and an interrupt stops waiting for it at once (the thread
    finishes on its own).

    Args:
        fn: a function of the ``ModelRequest`` (sync or async).
        name: the model's name, the key of its row in ``prices=`` (default: the function's ``__name__``).

    Raises:
        UsageError: ``fn`` is not callable.
    """

    def __init__(self, fn: ModelFunction, name: str | None = None) -> None:
        if not callable(fn):
            raise UsageError(f"FunctionModel needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "function")

    async def request(self, request: ModelRequest) -> ModelResponse:
        return coerce_response(await call_off_loop(self.fn, request))

    def __repr__(self) -> str:
        return f"FunctionModel({self.name})"
