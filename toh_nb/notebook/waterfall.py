"""The data of the tree's Timeline view: a waterfall of each agent's activations and their spans.

The timeline used to draw one bar per agent from its creation to now, so a continuable child looked busy
through the idle gaps between its turns, and nothing said what it did inside a turn. Trace viewers show
a waterfall instead; here every shown agent gets its activations (one per turn) with the model and tool
calls inside them (:meth:`toh_nb.AsyncHub.activations`), synced as the widget's ``waterfall`` trait
``{agent id: [activation, ...]}`` and drawn by ``waterfall.js``.

Cost: built only while the Timeline view is open, for at most :data:`MAX_AGENTS` shown agents, on the
engine's thread (where the logs live). An agent that is not running and whose row did not change (same
status, turns and tokens) keeps its last activations, so a refresh reads only the logs that moved.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core.errors import TohError

#: agents whose activations the timeline syncs (the first ones shown); the others draw their lifetime only
MAX_AGENTS = 200
RUNNING = ("running", "stopping")


def _key(row: dict) -> tuple:
    """What must change before a settled agent's activations can: its row's status, turns and tokens."""
    return (row["status"], row.get("turns"), row.get("input_tokens"), row.get("output_tokens"), row.get("outcome"))


class Waterfall:
    """Builds the ``waterfall`` trait, keeping the activations of agents that did not move."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple, list]] = {}

    def build(self, hub: Any, rows: Iterable[dict], shown: Iterable[str]) -> dict:
        """``{agent id: activations}`` for the first :data:`MAX_AGENTS` agents of ``shown`` (ids, in order)
        among ``rows`` (the tree's synced rows). Runs on the engine's thread."""
        by_id = {row["id"]: row for row in rows}
        out: dict[str, list] = {}
        for agent_id in shown:
            row = by_id.get(agent_id)
            if row is None or row["kind"] != "agent":
                continue
            if len(out) >= MAX_AGENTS:
                break
            key = _key(row)
            cached = self._cache.get(agent_id)
            if cached is not None and cached[0] == key and row["status"] not in RUNNING:
                out[agent_id] = cached[1]
                continue
            try:
                activations = hub.activations(agent_id)
            except TohError:  # a log that cannot be read: the row says so; the lane draws its lifetime
                activations = []
            self._cache[agent_id] = (key, activations)
            out[agent_id] = activations
        for gone in set(self._cache) - set(by_id):
            del self._cache[gone]
        return out
