"""Session stores: the protocol, the in-memory store and the JSONL store."""

from .base import SessionStore, StoreBase, full_store
from .memory import MemoryStore

__all__ = ["SessionStore", "StoreBase", "MemoryStore", "open_store", "reserved_ids", "full_store"]


def reserved_ids(store: SessionStore) -> list[str]:
    """Every id the store holds, including logs it cannot read (corrupt, a FIFO, a directory …):
    new ids must skip all of them, or a sequential id would collide with an unreadable log."""
    return list(full_store(store).reserved_ids())


def open_store(store: "str | SessionStore | None", **options) -> SessionStore:
    """``None`` → memory; a path → JSONL directory; a store object → itself."""
    if store is None:
        return MemoryStore()
    if isinstance(store, (str, bytes)) or hasattr(store, "__fspath__"):
        from .jsonl import JsonlStore

        return JsonlStore(store, **options)
    if isinstance(store, SessionStore):
        return full_store(store)  # a store of your own gets the defaults of the abilities it lacks
    from ..core.errors import UsageError

    raise UsageError(f"store must be None, a directory path or a SessionStore, got {type(store).__name__}")
