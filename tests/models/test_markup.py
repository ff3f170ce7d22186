"""Chat markup never reaches an answer; tool results are worded as plain messages (issue 32.5)."""

from __future__ import annotations

import pytest

from toh_nb.models.markup import MarkupFilter, result_message, strip_markup

ECHO = '<tool_response name="subagent">\nParis is the capital.\n</tool_response>'


@pytest.mark.parametrize("text, clean", [
    (ECHO, "\nParis is the capital.\n"),
    ('Sure. <tool_call>\n{"name": "subagent", "arguments": {}}\n</tool_call> Done.', "Sure.  Done."),
    ('Cut <tool_call>\n{"name": "sub', "Cut "),
    ("<|im_start|>assistant\nHi<|im_end|>", "assistant\nHi"),
    ("a < b and c > d, x<y", "a < b and c > d, x<y"),
    ("ends with <", "ends with <"),
    ("ends with <tool_resp", "ends with <tool_resp"),
    ("stray </tool_call> tag", "stray  tag"),
    ("no markup", "no markup"),
])
def test_strip_markup_removes_calls_and_template_tags_and_keeps_the_rest(text, clean):
    assert strip_markup(text) == clean


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_streamed_pieces_join_to_exactly_the_stripped_text(size):
    text = (ECHO + " a < b <tool_call>\n{\"x\": 1}\n</tool_call>then <|im_end|> and "
            '<tool_response name="job_output">x</tool_response><tool_call>{"cut')
    markup = MarkupFilter()
    pieces = [markup.feed(text[i:i + size]) for i in range(0, len(text), size)] + [markup.flush()]
    assert "".join(pieces) == strip_markup(text) == "\nParis is the capital.\n a < b then  and x"
    assert not any("<tool" in piece or "<|" in piece for piece in pieces)


def test_a_step_results_are_one_plain_message_that_asks_for_an_answer():
    assert result_message([("subagent", "Paris.", False)]) == (
        "Here is the answer of the subagent:\n\nParis.\n\nUsing it, reply to my request in your own words.")
    assert result_message([("subagent", "boom", True), ("job_output", "42", False), (None, "x", True)]) == (
        "The subagent failed:\n\nboom\n\nHere is what the job_output tool returned:\n\n42\n\n"
        "The tool failed:\n\nx\n\nUsing it, reply to my request in your own words.")
