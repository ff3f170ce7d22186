"""The model-facing ``subagent`` delegation tool (one instance = one provider = one tool name)."""

from __future__ import annotations

import asyncio
import functools
import warnings
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

import pydantic

from ..core.checks import check_count, check_flag
from ..core.content import text_of
from ..core.errors import UsageError, describe
from ..core.tools import STRICT, Tool, ToolAborted, ToolContext, ToolResult, error_text
from ..jobs.registry import JobOutcome, JobRegistry
from ..models.names import model_of
from . import texts
from .arguments import AGENT_OPTIONS_DEPRECATED, ChildOptions, StartRequest, validate_max_depth, validate_tool_filter
from .one_shot import SubagentResult
from .service import SubagentService

BACKGROUND_MODES = ("one-shot", "continuable")
#: budgets a delegation tool gives every child it starts (``toh_nb.core.budget``)
BUDGET_KEYS = ("max_steps", "token_budget", "turn_timeout")
AGENT_OPTION_KEYS = {"model", "max_tokens", *BUDGET_KEYS}


class ToolFailure(Exception):
    """A failure whose message is already the exact text the model should read after ``Error: ``."""


@dataclass(frozen=True)
class SubagentTool:
    """One delegation tool the models see: ``tn.Hub(delegation_tools=[tn.SubagentTool(name="coder", provider="coder")])``.

    Every agent is offered one ``subagent`` tool by default; give the hub several of these to offer more,
    each with its own name, provider and bounds for the children it starts.

    Args:
        name: the tool name the model calls.
        provider: a registered provider (``spawn``, ``fork`` or one given as ``tn.Hub(providers={...})``).
        background_mode: what ``run_in_background`` starts: ``"one-shot"`` (a job) or ``"continuable"``
            (a child); ``None``: the hub's.
        enable_run_in_background: offer the ``run_in_background`` parameter at all; ``False`` makes every
            call wait for its child (a small model that sets it on its own loses the answer otherwise).
        persona: a system prompt for every child it starts.
        tool_filter: allow/deny lists of the tools its children are offered (``{"deny": ["subagent"]}``).
        max_depth: the deepest child it may start; ``None``: the hub's; ``"provider-managed"``: no cap, for
            providers whose children own their recursion budget.
        model: the model its children run (default: their parent's): a model object, a name such as
            ``"openai:gpt-4o-mini"`` (:mod:`toh_nb.models.names`) or a plain function of the request, built
            into its model object here.
        max_tokens: the completion limit of its children's model calls.
        max_steps: model calls per turn of each child.
        token_budget: tokens each child's subtree may use.
        turn_timeout: wall-clock seconds per turn of each child.
        tools: MCP servers (``tn.MCPServer``) whose tools every child it starts sees besides the hub's.

    Raises:
        UsageError: ``model`` is neither a model object, a known name nor a function (here, at once).
        UsageError: (when the hub mounts it) a setting of the wrong type or range, or a name taken twice.
        ProviderError: (when the hub mounts it) ``provider`` names no registered provider.
    """

    name: str = "subagent"
    provider: str = "spawn"
    background_mode: str | None = None
    enable_run_in_background: bool = True
    persona: str | None = None
    tool_filter: dict | None = None
    max_depth: int | str | None = None
    model: Any = None
    max_tokens: int | None = None
    max_steps: int | None = None
    token_budget: int | None = None
    turn_timeout: float | None = None
    tools: tuple = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", model_of(self.model, "SubagentTool model"))

    def build(self, service: SubagentService, jobs: JobRegistry | None, *, background_mode: str,
              max_depth: int | str, child_tools: Callable[[], Awaitable[tuple[tuple, tuple]]] | None = None) -> Tool:
        check_count(self.max_tokens, "max_tokens", none="")  # named as this class names it
        depth = self.max_depth if self.max_depth is not None else max_depth
        if self.max_depth is None and depth != "provider-managed":
            provider = service.registered_provider(self.provider)
            if not provider.capabilities.depth_limit:
                depth = "provider-managed"  # the hub's cap does not bind a provider that manages depth itself
        return make_subagent_tool(service, jobs, provider=self.provider, tool_name=self.name,
                                  enable_run_in_background=self.enable_run_in_background,
                                  background_mode=self.background_mode or background_mode,
                                  model=self.model, max_tokens=self.max_tokens, max_steps=self.max_steps,
                                  token_budget=self.token_budget, turn_timeout=self.turn_timeout,
                                  persona=self.persona, tool_filter=self.tool_filter,
                                  max_depth=depth, child_tools=child_tools)


