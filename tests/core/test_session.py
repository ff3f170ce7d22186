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


def test_summarize_folds_each_event_once_and_equals_a_fresh_fold():
    """A live table or tree summarises the same logs again and again: only the events appended since
    the last call are folded, and the summary equals that of a fresh copy of the log at every step."""
    from toh_nb.core import session as sessions
    from toh_nb.core.content import Message, Usage

    log = sessions.Session(sessions.SessionHeader(id="a", created=1.0))

    def fresh() -> sessions.LogSummary:
        return sessions.summarize(sessions.Session(log.header, list(log.events)))

    assert sessions.summarize(log) == fresh()
    for turn in (1, 2):
        log.append(sessions.TURN_START, turn=turn)
        log.append(sessions.ASSISTANT_MESSAGE, turn=turn,
                   message=Message("assistant", "hi", usage=Usage(input_tokens=3, output_tokens=2)))
        assert sessions.summarize(log) == fresh()
        log.append(sessions.TURN_END, turn=turn, data=turn_end_data("error" if turn == 2 else "completed",
                                                                   error="boom" if turn == 2 else None))
        assert sessions.summarize(log) == fresh()
    summary = sessions.summarize(log)
    assert (summary.turns, summary.input_tokens, summary.output_tokens, summary.last_reason, summary.last_error) \
        == (2, 6, 4, "error", "boom")
    log.events[:] = log.events[:2]  # a log replaced under the summary (a repair): folded again from the start
    assert sessions.summarize(log) == fresh() and sessions.summarize(log).turns == 1
