"""OpenAIChatModel against a real local HTTP server (tests/models/chat_server.py): offline and fast.

The server speaks the OpenAI chat-completions wire format, so these tests cover the real ``openai``
client: request mapping, response parsing, streaming, retries/backoff, timeouts, cancellation, and
that the API key never leaks into repr or error messages.
"""

from __future__ import annotations

import asyncio
import email.utils
import gc
import json
import time

import pytest

import toh_nb as tn

from toh_nb.core.content import Message, Text, ToolCallBlock, ToolResultBlock, user_message
from toh_nb.core.errors import ModelError, UsageError
from toh_nb.core.model import ModelRequest, ModelResponse, ToolSpec
from toh_nb.hub import AsyncHub
from toh_nb.models.openai_chat import OpenAIChatModel

from ..helpers import until
from .chat_server import (ChatServer, delegation_reply, error, hang, raw, stream_cut, stream_text, stream_tool_calls,
                          text, tool_calls)

KEY = "sk-test-SECRET-0123456789"
SEARCH = ToolSpec("search", "Search the web", {"type": "object", "properties": {"q": {"type": "string"}},
                                               "required": ["q"]})


@pytest.fixture
def server():
    with ChatServer() as s:
        yield s


@pytest.fixture
def llama():
    """The stand-in with llama-cpp-python's rules (chatml-function-calling)."""
    with ChatServer(flavour="llama.cpp") as s:
        yield s


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def make(server, **kw) -> OpenAIChatModel:
    kw.setdefault("api_key", KEY)
    kw.setdefault("timeout", 2.0)
    kw.setdefault("backoff", 0.01)
    return OpenAIChatModel("test-model", server.url, **kw)


def req(messages=None, *, system="You are terse.", tools=(), max_tokens=None, agent_id="agent-1",
        label=None, path="root", turn=1, step=1) -> ModelRequest:
    if messages is None:
        messages = [user_message("hello")]
    return ModelRequest(agent_id, label, 0 if label is None else 1, system, list(messages), list(tools),
                        max_tokens, path, turn, step)


def call(model, request):
    async def go():
        try:
            return await model.request(request)
        finally:
            await model.aclose()

    return asyncio.run(go())


# -- mapping ---------------------------------------------------------------------------------------


def test_text_reply_and_request_mapping(server):
    server.push(text("Hi there", usage=(11, 4)))
    conversation = [
        user_message("find x"),
        Message("assistant", [Text("searching"), ToolCallBlock("call_1", "search", {"q": "x"}),
                              ToolCallBlock("call_2", "search", {"q": "ü"})]),
        Message("tool", [ToolResultBlock("call_1", "search", "found x")]),
        Message("tool", [ToolResultBlock("call_2", "search", "Error: nothing", is_error=True)]),
        user_message("thanks"),
    ]
    response = call(make(server), req(conversation, tools=[SEARCH], max_tokens=77))

    assert response == ModelResponse(text="Hi there", usage=response.usage, stop_reason="end_turn")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 4)
    (received,) = server.requests
    assert received.path == "/v1/chat/completions"
    assert received.headers["authorization"] == f"Bearer {KEY}"
    body = received.body
    assert body["model"] == "test-model"
    assert body["max_tokens"] == 77
    assert "stream" not in body
    messages = body["messages"]
    assert messages[0] == {"role": "system", "content": "You are terse."}
    assert messages[1] == {"role": "user", "content": "find x"}
    assistant = messages[2]
    assert assistant["role"] == "assistant" and assistant["content"] == "searching"
    assert [(c["id"], c["type"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in assistant["tool_calls"]] == [("call_1", "function", "search", {"q": "x"}),
                                                  ("call_2", "function", "search", {"q": "ü"})]
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "found x"}
    assert messages[4] == {"role": "tool", "tool_call_id": "call_2", "content": "Error: nothing"}
    assert messages[5] == {"role": "user", "content": "thanks"}
    assert body["tools"] == [{"type": "function", "function": {
        "name": "search", "description": "Search the web", "parameters": SEARCH.parameters}}]


def test_optional_fields_omitted_and_extras_passed(server):
    server.push(text("ok"), text("ok"))
    call(make(server, max_tokens=None), req(system="", tools=[]))
    call(make(server, temperature=0.2, extra_body={"top_k": 5}), req())
    plain, extra = server.bodies
    assert "max_tokens" not in plain and "tools" not in plain and "temperature" not in plain
    assert "tool_choice" not in plain  # never sent without tools
    assert plain["messages"] == [{"role": "user", "content": "hello"}]  # no empty system message
    assert extra["temperature"] == 0.2 and extra["top_k"] == 5


def test_default_max_tokens_and_the_request_value_wins(server):
    server.push(text("ok"), text("ok"), text("ok"))
    call(make(server), req())
    call(make(server, max_tokens=50), req())
    call(make(server, max_tokens=50), req(max_tokens=7))
    assert [b["max_tokens"] for b in server.bodies] == [1024, 50, 7]


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "100"])
def test_bad_max_tokens_is_a_usage_error(server, bad):
    with pytest.raises(UsageError, match=f"max_tokens must be an integer >= 1 or None, got {bad!r}"):
        make(server, max_tokens=bad)


