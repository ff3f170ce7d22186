"""Identifier generators.

Agent ids double as session ids (one identity per agent, as in the reference). ``uuid`` mode mints
random v4 UUIDs; ``sequential`` mode mints ``agent-1, agent-2, …`` (and ``msg-1``, ``run-1``,
``call-1`` for the other kinds) so notebook outputs are reproducible run after run.
"""

from __future__ import annotations

import itertools
import re
import uuid
from typing import Iterable, Literal

IdMode = Literal["uuid", "sequential"]

#: Every id that can name a session: what the file-system store accepts as a file name.
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


def is_valid_id(value: object) -> bool:
    """True for strings that are safe as session ids (no separators, no ``..``, no NUL)."""
    return isinstance(value, str) and bool(ID_PATTERN.fullmatch(value)) and ".." not in value


#: what an id may be, as the errors that refuse one say it
ID_GRAMMAR = "letters, digits, '-', '_', '.', ':' (no '..'), starting with a letter or digit, at most 128 characters"


def invalid_id(value: str, name: str) -> str:
    """The one text refusing an id from outside that can name no agent (a path such as ``a/../b``)."""
    return f"{name} {value!r} is not a valid id ({ID_GRAMMAR})"


class IdSource:
    """Mints ids of every kind for one runtime."""

    __slots__ = ("mode", "_agents", "_messages", "_runs", "_calls")

    def __init__(self, mode: IdMode = "uuid") -> None:
        if mode not in ("uuid", "sequential"):
            from .errors import UsageError

            raise UsageError(f'ids must be "uuid" or "sequential", got {mode!r}')
        self.mode = mode
        self._agents = itertools.count(1)
        self._messages = itertools.count(1)
        self._runs = itertools.count(1)
        self._calls = itertools.count(1)

    def _mint(self, prefix: str, counter: itertools.count) -> str:
        if self.mode == "uuid":
            return str(uuid.uuid4())
        return f"{prefix}-{next(counter)}"

    def agent(self) -> str:
        return self._mint("agent", self._agents)

    def message(self) -> str:
        return self._mint("msg", self._messages)

    def run(self) -> str:
        return self._mint("run", self._runs)

    def call(self) -> str:
        # Tool-call ids are never shown to users as identities; a cheap counter serves both modes.
        return f"call-{next(self._calls)}"

    def skip_past(self, existing: Iterable[str]) -> None:
        """After reopening a store, continue sequential numbering beyond the ids already used."""
        if self.mode != "sequential":
            return
        highest = 0
        for value in existing:
            if value.startswith("agent-") and value[6:].isdigit():
                highest = max(highest, int(value[6:]))
        if highest:
            self._agents = itertools.count(highest + 1)
