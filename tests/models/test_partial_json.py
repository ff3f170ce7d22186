"""is_cut_json: JSON that was cut off vs JSON that is wrong (the tool-call truncation rule)."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

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


@pytest.mark.parametrize("text", ['{"n": 1.2.3', '{"n": 4-534', '{"n": 01', '{"n": 1e+e', '{"n": --1', '{"n": -01',
                                  '{"n": 1.e5', '{"n": .5', '{"n": +1', '[0x1', '{"n": \u0663'])
def test_a_malformed_number_at_the_end_is_wrong_not_cut(text):
    assert not is_cut_json(text)


@pytest.mark.parametrize("text", ['-', '{"n": -', '{"n": 0.', '{"n": 1e', '{"n": 1E+', '{"n": 2e-', '[12', '[-0.5e1'])
def test_a_number_that_can_go_on_at_the_end_is_cut(text):
    assert is_cut_json(text)


# -- properties: generated documents, cut and corrupted -------------------------------------------------------


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")  # json.loads takes NaN/Infinity; RFC 8259 does not


def _parses(text: str) -> bool:
    try:
        json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        return False
    return True


#: how an unfinished token can end: nothing, a number's digit, a string's quote (after a backslash, an
#: escape; inside ``\\u``, its missing hex digits), or the rest of a literal
_TOKEN_ENDS = (["", "0", '"', 'n"'] + ["0" * n + '"' for n in range(1, 5)]
               + [word[n:] for word in ("true", "false", "null") for n in range(1, len(word))])
#: what the innermost container may still need before it can close: nothing, a value, a key's colon
#: and value, or a whole member after a comma
_MEMBER_ENDS = ("", "0", ":0", '"":0')


def _open_containers(text: str) -> list[str]:
    """The closers of the containers still open at the end of ``text`` (exact for any proper prefix of JSON)."""
    stack: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]" and stack:
            stack.pop()
    return stack


def completable(text: str) -> bool:
    """The oracle: does some closing suffix make ``text`` a JSON document?

    Every proper prefix of a document is closed by one of these suffixes (a token's end, then what the
    innermost container needs, then each open container's closer), which the prefix test below checks;
    so a text none of them closes is no prefix of any JSON document."""
    closers = "".join(reversed(_open_containers(text)))
    return any(_parses(text + token + member + closers) for token in _TOKEN_ENDS for member in _MEMBER_ENDS)


def _expected(text: str) -> bool:
    """What is_cut_json must say: non-blank, not complete, and some closing suffix completes it."""
    return text.strip() != "" and not _parses(text) and completable(text)


_SCALARS = (st.none() | st.booleans() | st.integers(-10**20, 10**20)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6))
#: a string no generated one can equal (longer than any): marks where a listed bad number goes
HOLE = "<a hole for a value>"


def _values(scalars):
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)


@st.composite
def documents(draw, scalars=_SCALARS) -> str:
    """Tool arguments as servers write them: a JSON object (at times an array), compact or spaced."""
    values = _values(scalars)
    value = draw(st.dictionaries(st.text(max_size=5), values, min_size=1, max_size=4)
                 | st.lists(values, min_size=1, max_size=3))
    layout = draw(st.sampled_from([{}, {"separators": (",", ":")}, {"indent": 1}, {"indent": "\t"}]))
    return json.dumps(value, ensure_ascii=draw(st.booleans()), **layout)


@settings(max_examples=100, deadline=None)
@given(documents())
def test_every_non_blank_proper_prefix_of_a_generated_document_is_cut(document):
    assert not is_cut_json(document)
    for end in range(1, len(document)):
        prefix = document[:end]
        if prefix.strip():
            assert completable(prefix), prefix  # the oracle closes every prefix (else it would prove nothing)
            assert is_cut_json(prefix), prefix


#: characters that, put in the wrong place, make a document wrong (or leave it a valid prefix)
_CORRUPTIONS = list(",:{}[]\"\\.-+eE0159 xnt\x01") + ["1.2.3", "4-5", "01", "1e+e", "--1"]


@settings(max_examples=250, deadline=None)
@given(documents(), st.sampled_from(_CORRUPTIONS), st.data())
def test_a_corrupted_document_is_cut_only_when_some_suffix_completes_it(document, corruption, data):
    at = data.draw(st.integers(0, len(document)), label="at")
    corrupted = document[:at] + corruption + document[at:]
    end = data.draw(st.integers(at + len(corruption), len(corrupted)), label="end")
    text = corrupted[:end]
    assert is_cut_json(text) == _expected(text), text


LISTED = ["1.2.3", "4-5", "01", "1e+e", "--1"]


@settings(max_examples=50, deadline=None)
@pytest.mark.parametrize("bad", LISTED)
@given(document=documents(_SCALARS | st.just(HOLE)))
def test_a_listed_bad_number_in_place_of_a_value_is_never_cut(bad, document):
    """Each listed number put where a value goes: every cut from the number's end on is no prefix."""
    hole = f'"{HOLE}"'
    assume(hole in document)
    at = document.index(hole)
    corrupted = document[:at] + bad + document[at + len(hole):]
    for end in range(at + len(bad), len(corrupted) + 1):
        text = corrupted[:end]
        assert not completable(text), text
        assert not is_cut_json(text), text
