"""DemoModel: the offline default — deterministic, and it really delegates."""

from __future__ import annotations

import time

import pytest

import toh_nb as tn
from toh_nb.core.content import Message, Source, Text, ToolCallBlock, ToolResultBlock
from toh_nb.core.errors import UsageError
from toh_nb.core.model import ModelRequest, ToolSpec
from toh_nb.models.demo import DemoModel

TOPIC = "Plan a small vegetable garden"
STABLE_AGENT_COLUMNS = ["id", "parent", "depth", "label", "mode", "status", "turns", "input_tokens",
                        "output_tokens", "stop_reason"]


def run_tree(**hub_options):
    with tn.Hub(DemoModel(latency=0.005), ids="sequential", **hub_options) as hub:
        result = hub.run(TOPIC)
        agents = hub.agents()
        transcripts = {agent_id: hub.transcript(agent_id, raw=True).values.tolist() for agent_id in agents.id}
        return result, agents, transcripts, hub.jobs()


def test_two_runs_are_identical():
    first_result, first_agents, first_transcripts, _ = run_tree()
    second_result, second_agents, second_transcripts, _ = run_tree()
    assert first_result.text == second_result.text
    assert repr(first_result) == repr(second_result)
    assert first_agents[STABLE_AGENT_COLUMNS].values.tolist() == second_agents[STABLE_AGENT_COLUMNS].values.tolist()
    assert first_transcripts == second_transcripts


def test_the_root_really_delegates():
    result, agents, transcripts, jobs = run_tree()
    assert result.stop_reason == "completed"
    assert agents[["id", "parent", "depth", "label", "mode"]].values.tolist() == [
        ["root", None, 0, None, "root"],
        ["agent-1", "root", 1, "research", "one-shot"],
        ["agent-4", "agent-1", 2, "sources", "one-shot"],
        ["agent-2", "root", 1, "analyse", "one-shot"],
        ["agent-3", "root", 1, "draft", "one-shot"],
        ["agent-5", "root", 1, "review", "one-shot"],
    ]
    assert set(agents.stop_reason) == {"completed"}
    assert (agents.output_tokens > 0).all() and (agents.input_tokens > 0).all()
    assert jobs[["id", "label", "status"]].values.tolist() == [["subagent-1", "review", "completed"]]
    # the three foreground delegations are issued in one assistant message (run in parallel)
    root = [row for row in transcripts["root"] if row[1] == "assistant/message"]
    assert root[0][5] == "subagent, subagent, subagent"
    assert [row[5] for row in root] == ["subagent, subagent, subagent", "subagent", "job_output", None]
    lines = result.text.splitlines()
    assert lines[0] == f'Summary for "{TOPIC}":'
    assert [line.split(":")[0] for line in lines[1:5]] == ["- research", "- analyse", "- draft",
                                                           "- review (job subagent-1)"]
    assert "(Backed by: Sources on" in lines[1]
    assert lines[-1] == "4 of 4 delegated tasks answered."


def test_the_parallel_children_overlap_in_time():
    with tn.Hub(DemoModel(latency=0.01), ids="sequential") as hub:
        hub.run(TOPIC)
        events = hub.events()
    lifecycle = events[events.kind.isin(["subagent/start", "subagent/end"])][["kind", "id"]].values.tolist()
    # all three fan-out children start before the first one ends: they ran in parallel
    assert lifecycle[:3] == [["subagent/start", "agent-1"], ["subagent/start", "agent-2"],
                             ["subagent/start", "agent-3"]]
    assert ["subagent/start", "agent-4"] in lifecycle  # research delegated once more (a grandchild)


def test_continuable_background_mode_follows_up_and_acknowledges_the_notice():
    with tn.Hub(DemoModel(latency=0.01), ids="sequential", background_mode="continuable") as hub:
        result = hub.run(TOPIC)
        assert "- review (subagent agent-5): asked a follow-up" in result.text
        assert result.text.endswith("3 of 4 delegated tasks answered.")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the reviewer settles, then the root acknowledges its notice
            root = hub.transcript("root", raw=True)
            agents = hub.agents().set_index("id")
            if (agents.loc["agent-5", "status"] == "ready" and agents.loc["root", "status"] == "idle"
                    and root[root.kind == "assistant/message"].text.tolist()[-1].startswith("Noted: ")):
                break
            time.sleep(0.02)
        root = hub.transcript("root", raw=True)
        notices = root[root.source == "subagent-settled"].text.tolist()
        assert notices and notices[-1].startswith("Background subagent agent-5 finished")
        assert root[root.kind == "assistant/message"].text.tolist()[-1] == (
            "Noted: Background subagent agent-5 finished and will do no further work unless you send it more.")
        assert str(hub.list_agents()) == "agent-5 [ready] \u2014 review"
        review = hub.transcript("agent-5", raw=True)
        users = review[review.kind == "user/message"].text.tolist()
        assert users[-1] == f'Follow-up: which single risk matters most for "{TOPIC}"?'
        answers = review[review.kind == "assistant/message"].text.tolist()
        assert answers[-1].startswith('On the follow-up about "plan a small vegetable garden"')


