"""What the tree's Timeline (the waterfall) costs: bytes synced and milliseconds to build its data.

A tree of ``n`` settled continuable children, each with ``turns`` turns of one model call and one tool
call; the Timeline open. Prints one JSON line per size: ``waterfall_bytes`` (the synced trait as JSON),
``first_ms`` (every shown agent's log read), ``again_ms`` (nothing moved: no log read again), and the
agents synced (at most ``toh_nb.notebook.waterfall.MAX_AGENTS``).

    python bench/waterfall.py            # n = 50, 200, 1000; turns = 5
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import toh_nb as tn  # noqa: E402
from toh_nb.notebook.widget import AgentTree  # noqa: E402


def note(text: str) -> str:
    """A user tool each turn calls once."""
    return f"noted {text}"


def reply(request):
    if request.messages[-1].role == "user":
        return tn.ModelResponse(tool_calls=[tn.ToolCall("note", {"text": request.last_user_text})],
                                usage=tn.Usage(120, 12))
    return tn.ModelResponse(text="done", usage=tn.Usage(140, 3))


def measure(n: int, turns: int) -> dict:
    with tn.Hub(tn.FunctionModel(reply), ids="sequential", tools=[note]) as hub:
        kids = [hub.start(f"task {i}", label=f"kid {i}") for i in range(n)]
        for kid in kids:
            kid.wait(timeout=60)
        for turn in range(1, turns):
            for kid in kids:
                kid.send(f"again {turn}")
            for kid in kids:
                kid.wait(timeout=60)
        tree = AgentTree(hub)
        try:
            tree.view = "timeline"
            started = time.perf_counter()
            hub.portal.call(tree._sync_waterfall)  # noqa: SLF001  (the step a refresh runs)
            first = time.perf_counter() - started
            started = time.perf_counter()
            hub.portal.call(tree._sync_waterfall)  # noqa: SLF001
            again = time.perf_counter() - started
            size = len(json.dumps(tree.waterfall))
            synced = len(tree.waterfall)
        finally:
            tree.close()
    return {"name": "waterfall", "n": n, "turns": turns, "agents_synced": synced, "waterfall_bytes": size,
            "first_ms": round(first * 1000, 1), "again_ms": round(again * 1000, 1)}


def main() -> None:
    for n in (50, 200, 1000):
        print(json.dumps(measure(n, 5)), flush=True)


if __name__ == "__main__":
    main()
