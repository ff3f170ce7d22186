"""LocalModel on the real SmolLM2 model: what reaches the prompt, budgets, the model's own tool choice.

Prompt token counts are the model's own measure of what it was shown, so they prove that tool results
reach the prompt (llama.cpp's chatml-function-calling drops them: equal counts for a 2-word and a
90-word result).
"""

from __future__ import annotations

import asyncio
import re

import pytest

import toh_nb as tn
from tests.helpers import until
from tests.real.conftest import HAVE_LOCAL, NO_LOCAL
from toh_nb.core.content import Message, Text, ToolCallBlock, ToolResultBlock
from toh_nb.core.model import ModelRequest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.skipif(not HAVE_LOCAL, reason=NO_LOCAL)]

SUBAGENT = tn.ToolSpec("subagent", "Hand a task to a subagent.", {
    "type": "object", "properties": {"description": {"type": "string"}, "prompt": {"type": "string"}},
    "required": ["description", "prompt"], "additionalProperties": False})


def after_a_call(result: str) -> ModelRequest:
    messages = [
        Message("user", [Text("Find the capital of France.")]),
        Message("assistant", [ToolCallBlock("c1", "subagent", {"description": "capital", "prompt": "Capital?"})]),
        Message("tool", [ToolResultBlock("c1", "subagent", result)]),
    ]
    return ModelRequest(agent_id="agent-1", label=None, depth=0, system="Answer briefly.", messages=messages,
                        tools=[SUBAGENT], max_tokens=1)


def test_a_longer_tool_result_grows_the_prompt_by_its_tokens():
    short_result = "Paris, France."
    long_result = short_result + " " + " ".join(["Paris has been the capital of France for centuries."] * 10)

    async def main():
        model = tn.LocalModel(tool_choice="none")
        short = await model.request(after_a_call(short_result))
        long = await model.request(after_a_call(long_result))
        return short.usage.input_tokens, long.usage.input_tokens

    short, long = asyncio.run(main())
    # ten repetitions of a ten-word sentence: at least ~100 more tokens in the prompt
    assert long - short >= 100


def test_max_tokens_ends_the_response_with_stop_reason_max_tokens_and_counts_usage():
    request = ModelRequest(agent_id="agent-1", label=None, depth=0, system="",
                           messages=[Message("user", [Text("Write a long poem about the sea.")])], tools=[],
                           max_tokens=5)

    async def main():
        return await tn.LocalModel().request(request)

    response = asyncio.run(main())
    assert response.stop_reason == "max_tokens"
    assert response.usage.output_tokens == 5
    assert response.usage.input_tokens > 5
    assert response.text


def few_shot(cities: list[str], ask: str) -> list[Message]:
    """Earlier turns in which the assistant delegated with ``<tool_call>``; then a new request."""
    messages = []
    for i, city in enumerate(cities):
        messages += [Message("user", [Text(f"Delegate: describe {city}.")]),
                     Message("assistant", [ToolCallBlock(f"c{i}", "subagent", {"description": f"describe {city}",
                                                                               "prompt": f"Describe {city}."})]),
                     Message("tool", [ToolResultBlock(f"c{i}", "subagent", f"{city} is a city.")]),
                     Message("assistant", [Text(f"{city} is a city.")])]
    return [*messages, Message("user", [Text(ask)])]


def test_auto_lets_the_model_choose_and_a_call_it_makes_is_always_valid():
    """Under "auto" the 135M model answers plain requests in text, and after four turns of delegating
    with ``<tool_call>`` it starts one itself: the rest of that call is generated under the grammar.
    (Greedy decoding is deterministic on one machine; this choice is what it made on this one.)"""
    conversations = [[Message("user", [Text("Say hello.")])],
                     few_shot(["Paris", "Rome", "Berlin", "Madrid"], "Delegate: describe Lisbon.")]

    async def main():
        model = tn.LocalModel(max_tokens=128)
        return [await model.request(ModelRequest(agent_id="agent-1", label=None, depth=0, system="",
                                                 messages=messages, tools=[SUBAGENT]))
                for messages in conversations]

    text, call = asyncio.run(main())
    assert text.tool_calls == [] and text.stop_reason in ("end_turn", "max_tokens") and text.text
    assert call.stop_reason == "tool_use"
    [made] = call.tool_calls
    assert made.name == "subagent"
    assert set(made.arguments) == {"description", "prompt"}
    assert all(isinstance(value, str) for value in made.arguments.values())


