"""The chat view of a transcript and its Markdown export."""

from __future__ import annotations

import toh_nb as tn
from toh_nb.notebook.chat import chat_entries, chat_markdown

ROWS = [  # conversation rows (toh_nb.conversation)
    {"turn": 1, "role": "user", "source": "user", "text": "Check both"},
    {"turn": 1, "role": "assistant", "text": "", "tool": "subagent, subagent"},
    {"turn": 1, "role": "tool", "tool": "subagent", "arguments": '{"description": "a"}', "text": "a done",
     "is_error": False},
    {"turn": 1, "role": "tool", "tool": "subagent", "arguments": '{"description": "b"}', "text": "Error: b failed",
     "is_error": True},
    {"turn": 1, "role": "assistant", "text": "One of two"},
    {"turn": 1, "role": "turn", "text": "completed"},
    {"turn": 2, "role": "user", "source": "notice", "text": "job finished"},
    {"turn": 2, "role": "turn", "text": "aborted"},
]


def test_parallel_calls_of_one_tool_pair_with_their_results_in_order():
    entries = chat_entries(ROWS)
    assert entries == [
        {"role": "turn", "text": "turn 1"},
        {"role": "user", "text": "Check both", "source": "user"},
        {"role": "assistant", "text": "", "calls": [
            {"tool": "subagent", "arguments": '{"description": "a"}', "result": "a done", "is_error": False},
            {"tool": "subagent", "arguments": '{"description": "b"}', "result": "Error: b failed", "is_error": True}]},
        {"role": "assistant", "text": "One of two", "calls": []},
        {"role": "turn", "text": "turn 2"},
        {"role": "user", "text": "job finished", "source": "notice"},
        {"role": "turn", "text": "turn ended: aborted"}]


def test_markdown_export():
    assert chat_markdown("agent-1", chat_entries(ROWS), "checker") == "\n".join([
        "# checker (agent-1)", "",
        "---  *turn 1*", "",
        "**user**: Check both", "",
        "**assistant**:", "",
        '- tool `subagent` `{"description": "a"}`', "  - result: `a done`",
        '- tool `subagent` `{"description": "b"}`', "  - error: `Error: b failed`", "",
        "**assistant**: One of two", "",
        "---  *turn 2*", "",
        "**notice**: job finished", "",
        "---  *turn ended: aborted*", ""])


def test_a_real_transcript_reads_as_a_conversation():
    script = tn.ScriptedModel({"root": [[tn.ToolCall("subagent", {"description": "x", "prompt": "p1"}),
                                         tn.ToolCall("subagent", {"description": "y", "prompt": "p2"})], "both done"],
                               "x": ["x says hi"], "y": ["y says hi"]})
    with tn.Hub(script, ids="sequential") as hub:
        hub.run("go")
        entries = chat_entries(hub.async_hub.view.transcript(hub.root))
    calls = entries[2]["calls"]
    assert [(c["result"]) for c in calls] == ["x says hi", "y says hi"]
    assert entries[-1] == {"role": "assistant", "text": "both done", "calls": []}
