"""Prefix caching: the share of each request's prompt that the previous request already sent.

A provider's prompt (KV) cache reuses the longest prefix a request shares, byte for byte, with an
earlier one. This script runs one long conversation through a hub (``--n`` root turns; every turn
delegates once in the foreground, every fifth also starts a background child whose completion notice
the root reads the turn after) and, for every model request of every agent, measures how much of the
rendered prompt is an exact prefix of the agent's previous request.

The prompt is rendered as a chat template renders it, in prompt order: the system prompt and tool
schemas first, then each message (``toh_nb.models.record.canonical_request``, one JSON unit each).
There is no tokenizer here, so sizes are characters of that rendering (``~tokens`` assumes 4
characters per token, only to give a magnitude); the *share* does not depend on the unit.

Figures: ``prefix_cache`` (``n`` root turns): ``requests`` (all agents), ``reusable_share`` (reused
characters / prompt characters summed over every request after each agent's first),
``min_share_root`` / ``last_share_root`` (the root's worst and final request), ``broken`` (requests
whose previous request is *not* a prefix: should be 0, see tests/models/test_prompt_prefix.py).
"""

from __future__ import annotations

import asyncio
import json

import _common as c


def rendered(request) -> list[str]:
    """The request as a provider's template sees it: one serialised unit per entry, in prompt order."""
    from toh_nb.models.record import canonical_request

    data = canonical_request(request)
    head = json.dumps({"system": data["system"], "tools": data["tools"]}, sort_keys=True)
    return [head] + [json.dumps(m, sort_keys=True) for m in data["messages"]]


def shared_prefix(before: list[str], after: list[str]) -> tuple[int, bool]:
    """Characters of ``after`` that ``before`` sent first, and whether all of ``before`` is a prefix."""
    same = 0
    for old, new in zip(before, after):
        if old != new:
            common = 0
            for a, b in zip(old, new):
                if a != b:
                    break
                common += 1
            return same + common, False
        same += len(new)
    return same, len(before) <= len(after)


async def engine(n: int) -> dict:
    from toh_nb.core.content import ToolCall
    from toh_nb.core.model import ModelResponse
    from toh_nb.hub import AsyncHub

    requests: dict[str, list] = {}

    def reply(request):
        requests.setdefault(request.agent_id, []).append(rendered(request))
        if request.depth > 0:
            return f"{request.label}: done with turn {request.turn}"
        if request.step == 1:
            calls = [ToolCall("subagent", {"description": f"helper {request.turn}", "prompt": f"part {request.turn}"})]
            if request.turn % 5 == 0:
                calls.append(ToolCall("subagent", {"description": f"background {request.turn}",
                                                   "prompt": f"long part {request.turn}", "run_in_background": True}))
            return ModelResponse(tool_calls=calls)
        return f"turn {request.turn}: summarised"

    t0 = c.now()
    async with AsyncHub(c.model(reply), ids="sequential") as hub:
        for turn in range(n):
            await hub.run(f"question {turn}: go on")
            await asyncio.sleep(0)
    seconds = c.now() - t0

    reused = total = broken = count = 0
    root_shares: list[float] = []
    for agent, prompts in requests.items():
        for before, after in zip(prompts, prompts[1:]):
            size = sum(len(part) for part in after)
            same, extends = shared_prefix(before, after)
            reused += same
            total += size
            broken += not extends
            count += 1
            if agent == "root":
                root_shares.append(same / size)
    if len(requests.get("root", ())) < 2 * n:
        raise SystemExit(f"prefix_cache: the root made {len(requests.get('root', ()))} requests for {n} turns")
    last = requests["root"][-1]
    return {"seconds": seconds, "requests": sum(len(p) for p in requests.values()), "agents": len(requests),
            "compared": count, "reusable_share": round(reused / total, 4) if total else None,
            "min_share_root": round(min(root_shares), 4), "last_share_root": round(root_shares[-1], 4),
            "last_prompt_chars": sum(len(p) for p in last), "last_prompt_tokens_approx": sum(len(p) for p in last) // 4,
            "broken": broken}


async def main() -> None:
    args = c.parser(__doc__.splitlines()[0], [100]).parse_args()
    for n in args.n:
        result = await engine(n)
        seconds = result.pop("seconds")
        fig = c.figure("prefix_cache", n, seconds, None, **result)
        if args.json:
            c.emit(fig, True)
        else:
            print(f"{'prefix_cache':<28} n={n:<6} {result['requests']} requests of {result['agents']} agents: "
                  f"reusable {result['reusable_share']:.1%} of prompt characters (root: min "
                  f"{result['min_share_root']:.1%}, last {result['last_share_root']:.1%} of "
                  f"{result['last_prompt_chars']:,} chars ~{result['last_prompt_tokens_approx']:,} tokens); "
                  f"{result['broken']} broken prefixes", flush=True)


if __name__ == "__main__":
    c.run_main(main)
