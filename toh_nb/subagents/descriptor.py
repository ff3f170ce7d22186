"""The versioned ``subagent/descriptor`` event: what a child is, recorded inside its own log.

Version 2, exactly as the reference defines it::

    one-shot:     {version: 2, mode: "one-shot",    provider, label?}
    continuable:  {version: 2, mode: "continuable", provider, label,
                   agentProvider?, agentModel?, persona?, toolFilter? ({allow?, deny?}, at least one key)}

Deliberately not stored: the depth (the session header is authoritative, so a resumed child cannot
reset its budget) and ``max_tokens`` (a per-activation budget). Parsing is strict: unknown keys, wrong
types, an unknown mode or a descriptor that is not an object make the descriptor unreadable (a
``corrupt: …`` listing entry naming what is wrong).
"""

from __future__ import annotations

from typing import Iterable

from ..core.records import DESCRIPTOR_VERSION as VERSION
from ..core.records import DescriptorError, check_descriptor
from ..core.session import DESCRIPTOR, Event

__all__ = ["VERSION", "DescriptorError", "one_shot", "continuable", "parse", "first_in", "identity"]


def one_shot(provider: str, label: str | None) -> dict:
    out = {"version": VERSION, "mode": "one-shot", "provider": provider}
    if label is not None:
        out["label"] = label
    return out


def continuable(provider: str, label: str, *, agent_provider: str | None = None, agent_model: str | None = None,
                persona: str | None = None, tool_filter: dict | None = None) -> dict:
    out: dict = {"version": VERSION, "mode": "continuable", "provider": provider, "label": label}
    if agent_provider is not None:
        out["agentProvider"] = agent_provider
    if agent_model is not None:
        out["agentModel"] = agent_model
    if persona is not None:
        out["persona"] = persona
    if tool_filter:
        out["toolFilter"] = {k: list(v) for k, v in tool_filter.items() if v is not None}
    return out


def parse(data: object) -> dict | None:
    """A validated descriptor, ``None`` for none or another version (cannot classify), or DescriptorError
    (the shape is checked where every stored record's is: :func:`toh_nb.core.records.check_descriptor`)."""
    return None if data is None else check_descriptor(data)


def first_in(events: Iterable[Event]) -> dict | None:
    """The first descriptor among ``events`` (resume reads the child's own suffix)."""
    for event in events:
        if event.kind == DESCRIPTOR:
            return parse(event.data)
    return None


def identity(data: object) -> dict | None:
    """Listing identity (``mode``, ``label``) of a last-wins descriptor; None when unreadable."""
    try:
        parsed = parse(data)
    except DescriptorError:
        return None
    return parsed
