"""The data of the tree's Timeline view: a waterfall of each agent's activations and their spans.

The timeline used to draw one bar per agent from its creation to now, so a continuable child looked busy
through the idle gaps between its turns, and nothing said what it did inside a turn. Trace viewers show
a waterfall instead; here every shown agent gets its activations (one per turn) with the model and tool
calls inside them (:meth:`toh_nb.AsyncHub.activations`), drawn by ``waterfall.js``.

What is synced, and what is not: the spans' timing and tokens only, split in two traits so a running
agent does not resend the settled ones every second: ``waterfall`` (agents not running) and
``waterfall_live`` (running agents; small, changes with every refresh). A span's messages are not synced:
a click asks for them (the ``span`` action) and the answer comes back as one custom message
(:func:`span_message`).

Cost: built only while the Timeline view is open, for at most :data:`MAX_AGENTS` shown agents, on the
engine's thread (where the logs live). An agent that is not running and whose row did not change (same
status, turns and tokens) keeps its last activations, so a refresh reads only the logs that moved
(``bench/waterfall.py``).
"""

from __future__ import annotations

from typing import Any, Iterable

from ..core.errors import TohError, UsageError

#: agents whose activations the timeline syncs (the first ones shown); the others draw their lifetime only
MAX_AGENTS = 200
RUNNING = ("running", "stopping")
#: a synced span is the list of these fields, in this order (its messages are fetched on a click)
SPAN_FIELDS = ("kind", "name", "start", "end", "input_tokens", "output_tokens", "is_error")
#: synced times are epoch seconds rounded to the millisecond
DIGITS = 3


def _key(row: dict) -> tuple:
    """What must change before a settled agent's activations can: its row's status, turns and tokens."""
    return (row["status"], row.get("turns"), row.get("input_tokens"), row.get("output_tokens"), row.get("outcome"))


def _time(value: float | None) -> float | None:
    return None if value is None else round(value, DIGITS)


def compact(activations: list[dict]) -> list[dict]:
    """The activations as synced: times to the millisecond, each span a list of :data:`SPAN_FIELDS` (a big
    tree's waterfall is mostly spans: as lists they weigh about a third of the dicts), no messages."""
    out = []
    for activation in activations:
        spans = [[_time(v) if name in ("start", "end") else v for name, v in ((n, span[n]) for n in SPAN_FIELDS)]
                 for span in activation["spans"]]
        out.append({**activation, "start": _time(activation["start"]), "end": _time(activation["end"]),
                    "spans": spans})
    return out


def span_message(agent_id: str, activations: list[dict], turn: Any, start: Any) -> dict:
    """The page's answer to a click on a span: ``{"type": "span", "id", "turn", "start", "messages"}`` for
    the span of ``turn`` that started at ``start`` (as synced: to the millisecond); a UsageError when there
    is none (the log moved on)."""
    for activation in activations:
        if activation["turn"] != turn:
            continue
        for span in activation["spans"]:
            if _time(span["start"]) == start:
                return {"type": "span", "id": agent_id, "turn": turn, "start": start, "messages": span["messages"]}
    raise UsageError(f"no call of {agent_id} turn {turn} started at {start!r}")


class Waterfall:
    """Builds the ``waterfall`` / ``waterfall_live`` traits, keeping the activations of agents that did
    not move."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple, list]] = {}

    def build(self, hub: Any, rows: Iterable[dict], shown: Iterable[str]) -> tuple[dict, dict]:
        """``({agent id: activations} of agents not running, the same of running ones)`` for the first
        :data:`MAX_AGENTS` agents of ``shown`` (ids, in order) among ``rows`` (the tree's synced rows).
        Runs on the engine's thread."""
        by_id = {row["id"]: row for row in rows}
        settled: dict[str, list] = {}
        live: dict[str, list] = {}
        for agent_id in shown:
            row = by_id.get(agent_id)
            if row is None or row["kind"] != "agent":
                continue
            if len(settled) + len(live) >= MAX_AGENTS:
                break
            running = row["status"] in RUNNING
            key = _key(row)
            cached = self._cache.get(agent_id)
            if cached is not None and cached[0] == key and not running:
                settled[agent_id] = cached[1]
                continue
            try:
                activations = compact(hub.view.activations(agent_id))
            except TohError:  # a log that cannot be read: the row says so; the lane draws its lifetime
                activations = []
            self._cache[agent_id] = (key, activations)
            (live if running else settled)[agent_id] = activations
        for gone in set(self._cache) - set(by_id):
            del self._cache[gone]
        return settled, live