def test_assistant_turn_with_only_tool_calls_is_sent_with_empty_content(server):
    # the stand-in rejects null content with HTTP 500 as llama-cpp-python does; "" passes everywhere
    server.push(text("ok"))
    conversation = [user_message("go"), Message("assistant", [ToolCallBlock("c1", "search", {"q": "y"})]),
                    Message("tool", [ToolResultBlock("c1", "search", "r")])]
    assert call(make(server, max_retries=0), req(conversation, tools=[SEARCH])).text == "ok"
    assistant = server.bodies[0]["messages"][2]
    assert assistant["content"] == "" and assistant["tool_calls"][0]["id"] == "c1"


def test_parallel_tool_calls(server):
    server.push(tool_calls([("call_a", "search", {"q": "alpha"}), ("call_b", "search", {"q": "beta"})],
                           usage=(40, 12)))
    response = call(make(server), req(tools=[SEARCH]))
    assert response.stop_reason == "tool_use"
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_a", "search", {"q": "alpha"}), ("call_b", "search", {"q": "beta"})]
    assert response.text == ""
    assert (response.usage.input_tokens, response.usage.output_tokens) == (40, 12)


def test_tool_calls_reported_with_finish_reason_stop_are_tool_use(server):
    # some local servers (older Ollama) say "stop" even when they called tools
    server.push(tool_calls([("c1", "search", {"q": "z"})], finish_reason="stop"))
    assert call(make(server), req(tools=[SEARCH])).stop_reason == "tool_use"


def test_empty_arguments_and_missing_ids(server):
    server.push(tool_calls([("", "search", "")]))
    (tc,) = call(make(server), req(tools=[SEARCH])).tool_calls
    assert tc.arguments == {} and tc.id is None  # the engine fills in an id


@pytest.mark.parametrize("finish, expected", [("length", "max_tokens"), ("content_filter", "refusal"),
                                              ("stop", "end_turn")])
def test_finish_reasons(server, finish, expected):
    server.push(text("partial", finish_reason=finish))
    response = call(make(server), req())
    assert response.stop_reason == expected and response.text == "partial"


