"""How LocalModel shows a request to a local chat model: tools, tool calls and tool results as text.

Why text and not a ``tool`` role: a small model's chat template usually knows only ``system``,
``user`` and ``assistant`` (SmolLM2's does), and templates that do know ``tool`` render it in
incompatible ways, some by dropping the result (llama.cpp's ``chatml-function-calling`` renders
tool messages without their content, so a root never sees its child's answer). So LocalModel uses
one Hermes-style convention that any template can carry:

- the offered tools are listed first in the system message (first, so that every agent of a tree
  shares the same prompt prefix and the model's KV cache is reused across agents);
- an assistant tool call is the assistant's text ``<tool_call>\\n{"name": …, "arguments": {…}}\\n</tool_call>``;
- the results of one step's tool calls are one plain user message ("Here is the answer of the subagent: …
  Using it, reply to my request in your own words.", :func:`toh_nb.models.markup.result_message`), with
  the result text verbatim, so the model reads every word of it and answers from it (shown the results
  inside ``<tool_response>`` tags, SmolLM2 answered with the tags, 4 runs of 5).

Pure functions of the request, no llama.cpp import: the unit tests check the exact texts.
"""

from __future__ import annotations

import json
from typing import Sequence

from ..core.content import ToolCall
from ..core.model import ModelRequest, ToolSpec
from .markup import notice_text, result_message

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"

TOOLS_HEADER = (
    "# Tools\n\n"
    "You can call one of the tools below. To call a tool, reply with only this, and nothing after it:\n"
    f"{CALL_OPEN}\n"
    '{"name": "<tool name>", "arguments": {<the arguments as a JSON object>}}\n'
    f"{CALL_CLOSE}\n"
    "A tool's result comes back in the next user message. "
    "When you need no tool, answer in plain text.\n\n"
    "<tools>\n"
)
TOOLS_FOOTER = "</tools>"


def tools_block(tools: Sequence[ToolSpec]) -> str:
    """The tool list that opens the system message (one compact JSON object per line)."""
    lines = [json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters},
                        ensure_ascii=False, separators=(", ", ": ")) for t in tools]
    return TOOLS_HEADER + "\n".join(lines) + "\n" + TOOLS_FOOTER


def render_call(call: ToolCall) -> str:
    body = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
    return f"{CALL_OPEN}\n{body}\n{CALL_CLOSE}"


def chat_messages(request: ModelRequest, *, show_tools: bool) -> list[dict]:
    """The request as plain ``system``/``user``/``assistant`` chat messages (``content`` strings)."""
    system_parts = []
    if show_tools and request.tools:
        system_parts.append(tools_block(request.tools))
    if request.system:
        system_parts.append(request.system)
    messages: list[dict] = []
    if system_parts:
        messages.append({"role": "system", "content": "\n\n".join(system_parts)})
    results: list[tuple] = []  # consecutive tool results, merged into one user message

    def flush() -> None:
        if results:
            messages.append({"role": "user", "content": result_message(results)})
            results.clear()

    for message in request.messages:
        if message.role == "tool":
            results.append((message.tool_name, message.text, message.is_error))
            continue
        flush()
        if message.role == "assistant":
            parts = [message.text] if message.text else []
            parts.extend(render_call(call) for call in message.tool_calls)
            messages.append({"role": "assistant", "content": "\n".join(parts)})
        else:
            messages.append({"role": "user", "content": notice_text(message.text, message.source)})
    flush()
    return messages


def merge_system(messages: list[dict]) -> list[dict]:
    """For templates that refuse a system role: the system text opens the first user message."""
    if not messages or messages[0]["role"] != "system":
        return messages
    system, rest = messages[0]["content"], [dict(m) for m in messages[1:]]
    for message in rest:
        if message["role"] == "user":
            message["content"] = f"{system}\n\n{message['content']}"
            return rest
    return [{"role": "user", "content": system}, *rest]


def parse_call(body: str, allowed: Sequence[str]) -> ToolCall:
    """The tool call in ``body`` (what followed ``<tool_call>\\n``), which the grammar made valid."""
    from ..core.errors import ModelError

    text = body.strip()
    if text.endswith(CALL_CLOSE):
        text = text[: -len(CALL_CLOSE)].strip()
    try:
        data = json.loads(text)
    except ValueError:
        raise ModelError(f"LocalModel: the tool call is not valid JSON: {body[:300]!r}") from None
    if not isinstance(data, dict) or data.get("name") not in allowed or not isinstance(data.get("arguments"), dict):
        raise ModelError(f"LocalModel: the tool call does not name an offered tool with an arguments object: "
                         f"{body[:300]!r}")
    return ToolCall(data["name"], data["arguments"])
