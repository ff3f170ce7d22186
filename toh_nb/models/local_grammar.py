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
from .local_prompt import CALL_CLOSE, CALL_OPEN

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


#: text that cannot contain markup: no ``<`` followed by a letter, ``/``, ``|``, ``!`` or ``?`` — so no
#: ``<tool_call>``, ``<tool_response …>``, ``<|im_end|>``, and no tag a small model invents instead
#: (SmolLM2 answered ``<sub_sub_answer>…`` when ``<t`` alone was excluded); ``a < b`` stays possible,
#: but the answer never opens with ``<`` (it then answered ``<#1>…``)
TEXT_RULE = ('text-answer ::= [ \\t\\n]* ( [^< \\t\\n] text-rest )?\n'
             'text-rest ::= ( [^<] | "<" [^a-zA-Z/|!?] )*')


def text_grammar() -> str:
    """GBNF text of a text answer without chat markup (LocalModel's ``"none"``)."""
    return f"root ::= text-answer\n{TEXT_RULE}\n"


def _call_rules(tools: Sequence[ToolSpec], max_string_chars: int) -> str:
    """The converter's rules for the call JSON, its root renamed ``call``, strings bounded."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    gbnf = json_schema_to_gbnf(json.dumps(call_schema(tools)))
    gbnf = re.sub(r"^root ::=", "call ::=", gbnf, flags=re.M)
    return _STRING_RULE.sub(f'string ::= "\\\\"" char{{0,{int(max_string_chars)}}} "\\\\"" space', gbnf)


def call_grammar(tools: Sequence[ToolSpec], max_string_chars: int = 600) -> str:
    """GBNF text for ``<call JSON>\\n</tool_call>`` over ``tools`` (needs llama-cpp-python)."""
    return f"root ::= call {json.dumps(chr(10) + CALL_CLOSE)}\n{_call_rules(tools, max_string_chars)}\n"


def auto_grammar(tools: Sequence[ToolSpec], max_string_chars: int = 600) -> str:
    """GBNF text of LocalModel's ``"auto"``: either a whole call (``<tool_call>\\n<call JSON>\\n</tool_call>``)
    or a text answer without chat markup. The model's own first tokens pick the branch."""
    return (f"root ::= {json.dumps(CALL_OPEN + chr(10))} call {json.dumps(chr(10) + CALL_CLOSE)} | text-answer\n"
            f"{TEXT_RULE}\n{_call_rules(tools, max_string_chars)}\n")
