"""Is a string JSON that was cut off, or JSON that is wrong?

Why: a server that stops generating mid tool call (the token limit) may still report
``finish_reason: "tool_calls"`` (llama-cpp-python hard-codes it), so the adapter must tell "the
arguments were cut" (a ``max_tokens`` stop, the turn ends ``max-tokens``) from "the model wrote bad
JSON" (a clear ModelError). Cut JSON is a proper prefix of some valid document: this small parser
reads the text and says whether it ran out of input before any syntax error.

Why our own: no library answers "cut, or wrong?" exactly; pydantic_core/jiter's partial mode (the
nearest) reads ``'{"a": 1 2}'`` as ``{'a': 1}``, a bad document taken for a cut one.
"""

from __future__ import annotations

_WS = " \t\r\n"
_LITERALS = ("true", "false", "null")
_DIGITS = "0123456789"


class _End(Exception):
    """The text ended where more JSON was expected."""


class _Bad(Exception):
    """The text is not JSON (a syntax error before its end)."""


def is_cut_json(text: str) -> bool:
    """True when ``text`` is an unfinished prefix of a JSON value (and not already complete or invalid)."""
    parser = _Parser(text)
    try:
        parser.value()
        parser.space()
        return False  # complete (valid, or trailing garbage: not a cut)
    except _End:
        return parser.text.strip() != ""
    except _Bad:
        return False


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def peek(self) -> str:
        if self.pos >= len(self.text):
            raise _End
        return self.text[self.pos]

    def take(self, expected: str) -> None:
        if self.peek() != expected:
            raise _Bad
        self.pos += 1

    def space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WS:
            self.pos += 1

    def value(self) -> None:
        self.space()
        char = self.peek()
        if char == "{":
            self.container("}", member=True)
        elif char == "[":
            self.container("]", member=False)
        elif char == '"':
            self.string()
        elif char == "-" or char in _DIGITS:  # not str.isdigit(): "\u0663" is no JSON digit
            self.number()
        else:
            self.literal()

    def container(self, close: str, *, member: bool) -> None:
        self.pos += 1
        self.space()
        if self.peek() == close:
            self.pos += 1
            return
        while True:
            if member:
                self.space()
                self.string()
                self.space()
                self.take(":")
            self.value()
            self.space()
            char = self.peek()
            self.pos += 1
            if char == close:
                return
            if char != ",":
                raise _Bad

    def string(self) -> None:
        self.take('"')
        while True:
            char = self.peek()
            self.pos += 1
            if char == '"':
                return
            if char == "\\":
                escape = self.peek()
                self.pos += 1
                if escape == "u":
                    for _ in range(4):
                        if self.peek() not in "0123456789abcdefABCDEF":
                            raise _Bad
                        self.pos += 1
                elif escape not in '"\\/bfnrt':
                    raise _Bad
            elif char < " ":
                raise _Bad

    def number(self) -> None:
        """``-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?``, RFC 8259's grammar, read strictly.

        Why not "any run of number characters, checked with ``float()``": ``1.2.3``, ``4-5`` or ``01``
        at the very end of the text then look unfinished, and bad arguments would pass for cut ones.
        The text ending inside a number that can still go on (``-``, ``1.``, ``1e+``) is ``_End``.
        """
        if self.peek() == "-":
            self.pos += 1
        if self.peek() == "0":
            self.pos += 1
        else:
            self.digits()
        if self.pos < len(self.text) and self.text[self.pos] == ".":
            self.pos += 1
            self.digits()
        if self.pos < len(self.text) and self.text[self.pos] in "eE":
            self.pos += 1
            if self.peek() in "+-":
                self.pos += 1
            self.digits()

    def digits(self) -> None:
        """One or more ASCII digits (the first must be there: ``_End`` at the end, else ``_Bad``)."""
        if self.peek() not in _DIGITS:
            raise _Bad
        while self.pos < len(self.text) and self.text[self.pos] in _DIGITS:
            self.pos += 1

    def literal(self) -> None:
        rest = self.text[self.pos:]
        for word in _LITERALS:
            if rest.startswith(word):
                self.pos += len(word)
                return
            if word.startswith(rest):
                raise _End
        raise _Bad