def make_subagent_tool(service: SubagentService, jobs: JobRegistry | None, *, provider: str = "spawn",
                       tool_name: str = "subagent", enable_run_in_background: bool = True,
                       background_mode: str = "one-shot", agent_options: dict | None = None,
                       persona: str | None = None, tool_filter: dict | None = None,
                       max_depth: int | str = 3,
                       child_tools: Callable[[], Awaitable[tuple[tuple, tuple]]] | None = None,
                       model: Any = None, max_tokens: int | None = None, max_steps: int | None = None,
                       token_budget: int | None = None, turn_timeout: float | None = None) -> Tool:
    """Build one delegation tool instance; configuration errors raise :class:`UsageError` here.

    ``model``, ``max_tokens`` and the budgets (``max_steps``, ``token_budget``, ``turn_timeout``) are
    what every child it starts is given (:class:`~toh_nb.subagents.arguments.ChildOptions`); the old
    ``agent_options`` dict of them still works, with a DeprecationWarning, for one release.
    ``child_tools``: awaited at each delegation, ``(tools, mcp_servers)`` every child it starts gets
    besides the hub's tool layer (the hub's resolution of ``SubagentTool(tools=[tn.MCPServer(...)])``)."""
    cap = validate_max_depth(max_depth)
    check_flag(enable_run_in_background, "enable_run_in_background")
    tool_filter = validate_tool_filter(tool_filter)
    if background_mode not in BACKGROUND_MODES:
        raise UsageError(f'background_mode must be "one-shot" or "continuable", got {background_mode!r}')
    given = {"model": model, "max_tokens": max_tokens, "max_steps": max_steps, "token_budget": token_budget,
             "turn_timeout": turn_timeout}
    if agent_options is not None:
        warnings.warn(AGENT_OPTIONS_DEPRECATED, DeprecationWarning, stacklevel=2)
        if not isinstance(agent_options, dict) or set(agent_options) - AGENT_OPTION_KEYS:
            raise UsageError(f"agent_options takes only {', '.join(sorted(AGENT_OPTION_KEYS))}")
        twice = sorted(key for key, value in agent_options.items() if value is not None and given[key] is not None)
        if twice:
            raise UsageError(f"{', '.join(twice)} given both in agent_options and as keywords; give each once")
        given.update({key: value for key, value in agent_options.items() if value is not None})
    if given["model"] is not None:  # a dict of delegation_tools settings may name one too
        given["model"] = model_of(given["model"], "model")
    check_count(given["max_tokens"], "max_tokens", none="")
    limits = service.runtime.limits.for_child(**{key: given[key] for key in BUDGET_KEYS})  # UsageError names a bad one
    options = ChildOptions.given(given["model"], given["max_tokens"], limits)
    if persona is not None and not isinstance(persona, str):
        raise UsageError("persona must be a string")
    if not isinstance(tool_name, str) or not tool_name:
        raise UsageError("tool_name must be a non-empty string")
    source = service.registered_provider(provider)
    capabilities = source.capabilities
    if persona is not None and not capabilities.persona:
        raise UsageError(texts.unsupported_capability(provider, "persona"))
    if tool_filter is not None and not capabilities.tool_filter:
        raise UsageError(texts.unsupported_capability(provider, "toolFilter"))
    if cap is not None and not capabilities.depth_limit:
        raise UsageError(f'tool-subagent: provider "{provider}" cannot enforce maxDepth (no depthLimit capability) '
                         "\u2014 set max_depth='provider-managed' to leave the recursion budget to the provider")
    continuable = background_mode == "continuable"
    if continuable and enable_run_in_background and not capabilities.continuable:
        raise UsageError(f'tool-subagent: provider "{provider}" does not support `backgroundMode: continuable`')

    fork = capabilities.inherits_parent_context
    description = texts.FORK_BASE if fork else texts.FRESH_BASE
    if not enable_run_in_background:
        description += texts.SUFFIX_NO_BACKGROUND
    elif continuable:
        description += texts.SUFFIX_CONTINUABLE
    else:
        description += texts.SUFFIX_ONE_SHOT
    prompt_doc = texts.FORK_PROMPT_PARAM if fork else texts.FRESH_PROMPT_PARAM
    args_model = _args_model(tool_name, prompt_doc, enable_run_in_background, continuable)
    parameters = _schema(args_model, enable_run_in_background)

    async def run(ctx: ToolContext, args: Any) -> dict:
        if not args.description.strip():
            raise ToolFailure("description must be a non-empty string")
        parent = ctx.agent
        own_tools, servers = await child_tools() if child_tools is not None else ((), ())
        request = StartRequest(prompt=args.prompt, parent=parent, label=args.description,
                               options=options, persona=persona, tool_filter=tool_filter,
                               max_depth=cap, by_user=ctx.by_user, tools=own_tools, mcp_servers=servers)
        if not enable_run_in_background:
            if args.run_in_background is True:
                raise ToolFailure(texts.BACKGROUND_DISABLED)
            background = False
        else:
            background = args.run_in_background if args.run_in_background is not None else continuable
        if background and continuable:
            child_id, _ = await _before_publication(service.start_continuable(provider, request))
            return {"kind": "continuable", "subagent_id": child_id}
        if background:
            if jobs is None:
                raise ToolFailure("background jobs unavailable: no job registry serves this agent")
            job = jobs.start("subagent", args.description, parent, background_starter(service, provider, request),
                             by_user=ctx.by_user)
            await service.child_recorded(job.child_id)
            return {"kind": "background", "job_id": job.id}
        started = await _before_publication(service.start(provider, request, waited=True))
        return await settle_foreground(started)

    return Tool(tool_name, description, args_model, run, render=render, concurrency_safe=True,
                parameters=parameters,
                guidance=texts.CONTINUABLE_GUIDANCE.format(tool=tool_name) if continuable and enable_run_in_background else None,
                guidance_order=texts.CONTINUABLE_GUIDANCE_ORDER)


