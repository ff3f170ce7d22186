"""Small argument checks shared by every layer (each caller keeps its own error message)."""

from __future__ import annotations

import math
from typing import Any

from .errors import UsageError
from .ids import invalid_id, is_valid_id


def is_int_at_least(value: object, minimum: int) -> bool:
    """True for a real ``int`` (not a ``bool``) that is at least ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def check_timeout(timeout: Any) -> float | None:
    """A wait's timeout in seconds: a non-negative number, or None for no limit."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or math.isnan(timeout) or timeout < 0:
        raise UsageError(f"timeout must be a non-negative number of seconds or None, got {timeout!r}")
    return float(timeout)


def check_text(value: Any, name: str) -> str:
    """A non-empty string argument (``name`` is what the error calls it)."""
    if not isinstance(value, str):
        raise UsageError(f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise UsageError(f"{name} must not be empty")
    return value


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
