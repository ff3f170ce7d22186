"""RecordingModel / ReplayModel: record real exchanges once, replay them offline and deterministically."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from toh_nb.core.content import Message, Source, ToolCallBlock, ToolResultBlock, user_message
from toh_nb.core.errors import ModelError, ReplayMissError, UsageError
from toh_nb.core.model import ModelRequest, ModelResponse, ToolSpec
from toh_nb.hub import AsyncHub
from toh_nb.models.openai_chat import OpenAIChatModel
from toh_nb.models.record import RecordingModel, ReplayModel, canonical_request, request_digest

from .chat_server import ChatServer, delegation_reply, stream_text, text, tool_calls

KEY = "sk-record-SECRET-987654321"
SEARCH = ToolSpec("search", "Search", {"type": "object", "properties": {"q": {"type": "string"}}})


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def req(messages, *, agent_id="agent-1", label=None, path="root", turn=1, step=1, system="sys",
        tools=(SEARCH,), max_tokens=None) -> ModelRequest:
    return ModelRequest(agent_id, label, path.count("/"), system, list(messages), list(tools), max_tokens,
                        path, turn, step)


def serve(model, requests):
    async def go():
        out = [await model.request(r) for r in requests]
        close = getattr(model, "aclose", None)
        if close is not None:
            await close()
        return out

    return asyncio.run(go())


def conversation():
    first = req([user_message("find the answer")], path="root", turn=1, step=1)
    second = req([user_message("find the answer"),
                  Message("assistant", [ToolCallBlock("call_a", "search", {"q": "answer"})]),
                  Message("tool", [ToolResultBlock("call_a", "search", "42")])], path="root", turn=1, step=2)
    child = req([user_message("summarise 42", source=Source("coordinator", sender="agent-1"))],
                agent_id="agent-2", label="research", path="root/research", turn=2, step=1)
    return [first, second, child]


def test_record_with_real_adapter_then_replay_offline(tmp_path):
    path = tmp_path / "deep" / "dir" / "run.jsonl"  # parent directories are created
    requests = conversation()
    with ChatServer() as server:
        server.push(tool_calls([("call_a", "search", {"q": "answer"})], usage=(20, 5)),
                    text("The answer is 42.", usage=(30, 6)),
                    stream_text(["forty", "-two"], usage=(7, 2)))
        live = OpenAIChatModel("test-model", server.url, api_key=KEY, backoff=0.01, timeout=2)
        recorded = serve(RecordingModel(live, path), requests[:2])
        live_stream = OpenAIChatModel("test-model", server.url, api_key=KEY, stream=True, timeout=2)
        recorded += serve(RecordingModel(live_stream, path), requests[2:])
    # the server is gone: replay is offline
    assert [r.text for r in recorded] == ["", "The answer is 42.", "forty-two"]
    replay = ReplayModel(path)
    replayed = serve(replay, requests)
    assert replayed == recorded
    assert all(isinstance(r, ModelResponse) for r in replayed)
    assert replayed[0].tool_calls[0].id == "call_a" and replayed[0].stop_reason == "tool_use"

    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(e["agent"], e["label"], e["turn"], e["step"]) for e in lines] == [
        ("root", None, 1, 1), ("root", None, 1, 2), ("root/research", "research", 2, 1)]
    assert all(e["digest"] == request_digest(e["request"]) for e in lines)
    assert lines[2]["request"]["messages"][0]["source"] == "coordinator"
    assert set(lines[0]["request"]) == {"system", "messages", "tools", "max_tokens"}
    raw_text = path.read_text()
    assert KEY not in raw_text and "agent-1" not in raw_text and "agent-2" not in raw_text

    # a request that was not recorded fails loudly, naming the agent and turn
    changed = req([user_message("summarise 43")], agent_id="agent-2", label="research", path="root/research",
                  turn=2, step=1)
    with pytest.raises(ReplayMissError) as info:
        serve(ReplayModel(path), [changed])
    message = str(info.value)
    assert 'agent "root/research"' in message and "turn 2" in message
    assert "messages[0]" in message and "re-record" in message
    assert isinstance(info.value, ModelError)


def test_miss_for_an_unknown_agent(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ReplayMissError, match=r'agent "root/x" .*turn 3.*nothing was recorded'):
        serve(ReplayModel(empty), [req([user_message("hi")], label="x", path="root/x", turn=3)])


class Echo:
    """A tiny inner model: answers with a counter, so repeated identical requests get different answers."""

    def __init__(self):
        self.calls = 0

    async def request(self, request):
        self.calls += 1
        return ModelResponse(text=f"answer {self.calls}: {request.last_user_text}")


def test_identical_requests_are_served_in_recorded_order(tmp_path):
    path = tmp_path / "twins.jsonl"
    twin = req([user_message("same prompt")], label="twin", path="root/twin")
    recorded = serve(RecordingModel(Echo(), path), [twin, twin])
    assert [r.text for r in recorded] == ["answer 1: same prompt", "answer 2: same prompt"]
    replay = ReplayModel(path)
    assert serve(replay, [twin, twin]) == recorded
    with pytest.raises(ReplayMissError, match="recorded 2 time"):
        serve(replay, [twin])
    replay.reset()
    assert serve(replay, [twin]) == recorded[:1]


def test_digest_ignores_run_specific_ids():
    a = req([user_message("go", id="msg-1", source=Source("subagent-report", sender="agent-3"))], agent_id="agent-9")
    b = req([user_message("go", id=str(uuid.uuid4()), source=Source("subagent-report", sender=str(uuid.uuid4())))],
            agent_id=str(uuid.uuid4()))
    assert request_digest(a) == request_digest(b)
    assert "agent_id" not in canonical_request(a)
    # what the model is asked does matter
    assert request_digest(a) != request_digest(req([user_message("go!")]))
    assert request_digest(a) != request_digest(req([user_message("go")], max_tokens=10))
    assert request_digest(a) != request_digest(req([user_message("go")], tools=()))
    assert request_digest(a) != request_digest(req([user_message("go")], system="other"))


def test_uuids_in_texts_are_normalised(tmp_path):
    path = tmp_path / "uuids.jsonl"
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    recorded = serve(RecordingModel(Echo(), path),
                     [req([user_message(f"started subagent {first}; then {second}; again {first}")])])
    other1, other2 = str(uuid.uuid4()), str(uuid.uuid4())
    replay = ReplayModel(path)
    assert serve(replay, [req([user_message(f"started subagent {other1}; then {other2}; again {other1}")])]) == recorded
    # the same ids in a different pattern are a different request
    with pytest.raises(ReplayMissError):
        serve(ReplayModel(path), [req([user_message(f"started subagent {other1}; then {other2}; again {other2}")])])


def test_model_errors_are_recorded_and_replayed(tmp_path):
    path = tmp_path / "errors.jsonl"

    class Failing:
        async def request(self, request):
            raise ModelError("HTTP 400: context length exceeded")

    with pytest.raises(ModelError, match="context length"):
        serve(RecordingModel(Failing(), path), [req([user_message("too long")])])
    with pytest.raises(ModelError, match="context length") as info:
        serve(ReplayModel(path), [req([user_message("too long")])])
    assert not isinstance(info.value, ReplayMissError)


def test_cancellation_is_not_recorded(tmp_path):
    path = tmp_path / "cancel.jsonl"

    class Slow:
        async def request(self, request):
            await asyncio.sleep(10)

    async def go():
        task = asyncio.create_task(RecordingModel(Slow(), path).request(req([user_message("x")])))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert not path.exists() or path.read_text() == ""


def test_secrets_are_scrubbed_from_recordings(tmp_path, monkeypatch):
    path = tmp_path / "secret.jsonl"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-55555")

    class Inner(Echo):
        def redact_values(self):
            return [KEY]

    leaky = req([user_message(f"my key is {KEY} and env sk-env-key-55555 and token tok-xyz-1")])
    serve(RecordingModel(Inner(), path, scrub=["tok-xyz-1"]), [leaky])
    content = path.read_text()
    assert KEY not in content and "sk-env-key-55555" not in content and "tok-xyz-1" not in content
    assert content.count("<redacted>") >= 3
    # the digest was taken before scrubbing: the live request still replays
    assert serve(ReplayModel(path), [leaky])[0].text.startswith("answer 1")


def test_overwrite_and_append(tmp_path):
    path = tmp_path / "rec.jsonl"
    serve(RecordingModel(Echo(), path), [req([user_message("a")])])
    serve(RecordingModel(Echo(), path), [req([user_message("b")])])
    assert len(path.read_text().splitlines()) == 2
    serve(RecordingModel(Echo(), path, overwrite=True), [req([user_message("c")])])
    assert len(path.read_text().splitlines()) == 1


def test_bad_recordings_fail_loudly(tmp_path):
    with pytest.raises(UsageError, match="no recording"):
        ReplayModel(tmp_path / "missing.jsonl")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"digest": "x", "response": {"text": "ok"}}\n\nnot json\n')
    with pytest.raises(UsageError, match=r"broken.jsonl:3"):
        ReplayModel(broken)


def test_repr_hides_the_key(tmp_path):
    model = RecordingModel(OpenAIChatModel("m", "http://localhost:1/v1", api_key=KEY), tmp_path / "r.jsonl")
    assert KEY not in repr(model)


# -- through the engine ----------------------------------------------------------------------------


@pytest.mark.parametrize("ids", ["sequential", "uuid"])
def test_record_a_delegation_then_replay_it_through_the_hub(tmp_path, ids):
    path = tmp_path / "delegation.jsonl"


    async def run(model):
        async with AsyncHub(model=model, ids=ids) as hub:
            return await hub.run("What is 2+2? Delegate it.")

    with ChatServer() as server:
        server.responder = delegation_reply
        live = OpenAIChatModel("test-model", server.url, api_key=KEY, backoff=0.01, timeout=2)
        recorded = asyncio.run(run(RecordingModel(live, path)))
        assert len(server.requests) == 3
    replayed = asyncio.run(run(ReplayModel(path)))
    assert replayed.text == recorded.text == "child said: 4"
    agents = [json.loads(line)["agent"] for line in path.read_text().splitlines()]
    assert agents[0] == "root" and agents[1].startswith("root/") and agents[2] == "root"
