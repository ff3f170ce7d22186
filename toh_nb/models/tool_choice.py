"""The ``tool_choice`` option of OpenAIChatModel: validated once, resolved per request.

Why an option at all: some servers treat a missing ``tool_choice`` as ``"none"`` (llama-cpp-python's
``chatml-function-calling`` drops the tools from the prompt), and small models often need to be forced
to call a tool at a given step. Accepted values:

- ``"auto"`` (the default), ``"none"``, ``"required"``;
- a tool name, sent as ``{"type": "function", "function": {"name": ...}}`` (that form is accepted too);
- ``None``: never send the field (the server's default applies);
- a callable ``(ModelRequest) -> one of the above``, asked at every request, e.g.
  ``lambda r: "subagent" if r.depth == 0 and r.step == 1 else "none"`` (``"none"`` after it, not
  ``"auto"``: a small model shown the tools may call again at every step, docs/guides/local-models.md).

The field is only sent when the request offers tools. A forced tool that the request does not offer
(a child whose tool filter or depth removed it) is a ModelError naming the tool and those offered.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Union

from ..core.errors import ModelError, UsageError

MODES = ("auto", "none", "required")
#: what OpenAI accepts as a function name
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

ToolChoice = Union[str, dict, None, Callable[[Any], Any]]


def check_tool_choice(value: Any, *, required_ok: bool = True, profile: str = "openai") -> str | dict | None:
    """The wire form of a static ``tool_choice`` value, or a UsageError naming what is wrong."""
    if value is None or value in MODES:
        if value == "required" and not required_ok:
            raise UsageError(f'tool_choice="required" is not supported by the {profile!r} server profile (the '
                             'server fails with HTTP 500); name the tool to force instead, e.g. tool_choice="subagent"')
        return value
    if isinstance(value, str):
        if not TOOL_NAME.match(value):
            raise UsageError(f'tool_choice must be "auto", "none", "required", a tool name, None or a callable, '
                             f"got {value!r}")
        return {"type": "function", "function": {"name": value}}
    if isinstance(value, dict):
        function = value.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if value.get("type") != "function" or not isinstance(name, str) or not TOOL_NAME.match(name):
            raise UsageError('a dict tool_choice must be {"type": "function", "function": {"name": "<tool>"}}, '
                             f"got {value!r}")
        return {"type": "function", "function": {"name": name}}
    raise UsageError(f'tool_choice must be "auto", "none", "required", a tool name, None or a callable, '
                     f"got {type(value).__name__} {value!r}")


def resolve_tool_choice(option: Any, request: Any, *, required_ok: bool, profile: str) -> str | dict | None:
    """The ``tool_choice`` to send for ``request`` (which offers tools), or None to send none."""
    value = option(request) if callable(option) else option
    choice = check_tool_choice(value, required_ok=required_ok, profile=profile)
    if isinstance(choice, dict):
        name = choice["function"]["name"]
        offered = [t.name for t in request.tools]
        if name not in offered:
            raise ModelError(f'tool_choice forces the tool "{name}", which this request does not offer (offered: '
                             f"{', '.join(offered)})")
    return choice
