"""The hub's garbage-collector policy (opt-in): survivors of a full collection are frozen while a hub is open.

Opt-in. A library must leave the garbage collector of the process it is imported into alone, so no
hub applies this policy unless asked: ``tn.Hub(gc=True)`` / ``tn.AsyncHub(gc=True)`` applies it while
that hub is open; :func:`set_enabled` ``(True)`` makes it the choice of every hub of the process that
does not say (``gc=None``, the default); ``gc=False`` never applies it. The benchmarks opt in
(``bench/_common.py``; ``--no-gc-policy`` runs them without it) and ``bench/gc_policy.py`` prints what
it buys.

Why: an agent tree keeps many small long-lived objects (every logged event and message of every
settled child). CPython runs a full (generation 2) collection each time the old generation has grown
by 25 %, and each one walks *every* tracked object, so a process holding 10,000 continuable children
spent more than half its time in full collections (bench/README.md: continuable throughput fell to
0.37× of the 1,000-child rate at 30,000 children with the GC on, 0.92× with it off).

What the policy does, while at least one runtime holds it (:func:`acquire` / :func:`release`) and
once the old generation holds :data:`ENGAGE` objects: after every full collection *and every
generation-1 collection* it moves the survivors to the permanent generation (``gc.freeze()``), so
no collection walks them again. Freezing after generation-1 collections too matters: with only the
full collections freezing, each of them still walked everything promoted since the last one, and
those walks cost more per object than a walk of the whole heap (measured: 27 full collections of
~86,000 new objects, 35-85 ms each, at 100,000 sequential delegations; now none). Nothing else
changes: every object is still freed by reference counting the moment it is unreachable; young
collections run as before.

The cost, and its bound: a reference *cycle* among frozen objects (one that outlived a
generation-1 collection) that becomes garbage is not collected while frozen. So once the heap has
grown by :data:`GROWTH` (2×) since the last reset, the policy unfreezes everything and the next full
collection walks the whole heap (collecting such cycles) before freezing again — the same amortised
work as a collector whose old generation grows by 100 % between full collections instead of 25 %.
Those resets are the policy's main cost at scale (four of them walked 1.3 M to 11 M objects, 6 s of a
40 s run of 100,000 continuable children, each finding *nothing* dead), so the factor adapts: a reset
that finds fewer dead objects than 1 % of the heap (in blocks, below) lets the heap grow by
:data:`MAX_GROWTH` (4×) before the next one; a reset that finds more brings it back to 2×. Dead
cycles therefore never hold more than the heap of the last reset, or three times it in a program
whose last reset found its heap free of them (an agent tree frees almost everything by reference
counting) -- plus what the young collections between two looks (below) promote. The last
:func:`release` (every hub closed) unfreezes everything.

Measuring the heap. The heap is the allocator's count of memory blocks in use
(``sys.getallocatedblocks()``: live objects *and* uncollected garbage, tracked by the collector or
not), taken right after each reset and looked at again every :data:`CHECK_EVERY` generation-1
collections and at every full one. A look sums the allocator's pools: ~1.7 ms on a 1 GB heap. The
policy used to count the frozen set instead (``gc.get_freeze_count()``, a walk of every frozen
object: 190 ms at 9 M objects) and, to count rarely, kept an estimate that could only run ahead of
the truth; it still spent 1.3 s of a 25 s run of 100,000 continuable children in those walks (now
0.1 s for the whole callback). Blocks include untracked objects (strings, numbers), so the growth is
that of the memory the heap holds, which is what a bound on dead cycles is about.

``gc.collect()`` does not look at frozen objects: code that needs an exact collection while a hub is
open calls :func:`collect_all`, or turns the policy off for the process with :func:`set_enabled`.
"""

from __future__ import annotations

import gc
import sys
import threading
from typing import NamedTuple

_lock = threading.Lock()
_holders = 0
#: the process's choice for hubs that do not say (``gc=None``): off unless the program opts in
_enabled = False
#: bumped when the policy is turned off, so holds taken before do not release later ones
_epoch = 0
#: the heap's allocated blocks right after the last full-heap collection (None: the policy has not
#: engaged since it started)
_reset_size: int | None = None
#: the next full collection walks the whole heap (everything was unfrozen)
_resetting = False
#: the policy engages once a full collection leaves this many objects in the old generation: below
#: that, full collections are cheap and the collector keeps its exact semantics (``gc.collect()``
#: finds every dead cycle), which small programs and tests rely on
ENGAGE = 500_000
#: the heap may grow by this factor past the last reset before the next one (see the docstring)
GROWTH = 2
#: ... and by this one after a reset found fewer dead objects than 1 % of the heap's blocks
MAX_GROWTH = 4
_growth = GROWTH


