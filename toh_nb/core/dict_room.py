"""Giving a registry's hash table back after a burst.

CPython never shrinks a dict's hash table when keys are deleted: it is resized only when an
insertion runs out of room. A registry of live agents (``Runtime.agents``) or of running
activations (``SubagentService.activations``) that once held 100,000 children keeps a table sized
for them (~36 B per slot) after they settle, and every later idle child pays its share of that
(bench/memory.py: 26–35 B per child of each table at 1,000–1,500 children). :class:`DictRoom`
remembers the most entries a dict held and rebuilds the dict in place (same object, so every holder
of it stays valid) once it is down to an eighth of that: each rebuild copies at most an eighth of
the entries the deletions since the last one removed, so it is O(1) amortised per deletion.
"""

from __future__ import annotations

#: below this many entries at the peak, the table is small enough to keep
MIN_PEAK = 128
#: rebuild once the dict is down to 1/SHRINK of its peak
SHRINK = 8


class DictRoom:
    """The peak size of one dict. Call :meth:`grew` after an insertion, :meth:`shrank` after a
    deletion."""

    __slots__ = ("peak",)

    def __init__(self) -> None:
        self.peak = 0

    def grew(self, table: dict) -> None:
        size = len(table)
        if size > self.peak:
            self.peak = size

    def shrank(self, table: dict) -> None:
        size = len(table)
        if self.peak >= MIN_PEAK and size * SHRINK <= self.peak:
            kept = list(table.items())
            table.clear()  # frees the table; update() sizes a new one for what is kept
            table.update(kept)
            self.peak = size
