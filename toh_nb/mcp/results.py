"""An MCP ``CallToolResult`` as the :class:`~toh_nb.core.tools.ToolResult` a model reads.

toh_nb tool results are text, so each content block becomes text: text as is, an image or audio clip
as a one-line note of its type and size, an embedded text resource as its URI and text, a binary one
as a note, a resource link as its URI. ``structuredContent`` is rendered as JSON when the server sent
no text (a server that sends both mirrors the structure in its text, as the spec asks). ``isError``
makes the result a tool error (``Error: <text>``), like any failing tool. At most
:data:`~toh_nb.mcp.texts.MAX_RESULT_CHARS` characters reach the model (a 10 MB answer would fill any
context window); ``value`` keeps the whole result: the blocks as JSON and the structured content.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.tools import ToolResult, error_text
from . import texts


def block_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return texts.image(kind, block.mime_type, len(block.data or ""))
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return texts.resource_text(str(resource.uri), resource.mime_type, text)
        return texts.resource_blob(str(resource.uri), resource.mime_type, len(getattr(resource, "blob", "") or ""))
    if kind == "resource_link":
        return texts.resource_link(str(block.uri), block.name)
    return texts.unknown_block(str(kind))


def tool_result(result: Any) -> ToolResult:
    """``result``: an ``mcp.types.CallToolResult``."""
    parts = [block_text(block) for block in result.content or ()]
    structured = result.structured_content
    if structured is not None and not any(getattr(b, "type", None) == "text" for b in result.content or ()):
        parts.append(json.dumps(structured, ensure_ascii=False, indent=1))
    text = "\n".join(parts) if parts else texts.EMPTY_RESULT
    if len(text) > texts.MAX_RESULT_CHARS:
        text = text[:texts.MAX_RESULT_CHARS] + texts.cut(len(text) - texts.MAX_RESULT_CHARS)
    value = {"content": [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content or ()],
             "structured_content": structured}
    if result.is_error:
        return ToolResult(error_text(text), True, value)
    return ToolResult(text, False, value)
