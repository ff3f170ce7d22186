"""retry_rules: the openai SDK's rules for which responses to retry and how long a server asked to wait."""

from __future__ import annotations

import email.utils

import pytest

from toh_nb.models.retry_rules import retry_after, server_says_retry, should_retry

NOW = 1_800_000_000.0


@pytest.mark.parametrize(("status", "headers", "expected"), [
    (408, {}, True), (409, {}, True), (429, {}, True), (500, {}, True), (503, {}, True), (599, {}, True),
    (400, {}, False), (401, {}, False), (404, {}, False), (422, {}, False),
    (503, {"x-should-retry": "false"}, False), (400, {"x-should-retry": "true"}, True),
    (429, {"x-should-retry": "false"}, False), (404, {"x-should-retry": "true"}, True),
    # only the exact words count, as in the SDK
    (503, {"x-should-retry": "False"}, True), (400, {"x-should-retry": "yes"}, False),
    (500, None, True),
])
def test_which_responses_are_retried(status, headers, expected):
    assert should_retry(status, headers) is expected


def test_server_says_retry_reads_only_true_and_false():
    assert [server_says_retry(h) for h in ({"x-should-retry": "true"}, {"x-should-retry": "false"},
                                           {"x-should-retry": "1"}, {}, None)] == [True, False, None, None, None]


@pytest.mark.parametrize(("headers", "expected"), [
    ({"retry-after-ms": "250"}, 0.25),
    ({"retry-after": "3"}, 3.0),
    ({"retry-after": "0.5"}, 0.5),
    ({"retry-after-ms": "250", "retry-after": "3"}, 0.25),
    ({"retry-after-ms": "soon", "retry-after": "3"}, 3.0),  # an unreadable ms value falls back to Retry-After
    ({"retry-after": email.utils.formatdate(NOW + 7, usegmt=True)}, 7.0),
    ({"retry-after": email.utils.formatdate(NOW + 7, localtime=False)}, 7.0),
    ({"retry-after": email.utils.formatdate(NOW - 7, usegmt=True)}, None),  # already past
    ({"retry-after": "0"}, None), ({"retry-after": "-2"}, None),
    ({"retry-after": "nan"}, None), ({"retry-after": "inf"}, None), ({"retry-after-ms": "inf"}, None),
    ({"retry-after": "tomorrow"}, None), ({"retry-after": ""}, None),
    ({}, None), (None, None),
])
def test_how_long_the_server_asked_to_wait(headers, expected):
    assert retry_after(headers, now=lambda: NOW) == expected
