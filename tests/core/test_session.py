"""The session log: shared read-only ``turn/end`` data, events with a message or data."""

from __future__ import annotations

import asyncio
import copy
import json
import pickle

import pytest

from toh_nb.core.content import user_message
from toh_nb.core.session import SharedData, turn_end_data
from toh_nb.models import FunctionModel

from .harness import make_agent


def test_completed_turns_share_one_read_only_end_record():
    async def main():
        runtime, agent = make_agent(FunctionModel(lambda req: "ok"))
        for text in ("a", "b"):
            await agent.submit(user_message(text))
        return [e.data for e in agent.session.events if e.kind == "turn/end"]

    first, second = asyncio.run(main())
    assert first == second == {"reason": "completed"}
    assert first is second and isinstance(first, SharedData)
    with pytest.raises(TypeError, match="shared by many logged events"):
        first["error"] = "x"
    with pytest.raises(TypeError):
        first.update(reason="error")
    assert first == {"reason": "completed"}


def test_shared_end_data_copies_and_serialises_as_a_plain_dict():
    data = turn_end_data("completed")
    assert json.dumps(data) == '{"reason": "completed"}'
    for copied in (dict(data), data.copy(), copy.copy(data), copy.deepcopy(data), pickle.loads(pickle.dumps(data))):
        assert type(copied) is dict and copied == {"reason": "completed"}
        copied["error"] = "x"  # a copy is the caller's own
    assert data == {"reason": "completed"}


def test_end_data_with_an_error_or_a_cause_is_its_own_dict_in_the_logged_order():
    assert turn_end_data("error", "boom") == {"reason": "error", "error": "boom"}
    assert list(turn_end_data("aborted", None, "user")) == ["reason", "cause"]
    assert type(turn_end_data("error", "boom")) is dict
    assert turn_end_data("completed") is turn_end_data("completed")
    assert turn_end_data("max-steps") == {"reason": "max-steps"} and type(turn_end_data("max-steps")["reason"]) is str


def test_an_event_reads_back_its_message_or_data_and_keeps_both_when_a_log_has_both():
    from toh_nb.core.session import Event

    said = user_message("hello")
    spoken = Event(3, "user/message", 1.5, 2, said)
    noted = Event(4, "turn/end", 1.5, 2, data={"reason": "completed"})
    assert (spoken.message, spoken.data, noted.message, noted.data) == (said, None, None, {"reason": "completed"})
    noted.data = {"reason": "error", "error": "disk full"}
    assert noted.data == {"reason": "error", "error": "disk full"} and noted.message is None
    both = Event.from_json({"seq": 5, "kind": "custom", "time": 2.0, "message": {"role": "user", "content": []},
                            "data": {"x": 1}})
    assert both.message.role == "user" and both.data == {"x": 1}
    assert Event.from_json(both.to_json()).to_json() == both.to_json()
    both.data = None
    assert both.message.role == "user" and both.data is None
    spoken.message = None
    assert spoken.message is None and spoken.data is None
