"""Messages and blocks: a plain-text message keeps only its text, and reads as it always did."""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import pickle

import pytest

from toh_nb.core.content import (
    Message,
    Source,
    Text,
    ToolCall,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
    message_from_json,
    message_to_json,
    user_message,
)


def test_a_message_of_one_text_block_keeps_the_text_and_no_block_or_list():
    """What the collector walks per logged message (bench/README.md, round eight): the message, and
    no block or list of its own."""
    for message in (Message("user", [Text("hello")]), Message("user", "hello"), user_message("hello")):
        held = gc.get_referents(message)
        assert not any(isinstance(o, (Text, list)) for o in held), held
        assert message.content == [Text("hello")] and message.text == "hello"
        assert message.tool_calls == [] and message.tool_call_id is None and message.tool_name is None
        assert message.is_error is False


def test_the_kept_text_reads_exactly_as_the_block_did():
    block_form = Message("user", [Text("a\nb")], id="msg-1", source=Source("coordinator"), usage=Usage(3, 4))
    text_form = Message("user", "a\nb", id="msg-1", source=Source("coordinator"), usage=Usage(3, 4))
    assert block_form == text_form and text_form == block_form
    assert repr(block_form) == "Message(user coordinator: 'a\\nb')"
    assert message_to_json(block_form) == {"role": "user", "content": [{"type": "text", "text": "a\nb"}],
                                           "id": "msg-1", "source": {"kind": "coordinator"},
                                           "usage": {"input_tokens": 3, "output_tokens": 4}}
    again = message_from_json(json.loads(json.dumps(message_to_json(block_form))))
    assert again == block_form and again.content == [Text("a\nb")]
    for twin in (copy.copy(block_form), copy.deepcopy(block_form), pickle.loads(pickle.dumps(block_form))):
        assert twin == block_form and twin.text == "a\nb" and twin.usage == Usage(3, 4)
    assert Message("user", [Text("")]) == Message("user", "") != Message("user", [])
    assert Message("user", "x") != Message("assistant", "x")
    assert Message("user", "x") != Message("user", [Text("x"), Text("y")])


def test_content_read_is_a_new_list_and_assigning_content_changes_the_message():
    message = Message("user", "one")
    read = message.content
    read.append(Text("two"))  # a copy: the message is unchanged
    assert message.content == [Text("one")]
    message.content = [Text("one"), Text("two")]
    assert message.text == "one\ntwo" and message.content == [Text("one"), Text("two")]
    message.content = [Text("three")]
    assert message.content == [Text("three")] and message.text == "three"
    with pytest.raises(TypeError):
        hash(message)


def test_a_lone_tool_call_or_result_is_kept_without_its_list():
    call = ToolCallBlock("call-1", "spawn", {"prompt": "p"})
    result = ToolResultBlock("call-1", "spawn", "done", True)
    for message, block in ((Message("assistant", [call]), call), (Message("tool", [result]), result)):
        assert not any(isinstance(o, list) for o in gc.get_referents(message))
        assert message.content == [block] and message.content is not message.content
        assert message == Message(message.role, [block])
        assert message_from_json(json.loads(json.dumps(message_to_json(message)))) == message
    calling, returning = Message("assistant", [call]), Message("tool", [result])
    assert calling.tool_calls == [ToolCall("spawn", {"prompt": "p"}, "call-1")] and calling.text == ""
    assert calling.tool_call_id is None and calling.is_error is False
    assert returning.tool_calls == [] and returning.text == "done" and returning.tool_call_id == "call-1"
    assert returning.tool_name == "spawn" and returning.is_error is True
    assert message_to_json(returning)["content"] == [{"type": "tool-result", "call_id": "call-1", "name": "spawn",
                                                      "text": "done", "is_error": True}]
    assert message_to_json(calling)["content"] == [{"type": "tool-call", "id": "call-1", "name": "spawn",
                                                    "arguments": {"prompt": "p"}}]


def test_messages_with_other_blocks_keep_their_list():
    call = ToolCallBlock("call-1", "spawn", {"prompt": "p"})
    answer = Message("assistant", [Text("thinking"), call])
    assert answer.content == [Text("thinking"), call] and answer.content is answer.content
    assert answer.tool_calls == [ToolCall("spawn", {"prompt": "p"}, "call-1")] and answer.text == "thinking"
    both = Message("assistant", (call,))  # a sequence other than a list is kept as given
    assert both.content == (call,) and both.tool_calls == [ToolCall("spawn", {"prompt": "p"}, "call-1")]
    # a lone block of a Text subclass is not a plain text: it is kept as given
    class Marked(Text):
        pass

    marked = Message("user", [Marked("m")])
    assert type(marked.content[0]) is Marked


def test_message_still_answers_as_the_dataclass_it_was():
    message = Message("user", [Text("hi")], id="msg-1", source=Source("coordinator"))
    assert dataclasses.is_dataclass(message)
    assert [f.name for f in dataclasses.fields(message)] == ["role", "content", "id", "source", "usage"]
    assert dataclasses.asdict(message) == {"role": "user", "content": [{"text": "hi", "type": "text"}],
                                           "id": "msg-1", "source": {"kind": "coordinator", "form": None,
                                                                     "sender": None, "summary": None,
                                                                     "plugin": None}, "usage": None}
    changed = dataclasses.replace(message, content=[Text("hi"), Text("there")])
    assert changed.text == "hi\nthere" and changed.id == "msg-1" and message.text == "hi"
    assert dataclasses.replace(message, role="assistant") == Message("assistant", "hi", id="msg-1",
                                                                     source=Source("coordinator"))


@pytest.mark.parametrize("usage, stored", [
    (Usage(3, 4), {"input_tokens": 3, "output_tokens": 4}),
    (Usage(3, 4, estimated=True), {"input_tokens": 3, "output_tokens": 4, "estimated": True})])
def test_usage_is_stored_with_its_estimated_mark_only_when_estimated(usage, stored):
    message = Message("assistant", "x", usage=usage)
    data = message_to_json(message)
    assert data["usage"] == stored
    assert message_from_json(json.loads(json.dumps(data))).usage == usage


def test_a_sum_of_usages_is_estimated_when_any_part_was():
    total = Usage(1, 1)
    total.add(Usage(2, 2))
    assert total == Usage(3, 3)
    total.add(Usage(1, 1, estimated=True))
    assert total == Usage(4, 4, estimated=True)
