"""The shapes of stored records, checked in one place: session headers, event lines, subagent descriptors.

Why: a store is data from outside the process (another version, a crash, a hand edit, a tool). Every
reader of stored records (the JSONL store's scan, head peek, full load and listing index; the listing;
a resume; a summary) gets them through these checks, so a record of the wrong shape is refused with a
:class:`RecordError` naming the field and what it holds, never an ``AttributeError`` deep inside a
reader, and a reader never has to check again.

Plain functions over the decoded JSON rather than pydantic models: every line of every transcript
and every header of a 10,000-child store goes through them on the way in, and a few type checks
per field cost a fraction of what building a model instance would (bench/store.py, reopen). They
define the shapes and word the errors; a store reads an event line first through
:mod:`toh_nb.core.event_lines` (pydantic's ``TypeAdapter.validate_json``, about half the time for a
well-formed line), which falls back to them for any line it refuses.
Unknown top-level keys of an event or a header are ignored (a newer version may add some); the
descriptor, as the reference defines it, allows no unknown key.

Event kinds (the ``kind`` strings are the interface stores, tables and the widget read) are defined
here too, since their shapes are: see :mod:`toh_nb.core.session`.
"""

from __future__ import annotations

from .ids import is_valid_id

__all__ = ["RecordError", "DescriptorError", "DESCRIPTOR_VERSION", "check_header", "check_event",
           "check_message", "check_descriptor"]

TURN_START = "turn/start"
TURN_END = "turn/end"
USER_MESSAGE = "user/message"
ASSISTANT_MESSAGE = "assistant/message"
TOOL_CALL = "tool/call"
TOOL_RESULT = "tool/result"
DESCRIPTOR = "subagent/descriptor"
#: a follow-up accepted into an agent's inbox (``data``: ``id``, ``content``, ``source``) and ids
#: dropped from it unread (``data``: ``ids``): see :mod:`toh_nb.core.inbox_log`
MESSAGE_QUEUED = "message/queued"
MESSAGE_DISCARDED = "message/discarded"

#: the descriptor version this package writes and validates strictly (another version is not classified)
DESCRIPTOR_VERSION = 2
_ONE_SHOT_KEYS = frozenset({"version", "mode", "provider", "label"})
_CONTINUABLE_KEYS = _ONE_SHOT_KEYS | {"agentProvider", "agentModel", "persona", "toolFilter"}

_ROLES = ("user", "assistant", "tool")
_MESSAGE_KINDS = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT})
_SOURCE_KEYS = ("kind", "form", "sender", "summary", "plugin")
_DATA_KINDS = frozenset({TURN_END, TOOL_CALL, DESCRIPTOR, MESSAGE_QUEUED, MESSAGE_DISCARDED})


class RecordError(ValueError):
    """A stored record of the wrong shape; the message names the field (``message.role: …``)."""


class DescriptorError(RecordError):
    """A descriptor of the current version whose payload is malformed."""


def _what(value: object) -> str:
    """How an error names the value it found (JSON's names: ``object``, ``array``, ``string`` …)."""
    if value is None:
        return "null"
    kind = type(value)
    name = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number"}.get(kind, kind.__name__)
    if kind in (int, float, bool) or (kind is str and len(value) <= 40):
        return f"{name} ({value!r})"
    return name


def _wrong(field: str, expected: str, value: object) -> RecordError:
    return RecordError(f"{field}: expected {expected}, got {_what(value)}")


def _missing(field: str, expected: str) -> RecordError:
    return RecordError(f"{field}: expected {expected}, but it is missing")


def _is_int(value: object, minimum: int = 0) -> bool:
    return type(value) is int and value >= minimum


def _is_number(value: object) -> bool:
    """A finite JSON number (``NaN``/``Infinity`` are what Python's json reads, not JSON)."""
    return (type(value) is float or type(value) is int) and value - value == 0


def _optional_str(data: dict, key: str, prefix: str) -> None:
    value = data.get(key)
    if value is not None and type(value) is not str:
        raise _wrong(prefix + key, "a string", value)


# -- the session header -----------------------------------------------------------------------------