def test_spawn_start_send_with_the_demo_model():
    with tn.Hub(DemoModel(latency=0), ids="sequential") as hub:
        summary = hub.spawn("Summarise the quarterly report", label="summary")
        assert summary.text == ('[summary] Done: "Summarise the quarterly report" \u2014 handled in 4 words of input.')
        research = hub.spawn('Research "tide pools"', label="research")
        assert research.text.startswith('Key facts on "tide pools":')
        assert "(Backed by: Sources on \"tide pools\"" in research.text  # it delegated once more
        kid = hub.start("You review essays", label="reviewer")
        assert kid.wait(timeout=5).startswith('[reviewer] Done: "You review essays"')
        kid.send("Is the intro too long?")
        assert kid.wait(timeout=5) == ('[reviewer] Follow-up handled: "Is the intro too long" '
                                       '(about "you review essays").')
        job = hub.spawn("Crawl the archive", label="crawler", background=True)
        assert job.output(wait=True, timeout=5).startswith('[crawler] Done: "Crawl the archive"')


def test_user_started_job_notice_is_read_on_the_roots_next_turn():
    with tn.Hub(DemoModel(latency=0), ids="sequential", delegation_tools=[]) as hub:
        job = hub.spawn("Index files", label="indexer", background=True)
        job.output(wait=True, timeout=5)
        result = hub.run("What next?")
        # no delegation tool: a direct answer; the injected job notice did not derail the turn
        assert result.text.startswith('No delegation tool is available here, so a direct answer on "What next":')
        root = hub.transcript("root", raw=True)
        assert root[root.source == "plugin"].text.tolist() == [
            "background job subagent-1 (subagent: indexer) finished [status: completed]. Read its output with job_output."]


def test_max_depth_zero_still_ends_with_a_final_answer():
    with tn.Hub(DemoModel(latency=0), ids="sequential", max_depth=0) as hub:
        result = hub.run(TOPIC)
    assert result.stop_reason == "completed"
    assert "- research: could not be delegated (Error: subagent depth 1 exceeds maxDepth 0)" in result.text
    assert result.text.endswith("0 of 4 delegated tasks answered.")


def test_an_interrupted_demo_child_stops_at_once():
    with tn.Hub(DemoModel(latency=30), ids="sequential") as hub:
        kid = hub.start("Take your time", label="slowpoke")
        time.sleep(0.05)
        started = time.monotonic()
        kid.interrupt()
        kid.wait(timeout=5)
        assert time.monotonic() - started < 2
        assert kid.status == "ready"


def _request(messages, label=None, tools=(), depth=0):
    return ModelRequest("agent-x", label, depth, "system words here", messages, list(tools))


def test_decide_acknowledges_notices_and_handles_empty_and_unknown_input():
    model = DemoModel()
    notice = Message("user", [Text("background job subagent-3 (subagent: x) finished [status: completed]. Read it.")],
                     source=Source("plugin", form="notice", plugin="tool-jobs"))
    answer = Message("assistant", [Text("done")])
    prompt = Message("user", [Text("do it")], source=Source("user"))
    ack = model.decide(_request([prompt, answer, notice], label="kid"))
    assert ack.text == "[kid] Noted: background job subagent-3 (subagent: x) finished [status: completed]. Read it."
    assert ack.tool_calls == []
    assert model.decide(_request([])).text == "There is nothing to do yet: send me a task."
    assert model.decide(_request([notice])).text.startswith("Noted: background job subagent-3")
    generic = model.decide(_request([prompt], label="anything"))
    assert generic.text == '[anything] Done: "do it" \u2014 handled in 2 words of input.'
    assert generic.usage.input_tokens == 3 + 2 and generic.usage.output_tokens == len(generic.text.split())


def test_decide_root_plan_is_bounded_and_adapts_to_the_tools():
    model = DemoModel()
    subagent = ToolSpec("subagent", "", {"type": "object", "properties": {"description": {}, "prompt": {}}})
    prompt = Message("user", [Text("Topic")], source=Source("user"))
    first = model.decide(_request([prompt], tools=[subagent]))
    assert [c.name for c in first.tool_calls] == ["subagent"] * 3
    assert all("run_in_background" not in c.arguments for c in first.tool_calls)  # no such parameter here
    calls = [ToolCallBlock(f"c{i}", "subagent", c.arguments) for i, c in enumerate(first.tool_calls)]
    messages = [prompt, Message("assistant", calls)]
    messages += [Message("tool", [ToolResultBlock(f"c{i}", "subagent", f"answer {i}")]) for i in range(3)]
    final = model.decide(_request(messages, tools=[subagent]))  # no background parameter: collect now
    assert final.tool_calls == []
    assert final.text.splitlines() == ['Summary for "Topic":', "- research: answer 0", "- analyse: answer 1",
                                       "- draft: answer 2", "3 of 3 delegated tasks answered."]


def test_seed_changes_the_wording_but_each_seed_is_stable():
    prompt = Message("user", [Text('Research "owls"')], source=Source("user"))
    texts = {seed: DemoModel(seed=seed).decide(_request([prompt], label="analyse", depth=1)).text
             for seed in range(8)}
    assert len(set(texts.values())) > 1
    assert texts[3] == DemoModel(seed=3).decide(_request([prompt], label="analyse", depth=1)).text


@pytest.mark.parametrize("kwargs, message", [
    ({"latency": -1}, "latency must be a non-negative number"),
    ({"latency": "fast"}, "latency must be a non-negative number"),
    ({"latency": float("inf")}, "latency must be at most 1000000000 seconds, got inf"),
    ({"seed": 1.5}, "seed must be an integer or a string"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(UsageError, match=message):
        DemoModel(**kwargs)


def test_repr_is_deterministic():
    assert repr(DemoModel()) == "DemoModel(latency=0.02, seed=0)"
    assert tn.DemoModel is DemoModel
