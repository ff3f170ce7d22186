"""The session store protocol: where session logs live.

``store=None`` keeps logs in memory (:class:`~toh_nb.store.memory.MemoryStore`); ``store="dir/"``
writes one JSONL file per session (:class:`~toh_nb.store.jsonl.JsonlStore`). Both behave the same
within one process: a settled continuable child lists as ``ready`` and resumes from its log.

A store has the required methods of :class:`SessionStore` and the optional abilities of
:class:`StoreBase`, each declared here with its default (what a store that lacks it gets). The
engine calls them as plain methods: a store built on :class:`StoreBase` overrides the ones it does
better; a store of your own that only implements :class:`SessionStore` is fitted with the defaults by
:func:`full_store` (``open_store`` does it), keeping any ability it has (each is a small typed
protocol below), so nothing is looked up with ``getattr``.
"""

from __future__ import annotations

from typing import Any, Awaitable, Iterable, Protocol, runtime_checkable

from ..core.session import Event, LogSummary, Session, SessionHeader, summarize


@runtime_checkable
class SessionStore(Protocol):
    """What the runtime needs from a store.

    ``create`` starts a new log (header plus seed events); ``open`` returns the log of an existing
    session for a cold resume (raising ``KeyError`` when there is none); ``children_of`` lists the
    headers whose ``parent_session`` is the given id, in creation order, for ``list_agents``.
    ``flush(session, wait=False)`` only requests a sync (the engine calls it on the loop thread).
    The optional abilities and their defaults are :class:`StoreBase`'s.
    """

    def create(self, header: SessionHeader, seed: Iterable[Event] = ()) -> Session: ...

    def open(self, session_id: str) -> Session: ...

    def exists(self, session_id: str) -> bool: ...

    def children_of(self, parent_id: str) -> list[SessionHeader]: ...

    def headers(self) -> list[SessionHeader]: ...

    def diagnostic(self, session_id: str) -> str | None: ...

    def flush(self, session: Session | None = None, wait: bool = True) -> None: ...

    def close(self) -> None: ...


# -- the optional abilities, one small protocol each ------------------------------------------------

@runtime_checkable
class Acknowledging(Protocol):
    def acknowledged(self, session: Session, records: Iterable[Event] | None = None) -> Awaitable[None] | None: ...


@runtime_checkable
class ReservingIds(Protocol):
    def reserved_ids(self) -> list[str]: ...


@runtime_checkable
class Describing(Protocol):
    def descriptor(self, session_id: str) -> dict | None: ...


@runtime_checkable
class Summarizing(Protocol):
    def summary(self, session_id: str) -> LogSummary: ...


@runtime_checkable
class DiagnosingListings(Protocol):
    def listing_diagnostic(self, session_id: str) -> str | None: ...


@runtime_checkable
class ExplainingProblems(Protocol):
    def problem(self, session_id: str) -> str | None: ...


@runtime_checkable
class ListingCorrupt(Protocol):
    def corrupt_children_of(self, parent_id: str) -> list[str]: ...


@runtime_checkable
class BlockingReads(Protocol):
    reads_block: bool


class StoreBase:
    """The optional abilities of a store, with their defaults (see the module docstring)."""

    #: ``open`` reads a disk: the engine calls it off the loop (a slow disk stalls no agent)
    reads_block: bool = False

    def acknowledged(self, session: Session, records: Iterable[Event] | None = None) -> Awaitable[None] | None:
        """An awaitable that resolves once ``session``'s events so far are recorded (``None``: they
        are, as soon as appended). ``records``: the events an acknowledging call (start, send, kill)
        wrote; a store that can should never write them once the awaitable failed."""
        return None

    def reserved_ids(self) -> list[str]:
        """Every id the store holds, unreadable ones included, so new sequential ids never collide."""
        return [h.id for h in self.headers()]  # type: ignore[attr-defined]

    def descriptor(self, session_id: str) -> dict | None:
        """A child's last descriptor (without loading its transcript, when the store can)."""
        return self.open(session_id).descriptor  # type: ignore[attr-defined]

    def summary(self, session_id: str) -> LogSummary:
        """What the agents table shows of a stored log (a store may keep it rather than parse again)."""
        return summarize(self.open(session_id))  # type: ignore[attr-defined]

    def listing_diagnostic(self, session_id: str) -> str | None:
        """``diagnostic`` as a listing needs it (a store may answer without parsing every transcript)."""
        return self.diagnostic(session_id)  # type: ignore[attr-defined]

    def problem(self, session_id: str) -> str | None:
        """What is wrong with a corrupt log (which line, which field); None when the store cannot say."""
        return None

    def corrupt_children_of(self, parent_id: str) -> list[str]:
        """Ids of logs under ``parent_id`` whose header cannot be read (listed as diagnostics)."""
        return []


class FittedStore(StoreBase):
    """A store that implements only :class:`SessionStore` (and maybe some abilities), with the
    defaults of the others: what :func:`full_store` returns for it. ``inner`` is the store itself."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        # each ability the store has replaces the default (checked once, here, by its typed protocol)
        self.reads_block = bool(inner.reads_block) if isinstance(inner, BlockingReads) else False
        if isinstance(inner, Acknowledging):
            acknowledged = inner.acknowledged  # a store of one's own may not take the records: never passed
            self.acknowledged = lambda session, records=None: acknowledged(session)  # type: ignore[method-assign]
        if isinstance(inner, ReservingIds):
            self.reserved_ids = inner.reserved_ids  # type: ignore[method-assign]
        if isinstance(inner, Describing):
            self.descriptor = inner.descriptor  # type: ignore[method-assign]
        if isinstance(inner, Summarizing):
            self.summary = inner.summary  # type: ignore[method-assign]
        if isinstance(inner, DiagnosingListings):
            self.listing_diagnostic = inner.listing_diagnostic  # type: ignore[method-assign]
        if isinstance(inner, ExplainingProblems):
            self.problem = inner.problem  # type: ignore[method-assign]
        if isinstance(inner, ListingCorrupt):
            self.corrupt_children_of = inner.corrupt_children_of  # type: ignore[method-assign]

    def create(self, header: SessionHeader, seed: Iterable[Event] = ()) -> Session:
        return self.inner.create(header, seed)

    def open(self, session_id: str) -> Session:
        return self.inner.open(session_id)

    def exists(self, session_id: str) -> bool:
        return self.inner.exists(session_id)

    def children_of(self, parent_id: str) -> list[SessionHeader]:
        return self.inner.children_of(parent_id)

    def headers(self) -> list[SessionHeader]:
        return self.inner.headers()

    def diagnostic(self, session_id: str) -> str | None:
        return self.inner.diagnostic(session_id)

    def flush(self, session: Session | None = None, wait: bool = True) -> None:
        self.inner.flush(session, wait)

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return f"FittedStore({self.inner!r})"


def full_store(store: Any) -> StoreBase:
    """``store`` with every optional ability: itself when it is a :class:`StoreBase`, else fitted."""
    return store if isinstance(store, StoreBase) else FittedStore(store)
