"""Tools: declaration, the registry, and dispatch with the reference's error rendering.

A tool is declared with a pydantic argument model; its JSON Schema is what the model sees. Dispatch
turns every failure into a tool result the model can read (``Error: <message>`` with ``is_error``):
invalid arguments name the bad field, an unknown tool name is refused, an exception thrown by the tool
body renders its message, and a call aborted before dispatch renders
``Error: tool call aborted before dispatch``.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import typing
from dataclasses import dataclass
from typing import Any, Callable

import pydantic
import pydantic.json_schema

from .docstrings import read_docstring
from .errors import ToolError, UsageError
from .threads import user_threads

ABORTED_BEFORE_DISPATCH = "tool call aborted before dispatch"
ABORTED_DURING_CALL = "tool call was aborted before it finished"
STRICT = pydantic.ConfigDict(strict=True, extra="forbid")


class ToolAborted(asyncio.CancelledError):
    """A cancelled tool body's own rendering of its abort.

    Reference §5: when a turn is cancelled while a tool runs, the tool's own abort result (the
    delegation tool's ``Error: subagent run was cancelled``, a job wait's ``Error: wait aborted``) is what
    the model reads next turn; the loop's generic ``tool call was aborted before it finished`` is only
    for tools that have none. It is still a cancellation: raise it from ``except CancelledError`` once
    the body has cleaned up, and the turn ends ``aborted`` as usual.
    """

    def __init__(self, result: "ToolResult") -> None:
        super().__init__(result.text)
        self.result = result


@dataclass(slots=True)
class ToolResult:
    """What one tool call produced: the rendered ``text`` the model reads, the error flag and the value.

    A tool function may return one to control the exact text and error flag; any other return value is
    rendered to text. Raises nothing: a plain record.

    Args:
        text: what the model reads as the tool's result.
        is_error: whether the model reads it as a failure (``Error: …``).
        value: the Python value behind the text, for code that inspects results.
    """

    text: str
    is_error: bool = False
    value: Any = None

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"ToolResult(is_error={self.is_error}, text={self.text!r})"


@dataclass(slots=True)
class ToolContext:
    """Who is calling a tool: the calling agent, its runtime, the call id, and whether a human made the call.

    A tool function that declares a parameter annotated ``tn.ToolContext`` receives one (it is not part of
    the schema the model sees). Raises nothing: a plain record built by the engine.

    Args:
        agent: the calling agent (``.id``, ``.label``, ``.depth``).
        runtime: the engine runtime the agent runs in.
        call_id: the id of this tool call.
        by_user: True when the notebook user, acting as the root agent, made the call rather than a model.
    """

    agent: Any
    runtime: Any
    call_id: str
    by_user: bool = False


class Tool:
    """A callable the model can invoke.

    ``fn(ctx, args)`` receives a :class:`ToolContext` and the validated pydantic model and may be sync
    or async. ``render(value)`` turns its return value into the text the model reads (``str`` by
    default). ``concurrency_safe`` (bool or ``fn(args) -> bool``) opts a call into the parallel pool.
    ``guidance`` is a system-prompt section shown only to agents that can see the tool.
    """

    __slots__ = ("name", "description", "args_model", "fn", "render", "concurrency_safe", "guidance",
                 "guidance_order", "parameters", "run_in_thread", "is_async")

    def __init__(self, name: str, description: str, args_model: type[pydantic.BaseModel],
                 fn: Callable[..., Any], *, render: Callable[[Any], str] | None = None,
                 concurrency_safe: bool | Callable[[Any], bool] = False, guidance: str | None = None,
                 guidance_order: float = 100.0, run_in_thread: bool = False,
                 parameters: dict | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise UsageError("a tool needs a non-empty string name")
        self.name = name
        self.description = description
        self.args_model = args_model
        self.fn = fn
        self.render = render or _default_render
        self.concurrency_safe = concurrency_safe
        self.guidance = guidance
        self.guidance_order = guidance_order
        self.run_in_thread = run_in_thread
        self.parameters = parameters if parameters is not None else json_schema_of(args_model)
        #: decided once here, read on every call (``invoke`` awaits it instead of threading or calling it)
        self.is_async = inspect.iscoroutinefunction(fn)

    def is_safe(self, args: Any) -> bool:
        """Only an explicit ``True`` opts in; a throwing classifier means exclusive."""
        safe = self.concurrency_safe
        if callable(safe):
            try:
                return safe(args) is True
            except Exception:
                return False
        return safe is True

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


def _default_render(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def json_schema_of(model: type[pydantic.BaseModel]) -> dict:
    """A compact JSON Schema (no titles) of an argument model, as models expect tool parameters.

    Generating a schema costs about a third of a millisecond, and every hub builds the same tools, so
    the schema is computed once per model class; callers get their own copy to adjust.
    """
    return _copy_json(_cached_schema(model))


def _copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data: dicts and lists are rebuilt, strings, numbers, booleans and
    None are shared (immutable); anything else goes through ``copy.deepcopy``. Why not deepcopy
    throughout: every hub copies its tools' schemas, and deepcopy's memo and dispatch made that
    two thirds of building a hub (bench/many_roots.py, ``many_hubs``)."""
    kind = type(value)
    if kind is dict:
        return {key: _copy_json(item) for key, item in value.items()}
    if kind is list:
        return [_copy_json(item) for item in value]
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    return copy.deepcopy(value)


