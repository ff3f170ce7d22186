"""read_docstring: a tool function's description and parameter descriptions, in every docstring style."""

from __future__ import annotations

import inspect

import docstring_parser
import pytest

from toh_nb.core.docstrings import DocstringFacts, read_docstring
from toh_nb.core.tools import FunctionTool

DESCRIPTION = "Look up the weather.\n\nIt asks the forecast service and answers\nin words."
PARAMETERS = {"city": "Name of the city, as it is written on a map of the country.",
              "days": "How many days ahead."}

STYLES = {
    "google": '''Look up the weather.

        It asks the forecast service and answers
        in words.

        Args:
            city: Name of the city, as it is written
                on a map of the country.
            days (int): How many days ahead.

        Returns:
            The forecast.
        ''',
    "numpy": '''Look up the weather.

        It asks the forecast service and answers
        in words.

        Parameters
        ----------
        city : str
            Name of the city, as it is written
            on a map of the country.
        days : int
            How many days ahead.

        Returns
        -------
        str
            The forecast.
        ''',
    "rest": '''Look up the weather.

        It asks the forecast service and answers
        in words.

        :param city: Name of the city, as it is written
            on a map of the country.
        :param int days: How many days ahead.
        :returns: The forecast.
        ''',
    "epydoc": '''Look up the weather.

        It asks the forecast service and answers
        in words.

        @param city: Name of the city, as it is written
            on a map of the country.
        @type city: str
        @param days: How many days ahead.
        @return: The forecast.
        ''',
}


def weather_tool(doc: str) -> FunctionTool:
    def weather(city: str, days: int = 1) -> str:
        return city

    weather.__doc__ = doc
    return FunctionTool(weather)


@pytest.mark.parametrize("style", sorted(STYLES))
def test_every_style_gives_the_whole_description_and_each_parameter(style):
    assert read_docstring(inspect.cleandoc(STYLES[style])) == DocstringFacts(DESCRIPTION, PARAMETERS)


@pytest.mark.parametrize("style", sorted(STYLES))
def test_the_model_reads_them_in_the_tool_schema(style):
    tool = weather_tool(STYLES[style])
    assert tool.description == DESCRIPTION
    assert {name: prop.get("description") for name, prop in tool.parameters["properties"].items()} == PARAMETERS


def test_a_docstring_without_sections_is_the_description():
    assert read_docstring("Count the words.\n\nSpaces separate them.") == DocstringFacts(
        "Count the words.\n\nSpaces separate them.", {})


@pytest.mark.parametrize("doc", [None, "", "   \n  "])
def test_no_docstring_gives_nothing(doc):
    assert read_docstring(doc) == DocstringFacts("", {})
    assert weather_tool(doc).description == "Call weather."


def test_attributes_and_raises_are_no_parameters():
    doc = "Do it.\n\nArgs:\n    city: The city.\n\nAttributes:\n    days: not a parameter.\n\nRaises:\n    ValueError: bad.\n"
    assert read_docstring(doc) == DocstringFacts("Do it.", {"city": "The city."})


def test_an_explicit_description_wins_and_the_parameters_stay():
    def weather(city: str) -> str:
        """Look up the weather.

        Args:
            city: The city.
        """
        return city

    tool = FunctionTool(weather, description="Weather, briefly.")
    assert tool.description == "Weather, briefly."
    assert tool.parameters["properties"]["city"]["description"] == "The city."


def test_a_docstring_no_style_reads_is_the_description_whole(monkeypatch):
    def refuse(text, *args, **kwargs):
        raise docstring_parser.ParseError("no style fits")

    monkeypatch.setattr(docstring_parser, "parse", refuse)
    assert read_docstring("Do it.\n\nArgs:\n    city: The city.\n") == DocstringFacts(
        "Do it.\n\nArgs:\n    city: The city.", {})