@functools.lru_cache(maxsize=64)
def _args_model(tool_name: str, prompt_doc: str, with_background: bool, continuable: bool) -> type[pydantic.BaseModel]:
    """The argument model of one tool shape (cached: every hub builds the same few)."""
    fields: dict[str, Any] = {
        "description": (str, pydantic.Field(description=texts.DESCRIPTION_PARAM)),
        "prompt": (str, pydantic.Field(description=prompt_doc)),
    }
    if with_background:
        doc = texts.BACKGROUND_PARAM_CONTINUABLE if continuable else texts.BACKGROUND_PARAM_ONE_SHOT
        fields["run_in_background"] = (Optional[bool], pydantic.Field(None, description=doc))
    else:
        # kept in the argument model so a forced `true` gets the specific refusal; hidden from the schema
        fields["run_in_background"] = (Optional[bool], pydantic.Field(None))
    return pydantic.create_model(f"{tool_name}_args", __config__=STRICT, **fields)


def _schema(args_model: type[pydantic.BaseModel], with_background: bool) -> dict:
    from ..core.tools import json_schema_of

    schema = json_schema_of(args_model)
    if not with_background:
        schema["properties"].pop("run_in_background", None)
    for prop in schema["properties"].values():
        if "anyOf" in prop:  # Optional[bool] -> plain boolean for the model
            types = [a for a in prop.pop("anyOf") if a.get("type") != "null"]
            if len(types) == 1:
                prop.update(types[0])
        prop.pop("default", None)
    return schema


def render(value: dict) -> str:
    kind = value["kind"]
    if kind == "background":
        return texts.started_job(value["job_id"])
    if kind == "continuable":
        return texts.started_child(value["subagent_id"])
    return text_of(value["output"])