#: young collections since the heap's size was last looked at
_since_check = 0
#: the heap's size is looked at every this many generation-1 collections (and at every full one): a
#: look costs ~1.7 ms on a 1 GB heap (it sums the allocator's pools), the exact count it replaced
#: (``gc.get_freeze_count()``) walked every frozen object (190 ms at 9 M)
CHECK_EVERY = 32


def _on_collect(phase: str, info: dict) -> None:
    global _reset_size, _resetting, _growth, _since_check
    if phase != "stop":
        return
    generation = info.get("generation")
    if generation == 1:  # engaged: survivors of young collections are frozen without a full walk
        if _reset_size is not None and not _resetting:
            _freeze_survivors(CHECK_EVERY)
        return
    if generation != 2:
        return
    if _reset_size is None:  # not engaged yet: only a large heap is worth it
        if len(gc.get_objects(generation=2)) < ENGAGE:
            return
        _resetting = True
    if _resetting:  # this collection walked the whole heap
        _resetting = False
        gc.freeze()
        _reset_size = max(sys.getallocatedblocks(), 1)
        _since_check = 0
        # a walk that found (almost) no dead cycles: the next one may wait longer
        _growth = MAX_GROWTH if info.get("collected", 0) * 100 < _reset_size else GROWTH
        return
    _freeze_survivors(1)


def _freeze_survivors(check_every: int) -> None:
    """Freeze the old generation (what survived since the last freeze); reset once the heap grew by
    the current factor since the last reset."""
    global _resetting, _since_check
    gc.freeze()
    _since_check += 1
    if _since_check >= check_every:
        _since_check = 0
        if sys.getallocatedblocks() > _growth * _reset_size:  # type: ignore[operator]
            gc.unfreeze()
            _resetting = True


def acquire(wanted: bool | None = None) -> int | None:
    """Start the policy (reference counted: one hold per open runtime that wants it). ``wanted``: the
    hub's ``gc`` option (``None``: the process's choice, :func:`set_enabled`). Returns the hold to pass
    to :func:`release`, or None when the policy is not applied."""
    global _holders, _reset_size, _resetting, _growth, _since_check
    with _lock:
        if not (_enabled if wanted is None else wanted):
            return None
        _holders += 1
        if _holders == 1:
            _reset_size, _resetting, _growth, _since_check = None, False, GROWTH, 0
            gc.callbacks.append(_on_collect)
        return _epoch


def release(hold: int | None) -> None:
    """End one hold; the last one removes the policy and unfreezes everything."""
    global _holders
    with _lock:
        if hold is None or hold != _epoch or _holders == 0:
            return
        _holders -= 1
        if _holders == 0:
            _stop()


def _stop() -> None:
    global _reset_size, _resetting
    if _on_collect in gc.callbacks:
        gc.callbacks.remove(_on_collect)
    if _reset_size is not None:  # only what this policy froze: a program's own gc.freeze() stays its own
        gc.unfreeze()
    _reset_size, _resetting = None, False


def active() -> bool:
    """Whether the policy is in force (some open runtime holds it)."""
    return _holders > 0


class State(NamedTuple):
    """What the policy holds between collections (see the module docstring)."""

    #: the heap's allocated blocks after the last full-heap collection (None: not engaged)
    reset_size: int | None
    #: the next full collection walks the whole heap (everything was unfrozen)
    resetting: bool
    #: the factor the heap may grow by past ``reset_size`` before the next reset
    growth: int


def state() -> State:
    """The policy's state now: for diagnostics and tests, which check its decisions against the heap."""
    return State(_reset_size, _resetting, _growth)


def enabled() -> bool:
    """The process's choice for hubs opened with ``gc=None`` (False unless :func:`set_enabled` said)."""
    return _enabled


def set_enabled(enabled: bool) -> None:
    """The process's choice for hubs opened with ``gc=None`` (the default: off). ``False`` also ends
    the policy for runtimes already open, those opened with ``gc=True`` included."""
    global _enabled, _holders, _epoch
    with _lock:
        _enabled = bool(enabled)
        if not _enabled:
            _epoch += 1
            if _holders:
                _holders = 0
                _stop()


def collect_all() -> int:
    """A full collection that includes frozen objects (``gc.collect()`` skips them); the policy
    refreezes the survivors afterwards, as after any full-heap collection."""
    global _resetting
    with _lock:
        engaged = _holders > 0 and _reset_size is not None
        gc.unfreeze()
        if engaged:
            _resetting = True
    return gc.collect()
