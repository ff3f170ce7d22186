"""The prompt cache of ``serve-model``: saved model states in RAM, within a budget that counts all of them.

Why not llama-cpp-python's own ``LlamaRAMCache``: it bounds the sum of ``LlamaState.llama_state_size``
(the context's keys and values: ~13 MB for SmolLM2 after 600 tokens) while each state also holds a copy
of the model's logits (``LlamaState.scores``: 96-236 MB for the same model), so its 1 GB budget let a
server grow by ~360 MB per request with distinct prompts, until the kernel's OOM killer ended it
(``bench/server_memory.py``: the figures). This cache counts every array and byte string a state holds.

It is handed to the server's model with ``Llama.set_cache`` (llama-cpp-python's public seam, duck-typed:
the model only indexes it, tests membership and assigns). Lookup is by longest common token prefix, as
llama-cpp-python's caches do, and the least recently used states go first.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Sequence


def state_bytes(state: Any) -> int:
    """The memory a saved state holds: its context bytes, its logits and its tokens."""
    return len(state.llama_state) + state.scores.nbytes + state.input_ids.nbytes


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    same = 0
    for x, y in zip(a, b):
        if x != y:
            break
        same += 1
    return same


class SavedStates:
    """Model states keyed by the tokens they hold, at most ``capacity_bytes`` of them in all.

    A state larger than the whole budget is not kept (keeping it would evict every other state and
    still exceed the budget)."""

    def __init__(self, capacity_bytes: int) -> None:
        if not isinstance(capacity_bytes, int) or capacity_bytes < 0:
            raise ValueError(f"capacity_bytes must be an int >= 0, got {capacity_bytes!r}")
        self.capacity_bytes = capacity_bytes
        self._states: OrderedDict[tuple[int, ...], tuple[Any, int]] = OrderedDict()
        self._size = 0

    @property
    def cache_size(self) -> int:
        """Bytes held now."""
        return self._size

    def __len__(self) -> int:
        return len(self._states)

    def __bool__(self) -> bool:  # the model tests ``if self.cache:``: an empty cache is still a cache
        return True

    def _longest(self, tokens: tuple[int, ...]) -> tuple[int, ...] | None:
        best, length = None, 0
        for key in self._states:
            same = common_prefix(key, tokens)
            if same > length:
                best, length = key, same
        return best

    def __getitem__(self, tokens: Sequence[int]) -> Any:
        key = self._longest(tuple(tokens))
        if key is None:
            raise KeyError("no saved state shares a prefix with these tokens")
        self._states.move_to_end(key)
        return self._states[key][0]

    def __contains__(self, tokens: Sequence[int]) -> bool:
        return self._longest(tuple(tokens)) is not None

    def __setitem__(self, tokens: Sequence[int], state: Any) -> None:
        key = tuple(tokens)
        old = self._states.pop(key, None)
        if old is not None:
            self._size -= old[1]
        size = state_bytes(state)
        if size > self.capacity_bytes:
            return
        self._states[key] = (state, size)
        self._size += size
        while self._size > self.capacity_bytes:
            _, (_, dropped) = self._states.popitem(last=False)
            self._size -= dropped
