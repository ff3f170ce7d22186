"""The hub's GC policy, opt-in (``gc=True``, or the process's ``set_enabled(True)``): frozen survivors of
full collections while such a hub is open, bounded dead cycles; a hub that did not ask leaves the
process's collector alone.

Each test leaves the process as it found it (no hold, nothing frozen, automatic collection on). The
automatic collector is paused during each test so that only the test's own ``gc.collect()`` calls run
(an automatic full collection in between would shift the policy's freeze/reset sequence)."""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref

import pytest

import toh_nb as tn
from toh_nb.core import gc_policy


class Node:
    """A tracked object that can sit in a reference cycle and be watched with a weak reference."""

    def __init__(self) -> None:
        self.other = self


@pytest.fixture(autouse=True)
def clean_policy(monkeypatch):
    assert not gc_policy.active() and gc.get_freeze_count() == 0
    gc.disable()
    try:
        yield monkeypatch
    finally:
        gc.enable()
        gc_policy.set_enabled(False)  # the default: off unless a hub or the program asks
        gc.unfreeze()
    assert not gc_policy.active()


def open_hub(gc: bool | None = True) -> tn.AsyncHub:
    return tn.AsyncHub(tn.FunctionModel(lambda request: "ok"), ids="sequential", gc=gc)


def test_a_hub_that_did_not_ask_leaves_the_collector_alone(clean_policy):
    clean_policy.setattr(gc_policy, "ENGAGE", 0)  # would engage at the first full collection
    callbacks = list(gc.callbacks)

    async def main():
        for hub in (open_hub(gc=None), open_hub(gc=False)):
            async with hub:
                await hub.spawn("work")
                assert not gc_policy.active() and gc.callbacks == callbacks
                node = Node()
                dead = weakref.ref(node)
                gc.collect()
                del node
                gc.collect()
                assert dead() is None and gc.get_freeze_count() == 0  # the collector's own semantics

    asyncio.run(main())
    with tn.Hub(ids="sequential") as hub:  # the sync twin too
        assert not gc_policy.active() and hub.config.gc is None


def test_the_sync_hub_opts_in_with_gc_true_and_closing_releases_it():
    with tn.Hub(ids="sequential", gc=True) as hub:
        assert gc_policy.active() and hub.config.gc is True
    assert not gc_policy.active()


def test_the_programs_choice_applies_to_hubs_that_do_not_say_and_gc_false_overrides_it():
    async def main():
        gc_policy.set_enabled(True)
        assert gc_policy.enabled()
        async with open_hub(gc=False):
            assert not gc_policy.active()
        async with open_hub(gc=None):
            assert gc_policy.active()
        assert not gc_policy.active()

    asyncio.run(main())


@pytest.mark.parametrize("bad", ["freeze", 1, 0.0])
def test_gc_takes_true_false_or_none(bad):
    with pytest.raises(tn.UsageError) as error:
        tn.AsyncHub(gc=bad)
    assert str(error.value) == f"gc must be True, False or None, got {bad!r}"
    with pytest.raises(tn.UsageError) as error:
        tn.Hub(gc=bad)
    assert str(error.value) == f"gc must be True, False or None, got {bad!r}"
    assert not gc_policy.active()


def test_an_open_hub_holds_the_policy_and_closing_it_unfreezes_everything(clean_policy):
    clean_policy.setattr(gc_policy, "ENGAGE", 0)

    async def main():
        hub = open_hub()
        assert gc_policy.active()
        gc.collect()
        assert gc.get_freeze_count() > 0  # survivors of the full collection are frozen
        await hub.close()
        assert not gc_policy.active() and gc.get_freeze_count() == 0

    asyncio.run(main())


def test_a_small_heap_keeps_the_collectors_exact_semantics():
    async def main():
        async with open_hub():
            node = Node()
            dead = weakref.ref(node)
            gc.collect()
            del node
            gc.collect()
            assert dead() is None and gc.get_freeze_count() == 0  # below ENGAGE: nothing frozen

    asyncio.run(main())


