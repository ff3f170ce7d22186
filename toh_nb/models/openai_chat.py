"""OpenAIChatModel: any OpenAI-compatible chat-completions endpoint as a toh_nb model.

Why one adapter for many servers: OpenAI, DeepSeek, Ollama, vLLM and the llama.cpp server all speak
``POST /v1/chat/completions`` with function tools, so one adapter built on the official ``openai``
client covers hosted and local models alike. It maps a :class:`~toh_nb.core.model.ModelRequest`
(system prompt, conversation, tool specs, ``max_tokens``) onto chat messages and function tools, and
the completion back onto a :class:`~toh_nb.core.model.ModelResponse` (text, tool calls, usage, stop
reason).

Pointing it at a server::

    tn.OpenAIChatModel("gpt-4o-mini")                                 # OpenAI; key from OPENAI_API_KEY
    tn.OpenAIChatModel("deepseek-chat", base_url="https://api.deepseek.com",
                       api_key=os.environ["DEEPSEEK_API_KEY"])        # DeepSeek
    tn.OpenAIChatModel("llama3.1", base_url="http://localhost:11434/v1",
                       profile="ollama")                              # Ollama (no key needed)
    tn.OpenAIChatModel("Qwen/Qwen2.5-7B-Instruct", base_url="http://localhost:8000/v1",
                       profile="vllm")                 # vLLM (`vllm serve ... --enable-auto-tool-choice`)
    tn.OpenAIChatModel("local", base_url="http://localhost:8080/v1")  # llama.cpp's `llama-server --jinja`
    tn.OpenAIChatModel("smol", base_url="http://localhost:8000/v1",
                       profile="llama.cpp")            # llama-cpp-python (`python -m llama_cpp.server`)

The ``openai`` package is the optional extra ``toh-nb[openai]`` (``Hub()`` and the offline models
work without it); constructing an OpenAIChatModel without it is a UsageError naming the extra. The key
is held as a ``pydantic.SecretStr``.

``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` are honoured when ``api_key`` / ``base_url`` are not given.
Local servers need no key: with a ``base_url`` and no key anywhere a placeholder is sent. Without a
key *and* without a ``base_url`` the first request fails with a :class:`~toh_nb.core.errors.ModelError`
saying so (construction never fails, so a notebook can build its hub before the key is set).

Why the adapter runs its own retry loop (the client is built with ``max_retries=0``): the agent tree
fans out many concurrent calls, and a retry must stay cancellable, bounded and visible in one place.
It follows the ``openai`` SDK's rules (``retry_rules.py``): 408, 409, 429, 5xx, connection errors and
timeouts are retried up to ``max_retries`` times, a server's ``x-should-retry: true|false`` overriding
the status, with exponential backoff (``backoff`` seconds doubling per attempt, with a little jitter,
capped at ``max_backoff``; ``retry-after-ms`` and ``Retry-After``, in seconds or as an HTTP date, are
honoured within the cap); any other 4xx fails at once. Every failure
becomes a :class:`ModelError` whose message names the model, the HTTP status (``.status_code``) and the
server's message — never the API key, which is also kept out of ``repr()``/``str()``. ``timeout``
bounds each attempt (for streams: the wait for each chunk). Cancelling the awaiting task (interrupt,
kill) cancels the HTTP request at once and never triggers a retry.

Usage is never lost: a completion or stream that reports no token counts (a server that ignores
``stream_options``, as llama-cpp-python's does, or an older one that sends no ``usage``) gets an
estimate of about four characters per token, of the request's messages and tools and of the answer's
text and tool calls, marked ``Usage(..., estimated=True)``; so ``token_budget`` counts every call and a
turn that produced tokens never records 0.

Streaming (``stream=True``) asks for ``stream_options={"include_usage": True}`` (unless the profile
says the server ignores it), assembles text and
tool-call deltas into the same ``ModelResponse`` as a plain call, and passes each text delta to
``on_delta(agent_id, text)`` (sync or async) for live display. A stream that breaks after text was
shown is not retried (the display would repeat itself): it fails with a ``ModelError``. Servers that
reject ``stream_options`` (some older local servers) should be used with ``stream=False``.
Why our own assembly rather than the SDK's stream accumulator (``client.chat.completions.stream``):
it crashes on tool-call chunks without an ``index``, which some servers send (measured, issue 45).

Malformed tool-call arguments: a tool call whose arguments are not a JSON object raises a
``ModelError`` naming the tool and quoting the bad JSON, so the turn ends with a diagnostic that says
exactly what the model produced (rather than a confusing "invalid arguments" from a tool fed a
placeholder). The exception is a call *cut* by the token limit: ``finish_reason="length"``, or
arguments that do not parse while the completion used all of its ``max_tokens`` — even when the
server says ``finish_reason="tool_calls"``, as llama-cpp-python does. That response is a
``max_tokens`` stop (the turn ends ``max-tokens``, the real cause) and carries no tool calls at all:
the turn ends there, so calls that would never run are not left in the conversation without results.
Unparsable JSON while the reported usage shows tokens to spare stays a ModelError (without a usage
count, JSON that stops mid-way counts as cut). Servers that report ``finish_reason="stop"`` together
with tool calls (some local ones do) get ``stop_reason="tool_use"``.

Servers differ (see :mod:`toh_nb.models.profiles`): ``profile="openai" | "llama.cpp" | "ollama" |
"vllm"`` picks a row of quirks, each overridable by its own keyword (``tool_results_as_text``,
``max_tokens_field``, ``stream_usage``, ``stream_with_tools``, ``unescape_html``,
``tool_choice_required``, ``empty_auto_text``). Whatever the profile: an assistant turn that only
calls tools is sent with ``"content": ""`` (llama-cpp-python rejects ``null`` with HTTP 500);
``tool_choice`` (see :mod:`toh_nb.models.tool_choice`) defaults to ``"auto"`` and is sent whenever
tools are offered (never otherwise); ``max_tokens`` (default 1024) bounds every completion whose
request sets no limit of its own — without one a small local model can ramble to the end of its
context for minutes, and the server keeps generating after the client gave up.

A stream that ends without a ``finish_reason`` (the server cut it with ``[DONE]``, closed the
connection, or answered 200 with an empty body) is not an answer: it is a ModelError naming the model,
retried like a connection error while no text was shown, so the turn ends ``error`` with that
diagnostic rather than ``completed`` with partial text.

HTTP clients are per event loop and are only ever closed on the loop that made them: ``aclose()``
(which ``hub.close()`` calls) closes the current loop's client, leaves a client of another running loop
to that loop, and forgets a client whose loop has closed — its connections died with the loop. The
clients are built without the ``openai`` SDK's garbage-collection hook, which would schedule the close
of a forgotten client on whatever loop runs at that moment, where it fails with "Task exception was
never retrieved … RuntimeError('Event loop is closed')".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import weakref
from typing import Any, Callable

from pydantic import SecretStr

from ..core.secrets import hold as hold_secrets
from ..core.checks import MAX_COUNT, check_count, check_number, check_seconds
from ..core.content import ToolCall, Usage
from ..core.errors import ModelError, UsageError
from ..core.model import ModelRequest, ModelResponse
from .deltas import DeltaSink
from .partial_json import is_cut_json
from .markup import MarkupFilter, notice_text, result_message, strip_markup
from .profiles import DeltaUnescaper, bounded_schema, resolve_profile, unescape_html, unescape_values
from .retry_rules import SHOULD_RETRY, retry_after, server_says_retry, should_retry
from .tool_choice import ToolChoice, check_tool_choice, resolve_tool_choice

log = logging.getLogger(__name__)

#: sent as the key to local servers that need none (only when a base_url is set)
PLACEHOLDER_KEY = "not-needed"

FINISH_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


#: why ``openai`` is missing and how to get it (it is the optional extra ``toh-nb[openai]``)
MISSING_OPENAI = ("OpenAIChatModel needs the 'openai' package, which is an optional extra of toh-nb: "
                  "pip install 'toh-nb[openai]' (the offline models need nothing more)")


def _openai() -> Any:
    # Imported lazily: the openai package takes a while to import, is an optional extra, and offline
    # notebooks never need it.
    try:
        import openai
    except ImportError:
        raise UsageError(MISSING_OPENAI) from None
    return openai


#: completion-token limit of a request that sets none itself
DEFAULT_MAX_TOKENS = 1024


class _StreamCut(Exception):
    """The stream ended (or broke) before the server sent a finish_reason."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class OpenAIChatModel:
    """Any OpenAI-compatible chat-completions endpoint as a model: OpenAI, DeepSeek, Ollama, vLLM, llama.cpp.

    Tool calling, usage (estimated at about four characters a token when the server reports none),
    bounded retries with backoff on 408/409/429/5xx/connection errors (the ``openai`` SDK's rules, a
    server's ``x-should-retry`` and ``Retry-After`` obeyed), per-attempt timeouts, cancellation on
    interrupt or kill, and optional streaming are built in. ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` are
    honoured when ``api_key``/``base_url`` are not given; the key never reaches logs, recordings or reprs.
    Needs the ``openai`` extra (in ``dev``). Nothing is sent before the first request.

    Args:
        model: the model name the server knows (``"gpt-4o-mini"``); also its key in ``prices=``.
        base_url: the endpoint (``http://localhost:11434/v1``); default ``OPENAI_BASE_URL``, else OpenAI's.
        api_key: the key; default ``OPENAI_API_KEY``. A local server with a ``base_url`` needs none.
        max_retries: retries of a 408, 409, 429, 5xx, connection error or timeout, or of a response the
            server marked ``x-should-retry: true`` (0: none); ``x-should-retry: false`` is never retried.
        timeout: seconds per attempt (for a stream: per chunk).
        backoff: the first retry's wait in seconds, doubling per attempt.
        max_backoff: the cap of a retry's wait (``Retry-After``, in seconds or as an HTTP date, and
            ``retry-after-ms`` are honoured within it).
        stream: stream the completion, passing text deltas to ``on_delta``.
        on_delta: ``on_delta(agent_id, text)`` (sync or async), called with each text delta.
        temperature: sent when given; the server's default otherwise.
        extra_body: extra JSON fields for every request body.
        client: an ``openai.AsyncOpenAI`` to use instead of building one.
        max_tokens: the completion limit when a request sets none (``None`` sends none).
        tool_choice: ``"auto"``, ``"none"``, ``"required"``, a tool name, ``None`` (not sent) or a function of
            the ``ModelRequest`` returning one of those.
        profile: the server's quirks: ``"openai"``, ``"llama.cpp"``, ``"ollama"`` or ``"vllm"``
            (``toh_nb/models/profiles.py``); each quirk below overrides the profile's value.
        max_tokens_field: ``"max_completion_tokens"`` or ``"max_tokens"``: the field the limit is sent in.
        tool_results_as_text: send tool results as user text (for templates that drop the tool role).
        stream_usage: ask a stream for usage (``stream_options``).
        stream_with_tools: stream even when tools are offered.
        unescape_html: undo a server's HTML-escaping of the conversation in answers.
        tool_choice_required: whether the server supports ``tool_choice="required"``.
        empty_auto_text: ask an empty ``"auto"`` text answer again with ``tool_choice="none"``.
        stream_to_cancel: stream every request that can be streamed, even when nobody listens, so an
            abandoned request closes its stream and the server stops generating.
        strip_markup: remove chat-template markup (``<tool_call>``, ``<tool_response>``, ``<|im_*|>``) from
            answers, streamed pieces included.
        max_string_chars: bound every string of the tool schemas sent (``maxLength``; arrays get
            ``maxItems``), so even a server's unbounded ``"auto"`` call arguments stay bounded.

    Raises:
        UsageError: the ``openai`` package is missing (naming the extra), ``model`` is empty, a number is
            out of range, ``profile`` is unknown, or ``tool_choice`` is not one the profile supports.
        ModelError: (from a request, ending that turn ``error``) an HTTP error after the retries, a
            malformed response, or no key and no ``base_url``.
    """

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, *,
                 max_retries: int = 3, timeout: float = 60.0, backoff: float = 0.5, max_backoff: float = 30.0,
                 stream: bool = False, on_delta: Callable[[str, str], Any] | None = None,
                 temperature: float | None = None, extra_body: dict | None = None, client: Any = None,
                 max_tokens: int | None = DEFAULT_MAX_TOKENS, tool_choice: ToolChoice = "auto",
                 profile: str = "openai", max_tokens_field: str | None = None,
                 tool_results_as_text: bool | None = None, stream_usage: bool | None = None,
                 stream_with_tools: bool | None = None, unescape_html: bool | None = None,
                 tool_choice_required: bool | None = None, empty_auto_text: bool | None = None,
                 stream_to_cancel: bool | None = None, strip_markup: bool | None = None,
                 max_string_chars: int | None = None) -> None:
        if not isinstance(model, str) or not model:
            raise UsageError("OpenAIChatModel needs a model name, e.g. OpenAIChatModel('gpt-4o-mini')")
        check_count(max_tokens, "max_tokens", none="")
        check_count(max_retries, "max_retries", minimum=0)
        check_seconds(timeout, "timeout", positive=True, none=None)
        check_seconds(backoff, "backoff", none=None)
        check_seconds(max_backoff, "max_backoff", none=None)
        if temperature is not None:
            check_number(temperature, "temperature", unit="", none=None, maximum=MAX_COUNT)
        #: the server's quirks: the named profile with the explicit keywords applied
        self.profile = resolve_profile(profile, {
            "max_tokens_field": max_tokens_field, "tool_results_as_text": tool_results_as_text,
            "stream_usage": stream_usage, "stream_with_tools": stream_with_tools, "unescape_html": unescape_html,
            "tool_choice_required": tool_choice_required, "empty_auto_text": empty_auto_text,
            "stream_to_cancel": stream_to_cancel, "strip_markup": strip_markup, "max_string_chars": max_string_chars})
        if not callable(tool_choice):
            check_tool_choice(tool_choice, required_ok=self.profile.tool_choice_required, profile=self.profile.name)
        self.tool_choice = tool_choice
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        _openai()  # fail at construction, naming the extra, when the package is missing
        self._api_key = SecretStr(api_key) if api_key else None
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.stream = stream
        self.on_delta = on_delta
        self.temperature = temperature
        self.extra_body = dict(extra_body) if extra_body else None
        #: the limit sent when a request sets none (``ModelRequest.max_tokens`` wins); None sends none
        self.max_tokens = max_tokens
        if client is not None and hasattr(client, "with_options"):
            client = client.with_options(max_retries=0)  # our loop does the retries
        self._given_client = client
        # One client per event loop: pooled connections belong to the loop that opened them.
        self._clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]" = weakref.WeakKeyDictionary()
        #: the key held out of the HTTP libraries' logs while this model has a client (toh_nb.core.secrets)
        self._secrets: Any = None
        self._deltas = DeltaSink("OpenAIChatModel")

    @property
    def max_tokens_field(self) -> str:
        """``max_tokens`` for most servers; ``max_completion_tokens`` for OpenAI's reasoning models."""
        return self.profile.max_tokens_field

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    def __getstate__(self) -> dict:
        """Pickled (sent to a Ray host, ``copy.deepcopy``) without its HTTP clients: they belong to this
        process's event loops (and a weak mapping does not pickle); the copy makes its own at first use.
        A key given as ``api_key`` travels with the copy; one read from ``OPENAI_API_KEY`` does not."""
        state = self.__dict__.copy()
        state["_clients"] = None
        state["_secrets"] = None  # the copy holds its key once it makes a client
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._clients = weakref.WeakKeyDictionary()

    # -- client and secrets ----------------------------------------------------------------------

    @property
    def _who(self) -> str:
        return f"OpenAIChatModel({self.model!r} at {self.base_url or 'api.openai.com'})"

    def _resolve_key(self) -> str:
        if self._api_key is not None:
            return self._api_key.get_secret_value()
        env = os.environ.get("OPENAI_API_KEY")
        if env:
            return env
        if self.base_url:
            return PLACEHOLDER_KEY
        raise ModelError(
            f"{self._who}: no API key. Pass api_key=... or set OPENAI_API_KEY; for a local server "
            "(Ollama, vLLM, llama.cpp) pass its base_url, e.g. base_url='http://localhost:11434/v1', "
            "and no key is needed")

    def redact_values(self) -> list[str]:
        """Strings that must never be written anywhere (used by error messages and RecordingModel)."""
        values = []
        if self._api_key is not None:
            values.append(self._api_key.get_secret_value())
        env = os.environ.get("OPENAI_API_KEY")
        if env:
            values.append(env)
        given = getattr(self._given_client, "api_key", None)
        if isinstance(given, str):
            values.append(given)
        return [v for v in values if v and v != PLACEHOLDER_KEY and len(v) >= 4]

    def _scrub(self, text: str) -> str:
        for secret in self.redact_values():
            text = text.replace(secret, "<redacted>")
        return text

    def _hold_secrets(self) -> None:
        """Keep this model's key out of the httpx/httpcore/openai logs while it has a client; released
        by ``aclose()`` once no client is left, or when the model is garbage collected."""
        if self._secrets is None:
            self._secrets = weakref.finalize(self, hold_secrets(self.redact_values()))

    def _client(self) -> Any:
        if self._given_client is not None:
            self._hold_secrets()
            return self._given_client
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            key = self._resolve_key()
            openai = _openai()
            # The SDK's default HTTP client schedules its own close on whatever loop runs when it is
            # garbage-collected — for a client of another (often closed) loop that task fails with
            # "Event loop is closed". The same client class without that hook: we close ours ourselves.
            http_client = openai.DefaultAsyncHttpxClient(timeout=self.timeout)
            client = openai.AsyncOpenAI(api_key=key, base_url=self.base_url, max_retries=0, timeout=self.timeout,
                                        http_client=http_client)
            self._clients[loop] = client
            self._hold_secrets()
        return client

    def clients(self) -> list:
        """The open HTTP clients, one per event loop this model has requested on (see :meth:`aclose`)."""
        return list(self._clients.values())

    async def aclose(self) -> None:
        """Close this loop's HTTP client; forget clients whose loop has closed.

        A client belongs to the loop that made it: closing it from another loop fails ("Event loop is
        closed") or breaks requests still running there. So a client of another loop that still runs
        (the portal thread, a kernel, another hub) stays open for it; a client whose loop has closed
        has no live connections left and is simply forgotten.
        """
        running = asyncio.get_running_loop()
        for loop, client in list(self._clients.items()):
            if loop is running:
                del self._clients[loop]
                await client.close()
            elif loop.is_closed():
                del self._clients[loop]
                # closed here, not left to the garbage collector: the openai client's __del__ would schedule
                # its close as a task of whatever loop runs then, which fails on the dead loop's connections
                # ("Task exception was never retrieved ... Event loop is closed")
                with contextlib.suppress(RuntimeError):
                    await client.close()
        if not self._clients and self._secrets is not None:
            self._secrets()  # the last client is closed: nothing sends the key any more
            self._secrets = None

    # -- request mapping -------------------------------------------------------------------------

    def build_params(self, request: ModelRequest) -> dict:
        """The keyword arguments of ``chat.completions.create`` for ``request`` (public for debugging)."""
        messages: list[dict] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        as_text = self.profile.tool_results_as_text
        results: list[tuple] = []  # one step's tool results, sent as one user message (as_text)
        for message in request.messages:
            if results and not (message.role == "tool" and as_text):
                messages.append({"role": "user", "content": result_message(results)})
                results = []
            if message.role == "assistant":
                # "" rather than null even for a turn that only calls tools: llama-cpp-python's request
                # model requires a string (HTTP 500 on null) and every other server accepts "".
                entry: dict[str, Any] = {"role": "assistant", "content": message.text or ""}
                calls = message.tool_calls
                if calls:
                    entry["tool_calls"] = [
                        {"id": call.id, "type": "function",
                         "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}}
                        for call in calls]
                messages.append(entry)
            elif message.role == "tool" and as_text:
                results.append((message.tool_name, message.text, message.is_error))
            elif message.role == "tool":
                messages.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text})
            else:
                text = notice_text(message.text, message.source) if as_text else message.text
                messages.append({"role": "user", "content": text})
        if results:
            messages.append({"role": "user", "content": result_message(results)})
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.tools:
            bound = self.profile.max_string_chars
            params["tools"] = [
                {"type": "function",
                 "function": {"name": t.name, "description": t.description,
                              "parameters": bounded_schema(t.parameters, bound) if bound else t.parameters}}
                for t in request.tools]
            choice = resolve_tool_choice(self.tool_choice, request, required_ok=self.profile.tool_choice_required,
                                         profile=self.profile.name)
            if choice is not None:
                params["tool_choice"] = choice
        limit = self._limit(request)
        if limit is not None:
            params[self.profile.max_tokens_field] = limit
        if self.temperature is not None:
            params["temperature"] = self.temperature
        # a server that cannot stream a tool the model chooses still streams a forced call or plain text;
        # stream_to_cancel: streamed even when nobody listens, so an abandoned request stops the server
        choice = params.get("tool_choice", "none")
        streamable = self.profile.stream_with_tools or choice == "none" or isinstance(choice, dict)
        if (self.stream or self.profile.stream_to_cancel) and streamable:
            params["stream"] = True
            if self.profile.stream_usage:
                params["stream_options"] = {"include_usage": True}
        if self.extra_body:
            params["extra_body"] = dict(self.extra_body)
        return params

    def _limit(self, request: ModelRequest) -> int | None:
        return request.max_tokens if request.max_tokens is not None else self.max_tokens

    # -- the call --------------------------------------------------------------------------------

    async def request(self, request: ModelRequest) -> ModelResponse:
        client = self._client()
        params = self.build_params(request)
        params["timeout"] = self.timeout
        limit = self._limit(request)
        response = await self._call(client, params, request, limit)
        if (self.profile.empty_auto_text and params.get("tool_choice") == "auto" and not response.tool_calls
                and not response.text and response.stop_reason == "end_turn"):
            # the server chose to answer in text but its "auto" mode cannot produce the text: ask for it
            first = response.usage
            response = await self._call(client, {**params, "tool_choice": "none"}, request, limit)
            total = Usage(first.input_tokens, first.output_tokens, first.estimated)
            total.add(response.usage)
            response.usage = total
        return response

    async def _call(self, client: Any, params: dict, request: ModelRequest, limit: int | None) -> ModelResponse:
        """One chat completion, with bounded retries of transient failures."""
        openai = _openai()
        attempts = self.max_retries + 1
        attempt = 0
        while True:
            attempt += 1
            shown = [False]  # did a streamed text delta reach on_delta during this attempt?
            try:
                if params.get("stream"):
                    return counted(await self._streamed(client, params, request, shown, limit), params, limit)
                completion = await client.chat.completions.create(**params)
                response = counted(self._from_completion(completion, limit), params, limit)
                if self.stream and response.text:  # streaming was off for this request (tools): show it whole
                    await self._deltas.emit(request, response.text, self.on_delta)
                return response
            except openai.APIStatusError as exc:
                retryable = should_retry(exc.status_code, _headers(exc))
                if retryable and attempt < attempts and not shown[0]:
                    await asyncio.sleep(self.retry_delay(attempt, exc))
                    continue
                raise self._status_error(exc, attempt, retryable) from None
            except openai.APIConnectionError as exc:  # includes APITimeoutError
                if attempt < attempts and not shown[0]:
                    await asyncio.sleep(self.retry_delay(attempt, None))
                    continue
                raise self._connection_error(exc, attempt, shown[0]) from None
            except _StreamCut as exc:
                if attempt < attempts and not shown[0]:
                    await asyncio.sleep(self.retry_delay(attempt, None))
                    continue
                raise self._cut_error(exc.detail, attempt, shown[0]) from None
            except openai.APIError as exc:  # an error event inside a stream
                raise ModelError(f"{self._who}: the server reported an error: {self._scrub(str(exc.message))}") from None
            except ValueError as exc:  # the body was not JSON, or JSON of the wrong shape
                raise ModelError(f"{self._who}: malformed response from the server ({type(exc).__name__}: "
                                 f"{self._scrub(str(exc))[:300]}); is base_url an OpenAI-compatible /v1 "
                                 "endpoint?") from None

    def retry_delay(self, attempt: int, exc: Any) -> float:
        """How long the retry loop sleeps after failed attempt ``attempt``: exponential ``backoff`` with
        jitter, at least what the server asked (``retry-after-ms``, ``Retry-After`` in seconds or an HTTP date:
        :func:`~toh_nb.models.retry_rules.retry_after`), at most ``max_backoff`` seconds."""
        delay = self.backoff * (2 ** (attempt - 1)) * (1 + random.random() * 0.25)
        asked = retry_after(_headers(exc))
        if asked is not None:
            delay = max(delay, asked)
        return max(0.0, min(delay, self.max_backoff))

    def _server_message(self, exc: Any) -> str:
        body = getattr(exc, "body", None)
        message = None
        if isinstance(body, dict):
            inner = body.get("error") if isinstance(body.get("error"), dict) else body
            message = inner.get("message") or (body.get("error") if isinstance(body.get("error"), str) else None)
        if not message:
            message = str(body) if body not in (None, "") else str(getattr(exc, "message", "") or exc)
        return self._scrub(str(message))[:500]

    def _status_error(self, exc: Any, attempt: int, retryable: bool) -> ModelError:
        status = exc.status_code
        text = f"{self._who}: HTTP {status}: {self._server_message(exc)}"
        if retryable and attempt > 1:
            text += f" (gave up after {attempt} attempts)"
        elif server_says_retry(_headers(exc)) is False and self.max_retries and should_retry(status, None):
            text += f" (not retried: the server sent {SHOULD_RETRY}: false)"
        elif status == 401:
            text += " (check the API key: api_key=... or OPENAI_API_KEY)"
        elif status == 404:
            text += " (check the model name and base_url)"
        return _model_error(text, status, attempt)

    def _connection_error(self, exc: Any, attempt: int, shown: bool) -> ModelError:
        openai = _openai()
        if isinstance(exc, openai.APITimeoutError):
            what = f"no response within the {self.timeout}s timeout"
        else:
            cause = exc.__cause__ or exc.__context__
            detail = (self._scrub(str(cause)) or type(cause).__name__) if cause else "connection error"
            what = f"connection failed ({detail})"
        text = f"{self._who}: {what}" + _retry_note(attempt, shown, "the stream broke after text was shown")
        return _model_error(text, None, attempt)

    def _cut_error(self, detail: str, attempt: int, shown: bool) -> ModelError:
        text = (f"{self._who}: the stream ended before the server finished the answer ({detail})"
                + _retry_note(attempt, shown, "text was already shown"))
        return _model_error(text, None, attempt)

    # -- responses -------------------------------------------------------------------------------

    def _from_completion(self, completion: Any, limit: int | None = None) -> ModelResponse:
        choices = getattr(completion, "choices", None)
        if not choices:
            preview = completion if isinstance(completion, str) else getattr(completion, "model_dump", lambda: completion)()
            raise ModelError(f"{self._who}: the response is not a chat completion (no choices): "
                             f"{self._scrub(str(preview))[:200]!r}; is base_url an OpenAI-compatible /v1 endpoint?")
        try:
            choice = choices[0]
            message = choice.message
            raw_calls = [(tc.id, tc.function.name, tc.function.arguments)
                         for tc in (message.tool_calls or []) if getattr(tc, "function", None) is not None]
            return self._response(message.content or "", raw_calls, _usage(getattr(completion, "usage", None)),
                                  choice.finish_reason, getattr(message, "refusal", None), limit)
        except (AttributeError, TypeError, KeyError) as exc:
            raise ModelError(f"{self._who}: malformed chat completion ({exc})") from None

    def _response(self, text: str, raw_calls: list[tuple], usage: Usage, finish_reason: str | None,
                  refusal: str | None = None, limit: int | None = None) -> ModelResponse:
        unescape = self.profile.unescape_html
        calls: list[ToolCall] = []
        cut = finish_reason == "length"
        for call_id, name, arguments in raw_calls:
            arguments = arguments or ""
            try:
                parsed = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                if cut or _hit_limit(arguments, usage, limit):
                    cut = True  # the token limit ended the call mid-way, whatever finish_reason says
                    continue
                raise ModelError(f'{self._who}: the model called tool "{name}" with arguments that are not a JSON '
                                 f"object: {arguments[:300]!r}")
            if unescape:
                parsed = unescape_values(parsed)
            calls.append(ToolCall(name or "", parsed, call_id or None))
        if unescape:
            text = unescape_html(text)
        if self.profile.strip_markup:
            text = strip_markup(text)
        stop = "max_tokens" if cut else FINISH_REASONS.get(finish_reason or "")
        if stop == "max_tokens":
            calls = []  # the turn ends here: calls that will never run must not enter the conversation
        elif stop is None or stop == "end_turn":
            stop = "tool_use" if calls else "end_turn"
        elif stop == "tool_use" and not calls:
            stop = "end_turn"
        if refusal and not text and not calls:
            text, stop = refusal, "refusal"
        return ModelResponse(text=text, tool_calls=calls, usage=usage, stop_reason=stop)

    async def _streamed(self, client: Any, params: dict, request: ModelRequest, shown: list,
                        limit: int | None) -> ModelResponse:
        openai = _openai()
        stream = await client.chat.completions.create(**params)
        text: list[str] = []
        refusal: list[str] = []
        slots: dict[int, dict] = {}
        finish_reason = None
        usage = Usage()
        chunks = 0
        unescaper = DeltaUnescaper() if self.profile.unescape_html else None
        markup = MarkupFilter() if self.profile.strip_markup else None
        try:
            async for chunk in stream:
                chunks += 1
                if getattr(chunk, "usage", None):
                    usage = _usage(chunk.usage)
                for choice in getattr(chunk, "choices", None) or []:
                    if (choice.index or 0) != 0:
                        continue
                    if choice.finish_reason:
                        finish_reason = choice.finish_reason
                    delta = choice.delta
                    if delta is None:
                        continue
                    if delta.content:
                        text.append(delta.content)
                        piece = unescaper.feed(delta.content) if unescaper is not None else delta.content
                        piece = markup.feed(piece) if markup is not None else piece
                        if piece:
                            shown[0] = shown[0] or DeltaSink.wanted(request, self.on_delta)
                            await self._deltas.emit(request, piece, self.on_delta)
                    if getattr(delta, "refusal", None):
                        refusal.append(delta.refusal)
                    for tc in delta.tool_calls or []:
                        index = tc.index
                        if index is None:  # servers that omit the index: a new id starts a new call
                            index = len(slots) if (tc.id or not slots) else max(slots)
                        slot = slots.setdefault(index, {"id": None, "name": "", "arguments": []})
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function is not None:
                            if tc.function.name:
                                slot["name"] = tc.function.name
                            if tc.function.arguments:
                                slot["arguments"].append(tc.function.arguments)
        except (openai.APIError, ValueError):
            raise  # the request loop maps these (timeouts, error events, bad JSON)
        except Exception as exc:  # the transport broke mid-stream (e.g. a connection closed mid-chunk)
            raise _StreamCut(f"the connection broke after {chunks} chunk(s): {type(exc).__name__}: "
                             f"{self._scrub(str(exc))[:200]}") from None
        finally:
            await stream.close()
        rest = unescaper.flush() if unescaper is not None else ""
        rest = (markup.feed(rest) + markup.flush()) if markup is not None else rest
        if rest:
            await self._deltas.emit(request, rest, self.on_delta)
        if finish_reason is None:
            raise _StreamCut(f"no finish_reason after {chunks} chunk(s)" if chunks else
                             "the server sent no chunks at all (an empty answer)")
        raw_calls = [(s["id"], s["name"], "".join(s["arguments"])) for _, s in sorted(slots.items())]
        return self._response("".join(text), raw_calls, usage, finish_reason, "".join(refusal) or None, limit)


