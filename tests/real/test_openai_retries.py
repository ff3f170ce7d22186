"""OpenAIChatModel's retry loop against the real llama.cpp server (issue 45 item 1).

The rules themselves (408/409/429/5xx, ``x-should-retry``, ``Retry-After``) are pinned against the
strict stand-in (tests/models/test_openai_chat.py), which can fail on demand; here the real server
proves the two paths it can show: a healthy server answers the first attempt (no retry, one request in
its log), and a server that went away is retried ``max_retries`` times and then named as unreachable.
"""

from __future__ import annotations

import asyncio
import re

import pytest

import toh_nb as tn
from tests.real.conftest import HAVE_LOCAL, NO_LOCAL, SERVER_START_TIMEOUT
from toh_nb.core.content import user_message
from toh_nb.core.errors import ModelError
from toh_nb.core.model import ModelRequest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.skipif(not HAVE_LOCAL, reason=NO_LOCAL)]

#: uvicorn's access line for one chat completion
POSTED = re.compile(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})')


def request() -> ModelRequest:
    return ModelRequest(agent_id="agent-1", label=None, depth=0, system="", messages=[user_message("Say hi.")],
                        tools=[], max_tokens=8)


def test_the_real_server_answers_the_first_attempt_and_a_gone_server_is_retried_then_named():
    from toh_nb.serve.model import start_model_server

    server = start_model_server(timeout=SERVER_START_TIMEOUT)
    model = tn.OpenAIChatModel("smollm2", base_url=server.url, profile="llama.cpp", temperature=0.0,
                               timeout=120.0, max_retries=2, backoff=0.05)

    async def go():
        try:
            answer = await model.request(request())
            log = server.log_text()
            server.stop()
            with pytest.raises(ModelError) as info:
                await model.request(request())
            return answer, log, info.value
        finally:
            await model.aclose()

    try:
        answer, log, failure = asyncio.run(go())
    finally:
        server.stop()
    assert answer.stop_reason in ("end_turn", "max_tokens") and answer.usage.output_tokens > 0
    assert POSTED.findall(log) == ["200"], log[-2000:]  # one attempt, answered
    assert failure.status_code is None and failure.attempts == 3
    text = str(failure)
    assert text.startswith(f"OpenAIChatModel('smollm2' at {server.url}): connection failed ("), text
    assert text.endswith(") (gave up after 3 attempts)"), text
