"""Server profiles of OpenAIChatModel against the strict stand-in's llama.cpp flavours.

Each quirk of :mod:`toh_nb.models.profiles` was measured on llama-cpp-python's server; the stand-in
reproduces it (tests/models/chat_server.py), so each test here fails if the adapter stops working
around it.
"""

from __future__ import annotations

import asyncio

import pytest

from toh_nb.core.content import Message, Source, Text, ToolCallBlock, ToolResultBlock, user_message
from toh_nb.core.errors import ModelError, UsageError
from toh_nb.hub import AsyncHub
from toh_nb.models.openai_chat import OpenAIChatModel
from toh_nb.models.profiles import PROFILES, ServerProfile, unescape_html

from .chat_server import ChatServer, delegation_reply, stream_text, text, tool_calls
from .test_openai_chat import SEARCH, call, req


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def llama():
    with ChatServer(flavour="llama.cpp") as s:
        yield s


@pytest.fixture
def chatml():
    with ChatServer(flavour="chatml-function-calling") as s:
        yield s


def make(server, **kw) -> OpenAIChatModel:
    kw.setdefault("timeout", 5.0)
    kw.setdefault("backoff", 0.01)
    return OpenAIChatModel("smol", server.url, **kw)


def delegate(model):
    async def go():
        async with AsyncHub(model=model, ids="sequential") as hub:
            return await hub.run("What is 2+2? Delegate it.")

    return asyncio.run(go())


# -- the table ---------------------------------------------------------------------------------------


def test_unknown_profile_lists_the_names():
    with pytest.raises(UsageError) as info:
        OpenAIChatModel("m", profile="llamacpp")
    assert str(info.value) == ("unknown server profile 'llamacpp'; expected one of 'openai', 'llama.cpp', 'ollama', "
                               "'vllm'")


def test_profiles_and_explicit_overrides():
    assert OpenAIChatModel("m").profile == ServerProfile("openai")
    llama = OpenAIChatModel("m", profile="llama.cpp").profile
    assert llama == PROFILES["llama.cpp"] == ServerProfile(
        "llama.cpp", tool_results_as_text=True, max_tokens_field="max_tokens", stream_usage=False,
        stream_with_tools=False, unescape_html=True, tool_choice_required=False, empty_auto_text=True,
        stream_to_cancel=True, strip_markup=True, max_string_chars=600)
    tuned = OpenAIChatModel("m", profile="llama.cpp", tool_results_as_text=False, stream_usage=True).profile
    assert (tuned.tool_results_as_text, tuned.stream_usage, tuned.unescape_html) == (False, True, True)
    assert OpenAIChatModel("m", max_tokens_field="max_completion_tokens").max_tokens_field == "max_completion_tokens"


@pytest.mark.parametrize("kwargs, message", [
    ({"tool_results_as_text": "yes"}, "tool_results_as_text must be True, False or None (the profile's default), "
                                      "got 'yes'"),
    ({"max_tokens_field": "max_new_tokens"}, "max_tokens_field must be one of 'max_tokens', 'max_completion_tokens', "
                                             "got 'max_new_tokens'"),
    ({"profile": "llama.cpp", "tool_choice": "required"},
     'tool_choice="required" is not supported by the \'llama.cpp\' server profile (the server fails with HTTP 500); '
     'name the tool to force instead, e.g. tool_choice="subagent"'),
])
def test_bad_profile_options_are_usage_errors(kwargs, message):
    with pytest.raises(UsageError) as info:
        OpenAIChatModel("m", **kwargs)
    assert str(info.value) == message


def test_unescape_undoes_exactly_the_template_escapes():
    escaped = "I&#39;m &#34;here&#34; &lt;b&gt; &amp;amp; &amp;lt; &nbsp;"
    assert unescape_html(escaped) == 'I\'m "here" <b> &amp; &lt; &nbsp;'


# -- llama.cpp quirks, one by one --------------------------------------------------------------------------


