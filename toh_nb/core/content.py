"""Content blocks and messages: the conversation vocabulary shared by agents, models and stores.

Plain slotted classes rather than pydantic models: thousands of them are created per second on
the delegation hot path, and they convert to and from JSON with :func:`block_to_json` /
:func:`message_to_json` for the JSONL store and recordings.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union

Role = Literal["user", "assistant", "tool"]

#: Where a user-role message came from. Provenance only: a source never grants authority.
SOURCE_KINDS = ("user", "coordinator", "subagent-report", "subagent-settled", "plugin")


@dataclass(slots=True, frozen=True)
class Text:
    text: str
    type: Literal["text"] = "text"


@dataclass(slots=True, frozen=True)
class ToolCall:
    """A tool call requested by a model: what a model's response (or a ``ScriptedModel`` step) asks to run.

    Raises nothing: a plain frozen record. The engine checks the arguments against the tool's schema
    when it runs the call (a bad one becomes an ``Error: …`` result the model reads).

    Args:
        name: the tool's name, as offered to the model (``"subagent"``, ``"job_output"``, a user tool).
        arguments: the call's arguments, a JSON object as a dict.
        id: the call id the result answers; filled in by the engine when the model gives none.
    """

    name: str
    arguments: dict = field(default_factory=dict)
    id: str | None = None


@dataclass(slots=True, frozen=True)
class ToolCallBlock:
    id: str
    name: str
    arguments: dict
    type: Literal["tool-call"] = "tool-call"


@dataclass(slots=True, frozen=True)
class ToolResultBlock:
    call_id: str
    name: str
    text: str
    is_error: bool = False
    type: Literal["tool-result"] = "tool-result"


Block = Union[Text, ToolCallBlock, ToolResultBlock]


@dataclass(slots=True)
class Usage:
    """Tokens of a model call, or a sum of calls: what budgets charge and what the tables and tree show.

    ``estimated`` is True when a count was not the server's but estimated by the adapter (a stream that
    reported no usage: about four characters per token), so a budget still counts the call; a sum is
    estimated when any part of it was. Raises nothing: a plain record.

    Args:
        input_tokens: prompt tokens.
        output_tokens: completion tokens.
        estimated: whether the counts are the adapter's estimate rather than the server's report.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False

    def add(self, other: "Usage | None") -> None:
        if other is not None:
            self.input_tokens += other.input_tokens
            self.output_tokens += other.output_tokens
            self.estimated = self.estimated or other.estimated

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(slots=True, frozen=True)
class Source:
    """Provenance of a user-role message: who or what put it into the conversation.

    A prompt from you is ``Source("user")``; a follow-up relayed from another agent, a settlement notice or
    a report carries its sender's session id, its form and a short summary, so the transcript and the tree
    can say where each message came from. Raises nothing: a plain frozen record.

    Args:
        kind: one of ``SOURCE_KINDS`` in ``toh_nb.core.content`` (``"user"`` for your own prompts).
        form: ``"relay"``, ``"notice"`` or ``"snapshot"``; ``None`` for a direct prompt.
        sender: the session id of the agent that sent it.
        summary: a short summary (at most 120 characters), as notices show it.
        plugin: the name of the plug-in that produced it, if one did.
    """

    kind: str = "user"
    form: str | None = None  # relay | notice | snapshot
    sender: str | None = None  # session id of the agent that sent it
    summary: str | None = None
    plugin: str | None = None


USER_SOURCE = Source("user")

#: how long a source's ``summary`` may be (the reference bounds notice summaries to 120 characters)
SUMMARY_LIMIT = 120


