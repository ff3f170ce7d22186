"""What a tool function's docstring tells the model: its description and each parameter's.

Why ``docstring-parser`` (a base dependency: pure Python, no dependencies of its own): it reads the
Google, NumPy, reST and Epydoc styles whole, where the hand-written reader it replaced kept only the
first line of a wrapped Google-style description and found nothing in a NumPy-style docstring.

The tool's description is the docstring's short and long description without its sections
(parameters, returns, raises): the model reads the parameters in the schema, each where it belongs.
A parameter's description has its wrapped lines joined (a JSON Schema ``description`` is prose, not
source layout); the long description keeps its own line breaks (lists, paragraphs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import docstring_parser


#: docstring-parser's keys of entries that describe a function parameter (not ``attribute``, ``raises``...)
_PARAMETER_KEYS = frozenset({"param", "parameter", "arg", "argument", "key", "keyword", "other_param"})


@dataclass(frozen=True)
class DocstringFacts:
    """The description (may be ``""``) and the parameter descriptions by name of one docstring."""

    description: str = ""
    parameters: dict[str, str] = field(default_factory=dict)


def read_docstring(doc: str | None) -> DocstringFacts:
    """The tool-facing facts of ``doc`` (an ``inspect.getdoc`` text) in any style docstring-parser reads.

    A docstring it cannot parse (a malformed section) is taken whole as the description, with no
    parameter descriptions: a tool is never refused for its documentation.
    """
    if not doc or not doc.strip():
        return DocstringFacts()
    try:
        parsed = docstring_parser.parse(doc)
    except docstring_parser.ParseError:
        return DocstringFacts(doc.strip())
    parts = [part.strip() for part in (parsed.short_description, parsed.long_description) if part and part.strip()]
    parameters = {param.arg_name: _joined(param.description) for param in parsed.params
                  if param.args and param.args[0] in _PARAMETER_KEYS and param.description and param.description.strip()}
    return DocstringFacts("\n\n".join(parts), parameters)


def _joined(text: str) -> str:
    """``text`` with its wrapped lines joined by single spaces (blank-line paragraphs kept apart)."""
    paragraphs = [" ".join(chunk.split()) for chunk in text.strip().split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)
