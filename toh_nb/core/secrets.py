"""Secrets kept out of the HTTP libraries' DEBUG logs while a model or provider holds them.

Why: with the root logger at DEBUG (``logging.basicConfig(level=logging.DEBUG)``, common in notebooks),
``httpcore`` logs every response's headers and ``openai`` its request options; a server that echoes the
``Authorization`` header (proxies and debugging endpoints do) put the ``sk-…`` key into twenty records
of one request. What holds a secret registers its values with :func:`hold` (an ``OpenAIChatModel``
its API key once it has a client; an ``AcpAgent`` its ``env`` values and a ``RayProvider`` its
``env_vars`` values while a hub uses them), and releases them when it closes.

How: while at least one secret is held, a log-record factory wraps the process's current one
(``logging.setLogRecordFactory``) and, for records of the :data:`LOGGERS` families only (``httpx``,
``httpcore``, ``openai`` and every child such as ``httpcore.http11``, including loggers created later),
replaces each held value in the formatted message by :data:`MASK` (then ``record.args`` is emptied,
so no handler or filter can format the secret back in) and in the exception text. Why a factory rather
than a filter: a logger's filters see only the records logged on that very logger, not those its
children propagate to it, and handlers belong to the user. The root logger, its handlers and levels
are never touched; when the last holder releases, the previous factory is put back (if another
library wrapped ours meanwhile, ours stays in its chain but does nothing).

Why our own (measured, issue 45): the openai SDK's own redaction alone leaked the key into 1 of 18
DEBUG records of such a request; with this masking, none.
"""

from __future__ import annotations

import itertools
import logging
import threading
import traceback
from typing import Any, Callable, Iterable

#: logger families whose records are scrubbed: a name, a dotted child of one, or a renamed vendored copy
#: (``httpx2``/``httpcore2``, which some ``openai`` builds log under)
LOGGERS = ("httpx", "httpcore", "openai")
MASK = "<redacted>"
#: shorter values are not treated as secrets (masking "a" would garble every record)
MIN_LENGTH = 8

_lock = threading.Lock()
_held: dict[int, tuple[str, ...]] = {}
_tokens = itertools.count(1)
#: every held value and its escaped spellings, longest first (read without the lock by the factory)
_patterns: tuple[str, ...] = ()
_previous: Callable[..., logging.LogRecord] | None = None
_in_chain = False  # our factory is part of the factory chain (at its top, or wrapped by another)


def hold(values: Iterable[Any]) -> Callable[[], None]:
    """Register secret ``values`` (strings; short or empty ones are ignored) and return ``release``,
    which is idempotent. Installs the scrubbing factory with the first held secret."""
    kept = tuple(sorted({v for v in values if isinstance(v, str) and len(v) >= MIN_LENGTH}))
    if not kept:
        return _nothing
    with _lock:
        token = next(_tokens)
        _held[token] = kept
        _refresh()
    released = []

    def release() -> None:
        if released:
            return
        released.append(True)
        with _lock:
            _held.pop(token, None)
            _refresh()

    return release


def _nothing() -> None:
    return None


def held() -> tuple[str, ...]:
    """The values held now (for tests and diagnostics)."""
    with _lock:
        return tuple(sorted({v for values in _held.values() for v in values}))


def masked(text: str) -> str:
    """``text`` with every held secret (and its escaped spellings) replaced by :data:`MASK`."""
    for pattern in _patterns:
        if pattern in text:
            text = text.replace(pattern, MASK)
    return text


def _spellings(value: str) -> set[str]:
    """The value as it may appear in a message: itself, inside a ``repr`` of a str or of bytes (how
    httpcore prints headers), JSON-escaped."""
    import json

    forms = {value, repr(value)[1:-1], json.dumps(value)[1:-1]}
    try:
        forms.add(repr(value.encode())[2:-1])
    except UnicodeEncodeError:
        pass
    return {form for form in forms if form}


def _refresh() -> None:
    """With the lock held: recompute the patterns; install or remove the factory as needed."""
    global _patterns, _previous, _in_chain
    values = {v for vs in _held.values() for v in vs}
    _patterns = tuple(sorted({form for v in values for form in _spellings(v)}, key=len, reverse=True))
    current = logging.getLogRecordFactory()
    if values and not _in_chain:
        _previous = current
        logging.setLogRecordFactory(_factory)
        _in_chain = True
    elif not values and _in_chain and current is _factory:
        logging.setLogRecordFactory(_previous)
        _previous = None
        _in_chain = False


def _factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
    record = (_previous or logging.LogRecord)(*args, **kwargs)
    if _patterns and record.name.startswith(LOGGERS) and in_families(record.name):
        _scrub(record)
    return record


def in_families(name: str) -> bool:
    """``name`` is one of :data:`LOGGERS`, a child (``httpcore.http11``) or a numbered copy (``httpcore2``)."""
    return name.partition(".")[0].rstrip("0123456789") in LOGGERS


def _scrub(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a record that cannot be formatted is left to logging's own error report
        return
    clean = masked(message)
    if clean != message:
        record.msg, record.args = clean, None
    if record.exc_info and record.exc_info[0] is not None:
        text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        record.exc_text = masked(text)