def _headers(exc: Any) -> Any:
    """The HTTP response headers of an ``openai`` error (None when it carries no response)."""
    return getattr(getattr(exc, "response", None), "headers", None)


def _retry_note(attempt: int, shown: bool, why_not_retried: str) -> str:
    """How a failed request's message ends: why it was not retried, or how often it was tried."""
    if shown:
        return f" \u2014 {why_not_retried}, so it was not retried"
    return f" (gave up after {attempt} attempts)" if attempt > 1 else ""


def _model_error(text: str, status: int | None, attempt: int) -> ModelError:
    """A ModelError carrying the HTTP status (None: no response) and how many attempts were made."""
    error = ModelError(text)
    error.status_code = status  # type: ignore[attr-defined]
    error.attempts = attempt  # type: ignore[attr-defined]
    return error


def _hit_limit(arguments: str, usage: Usage, limit: int | None) -> bool:
    """Were these unparsable arguments cut by the token limit (rather than written wrong)?

    The token count decides when the server reports one: all of ``limit`` used means cut, tokens to
    spare means the model wrote bad JSON. Without a count (0), JSON that stops mid-way counts as cut.
    """
    if usage.output_tokens:
        return limit is not None and usage.output_tokens >= limit
    return is_cut_json(arguments)


#: characters per token of an estimated count (the usual rule of thumb for English text and JSON)
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """About how many tokens ``text`` is (rounded up: any text is at least one token)."""
    return -(-len(text) // CHARS_PER_TOKEN)


def counted(response: ModelResponse, params: dict, limit: int | None = None) -> ModelResponse:
    """``response`` with its usage filled in when the server reported none (``Usage(estimated=True)``).

    Each side the server left at 0 is estimated: the prompt from the request's messages and tools as
    sent, the answer from its text and tool calls — or the whole ``limit`` when the answer stopped at
    it (a call cut there is dropped, but its tokens were generated). A count the server gave is kept."""
    usage = response.usage
    prompt = usage.input_tokens or estimate_tokens(json.dumps(
        [params.get("messages", []), params.get("tools", [])], ensure_ascii=False))
    answer = usage.output_tokens
    if not answer:
        produced = response.text + "".join(
            call.name + json.dumps(call.arguments, ensure_ascii=False) for call in response.tool_calls)
        answer = estimate_tokens(produced)
        if response.stop_reason == "max_tokens" and limit is not None:
            answer = max(answer, limit)
    if (prompt, answer) != (usage.input_tokens, usage.output_tokens):
        response.usage = Usage(prompt, answer, estimated=True)
    return response


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    return Usage(input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                 output_tokens=int(getattr(usage, "completion_tokens", 0) or 0))