def test_a_frozen_dead_cycle_is_found_by_collect_all(clean_policy):
    clean_policy.setattr(gc_policy, "ENGAGE", 0)

    async def main():
        async with open_hub():
            node = Node()
            dead = weakref.ref(node)
            gc.collect()
            del node
            gc.collect()
            assert dead() is not None  # frozen: the cyclic collector does not walk it
            assert gc_policy.collect_all() >= 1
            assert dead() is None and gc.get_freeze_count() > 0  # the survivors are frozen again

    asyncio.run(main())


def dead_cycles(share: float) -> None:
    """Leave dead reference cycles worth ``share`` of the tracked heap for the next full collection."""
    heap = len(gc.get_objects()) + gc.get_freeze_count()  # frozen objects are not listed
    garbage = [Node() for _ in range(int(heap * share))]
    del garbage


def test_dead_frozen_cycles_are_collected_once_the_heap_doubles(clean_policy):
    clean_policy.setattr(gc_policy, "ENGAGE", 0)

    async def main():
        async with open_hub():
            dead_cycles(0.05)  # the engaging walk finds dead cycles: the next reset comes at 2x
            gc.collect()
            heap = sys.getallocatedblocks()
            node = Node()
            dead = weakref.ref(node)
            gc.collect()
            del node
            keep = [[] for _ in range(heap + 1000)]  # the heap more than doubles (a block per list)
            gc.collect()  # frozen, then unfrozen for a reset
            assert dead() is not None
            gc.collect()  # the reset walks the whole heap
            assert dead() is None
            assert gc.get_freeze_count() >= len(keep)
            del keep

    asyncio.run(main())


def test_turned_off_no_runtime_holds_it_and_holds_taken_before_do_not_release_later_ones():
    async def main():
        gc_policy.set_enabled(True)
        first = open_hub(gc=None)
        gc_policy.set_enabled(False)
        assert not gc_policy.active()
        async with open_hub(gc=None):
            assert not gc_policy.active()
        gc_policy.set_enabled(True)
        second = open_hub(gc=None)
        await first.close()  # its hold predates the switch: it must not end the second hub's
        assert gc_policy.active()
        await second.close()
        assert not gc_policy.active()

    asyncio.run(main())


def test_a_runtime_dropped_without_closing_releases_its_hold():
    from toh_nb.core.ids import IdSource
    from toh_nb.core.runtime import Runtime
    from toh_nb.store.memory import MemoryStore

    runtime = Runtime(model=None, store=MemoryStore(), ids=IdSource("sequential"), gc=True)
    assert gc_policy.active()
    del runtime
    gc.collect()
    assert not gc_policy.active()


def test_a_refused_hub_configuration_releases_the_hold_at_once():
    """A configuration refused after the runtime exists (a bad provider entry, a bad SubagentTool) closes
    that runtime: no collection is needed to release the policy (the collector is off here)."""
    for bad in (lambda: tn.AsyncHub(providers={"ray": "ray"}, gc=True),
                lambda: tn.AsyncHub(tools=[tn.SubagentTool(name="deep", max_depth="3")], gc=True)):
        with pytest.raises(tn.UsageError):
            bad()
        assert not gc_policy.active()


def test_closing_the_last_hub_leaves_a_programs_own_frozen_objects_frozen():
    import gc

    import toh_nb as tn
    from toh_nb.core import gc_policy

    gc.collect()
    gc.freeze()  # the program's own choice (e.g. before forking workers)
    frozen = gc.get_freeze_count()
    try:
        hub = tn.Hub()
        hub.close()
        assert not gc_policy.active()
        # the policy never engaged, so it unfroze nothing (refcounting may still free a few frozen objects)
        assert gc.get_freeze_count() > frozen // 2
    finally:
        gc.unfreeze()


def test_engaged_survivors_of_young_collections_are_frozen_without_a_full_walk(clean_policy):
    clean_policy.setattr(gc_policy, "ENGAGE", 0)

    async def main():
        async with open_hub():
            gc.collect()  # engages: the whole heap is walked once and frozen
            frozen = gc.get_freeze_count()
            young = [Node() for _ in range(100)]
            gc.collect(1)  # a young collection: its survivors would wait for a full walk
            assert gc.get_objects(generation=2) == []
            assert gc.get_freeze_count() >= frozen + len(young)

    asyncio.run(main())


