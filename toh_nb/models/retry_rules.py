"""When to retry a failed HTTP response, and how long the server asked us to wait.

Why these rules: they are the ``openai`` SDK's own (``_should_retry`` and ``_parse_retry_after_header``
in its base client), which OpenAI-compatible servers are written against: 408, 409, 429 and every 5xx
are retried; the server's ``x-should-retry: true|false`` overrides the status; ``retry-after-ms``,
``Retry-After`` in seconds or as an HTTP date say how long to wait. The adapter keeps its own loop
(the client runs with ``max_retries=0``: cancellable, bounded, counting attempts for its messages), so
it takes the SDK's rules rather than its loop; before, 408/409 failed at once, ``x-should-retry`` was
ignored and an HTTP-date ``Retry-After`` was retried after 0.04 s where the server asked for 1 s.
"""

from __future__ import annotations

import email.utils
import math
import time
from typing import Any, Callable

#: statuses retried whatever their body says (a request timeout, a conflict, a rate limit)
RETRIED_STATUSES = frozenset({408, 409, 429})

#: the header a server sets to say whether this very response may be retried
SHOULD_RETRY = "x-should-retry"


def should_retry(status: int, headers: Any) -> bool:
    """Retry this response? The server's ``x-should-retry`` first, else 408, 409, 429 and ≥ 500."""
    told = server_says_retry(headers)
    if told is not None:
        return told
    return status in RETRIED_STATUSES or status >= 500


def server_says_retry(headers: Any) -> bool | None:
    """``x-should-retry`` as a bool: exactly ``"true"`` or ``"false"`` (as the SDK reads it), else None."""
    value = headers.get(SHOULD_RETRY) if headers is not None else None
    return {"true": True, "false": False}.get(value)


def retry_after(headers: Any, now: Callable[[], float] = time.time) -> float | None:
    """The seconds the server asked to wait (``retry-after-ms``, then ``Retry-After`` in seconds or as an
    HTTP date), or None when it asked nothing usable (absent, unreadable, not finite, not in the future).
    """
    if headers is None:
        return None
    seconds = None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        seconds = _number(millis)
        seconds = seconds / 1000 if seconds is not None else None
    if seconds is None:
        value = headers.get("retry-after")
        if value is None:
            return None
        seconds = _number(value)
        if seconds is None:
            seconds = _date_from_now(value, now)
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return None
    return seconds


def _number(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _date_from_now(text: str, now: Callable[[], float]) -> float | None:
    """Seconds from ``now()`` until an HTTP date (``Wed, 21 Oct 2015 07:28:00 GMT``), None if it is none."""
    parsed = email.utils.parsedate_tz(text)
    if parsed is None:
        return None
    try:
        return email.utils.mktime_tz(parsed) - now()
    except (OverflowError, ValueError):
        return None
