"""Session stores: the protocol, the in-memory store and the JSONL store."""

from .base import SessionStore
from .memory import MemoryStore

__all__ = ["SessionStore", "MemoryStore", "open_store", "reserved_ids"]


def reserved_ids(store: SessionStore) -> list[str]:
    """Every id the store holds, including logs it cannot read (corrupt, a FIFO, a directory …):
    new ids must skip all of them, or a sequential id would collide with an unreadable log."""
    reserved = getattr(store, "reserved_ids", None)
    if reserved is not None:
        return list(reserved())
    return [h.id for h in store.headers()]


def open_store(store: "str | SessionStore | None", **options) -> SessionStore:
    """``None`` → memory; a path → JSONL directory; a store object → itself."""
    if store is None:
        return MemoryStore()
    if isinstance(store, (str, bytes)) or hasattr(store, "__fspath__"):
        from .jsonl import JsonlStore

        return JsonlStore(store, **options)
    if isinstance(store, SessionStore):
        return store
    from ..core.errors import UsageError

    raise UsageError(f"store must be None, a directory path or a SessionStore, got {type(store).__name__}")
