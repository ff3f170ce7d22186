"""Tool declaration, validation errors, unknown tools, error rendering, function tools."""

from __future__ import annotations

import asyncio
import enum
import json
import threading
from typing import Annotated

import pydantic
import pytest

from toh_nb.core.errors import UsageError
from toh_nb.core.tools import STRICT, FunctionTool, Tool, ToolContext, ToolRegistry, UntitledJsonSchema, dispatch


class Args(pydantic.BaseModel):
    model_config = STRICT
    name: str
    count: int = 1
    loud: bool = False


def make(fn=None):
    return Tool("greet", "Greet someone.", Args, fn or (lambda ctx, a: f"hi {a.name} x{a.count}"))


def call(tool, arguments):
    registry = ToolRegistry()
    registry.add(tool)
    ctx = ToolContext(agent=None, runtime=None, call_id="c1")
    return asyncio.run(dispatch(registry.get, ctx, tool.name if arguments is not None else "x", arguments))


def test_schema_comes_from_the_argument_model():
    schema = make().parameters
    assert schema["type"] == "object"
    assert schema["required"] == ["name"]
    assert schema["properties"]["count"] == {"default": 1, "type": "integer"}
    assert "title" not in schema and "title" not in schema["properties"]["name"]


class Color(enum.Enum):
    RED = "red"


class Point(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(title="A titled point")
    x: int = pydantic.Field(title="Explicit")


class Everywhere(pydantic.BaseModel):
    color: Color
    pair: tuple[Annotated[int, pydantic.Field(title="First")], str]
    points: list[Point] = []


def test_no_schema_position_keeps_a_title():
    """Model, enum, explicit field and tuple-item titles are all left out (a tuple's ``prefixItems`` too)."""
    schema = Tool("t", "T.", Everywhere, lambda ctx, a: None).parameters
    assert json.dumps(schema) == json.dumps({
        "$defs": {"Color": {"enum": ["red"], "type": "string"},
                  "Point": {"properties": {"x": {"type": "integer"}}, "required": ["x"], "type": "object"}},
        "properties": {"color": {"$ref": "#/$defs/Color"},
                       "pair": {"maxItems": 2, "minItems": 2,
                                "prefixItems": [{"type": "integer"}, {"type": "string"}], "type": "array"},
                       "points": {"default": [], "items": {"$ref": "#/$defs/Point"}, "type": "array"}},
        "required": ["color", "pair"], "type": "object"})


def test_the_generator_is_pydantics_own_hook():
    assert Everywhere.model_json_schema(schema_generator=UntitledJsonSchema)["$defs"]["Point"] == {
        "properties": {"x": {"type": "integer"}}, "required": ["x"], "type": "object"}


def test_valid_call_renders_the_value():
    result = call(make(), {"name": "Ada", "count": 2})
    assert (result.text, result.is_error, result.value) == ("hi Ada x2", False, "hi Ada x2")


@pytest.mark.parametrize("arguments, fragment", [
    ({}, "name: Field required"),
    ({"name": 3}, "name: Input should be a valid string"),
    ({"name": "a", "count": "2"}, "count: Input should be a valid integer"),
    ({"name": "a", "loud": "yes"}, "loud: Input should be a valid boolean"),
    ({"name": "a", "extra": 1}, "extra: unexpected argument"),
])
def test_invalid_arguments_name_the_bad_field(arguments, fragment):
    result = call(make(), arguments)
    assert result.is_error
    assert result.text.startswith('Error: invalid arguments for tool "greet": ')
    assert fragment in result.text


def test_non_object_arguments_are_refused():
    result = call(make(), ["not", "an", "object"])
    assert result.is_error and "expected a JSON object, got list" in result.text


def test_unknown_tool_is_an_error_result():
    registry = ToolRegistry()
    result = asyncio.run(dispatch(registry.get, ToolContext(None, None, "c"), "nope", {}))
    assert (result.text, result.is_error) == ('Error: unknown tool "nope"', True)


def test_a_thrown_error_renders_its_message():
    def boom(ctx, args):
        raise ValueError("the disk is full")

    result = call(make(boom), {"name": "a"})
    assert (result.text, result.is_error) == ("Error: the disk is full", True)


def test_duplicate_tool_names_are_refused():
    registry = ToolRegistry()
    registry.add(make())
    with pytest.raises(UsageError, match='a tool named "greet" is already registered'):
        registry.add(make())


def test_function_tool_schema_from_signature_and_docstring():
    def lookup(city: str, days: int = 3) -> str:
        """Look up the weather.

        Args:
            city: Name of the city.
            days: How many days ahead.
        """
        return f"{city}:{days}:{threading.current_thread().name}"

    tool = FunctionTool(lookup)
    assert tool.name == "lookup" and tool.description == "Look up the weather."
    assert tool.parameters["properties"]["city"] == {"description": "Name of the city.", "type": "string"}
    assert tool.parameters["required"] == ["city"]
    result = call(tool, {"city": "Oslo"})
    text = result.text
    assert text.startswith("Oslo:3:") and "MainThread" not in text  # sync functions run off the loop thread


def test_function_tool_async_and_bad_declarations():
    async def ping(host: str) -> str:
        return f"pong {host}"

    assert call(FunctionTool(ping), {"host": "a"}).text == "pong a"
    with pytest.raises(UsageError, match="needs a name"):
        FunctionTool(lambda x: x)
    with pytest.raises(UsageError, match=r"\*args/\*\*kwargs"):
        def varargs(*items: int) -> int:
            return 0
        FunctionTool(varargs)
    with pytest.raises(UsageError, match="must be a callable"):
        FunctionTool(42)


def test_each_schema_copy_is_independent_to_the_leaves():
    """Every tool gets its own copy of a cached schema: adjusting one (as the subagent tool does)
    never reaches the cache or another tool's copy, however deep."""
    import pydantic

    from toh_nb.core.tools import _copy_json, json_schema_of

    class Args(pydantic.BaseModel):
        items: list[int] = pydantic.Field(description="numbers")
        mode: str = "a"

    first = json_schema_of(Args)
    second = json_schema_of(Args)
    assert first == second and first is not second
    first["properties"]["items"]["items"]["type"] = "string"
    first["required"].append("mode")
    assert json_schema_of(Args) == second
    assert second["properties"]["items"]["items"] == {"type": "integer"} and second["required"] == ["items"]
    odd = {"a": (1, [2]), "b": [{"c": None, "d": 1.5, "e": True}]}
    copied = _copy_json(odd)
    assert copied == odd and copied["a"][1] is not odd["a"][1] and copied["b"][0] is not odd["b"][0]
