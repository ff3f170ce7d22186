"""serve-model's prompt cache: its budget counts whole saved states (llama-cpp-python's own counted only
their key/value bytes and let a server grow until the OOM killer ended it)."""

from __future__ import annotations

import numpy as np
import pytest

from toh_nb.models.saved_states import SavedStates, state_bytes


class State:
    """What a llama-cpp-python ``LlamaState`` holds, sized at will."""

    def __init__(self, tokens, kv: int = 100, logits: int = 1000) -> None:
        self.input_ids = np.asarray(tokens, dtype=np.intc)
        self.scores = np.zeros(logits, dtype=np.single)
        self.llama_state = bytes(kv)
        self.llama_state_size = kv


def test_a_state_counts_its_context_its_logits_and_its_tokens():
    assert state_bytes(State([1, 2, 3], kv=100, logits=1000)) == 100 + 4000 + 3 * 4


def test_the_budget_counts_whole_states_and_the_least_recently_used_go_first():
    size = state_bytes(State([0]))
    cache = SavedStates(3 * size)
    for first in (1, 2, 3):
        cache[[first]] = State([first])
    assert len(cache) == 3 and cache.cache_size == 3 * size
    cache[[1, 9]]  # a lookup makes state 1 the most recently used
    cache[[4]] = State([4])
    assert len(cache) == 3 and cache.cache_size <= cache.capacity_bytes
    assert [2] not in cache  # the least recently used went
    assert cache[[1, 5]].input_ids.tolist() == [1]


def test_a_lookup_finds_the_longest_shared_prefix_and_a_miss_is_a_key_error():
    cache = SavedStates(10 ** 6)
    cache[[1, 2]] = State([1, 2])
    cache[[1, 2, 3, 4]] = State([1, 2, 3, 4])
    assert cache[[1, 2, 3, 9]].input_ids.tolist() == [1, 2, 3, 4]
    assert cache[[1, 7]].input_ids.tolist() == [1, 2]  # the first of equal prefixes
    with pytest.raises(KeyError):
        cache[[8]]
    assert [8] not in cache


def test_saving_the_same_tokens_again_replaces_the_state_and_its_size():
    cache = SavedStates(10 ** 6)
    cache[[1]] = State([1], logits=10)
    cache[[1]] = State([1], logits=1000)
    assert len(cache) == 1 and cache.cache_size == state_bytes(State([1], logits=1000))


def test_a_state_larger_than_the_budget_is_not_kept_and_keeps_the_others():
    cache = SavedStates(state_bytes(State([0])) * 2)
    cache[[1]] = State([1])
    cache[[2]] = State([2], logits=10 ** 6)
    assert len(cache) == 1 and [1] in cache and [2] not in cache


def test_an_empty_cache_is_still_a_cache_and_a_bad_budget_is_refused():
    assert SavedStates(0)  # the model tests `if self.cache:` before it looks up or saves
    with pytest.raises(ValueError, match="capacity_bytes must be an int >= 0, got -1"):
        SavedStates(-1)
