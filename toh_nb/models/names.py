"""Models by name: the strings people know from pydantic-ai, turned into model objects in one place.

Why a parser at all: ``tn.Hub(model="gpt-4o")`` is what a newcomer writes first, and "model must have an
async request(...) method, got str" teaches nothing. Why one parser: ``tn.Hub``/``tn.AsyncHub(model=)``,
``hub.spawn``/``hub.start(model=)``, ``tn.SubagentTool(model=)`` and the command line's ``--model`` must
read a name the same way and refuse a bad one with the same words.

The names (``NAME`` is what the server calls the model; ``URL`` its OpenAI-compatible base URL, usually
ending in ``/v1``)::

    "openai:NAME"            tn.OpenAIChatModel(NAME): OpenAI, key from OPENAI_API_KEY
    "openai:NAME@URL"        any OpenAI-compatible server (profile "openai")
    "llamacpp:NAME@URL"      llama-cpp-python's server (profile "llama.cpp")
    "vllm:NAME@URL"          vLLM (profile "vllm")
    "ollama:NAME[@URL]"      Ollama (profile "ollama"; default URL http://localhost:11434/v1)
    "local"                  tn.LocalModel(): the bundled SmolLM2-135M-Instruct, in-process
    "local:PATH.gguf"        tn.LocalModel(PATH)
    "demo"                   tn.DemoModel(): offline

A plain function of the request becomes a ``tn.FunctionModel``; an object with an async ``request``
method is a model already and passes unchanged. ``NAME@URL`` is split at the first ``@`` followed by
``http://`` or ``https://``, so a name may itself hold ``@`` or ``:`` (``ollama:llama3.1:8b``). The
prefix is matched case-insensitively. There is no ``base_url=`` keyword on the hub: a URL goes in the
name, or build ``tn.OpenAIChatModel(...)`` yourself for the other settings (key, retries, streaming).

In Python a bare name (``"gpt-4o"``) is a :class:`~toh_nb.core.errors.UsageError` that suggests the
prefix; on the command line (``bare="openai"``) it keeps meaning an OpenAI-compatible model, as it
always did there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Union
from urllib.parse import urlsplit

from ..core.checks import shown
from ..core.errors import UsageError
from ..core.model import Model

#: what ``model=`` accepts: a model object, a name, a plain function of the request, or None
ModelLike = Union[Model, str, Callable[..., Any], None]

#: the backends a name can start with, and how each is written (the list an unknown prefix shows)
FORMS = {
    "openai": "openai:NAME[@URL]",
    "llamacpp": "llamacpp:NAME@URL",
    "vllm": "vllm:NAME@URL",
    "ollama": "ollama:NAME[@URL]",
    "local": "local[:PATH.gguf]",
    "demo": "demo",
}
#: the server profile (``toh_nb.models.profiles``) of each server backend
PROFILES = {"openai": "openai", "llamacpp": "llama.cpp", "vllm": "vllm", "ollama": "ollama"}
#: a URL each server backend is shown with when it has none
EXAMPLE_URLS = {"openai": "https://api.openai.com/v1", "llamacpp": "http://localhost:8080/v1",
                "vllm": "http://localhost:8000/v1", "ollama": "http://localhost:11434/v1"}
#: where Ollama listens by default (its OpenAI-compatible endpoint)
OLLAMA_URL = "http://localhost:11434/v1"
#: what the bare-name suggestion puts in front
SUGGESTED_PREFIX = "openai"

_URL_START = re.compile(r"@(?=https?://)", re.IGNORECASE)
_SHOWN_CHARS = 120


@dataclass(frozen=True)
class ModelName:
    """A parsed name: the ``backend`` (a key of :data:`FORMS`), the server's model ``name`` (for
    ``local``: the GGUF path, or None for the bundled model) and the ``url`` (None: the backend's
    default)."""

    backend: str
    name: str | None = None
    url: str | None = None


# -- the texts (tests/models/test_names.py checks them exactly) ------------------------------------


def _quoted(text: str) -> str:
    return f'"{text}"' if len(text) <= _SHOWN_CHARS else f'"{text[:_SHOWN_CHARS]}\u2026" ({len(text)} characters)'


def known_forms() -> str:
    return ", ".join(FORMS.values())


def not_a_model(argument: str, value: Any) -> str:
    return (f'{argument} must be a model object (tn.OpenAIChatModel(...), tn.LocalModel(), ...), a name such as '
            f'"openai:gpt-4o", or a function of the request; got {type(value).__name__}')


def a_class(argument: str, value: type) -> str:
    return f"{argument} must be a model object, not the class {value.__name__}: write {value.__name__}()"


def empty_name(argument: str) -> str:
    return f'{argument} is an empty name; name a model such as "openai:gpt-4o" (or pass None)'


def unprintable_name(argument: str, text: str) -> str:
    return f"{argument} name {shown(text)} holds whitespace or control characters; a model name has none"


def bare_name(argument: str, text: str) -> str:
    return (f'{argument} {_quoted(text)} names no backend; did you mean {_quoted(SUGGESTED_PREFIX + ":" + text)}? '
            f"(known: {known_forms()})")


def unknown_prefix(argument: str, text: str, prefix: str) -> str:
    return f'{argument} {_quoted(text)} has an unknown prefix "{prefix}"; known: {known_forms()}'


def missing_name(argument: str, text: str, backend: str) -> str:
    if backend == "local":
        return f'{argument} {_quoted(text)} names no file after "local:"; write "local:PATH.gguf", or "local" for the bundled model'
    return (f'{argument} {_quoted(text)} names no model after "{backend}:"; write '
            f'{_quoted(FORMS[backend].replace("[@URL]", ""))} with the name your server knows')


def needs_url(argument: str, text: str, backend: str, name: str) -> str:
    return (f'{argument} {_quoted(text)} needs its server\'s URL: '
            f'{_quoted(f"{backend}:{name}@{EXAMPLE_URLS[backend]}")} (the address your server listens on)')


def bad_url(argument: str, text: str, url: str) -> str:
    return f"{argument} {_quoted(text)} has no host in its URL {_quoted(url)}"


def no_suffix(argument: str, text: str, backend: str) -> str:
    return f'{argument} {_quoted(text)}: "{backend}" takes nothing after it; write "{backend}"'


def url_given_twice(argument: str, text: str) -> str:
    return f"{argument} {_quoted(text)} has its own URL; give the URL once (in the name, or as --base-url)"


def url_not_applicable(argument: str, text: str) -> str:
    return (f"{argument} {_quoted(text)} runs no server, so a URL does not apply; for a server's model "
            f'named {_quoted(text)}, write {_quoted(f"openai:{text}@URL")}')


# -- parsing ---------------------------------------------------------------------------------------


def parse_model_name(text: str, *, argument: str = "model", bare: str | None = None) -> ModelName:
    """The :class:`ModelName` ``text`` spells, or a UsageError naming ``argument`` and what is wrong.

    ``bare``: the backend a name without a known prefix means (the command line passes ``"openai"``);
    ``None`` refuses it with a suggestion. Nothing is built or imported here."""
    if not isinstance(text, str):
        raise UsageError(not_a_model(argument, text))
    if not text:
        raise UsageError(empty_name(argument))
    if not text.isprintable() or any(char.isspace() for char in text):
        raise UsageError(unprintable_name(argument, text))
    url_at = _URL_START.search(text)
    prefix, colon, _ = (text[:url_at.start()] if url_at else text).partition(":")  # a prefix ends before a URL
    rest = text[len(prefix) + 1:] if colon else ""
    backend = prefix.lower()
    if backend not in FORMS:
        if bare is not None:
            return _server_name(text, bare, text, argument)
        raise UsageError(unknown_prefix(argument, text, prefix) if colon else bare_name(argument, text))
    if backend == "demo":
        if colon or url_at:
            raise UsageError(no_suffix(argument, text, backend))
        return ModelName("demo")
    if backend == "local":
        if url_at and not colon:
            raise UsageError(no_suffix(argument, text, backend))
        if colon and not rest:
            raise UsageError(missing_name(argument, text, backend))
        return ModelName("local", rest or None)
    return _server_name(text, backend, rest, argument)


def _server_name(text: str, backend: str, rest: str, argument: str) -> ModelName:
    """``NAME[@URL]`` of a server backend, split at the first ``@`` that starts an http(s) URL."""
    match = _URL_START.search(rest)
    name, url = (rest[:match.start()], rest[match.end():]) if match else (rest, None)
    if not name:
        raise UsageError(missing_name(argument, text, backend))
    if url is not None:
        try:
            host = urlsplit(url).hostname
        except ValueError:  # an unclosed [ of an IPv6 address
            host = None
        if not host:
            raise UsageError(bad_url(argument, text, url))
    elif backend in ("llamacpp", "vllm"):
        raise UsageError(needs_url(argument, text, backend, name))
    return ModelName(backend, name, url)


# -- building --------------------------------------------------------------------------------------


def build_model(spec: ModelName, *, base_url: str | None = None, demo_latency: float | None = None,
                argument: str = "model", text: str | None = None) -> Model:
    """The model object a parsed name stands for. ``base_url``: the command line's ``--base-url``, used
    by a server backend whose name has no URL; ``demo_latency``: the command line's ``--latency``."""
    shown_as = text if text is not None else spec.backend
    if spec.backend in ("demo", "local"):
        if base_url is not None:
            raise UsageError(url_not_applicable(argument, shown_as))
        if spec.backend == "demo":
            from .demo import DemoModel

            return DemoModel() if demo_latency is None else DemoModel(latency=demo_latency)
        from .local_model import LocalModel

        return LocalModel(spec.name) if spec.name is not None else LocalModel()
    if spec.url is not None and base_url is not None:
        raise UsageError(url_given_twice(argument, shown_as))
    url = spec.url or base_url or (OLLAMA_URL if spec.backend == "ollama" else None)
    from .openai_chat import OpenAIChatModel  # imports openai: a UsageError naming the extra without it

    return OpenAIChatModel(spec.name, base_url=url, profile=PROFILES[spec.backend])


def check_model(model: Any, argument: str = "model") -> None:
    """Refuse what :func:`model_of` would refuse, without building anything (no import, no object)."""
    if isinstance(model, type):  # tn.Hub(model=tn.DemoModel): the class has a request method too
        raise UsageError(a_class(argument, model))
    if model is None or hasattr(model, "request"):
        return
    if isinstance(model, str):
        parse_model_name(model, argument=argument)
    elif not callable(model):
        raise UsageError(not_a_model(argument, model))


def model_of(model: Any, argument: str = "model") -> Model | None:
    """``model=`` as every public API takes it: None stays None (the caller's default), a model object
    passes unchanged, a name is parsed and built, a plain function is wrapped in ``tn.FunctionModel``;
    anything else is a UsageError naming ``argument``."""
    check_model(model, argument)
    if model is None or hasattr(model, "request"):
        return model
    if isinstance(model, str):
        return build_model(parse_model_name(model, argument=argument), argument=argument, text=model)
    from .function import FunctionModel

    return FunctionModel(model)
