"""ScriptedModel: deterministic scripted turns, addressable per agent, for tests and tutorials.

::

    model = tn.ScriptedModel({
        "root": [tn.ToolCall("subagent", {"description": "sum", "prompt": "add 2+2"}),
                 lambda req: f"child said {req.messages[-1].text}"],
        "sum": ["4"],
    })

Each key names a script: an agent path (``root/sum``), a label (``sum``), or ``root`` for the hub's
root agent (label ``None``). A script is a list of steps, one per model call of that agent; a step is
a ``str`` (final answer), a :class:`ToolCall` or a list of them (one assistant message), a
:class:`ModelResponse`, or a function of the request returning any of these (sync or async). Every
agent gets its own cursor, so twins with the same label each run the whole script. ``default`` (a
list or a function) serves agents no key matches. Running past the end of a script raises
:class:`~toh_nb.core.errors.ScriptExhausted` with a message naming the agent and step: the turn ends
with ``error`` and the message is its diagnostic.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from ..core.content import ToolCall
from ..core.errors import ScriptExhausted, UsageError
from ..core.model import ModelRequest, ModelResponse, call_off_loop, coerce_response


class ScriptedModel:
    """Deterministic scripted turns, addressable per agent: a whole delegation tree written as data, for tests.

    Each key of ``scripts`` names a script: an agent path (``root/sum``), a label (``sum``), or ``root`` for
    the hub's root agent. A script is a list of steps, one per model call of that agent; a step is a
    ``str`` (final answer), a ``ToolCall`` or a list of them (one assistant message), a ``ModelResponse``,
    or a function of the request returning any of these (sync or async). Every agent gets its own cursor,
    so twins with the same label each run the whole script, for example:

        tn.ScriptedModel({
            "root": [tn.ToolCall("subagent", {"description": "sum", "prompt": "add 2+2"}),
                     lambda req: f"child said {req.messages[-1].text}"],
            "sum": ["4"],
        })

    Args:
        scripts: the scripts by agent path or label, or one function serving every agent.
        default: a list of steps or a function, for agents no key matches.

    Raises:
        UsageError: ``scripts`` is neither a mapping nor a function, or a script is not a list of steps.
        ScriptExhausted: (from a request, ending that turn ``error``) an agent made more model calls than its
            script has steps; the message names the agent and step.
    """

    def __init__(self, scripts: Mapping[str, Sequence[Any]] | Callable[[ModelRequest], Any] | None = None,
                 default: Sequence[Any] | Callable[[ModelRequest], Any] | None = None) -> None:
        if callable(scripts) and not isinstance(scripts, Mapping):
            scripts, default = {}, scripts
        if scripts is not None and not isinstance(scripts, Mapping):
            raise UsageError("ScriptedModel takes a mapping of script name -> list of steps, or a function")
        self.scripts: dict[str, list] = {}
        for key, steps in (scripts or {}).items():
            if isinstance(steps, (str, bytes)) or not isinstance(steps, Sequence):
                raise UsageError(f'script "{key}" must be a list of steps, got {type(steps).__name__}')
            self.scripts[str(key)] = list(steps)
        if default is not None and not callable(default):
            default = list(default)
        self.default = default
        self._cursor: dict[str, int] = {}
        self.requests: list[ModelRequest] = []  # every request served, for assertions

    def _script_for(self, request: ModelRequest) -> tuple[str, Any]:
        for key in (request.path, request.label if request.label is not None else "root", request.agent_id):
            if key in self.scripts:
                return key, self.scripts[key]
        if self.default is not None:
            return "default", self.default
        raise ScriptExhausted(
            f'ScriptedModel has no script for agent {request.agent_id} (path "{request.path}", label '
            f'{request.label!r}); add a key for its label or path, or a default')

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        key, script = self._script_for(request)
        if callable(script):
            step: Any = script
        else:
            position = self._cursor.get(request.agent_id, 0)
            if position >= len(script):
                raise ScriptExhausted(
                    f'ScriptedModel script "{key}" ran out for agent {request.agent_id}: it has {len(script)} '
                    f"step(s) and step {position + 1} was requested (turn {request.turn}); last user message: "
                    f"{request.last_user_text[:200]!r}")
            self._cursor[request.agent_id] = position + 1
            step = script[position]
        return await resolve_step(step, request)


async def resolve_step(step: Any, request: ModelRequest) -> ModelResponse:
    if callable(step) and not isinstance(step, (ToolCall, ModelResponse)):
        step = await call_off_loop(step, request)
    if isinstance(step, ToolCall):
        return ModelResponse(tool_calls=[step])
    if isinstance(step, (list, tuple)) and step and all(isinstance(s, ToolCall) for s in step):
        return ModelResponse(tool_calls=list(step))
    return coerce_response(step)
