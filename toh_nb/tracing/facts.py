"""What a span says about a model: its name, its provider, the server it talks to (no OpenTelemetry here).

Why from the model object: the events name agents, not models; the tracer reads the agent's model once
per turn. Wrappers (``RecordingModel``) hold the real model in ``inner``, as ``toh_nb.costs`` reads it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ..core.model import model_name

#: ``gen_ai.provider.name`` by model class: the conventions' well-known value where one applies, a
#: ``toh_nb.`` name for toh_nb's own offline models
PROVIDERS = {
    "OpenAIChatModel": "openai",
    "LocalModel": "toh_nb.local",
    "DemoModel": "toh_nb.demo",
    "FunctionModel": "toh_nb.function",
    "ScriptedModel": "toh_nb.scripted",
    "ReplayModel": "toh_nb.replay",
    "AcpModel": "toh_nb.acp",
}
#: where ``OpenAIChatModel`` sends requests when it has no ``base_url``
OPENAI_DEFAULT = "https://api.openai.com/v1"


def unwrapped(model: Any) -> Any:
    for _ in range(4):
        inner = getattr(model, "inner", None)
        if inner is None:
            break
        model = inner
    return model


def provider_name(model: Any) -> str:
    name = type(unwrapped(model)).__name__
    return PROVIDERS.get(name, f"toh_nb.{name.lower()}")


def server_of(model: Any) -> tuple[str | None, int | None]:
    """``(server.address, server.port)`` of an HTTP model (host and port only: never credentials or a path)."""
    real = unwrapped(model)
    url = getattr(real, "base_url", None)
    if url is None and type(real).__name__ == "OpenAIChatModel":
        url = OPENAI_DEFAULT
    if not isinstance(url, str) or not url:
        return None, None
    try:
        parts = urlsplit(url)
        return parts.hostname, parts.port
    except ValueError:
        return None, None


__all__ = ["model_name", "provider_name", "server_of", "unwrapped"]
