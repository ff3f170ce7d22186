"""One-shot children: a delegation that runs one turn and hands back its result.

Each is returned as a :class:`SubagentRun` (``result`` and an idempotent ``dispose``) and the caller
always disposes, so a foreground call, a background job and a cancelled parent release a child the
same way. In-process providers plan synchronously (:meth:`OneShotRuns.start_now`), so a background
job's child exists the moment its job id is returned.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ..core.agent import Agent, TurnOutcome
from ..core.content import text_of, user_message
from ..core.events import ChildStarted
from ..core.states import BUDGET_STOPS, ONE_SHOT_STOP
from . import descriptor as descriptors
from . import texts
from .arguments import NO_OPTIONS, StartRequest, child_depth, filtered
from ..providers.base import ChildInfo, ChildPlan
from .settlement import publish_end

if TYPE_CHECKING:
    from .factory import ChildFactory
    from ..core.runtime import Runtime

#: stop reason of a one-shot run from its turn's end (``error``, ``interrupted`` or unknown: ``error``)
TURN_TO_STOP = ONE_SHOT_STOP


@dataclass(slots=True)
class SubagentResult:
    stop_reason: str
    output: list = field(default_factory=list)
    diagnostic: str | None = None
    usage: Any = None
    #: for a run that ended ``error``: what failed, in one word (``model``, ``store`` …)
    cause: str | None = None

    @property
    def text(self) -> str:
        return text_of(self.output)


class SubagentRun:
    """A one-shot child run. Await ``result``; always ``await dispose()`` (idempotent).

    Why no task of its own: a delegation is the engine's hot path, so the run's outcome is computed by
    the child's turn future's ``then`` (run as the turn ends, not a loop pass later) and handed straight
    to each waiter's own future (no shield chain), and disposing a settled, idle child is done at once,
    with no task."""

    __slots__ = ("id", "run_id", "provider", "agent", "_result", "_waiters", "_disposal", "cancelled", "close")

    def __init__(self, id: str, run_id: str, provider: str, agent: Agent | None,
                 close: Callable[[], Awaitable[None]] | None = None) -> None:
        self.id = id
        self.run_id = run_id
        self.provider = provider
        self.agent = agent
        self._result: asyncio.Future = asyncio.get_running_loop().create_future()
        #: futures handed out by ``result`` while the run was unsettled (each caller's own)
        self._waiters: list[asyncio.Future] | None = None
        #: None: not disposed; True: disposed at once; else the disposal task
        self._disposal: asyncio.Task | bool | None = None
        self.cancelled = False
        #: releases what the provider's plan holds (a process, an actor); awaited by dispose
        self.close = close

    @property
    def result(self) -> "asyncio.Future[SubagentResult]":
        # each caller gets its own future: a caller being cancelled must not cancel the run's outcome
        if self._result.done():
            return self._result
        waiter = self._result.get_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        return waiter

    def settled(self, value: SubagentResult | None, error: BaseException | None = None) -> None:
        """Set once by the service: the run's outcome, to the run and to every waiting caller."""
        waiters, self._waiters = self._waiters, None
        for future in (self._result, *(waiters or ())):
            if future.done():  # a waiter whose caller was cancelled
                continue
            if error is None:
                future.set_result(value)
            elif isinstance(error, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(error)

    async def dispose(self) -> None:
        if self._disposal is None:
            if self._dispose_now():
                return
            self._disposal = asyncio.get_running_loop().create_task(self._dispose())
        if self._disposal is not True:
            await asyncio.shield(self._disposal)

    def _dispose_now(self) -> bool:
        """Dispose at once when nothing is pending (the outcome is in, the child is idle, the provider
        holds nothing); False: a task must wait for those. A failure is kept for every later dispose."""
        if not self._result.done() or self.close is not None:
            return False
        if self.agent is not None and not self.agent.dispose_idle():
            return False
        self._disposal = True
        self.cancelled = True
        self._retrieve()
        if self.agent is not None:
            try:
                self.agent.runtime.unregister(self.agent)
            except Exception as error:
                self._disposal = self._result.get_loop().create_future()
                self._disposal.set_exception(error)
                raise
        return True

    def _retrieve(self) -> None:
        """Mark the outcome's exception as seen: the caller that awaited ``result`` saw it already."""
        if not self._result.cancelled():
            self._result.exception()

    async def _dispose(self) -> None:
        self.cancelled = True
        if self.agent is not None:
            await self.agent.dispose()
        if not self._result.done():
            await asyncio.wait((self._result,))
        self._retrieve()
        if self.agent is not None:
            self.agent.runtime.unregister(self.agent)
        if self.close is not None:
            close, self.close = self.close, None
            await close()  # a failure here is the run's disposal failure (kept beside the result's)


class OneShotRuns:
    """One-shot children, a part of :class:`~toh_nb.subagents.service.SubagentService`: started from a
    provider's plan through the service's one :class:`~toh_nb.subagents.factory.ChildFactory`, handed
    back as a :class:`SubagentRun`."""

    def __init__(self, factory: "ChildFactory") -> None:
        self.factory = factory
        self.runtime: "Runtime" = factory.runtime

    def _one_shot_info(self, provider: Any, request: StartRequest) -> ChildInfo:
        depth = child_depth(request.parent, request.max_depth)
        self.factory.check_filter(request.tool_filter, request.tools)
        return self.factory.child_info(self.runtime.ids.agent(), "one-shot", request.label, depth, request.parent.id,
                                request, (request.options or NO_OPTIONS).model or request.parent.model)

    async def start(self, provider_name: str, request: StartRequest, *, waited: bool = False) -> SubagentRun:
        """Plan and start a one-shot child. ``waited``: its caller does nothing but await the run's
        result (a foreground delegation), so the child's first step need not yield to the loop first."""
        provider = self.factory.checked_provider(provider_name, request)
        info = self._one_shot_info(provider, request)
        plan_now = self.factory.abilities[provider.name].plan_now
        plan = plan_now(info) if plan_now is not None else await provider.plan(info)
        run = self._start_one_shot(provider, request, info, plan, waited)
        self._published(run, request)
        return run

    def start_now(self, provider_name: str, request: StartRequest) -> SubagentRun | None:
        """Start a one-shot child synchronously when the provider can plan synchronously (in-process
        providers), so a background job's child exists the moment its id is returned; ``None`` otherwise."""
        provider = self.factory.checked_provider(provider_name, request)
        plan_now = self.factory.abilities[provider.name].plan_now
        if plan_now is None:
            return None
        info = self._one_shot_info(provider, request)
        run = self._start_one_shot(provider, request, info, plan_now(info))
        self._published(run, request)
        return run

    def _published(self, run: SubagentRun, request: StartRequest) -> None:
        depth = run.agent.depth if run.agent is not None else None
        self.runtime.bus.publish(ChildStarted(agent_id=run.id, parent_id=request.parent.id, depth=depth,
                                              run_id=run.run_id, provider=run.provider, mode="one-shot",
                                              label=request.label, local=run.agent is not None))

    def _start_one_shot(self, provider: Any, request: StartRequest, info: ChildInfo, plan: ChildPlan,
                        waited: bool = False) -> SubagentRun:
        """Build and start a planned one-shot child (the one driver every provider shares)."""
        runtime = self.runtime
        seed = list(plan.seed)
        session = self.factory.log(info.id, request.parent.id, info.depth, seed,
                                   descriptors.one_shot(provider.name, request.label))
        options = request.options or NO_OPTIONS
        child = self.factory.build(session, plan, label=request.label, depth=info.depth, parent=request.parent,
                                   mode="one-shot", persona=request.persona, tool_filter=request.tool_filter,
                                   extra_tools=filtered(request.tools, request.tool_filter),
                                   model=options.model or request.parent.model,
                                   max_tokens=request.parent.max_tokens if options.max_tokens is None else options.max_tokens,
                                   limits=options.limits, events=seed)
        run = SubagentRun(info.id, runtime.ids.run(), provider.name, child, plan.close)
        child.submit(user_message(request.prompt, id=runtime.ids.message()), first_step_yields=not waited,
                     then=functools.partial(self._one_shot_result, run))
        return run

    def _one_shot_result(self, run: SubagentRun, turn: "asyncio.Future[TurnOutcome]") -> None:
        """The run's outcome from its turn's outcome, the moment the turn is done (the turn future's
        ``then``: no task per run, no loop pass between the child's end and its waiters)."""
        try:
            try:
                if turn.cancelled():  # never a bare CancelledError at the caller: the run ends and says why
                    outcome = TurnOutcome(run.agent.turns if run.agent is not None else 0, "error",
                                          texts.TURN_CANCELLED)
                else:
                    outcome = turn.result()
                stop = TURN_TO_STOP.get(outcome.reason, "error")
                if run.cancelled and stop != "completed":
                    stop = "aborted"
                diagnostic = outcome.error if stop in ("error", *BUDGET_STOPS) else None
                result = SubagentResult(stop, outcome.output, diagnostic, outcome.usage,
                                        (outcome.cause or "model") if stop == "error" else None)
            except BaseException:
                publish_end(self.runtime, run.run_id, run.provider, run.id, "error", [], run.agent)
                raise
            publish_end(self.runtime, run.run_id, run.provider, run.id, result.stop_reason, result.output, run.agent)
        except BaseException as error:
            run.settled(None, error)
        else:
            run.settled(result)
