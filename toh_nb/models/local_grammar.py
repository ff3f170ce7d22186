"""The GBNF grammar that makes every LocalModel tool call valid (constrained decoding).

Why a grammar: a 135M-parameter model writes JSON about as well as it spells, so instead of
parsing and hoping, generation after ``<tool_call>\\n`` is constrained by llama.cpp to exactly
``{"name": "<one offered tool>", "arguments": <an object matching that tool's JSON Schema>}``
followed by ``\\n</tool_call>``. Every call that finishes is therefore a call the engine can dispatch;
a call cut off by ``max_tokens`` is dropped and reported as stop reason ``max_tokens``.

Strings without their own ``maxLength`` are bounded (``max_string_chars``) in the grammar only, so a
small model that starts repeating itself inside an argument still closes the call.
"""

from __future__ import annotations

import json
import re
from typing import Sequence

from ..core.model import ToolSpec
from .local_prompt import CALL_CLOSE

#: the converter's rule for a string without maxLength, rewritten with a bound
_STRING_RULE = re.compile(r'^string ::= "\\"" char\* "\\"" space$', re.M)


def call_schema(tools: Sequence[ToolSpec]) -> dict:
    """One JSON Schema alternative per tool: ``{"name": const, "arguments": <parameters>}``."""
    alternatives = []
    for tool in tools:
        parameters = tool.parameters if isinstance(tool.parameters, dict) and tool.parameters else {
            "type": "object", "properties": {}}
        alternatives.append({"type": "object", "additionalProperties": False, "required": ["name", "arguments"],
                             "properties": {"name": {"const": tool.name}, "arguments": parameters}})
    return {"oneOf": alternatives}  # even for one tool: every converter rule is then "alternative-…"


def call_grammar(tools: Sequence[ToolSpec], max_string_chars: int = 600) -> str:
    """GBNF text for ``<call JSON>\\n</tool_call>`` over ``tools`` (needs llama-cpp-python)."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    gbnf = json_schema_to_gbnf(json.dumps(call_schema(tools)))
    gbnf = re.sub(r"^root ::=", "call ::=", gbnf, flags=re.M)
    gbnf = _STRING_RULE.sub(f'string ::= "\\\\"" char{{0,{int(max_string_chars)}}} "\\\\"" space', gbnf)
    return f"root ::= call {json.dumps(chr(10) + CALL_CLOSE)}\n{gbnf}\n"
