"""Reading one stored event line: pydantic's ``TypeAdapter.validate_json`` first, the hand-written check after.

Why two paths: ``validate_json`` decodes and checks a well-formed line in one pass in Rust (1.61 µs
against 3.48 µs for ``json.loads`` plus :func:`~toh_nb.core.records.check_event`, issue 45), and every
line of every transcript a store reads goes through here. But its errors are not the ones a corrupt
store must show (``line 7: message.role: expected one of user, assistant, tool, got a string ('x')``,
pinned by the store's tests). So a line the adapter refuses, for whatever reason, is read again the old
way, and that way's error (or its acceptance: the adapter is narrower than the check, never wider) is
the answer. The schema below accepts only what ``check_event`` accepts and yields what ``json.loads``
yields (tests/core/test_event_lines.py checks both on generated lines); anything rarer than the
engine's own kinds (a descriptor, an inbox record, a kind from a newer version) takes the old way.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Optional, Union

import pydantic
from typing_extensions import NotRequired, TypedDict

from .records import (ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START, USER_MESSAGE,
                      check_event)

#: exact JSON types (no bool for an int, no string for a number) and no NaN or infinity where a field is checked
_OPEN = pydantic.ConfigDict(extra="allow", strict=True, allow_inf_nan=False)
_CLOSED = pydantic.ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

_Count = Annotated[int, pydantic.Field(ge=0)]


class _TextBlock(TypedDict):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    type: Literal["text"]
    text: str


class _CallBlock(TypedDict):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    type: Literal["tool-call"]
    id: str
    name: str
    arguments: NotRequired[Optional[dict[str, Any]]]


class _ResultBlock(TypedDict):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    type: Literal["tool-result"]
    call_id: str
    name: str
    text: str
    is_error: NotRequired[Optional[bool]]


_Block = Annotated[Union[_TextBlock, _CallBlock, _ResultBlock], pydantic.Field(discriminator="type")]


class _Source(TypedDict, total=False):
    __pydantic_config__ = _CLOSED  # type: ignore[misc]
    kind: Optional[str]
    form: Optional[str]
    sender: Optional[str]
    summary: Optional[str]
    plugin: Optional[str]


class _Usage(TypedDict):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    input_tokens: _Count
    output_tokens: _Count
    estimated: NotRequired[bool]


class _Message(TypedDict):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    role: Literal["user", "assistant", "tool"]
    content: NotRequired[list[_Block]]
    id: NotRequired[Optional[str]]
    source: NotRequired[Optional[_Source]]
    usage: NotRequired[Optional[_Usage]]


class _EndData(TypedDict):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    reason: str
    error: NotRequired[Optional[str]]
    cause: NotRequired[Optional[str]]


class _CallData(TypedDict):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    call_id: str
    name: str
    arguments: NotRequired[Optional[dict[str, Any]]]


def _line(name: str, kind: Any, turn: Any, message: Any, data: Any) -> Any:
    """The shape of one kind's line, its fields in the order the engine writes them."""
    fields = {"seq": _Count, "kind": kind, "time": Union[int, float], "turn": turn, "message": message, "data": data}
    return pydantic.with_config(_OPEN)(TypedDict(name, fields))  # type: ignore[operator]


_MAYBE_TURN = NotRequired[Optional[_Count]]
_MAYBE_MESSAGE = NotRequired[Optional[_Message]]
_MAYBE_DATA = NotRequired[Optional[dict[str, Any]]]
_TurnStart = _line("_TurnStart", Literal["turn/start"], _Count, _MAYBE_MESSAGE, _MAYBE_DATA)
_TurnEnd = _line("_TurnEnd", Literal["turn/end"], _Count, _MAYBE_MESSAGE, _EndData)
_Said = _line("_Said", Literal["user/message", "assistant/message", "tool/result"], _MAYBE_TURN, _Message, _MAYBE_DATA)
_Called = _line("_Called", Literal["tool/call"], _MAYBE_TURN, _MAYBE_MESSAGE, _CallData)


#: the engine's own event kinds, each with its rules; other kinds take the hand-written check
FAST_KINDS = frozenset({TURN_START, TURN_END, USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT, TOOL_CALL})

#: the fast check: a line of one of :data:`FAST_KINDS`, of a shape ``check_event`` accepts
EVENT_LINE = pydantic.TypeAdapter(Annotated[Union[_TurnStart, _TurnEnd, _Said, _Called],
                                        pydantic.Field(discriminator="kind")])


def read_event_line(line: bytes | str) -> dict:
    """The decoded event of one stored line.

    Raises:
        ValueError: (``json.JSONDecodeError``) the line is not JSON; ``UnicodeDecodeError``: not text.
        RecordError: JSON of the wrong shape, naming the field (``check_event``'s text).
    """
    try:
        return EVENT_LINE.validate_json(line)
    except pydantic.ValidationError:
        pass  # not JSON, a wrong shape, or a rarer kind: the hand-written way says which
    return check_event(json.loads(line))
