"""Server profiles: the known quirks of the OpenAI-compatible servers people run, in one table.

Why a table: "OpenAI-compatible" servers differ in small ways that break an agent loop silently (tools
dropped, tool results dropped, a stream that ends empty). Each quirk is one field of
:class:`ServerProfile`; ``OpenAIChatModel(profile=...)`` picks a row and every field can be overridden
by the keyword of the same name, so an unknown server is handled by stating its quirks explicitly.

Fields (what the adapter does differently when the field says so):

- ``tool_results_as_text`` — tool results are sent as a ``user`` message ("Here is the answer of the
  subagent: … Using it, reply to my request in your own words.", consecutive results of one step merged
  into one message, :func:`toh_nb.models.markup.result_message`) instead of ``role: "tool"``
  messages, for chat templates that drop the content of tool messages. Worded for small models, a
  background subagent start and a job's completion notice also name the ``job_output`` call with the
  job's exact id (:func:`toh_nb.models.markup.notice_text`). The assistant's tool-call turn
  keeps its structured ``tool_calls``: those templates render it in the model's own call syntax, so the
  conversation reads "I called X" → "X returned …" (rendering the call as prose would teach the model
  to describe calls instead of making them).
- ``max_tokens_field`` — the request key for the completion-token limit (``max_tokens`` or
  ``max_completion_tokens``).
- ``stream_usage`` — whether ``stream_options={"include_usage": True}`` is sent with streams.
- ``stream_with_tools`` — whether a streamed request may let the model choose a tool (``"auto"``,
  ``"required"``). When not, such a request is made without streaming and its text is passed to
  ``on_delta`` in one piece; a request that forces one tool by name, or offers none, still streams.
- ``stream_to_cancel`` — stream every request that can be streamed, even when nobody listens to the
  deltas: the server stops an abandoned *stream* at its next token when the client closes the
  connection (interrupt, kill, timeout, hub close), while a plain request runs to its end on the server
  and later requests queue behind it. Without a usage chunk the usage is then estimated.
- ``strip_markup`` — chat-template markup the model writes as text (a ``<tool_call>`` block, a
  ``<tool_response>`` tag, ``<|im_end|>``) is removed from its answers, streamed deltas included
  (:mod:`toh_nb.models.markup`); tool results sent as text are worded as a plain message
  ("Here is the answer of the subagent: …") that small models answer from.
- ``max_string_chars`` — a bound (``maxLength``) added to every string of the tool schemas sent that
  has none, and ``max_items`` likewise (``maxItems``) to arrays: servers that build a grammar from the
  schema (llama-cpp-python) then cannot generate endless arguments, even in ``"auto"`` mode where they
  ignore ``max_tokens`` for the arguments. None sends the schemas unchanged.
- ``unescape_html`` — the server's chat template HTML-escapes earlier turns, so the model parrots
  ``&#39;`` / ``&#34;``; the five escapes of Jinja's autoescape (``&amp; &lt; &gt; &#34; &#39;``) are
  undone in the model's text and in string values of tool-call arguments.
- ``tool_choice_required`` — whether ``tool_choice="required"`` is supported (else a UsageError at
  construction, or when a ``tool_choice`` callable returns it).
- ``empty_auto_text`` — with ``tool_choice="auto"`` the server can pick a tool but returns an empty text
  when the model chose to answer in text; the adapter then asks the same request again with
  ``tool_choice="none"`` and returns that text (usage of both calls added up).

The rows, and how each quirk was verified:

- ``"openai"`` (default): no quirks. The OpenAI API itself (documentation); also what the project's
  strict stand-in server checks in the tests.
- ``"llama.cpp"``: llama-cpp-python's server (``python -m llama_cpp.server``) with
  ``--chat_format chatml-function-calling``, the format that gives small GGUF models tool calling.
  Verified on a real server on this machine (llama-cpp-python 0.3.36, SmolLM2-135M-Instruct Q4_1) and
  in its source (``llama_chat_format.chatml_function_calling``): without ``tool_choice`` the tools are
  dropped from the prompt (the adapter always sends one when tools are offered); ``role: "tool"``
  content is not rendered (→ ``tool_results_as_text``); the template is autoescaped
  (→ ``unescape_html``); ``max_completion_tokens`` and ``stream_options`` are ignored (→ ``max_tokens``,
  no ``stream_usage``); a streamed ``"auto"`` request whose model picks a tool fails ("Automatic
  streaming tool choice is not supported": an empty 200 body in the 2026-11-30 real-LLM report, a
  dropped connection here) (→ no ``stream_with_tools``); ``"required"`` is an HTTP 500 (→ not supported); in ``"auto"`` mode a
  text answer comes back empty — the grammar of its text branch only allows a function name or the end
  token (→ ``empty_auto_text``). Two server behaviours the adapter cannot change: in ``"auto"`` mode
  tool arguments are generated with no token limit (force the tool by name, or use ``"none"``, where
  ``max_tokens`` holds), and a forced call cut by ``max_tokens`` still says
  ``finish_reason: "tool_calls"`` (the adapter turns cut arguments into a ``max_tokens`` stop). The
  input side of the HTML escaping cannot be undone either: the model reads ``I&#39;m`` in earlier
  turns (``python -m toh_nb serve-model`` renders without escaping); nor can the prompt cache across a
  ``"none"`` step on a plain server: the adapter sends the tools with ``tool_choice="none"`` as on every
  server, but that template renders a ``"none"`` request without its functions block and without the
  ``message:`` prefixes of earlier answers (read in ``chatml_function_calling``), so that request
  shares only the system text with a forced one. ``serve-model`` renders it with both
  (``toh_nb.serve.model.none_keeps_tools``), so each request extends the previous one there. llama.cpp's own ``llama-server --jinja`` accepts null content, tool messages and
  ``max_completion_tokens`` (measured in the 2026-11-30 report): use ``"openai"`` there.
  Measured on 2026-12-01 (``--chat_format chatml-function-calling --n_ctx 4096``; that build needed
  ``--n_batch 1 --n_ubatch 1``, it crashed on multi-token batches): null assistant content → HTTP 500
  "7 validation errors … Input should be a valid string"; tools without ``tool_choice`` → 11 prompt
  tokens, as with none; a 2-character and a 220-character tool result → 27 prompt tokens both;
  ``"required"`` → HTTP 500 with an empty message; ``"auto"`` with a text answer → ``content: ""``,
  ``finish_reason: "stop"``; a forced call with ``max_tokens=3`` → arguments ``{ "``,
  ``finish_reason: "tool_calls"``; ``max_completion_tokens=3`` → 146 tokens; ``stream_options`` → no
  usage chunk; two concurrent streams → the first ends after one chunk with no ``finish_reason``. With
  this profile and ``tool_choice=lambda r: "subagent" if r.depth == 0 and r.step == 1 else "none"`` a
  delegation ran end to end: the root called ``subagent``, the child answered, the root's next request
  carried the child's answer as text and the root completed (streamed deltas joined to the text).
- ``"ollama"``: Ollama's ``/v1`` compatibility layer. From its documentation (not run here): accepts
  ``max_tokens`` (``max_completion_tokens`` is not listed), ``stream_options.include_usage``, tools and
  ``role: "tool"`` messages rendered by the model's own template.
- ``"vllm"``: vLLM's OpenAI server. From its documentation (not run here): ``auto``, ``required`` (vLLM
  >= 0.8.3), ``none`` and named tool choice; ``"auto"`` needs the server started with
  ``--enable-auto-tool-choice --tool-call-parser <parser>`` (else HTTP 400, which names the flags).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..core.errors import UsageError

MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")


@dataclass(frozen=True, slots=True)
class ServerProfile:
    """The quirks of one kind of server (see the module docstring for what each field changes)."""

    name: str
    tool_results_as_text: bool = False
    max_tokens_field: str = "max_tokens"
    stream_usage: bool = True
    stream_with_tools: bool = True
    unescape_html: bool = False
    tool_choice_required: bool = True
    empty_auto_text: bool = False
    stream_to_cancel: bool = False
    strip_markup: bool = False
    max_string_chars: int | None = None


#: the bound of strings and arrays in tool schemas sent to servers that generate arguments under a grammar
ARGUMENT_STRING_CHARS = 600
ARGUMENT_ITEMS = 32


PROFILES: dict[str, ServerProfile] = {
    "openai": ServerProfile("openai"),
    "llama.cpp": ServerProfile("llama.cpp", tool_results_as_text=True, stream_usage=False, stream_with_tools=False,
                               unescape_html=True, tool_choice_required=False, empty_auto_text=True,
                               stream_to_cancel=True, strip_markup=True, max_string_chars=ARGUMENT_STRING_CHARS),
    "ollama": ServerProfile("ollama"),
    "vllm": ServerProfile("vllm"),
}

def resolve_profile(name: Any, overrides: dict[str, Any]) -> ServerProfile:
    """The profile called ``name`` with the explicit keyword ``overrides`` (those not None) applied."""
    if not isinstance(name, str) or name not in PROFILES:
        raise UsageError(f"unknown server profile {name!r}; expected one of {', '.join(repr(n) for n in PROFILES)}")
    given = {key: value for key, value in overrides.items() if value is not None}
    for key, value in given.items():
        if key == "max_string_chars":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"max_string_chars must be a positive int or None (the profile's default), got {value!r}")
        elif key == "max_tokens_field":
            if value not in MAX_TOKENS_FIELDS:
                raise UsageError(f"max_tokens_field must be one of {', '.join(repr(f) for f in MAX_TOKENS_FIELDS)}, "
                                 f"got {value!r}")
        elif not isinstance(value, bool):
            raise UsageError(f"{key} must be True, False or None (the profile's default), got {value!r}")
    return replace(PROFILES[name], **given)


# -- the HTML autoescape of Jinja templates (markupsafe's five escapes), undone -------------------------

_ESCAPES = (("&#34;", '"'), ("&#39;", "'"), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))


def unescape_html(text: str) -> str:
    """Undo exactly markupsafe's escapes (``&amp;`` last, so ``&amp;lt;`` becomes ``&lt;`` as it was)."""
    if "&" not in text:
        return text
    for escaped, plain in _ESCAPES:
        text = text.replace(escaped, plain)
    return text