async def settle_foreground(run: Any) -> dict:
    """Evaluate the result, always dispose, and keep both failures when both happen."""
    value = None
    result_error: str | None = None
    try:
        result: SubagentResult = await run.result
        if result.stop_reason == "completed":
            value = {"kind": "foreground", "run_id": run.id, "output": result.output}
        else:
            result_error = texts.failure_text(result.stop_reason, result.diagnostic, result.text)
    except asyncio.CancelledError:
        raise ToolAborted(await _cancelled_result(run)) from None
    except Exception as error:
        result_error = str(error) or type(error).__name__
    dispose_error: str | None = None
    try:
        await run.dispose()
    except Exception as error:
        dispose_error = str(error) or type(error).__name__
    if result_error is not None and dispose_error is not None:
        raise ToolFailure(texts.run_and_dispose_failed(result_error, dispose_error))
    if result_error is not None:
        raise ToolFailure(result_error)
    if dispose_error is not None:
        raise ToolFailure(dispose_error)
    return value


async def _before_publication(starting: Awaitable[Any]) -> Any:
    """Await a child's start; a cancellation before the child exists renders as the reference's
    pre-publication abort."""
    try:
        return await starting
    except asyncio.CancelledError:
        raise ToolAborted(ToolResult(error_text(texts.ABORTED_BEFORE_PUBLICATION), True)) from None


async def _cancelled_result(run: Any) -> ToolResult:
    """The delegation tool's own rendering of a cancelled foreground run (reference §5.4): the run is
    disposed, then its recorded outcome is rendered as any non-completed result is."""
    try:
        await run.dispose()
        result: SubagentResult = await run.result
    except Exception as error:
        return ToolResult(error_text(texts.run_and_dispose_failed(texts.headline("aborted"), describe(error))), True)
    if result.stop_reason == "completed":
        return ToolResult(render({"kind": "foreground", "run_id": run.id, "output": result.output}), False)
    return ToolResult(error_text(texts.failure_text(result.stop_reason, result.diagnostic, result.text)), True)


def settle_run_outcome(result: SubagentResult) -> JobOutcome:
    """The job's outcome from its run's (the run's result travels along for the notebook's handle)."""
    if result.stop_reason == "completed":
        return JobOutcome("completed", output=result.text, result=result)
    if result.stop_reason == "aborted":
        return JobOutcome("killed", result=result)
    detail = result.stop_reason
    if result.diagnostic:
        detail += f"; diagnostic: {result.diagnostic}"
    return JobOutcome("failed", detail, result=result)


def _recorded(run: Any) -> SubagentResult | None:
    """The run's outcome once it is in (after a dispose), else None."""
    outcome = run.result
    if outcome.done() and not outcome.cancelled() and outcome.exception() is None:
        return outcome.result()
    return None


def background_starter(service: SubagentService, provider: str, request: StartRequest) -> Callable[[Any], Any]:
    """The job's ``run``: an in-process child is created right away (so it exists, and is listed, the
    moment the job id is returned); its start failures become a failed job, as in the reference."""

    def start(job: Any) -> Awaitable[JobOutcome]:
        try:
            run = service.start_now(provider, request)
        except Exception as error:
            return _failed(describe(error))
        if run is not None:
            job.child_id = run.id
            job.cleanup = run.dispose
        return _collect(service, provider, request, job, run)

    return start


async def _failed(detail: str) -> JobOutcome:
    return JobOutcome("failed", detail)


async def _collect(service: SubagentService, provider: str, request: StartRequest, job: Any,
                   run: Any = None) -> JobOutcome:
    try:
        if run is None:
            run = await service.start(provider, request)
            job.child_id = run.id
        result = await run.result
    except asyncio.CancelledError:
        if run is None:
            return JobOutcome("killed")
        await run.dispose()
        return JobOutcome("killed", result=_recorded(run))  # what the child wrote before the kill
    except Exception as error:
        if run is not None:
            try:
                await run.dispose()
            except Exception as dispose_error:
                return JobOutcome("failed", f"{describe(error)}; dispose failed: {dispose_error}")
        return JobOutcome("failed", describe(error))
    outcome = settle_run_outcome(result)
    try:
        await run.dispose()
    except Exception as error:
        detail = f"{outcome.detail}; dispose failed: {error}" if outcome.detail else f"dispose failed: {error}"
        return JobOutcome("failed", detail)
    return outcome