def _estimate(text: str) -> int:
    return -(-len(text) // 4)  # four characters per token, rounded up


def _prompt_estimate(body: dict) -> int:
    return _estimate(json.dumps([body["messages"], body.get("tools", [])], ensure_ascii=False))


def test_missing_usage_is_estimated_never_zero(server):
    """A completion without ``usage`` is counted: about four characters per token, marked estimated."""
    server.push(text("four score", usage=None))
    usage = call(make(server), req(tools=[SEARCH])).usage
    body = server.bodies[-1]
    assert usage == tn.Usage(_prompt_estimate(body), _estimate("four score"), estimated=True)
    assert usage.input_tokens > 30 and usage.output_tokens == 3


def test_reported_usage_is_kept_and_not_estimated(server):
    server.push(text("four score", usage=(7, 2)))
    assert call(make(server), req()).usage == tn.Usage(7, 2)


@pytest.mark.parametrize("flavour, options", [("openai", {"stream_usage": False}), ("llama.cpp", {}),
                                              ("llama.cpp", {"stream_usage": True})])
def test_stream_without_a_usage_chunk_is_estimated(flavour, options):
    """The stand-in streams usage only when ``stream_options.include_usage`` asks (as OpenAI does; the
    llama.cpp flavour never does, as llama-cpp-python's server): without it the turn is still counted."""
    with ChatServer(flavour=flavour) as server:
        server.push(stream_text(["Hel", "lo ", "world"], usage=(12, 3)))
        model = make(server, stream=True, profile=flavour, **options)
        usage = call(model, req()).usage
        body = server.bodies[-1]
    assert usage == tn.Usage(_prompt_estimate(body), _estimate("Hello world"), estimated=True)


def test_stream_with_include_usage_reports_the_servers_count(server):
    server.push(stream_text(["Hel", "lo"], usage=(12, 3)))
    assert call(make(server, stream=True), req()).usage == tn.Usage(12, 3)
    assert server.bodies[-1]["stream_options"] == {"include_usage": True}


def test_cut_answer_without_usage_counts_its_whole_limit(server):
    """A call cut by max_tokens is dropped, but its tokens were generated: the estimate is the limit."""
    server.push(tool_calls([("c1", "search", '{"q": "cut mid-')], usage=None))
    response = call(make(server), req(tools=[SEARCH], max_tokens=40))
    assert response.stop_reason == "max_tokens" and response.tool_calls == []
    assert response.usage.output_tokens == 40 and response.usage.estimated


def test_streamed_turns_without_usage_spend_the_token_budget(server):
    """The bypass of issue 32: a streaming model whose server sends no usage ran every step of a turn
    past its budget, and hub.agents() showed 0 tokens. The estimate is charged: the next step is refused."""
    server.push(stream_tool_calls([("c1", "job_list", ["{}"])]))
    server.push(stream_text(["never reached"]))
    model = make(server, stream=True, stream_usage=False)

    async def main():
        async with tn.AsyncHub(model, ids="sequential", token_budget=50) as hub:
            result = await hub.run("list your jobs")
            return result, await hub.agents()

    result, rows = asyncio.run(main())
    spent = result.usage.input_tokens + result.usage.output_tokens
    assert result.stop_reason == "token-budget" and result.text == ""
    assert result.diagnostic == f"its token budget is spent: {spent} of 50 tokens used (token_budget=50)"
    assert len(server.requests) == 1
    assert result.usage.estimated and spent > 50
    assert rows[0]["input_tokens"] + rows[0]["output_tokens"] == spent
    assert repr(result).endswith(f"tokens={result.usage.input_tokens}/{result.usage.output_tokens} (estimated), "
                                 f"diagnostic={result.diagnostic!r})")


def test_malformed_tool_arguments_name_the_tool(server):
    server.push(tool_calls([("c1", "search", '{"q": "unterminated')]))
    with pytest.raises(ModelError) as info:
        call(make(server), req(tools=[SEARCH]))
    message = str(info.value)
    assert 'tool "search"' in message and '{"q": "unterminated' in message
    assert len(server.requests) == 1  # not a transport failure: no retry


def test_non_object_tool_arguments_are_an_error(server):
    server.push(tool_calls([("c1", "search", "[1, 2]")]))
    with pytest.raises(ModelError, match='tool "search"'):
        call(make(server), req(tools=[SEARCH]))


def test_tool_calls_cut_by_length_are_dropped(server):
    # a max_tokens stop ends the turn: no call of that response may run or stay in the conversation
    server.push(tool_calls([("c1", "search", {"q": "ok"}), ("c2", "search", '{"q": "cut')], finish_reason="length"))
    response = call(make(server), req(tools=[SEARCH], max_tokens=50))
    assert response.stop_reason == "max_tokens" and response.tool_calls == []


def test_cut_tool_json_reported_as_tool_calls_is_a_max_tokens_stop(llama):
    # llama-cpp-python says finish_reason "tool_calls" even when max_tokens cut the arguments
    llama.push(tool_calls([("c1", "search", {"q": "a long query that does not fit"})], usage=(20, 40)))
    response = call(make(llama, tool_choice="search"), req(tools=[SEARCH], max_tokens=12))
    assert llama.bodies[0]["max_tokens"] == 12
    assert (response.stop_reason, response.tool_calls, response.text) == ("max_tokens", [], "")
    assert response.usage.output_tokens == 12


def test_cut_tool_json_without_usage_is_a_max_tokens_stop(server):
    server.push(tool_calls([("c1", "search", '{"q": "cut mid-')], usage=None))
    response = call(make(server), req(tools=[SEARCH]))
    assert (response.stop_reason, response.tool_calls) == ("max_tokens", [])


def test_cut_tool_json_ends_the_turn_max_tokens_through_the_hub(llama):
    llama.push(tool_calls([("c1", "subagent", {"description": "d", "prompt": "p" * 80})], usage=(20, 99)))
    model = make(llama)

    async def go():
        async with AsyncHub(model=model, ids="sequential") as hub:
            return await hub.spawn("delegate", max_tokens=30)

    result = asyncio.run(go())
    assert result.stop_reason == "max-tokens" and result.text == ""
    assert llama.bodies[0]["max_tokens"] == 30 and llama.bodies[0]["tool_choice"] == "auto"


# -- malformed responses ---------------------------------------------------------------------------


def test_malformed_json_body(server):
    server.push(raw(b'{"choices": [ this is not json'))
    with pytest.raises(ModelError, match="malformed response"):
        call(make(server), req())
    assert len(server.requests) == 1


def test_non_json_body(server):
    server.push(raw(b"<html>proxy error</html>", content_type="text/html"))
    with pytest.raises(ModelError, match="not a chat completion"):
        call(make(server), req())


def test_json_without_choices(server):
    server.push(raw(b'{"object": "list", "data": []}'))
    with pytest.raises(ModelError, match="no choices"):
        call(make(server), req())


# -- retries, timeouts, cancellation ---------------------------------------------------------------


def test_429_then_success(server):
    server.push(error(429, "rate limited", headers={"Retry-After": "0"}), text("finally"))
    assert call(make(server), req()).text == "finally"
    assert len(server.requests) == 2


def test_500_then_success(server):
    server.push(error(500, "boom"), error(503, "busy"), text("recovered"))
    assert call(make(server), req()).text == "recovered"
    assert len(server.requests) == 3


def test_retries_are_bounded(server):
    server.push(*[error(500, "still broken")] * 5)
    with pytest.raises(ModelError) as info:
        call(make(server, max_retries=2), req())
    assert len(server.requests) == 3
    assert info.value.status_code == 500
    assert "HTTP 500" in str(info.value) and "still broken" in str(info.value) and "3 attempts" in str(info.value)


def record_delays(monkeypatch) -> list:
    """The backoff delays the retry loop sleeps, in order."""
    delays: list = []
    original = OpenAIChatModel.retry_delay

    def recording(self, attempt, exc):
        delays.append(original(self, attempt, exc))
        return delays[-1]

    monkeypatch.setattr(OpenAIChatModel, "retry_delay", recording)
    return delays


def test_retry_after_is_honoured_within_the_cap(server, monkeypatch):
    delays = record_delays(monkeypatch)
    server.push(error(429, "slow down", headers={"Retry-After": "100"}),
                error(429, "slow down", headers={"Retry-After": "0.02"}), text("ok"))
    assert call(make(server, backoff=0.001, max_backoff=0.05), req()).text == "ok"
    assert delays == [0.05, 0.02]


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_other_4xx_fail_immediately(server, status):
    server.push(error(status, "you did something wrong"), text("never"))
    with pytest.raises(ModelError) as info:
        call(make(server), req())
    assert len(server.requests) == 1
    assert info.value.status_code == status
    assert f"HTTP {status}" in str(info.value) and "you did something wrong" in str(info.value)
    assert "test-model" in str(info.value)


# the openai SDK's retry rules (issue 45: each row measured against the SDK with max_retries=2 on both sides)


@pytest.mark.parametrize("status", [408, 409])
def test_request_timeouts_and_conflicts_are_retried(server, status):
    server.push(error(status, "try again"), text("second time"))
    assert call(make(server, max_retries=2), req()).text == "second time"
    assert len(server.requests) == 2


def test_retried_conflicts_are_bounded(server):
    server.push(*[error(409, "still conflicting")] * 4)
    with pytest.raises(ModelError) as info:
        call(make(server, max_retries=2), req())
    assert len(server.requests) == 3 and info.value.attempts == 3
    assert str(info.value) == (f"OpenAIChatModel('test-model' at {server.url}): HTTP 409: still conflicting "
                               "(gave up after 3 attempts)")


def test_x_should_retry_false_is_obeyed_on_a_server_error(server):
    server.push(error(503, "overloaded, do not retry", headers={"x-should-retry": "false"}), text("never"))
    with pytest.raises(ModelError) as info:
        call(make(server, max_retries=2), req())
    assert len(server.requests) == 1 and info.value.attempts == 1 and info.value.status_code == 503
    assert str(info.value) == (f"OpenAIChatModel('test-model' at {server.url}): HTTP 503: overloaded, do not retry "
                               "(not retried: the server sent x-should-retry: false)")


def test_x_should_retry_true_is_obeyed_on_a_client_error(server):
    server.push(error(400, "transient, retry me", headers={"x-should-retry": "true"}), text("retried"))
    assert call(make(server, max_retries=2), req()).text == "retried"
    assert len(server.requests) == 2


def test_x_should_retry_true_is_still_bounded(server):
    server.push(*[error(400, "transient", headers={"x-should-retry": "true"})] * 3)
    with pytest.raises(ModelError) as info:
        call(make(server, max_retries=1), req())
    assert len(server.requests) == 2
    assert str(info.value).endswith("HTTP 400: transient (gave up after 2 attempts)")


def test_retry_after_as_an_http_date_is_waited_for(server):
    """The server asks for the retry at a time one to two seconds ahead (an HTTP date has whole seconds)."""
    arrivals: list = []

    def responder(body):
        arrivals.append(time.monotonic())
        if len(arrivals) == 1:
            return error(503, "busy", headers={"Retry-After": email.utils.formatdate(time.time() + 2, usegmt=True)})
        return text("on time")

    server.responder = responder
    assert call(make(server, max_retries=2, backoff=0.01, max_backoff=10), req()).text == "on time"
    assert len(arrivals) == 2
    assert 0.9 <= arrivals[1] - arrivals[0] < 3.5, arrivals[1] - arrivals[0]


def test_retry_after_as_an_http_date_is_capped_at_max_backoff(server, monkeypatch):
    delays = record_delays(monkeypatch)
    later = email.utils.formatdate(time.time() + 3600, usegmt=True)
    server.push(error(429, "come back in an hour", headers={"Retry-After": later}), text("ok"))
    assert call(make(server, backoff=0.001, max_backoff=0.05), req()).text == "ok"
    assert delays == [0.05]


def test_retry_after_ms_is_honoured(server, monkeypatch):
    delays = record_delays(monkeypatch)
    server.push(error(503, "busy", headers={"retry-after-ms": "30", "Retry-After": "100"}), text("ok"))
    assert call(make(server, backoff=0.001, max_backoff=1), req()).text == "ok"
    assert delays == [0.03]  # retry-after-ms wins over Retry-After, as in the SDK


def test_hang_times_out_with_bounded_retries(server):
    server.push(hang(5), hang(5), hang(5), text("never"))
    with pytest.raises(ModelError) as info:
        call(make(server, timeout=0.3, max_retries=2), req())
    assert len(server.requests) == 3
    assert info.value.status_code is None and info.value.attempts == 3
    assert str(info.value) == (f"OpenAIChatModel('test-model' at {server.url}): no response within the 0.3s timeout "
                               "(gave up after 3 attempts)")


def test_connection_refused_is_retried_then_model_error():
    with ChatServer() as dead:
        url = dead.url
    model = OpenAIChatModel("m", url, api_key=KEY, max_retries=1, backoff=0.01, timeout=1)
    with pytest.raises(ModelError, match="connection failed|gave up") as info:
        call(model, req())
    assert info.value.attempts == 2


def test_cancellation_propagates_without_retry(server):
    server.push(hang(5), text("after"))
    model = make(server, max_retries=3)

    async def go():
        task = asyncio.create_task(model.request(req()))
        await until(lambda: len(server.requests) == 1, "the request to reach the server", timeout=10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the model stays usable; a retry after the cancel would have taken "after" (and this would fail)
        response = await model.request(req())
        await model.aclose()
        return response

    assert asyncio.run(go()).text == "after"
    assert len(server.requests) == 2


def test_usable_across_event_loops(server):
    server.push(text("one"), text("two"))
    model = make(server)
    assert asyncio.run(model.request(req())).text == "one"
    assert call(model, req()).text == "two"


# -- streaming -------------------------------------------------------------------------------------


def test_stream_text_with_deltas_and_usage(server):
    server.push(stream_text(["Hel", "lo ", "world"], usage=(12, 3)))
    deltas = []
    model = make(server, stream=True, on_delta=lambda agent, piece: deltas.append((agent, piece)))
    response = call(model, req(agent_id="agent-7"))
    assert response.text == "Hello world" and response.stop_reason == "end_turn"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert deltas == [("agent-7", "Hel"), ("agent-7", "lo "), ("agent-7", "world")]
    body = server.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_stream_parallel_tool_calls(server):
    server.push(stream_tool_calls([("call_a", "search", ['{"q"', ': "al', 'pha"}']),
                                   ("call_b", "search", ['{"q": ', '"beta"}'])], content=["Let me look."]))
    seen = []

    async def on_delta(agent, piece):  # async callbacks are awaited
        seen.append(piece)

    response = call(make(server, stream=True, on_delta=on_delta), req(tools=[SEARCH]))
    assert response.stop_reason == "tool_use"
    assert response.text == "Let me look." and seen == ["Let me look."]
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_a", "search", {"q": "alpha"}), ("call_b", "search", {"q": "beta"})]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (30, 9)


def test_stream_without_on_delta_and_with_failing_on_delta(server):
    server.push(stream_text(["a", "b"]), stream_text(["c"]))
    assert call(make(server, stream=True), req()).text == "ab"

    def broken(agent, piece):
        raise RuntimeError("display is gone")

    assert call(make(server, stream=True, on_delta=broken), req()).text == "c"


def test_stream_retries_before_any_delta(server):
    server.push(error(503, "warming up"), stream_text(["ok"]))
    assert call(make(server, stream=True, on_delta=lambda a, p: None), req()).text == "ok"
    assert len(server.requests) == 2


def test_stream_that_stalls_after_text_is_not_retried(server):
    stalled = stream_text(["partial "])
    stalled.events.insert(2, 5.0)  # role chunk, "partial ", then a long pause
    server.push(stalled, stream_text(["never"]))
    shown = []
    with pytest.raises(ModelError, match="not retried"):
        call(make(server, stream=True, timeout=0.3, on_delta=lambda a, p: shown.append(p)), req())
    assert shown == ["partial "] and len(server.requests) == 1


# -- keys and configuration ------------------------------------------------------------------------


def test_api_key_never_leaks(server):
    model = make(server)
    assert KEY not in repr(model) and KEY not in str(model) and KEY not in f"{model}"
    assert repr(model) == f"OpenAIChatModel(model='test-model', base_url='{server.url}')"
    assert KEY not in repr(vars(model))
    server.push(error(401, f"Incorrect API key provided: {KEY}"))
    with pytest.raises(ModelError) as info:
        call(model, req())
    assert KEY not in str(info.value) and KEY not in repr(info.value)
    assert "HTTP 401" in str(info.value) and "<redacted>" in str(info.value)
    assert info.value.__cause__ is None  # the openai exception (with its headers) is not chained


def test_no_key_without_base_url_fails_at_first_request():
    model = OpenAIChatModel("gpt-4o-mini")  # construction never fails
    assert repr(model) == "OpenAIChatModel(model='gpt-4o-mini', base_url=None)"
    with pytest.raises(ModelError, match="no API key.*OPENAI_API_KEY.*base_url"):
        call(model, req())


def test_local_server_needs_no_key(server):
    server.push(text("local"))
    assert call(OpenAIChatModel("llama", server.url, backoff=0.01), req()).text == "local"
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


def test_environment_variables_are_honoured(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-42")
    server.push(text("env"))
    model = OpenAIChatModel("m")
    assert model.base_url == server.url and "sk-from-env" not in repr(model)
    assert call(model, req()).text == "env"
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env-42"


def test_max_tokens_field_for_reasoning_models(server):
    server.push(text("ok"))
    call(make(server, max_tokens_field="max_completion_tokens"), req(max_tokens=9))
    body = server.bodies[0]
    assert body["max_completion_tokens"] == 9 and "max_tokens" not in body


def test_given_client_is_used(server):
    import openai

    client = openai.AsyncOpenAI(api_key="sk-given-client-key", base_url=server.url, max_retries=5)
    server.push(error(400, "bad"), text("never"))
    model = OpenAIChatModel("m", client=client, backoff=0.01)
    with pytest.raises(ModelError, match="HTTP 400"):
        asyncio.run(model.request(req()))
    assert len(server.requests) == 1
    assert server.requests[0].headers["authorization"] == "Bearer sk-given-client-key"


# -- a real delegation through the engine ------------------------------------------------------------


def test_delegation_through_the_hub(server):


    server.responder = delegation_reply
    model = make(server)

    async def go():
        try:
            async with AsyncHub(model=model, ids="sequential") as hub:
                return await hub.run("What is 2+2? Delegate it.")
        finally:
            await model.aclose()

    result = asyncio.run(go())
    assert getattr(result, "text", str(result)) == "child said: 4"
    bodies = server.bodies
    assert len(bodies) == 3
    assert any(t["function"]["name"] == "subagent" for t in bodies[0].get("tools", []))
    tool_messages = [m for m in bodies[2]["messages"] if m["role"] == "tool"]
    assert tool_messages and tool_messages[0]["tool_call_id"] == "call_sub"


# -- tool_choice ------------------------------------------------------------------------------------


def test_tool_choice_defaults_to_auto_when_tools_are_offered(server):
    server.push(text("a"), text("b"))
    call(make(server), req(tools=[SEARCH]))
    call(make(server), req(tools=[]))
    with_tools, without = server.bodies
    assert with_tools["tool_choice"] == "auto"
    assert "tool_choice" not in without and "tools" not in without


@pytest.mark.parametrize("option, sent", [
    ("none", "none"), ("required", "required"),
    ("search", {"type": "function", "function": {"name": "search"}}),
    ({"type": "function", "function": {"name": "search"}}, {"type": "function", "function": {"name": "search"}}),
])
def test_tool_choice_values_are_sent(server, option, sent):
    server.push(tool_calls([("c1", "search", {"q": "x"})]))
    call(make(server, tool_choice=option), req(tools=[SEARCH]))
    assert server.bodies[0]["tool_choice"] == sent


def test_tool_choice_none_value_sends_no_field(server):
    server.push(text("ok"))
    call(make(server, tool_choice=None), req(tools=[SEARCH]))
    assert "tool_choice" not in server.bodies[0] and server.bodies[0]["tools"]


def test_tool_choice_callable_sees_step_turn_and_depth(server):
    seen = []

    def choose(request):
        seen.append((request.depth, request.turn, request.step))
        return "search" if request.step == 1 else "none"

    server.push(tool_calls([("c1", "search", {"q": "x"})]), text("done"))
    model = make(server, tool_choice=choose)
    call(model, req(tools=[SEARCH], step=1))
    call(model, req(tools=[SEARCH], step=2, turn=3))
    assert seen == [(0, 1, 1), (0, 3, 2)]
    assert [b["tool_choice"] for b in server.bodies] == [{"type": "function", "function": {"name": "search"}}, "none"]


@pytest.mark.parametrize("bad, message", [
    (42, 'tool_choice must be "auto", "none", "required", a tool name, None or a callable, got int 42'),
    ("not a name!", 'tool_choice must be "auto", "none", "required", a tool name, None or a callable, '
                    "got 'not a name!'"),
    ({"type": "tool", "name": "x"}, 'a dict tool_choice must be {"type": "function", "function": {"name": '
                                    "\"<tool>\"}}, got {'type': 'tool', 'name': 'x'}"),
])
def test_bad_tool_choice_is_a_usage_error_at_construction(server, bad, message):
    with pytest.raises(UsageError) as info:
        make(server, tool_choice=bad)
    assert str(info.value) == message


def test_tool_choice_callable_returning_a_bad_value_ends_the_turn_with_that_error(server):
    model = make(server, tool_choice=lambda request: 7)

    async def go():
        async with AsyncHub(model=model, ids="sequential") as hub:
            return await hub.run("hi", check=False)

    result = asyncio.run(go())
    assert result.stop_reason == "error" and server.requests == []
    assert result.diagnostic == ('tool_choice must be "auto", "none", "required", a tool name, None or a callable, '
                                 "got int 7")


def test_forcing_a_tool_the_request_does_not_offer_is_a_model_error(server):
    with pytest.raises(ModelError) as info:
        call(make(server, tool_choice="subagent"), req(tools=[SEARCH]))
    assert str(info.value) == ('tool_choice forces the tool "subagent", which this request does not offer '
                               "(offered: search)")
    assert server.requests == []


def test_forced_subagent_at_the_roots_first_step_delegates(llama):
    # the llama.cpp stand-in only lets the model call a tool when tool_choice allows it; the child's
    # answer must then reach the root, whose next request carries it
    llama.forced_arguments["subagent"] = {"description": "sum", "prompt": "add 2+2"}
    llama.responder = lambda body: text("ignored") if body.get("tools") else delegation_reply(body)
    model = OpenAIChatModel("m", llama.url, backoff=0.01, timeout=5, profile="llama.cpp",
                            tool_choice=lambda r: "subagent" if r.depth == 0 and r.step == 1 else "none")

    async def go():
        async with AsyncHub(model=model, ids="sequential") as hub:
            return await hub.run("What is 2+2? Delegate it.")

    result = asyncio.run(go())
    assert (result.stop_reason, result.text) == ("completed", "child said: 4")
    choices = [(b["messages"][-1]["content"][:20], b.get("tool_choice")) for b in llama.bodies]
    assert choices == [("What is 2+2? Delegat", {"type": "function", "function": {"name": "subagent"}}),
                       ("add 2+2", "none"),
                       ("Here is the answer o", "none")]
    assert llama.bodies[2]["messages"][-1]["content"] == ("Here is the answer of the subagent:\n\n4\n\n"
                                                          "Using it, reply to my request in your own words.")
    # issue 32.4: every request was streamed (an abandoned stream stops the server), the forced call too
    assert [b.get("stream") for b in llama.bodies] == [True, True, True]


# -- streams that end early ----------------------------------------------------------------------------

CUT = "the stream ended before the server finished the answer"


@pytest.mark.parametrize("cut, detail", [
    (stream_cut(["par", "tial"]), "no finish_reason after 3 chunk(s)"),              # [DONE], no finish
    (stream_cut(["par"], done=False), "no finish_reason after 2 chunk(s)"),          # closed after a chunk
    (raw(b"", content_type="text/event-stream"), "the server sent no chunks at all (an empty answer)"),
])
def test_stream_without_finish_reason_is_retried_then_a_model_error(server, cut, detail):
    server.push(cut, cut, cut)
    with pytest.raises(ModelError) as info:
        call(make(server, stream=True, max_retries=2), req())
    assert str(info.value) == (f"OpenAIChatModel('test-model' at {server.url}): {CUT} ({detail}) "
                               "(gave up after 3 attempts)")
    assert len(server.requests) == 3


def test_stream_cut_then_complete_stream_succeeds(server):
    server.push(stream_cut(["half"]), stream_text(["whole"]))
    assert call(make(server, stream=True), req()).text == "whole"
    assert len(server.requests) == 2


def test_stream_cut_after_shown_text_is_not_retried(server):
    server.push(stream_cut(["shown "], done=False), stream_text(["never"]))
    shown = []
    with pytest.raises(ModelError) as info:
        call(make(server, stream=True, on_delta=lambda a, p: shown.append(p)), req())
    assert str(info.value).endswith("— text was already shown, so it was not retried")
    assert shown == ["shown "] and len(server.requests) == 1


def test_cut_streams_of_concurrent_children_end_their_turns_with_error(server):
    # llama-cpp-python's interrupt_requests cuts the first of two concurrent streams with [DONE]
    server.responder = lambda body: stream_cut(["I was"])
    model = make(server, stream=True, max_retries=1)

    async def go():
        async with AsyncHub(model=model, ids="sequential") as hub:
            return await asyncio.gather(hub.spawn("one", check=False), hub.spawn("two", check=False))

    for result in asyncio.run(go()):
        assert (result.stop_reason, result.text) == ("error", "")
        assert result.diagnostic == (f"OpenAIChatModel('test-model' at {server.url}): {CUT} (no finish_reason after "
                                     "2 chunk(s)) (gave up after 2 attempts)")


# -- closing clients ------------------------------------------------------------------------------------


def test_close_leaves_no_task_failing_on_a_closed_loop(server):
    # the model served a loop that has stopped since (a finished asyncio.run, a stopped portal); its
    # pooled keep-alive connection belongs to that dead loop. Closing on another loop must not schedule
    # a close of it there ("Task exception was never retrieved ... Event loop is closed").
    gc.collect()  # what earlier tests left unreferenced is not this model's: collect it before watching
    server.push(text("one"), text("two"))
    model = make(server)
    old = asyncio.new_event_loop()
    assert old.run_until_complete(model.request(req())).text == "one"
    old.close()
    reports = []

    async def go():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reports.append(context))
        assert (await model.request(req())).text == "two"
        await model.aclose()
        for _ in range(5):
            await asyncio.sleep(0)
        gc.collect()
        await asyncio.sleep(0)

    asyncio.run(go())
    assert [(r.get("message"), repr(r.get("exception"))) for r in reports] == [], [repr(r.get("future")) for r in reports]
    assert old.is_closed()  # kept alive on purpose until here: its client stayed registered


def test_close_leaves_the_client_of_another_running_loop_to_that_loop(server):
    import threading

    server.push(text("portal"), text("still there"))
    model = make(server)
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(model.request(req()), other).result(10)
        (client,) = model.clients()
        asyncio.run(model.aclose())  # another loop: the portal's client is not its to close
        assert not client.is_closed()
        assert asyncio.run_coroutine_threadsafe(model.request(req()), other).result(10).text == "still there"
        asyncio.run_coroutine_threadsafe(model.aclose(), other).result(10)
        assert client.is_closed() and model.clients() == []
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(10)
        other.close()


# -- the stand-in is as strict as the servers ------------------------------------------------------------


def test_stand_in_rejects_null_assistant_content_like_llama_cpp_python(server):
    import httpx

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"},
                                       {"role": "assistant", "content": None, "tool_calls": []}]}
    answer = httpx.post(server.url + "/chat/completions", json=body, timeout=5)
    assert answer.status_code == 500
    message = answer.json()["error"]["message"]
    assert "('body', 'messages', 1, 'ChatCompletionRequestAssistantMessage', 'content')" in message
    assert "'msg': 'Input should be a valid string', 'input': None" in message