def test_tool_results_as_text_one_user_message_per_step(llama):
    llama.push(text("ok"))
    conversation = [
        user_message("find x"),
        Message("assistant", [Text("looking"), ToolCallBlock("c1", "search", {"q": "x"}),
                              ToolCallBlock("c2", "search", {"q": "y"})]),
        Message("tool", [ToolResultBlock("c1", "search", "found x")]),
        Message("tool", [ToolResultBlock("c2", "search", "Error: nothing", is_error=True)]),
        user_message("thanks"),
    ]
    call(make(llama, profile="llama.cpp", tool_choice="none"), req(conversation, tools=[SEARCH]))
    messages = llama.bodies[0]["messages"]
    assert messages[2]["role"] == "assistant" and messages[2]["content"] == "looking"
    assert [c["id"] for c in messages[2]["tool_calls"]] == ["c1", "c2"]  # the call keeps its structure
    assert messages[3:] == [
        {"role": "user", "content": "Here is what the search tool returned:\n\nfound x\n\n"
                                    "The search tool failed:\n\nError: nothing\n\n"
                                    "Using it, reply to my request in your own words."},
        {"role": "user", "content": "thanks"}]


def test_a_background_start_and_its_notice_name_the_job_output_call_for_a_small_model(llama):
    """Issue 32 (background + job_output): with results as text the model reads which id to pass; the
    ``openai`` profile sends the reference's exact texts."""
    notice = ("background job subagent-1 (subagent: capital) finished [status: completed]. "
              "Read its output with job_output.")
    conversation = [
        user_message("find x"),
        Message("assistant", [ToolCallBlock("c1", "subagent", {"prompt": "x", "run_in_background": True})]),
        Message("tool", [ToolResultBlock("c1", "subagent", "started background subagent job subagent-1")]),
        Message("assistant", [Text("Started.")]),
        Message("user", [Text(notice)], source=Source("plugin", form="notice", plugin="tool-jobs", summary="s")),
    ]
    hint = 'To read its answer, call job_output with {"job_id": "subagent-1", "wait": true}.'
    llama.push(text("ok"))
    call(make(llama, profile="llama.cpp", tool_choice="none"), req(conversation, tools=[SEARCH]))
    assert llama.bodies[0]["messages"][-3:] == [
        {"role": "user", "content": "The subagent is working in the background as job subagent-1; its answer is "
                                    "not here yet. " + hint},
        {"role": "assistant", "content": "Started."},
        {"role": "user", "content": notice + "\n\n" + hint}]
    with ChatServer() as server:
        server.push(text("ok"))
        call(make(server, tool_choice="none"), req(conversation, tools=[SEARCH]))
    sent = server.bodies[0]["messages"]
    assert sent[-3]["content"] == "started background subagent job subagent-1" and sent[-1]["content"] == notice


def test_llama_cpp_sends_max_tokens_and_no_stream_options(llama):
    llama.push(stream_text(["hi"], usage=(3, 1)), text("ok"))
    model = make(llama, profile="llama.cpp", stream=True)
    response = call(model, req(max_tokens=9))
    body = llama.bodies[0]
    assert body["max_tokens"] == 9 and "max_completion_tokens" not in body
    assert body["stream"] is True and "stream_options" not in body
    # the server sends no usage: the turn is counted all the same, marked as an estimate
    assert (response.text, response.usage.output_tokens, response.usage.estimated) == ("hi", 1, True)


def test_max_completion_tokens_is_ignored_by_llama_cpp(llama):
    # what the override is for, and why the llama.cpp profile never sends it
    llama.push(text("x" * 40), text("x" * 40))
    cut = call(make(llama, max_tokens=8), req())
    ignored = call(make(llama, max_tokens=8, max_tokens_field="max_completion_tokens"), req())
    assert (cut.text, cut.stop_reason) == ("x" * 8, "max_tokens")
    assert (len(ignored.text), ignored.stop_reason) == (40, "end_turn")


def test_llama_cpp_does_not_stream_requests_that_offer_tools(llama):
    # "Automatic streaming tool choice is not supported": a 200 with an empty body
    llama.push(tool_calls([("c1", "search", {"q": "x"})]))
    deltas = []
    model = make(llama, profile="llama.cpp", stream=True, on_delta=lambda agent, piece: deltas.append(piece))
    response = call(model, req(tools=[SEARCH]))
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("search", {"q": "x"})]
    assert "stream" not in llama.bodies[0] and deltas == []
    # with tool_choice "none" the tools cannot be called, and the server streams fine
    llama.push(stream_text(["a", "b"]))
    silent = make(llama, profile="llama.cpp", stream=True, tool_choice="none",
                  on_delta=lambda agent, piece: deltas.append(piece))
    assert call(silent, req(tools=[SEARCH])).text == "ab"
    assert llama.bodies[1]["stream"] is True and deltas == ["a", "b"]


