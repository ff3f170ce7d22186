"""``python -m toh_nb serve-model``: the safe settings of llama-cpp-python's server (issue 32.7).

The launcher's patches are checked here without a model; tests/real starts the real server with it
(every server test there runs on it) and checks what the model then reads and that abandoned
streams stop.
"""

from __future__ import annotations

import re

import pytest

from toh_nb.__main__ import main as cli
from toh_nb.serve import model as serve


def test_server_arguments_are_the_measured_safe_settings():
    assert serve.server_argv("m.gguf", port=8123, n_threads=2) == [
        "--model", "m.gguf", "--chat_format", "chatml-function-calling", "--host", "127.0.0.1", "--port", "8123",
        "--n_ctx", "8192", "--n_threads", "2", "--seed", "0", "--interrupt_requests", "False",
        "--logits_all", "False"]  # no --cache: the launcher's SavedStates is the prompt cache
    assert serve.server_argv("m.gguf", extra=["--n_batch", "64"])[-2:] == ["--n_batch", "64"]
    assert serve.server_argv("m.gguf", extra=["--logits_all", "True"])[-2:] == ["--logits_all", "True"]  # last wins


@pytest.mark.parametrize("asked, sent", [(None, 1024), (0, 1024), (-1, 1024), (5, 5), (4000, 4000)])
def test_a_completion_without_a_limit_gets_the_cap(asked, sent):
    assert serve.capped(asked, 1024) == sent


def test_safe_settings_render_templates_unescaped_and_bound_completions_then_restore_everything():
    pytest.importorskip("llama_cpp", reason="the local extra is not installed (pip install 'toh-nb[local]')")
    import llama_cpp
    from llama_cpp import llama_chat_format
    from llama_cpp import llama_cpp as low

    seen = {}

    def fake_create_completion(self, prompt, max_tokens=16, **kwargs):
        seen["max_tokens"] = max_tokens
        return "done"

    environment = llama_chat_format.ImmutableSandboxedEnvironment
    defaults = low.llama_model_default_params
    original = llama_cpp.Llama.create_completion
    llama_cpp.Llama.create_completion = fake_create_completion
    try:
        with serve.safe_server_settings(cap=77):
            # the chatml-function-calling template is built exactly so: select_autoescape(["html", "xml"])
            import jinja2

            template = llama_chat_format.ImmutableSandboxedEnvironment(
                autoescape=jinja2.select_autoescape(["html", "xml"])).from_string("{{ text }}")
            assert template.render(text="I'm <ok> & \"done\"") == "I'm <ok> & \"done\""
            assert llama_cpp.Llama.create_completion(object(), prompt="x", max_tokens=None) == "done"
            assert seen["max_tokens"] == 77
            llama_cpp.Llama.create_completion(object(), prompt="x", max_tokens=5)
            assert seen["max_tokens"] == 5
            assert low.llama_model_default_params is not defaults  # extra buffer types off
        assert llama_chat_format.ImmutableSandboxedEnvironment is environment
        assert llama_cpp.Llama.create_completion is fake_create_completion
        assert low.llama_model_default_params is defaults
        escaped = environment(autoescape=True).from_string("{{ text }}").render(text="I'm")
        assert escaped == "I&#39;m"  # outside the block the library is as it was
    finally:
        llama_cpp.Llama.create_completion = original


def test_cli_lists_serve_model_and_rejects_a_bad_cap(capsys):
    with pytest.raises(SystemExit):
        cli(["--help"])
    assert "serve-model" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        cli(["serve-model", "--max-tokens-cap", "0"])
    assert exit_info.value.code == 2
    assert "--max-tokens-cap must be >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli(["serve-model", "--prompt-cache-mb", "-1"])
    assert "--prompt-cache-mb must be >= 0" in capsys.readouterr().err


def test_start_model_server_reports_a_server_that_exits(tmp_path):
    # a server that dies at once (here: an unknown llama_cpp.server option) is a ModelError with its output
    pytest.importorskip("llama_cpp", reason="the local extra is not installed (pip install 'toh-nb[local]')")
    import toh_nb as tn

    with pytest.raises(tn.ModelError, match=r"(?s)^serve-model exited with 2: .*unrecognized arguments: --no-such-option 1"):
        serve.start_model_server(extra=["--no-such-option", "1"], log_path=tmp_path / "log.txt", timeout=60)
    assert "unrecognized arguments" in (tmp_path / "log.txt").read_text()


