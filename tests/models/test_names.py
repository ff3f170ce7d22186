"""Models by name (``toh_nb.models.names``): one parser for every ``model=`` and the CLI's ``--model``."""

from __future__ import annotations

import asyncio

import pytest

import toh_nb as tn
from toh_nb.config import HubConfig
from toh_nb.models.names import ModelName, build_model, model_of, parse_model_name
from toh_nb.models.openai_chat import OpenAIChatModel

from .chat_server import ChatServer, text

KNOWN = "openai:NAME[@URL], llamacpp:NAME@URL, vllm:NAME@URL, ollama:NAME[@URL], local[:PATH.gguf], demo"


@pytest.mark.parametrize(("name", "parsed"), [
    ("openai:gpt-4o", ModelName("openai", "gpt-4o")),
    ("openai:gpt-4o@http://127.0.0.1:9/v1", ModelName("openai", "gpt-4o", "http://127.0.0.1:9/v1")),
    ("llamacpp:smol@http://localhost:8080/v1", ModelName("llamacpp", "smol", "http://localhost:8080/v1")),
    ("vllm:Qwen/Qwen2.5-7B-Instruct@https://gpu.example/v1",
     ModelName("vllm", "Qwen/Qwen2.5-7B-Instruct", "https://gpu.example/v1")),
    ("ollama:llama3.1:8b", ModelName("ollama", "llama3.1:8b")),  # a name may hold ':' ...
    ("ollama:me@home@http://box:11434/v1", ModelName("ollama", "me@home", "http://box:11434/v1")),  # ... and '@'
    ("OpenAI:gpt-4o", ModelName("openai", "gpt-4o")),  # the prefix in any case
    ("local", ModelName("local")),
    ("local:models/qwen.gguf", ModelName("local", "models/qwen.gguf")),
    ("demo", ModelName("demo")),
])
def test_a_name_parses_to_its_backend_model_and_url(name, parsed):
    assert parse_model_name(name) == parsed


@pytest.mark.parametrize(("name", "message"), [
    ("gpt-4o", f'model "gpt-4o" names no backend; did you mean "openai:gpt-4o"? (known: {KNOWN})'),
    ("gpt-4o@https://a.example/v1",
     f'model "gpt-4o@https://a.example/v1" names no backend; did you mean "openai:gpt-4o@https://a.example/v1"? '
     f"(known: {KNOWN})"),
    ("anthropic:claude", f'model "anthropic:claude" has an unknown prefix "anthropic"; known: {KNOWN}'),
    ("", 'model is an empty name; name a model such as "openai:gpt-4o" (or pass None)'),
    ("gpt 4o", "model name 'gpt 4o' holds whitespace or control characters; a model name has none"),
    ("openai:gpt\n", "model name 'openai:gpt\\n' holds whitespace or control characters; a model name has none"),
    ("openai:", 'model "openai:" names no model after "openai:"; write "openai:NAME" with the name your server knows'),
    ("ollama:@http://h/v1", 'model "ollama:@http://h/v1" names no model after "ollama:"; write "ollama:NAME" with the '
                            "name your server knows"),
    ("vllm:qwen", 'model "vllm:qwen" needs its server\'s URL: "vllm:qwen@http://localhost:8000/v1" (the address '
                  "your server listens on)"),
    ("llamacpp:smol", 'model "llamacpp:smol" needs its server\'s URL: "llamacpp:smol@http://localhost:8080/v1" (the '
                      "address your server listens on)"),
    ("openai:gpt@http://", 'model "openai:gpt@http://" has no host in its URL "http://"'),
    ("openai:gpt@http://[::1/v1", 'model "openai:gpt@http://[::1/v1" has no host in its URL "http://[::1/v1"'),
    ("demo:fast", 'model "demo:fast": "demo" takes nothing after it; write "demo"'),
    ("local:", 'model "local:" names no file after "local:"; write "local:PATH.gguf", or "local" for the bundled model'),
])
def test_a_bad_name_is_a_usage_error_saying_what_is_wrong(name, message):
    with pytest.raises(tn.UsageError) as caught:
        parse_model_name(name)
    assert str(caught.value) == message


def test_a_long_name_is_shown_cut_short():
    with pytest.raises(tn.UsageError) as caught:
        parse_model_name("x" * 500)
    assert str(caught.value).startswith(f'model "{"x" * 120}\u2026" (500 characters) names no backend; did you mean ')


def test_what_is_not_a_model_is_refused_naming_the_argument():
    with pytest.raises(tn.UsageError) as caught:
        model_of(3, "SubagentTool model")
    assert str(caught.value) == ('SubagentTool model must be a model object (tn.OpenAIChatModel(...), tn.LocalModel(), '
                                 '...), a name such as "openai:gpt-4o", or a function of the request; got int')
    with pytest.raises(tn.UsageError) as caught:
        model_of(tn.DemoModel)  # the class has a request method: it must not pass for a model
    assert str(caught.value) == "model must be a model object, not the class DemoModel: write DemoModel()"