# -- the optional extra and the key ------------------------------------------------------------------------


def test_missing_openai_package_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "openai", None)  # "import openai" now fails as if not installed
    with pytest.raises(UsageError) as info:
        OpenAIChatModel("gpt-4o-mini")
    assert str(info.value) == ("OpenAIChatModel needs the 'openai' package, which is an optional extra of toh-nb: "
                               "pip install 'toh-nb[openai]' (the offline models need nothing more)")


def test_hub_works_without_the_openai_package():
    import subprocess
    import sys

    script = ("import sys; sys.modules['openai'] = None\n"
              "import toh_nb as tn\n"
              "with tn.Hub(model=tn.FunctionModel(lambda request: 'fine'), ids='sequential') as hub:\n"
              "    print(hub.run('hi').text)\n"
              "with tn.Hub() as hub:\n"
              "    print(hub.spawn('Say hi', label='demo').stop_reason)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["fine", "completed"]


def test_the_key_is_a_secret_str(server):
    from pydantic import SecretStr

    model = make(server)
    held = [value for value in vars(model).values() if isinstance(value, SecretStr)]
    assert [value.get_secret_value() for value in held] == [KEY]  # held once, as a SecretStr
    assert KEY not in repr(vars(model)) and KEY not in repr(model)  # never in plain text in its state


def test_connection_error_without_a_message_names_its_type(server):
    # llama-cpp-python can drop the connection so that the transport's exception has an empty text
    import httpx
    import openai

    # a real request: openai >= 3.6x reads its headers (request=None raised AttributeError in the constructor)
    error = openai.APIConnectionError(request=httpx.Request("POST", f"{server.url}/chat/completions"))
    error.__cause__ = ConnectionResetError()
    # the text of a transport fault the fake server cannot produce (a ConnectionResetError without a message)
    message = str(make(server)._connection_error(error, 2, False))  # noqa: SLF001 - formats that fault: no public seam raises it
    assert message == (f"OpenAIChatModel('test-model' at {server.url}): connection failed (ConnectionResetError) "
                       "(gave up after 2 attempts)")


def test_streamed_text_reaches_the_hub_event_stream_as_text_deltas(server):
    """A streaming model feeds ``TextDelta`` events (via ``ModelRequest.on_delta``) besides its own callback."""
    from toh_nb.core.events import TextDelta

    server.push(stream_text(["Hel", "lo ", "world"], usage=(12, 3)))
    own = []

    async def main():
        model = make(server, stream=True, on_delta=lambda agent, piece: own.append(piece))
        async with tn.AsyncHub(model, ids="sequential") as hub:
            seen = []
            unsubscribe = hub.view.subscribe(lambda e: seen.append(e) if isinstance(e, TextDelta) else None)
            result = await hub.run("hi")
            unsubscribe()
            return result.text, [(e.agent_id, e.text) for e in seen]

    text, deltas = asyncio.run(main())
    assert text == "Hello world"
    assert deltas == [("root", "Hel"), ("root", "lo "), ("root", "world")]
    assert own == ["Hel", "lo ", "world"]


def test_without_listeners_requests_carry_no_delta_publisher(server):
    server.push(stream_text(["ok"]))
    seen = []
    model = make(server, stream=True)

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: seen.append(r.on_delta) or "x")) as hub:
            await hub.run("hi")

    asyncio.run(main())
    assert seen == [None]  # nobody listens: nothing is built per piece
    assert call(model, req()).text == "ok"


def test_a_none_step_keeps_the_tools_and_extends_the_previous_request(server):
    """Issue 32 item 6: "none" is sent as ``tool_choice`` with the tool list kept, so each request of an
    agent extends the previous one (a server's prompt cache reuses the tools and the conversation)."""
    server.push(tool_calls([("c1", "search", {"q": "capital"})]), text("Paris."))
    model = make(server, tool_choice=lambda r: "search" if r.step == 1 else "none")

    async def main():
        async with tn.AsyncHub(model, ids="sequential", tools=[tn.Tool(lambda q: f"found {q}", name="search")],
                               delegation_tools=[]) as hub:
            return await hub.run("Find the capital.")

    assert asyncio.run(main()).text == "Paris."
    first, second = server.bodies
    assert (first["tool_choice"], second["tool_choice"]) == ({"type": "function", "function": {"name": "search"}},
                                                             "none")
    assert second["tools"] == first["tools"] and "search" in [t["function"]["name"] for t in first["tools"]]
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert len(second["messages"]) == len(first["messages"]) + 2  # the call, then its result