def test_cancelling_during_prompt_processing_stops_between_chunks():
    """A long prompt is evaluated in chunks with a stop check between them: cancelled at once, the
    worker is free again with only a small part of the prompt in the model's cache."""
    filler = " ".join(f"Line {i}: the river runs past the mill and the old stone bridge." for i in range(250))
    request = ModelRequest(agent_id="agent-1", label=None, depth=0, system="",
                           messages=[Message("user", [Text(filler)])], tools=[], max_tokens=4)

    async def main():
        model = tn.LocalModel(tool_choice="none")
        engine = model.engine
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(engine.executor, engine.load)
        prompt_tokens = len(engine.llama.tokenize(filler.encode(), add_bos=False))
        task = asyncio.ensure_future(model.request(request))
        await until(lambda: engine.running is not None, "the generation to start", timeout=60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        evaluated = await loop.run_in_executor(engine.executor, lambda: engine.llama.n_tokens)
        return prompt_tokens, evaluated

    prompt_tokens, evaluated = asyncio.run(main())
    assert prompt_tokens > 3000
    assert evaluated < prompt_tokens // 4


MARKUP = re.compile(r"<[a-zA-Z/|!?]")


def test_the_root_answers_from_its_childs_result_without_echoing_markup():
    """Issue 32.5: after a delegation SmolLM2 answered with the ``<tool_response …>`` block it was shown
    (4 runs of 5), and at a text-only step it wrote ``<tool_call>`` blocks as prose. The result now
    reaches it as a plain message and a text step is generated under the markup-free text grammar."""
    messages = [
        Message("user", [Text("Find out what the capital of France is. Delegate it to a subagent and wait for "
                              "its answer.")]),
        Message("assistant", [ToolCallBlock("c1", "subagent", {"description": "The capital of France is Paris.",
                                                               "prompt": "The answer is Paris."})]),
        Message("tool", [ToolResultBlock("c1", "subagent", "The answer is Paris.")]),
    ]
    deltas = []

    async def main():
        model = tn.LocalModel(max_tokens=96, on_delta=lambda agent, piece: deltas.append(piece))
        answers = []
        for choice in ("none", "auto"):
            model.tool_choice = choice
            answers.append(await model.request(ModelRequest(agent_id="agent-1", label=None, depth=0, system="",
                                                            messages=messages, tools=[SUBAGENT])))
        return answers

    none, auto = asyncio.run(main())
    assert none.text.strip() and not MARKUP.search(none.text)
    assert none.tool_calls == []
    # "auto": a valid call or a clean text, never markup in the text
    assert not MARKUP.search(auto.text)
    assert all(call.name == "subagent" for call in auto.tool_calls)
    assert "".join(deltas) == none.text + auto.text


def lookup(query: str) -> str:
    """Look a fact up."""
    return "Paris is the capital of France."


def test_each_request_reuses_the_previous_prompt_from_the_cache_across_none_steps_and_turns():
    """Issue 32 item 6: a "none" step keeps the tool list, so the prompt of every request of the root
    extends the previous one and the KV cache holds all of it: the step after a forced call, and the
    root's next turn, evaluate only their new tokens. The cache's state is llama-cpp-python's public
    ``Llama.n_tokens`` (the tokens it holds, n_past) and ``input_ids``."""
    model = tn.LocalModel(tool_choice=lambda r: "lookup" if r.step == 1 else "none", max_tokens=48)
    held = []  # n_past after each turn

    async def main():
        async with tn.AsyncHub(model=model, ids="sequential", tools=[tn.Tool(lookup)], delegation_tools=[]) as hub:
            for prompt in ("What is the capital of France? Look it up.", "Thank you. Say it in one word."):
                await hub.run(prompt)
                held.append(model.engine.llama.n_tokens)

    asyncio.run(main())
    uses = [use for use in model.cache_log if use.agent_id == "root"]
    assert [(use.turn, use.step) for use in uses] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    for before, after in zip(uses, uses[1:]):
        # all of the previous prompt but the tokens where its end meets the new text (a call's opening
        # tag, the assistant header) was found in the cache and not evaluated again
        assert after.reused_tokens >= before.prompt_tokens - 3, (before, after)
        assert after.evaluated_tokens < after.prompt_tokens // 3, after
    # the root's new turn reused the whole first turn: everything the cache held after it but its answer
    assert uses[2].reused_tokens >= uses[1].prompt_tokens
    assert held[0] >= uses[2].reused_tokens