class FakeLlama:
    """Just what the chat handlers and the cache report use of a ``Llama``: bytes are tokens."""

    verbose = False

    def __init__(self, cached: bytes = b"") -> None:
        self.input_ids = list(cached)
        self.n_tokens = len(cached)
        self.completions = []

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(text)

    def create_completion(self, prompt, **kwargs):
        self.completions.append((prompt, kwargs))
        return {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "m",
                "choices": [{"text": "Paris.", "index": 0, "logprobs": None, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class SavedStates:
    """llama-cpp-python's RAM cache as the report reads it: ``cache[tokens]`` is the saved state of the
    longest prefix (its ``input_ids``), KeyError when none."""

    def __init__(self, held: bytes) -> None:
        import numpy

        self.held = numpy.array(list(held))

    def __getitem__(self, tokens):
        return type("State", (), {"input_ids": self.held})()


def function_calling(*, llama, messages, tools=None, tool_choice=None, **kwargs):
    """chatml-function-calling's shape: "none" drops the tool list, a forced call lists it and opens the call."""
    listed = tool_choice is not None and tool_choice != "none" and bool(tools)
    prompt = ("<system>" + ("tools: " + ", ".join(t["function"]["name"] for t in tools) if listed else "")
              + "</system>" + "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>")
    if not listed:
        return ("text", llama.create_completion(prompt=prompt, stop=["<|im_end|>"], **kwargs))
    if isinstance(tool_choice, dict):
        name = tool_choice["function"]["name"]
        return ("call", llama.create_completion(prompt=prompt + f"functions.{name}:\n", **kwargs))
    return ("auto", llama.create_completion(prompt=prompt, **kwargs))


TOOLS = [{"type": "function", "function": {"name": "subagent", "parameters": {"type": "object"}}},
         {"type": "function", "function": {"name": "job_output", "parameters": {"type": "object"}}}]


def test_a_none_request_keeps_the_tool_list_and_opens_a_message_where_a_forced_call_would_open_the_call(
        monkeypatch):
    """Issue 32 item 6: through serve-model a "none" request is the forced request's prompt with
    ``message:`` instead of the call's opening, so it extends the request before it (KV cache reused)."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="the local extra is not installed (pip install 'toh-nb[local]')")
    built = {}  # grammar text -> the LlamaGrammar built from it (a LlamaGrammar does not show its text)
    from_string = llama_cpp.LlamaGrammar.from_string

    def recording(grammar, verbose=True):
        built[grammar] = from_string(grammar, verbose=verbose)
        return built[grammar]

    monkeypatch.setattr(llama_cpp.LlamaGrammar, "from_string", recording)
    handler = serve.none_keeps_tools(function_calling)
    messages = [{"role": "user", "content": "Capital?"}]
    forced, plain = FakeLlama(), FakeLlama()
    assert handler(llama=forced, messages=messages, tools=TOOLS,
                   tool_choice={"type": "function", "function": {"name": "subagent"}}, max_tokens=7)[0] == "call"
    answer = handler(llama=plain, messages=messages, tools=TOOLS, tool_choice="none", max_tokens=7, stream=False)
    assert answer["choices"][0]["message"]["content"] == "Paris."
    assert answer["choices"][0]["finish_reason"] == "stop"
    (call_prompt, _), = forced.completions
    (prompt, options), = plain.completions
    assert call_prompt == "<system>tools: subagent, job_output</system><user>Capital?<assistant>functions.subagent:\n"
    assert bytes(prompt).decode() == ("<system>tools: subagent, job_output</system><user>Capital?<assistant>"
                                      "message:\n")
    assert options["max_tokens"] == 7 and "<|im_end|>" in options["stop"]
    from llama_cpp import LlamaGrammar

    from toh_nb.models.local_grammar import text_grammar

    # text without chat markup, as LocalModel's "none" steps
    assert isinstance(options["grammar"], LlamaGrammar) and options["grammar"] is built[text_grammar()]
    # every other request reaches llama-cpp-python's handler unchanged
    assert handler(llama=FakeLlama(), messages=messages, tools=TOOLS, tool_choice="auto")[0] == "auto"
    assert handler(llama=FakeLlama(), messages=messages, tools=None, tool_choice="none")[0] == "text"


def test_each_completion_reports_how_much_of_its_prompt_the_cache_held(capsys):
    assert serve.reused_tokens([1, 2, 3, 9], [1, 2, 3, 4, 5]) == 3
    assert serve.reused_tokens([1, 2, 3], [1, 2, 3]) == 2  # the last token is evaluated again
    assert serve.reused_tokens([], [1]) == 0
    serve.report_cache_use(FakeLlama(b"<system>tools</system><user>hi"), "<system>tools</system><user>ho<assistant>")
    line = capsys.readouterr().err.strip()
    assert line == "serve-model cache: prompt 41 tokens, 29 reused, 12 evaluated"
    assert re.match(serve.CACHE_LINE_PATTERN, line).groups() == ("41", "29", "12")
    serve.report_cache_use(object(), "x")  # no model state to read: no line, no failure
    assert capsys.readouterr().err == ""
    # --cache: a saved state whose prefix is longer than the context's counts (it is loaded first)
    saved = FakeLlama(b"<system>tools</system><user>hi")
    saved.cache = SavedStates(b"<system>tools</system><user>ho<assist")
    serve.report_cache_use(saved, "<system>tools</system><user>ho<assistant>")
    assert capsys.readouterr().err.strip() == "serve-model cache: prompt 41 tokens, 37 reused, 4 evaluated"
