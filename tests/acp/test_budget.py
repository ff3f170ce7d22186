"""ACP children under token budgets: their tokens are the external agent's, which ACP does not report, so
their prompts reserve nothing (they run together) and count nothing; a spent budget still stops them."""

from __future__ import annotations

import asyncio

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of

pytest.importorskip("acp", reason="needs the acp extra: pip install 'toh-nb[acp]'")

from ..helpers import until
from .helpers import fake

pytestmark = pytest.mark.slow


def test_acp_prompts_under_a_budget_run_together_and_reserve_nothing(tmp_path):
    async def main():
        agent = tn.AcpAgent(fake(), cwd=str(tmp_path), eof_grace=2.0)
        async with tn.AsyncHub(ids="sequential", providers={"coder": agent}, token_budget=1000) as hub:
            root = engine_of(hub).root
            kids = [await hub.start(f"SLOW {n}", label=n, provider="coder") for n in ("one", "two")]

            def working(kid):
                return any(r["kind"] == "external/agent_message_chunk" for r in hub.view.transcript(kid.id, raw=True))

            await until(lambda: all(working(kid) for kid in kids), "both prompts to run at once", 20)
            reserved = root.reserved_tokens
            for kid in kids:
                await kid.interrupt()
            for kid in kids:
                await kid.wait(timeout=20)
            root.subtree_tokens = 1000  # spent, as by another child
            refused = await hub.spawn("hello", label="three", provider="coder")
            return reserved, refused, root

    reserved, refused, root = asyncio.run(main())
    assert reserved == 0 and root.reserved_tokens == 0
    assert (refused.stop_reason, refused.diagnostic) == (
        "token-budget", "the token budget of its ancestor root is spent: 1000 of 1000 tokens used (token_budget=1000)")