def check_header(data: object, session_id: str | None = None) -> dict:
    """``data`` when it is a session header (of the log named ``session_id``, when given), else RecordError."""
    if type(data) is not dict or data.get("type") != "session":
        raise RecordError('first line is not a session header (no "type": "session")')
    header_id = data.get("id")
    if not is_valid_id(header_id):
        raise _wrong("header id", "a session id (letters, digits, '-', '_', '.', ':')", header_id)
    if session_id is not None and header_id != session_id:
        raise RecordError(f"header names session {header_id!r}, not the file's {session_id!r}")
    if "created" not in data:
        raise _missing("header created", "a number (seconds since the epoch)")
    if not _is_number(data["created"]):
        raise _wrong("header created", "a number (seconds since the epoch)", data["created"])
    parent = data.get("parent_session")
    if parent is not None and not is_valid_id(parent):
        raise _wrong("header parent_session", "a session id", parent)
    _optional_str(data, "origin", "header ")
    for key in ("delegation_depth", "seed_length"):
        value = data.get(key, 0)
        if not _is_int(value):
            raise _wrong("header " + key, "an integer >= 0", value)
    version = data.get("version", 1)
    if not _is_int(version, 1):
        raise _wrong("header version", "an integer >= 1", version)
    return data


# -- event lines --------------------------------------------------------------------------------------


def check_event(data: object) -> dict:
    """``data`` when it is an event line, else RecordError naming the field (``message.role: …``)."""
    if type(data) is not dict:
        raise RecordError(f"event: expected an object, got {_what(data)}")
    seq = data.get("seq")
    if type(seq) is not int or seq < 0:
        raise _wrong("seq", "an integer >= 0", seq) if "seq" in data else _missing("seq", "an integer >= 0")
    kind = data.get("kind")
    if type(kind) is not str or not kind:
        raise _wrong("kind", "a non-empty string", kind) if "kind" in data else _missing("kind", "a string")
    if not _is_number(data.get("time")):
        raise _wrong("time", "a number", data["time"]) if "time" in data else _missing("time", "a number")
    turn = data.get("turn")
    if turn is None:
        if kind == TURN_START or kind == TURN_END:
            raise _missing("turn", f"the turn number of a {kind} event")
    elif type(turn) is not int or turn < 0:
        raise _wrong("turn", "an integer >= 0 or null", turn)
    message = data.get("message")
    if message is not None:
        check_message(message)
    elif kind in _MESSAGE_KINDS:
        raise _missing("message", f"the message of a {kind} event")
    payload = data.get("data")
    if payload is not None:
        if type(payload) is not dict:
            raise _wrong("data", "an object or null", payload)
        if kind == TURN_END:
            reason = payload.get("reason")
            if type(reason) is not str:
                raise _wrong("data.reason", "a string", reason)
            _optional_str(payload, "error", "data.")
            _optional_str(payload, "cause", "data.")
        elif kind == TOOL_CALL:
            for key in ("call_id", "name"):
                if type(payload.get(key)) is not str:
                    raise _wrong("data." + key, "a string", payload.get(key))
            arguments = payload.get("arguments")
            if arguments is not None and type(arguments) is not dict:
                raise _wrong("data.arguments", "an object", arguments)
        elif kind == DESCRIPTOR:
            try:
                check_descriptor(payload)
            except DescriptorError as error:
                raise DescriptorError(f"data: {error}") from None
        elif kind == MESSAGE_QUEUED:
            _check_queued(payload)
        elif kind == MESSAGE_DISCARDED:
            ids = payload.get("ids")
            if type(ids) is not list or not all(type(i) is str and i for i in ids):
                raise _wrong("data.ids", "an array of message ids", ids)
    elif kind in _DATA_KINDS:
        raise _missing("data", f"the data of a {kind} event")
    return data