class UntitledJsonSchema(pydantic.json_schema.GenerateJsonSchema):
    """JSON Schema without ``title`` keywords, for tool parameters.

    Titles are pydantic's class and field names respelled as words (``SubagentArgs``, ``"Prompt"``): a
    model gains nothing from them and pays for them in prompt tokens on every request. Field titles are
    never made; the others (a model's, a dataclass's, an enum's, an explicit ``Field(title=...)``) are
    dropped from each schema as it is generated, including the one a ``$ref`` points to, so the schema
    pydantic hands back is final.
    """

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def generate_inner(self, schema: Any) -> Any:
        json_schema = super().generate_inner(schema)
        json_schema.pop("title", None)
        ref = json_schema.get("$ref")
        if ref is not None:  # a model or enum: its schema is the definition the reference names
            target = self.get_schema_from_definitions(pydantic.json_schema.JsonRef(ref))
            if target is not None:
                target.pop("title", None)
        return json_schema


@functools.lru_cache(maxsize=256)
def _cached_schema(model: type[pydantic.BaseModel]) -> dict:
    schema = model.model_json_schema(schema_generator=UntitledJsonSchema)
    schema.setdefault("properties", {})
    schema["type"] = "object"
    return schema


def format_validation_error(tool_name: str, error: pydantic.ValidationError) -> str:
    """``invalid arguments for tool "x": prompt: Field required; wait: Input should be a valid boolean``."""
    problems = []
    for item in error.errors():
        where = ".".join(str(p) for p in item.get("loc", ())) or "(arguments)"
        message = item.get("msg", "invalid")
        if item.get("type") == "extra_forbidden":
            message = "unexpected argument"
        problems.append(f"{where}: {message}")
    return f'invalid arguments for tool "{tool_name}": ' + "; ".join(problems)


