"""DictRoom: a registry gives its hash table back after a burst, in place."""

from __future__ import annotations

import sys

from toh_nb.core.dict_room import MIN_PEAK, SHRINK, DictRoom


def fill(table: dict, room: DictRoom, n: int) -> None:
    for i in range(n):
        table[f"agent-{i}"] = i
        room.grew(table)


def test_a_dict_down_to_an_eighth_of_its_peak_is_rebuilt_in_place_with_its_entries():
    table: dict = {}
    room = DictRoom()
    fill(table, room, 4 * MIN_PEAK)
    peak_bytes = sys.getsizeof(table)
    same = table
    for i in range(4 * MIN_PEAK - 4 * MIN_PEAK // SHRINK):
        del table[f"agent-{i}"]
        room.shrank(table)
    assert table is same
    assert len(table) == 4 * MIN_PEAK // SHRINK
    assert sys.getsizeof(table) * 4 < peak_bytes
    assert list(table.items()) == [(f"agent-{i}", i) for i in range(4 * MIN_PEAK - 4 * MIN_PEAK // SHRINK, 4 * MIN_PEAK)]
    assert room.peak == len(table)


def test_a_dict_above_an_eighth_of_its_peak_or_a_small_one_keeps_its_table():
    table: dict = {}
    room = DictRoom()
    fill(table, room, 4 * MIN_PEAK)
    size = sys.getsizeof(table)
    for i in range(4 * MIN_PEAK - 4 * MIN_PEAK // SHRINK - 1):
        del table[f"agent-{i}"]
        room.shrank(table)
    assert sys.getsizeof(table) == size and room.peak == 4 * MIN_PEAK

    small: dict = {}
    small_room = DictRoom()
    fill(small, small_room, MIN_PEAK - 1)
    small_size = sys.getsizeof(small)
    for i in range(MIN_PEAK - 1):
        del small[f"agent-{i}"]
        small_room.shrank(small)
    assert small == {} and sys.getsizeof(small) == small_size