def test_streamed_tool_call_in_auto_mode_fails_without_the_profile(llama):
    llama.push(*[tool_calls([("c1", "search", {"q": "x"})])] * 2)
    with pytest.raises(ModelError) as info:
        call(make(llama, stream=True, max_retries=1), req(tools=[SEARCH]))
    assert "the stream ended before the server finished the answer (the server sent no chunks at all" in str(info.value)


def test_text_of_a_non_streamed_request_still_reaches_on_delta(llama):
    llama.push(text(""), text("the answer"))  # auto: empty text, then asked again with "none"
    deltas = []
    model = make(llama, profile="llama.cpp", stream=True, on_delta=lambda agent, piece: deltas.append((agent, piece)))
    assert call(model, req(tools=[SEARCH], agent_id="agent-3")).text == "the answer"
    assert deltas == [("agent-3", "the answer")]


def test_empty_auto_text_is_asked_again_with_tool_choice_none(llama):
    llama.push(text("lost to the grammar", usage=(100, 3)), text("hello there", usage=(90, 2)))
    response = call(make(llama, profile="llama.cpp"), req(tools=[SEARCH]))
    assert [b["tool_choice"] for b in llama.bodies] == ["auto", "none"]
    assert (response.text, response.stop_reason) == ("hello there", "end_turn")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (190, 5)


def test_without_the_profile_auto_text_comes_back_empty(llama):
    llama.push(text("lost to the grammar"))
    assert call(make(llama), req(tools=[SEARCH])).text == ""
    assert len(llama.requests) == 1


def test_html_escapes_are_undone_in_text_and_arguments(llama):
    llama.push(tool_calls([("c1", "search", {"q": "it&#39;s &lt;b&gt;", "&#34;k&#34;": ["a &amp; b"]})]),
               text("I&#39;m &#34;fine&#34;"))
    model = make(llama, profile="llama.cpp", tool_choice="search")
    (call_,) = call(model, req(tools=[SEARCH])).tool_calls
    assert call_.arguments == {"q": "it's <b>", '"k"': ["a & b"]}
    plain = make(llama, profile="llama.cpp", tool_choice="none")
    assert call(plain, req(tools=[SEARCH])).text == 'I\'m "fine"'


def test_streamed_deltas_are_unescaped_and_join_to_the_final_text(llama):
    pieces = ["I&#", "39;m ", "&lt;b&", "gt; &amp;", "lt; &", "amp", "; AT&T", " &"]
    llama.push(stream_text(pieces))
    deltas = []
    model = make(llama, profile="llama.cpp", stream=True, on_delta=lambda agent, piece: deltas.append(piece))
    response = call(model, req())
    assert response.text == "I'm <b> &lt; & AT&T &"
    assert "".join(deltas) == response.text
    assert deltas == ["I", "'m ", "<b", "> &", "lt; ", "& AT", "&T ", "&"]


def test_required_from_a_callable_under_llama_cpp_ends_the_turn_with_the_usage_text(llama):
    model = make(llama, profile="llama.cpp", tool_choice=lambda r: "required")

    async def go():
        async with AsyncHub(model=model, ids="sequential") as hub:
            return await hub.run("hi", check=False)

    result = asyncio.run(go())
    assert result.stop_reason == "error" and llama.requests == []
    assert result.diagnostic.startswith('tool_choice="required" is not supported by the \'llama.cpp\' server profile')


# -- delegation end to end: the regressions of the real-server report ---------------------------------------


def test_delegation_under_chatml_function_calling_needs_the_profile(chatml):
    chatml.responder = delegation_reply
    # the openai profile against a template that drops tool content: the root never hears the child
    deaf = delegate(make(chatml))
    assert (deaf.stop_reason, deaf.text) == ("completed", "")
    chatml.requests.clear()
    heard = delegate(make(chatml, profile="llama.cpp"))
    assert (heard.stop_reason, heard.text) == ("completed", "child said: 4")
    root_last = [r.body for r in chatml.requests if r.body["messages"][1]["content"].startswith("What is")][-1]
    assert root_last["messages"][-1] == {"role": "user", "content": "Here is the answer of the subagent:\n\n4\n\n"
                                                                    "Using it, reply to my request in your own words."}
    assert [r.body.get("tool_choice") for r in chatml.requests] == ["auto", "auto", "none", "auto", "none"]


def test_without_tool_choice_llama_cpp_never_sees_the_tools(llama):
    llama.responder = delegation_reply
    result = delegate(make(llama, tool_choice=None))
    # the model wrote its call as text, since the tools were dropped from its prompt
    assert result.text == 'functions.subagent:\n{"description": "sum", "prompt": "add 2+2"}'
    assert len(llama.requests) == 1 and "tools" not in llama.requests[0].seen


