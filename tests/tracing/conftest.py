"""Fixtures for the tracing tests: an SDK TracerProvider with the in-memory exporter, a script model."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Callable

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import toh_nb as tn  # noqa: E402


KEYS = {"agent": "gen_ai.agent.id", "turn": "toh_nb.turn", "call_id": "gen_ai.tool.call.id",
        "name": "gen_ai.agent.name"}


class Traced:
    """The provider a hub is given and the spans it finished, with tree helpers."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def spans(self) -> list:
        return list(self.exporter.get_finished_spans())

    def find(self, operation: str | None = None, **attributes: Any) -> list:
        """Spans of ``operation`` (``gen_ai.operation.name``) whose attributes include ``attributes``,
        named by :data:`KEYS` (``agent=``, ``turn=``, ``call_id=``, ``name=``), oldest first."""
        wanted = {KEYS[key]: value for key, value in attributes.items()}
        out = [span for span in self.spans
               if (operation is None or span.attributes.get("gen_ai.operation.name") == operation)
               and all(span.attributes.get(key) == value for key, value in wanted.items())]
        return sorted(out, key=lambda s: s.start_time)

    def one(self, operation: str | None = None, **attributes: Any):
        found = self.find(operation, **attributes)
        assert len(found) == 1, f"{len(found)} spans for {operation} {attributes}: {[s.name for s in found]}"
        return found[0]

    def turn(self, agent_id: str, turn: int = 1):
        return self.one("invoke_agent", agent=agent_id, turn=turn)

    def tool(self, call_id: str):
        return self.one("execute_tool", call_id=call_id)

    def children(self, span) -> list:
        return sorted((s for s in self.spans if s.parent is not None and s.parent.span_id == span.context.span_id),
                      key=lambda s: s.start_time)

    def names(self, span) -> list[str]:
        return [s.name for s in self.children(span)]


@pytest.fixture
def traced() -> Traced:
    return Traced()


def script(plan: dict[Any, list], name: str = "scripted") -> tn.FunctionModel:
    """A model answering by the agent's label (``"root"`` for the root) and step: ``plan[label]`` or
    ``plan[(label, turn)]`` lists one reply per step (the last repeats). A reply is a ModelResponse, a
    string, an exception to raise, or an async function of the request returning one of those."""

    async def answer(request):
        label = request.label or "root"
        steps = plan.get((label, request.turn)) or plan[label]
        reply = steps[min(request.step, len(steps)) - 1]
        if callable(reply):
            reply = await reply(request)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    return tn.FunctionModel(answer, name=name)


def call(name: str, call_id: str, **arguments: Any) -> tn.ModelResponse:
    return tn.ModelResponse("", [tn.ToolCall(name, arguments, id=call_id)], tn.Usage(10, 2))


def calls(*items: tuple) -> tn.ModelResponse:
    return tn.ModelResponse("", [tn.ToolCall(name, args, id=call_id) for name, call_id, args in items], tn.Usage(10, 2))


def say(text: str, input_tokens: int = 7, output_tokens: int = 3) -> tn.ModelResponse:
    return tn.ModelResponse(text, usage=tn.Usage(input_tokens, output_tokens))


def delegate(call_id: str, label: str, prompt: str = "do it", **extra: Any) -> tn.ModelResponse:
    return call("subagent", call_id, description=label, prompt=prompt, **extra)


async def settle(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("timed out waiting for the spans")
        await asyncio.sleep(0.005)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """``async def`` tests of this directory run in a fresh ``asyncio.run`` (no plugin needed)."""
    if asyncio.iscoroutinefunction(pyfuncitem.obj):
        names = inspect.signature(pyfuncitem.obj).parameters
        asyncio.run(pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names}))
        return True
    return None
