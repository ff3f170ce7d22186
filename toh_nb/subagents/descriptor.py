"""The versioned ``subagent/descriptor`` event: what a child is, recorded inside its own log.

Version 2, exactly as the reference defines it::

    one-shot:     {version: 2, mode: "one-shot",    provider, label?}
    continuable:  {version: 2, mode: "continuable", provider, label,
                   agentProvider?, agentModel?, persona?, toolFilter? ({allow?, deny?}, at least one key)}

Deliberately not stored: the depth (the session header is authoritative, so a resumed child cannot
reset its budget) and ``max_tokens`` (a per-activation budget). Parsing is strict: unknown keys, wrong
types or an unknown mode make the descriptor unreadable (a ``corrupt`` listing entry).
"""

from __future__ import annotations

from typing import Iterable

from ..core.session import DESCRIPTOR, Event

VERSION = 2
_ONE_SHOT_KEYS = {"version", "mode", "provider", "label"}
_CONTINUABLE_KEYS = _ONE_SHOT_KEYS | {"agentProvider", "agentModel", "persona", "toolFilter"}


class DescriptorError(ValueError):
    """A descriptor of the current version whose payload is malformed."""


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
    """A validated descriptor, ``None`` for another version (cannot classify), or DescriptorError."""
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return None
    mode = data.get("mode")
    allowed = _CONTINUABLE_KEYS if mode == "continuable" else _ONE_SHOT_KEYS if mode == "one-shot" else None
    if allowed is None:
        raise DescriptorError(f"persisted subagent descriptor mode must be one-shot or continuable, got {mode!r}")
    for key in data:
        if key not in allowed:
            raise DescriptorError(f'persisted subagent descriptor has unknown field "{key}"')
    if not isinstance(data.get("provider"), str):
        raise DescriptorError("persisted subagent descriptor provider must be a string")
    for key in ("label", "agentProvider", "agentModel", "persona"):
        if key in data and not isinstance(data[key], str):
            raise DescriptorError(f"persisted subagent descriptor {key} must be a string")
    if mode == "continuable" and "label" not in data:
        raise DescriptorError("persisted subagent descriptor label must be a string")
    if "toolFilter" in data:
        flt = data["toolFilter"]
        if not isinstance(flt, dict) or not flt or set(flt) - {"allow", "deny"} or not all(
                isinstance(v, list) and all(isinstance(n, str) for n in v) for v in flt.values()):
            raise DescriptorError("persisted subagent descriptor toolFilter must be {allow?: [str], deny?: [str]}")
    return data


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
