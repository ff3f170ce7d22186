"""The API key stays out of the httpx/httpcore/openai DEBUG logs while a model holds it (toh_nb.core.secrets),
with the real ``openai`` client against a local server that echoes the Authorization header."""

from __future__ import annotations

import asyncio
import logging

import pytest

import toh_nb as tn
from toh_nb.core import secrets

from .chat_server import ChatServer, text

KEY = "sk-test-LOGGED-0123456789abcdef"
ENV_KEY = "sk-env-LOGGED-9876543210fedcba"


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def root_at_debug():
    """The root logger at DEBUG with a handler of ours, as ``logging.basicConfig(level=DEBUG)`` does."""
    root = logging.getLogger()
    handler = Captured()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _echoing(server: ChatServer, answers: int) -> None:
    for _ in range(answers):
        reply = text("hello")
        reply.headers["X-Echo-Authorization"] = f"Bearer {server.api_key or ''}"
        server.push(reply)


def _leaks(records: list[logging.LogRecord], key: str) -> list[str]:
    leaked = []
    for record in records:
        if key in record.getMessage() or key in repr(record.args) or key in (record.exc_text or ""):
            leaked.append(f"{record.name}: {record.getMessage()[:120]}")
    return leaked


def _run(model: tn.OpenAIChatModel, prompt: str = "hi") -> tn.RunResult:
    async def main():
        async with tn.AsyncHub(model) as hub:
            return await hub.run(prompt)

    return asyncio.run(main())


@pytest.mark.parametrize("from_env", [False, True], ids=["api_key", "OPENAI_API_KEY"])
def test_the_key_reaches_no_debug_record_and_the_factory_goes_with_the_model(root_at_debug, monkeypatch, from_env):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    key = ENV_KEY if from_env else KEY
    if from_env:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    else:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    factory = logging.getLogRecordFactory()
    with ChatServer(api_key=key) as server:
        _echoing(server, 1)
        model = tn.OpenAIChatModel("test-model", server.url, api_key=None if from_env else key, timeout=5)
        result = _run(model)
    assert result.text == "hello"
    http_records = [r for r in root_at_debug.records if secrets.in_families(r.name)]
    assert any("httpcore" in r.name for r in http_records)  # the libraries did log the exchange
    assert any(secrets.MASK in r.getMessage() for r in http_records)  # the echoed header, masked
    assert _leaks(root_at_debug.records, key) == []
    # the hub closed the model: nothing is held and the process's own factory is back
    assert secrets.held() == () and logging.getLogRecordFactory() is factory


def test_without_the_filter_the_echoed_key_is_logged(root_at_debug, monkeypatch):
    """The attack the guard stops: the same exchange with nothing held logs the key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(tn.OpenAIChatModel, "_hold_secrets", lambda self: None)
    with ChatServer(api_key=KEY) as server:
        _echoing(server, 1)
        _run(tn.OpenAIChatModel("test-model", server.url, api_key=KEY, timeout=5))
    assert _leaks(root_at_debug.records, KEY)


def test_held_secrets_are_masked_in_child_loggers_only_of_the_http_families():
    release = secrets.hold(["sk-abcdefgh-held", "short"])
    handler = Captured()
    loggers = [logging.getLogger(name) for name in ("httpcore.brand_new_child", "httpx2", "myapp")]
    try:
        for logger in loggers:
            logger.addHandler(handler)
            logger.setLevel(logging.DEBUG)
            logger.debug("headers %r", [(b"Authorization", b"Bearer sk-abcdefgh-held")])
        assert secrets.held() == ("sk-abcdefgh-held",)  # shorter values are not treated as secrets
    finally:
        release()
        release()  # idempotent
        for logger in loggers:
            logger.removeHandler(handler)
            logger.setLevel(logging.NOTSET)
    messages = [r.getMessage() for r in handler.records]
    assert messages == ["headers [(b'Authorization', b'Bearer <redacted>')]"] * 2 + [
        "headers [(b'Authorization', b'Bearer sk-abcdefgh-held')]"]  # the user's own logger is left alone
    assert handler.records[0].args is None
    assert secrets.held() == ()


def test_a_factory_installed_over_ours_is_left_in_place():
    def theirs(*args, **kwargs):
        return wrapped(*args, **kwargs)

    original = logging.getLogRecordFactory()
    release = secrets.hold(["sk-zyxwvuts-held"])
    wrapped = logging.getLogRecordFactory()
    logging.setLogRecordFactory(theirs)
    try:
        release()
        assert logging.getLogRecordFactory() is theirs  # not pulled from under the other library
        again = secrets.hold(["sk-zyxwvuts-held"])  # ours is still in the chain: not wrapped twice
        record = logging.getLogger("httpx").makeRecord("httpx", logging.DEBUG, "f", 1, "key sk-zyxwvuts-held",
                                                        None, None)
        assert record.getMessage() == "key <redacted>"
        again()
    finally:
        logging.setLogRecordFactory(wrapped)  # the other library unwraps itself: ours is on top again
        secrets.hold(["sk-zyxwvuts-held"])()  # and goes at the next release
    assert logging.getLogRecordFactory() is original
