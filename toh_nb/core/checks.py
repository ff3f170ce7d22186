"""Small argument checks shared by every layer.

Every numeric parameter of the public API (timeouts, waits, intervals, budgets, counts) goes through
:func:`check_seconds` or :func:`check_count`, so each refuses the same things the same way: a ``bool``
(``True`` is an ``int`` to Python, never a count to a caller), NaN, a negative value, and a value past
the documented maximum -- with a :class:`UsageError` naming the Python parameter. Why a maximum: past it
a number is not a limit anyone means, and letting it through fails later, far from the call, with a
bare ``OverflowError`` (``10**400`` cannot become a float; a thread wait refuses more than
``threading.TIMEOUT_MAX`` seconds; a deque refuses a length past ``sys.maxsize``).
"""

from __future__ import annotations

import math
from typing import Any

from .errors import UsageError
from .ids import invalid_id, is_valid_id

#: the most seconds a timeout, wait, interval or time budget accepts (about 31.7 years; ``None`` is the
#: way to say "no limit"). Below ``threading.TIMEOUT_MAX`` on every platform.
MAX_SECONDS = 10**9
#: the largest count an integer parameter accepts (``2**53 - 1``, the reference's "safe integer")
MAX_COUNT = 2**53 - 1


def is_int_at_least(value: object, minimum: int) -> bool:
    """True for a real ``int`` (not a ``bool``) that is at least ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def shown(value: Any) -> str:
    """``repr(value)`` for an error message, cut short (``10**400`` has 401 digits)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}\u2026 ({len(text)} characters)"


def _or_none(none: str | None) -> str:
    if none is None:
        return ""
    return f" or None ({none})" if none else " or None"


def check_number(value: Any, name: str, *, unit: str = "seconds", positive: bool = False,
                 none: str | None = "no limit", maximum: int = MAX_SECONDS) -> float | None:
    """A number: non-negative (``positive``: above zero), at most ``maximum`` (``unit`` names what it
    counts in the message: ``seconds``, or ``""``).

    ``none``: what ``None`` means (``None`` passes and is returned), or ``None`` when it is refused.
    Infinity is refused as too large (``None`` is how a caller says "no limit")."""
    if value is None and none is not None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float)
                                                                          and math.isnan(value)) \
            or value < 0 or (positive and value == 0):
        sign = "positive" if positive else "non-negative"
        of = f" of {unit}" if unit else ""
        raise UsageError(f"{name} must be a {sign} number{of}{_or_none(none)}, got {shown(value)}")
    if value > maximum:
        limit = " (None means no limit)" if none is not None else ""
        units = f" {unit}" if unit else ""
        raise UsageError(f"{name} must be at most {maximum}{units}{limit}, got {shown(value)}")
    return float(value)


def check_seconds(value: Any, name: str, *, positive: bool = False, none: str | None = "no limit") -> float | None:
    """A number of seconds up to :data:`MAX_SECONDS` (see :func:`check_number`)."""
    return check_number(value, name, positive=positive, none=none)


def check_count(value: Any, name: str, *, minimum: int = 1, none: str | None = None, note: str = "") -> int | None:
    """An integer count from ``minimum`` to :data:`MAX_COUNT` (a ``bool`` is refused).

    ``none`` as in :func:`check_seconds`; ``note`` says what the count counts (``tokens``)."""
    if value is None and none is not None:
        return None
    if not is_int_at_least(value, minimum):
        about = f" ({note})" if note else ""
        raise UsageError(f"{name} must be an integer >= {minimum}{about}{_or_none(none)}, got {shown(value)}")
    if value > MAX_COUNT:
        raise UsageError(f"{name} must be at most {MAX_COUNT}, got {shown(value)}")
    return value


def check_flag(value: Any, name: str) -> bool:
    """``True`` or ``False`` (a truthy list or string is a mistake, not a yes)."""
    if not isinstance(value, bool):
        raise UsageError(f"{name} must be True or False, got {shown(value)}")
    return value


def check_timeout(timeout: Any, name: str = "timeout") -> float | None:
    """A wait's timeout in seconds: a non-negative number, or None for no limit."""
    return check_seconds(timeout, name)


def check_text(value: Any, name: str) -> str:
    """A non-empty string argument (``name`` is what the error calls it)."""
    if not isinstance(value, str):
        raise UsageError(f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise UsageError(f"{name} must not be empty")
    return value


def job_id_of(value: Any, name: str = "job_id") -> str:
    """A job id (``subagent-N``) from an id string or a Job handle (SPEC: handles are accepted wherever an
    id is)."""
    if isinstance(value, str):
        return check_text(value, name)
    job_id = getattr(value, "id", None)
    if isinstance(job_id, str) and hasattr(value, "child_id"):  # a Job or AsyncJob (a Child has no child_id)
        return check_text(job_id, name)
    raise UsageError(f"{name} must be a string or a Job handle, got {type(value).__name__}")


def agent_id_of(value: Any, name: str = "agent_id") -> str:
    """An agent id from an id string or a Child/Job handle (a job means the child doing its work).

    An id that matches no id grammar (:func:`toh_nb.core.ids.is_valid_id`: a path such as
    ``x/../../victim``) is refused here, before anything looks it up in a store."""
    if isinstance(value, str):
        check_text(value, name)
        agent_id = value
    else:
        agent_id = getattr(value, "child_id", None)
        if not isinstance(agent_id, str):
            agent_id = getattr(value, "id", None)
        if not isinstance(agent_id, str):
            raise UsageError(f"{name} must be a string or a Child/Job handle, got {type(value).__name__}")
    if not is_valid_id(agent_id):
        raise UsageError(invalid_id(agent_id, name))
    return agent_id
