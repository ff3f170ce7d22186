"""Message content only with the opt-in; secrets never; HTTP models name their server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import toh_nb as tn
from toh_nb.core import secrets
from toh_nb.core.errors import UsageError
from toh_nb.tracing import CAPTURE_ENV, Tracing, check_tracing

from ..models.chat_server import ChatServer, text
from .conftest import delegate, say, script

PROMPT = "the secret plan is PURPLE-ELEPHANT"
ANSWER = "a reply about ORANGE-GIRAFFE"
KEY = "sk-test-0123456789abcdef"


def _everything(spans) -> str:
    """Every string a span carries: name, attributes, events, status, links."""
    parts = []
    for span in spans:
        parts.append(span.name)
        parts.append(json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in span.attributes.items()}))
        for event in span.events:
            parts.append(event.name)
            parts.append(json.dumps(dict(event.attributes)))
        parts.append(span.status.description or "")
    return "\n".join(parts)


def _model() -> tn.FunctionModel:
    return script({"root": [delegate("c1", "kid", prompt=PROMPT), say(ANSWER)], "kid": [say(ANSWER)]})


async def test_no_content_without_the_opt_in(traced, monkeypatch):
    monkeypatch.delenv(CAPTURE_ENV, raising=False)
    async with tn.AsyncHub(_model(), ids="sequential", tracing=traced.provider) as hub:
        await hub.run(PROMPT)
    dump = _everything(traced.spans)
    assert "invoke_agent kid" in dump
    assert "PURPLE-ELEPHANT" not in dump and "ORANGE-GIRAFFE" not in dump


@pytest.mark.parametrize("how", ["env", "option"])
async def test_content_with_the_opt_in(traced, monkeypatch, how):
    if how == "env":
        monkeypatch.setenv(CAPTURE_ENV, "true")
        tracing = traced.provider
    else:
        monkeypatch.delenv(CAPTURE_ENV, raising=False)
        tracing = Tracing(traced.provider, capture_content=True)
    async with tn.AsyncHub(_model(), ids="sequential", tracing=tracing) as hub:
        await hub.run(PROMPT)
    kid = traced.one("invoke_agent", name="kid")
    assert kid.attributes["input.value"] == PROMPT
    assert json.loads(kid.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": PROMPT}]}]
    assert kid.attributes["output.value"] == ANSWER
    chat = traced.children(kid)[0]
    assert json.loads(chat.attributes["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": "end_turn"}]
    assert json.loads(chat.attributes["gen_ai.input.messages"]) == [  # what the call read
        {"role": "user", "parts": [{"type": "text", "content": PROMPT}]}]
    tool = traced.tool("c1")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"description": "kid", "prompt": PROMPT}
    assert ANSWER in tool.attributes["gen_ai.tool.call.result"]
    first, second = [span for span in traced.children(traced.turn("root")) if span.name.startswith("chat")]
    assert json.loads(first.attributes["gen_ai.output.messages"]) == [  # the call it asked for, with arguments
        {"role": "assistant", "finish_reason": "tool_use", "parts": [
            {"type": "tool_call", "name": "subagent", "arguments": {"description": "kid", "prompt": PROMPT}}]}]
    (read,) = json.loads(second.attributes["gen_ai.input.messages"])  # the second call read the tool's result
    assert read["role"] == "tool"
    assert read["parts"][0]["type"] == "tool_call_response" and read["parts"][0]["id"] == "c1"
    assert ANSWER in read["parts"][0]["response"]


def test_the_option_beats_the_environment(monkeypatch):
    monkeypatch.setenv(CAPTURE_ENV, "true")
    assert Tracing().content() is True
    assert Tracing(capture_content=False).content() is False
    monkeypatch.setenv(CAPTURE_ENV, "false")
    assert Tracing().content() is False


async def test_an_http_model_names_its_server_and_its_key_is_never_on_a_span(traced):
    with ChatServer(api_key=KEY) as server:
        server.push(text(f"echo: {KEY}"))  # even a server that echoes the key
        model = tn.OpenAIChatModel("test-model", base_url=server.url, api_key=KEY)
        async with tn.AsyncHub(model, tracing=Tracing(traced.provider, capture_content=True)) as hub:
            result = await hub.run(f"my key is {KEY}")
        port = int(server.url.split(":")[2].split("/")[0])
    assert result.stop_reason == "completed"
    chat = traced.one("chat")
    assert chat.name == "chat test-model"
    assert chat.attributes["server.address"] == "127.0.0.1"
    assert chat.attributes["server.port"] == port
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 10
    dump = _everything(traced.spans)
    assert KEY not in dump
    assert secrets.MASK in dump  # the content was captured, the key masked out of it


def test_bad_tracing_arguments_are_named():
    with pytest.raises(UsageError) as caught:
        check_tracing("yes")
    assert str(caught.value) == ("tracing must be True, False, an OpenTelemetry TracerProvider or tn.Tracing(...), "
                                 "got str")
    with pytest.raises(UsageError) as caught:
        Tracing(provider=object())
    assert str(caught.value) == ("Tracing(provider=...) must be an OpenTelemetry TracerProvider (with get_tracer), "
                                 "got object")
    with pytest.raises(UsageError) as caught:
        Tracing(capture_content="yes")
    assert str(caught.value) == "capture_content must be True, False or None, got 'yes'"
    with pytest.raises(UsageError):
        tn.AsyncHub(tracing="yes")
    assert check_tracing(False) is None and check_tracing(None) is None
    assert check_tracing(True) == Tracing()


def _modules_after(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()


RUN = ("import asyncio, sys\n"
       "import toh_nb as tn\n"
       "async def main():\n"
       "    async with tn.AsyncHub(tn.DemoModel(latency=0){extra}) as hub:\n"
       "        await hub.run('Plan a garden')\n"
       "asyncio.run(main())\n"
       "tn.Hub(tn.DemoModel(latency=0){extra}).close()\n"
       "print(sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry'))\n")


def test_nothing_of_opentelemetry_is_imported_when_tracing_is_off():
    assert _modules_after(RUN.format(extra="")) == ["[]"]
    assert _modules_after(RUN.format(extra=", tracing=False")) == ["[]"]


def test_tracing_without_the_extra_is_a_usage_error_naming_it():
    code = ("import sys\n"
            "sys.modules['opentelemetry'] = None  # as if the otel extra were not installed\n"
            "import toh_nb as tn\n"
            "try:\n"
            "    tn.AsyncHub(tracing=True)\n"
            "except tn.UsageError as error:\n"
            "    print(str(error))\n")
    (line,) = _modules_after(code)
    assert line.startswith(
        'tracing needs OpenTelemetry: pip install "toh-nb[otel]" (opentelemetry-api and opentelemetry-sdk) (')
