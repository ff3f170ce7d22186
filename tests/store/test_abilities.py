"""The store's optional abilities are declared in the store protocol (``toh_nb.store.base.StoreBase``) with
their defaults: a store of your own that implements only ``SessionStore`` works in a hub, and any ability
it has is used; nothing in the package looks them up with ``getattr``."""

from __future__ import annotations

import asyncio
import pathlib
import re

import toh_nb as tn
from toh_nb.core.session import Session
from toh_nb.store import MemoryStore, full_store, open_store
from toh_nb.store.base import FittedStore, StoreBase

PACKAGE = pathlib.Path(tn.__file__).parent


class MinimalStore:
    """Only the required methods of SessionStore (delegating to a MemoryStore)."""

    def __init__(self) -> None:
        self._memory = MemoryStore()
        self.calls: list[str] = []

    def create(self, header, seed=()):
        return self._memory.create(header, seed)

    def open(self, session_id):
        self.calls.append(f"open {session_id}")
        return self._memory.open(session_id)

    def exists(self, session_id):
        return self._memory.exists(session_id)

    def children_of(self, parent_id):
        return self._memory.children_of(parent_id)

    def headers(self):
        return self._memory.headers()

    def diagnostic(self, session_id):
        return self._memory.diagnostic(session_id)

    def flush(self, session=None, wait=True):
        pass

    def close(self):
        pass


class AcknowledgingStore(MinimalStore):
    def __init__(self) -> None:
        super().__init__()
        self.acks: list[str] = []

    def acknowledged(self, session: Session):
        self.acks.append(session.id)


def test_a_store_with_only_the_required_methods_runs_a_hub_with_the_defaults():
    store = MinimalStore()

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=store, ids="sequential") as hub:
            kid = await hub.start("work", label="w")
            await kid.wait()
            return str(await hub.list_agents()), [r["id"] for r in await hub.agents()]

    assert asyncio.run(main()) == ("agent-1 [ready] \u2014 w", ["root", "agent-1"])
    fitted = full_store(store)
    assert isinstance(fitted, FittedStore) and fitted.inner is store
    assert (fitted.acknowledged(None), fitted.problem("x"), fitted.corrupt_children_of("root"),
            fitted.reads_block) == (None, None, [], False)
    assert fitted.reserved_ids() == [h.id for h in store.headers()]


def test_an_ability_the_store_has_is_used():
    store = AcknowledgingStore()

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=store, ids="sequential") as hub:
            await hub.start("work", label="w")

    asyncio.run(main())
    assert "agent-1" in store.acks  # the start awaited the store's acknowledgement of the child's log


def test_the_package_stores_are_store_bases_and_open_store_keeps_them():
    memory = MemoryStore()
    assert isinstance(memory, StoreBase) and open_store(memory) is memory and full_store(memory) is memory


def test_no_module_of_the_package_looks_up_a_store_ability_with_getattr():
    pattern = re.compile(r"getattr\(\s*(self\.)?(runtime\.)?store\b")
    offenders = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if pattern.search(path.read_text())]
    assert offenders == []
