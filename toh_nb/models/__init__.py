"""Models: the protocol, test models that are part of the product, the demo and real-LLM adapters."""

from ..core.content import ToolCall, Usage
from ..core.model import Model, ModelRequest, ModelResponse, ToolSpec
from .function import FunctionModel
from .local_model import LocalModel  # cheap: llama-cpp-python is imported on the first request
from .scripted import ScriptedModel

__all__ = ["Model", "ModelRequest", "ModelResponse", "ToolSpec", "ToolCall", "Usage", "FunctionModel",
           "LocalModel", "ScriptedModel"]
