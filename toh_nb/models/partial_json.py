"""Is a string JSON that was cut off, or JSON that is wrong?

Why: a server that stops generating mid tool call (the token limit) may still report
``finish_reason: "tool_calls"`` (llama-cpp-python hard-codes it), so the adapter must tell "the
arguments were cut" (a ``max_tokens`` stop, the turn ends ``max-tokens``) from "the model wrote bad
JSON" (a clear ModelError). Cut JSON is a proper prefix of some valid document: this small parser
reads the text and says whether it ran out of input before any syntax error.
"""

from __future__ import annotations

_WS = " \t\r\n"
_LITERALS = ("true", "false", "null")


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
        elif char == "-" or char.isdigit():
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
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in "+-0123456789.eE":
            self.pos += 1
        token = self.text[start:self.pos]
        if self.pos >= len(self.text):
            return  # a number at the very end may go on: the caller's next read ends the text
        try:
            float(token)
        except ValueError:
            raise _Bad from None

    def literal(self) -> None:
        rest = self.text[self.pos:]
        for word in _LITERALS:
            if rest.startswith(word):
                self.pos += len(word)
                return
            if word.startswith(rest):
                raise _End
        raise _Bad
