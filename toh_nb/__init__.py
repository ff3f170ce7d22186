"""toh_nb: an LLM subagent system for Jupyter.

::

    import toh_nb as tn
    hub = tn.Hub()                                  # offline DemoModel, in-memory store
    res = hub.spawn("Summarise …", label="summary") # foreground one-shot child -> RunResult
    job = hub.spawn("Crawl …", background=True)     # background one-shot child -> Job
    kid = hub.start("You research Y", label="researcher")   # continuable child -> Child

Names are imported lazily so ``import toh_nb`` stays cheap and the engine never pulls in pandas or
ipywidgets unless the notebook layer is used.
"""

from __future__ import annotations

import importlib
from typing import Any

from .version import __version__  # noqa: F401 - the package version, at its front door

_EXPORTS = {
    "Hub": "toh_nb.notebook.hub",
    "Job": "toh_nb.notebook.hub",
    "Child": "toh_nb.notebook.hub",
    "AsyncHub": "toh_nb.hub",
    "AsyncJob": "toh_nb.hub",
    "AsyncChild": "toh_nb.hub",
    "RunResult": "toh_nb.results",
    "ToolResult": "toh_nb.core.tools",
    "ToolContext": "toh_nb.core.tools",
    "Message": "toh_nb.core.content",
    "Source": "toh_nb.core.content",
    "ToolCall": "toh_nb.core.content",
    "Usage": "toh_nb.core.content",
    "Model": "toh_nb.core.model",
    "ModelRequest": "toh_nb.core.model",
    "ModelResponse": "toh_nb.core.model",
    "ToolSpec": "toh_nb.core.model",
    "FunctionModel": "toh_nb.models.function",
    "ScriptedModel": "toh_nb.models.scripted",
    "DemoModel": "toh_nb.models.demo",
    "OpenAIChatModel": "toh_nb.models.openai_chat",
    "LocalModel": "toh_nb.models.local_model",
    "RecordingModel": "toh_nb.models.record",
    "ReplayModel": "toh_nb.models.record",
    "SubagentTool": "toh_nb.subagents.tool",
    "Capabilities": "toh_nb.providers.base",
    "ChildPlan": "toh_nb.providers.base",
    "ChildInfo": "toh_nb.providers.base",
    "Provider": "toh_nb.providers.base",
    "SpawnProvider": "toh_nb.providers.local",
    "StepLoop": "toh_nb.core.steps",
    "LocalSteps": "toh_nb.core.steps",
    "TurnContext": "toh_nb.core.steps",
    "ForkProvider": "toh_nb.providers.local",
    "AcpAgent": "toh_nb.providers.acp.provider",
    "PermissionRequest": "toh_nb.providers.acp.permissions",
    "AskUser": "toh_nb.providers.acp.permissions",
    "RayProvider": "toh_nb.providers.ray.provider",
    "Tracing": "toh_nb.tracing.options",
    "MCPServer": "toh_nb.mcp.config",
    "ProviderError": "toh_nb.core.errors",
    "TohError": "toh_nb.core.errors",
    "UsageError": "toh_nb.core.errors",
    "ClosedError": "toh_nb.core.errors",
    "SubagentError": "toh_nb.core.errors",
    "SubagentDepthError": "toh_nb.core.errors",
    "JobError": "toh_nb.core.errors",
    "ToolError": "toh_nb.core.errors",
    "StoreError": "toh_nb.core.errors",
    "ModelError": "toh_nb.core.errors",
    "RunError": "toh_nb.core.errors",
    "ScriptExhausted": "toh_nb.core.errors",
    "ReplayMissError": "toh_nb.core.errors",
    "HubConfig": "toh_nb.config",
    "HubView": "toh_nb.hub",
    "Activity": "toh_nb.hub",
    "StopReason": "toh_nb.core.states",
    # the event types of hub.stream() / hub.astream() (also in toh_nb.events)
    **{name: "toh_nb.events" for name in (
        "HubEvent", "TurnStarted", "TurnEnded", "ModelRequested", "ModelResponded", "TextDelta", "ToolCalled",
        "ToolReturned", "MessageQueued", "MessageRead", "StatusChanged", "ExternalActivity", "ChildStarted", "ChildEnded",
        "JobStarted", "JobStopping", "JobEnded", "Interrupted", "ToolAbandoned", "PermissionAsked",
        "PermissionAnswered", "ProviderChanged", "Problem", "ListenerFailed", "HubClosed")},
}
_ALIASES = {"Tool": ("toh_nb.core.tools", "FunctionTool")}

__all__ = sorted([*_EXPORTS, *_ALIASES])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _ALIASES:
        module, attr = _ALIASES[name]
        value = getattr(importlib.import_module(module), attr)
    else:
        raise AttributeError(f"module 'toh_nb' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