def test_small_model_server_recipe_mounts_the_delegation_tool_without_background_mode():
    """Issue 32 item 3: the README's server recipe lost the child's answer 3 runs in 5 because the model
    set ``run_in_background: true``. The recipe mounts ``subagent`` with ``enable_run_in_background=False``
    (the reference's ``enableRunInBackground: false``): the schema has no such field, a forced call always
    waits for the child, and the root's next request carries the child's answer."""
    import toh_nb as tn

    with ChatServer(flavour="llama.cpp") as server:
        server.forced_arguments["subagent"] = {"description": "sum", "prompt": "add 2+2"}
        server.responder = delegation_reply
        model = make(server, profile="llama.cpp",
                     tool_choice=lambda r: "subagent" if r.depth == 0 and r.step == 1 else "none")

        async def main():
            async with AsyncHub(model, ids="sequential", max_tokens=128,
                                delegation_tools=[tn.SubagentTool(enable_run_in_background=False)]) as hub:
                return await hub.run("Ask a subagent: add 2+2"), await hub.jobs()

        result, jobs = asyncio.run(main())
        first = server.bodies[0]
    subagent = next(t for t in first["tools"] if t["function"]["name"] == "subagent")
    assert "run_in_background" not in subagent["function"]["parameters"]["properties"]
    assert len(jobs) == 0 and result.text == "child said: 4"  # the answer came back in the foreground


# -- issue 32.4/32.5: bounded arguments, markup kept out of answers --------------------------------------


def test_llama_cpp_bounds_every_string_and_array_of_the_tool_schemas_it_sends(llama):
    nested = {"type": "object", "properties": {
        "q": {"type": "string"}, "short": {"type": "string", "maxLength": 5}, "mode": {"type": "string", "enum": ["a"]},
        "tags": {"type": "array", "items": {"type": "string"}}, "n": {"type": "integer"}}}
    from toh_nb.core.model import ToolSpec

    tool = ToolSpec("search", "Search.", nested)
    llama.push(text("ok"), text("ok"))
    call(make(llama, profile="llama.cpp", tool_choice="none"), req(tools=[tool]))
    call(make(llama, profile="llama.cpp", tool_choice="none", max_string_chars=40), req(tools=[tool]))
    sent = [body["tools"][0]["function"]["parameters"]["properties"] for body in llama.bodies]
    assert sent[0] == {"q": {"type": "string", "maxLength": 600}, "short": {"type": "string", "maxLength": 5},
                       "mode": {"type": "string", "enum": ["a"]},
                       "tags": {"type": "array", "items": {"type": "string", "maxLength": 600}, "maxItems": 32},
                       "n": {"type": "integer"}}
    assert sent[1]["q"] == {"type": "string", "maxLength": 40}
    assert tool.parameters["properties"]["q"] == {"type": "string"}  # the tool's own schema is untouched
    with pytest.raises(UsageError, match=r"^max_string_chars must be a positive int or None \(the profile's "
                                         r"default\), got 0$"):
        OpenAIChatModel("m", profile="llama.cpp", max_string_chars=0)


def test_openai_profile_sends_the_tool_schemas_unchanged(llama):
    llama.push(text("ok"))
    call(make(llama, tool_choice="none"), req(tools=[SEARCH]))
    assert llama.bodies[0]["tools"][0]["function"]["parameters"] == SEARCH.parameters


def test_llama_cpp_answers_never_carry_chat_markup_streamed_or_not(llama):
    echo = '<tool_response name="subagent">\nParis.\n</tool_response><tool_call>\n{"name": "x"}\n</tool_call>'
    llama.push(text(echo), stream_text([echo[i:i + 3] for i in range(0, len(echo), 3)]))
    plain = call(make(llama, profile="llama.cpp", tool_choice="none", stream_to_cancel=False), req(tools=[SEARCH]))
    deltas = []
    streamed = call(make(llama, profile="llama.cpp", tool_choice="none", stream=True,
                         on_delta=lambda agent, piece: deltas.append(piece)), req(tools=[SEARCH]))
    assert plain.text == streamed.text == "".join(deltas) == "\nParis.\n"
    assert llama.bodies[0].get("stream") is None and llama.bodies[1]["stream"] is True
    # the openai profile leaves a model's text alone
    llama.push(text(echo))
    assert call(make(llama, tool_choice="none"), req(tools=[SEARCH])).text == echo