def record_calls(monkeypatch, module, name: str) -> list:
    """Record each call to ``module.name`` (``gc.get_freeze_count``: a walk of every frozen object;
    ``sys.getallocatedblocks``: a look at the heap), still answered by the real function."""
    calls: list = []
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda: calls.append(1) or real())
    return calls


def test_the_frozen_set_is_never_walked_to_be_counted(clean_policy):
    clean_policy.setattr(gc_policy, "ENGAGE", 0)
    counted = record_calls(clean_policy, gc, "get_freeze_count")

    async def main():
        async with open_hub():
            gc.collect()
            keep = []
            for _ in range(20):
                keep.append([Node() for _ in range(10)])
                gc.collect(1)
                gc.collect()
            assert counted == []  # 40 freezes, the heap measured by the allocator's block count

    asyncio.run(main())


def test_a_reset_that_found_no_dead_cycles_lets_the_heap_grow_4x_before_the_next(clean_policy):
    clean_policy.setattr(gc_policy, "ENGAGE", 0)

    async def main():
        gc.collect()
        async with open_hub():
            gc.collect()  # engages: the walk finds nothing dead (collected just before)
            heap = sys.getallocatedblocks()
            node = Node()
            dead = weakref.ref(node)
            gc.collect()
            del node
            keep = [[] for _ in range(heap + 1000)]  # the heap more than doubles: no reset yet
            gc.collect()
            gc.collect()
            assert dead() is not None
            more = [[] for _ in range(2 * heap)]  # ... and now more than quadruples
            gc.collect()  # frozen, then unfrozen for a reset
            gc.collect()  # the reset walks the whole heap
            assert dead() is None
            del keep, more

    asyncio.run(main())


def test_a_reset_that_finds_dead_cycles_brings_the_factor_back_to_2x(clean_policy):
    clean_policy.setattr(gc_policy, "ENGAGE", 0)

    async def main():
        gc.collect()
        async with open_hub():
            gc.collect()
            assert gc_policy.state().growth == gc_policy.MAX_GROWTH
            dead_cycles(0.05)
            gc_policy.collect_all()  # a whole-heap walk that finds them
            assert gc_policy.state().growth == gc_policy.GROWTH

    asyncio.run(main())


def test_the_heap_is_looked_at_every_few_young_collections_and_at_every_full_one(clean_policy):
    clean_policy.setattr(gc_policy, "ENGAGE", 0)
    looks = record_calls(clean_policy, sys, "getallocatedblocks")

    async def main():
        gc.collect()
        async with open_hub():
            gc.collect()  # engages: the heap after the walk is the next reset's base
            assert len(looks) == 1 and gc_policy.state().reset_size > 0
            for _ in range(gc_policy.CHECK_EVERY - 1):
                gc.collect(1)
            assert len(looks) == 1
            gc.collect(1)
            assert len(looks) == 2
            gc.collect()  # a full collection of the (frozen-out) old generation looks at once
            assert len(looks) == 3

    asyncio.run(main())


def test_a_reset_is_due_at_the_first_look_after_the_heap_passed_its_limit(clean_policy):
    clean_policy.setattr(gc_policy, "ENGAGE", 0)

    async def main():
        gc.collect()
        async with open_hub():
            gc.collect()  # engages on a clean heap: the next reset is due at 4x its blocks
            base = gc_policy.state().reset_size
            keep = [[] for _ in range(gc_policy.MAX_GROWTH * base)]
            for _ in range(gc_policy.CHECK_EVERY - 1):
                gc.collect(1)
                assert not gc_policy.state().resetting  # not looked at yet
            gc.collect(1)
            assert gc_policy.state().resetting and gc.get_freeze_count() == 0  # unfrozen for the reset
            gc.collect()  # the reset walks the whole heap, refreezes it and takes its new base
            assert not gc_policy.state().resetting and gc.get_freeze_count() >= len(keep)
            assert gc_policy.state().reset_size >= len(keep) > base
            del keep

    asyncio.run(main())
