"""The session store protocol: where session logs live.

``store=None`` keeps logs in memory (:class:`~toh_nb.store.memory.MemoryStore`); ``store="dir/"``
writes one JSONL file per session (:class:`~toh_nb.store.jsonl.JsonlStore`). Both behave the same
within one process: a settled continuable child lists as ``ready`` and resumes from its log.
"""

from __future__ import annotations

from typing import Iterable, Protocol, runtime_checkable

from ..core.session import Event, Session, SessionHeader


@runtime_checkable
class SessionStore(Protocol):
    """What the runtime needs from a store.

    ``create`` starts a new log (header plus seed events); ``open`` returns the log of an existing
    session for a cold resume (raising ``KeyError`` when there is none); ``children_of`` lists the
    headers whose ``parent_session`` is the given id, in creation order, for ``list_agents``.
    ``flush(session, wait=False)`` only requests a sync (the engine calls it on the loop thread).

    Optional (looked up with ``getattr``, so older stores keep working): ``acknowledged(session)``
    returns an awaitable that resolves once the session's events so far are recorded (``None``: no
    wait); ``reserved_ids()`` lists every id the store holds, unreadable ones included, so new
    sequential ids never collide; ``descriptor(id)`` returns a child's last descriptor without
    loading its transcript.
    """

    def create(self, header: SessionHeader, seed: Iterable[Event] = ()) -> Session: ...

    def open(self, session_id: str) -> Session: ...

    def exists(self, session_id: str) -> bool: ...

    def children_of(self, parent_id: str) -> list[SessionHeader]: ...

    def headers(self) -> list[SessionHeader]: ...

    def diagnostic(self, session_id: str) -> str | None: ...

    def flush(self, session: Session | None = None, wait: bool = True) -> None: ...

    def close(self) -> None: ...