def test_names_build_the_models_they_stand_for(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = model_of("openai:gpt-4o")
    assert isinstance(model, OpenAIChatModel) and (model.model, model.base_url, model.profile.name) == (
        "gpt-4o", None, "openai")
    cases = {"openai:m@http://h:1/v1": ("openai", "http://h:1/v1"), "llamacpp:m@http://h:2/v1": ("llama.cpp", "http://h:2/v1"),
             "vllm:m@http://h:3/v1": ("vllm", "http://h:3/v1"), "ollama:m": ("ollama", "http://localhost:11434/v1"),
             "ollama:m@http://box:11434/v1": ("ollama", "http://box:11434/v1")}
    for name, (profile, url) in cases.items():
        model = model_of(name)
        assert (model.model, model.profile.name, model.base_url) == ("m", profile, url), name
    assert isinstance(model_of("demo"), tn.DemoModel)
    assert isinstance(model_of("local"), tn.LocalModel) and model_of("local").model_path is None
    function = model_of(lambda request: "hi")
    assert isinstance(function, tn.FunctionModel)
    same = tn.ScriptedModel({"root": ["x"]})
    assert model_of(same) is same and model_of(None) is None


def test_a_local_path_is_checked_by_local_model(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert model_of(f"local:{gguf}").model_path == gguf
    with pytest.raises(tn.UsageError, match="^LocalModel model_path '.*nope.gguf' is not a file$"):
        model_of(f"local:{tmp_path / 'nope.gguf'}")


def test_the_command_line_reads_a_bare_name_as_an_openai_compatible_model():
    spec = parse_model_name("gpt-4o", argument="--model", bare="openai")
    assert spec == ModelName("openai", "gpt-4o")
    model = build_model(spec, base_url="http://h:1/v1", argument="--model", text="gpt-4o")
    assert (model.model, model.base_url) == ("gpt-4o", "http://h:1/v1")
    demo = build_model(parse_model_name("demo", bare="openai"), demo_latency=0.5)
    assert demo.latency == 0.5
    with pytest.raises(tn.UsageError) as caught:
        build_model(parse_model_name("ollama:m@http://a/v1", bare="openai"), base_url="http://b/v1",
                    argument="--model", text="ollama:m@http://a/v1")
    assert str(caught.value) == ('--model "ollama:m@http://a/v1" has its own URL; give the URL once (in the name, '
                                 "or as --base-url)")
    with pytest.raises(tn.UsageError) as caught:
        build_model(parse_model_name("local", bare="openai"), base_url="http://b/v1", argument="--model", text="local")
    assert str(caught.value) == ('--model "local" runs no server, so a URL does not apply; for a server\'s model '
                                 'named "local", write "openai:local@URL"')


# -- every model= takes them ---------------------------------------------------------------------------


def test_hub_async_hub_and_config_take_a_name_and_a_function():
    config = HubConfig("demo")
    assert isinstance(config.model, tn.DemoModel)
    assert config.replace(max_depth=1).model is config.model  # built once, kept by a copy
    with tn.Hub(lambda request: "from a function", ids="sequential") as hub:
        assert isinstance(hub.model, tn.FunctionModel) and hub.run("hi").text == "from a function"

    async def main():
        async with tn.AsyncHub(model="demo", ids="sequential") as hub:
            return type(hub.model).__name__

    assert asyncio.run(main()) == "DemoModel"
    for build in (lambda: HubConfig("gpt-4o"), lambda: tn.AsyncHub("gpt-4o"), lambda: tn.Hub(model="gpt-4o")):
        with pytest.raises(tn.UsageError, match='^model "gpt-4o" names no backend; did you mean "openai:gpt-4o"'):
            build()


def test_spawn_start_and_subagent_tool_take_names_against_a_server():
    with ChatServer() as server:
        server.responder = lambda body: text(f"{body['model']} answers")
        name = f"openai:served-model@{server.url}"
        with tn.Hub(tn.FunctionModel(lambda r: "root"), ids="sequential") as hub:
            assert hub.spawn("go", model=name).text == "served-model answers"
            kid = hub.start("go on", label="kid", model=f"vllm:other@{server.url}")
            assert kid.wait(timeout=30) == "other answers"

        async def main():
            async with tn.AsyncHub(ids="sequential") as hub:
                return (await hub.spawn("go", model=name)).text

        assert asyncio.run(main()) == "served-model answers"
        tool = tn.SubagentTool(model=name)
        assert isinstance(tool.model, OpenAIChatModel) and tool.model.base_url == server.url

        root = tn.ScriptedModel({"root": [tn.ToolCall("subagent", {"description": "d", "prompt": "p"}),
                                          lambda request: f"root saw: {request.messages[-1].text}"]})
        with tn.Hub(root, ids="sequential", delegation_tools=[tool]) as hub:
            assert hub.run("delegate").text == "root saw: served-model answers"
    with pytest.raises(tn.UsageError) as caught:
        tn.SubagentTool(model="gpt-4o-mini")
    assert str(caught.value).startswith('SubagentTool model "gpt-4o-mini" names no backend; did you mean '
                                        '"openai:gpt-4o-mini"?')
    with tn.Hub(ids="sequential") as hub:
        with pytest.raises(tn.UsageError, match='^model "vllm:q" needs its server\'s URL'):
            hub.start("x", model="vllm:q")
        assert hub.agents().shape[0] == 1  # nothing was started
