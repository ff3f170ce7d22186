"""The contract tests' model: answers with the prompt (as fast-agent's ``passthrough`` does), or, for a
prompt starting with "wait", only after a minute (an interruptible turn, as fast-agent's ``slow``).
A module of its own so a Ray host imports it by reference (this checkout is on the workers' path)."""

from __future__ import annotations

import asyncio


class Echo:
    async def request(self, request):
        from toh_nb.core.model import ModelResponse

        text = request.messages[-1].text
        if text.startswith("wait"):
            await asyncio.sleep(60)
        return ModelResponse(text=text)
