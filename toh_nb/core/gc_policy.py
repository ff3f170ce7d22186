"""The hub's garbage-collector policy: survivors of a full collection are frozen while a hub is open.

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
generation-1 collection) that becomes garbage is not collected while frozen. So once the frozen set
has grown by :data:`GROWTH` (2×) since the last reset, the policy unfreezes everything and the next
full collection walks the whole heap (collecting such cycles) before freezing again — the same
amortised work as a collector whose old generation grows by 100 % between full collections instead
of 25 %. Those resets are the policy's main cost at scale (four of them walked 1.3 M to 11 M objects,
6 s of a 40 s run of 100,000 continuable children, each finding *nothing* dead), so the factor adapts:
a reset that finds fewer dead objects than 1 % of the heap lets the frozen set grow by
:data:`MAX_GROWTH` (4×) before the next one; a reset that finds more brings it back to 2×. Dead
cycles therefore never hold more than the live heap of the last reset, or three times it in a
program whose last reset found its heap free of them (an agent tree frees almost everything by
reference counting) -- give or take the counting below. The last :func:`release` (every hub closed)
unfreezes everything.

Counting the frozen set. ``gc.get_freeze_count()`` walks every frozen object (0.3 s at 10 M objects),
so the policy keeps an estimate: the exact size at the last count plus what each freeze moved. It
never subtracts objects freed by reference counting, so it only runs ahead of the truth; the exact
count is taken when the estimate passes the limit. In a program that keeps promoting objects that
die soon after (a continuable child's running turn), the estimate stays past the limit while the
truth is below it, and the policy used to count at every young collection (13 walks of ~9 M objects,
2.4 s of a 27 s run of 100,000 children). Now a count that found no reset due is repeated only once
the estimate has grown by another 1/:data:`RECOUNT` (1/8) of that count. Since the truth grows by at
most what the estimate grows, a reset then comes when the frozen set has reached at most 9/8 of the
limit (plus one young collection's survivors): the bound above holds with that factor (dead cycles
below 1.25× / 3.5× the live heap of the last reset). And a reset does not count the set again after
its walk: its size is the count that started it minus what the walk collected (inexact by what
was freed or promoted in between -- the up to ten young collections before CPython starts the full
one -- which moves the next reset by that much).

``gc.collect()`` does not look at frozen objects: code that needs an exact collection while a hub is
open calls :func:`collect_all`, or turns the policy off for the process with :func:`set_enabled`.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_holders = 0
_enabled = True
#: bumped when the policy is turned off, so holds taken before do not release later ones
_epoch = 0
#: frozen objects right after the last full-heap collection (None: none since the policy started;
#: exact when engaging or after collect_all(), else the reset's own estimate: see the docstring)
_reset_size: int | None = None
#: the next full collection walks the whole heap (everything was unfrozen)
_resetting = False
#: the policy engages once a full collection leaves this many objects in the old generation: below
#: that, full collections are cheap and the collector keeps its exact semantics (``gc.collect()``
#: finds every dead cycle), which small programs and tests rely on
ENGAGE = 500_000
#: the frozen set may grow by this factor past the last reset before the next one (see the docstring)
GROWTH = 2
#: ... and by this one after a reset found fewer dead objects than 1 % of the heap
MAX_GROWTH = 4
_growth = GROWTH


#: frozen objects, counted without walking them: the size at the last reset or exact count, then plus
#: what each freeze moved; objects freed by reference counting since are not subtracted, so it can
#: only run ahead of the truth (checked exactly before a reset, so a reset never comes early)
_frozen = 0
#: the last exact count (``gc.get_freeze_count()``, a walk of every frozen object)
_counted = 0
#: an exact count that did not confirm a reset is repeated only once the estimate has grown by this
#: fraction of it (see the module docstring: a reset comes at most that much late)
RECOUNT = 8
#: the exact size of the frozen set when a reset unfroze it (None: the next whole-heap walk counts)
_precount: int | None = None


def _on_collect(phase: str, info: dict) -> None:
    global _reset_size, _resetting, _frozen, _counted, _growth, _precount
    if phase != "stop":
        return
    generation = info.get("generation")
    if generation == 1:  # engaged: survivors of young collections are frozen without a full walk
        if _reset_size is not None and not _resetting:
            _freeze_survivors()
        return
    if generation != 2:
        return
    if _reset_size is None:  # not engaged yet: only a large heap is worth it
        if len(gc.get_objects(generation=2)) < ENGAGE:
            return
        _resetting = True
        _precount = None
    if _resetting:  # this collection walked the whole heap
        _resetting = False
        gc.freeze()
        if _precount is None:  # engaging, or collect_all(): count exactly
            _reset_size = gc.get_freeze_count()
        else:  # a reset: the set was counted exactly when it was unfrozen, minus what this walk freed
            _reset_size = max(_precount - info.get("collected", 0), 1)
        _frozen = _counted = _reset_size
        # a walk that found (almost) no dead cycles: the next one may wait longer
        _growth = MAX_GROWTH if info.get("collected", 0) * 100 < _reset_size else GROWTH
        return
    _freeze_survivors()


def _freeze_survivors() -> None:
    """Freeze the old generation (what survived since the last freeze); reset once the frozen set grew
    by the current factor."""
    global _resetting, _frozen, _counted, _precount
    # ``gc.get_freeze_count()`` walks every frozen object (20 ms at 2 M objects, 190 ms at 9 M): count
    # only what this freeze moves, and check exactly when that count says the frozen set grew enough
    # -- and, after a check that found it had not, not again before the estimate grew by another
    # 1/RECOUNT: objects that are promoted and then freed by reference counting keep the estimate
    # ahead of the truth, and a check at every young collection cost 13 walks of ~9 M objects (2.4 s)
    # in one run of 100,000 continuable children
    _frozen += len(gc.get_objects(generation=2))
    gc.freeze()
    if _frozen > _growth * _reset_size and _frozen - _counted >= _counted // RECOUNT:  # type: ignore[operator]
        _frozen = _counted = gc.get_freeze_count()
        if _frozen > _growth * _reset_size:  # type: ignore[operator]
            gc.unfreeze()
            _resetting = True
            _precount = _frozen


def acquire() -> int | None:
    """Start the policy (reference counted: one hold per open runtime). Returns the hold to pass to
    :func:`release`, or None when the policy is turned off."""
    global _holders, _reset_size, _resetting, _growth, _precount
    with _lock:
        if not _enabled:
            return None
        _holders += 1
        if _holders == 1:
            _reset_size, _resetting, _growth, _precount = None, False, GROWTH, None
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


def set_enabled(enabled: bool) -> None:
    """Turn the policy on or off for this process (off also ends it for runtimes already open)."""
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
    global _resetting, _precount
    with _lock:
        engaged = _holders > 0 and _reset_size is not None
        gc.unfreeze()
        if engaged:
            _resetting = True
            _precount = None
    return gc.collect()
