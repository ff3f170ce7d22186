"""is_cut_json: JSON that was cut off vs JSON that is wrong (the tool-call truncation rule)."""

from __future__ import annotations

import json

import pytest

from toh_nb.models.partial_json import is_cut_json

DOCUMENT = '{"description": "sum \\"it\\" \\u00e9", "n": -1.5e3, "ok": [true, false, null], "nested": {"a": []}}'


@pytest.mark.parametrize("text", ['{', '{ "', '{"q": "unterminated', '{"q"', '{"q":', '{"q": tr', '{"a": 1,',
                                  '{"a": [1, {"b": "\\', '{"n": -1.', '{"s": "\\u00'])
def test_cut_json(text):
    assert is_cut_json(text)


def test_every_proper_prefix_of_a_document_is_cut():
    json.loads(DOCUMENT)
    assert all(is_cut_json(DOCUMENT[:end]) for end in range(1, len(DOCUMENT)))
    assert not is_cut_json(DOCUMENT)


@pytest.mark.parametrize("text", ["", "   ", '{"q": "x"}', "[1, 2]", '{"q": x}', '{"q" "x"}', '{"q": "x"}}', "{'q': 1}",
                                  '{"a": 1 2}', '{"s": "\\q"}', '{"n": 1.2.3, "m": 1}', 'nul!', '{"s": "\\u00zz"}'])
def test_complete_or_wrong_json_is_not_cut(text):
    assert not is_cut_json(text)