class ToolRegistry:
    """Named tools, insertion-ordered. Duplicate names are refused."""

    __slots__ = ("_tools", "version")

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self.version = 0  # bumped on every change so cached tool views can be invalidated

    def add(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise UsageError(f'a tool named "{tool.name}" is already registered; each tool needs a distinct name')
        self._tools[tool.name] = tool
        self.version += 1
        return tool

    def remove(self, name: str) -> None:
        if self._tools.pop(name, None) is not None:
            self.version += 1

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self):
        return iter(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


def validate_arguments(tool: Tool, arguments: Any) -> Any:
    """Validate raw model arguments; raises :class:`ToolError` with a message naming the bad field."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ToolError(f'invalid arguments for tool "{tool.name}": expected a JSON object, got {type(arguments).__name__}')
    try:
        return tool.args_model.model_validate(arguments)
    except pydantic.ValidationError as error:
        raise ToolError(format_validation_error(tool.name, error)) from None


async def invoke(tool: Tool, ctx: ToolContext, args: Any) -> ToolResult:
    """Run a validated call and render it; every exception becomes an errored result."""
    try:
        if tool.is_async:
            value = await tool.fn(ctx, args)
        elif tool.run_in_thread:  # the hub's own threads for user code (toh_nb.core.threads)
            threads = getattr(ctx.runtime, "user_threads", None) or user_threads()
            value = await threads.run(tool.fn, ctx, args, name=f'tool "{tool.name}"',
                                      owner=getattr(ctx.agent, "id", None), refuse=ToolError)
        else:
            value = tool.fn(ctx, args)
            if inspect.isawaitable(value):
                value = await value
        if isinstance(value, ToolResult):
            return value
        return ToolResult(tool.render(value), False, value)
    except asyncio.CancelledError:
        raise
    except Exception as error:  # the model sees every tool failure as a result, never a crash
        return ToolResult(error_text(error), True, None)


def error_text(error: BaseException | str) -> str:
    message = error if isinstance(error, str) else (str(error) or type(error).__name__)
    return f"Error: {message}"


async def dispatch(registry_lookup: Callable[[str], Tool | None], ctx: ToolContext, name: str,
                   arguments: Any) -> ToolResult:
    """Look up, validate and invoke one call by name (what both agents and ``hub.call_tool`` use)."""
    tool = registry_lookup(name)
    if tool is None:
        return ToolResult(error_text(f'unknown tool "{name}"'), True, None)
    try:
        args = validate_arguments(tool, arguments)
    except ToolError as error:
        return ToolResult(error_text(error), True, None)
    return await invoke(tool, ctx, args)


# -- tools from plain Python functions ------------------------------------------------------------


class FunctionTool(Tool):
    """A tool made from a typed Python function (``tn.Tool``): its signature and docstring give the JSON Schema.

    Pass plain functions as ``tn.Hub(tools=[fn])`` (each is wrapped in one of these) or wrap one yourself to
    rename it or describe it differently. Sync functions run in a worker thread, so a slow one cannot stall
    other agents; async ones run on the loop and are cancelled on interrupt. A call's arguments are
    validated against the schema before the function runs.

    Args:
        fn: the function (sync or async) with annotated parameters.
        name: the tool name the model calls (default: the function's ``__name__``).
        description: what the model reads (default: the function's docstring without its parameter and
            other sections; each parameter's own description, in the Google, NumPy, reST or Epydoc
            style, goes into the schema).
        concurrency_safe: whether calls of this tool may run in parallel with others of one response.

    Raises:
        UsageError: ``fn`` is not callable, has no usable name (a lambda without ``name=``), or takes
            ``*args``/``**kwargs``, which cannot be described to a model.
    """

    __slots__ = ("function",)

    def __init__(self, fn: Callable[..., Any], name: str | None = None, description: str | None = None, *,
                 concurrency_safe: bool = False) -> None:
        if not callable(fn):
            raise UsageError(f"a tool must be a callable or a toh_nb.Tool, got {type(fn).__name__}")
        tool_name = name or getattr(fn, "__name__", None)
        if not tool_name or tool_name == "<lambda>":
            raise UsageError("a tool function needs a name: pass a def, or toh_nb.Tool(fn, name=...)")
        signature = inspect.signature(fn)
        try:
            hints = typing.get_type_hints(fn)
        except Exception:
            hints = {}
        doc = read_docstring(inspect.getdoc(fn))
        param_docs = doc.parameters
        fields: dict[str, Any] = {}
        for pname, param in signature.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise UsageError(f'tool "{tool_name}": *args/**kwargs cannot be described to a model; name each parameter')
            annotation = hints.get(pname, Any)
            default = param.default if param.default is not param.empty else ...
            fields[pname] = (annotation, pydantic.Field(default, description=param_docs.get(pname)))
        args_model = pydantic.create_model(f"{tool_name}_args", __config__=STRICT_LAX_NUMBERS, **fields)
        summary = description or doc.description or f"Call {tool_name}."
        names = tuple(fields)
        if inspect.iscoroutinefunction(fn):
            async def call(ctx: ToolContext, args: pydantic.BaseModel) -> Any:
                return await fn(**{k: getattr(args, k) for k in names})
        else:
            def call(ctx: ToolContext, args: pydantic.BaseModel) -> Any:
                return fn(**{k: getattr(args, k) for k in names})
        super().__init__(tool_name, summary, args_model, call, concurrency_safe=concurrency_safe,
                         run_in_thread=not inspect.iscoroutinefunction(fn))
        self.function = fn


# User functions get the usual JSON coercions a model needs (ints for floats), but no extra keys.
STRICT_LAX_NUMBERS = pydantic.ConfigDict(extra="forbid")