def unescape_values(value: Any) -> Any:
    """:func:`unescape_html` applied to every string inside parsed JSON (keys and values)."""
    if isinstance(value, str):
        return unescape_html(value)
    if isinstance(value, list):
        return [unescape_values(v) for v in value]
    if isinstance(value, dict):
        return {unescape_html(k): unescape_values(v) for k, v in value.items()}
    return value


class DeltaUnescaper:
    """:func:`unescape_html` for streamed text: an escape split across deltas is held back until whole,
    so the deltas shown join to exactly the final (unescaped) text."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        text = self._held + piece
        cut = text.rfind("&")
        if cut != -1 and ";" not in text[cut:] and len(text) - cut < 6:  # maybe the start of an escape
            text, self._held = text[:cut], text[cut:]
        else:
            self._held = ""
        return unescape_html(text)

    def flush(self) -> str:
        text, self._held = self._held, ""
        return text


# -- bounded tool schemas -----------------------------------------------------------------------------


def bounded_schema(schema: object, max_chars: int, max_items: int = ARGUMENT_ITEMS) -> object:
    """A copy of a JSON Schema where every string without ``maxLength`` gets ``max_chars`` and every
    array without ``maxItems`` gets ``max_items`` (schemas nested anywhere included)."""
    if isinstance(schema, list):
        return [bounded_schema(item, max_chars, max_items) for item in schema]
    if not isinstance(schema, dict):
        return schema
    bounded = {key: bounded_schema(value, max_chars, max_items) if key not in ("const", "enum", "default",
                                                                             "examples") else value
               for key, value in schema.items()}
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "string" in kinds and "maxLength" not in schema and "enum" not in schema and "const" not in schema:
        bounded["maxLength"] = max_chars
    if "array" in kinds and "maxItems" not in schema:
        bounded["maxItems"] = max_items
    return bounded
