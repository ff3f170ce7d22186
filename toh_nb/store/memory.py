"""The in-memory session store: logs live as long as the process (the default, ``store=None``)."""

from __future__ import annotations

from typing import Iterable

from ..core.errors import StoreError
from ..core.ids import is_valid_id
from ..core.session import Event, Session, SessionHeader
from .base import StoreBase


class MemoryStore(StoreBase):
    """Keeps every session object; ``open`` hands back the same log a settled child left behind."""

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self._children: dict[str | None, list[str]] = {}

    def create(self, header: SessionHeader, seed: Iterable[Event] = ()) -> Session:
        if not is_valid_id(header.id):
            raise StoreError(f"invalid session id {header.id!r}: use letters, digits, '-', '_', '.', ':'")
        if header.id in self._sessions:
            raise StoreError(f'session "{header.id}" already exists')
        session = Session(header, seed)
        self._sessions[header.id] = session
        self._children.setdefault(header.parent_session, []).append(header.id)
        return session

    def open(self, session_id: str) -> Session:
        return self._sessions[session_id]

    def exists(self, session_id: str) -> bool:
        return session_id in self._sessions

    def children_of(self, parent_id: str) -> list[SessionHeader]:
        return [self._sessions[i].header for i in self._children.get(parent_id, ())]

    def headers(self) -> list[SessionHeader]:
        return [s.header for s in self._sessions.values()]

    def diagnostic(self, session_id: str) -> str | None:
        return None

    def flush(self, session: Session | None = None, wait: bool = True) -> None:
        return None

    def acknowledged(self, session: Session, records: Iterable[Event] | None = None) -> None:
        """Nothing to wait for: an in-memory event is recorded when it is appended."""
        return None

    def descriptor(self, session_id: str) -> dict | None:
        return self._sessions[session_id].descriptor

    def reserved_ids(self) -> list[str]:
        return list(self._sessions)

    def close(self) -> None:
        return None

    def __len__(self) -> int:
        return len(self._sessions)