def check_message(data: object, field: str = "message") -> dict:
    """``data`` when it is a stored message (role, content blocks, id, source, usage), else RecordError."""
    if type(data) is not dict:
        raise _wrong(field, "an object", data)
    role = data.get("role")
    if role not in _ROLES:
        raise _wrong(field + ".role", "one of user, assistant, tool", role)
    content = data.get("content", [])
    if type(content) is not list:
        raise _wrong(field + ".content", "an array of blocks", content)
    for position, block in enumerate(content):
        _check_block(block, f"{field}.content[{position}]")
    _optional_str(data, "id", field + ".")
    _check_source(data.get("source"), field + ".source")
    usage = data.get("usage")
    if usage is not None:
        if type(usage) is not dict:
            raise _wrong(field + ".usage", "an object", usage)
        for key in ("input_tokens", "output_tokens"):
            if not _is_int(usage.get(key)):
                raise _wrong(f"{field}.usage.{key}", "an integer >= 0", usage.get(key))
        if "estimated" in usage and type(usage["estimated"]) is not bool:
            raise _wrong(f"{field}.usage.estimated", "true or false", usage["estimated"])
    return data


def _check_source(source: object, field: str) -> None:
    if source is not None:
        if type(source) is not dict:
            raise _wrong(field, "an object", source)
        for key in source:
            if key not in _SOURCE_KEYS:
                raise RecordError(f'{field}: unknown field "{key}"')
            _optional_str(source, key, field + ".")


def _check_queued(data: dict) -> None:
    """A ``message/queued`` payload: the message id, its content (a text, or an array of blocks) and
    its source (absent: the user's)."""
    message_id = data.get("id")
    if type(message_id) is not str or not message_id:
        raise _wrong("data.id", "a message id", message_id) if "id" in data else _missing("data.id", "a message id")
    content = data.get("content")
    if type(content) is list:
        for position, block in enumerate(content):
            _check_block(block, f"data.content[{position}]")
    elif type(content) is not str:
        expected = "a string or an array of blocks"
        raise _wrong("data.content", expected, content) if "content" in data else _missing("data.content", expected)
    _check_source(data.get("source"), "data.source")


def _check_block(block: object, field: str) -> None:
    if type(block) is not dict:
        raise _wrong(field, "an object", block)
    kind = block.get("type")
    if kind == "text":
        keys = ("text",)
    elif kind == "tool-call":
        keys = ("id", "name")
        arguments = block.get("arguments")
        if arguments is not None and type(arguments) is not dict:
            raise _wrong(field + ".arguments", "an object", arguments)
    elif kind == "tool-result":
        keys = ("call_id", "name", "text")
        is_error = block.get("is_error")
        if is_error is not None and type(is_error) is not bool:
            raise _wrong(field + ".is_error", "a boolean", is_error)
    else:
        raise _wrong(field + ".type", "text, tool-call or tool-result", kind)
    for key in keys:
        if type(block.get(key)) is not str:
            raise _wrong(f"{field}.{key}", "a string", block.get(key))


# -- the subagent descriptor ------------------------------------------------------------------------


def check_descriptor(data: object) -> dict | None:
    """A validated version-2 descriptor; ``None`` for another version (it cannot be classified);
    :class:`DescriptorError` (the reference's texts) for a version-2 descriptor of the wrong shape.
    The shape itself is documented in :mod:`toh_nb.subagents.descriptor`."""
    if type(data) is not dict:
        raise DescriptorError(f"persisted subagent descriptor must be an object, got {_what(data)}")
    if data.get("version") != DESCRIPTOR_VERSION:
        return None
    mode = data.get("mode")
    allowed = _CONTINUABLE_KEYS if mode == "continuable" else _ONE_SHOT_KEYS if mode == "one-shot" else None
    if allowed is None:
        raise DescriptorError(f"persisted subagent descriptor mode must be one-shot or continuable, got {mode!r}")
    for key in data:
        if key not in allowed:
            raise DescriptorError(f'persisted subagent descriptor has unknown field "{key}"')
    if type(data.get("provider")) is not str:
        raise DescriptorError("persisted subagent descriptor provider must be a string")
    for key in ("label", "agentProvider", "agentModel", "persona"):
        if key in data and type(data[key]) is not str:
            raise DescriptorError(f"persisted subagent descriptor {key} must be a string")
    if mode == "continuable" and "label" not in data:
        raise DescriptorError("persisted subagent descriptor label must be a string")
    if "toolFilter" in data:
        flt = data["toolFilter"]
        if type(flt) is not dict or not flt or set(flt) - {"allow", "deny"} or not all(
                type(v) is list and all(type(n) is str for n in v) for v in flt.values()):
            raise DescriptorError("persisted subagent descriptor toolFilter must be {allow?: [str], deny?: [str]}")
    return data
