"""Cache-friendly prompts: each request of an agent extends its previous request as an exact prefix.

A provider's prompt (KV) cache only helps when the system prompt, the tool schemas and every earlier
message are byte-identical from one request to the next: no reordering, no timestamps or counters
injected. Checked across steps, turns, notices, reports, follow-ups and a cold resume from a JSONL store.
"""

from __future__ import annotations

import asyncio
import json

import toh_nb as tn
from toh_nb.core.content import ToolCall
from toh_nb.models.record import canonical_request


def prompt_lines(request) -> list[str]:
    """The request as a provider sees it, one serialised unit per line, in prompt order."""
    data = canonical_request(request)
    head = [json.dumps({"system": data["system"], "tools": data["tools"]}, sort_keys=True)]
    return head + [json.dumps(m, sort_keys=True) for m in data["messages"]]


def assert_prefix_chains(requests_by_agent):
    for agent, requests in requests_by_agent.items():
        for before, after in zip(requests, requests[1:]):
            old, new = prompt_lines(before), prompt_lines(after)
            assert new[: len(old)] == old, f"{agent}: turn {after.turn} step {after.step} rewrote its prompt prefix"
            assert len(new) > len(old)


def test_every_agent_extends_its_previous_request_through_notices_reports_and_resume(tmp_path):
    requests: dict[str, list] = {}

    async def model(req):
        requests.setdefault(req.agent_id, []).append(req)
        if req.depth == 0:
            if req.turn == 1 and req.step == 1:
                return tn.ModelResponse(tool_calls=[
                    ToolCall("subagent", {"description": "helper", "prompt": "help", "run_in_background": True}),
                    ToolCall("subagent", {"description": "oneshot", "prompt": "quick"})])
            return f"root turn {req.turn} step {req.step}"
        if req.label == "helper" and req.turn == 1 and req.step == 1:
            return tn.ModelResponse(tool_calls=[ToolCall("report", {"output": "progress"})])
        return f"{req.label} answer {req.turn}"

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", store=str(tmp_path),
                               background_mode="continuable") as hub:
            await hub.run("start")
            await asyncio.sleep(0.05)
            await (await hub.child("agent-1")).wait(timeout=5)
            await hub.run("next")  # reads the notices the child left
            await hub.send("agent-1", "more please")
            await (await hub.child("agent-1")).wait(timeout=5)
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", store=str(tmp_path),
                               background_mode="continuable") as hub:
            await hub.send("agent-1", "after the restart")  # cold resume from the JSONL log
            await (await hub.child("agent-1")).wait(timeout=5)
            await hub.run("after restart")

    asyncio.run(main())
    assert len(requests["root"]) >= 4 and len(requests["agent-1"]) >= 4
    assert_prefix_chains(requests)
