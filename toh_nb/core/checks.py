"""Small argument checks shared by every layer (each caller keeps its own error message)."""

from __future__ import annotations


def is_int_at_least(value: object, minimum: int) -> bool:
    """True for a real ``int`` (not a ``bool``) that is at least ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum
