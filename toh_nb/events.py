"""The event types of the hub's one stream (``hub.stream()``, ``hub.astream()``), importable from here
(``from toh_nb.events import TurnEnded``) and from ``toh_nb`` itself (``tn.TurnEnded``).

They are defined in :mod:`toh_nb.core.events` (the engine publishes them); this module is the public
place to import them from. ``ev.kind`` is each type's string (``"turn/end"``) for ``kinds=[...]``
filters; :data:`KINDS` maps every kind to its type.
"""

from __future__ import annotations

from .core.events import (
                          ChildEnded,
                          ChildStarted,
                          ExternalActivity,
                          HubClosed,
                          HubEvent,
                          Interrupted,
                          JobEnded,
                          JobStarted,
                          JobStopping,
                          ListenerFailed,
                          MessageQueued,
                          MessageRead,
                          ModelRequested,
                          ModelResponded,
                          PermissionAnswered,
                          PermissionAsked,
                          Problem,
                          ProviderChanged,
                          StatusChanged,
                          TextDelta,
                          ToolAbandoned,
                          ToolCalled,
                          ToolReturned,
                          TurnEnded,
                          TurnStarted,
)

__all__ = [
                          "KINDS",
                          "ChildEnded",
                          "ChildStarted",
                          "ExternalActivity",
                          "HubClosed",
                          "HubEvent",
                          "Interrupted",
                          "JobEnded",
                          "JobStarted",
                          "JobStopping",
                          "ListenerFailed",
                          "MessageQueued",
                          "MessageRead",
                          "ModelRequested",
                          "ModelResponded",
                          "PermissionAnswered",
                          "PermissionAsked",
                          "Problem",
                          "ProviderChanged",
                          "StatusChanged",
                          "TextDelta",
                          "ToolAbandoned",
                          "ToolCalled",
                          "ToolReturned",
                          "TurnEnded",
                          "TurnStarted",
]

#: every event kind (``"turn/end"`` …) and its type
KINDS: dict[str, type[HubEvent]] = {cls.kind: cls for cls in (
    TurnStarted, TurnEnded, ModelRequested, ModelResponded, TextDelta, ToolCalled, ToolReturned, MessageQueued,
    MessageRead, StatusChanged, ExternalActivity, ChildStarted, ChildEnded, JobStarted, JobStopping, JobEnded, Interrupted,
    ToolAbandoned, PermissionAsked, PermissionAnswered, ProviderChanged, Problem, ListenerFailed, HubClosed)}
