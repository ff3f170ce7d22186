"""The model protocol: what an agent sends a model each step and what it gets back.

It lives in the core (the agent loop speaks it); ``toh_nb.models`` holds implementations only.

A model is any object with ``async def request(self, request: ModelRequest) -> ModelResponse``.
``ModelRequest.messages`` is only the conversation (prompts, follow-ups, notices, reports, assistant
turns, tool results); the persona, the delegated-scope statement and tool guidance live in
``ModelRequest.system``, so a model function can rely on the last user message being the latest
instruction.
"""

from __future__ import annotations

import functools
import inspect
from types import FunctionType, MethodType
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, Sequence, runtime_checkable

from .content import Message, ToolCall, Usage
from .threads import user_threads

#: why a model's response ended, in the model protocol's words (``end_turn``, ``tool_use`` …). Not the
#: run's stop reason: that is :class:`toh_nb.core.states.StopReason` (``tn.StopReason``: ``completed``,
#: ``max-tokens`` …), the one ``StopReason`` of the package.
ModelStopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal"]
STOP_REASONS = ("end_turn", "tool_use", "max_tokens", "refusal")


@dataclass(slots=True, frozen=True)
class ToolSpec:
    """A tool as the model sees it: name, description and the JSON Schema of its arguments.

    Models receive a list of these in ``ModelRequest.tools``; an adapter turns them into its API's tool
    format. Raises nothing: a plain frozen record.

    Args:
        name: the name the model calls it by.
        description: the text the model reads to decide when to call it.
        parameters: the JSON Schema (an ``object`` schema) of its arguments.
    """

    name: str
    description: str
    parameters: dict


@dataclass(slots=True)
class ModelRequest:
    """What a model is asked, once per step of an agent's turn: the conversation, the tools and who asks.

    A model (``tn.FunctionModel``'s function, a ``ScriptedModel`` step, your own ``Model``) reads it;
    ``depth``, ``turn`` and ``step`` let a ``tool_choice`` function or a script act differently at the
    root's first step. Raises nothing: built by the engine, never by hand in normal use.

    Args:
        agent_id: the id of the agent making the call (``root``, ``agent-3``, …).
        label: the agent's label, ``None`` for the root.
        depth: 0 for the root, its parent's depth plus one for a child.
        system: the system prompt.
        messages: the conversation, oldest first: a read-only list-like snapshot.
        tools: the tools offered at this step, as ``ToolSpec`` objects.
        max_tokens: the completion limit for this call (``None``: the model's own default).
        path: labels from the root down to this agent, joined by ``/`` (``root/research/detail``).
        turn: 1-based number of the agent's current turn.
        step: 1-based number of the model call inside that turn.
        on_delta: set while the hub's event stream has listeners: a model that streams text calls it with
            each piece; not part of what the model is asked.
    """

    agent_id: str
    label: str | None
    depth: int
    system: str
    #: the conversation, oldest first: a read-only list-like snapshot (index, slice, iterate, len)
    messages: Sequence[Message]
    tools: list[ToolSpec]
    max_tokens: int | None = None
    #: labels from the root down to this agent, joined by "/" (``root/research/detail``)
    path: str = "root"
    #: 1-based number of the agent's current turn and of the step (model call) inside it
    turn: int = 1
    step: int = 1
    #: set by the agent while the hub's event stream has listeners: a model that streams text calls it
    #: with each piece (``toh_nb.models.deltas``); not part of what the model is asked
    on_delta: Callable[[str], None] | None = field(default=None, compare=False, repr=False)

    @property
    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            if message.role == "user":
                return message.text
        return ""

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]


@dataclass(slots=True)
class ModelResponse:
    """What a model answers to one ``ModelRequest``: text, tool calls, usage and why it stopped.

    A model function may return a plain ``str`` instead (a final answer); the engine wraps it.

    Args:
        text: the assistant's text (may be empty when it only calls tools).
        tool_calls: the calls to run, in order; the engine runs them in its tool pool.
        usage: the tokens the call used (``Usage()`` when unknown: the adapter estimates).
        stop_reason: ``"end_turn"``, ``"tool_use"``, ``"max_tokens"`` or ``"refusal"``; ``None`` derives it
            from ``tool_calls``.

    Raises:
        ModelError: ``stop_reason`` is not one of those four.
    """

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: ModelStopReason | None = None  # derived from tool_calls when omitted

    def __post_init__(self) -> None:
        if self.stop_reason is None:
            self.stop_reason = "tool_use" if self.tool_calls else "end_turn"
        elif self.stop_reason not in STOP_REASONS:
            from .errors import ModelError

            raise ModelError(f"unknown stop_reason {self.stop_reason!r}; expected one of {', '.join(STOP_REASONS)}")