def bound(text: str, limit: int = SUMMARY_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis when it was longer."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


@functools.lru_cache(maxsize=4096)
def relay_source(kind: str, sender: str) -> Source:
    """Sources are immutable, so the relay source of one sender is shared by all its messages."""
    return Source(kind, form="relay", sender=sender)


class Message:
    """One conversation message: what a transcript holds and what a model reads in ``ModelRequest.messages``.

    ``role`` is ``user`` (prompts, follow-ups, notices, reports — see ``source``), ``assistant`` (model
    output, possibly with tool calls) or ``tool`` (one tool result). ``content`` is a list of blocks
    (text, tool call, tool result); ``message.text`` is its text.

    A message of one block — most of them: every prompt, follow-up and plain answer, every tool result, a
    step's lone tool call — keeps a text as its ``str`` and a tool block without its list, and builds the
    list each time ``content`` is read. Why: the blocks and their lists were 44 of the ~117 objects the
    garbage collector tracked per idle continuable child after 11 turns, and each full collection walks
    every one (bench/README.md, round eight). So ``content`` of such a message is a new list at every
    read: assign ``message.content = [...]`` to change it; changing the list read does not change the
    message. Raises nothing: a plain record.

    Args:
        role: ``"user"``, ``"assistant"`` or ``"tool"``.
        content: a text, or a list of content blocks.
        id: the message id (``msg-3``), given by the engine.
        source: where a user-role message came from (``Source``).
        usage: the tokens of the model call that produced an assistant message.
    """

    __slots__ = ("role", "_content", "id", "source", "usage")
    __match_args__ = ("role", "content", "id", "source", "usage")

    def __init__(self, role: Role, content: "list | str", id: str | None = None, source: Source | None = None,
                 usage: Usage | None = None) -> None:
        self.role = role
        self._content = _packed(content)
        self.id = id
        self.source = source
        self.usage = usage

    @property
    def content(self) -> list:
        packed = self._content
        kind = type(packed)
        if kind is str:
            return [Text(packed)]
        return [packed] if kind is ToolCallBlock or kind is ToolResultBlock else packed

    @content.setter
    def content(self, value: "list | str") -> None:
        self._content = _packed(value)

    @property
    def packed(self) -> "str | Block | list":
        """The content as stored: the text of a one-text message, a single block, or the block list
        (what the JSON forms write without wrapping a plain text in a block)."""
        return self._content

    @property
    def text(self) -> str:
        """The text blocks joined by newlines (a tool message: the rendered result)."""
        packed = self._content
        if type(packed) is str:
            return packed
        parts = []
        for block in self.content:
            if block.type == "text" or block.type == "tool-result":
                parts.append(block.text)
        return "\n".join(parts)

    @property
    def tool_calls(self) -> list[ToolCall]:
        if type(self._content) is str:
            return []
        return [ToolCall(b.name, b.arguments, b.id) for b in self.content if b.type == "tool-call"]

    @property
    def tool_call_id(self) -> str | None:
        for block in self.content:
            if block.type == "tool-result":
                return block.call_id
        return None

    @property
    def is_error(self) -> bool:
        return any(b.type == "tool-result" and b.is_error for b in self.content)

    @property
    def tool_name(self) -> str | None:
        for block in self.content:
            if block.type == "tool-result":
                return block.name
        return None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (self.role, self.content, self.id, self.source, self.usage) == \
            (other.role, other.content, other.id, other.source, other.usage)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass it was

    def __repr__(self) -> str:
        kind = f" {self.source.kind}" if self.source is not None and self.role == "user" else ""
        return f"Message({self.role}{kind}: {self.text!r})"


@dataclass
class _MessageFields:
    """The fields ``Message`` had as a dataclass. Why: ``Message`` is public and was a dataclass, so
    ``dataclasses.fields/replace/asdict/is_dataclass`` keep working on it; its own ``__init__`` takes
    the same arguments and ``content`` reads as the list it was."""

    role: Role
    content: list
    id: str | None = None
    source: Source | None = None
    usage: Usage | None = None


Message.__dataclass_fields__ = _MessageFields.__dataclass_fields__  # type: ignore[attr-defined]
Message.__dataclass_params__ = _MessageFields.__dataclass_params__  # type: ignore[attr-defined]


def _packed(content: "list | str") -> "list | str | Block":
    """What a :class:`Message` keeps of ``content``: the text of a lone text block, a lone tool call or
    tool result without its list, else the blocks as given."""
    if type(content) is list and len(content) == 1:
        block = content[0]
        kind = type(block)
        if kind is Text:
            return block.text
        if kind is ToolCallBlock or kind is ToolResultBlock:
            return block
    return content


class MessagesView(Sequence):
    """A read-only snapshot of an append-only message list, made in O(1).

    A model request carries the agent's whole conversation; copying it for every model call made long
    conversations quadratic. Because the log only ever grows, the first ``length`` entries never change,
    so a view bounded by the length at request time is a true snapshot. Slicing returns a plain list.
    """

    __slots__ = ("_items", "_length")

    def __init__(self, items: list) -> None:
        self._items = items
        self._length = len(items)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self._items[: self._length][index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("message index out of range")
        return self._items[index]

    def __iter__(self):
        items = self._items
        for position in range(self._length):
            yield items[position]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, MessagesView)):
            return len(other) == self._length and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return f"MessagesView({list(self)!r})"


