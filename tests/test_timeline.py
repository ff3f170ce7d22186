"""When an agent worked (toh_nb.timeline): one activation per turn, its model and tool calls as spans."""

from __future__ import annotations

import toh_nb as tn
from toh_nb import timeline as activations
from toh_nb.timeline import activation_rows
from toh_nb.core.content import Message, Usage

from .test_conversation import TWO_TURNS, assistant, log


def spans(activation: dict) -> list[tuple]:
    return [(s["kind"], s["name"], s["start"], s["end"], s["input_tokens"], s["output_tokens"], s["is_error"])
            for s in activation["spans"]]


def test_each_turn_is_one_activation_with_its_timed_model_and_tool_calls():
    first, second = activation_rows(TWO_TURNS)
    assert {k: first[k] for k in ("turn", "start", "end", "reason", "input_tokens", "output_tokens")} == {
        "turn": 1, "start": 100.5, "end": 102.0, "reason": "completed", "input_tokens": 270, "output_tokens": 17}
    # a model call runs from the event before its answer; a tool call from its call to its result
    assert spans(first) == [("model", "model", 100.5, 101.0, 120, 14, False),
                            ("tool", "search", 101.0, 101.6, 0, 0, False),
                            ("tool", "search", 101.0, 101.4, 0, 0, True),
                            ("model", "model", 101.6, 102.0, 150, 3, False)]
    # the idle gap between the turns is no activation; the second turn's model call failed, which ended it
    assert (second["start"], second["end"], second["reason"]) == (110.0, 110.5, "error")
    assert spans(second) == [("model", "model", 110.0, 110.5, 0, 0, True)]
    assert second["spans"][0]["messages"] == [{"role": "notice", "text": "job finished", "tool": None}]


def test_a_span_carries_its_messages():
    first = activation_rows(TWO_TURNS)[0]
    assert first["spans"][0]["messages"] == [
        {"role": "user", "text": "Check both", "tool": None},
        {"role": "assistant", "text": "", "tool": "search, search"}]
    assert first["spans"][2]["messages"] == [{"role": "call", "text": '{"q": "b"}', "tool": "search"},
                                             {"role": "error", "text": "Error: b failed", "tool": "search"}]


def test_a_live_turn_runs_to_now_with_the_call_in_flight_and_a_dead_one_ends_at_its_last_event():
    waiting_for_model = log((5.0, "turn/start", 1, None, None),
                            (5.0, "user/message", 1, Message("user", "go"), None))
    (live,) = activation_rows(waiting_for_model, live=True)
    assert live["end"] is None
    assert spans(live) == [("model", "model", 5.0, None, 0, 0, False)]
    assert live["spans"][0]["messages"] == [{"role": "user", "text": "go", "tool": None}]
    in_tool = log((5.0, "turn/start", 1, None, None),
                  (6.0, "assistant/message", 1, assistant("", ("c1", "wait", {})), None),
                  (6.0, "tool/call", 1, None, {"call_id": "c1", "name": "wait", "arguments": {}}))
    (live,) = activation_rows(in_tool, live=True)
    assert spans(live) == [("model", "model", 5.0, 6.0, 0, 0, False), ("tool", "wait", 6.0, None, 0, 0, False)]
    (dead,) = activation_rows(in_tool, live=False)  # the process died mid-call: everything ends at 6.0
    assert (dead["end"], spans(dead)[-1][3]) == (6.0, 6.0)


def test_an_abandoned_call_ends_with_its_turn_and_long_logs_keep_their_latest_spans(monkeypatch):
    abandoned = log((1.0, "turn/start", 1, None, None),
                    (1.0, "tool/call", 1, None, {"call_id": "c1", "name": "slow", "arguments": {}}),
                    (3.0, "turn/end", 1, None, {"reason": "max-time"}))
    assert spans(activation_rows(abandoned)[0]) == [("tool", "slow", 1.0, 3.0, 0, 0, False)]
    monkeypatch.setattr(activations, "MAX_SPANS", 3)
    events = []
    for turn in (1, 2):
        events += [(turn * 10.0, "turn/start", turn, None, None)]
        events += [(turn * 10.0 + step, "assistant/message", turn, Message("assistant", f"{turn}.{step}",
                                                                           usage=Usage(1, 1)), None)
                   for step in (1, 2)]
        events += [(turn * 10.0 + 3, "turn/end", turn, None, {"reason": "completed"})]
    first, second = activation_rows(log(*events))
    assert [s["messages"][-1]["text"] for s in first["spans"]] == ["1.2"]
    assert first["dropped_spans"] == 1
    assert [s["messages"][-1]["text"] for s in second["spans"]] == ["2.1", "2.2"]
    assert first["input_tokens"] == 2  # the activation still counts every call


def test_the_hub_gives_the_activations_of_live_and_stored_agents(tmp_path):
    def reply(request):
        return tn.ModelResponse(text="ok", usage=tn.Usage(10, 2))

    with tn.Hub(tn.FunctionModel(reply), ids="sequential", store=tmp_path) as hub:
        kid = hub.start("first", label="notes")
        kid.wait(timeout=5)
        kid.send("second")
        kid.wait(timeout=5)
        live = hub.portal.call(lambda: hub.async_hub.view.activations(kid.id))
    with tn.Hub(tn.FunctionModel(reply), ids="sequential", store=tmp_path) as hub:
        stored = hub.portal.call(lambda: hub.async_hub.view.activations("agent-1"))
        assert hub.activations("agent-1") == stored  # the sync twin
        try:
            hub.portal.call(lambda: hub.async_hub.view.activations("agent-9"))
        except tn.UsageError as error:
            assert str(error) == 'unknown agent "agent-9"'
        else:
            raise AssertionError("no error for an unknown agent")
    assert [(a["turn"], a["reason"], a["input_tokens"], [s["kind"] for s in a["spans"]]) for a in live] == [
        (1, "completed", 10, ["model"]), (2, "completed", 10, ["model"])]
    assert live[0]["end"] <= live[1]["start"]
    assert stored == live