@runtime_checkable
class Model(Protocol):
    """The model protocol: anything with ``async def request(self, request: ModelRequest) -> ModelResponse``.

    Every model of the package implements it (``DemoModel``, ``ScriptedModel``, ``FunctionModel``,
    ``OpenAIChatModel``, ``LocalModel``, ``RecordingModel``, ``ReplayModel``); give a hub your own class with
    that one method to plug in another backend. The engine calls ``request`` once per step, cancels it on
    interrupt, kill, ``turn_timeout`` or ``hub.close()``, and ends the turn ``error`` with the message of
    whatever it raises as the diagnostic. Optional: a ``name`` attribute (the key of ``prices=``) and
    ``async def aclose()`` (called when the hub closes).

    Raises:
        TypeError: instantiating the protocol itself; implement it in your own class.
    """

    async def request(self, request: ModelRequest) -> ModelResponse: ...


def model_name(model: Any) -> str | None:
    """The name a model goes by (``gpt-4o-mini``, a function's name): its ``model`` or ``name`` attribute,
    looked for through wrappers that hold the real model in ``inner`` (``RecordingModel``); None if none.
    One reading for prices, spans and a child's descriptor."""
    for _ in range(4):
        for attribute in ("model", "name"):
            value = getattr(model, attribute, None)
            if isinstance(value, str) and value:
                return value
        model = getattr(model, "inner", None)
        if model is None:
            return None
    return None


def coerce_response(value: Any) -> ModelResponse:
    """Accept what model functions may return: a ModelResponse or a plain ``str`` (a final answer)."""
    if isinstance(value, ModelResponse):
        return value
    if isinstance(value, str):
        return ModelResponse(text=value)
    from .errors import ModelError

    raise ModelError(f"a model function must return a ModelResponse or a str, got {type(value).__name__}")


def is_async_callable(fn: Any) -> bool:
    """Whether calling ``fn`` gives a coroutine. Asked on every model call (a hot path), so the answer is
    cached per underlying function: a bound method's function, a callable object's class ``__call__``."""
    kind = fn.__class__  # exact types first: no Python-level call on the hot path
    if kind is MethodType:
        return _is_coroutine_function(fn.__func__)
    if kind is FunctionType:
        return _is_coroutine_function(fn)
    if inspect.ismethod(fn):
        return _is_coroutine_function(fn.__func__)
    if inspect.isfunction(fn):
        return _is_coroutine_function(fn)
    if isinstance(fn, functools.partial):  # inspect unwraps partials; keep its answer, uncached
        return inspect.iscoroutinefunction(fn)
    return _is_coroutine_function(getattr(type(fn), "__call__", None))


@functools.lru_cache(maxsize=1024)
def _is_coroutine_function(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn)


async def call_off_loop(fn: Callable[[Any], Any], request: Any) -> Any:
    """Call a model function: an async one on the loop; a sync one on the running agent's hub's threads
    for user code (``toh_nb.core.threads``: never the engine's, and a stuck one cannot starve other hubs).

    Why: one loop serves every agent of every hub in the process (the notebook portal), so a sync model
    function that sleeps, or does real work, would stop all of them and delay kernel interrupts. A sync
    function that returns an awaitable has that awaited on the loop.
    """
    if is_async_callable(fn):
        return await fn(request)
    from .errors import ModelError

    name = f"model function {getattr(fn, '__name__', None) or type(fn).__name__}"
    value = await user_threads().run(fn, request, name=name, owner=getattr(request, "agent_id", None),
                                     refuse=ModelError)
    if inspect.isawaitable(value):
        value = await value
    return value


def __getattr__(name: str) -> Any:
    """``toh_nb.core.model.StopReason``: the old name of :data:`ModelStopReason`, kept one release."""
    if name == "StopReason":
        import warnings

        warnings.warn("toh_nb.core.model.StopReason is renamed ModelStopReason (a model response's stop reason); "
                      "tn.StopReason (toh_nb.core.states) is the run's stop reason", DeprecationWarning, stacklevel=2)
        return ModelStopReason
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
