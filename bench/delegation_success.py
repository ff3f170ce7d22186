"""Delegation success of a small real model (SmolLM2-135M-Instruct), per scenario, recipe and backend.

Issue 32.4: does ``"auto"`` delegate, and which forced recipe works? For each seed (sampling at
``--temperature``, so seeds differ) each scenario runs once on a fresh hub:

- ``foreground``: "Find out what the capital of France is. Delegate it to a subagent …"; success: the
  root called ``subagent`` in the foreground, the child answered, the root then answered (completed, or
  cut by ``max_tokens``) with a non-empty text free of chat markup and HTML escapes;
- ``background``: "Start a subagent in the background …, then read its answer with job_output";
  success: ``subagent`` with ``run_in_background: true``, then ``job_output`` whose result is the
  child's output (not an error), then a clean answer as above;
- ``recall``: a continuable child is told "Remember the word apple …", then ``send("Which word …")``;
  success: the second answer says "apple".

Recipes: ``auto`` (``tool_choice="auto"`` everywhere) and ``forced`` (the root's first step forced to
``subagent`` — and its second to ``job_output`` in the background scenario — then ``"none"``). Backends:
``local`` (``tn.LocalModel``) and ``server`` (``python -m toh_nb serve-model`` + ``OpenAIChatModel(
profile="llama.cpp")``). Also counted: root answers containing "Paris" (foreground/background).

Run from the repository root (needs the ``local`` extra; minutes per backend):
``nice -n 10 env PYTHONPATH=. python bench/delegation_success.py --seeds 20``
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections import defaultdict

import toh_nb as tn

DELEGATE = "Find out what the capital of France is. Delegate it to a subagent and wait for its answer."
BACKGROUND = ("Find out what the capital of France is. Start a subagent in the background for it, then read "
              "its answer with job_output.")
REMEMBER = "Remember the word apple. Reply with one short sentence."
RECALL = "Which word did I ask you to remember?"
DIRTY = re.compile(r"<tool_|</tool|<\|im_|&#\d+;|&[a-z]{2,6};")
SCENARIOS = ("foreground", "background", "recall")
#: a small-model hub: the root may delegate, its children may not (under llama-cpp-python's "auto" every
#: agent delegated again, 7-25 agents per run in issue 32); a few steps per turn
MAX_DEPTH = 1
MAX_STEPS = 4
RECIPES = ("auto", "forced")


def recipe(name: str, scenario: str):
    if name == "auto":
        return "auto"
    if scenario == "recall":
        return "none"
    steps = {1: "subagent", 2: "job_output"} if scenario == "background" else {1: "subagent"}

    def forced(request):
        return steps.get(request.step, "none") if request.depth == 0 else "none"
    return forced


class Recorder:
    def __init__(self, inner) -> None:
        self.inner = inner
        self.log = []

    async def request(self, request):
        response = await self.inner.request(request)
        self.log.append((request, response))
        return response


def make_model(backend: str, choice, seed: int, temperature: float, max_tokens: int, url: str | None):
    if backend == "local":
        return tn.LocalModel(tool_choice=choice, seed=seed, temperature=temperature, max_tokens=max_tokens)
    return tn.OpenAIChatModel("smollm2", base_url=url, profile="llama.cpp", tool_choice=choice,
                              temperature=temperature, max_tokens=max_tokens, extra_body={"seed": seed},
                              timeout=120.0, max_retries=0)


def clean(text: str) -> bool:
    return bool(text.strip()) and not DIRTY.search(text)


async def run_one(scenario: str, recorder: Recorder) -> tuple[bool, bool]:
    """(success, the root's answer names Paris)."""
    if scenario == "recall":
        async with tn.AsyncHub(tn.FunctionModel(recorder.request), ids="sequential") as hub:
            kid = await hub.start(REMEMBER, label="helper")
            await kid.wait(timeout=300)
            await kid.send(RECALL)
            await kid.wait(timeout=300)
            answers = [r.text for q, r in recorder.log if q.label == "helper"]
        return len(answers) >= 2 and "apple" in answers[-1].lower(), False
    tools = [tn.SubagentTool(enable_run_in_background=scenario == "background")]
    async with tn.AsyncHub(tn.FunctionModel(recorder.request), ids="sequential", max_steps=MAX_STEPS,
                           max_depth=MAX_DEPTH, delegation_tools=tools) as hub:
        result = await hub.run(DELEGATE if scenario == "foreground" else BACKGROUND)
    root = [(q, r) for q, r in recorder.log if q.depth == 0]
    calls = [c for _, r in root for c in r.tool_calls]
    kids = [r for q, r in recorder.log if q.depth == 1]
    named = "paris" in result.text.lower()
    ended = result.stop_reason in ("completed", "max-tokens") and clean(result.text)
    if scenario == "foreground":
        delegated = any(c.name == "subagent" and not c.arguments.get("run_in_background") for c in calls)
        return delegated and any(k.text.strip() for k in kids) and ended, named
    started = any(c.name == "subagent" and c.arguments.get("run_in_background") is True for c in calls)
    results = [m for q, _ in root for m in q.messages if m.role == "tool" and m.tool_name == "job_output"]
    read = any(not m.is_error and any(k.text.strip() and k.text.strip()[:40] in m.text for k in kids)
               for m in results)
    return started and read and ended, named


async def measure(backend: str, seeds: int, temperature: float, max_tokens: int, url: str | None, table: dict,
                  recipes=RECIPES, scenarios=SCENARIOS):
    for name in recipes:
        for scenario in scenarios:
            for seed in range(seeds):
                recorder = Recorder(make_model(backend, recipe(name, scenario), seed, temperature, max_tokens, url))
                started = time.perf_counter()
                try:
                    ok, named = await asyncio.wait_for(run_one(scenario, recorder), 600)
                    error = None
                except Exception as exc:  # a failed run is a failure of the scenario, counted and named
                    ok, named, error = False, False, f"{type(exc).__name__}: {exc}"[:120]
                row = table[(backend, name, scenario)]
                row["runs"] += 1
                row["ok"] += ok
                row["paris"] += named
                row["seconds"] += time.perf_counter() - started
                row["requests"] += len(recorder.log)
                if error:
                    row["errors"].append(error)
                print(f"  {backend:6} {name:6} {scenario:10} seed {seed:2}: {'ok' if ok else 'FAIL'}"
                      f"{' (' + error + ')' if error else ''}", flush=True)
            print_table(table)  # so far (a long run can be read before it ends)


def print_table(table: dict) -> None:
    print(flush=True)
    print("| backend | recipe | scenario | success | answer names Paris | requests/run | s/run |")
    print("|---|---|---|---|---|---|---|")
    for (backend, name, scenario), row in sorted(table.items()):
        if not row["runs"]:
            continue
        runs = row["runs"] or 1
        paris = f"{row['paris']}/{row['runs']}" if scenario != "recall" else "-"
        print(f"| {backend} | {name} | {scenario} | {row['ok']}/{row['runs']} | {paris} | "
              f"{row['requests'] / runs:.1f} | {row['seconds'] / runs:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--temperature", type=float, default=0.3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--backend", choices=("local", "server", "both"), default="both")
    parser.add_argument("--recipes", nargs="+", choices=RECIPES, default=list(RECIPES))
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    args = parser.parse_args()
    chosen = {"recipes": args.recipes, "scenarios": args.scenarios}
    table: dict = defaultdict(lambda: {"runs": 0, "ok": 0, "paris": 0, "seconds": 0.0, "requests": 0, "errors": []})
    if args.backend in ("local", "both"):
        asyncio.run(measure("local", args.seeds, args.temperature, args.max_tokens, None, table, **chosen))
    if args.backend in ("server", "both"):
        from toh_nb.models.serve import start_model_server

        with start_model_server() as server:
            asyncio.run(measure("server", args.seeds, args.temperature, args.max_tokens, server.url, table, **chosen))
    print_table(table)


if __name__ == "__main__":
    main()
