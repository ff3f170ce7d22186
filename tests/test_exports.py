"""The event types and the one StopReason are exported from ``toh_nb`` (and ``toh_nb.events``)."""

from __future__ import annotations

import inspect

import pytest

import toh_nb as tn
from toh_nb import events
from toh_nb.core import events as core_events
from toh_nb.core import states


def event_types() -> dict[str, type]:
    return {name: cls for name, cls in vars(core_events).items()
            if inspect.isclass(cls) and issubclass(cls, core_events.HubEvent)}


def test_every_event_type_is_exported_from_toh_nb_and_toh_nb_events():
    types = event_types()
    assert "PermissionAsked" in types and "HubClosed" in types
    for name, cls in types.items():
        assert name in tn.__all__ and getattr(tn, name) is cls, name
        assert name in events.__all__ and getattr(events, name) is cls, name
    assert events.KINDS == {cls.kind: cls for cls in types.values() if cls is not core_events.HubEvent}


def test_one_stop_reason_is_public_and_the_models_old_name_warns():
    assert "StopReason" in tn.__all__ and tn.StopReason is states.StopReason
    assert tn.StopReason.MAX_TOKENS == "max-tokens"
    from toh_nb.core import model

    with pytest.warns(DeprecationWarning, match="^toh_nb.core.model.StopReason is renamed ModelStopReason"):
        old = model.StopReason
    assert old is model.ModelStopReason


def test_the_config_and_the_view_are_exported():
    from toh_nb.config import HubConfig
    from toh_nb.hub import Activity, HubView

    assert (tn.HubConfig, tn.HubView, tn.Activity) == (HubConfig, HubView, Activity)