def user_message(text_or_blocks: str | list, id: str | None = None, source: Source | None = None) -> Message:
    content = text_or_blocks if isinstance(text_or_blocks, str) else list(text_or_blocks)
    return Message("user", content, id=id, source=source or USER_SOURCE)


def text_of(blocks: list, sep: str = "") -> str:
    """Concatenate the text blocks of ``blocks`` (no separator by default, as foreground results are)."""
    return sep.join(b.text for b in blocks if b.type == "text")


# -- JSON conversion (stores, recordings) -------------------------------------------------------


def block_to_json(block: Block) -> dict:
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool-call":
        return {"type": "tool-call", "id": block.id, "name": block.name, "arguments": block.arguments}
    return {
        "type": "tool-result",
        "call_id": block.call_id,
        "name": block.name,
        "text": block.text,
        "is_error": block.is_error,
    }


def block_from_json(data: dict) -> Block:
    kind = data.get("type")
    if kind == "text":
        return Text(data["text"])
    if kind == "tool-call":
        return ToolCallBlock(data["id"], data["name"], dict(data.get("arguments") or {}))
    if kind == "tool-result":
        return ToolResultBlock(data["call_id"], data["name"], data["text"], bool(data.get("is_error")))
    raise ValueError(f"unknown content block type {kind!r}")


def source_to_json(source: Source | None) -> dict | None:
    if source is None:
        return None
    return {k: v for k, v in (("kind", source.kind), ("form", source.form), ("sender", source.sender),
                              ("summary", source.summary), ("plugin", source.plugin)) if v is not None}


def message_to_json(message: Message) -> dict:
    packed = message.packed  # a plain text is written without a block
    data: dict[str, Any] = {"role": message.role, "content": [{"type": "text", "text": packed}]
                            if type(packed) is str else [block_to_json(b) for b in message.content]}
    if message.id is not None:
        data["id"] = message.id
    if message.source is not None:
        data["source"] = source_to_json(message.source)
    if message.usage is not None:
        data["usage"] = usage_to_json(message.usage)
    return data


def usage_to_json(usage: Usage) -> dict:
    """``{"input_tokens", "output_tokens"}``, plus ``"estimated": true`` for an estimated count."""
    data: dict[str, Any] = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    if usage.estimated:
        data["estimated"] = True
    return data


def usage_from_json(data: dict) -> Usage:
    return Usage(int(data.get("input_tokens", 0)), int(data.get("output_tokens", 0)), data.get("estimated") is True)


def content_to_json(message: Message) -> "str | list[dict]":
    """A message's content in its compact stored form: the text of a one-text message as a string,
    else its blocks (what a queued follow-up's record holds, ``toh_nb.core.inbox_log``)."""
    packed = message.packed
    return packed if type(packed) is str else [block_to_json(b) for b in message.content]


def content_from_json(data: "str | list[dict]") -> "str | list[Block]":
    """The inverse of :func:`content_to_json` (for a shape already checked by ``toh_nb.core.records``)."""
    return data if type(data) is str else [block_from_json(b) for b in data]


def message_from_json(data: dict) -> Message:
    source = data.get("source")
    usage = data.get("usage")
    return Message(
        data["role"],
        [block_from_json(b) for b in data.get("content", [])],
        id=data.get("id"),
        source=Source(**source) if source else None,
        usage=usage_from_json(usage) if usage else None,
    )
