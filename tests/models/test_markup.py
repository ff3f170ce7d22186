"""Chat markup never reaches an answer; tool results are worded as plain messages (issue 32.5)."""

from __future__ import annotations

import pytest

from toh_nb.core.content import Source
from toh_nb.models.markup import MarkupFilter, notice_text, result_message, strip_markup

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


def test_a_background_start_names_the_job_output_call_with_its_exact_id():
    """Issue 32 (background + job_output): SmolLM2 guessed job ids; the start and the notice it reads name
    the call to make, id included. The transcript keeps the reference's exact texts."""
    assert result_message([("subagent", "started background subagent job subagent-1", False)]) == (
        "The subagent is working in the background as job subagent-1; its answer is not here yet. "
        'To read its answer, call job_output with {"job_id": "subagent-1", "wait": true}.')
    # with another result in the same step, the closing line still asks for a reply
    assert result_message([("subagent", "started background subagent job subagent-2", False),
                           ("subagent", "Paris.", False)]) == (
        "The subagent is working in the background as job subagent-2; its answer is not here yet. "
        'To read its answer, call job_output with {"job_id": "subagent-2", "wait": true}.\n\n'
        "Here is the answer of the subagent:\n\nParis.\n\nUsing it, reply to my request in your own words.")
    # only the subagent tool's own start line is reworded
    assert result_message([("job_list", "started background subagent job subagent-1", False)]).startswith(
        "Here is what the job_list tool returned:")


def test_a_job_notice_gets_the_job_output_call_and_other_messages_stay_as_they_are():
    notice = ("background job subagent-3 (subagent: capital) finished [status: completed]. "
              "Read its output with job_output.")
    source = Source("plugin", form="notice", plugin="tool-jobs", summary="subagent capital [status: completed]")
    assert notice_text(notice, source) == (
        notice + '\n\nTo read its answer, call job_output with {"job_id": "subagent-3", "wait": true}.')
    assert notice_text(notice, Source("user")) == notice
    assert notice_text(notice, None) == notice
    assert notice_text("hello", source) == "hello"
