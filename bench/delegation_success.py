"""Delegation success of a small real model (SmolLM2-135M-Instruct), per scenario, recipe and backend.

Issue 32.4: does ``"auto"`` delegate, and which forced recipe works? For each seed (sampling at
``--temperature``, so seeds differ) each scenario runs once on a fresh hub:

- ``foreground``: "Find out what the capital of France is. Delegate it to a subagent …"; success: the
  root called ``subagent`` in the foreground, the child answered, the root then answered (completed, or
  cut by ``max_tokens``) with a non-empty text free of chat markup and HTML escapes;
- ``background``: "Start a subagent in the background …, then read its answer with job_output";
  success: ``subagent`` with ``run_in_background: true``, then ``job_output`` whose result is the
  child's output (not an error), then a clean answer as above (the root's last answer: the run waits
  for the turn a job's completion notice starts);
- ``recall``: a continuable child is told "Remember the word apple …", then ``send("Which word …")``;
  success: the second answer says "apple".

Recipes: ``auto`` (``tool_choice="auto"`` everywhere) and ``forced`` (the root's first step forced to
``subagent``, then ``"none"``; in the background scenario ``job_output`` is forced right after a
background start and at the first step of a turn a job's notice opened: ``background_steps``); on request
``forced-auto`` (foreground: the forced first call, then ``"auto"``: does the model call again?). Backends:
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
from toh_nb.testing import engine_of

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
#: also measurable (``--recipes forced-auto``): the forced first call, then ``"auto"`` at every other step
#: (the tool list stays in every prompt: does the model answer, or call again and again?)
EXTRA_RECIPES = ("forced-auto",)
#: seconds a background run may take to settle (under the server's "auto" every notice's turn started more
#: background children: a run never settled by itself)
SETTLE_SECONDS = 180.0
#: the completion limit of a background child (the root's answers keep ``--max-tokens``)
BACKGROUND_CHILD_TOKENS = 160


def started_job(message) -> bool:
    """A background subagent start: the reference's ``started background subagent job <id>``."""
    return message.role == "tool" and message.tool_name == "subagent" and message.text.startswith(
        "started background subagent job ")


def job_notice(message) -> bool:
    source = message.source
    return message.role == "user" and source is not None and source.plugin == "tool-jobs"


def background_steps(request) -> str:
    """The background recipe: the root's first step starts ``subagent`` with ``run_in_background: true``
    fixed (left to choose, SmolLM2 set it false 12 runs of 13); right after a background start, and at
    the first step of a turn a job's completion notice opened, it calls ``job_output`` (the model fills in
    the id and ``wait``, which the result and the notice name); every other step is text. Through the
    server (``OpenAIChatModel`` forces a tool by name only) the model sets ``run_in_background`` itself."""
    if request.depth > 0:
        return "none"
    if request.turn == 1 and request.step == 1:  # LocalModel: run_in_background fixed (the server: the model's)
        return {"name": "subagent", "arguments": {"run_in_background": True}}
    last = request.messages[-1] if request.messages else None
    if last is not None and (started_job(last) or (request.step == 1 and job_notice(last))):
        return "job_output"
    return "none"


def recipe(name: str, scenario: str):
    if name == "auto":
        return "auto"
    if scenario == "recall":
        return "none"
    if scenario == "background":
        return background_steps

    otherwise = "auto" if name == "forced-auto" else "none"

    def forced(request):
        return "subagent" if request.depth == 0 and request.step == 1 else otherwise
    return forced


async def settle(hub, seconds: float = 300.0) -> None:
    """Wait until no job runs and the root is idle (a job's completion notice wakes the root for a turn)."""
    deadline = time.monotonic() + seconds
    quiet = 0
    while time.monotonic() < deadline:
        busy = any(job["status"] in ("running", "stopping") for job in await hub.jobs())
        quiet = 0 if busy or engine_of(hub).root.status != "idle" else quiet + 1
        if quiet >= 3:
            return
        await asyncio.sleep(0.2)


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
    if callable(choice):  # OpenAIChatModel forces a tool by name: fixed arguments are LocalModel's
        named = choice

        def choice(request):
            chosen = named(request)
            return chosen["name"] if isinstance(chosen, dict) else chosen
    return tn.OpenAIChatModel("smollm2", base_url=url, profile="llama.cpp", tool_choice=choice,
                              temperature=temperature, max_tokens=max_tokens, extra_body={"seed": seed},
                              timeout=120.0, max_retries=0)


def clean(text: str) -> bool:
    return bool(text.strip()) and not DIRTY.search(text)


async def run_one(scenario: str, recorder: Recorder) -> tuple[bool, bool, int]:
    """(success, the root's answer names Paris, the root's subagent calls)."""
    if scenario == "recall":
        async with tn.AsyncHub(tn.FunctionModel(recorder.request), ids="sequential", max_steps=MAX_STEPS,
                               max_depth=MAX_DEPTH) as hub:  # the helper answers; it may not delegate
            kid = await hub.start(REMEMBER, label="helper")
            await kid.wait(timeout=300)
            await kid.send(RECALL)
            await kid.wait(timeout=300)
            answers = [r.text for q, r in recorder.log if q.label == "helper"]
        return len(answers) >= 2 and "apple" in answers[-1].lower(), False, 0
    # a background child cut by max_tokens is a failed job, and job_output gives the root nothing of it (the
    # reference's rule): the background recipe gives children room to finish (SmolLM2 hit 64 tokens often)
    tools = [tn.SubagentTool(enable_run_in_background=True, max_tokens=BACKGROUND_CHILD_TOKENS)
             if scenario == "background" else tn.SubagentTool(enable_run_in_background=False)]
    async with tn.AsyncHub(tn.FunctionModel(recorder.request), ids="sequential", max_steps=MAX_STEPS,
                           max_depth=MAX_DEPTH, delegation_tools=tools) as hub:
        result = await hub.run(DELEGATE if scenario == "foreground" else BACKGROUND)
        if scenario == "background":
            await settle(hub, SETTLE_SECONDS)  # the notice's turn, if the job's notice woke the root
    root = [(q, r) for q, r in recorder.log if q.depth == 0]
    calls = [c for _, r in root for c in r.tool_calls]
    kids = [r for q, r in recorder.log if q.depth == 1]
    named = "paris" in result.text.lower()
    ended = result.stop_reason in ("completed", "max-tokens") and clean(result.text)
    if result.stop_reason == "error":  # a failed backend is not the model's failure: say it, loudly
        raise RuntimeError(f"the root's turn ended error: {result.diagnostic}")
    delegations = sum(c.name == "subagent" for c in calls)
    if scenario == "foreground":
        delegated = any(c.name == "subagent" and not c.arguments.get("run_in_background") for c in calls)
        answered = any(k.text.strip() for k in kids)
        if not (delegated and answered and ended):
            print(f"    why: root subagent calls {delegations}, a child answered {answered}, the root ended "
                  f"{result.stop_reason} with {result.text[:60]!r}", flush=True)
        return delegated and answered and ended, named, delegations
    started = any(c.name == "subagent" and c.arguments.get("run_in_background") is True for c in calls)
    results = [m for q, _ in root for m in q.messages if m.role == "tool" and m.tool_name == "job_output"]
    read = any(not m.is_error and any(k.text.strip() and k.text.strip()[:40] in m.text for k in kids)
               for m in results)
    # the root's last answer (the first turn's, or the one after the job's notice) is clean text
    final = next((r for _, r in reversed(root) if not r.tool_calls), None)
    answered = final is not None and final.stop_reason in ("end_turn", "max_tokens") and clean(final.text)
    if not (started and read and answered):
        outputs = [c.arguments for c in calls if c.name == "job_output"]
        print(f"    why: started={started} read={read} answered={answered}; subagent calls "
              f"{[c.arguments.get('run_in_background') for c in calls if c.name == 'subagent']}; job_output "
              f"{outputs} -> {[m.text[:60] for m in results]}; last answer {final.text[:60] if final else None!r}",
              flush=True)
    return (started and read and answered, named or (final is not None and "paris" in final.text.lower()),
            delegations)


async def measure(backend: str, seeds: int, temperature: float, max_tokens: int, url: str | None, table: dict,
                  recipes=RECIPES, scenarios=SCENARIOS):
    for name in recipes:
        for scenario in scenarios:
            for seed in range(seeds):
                recorder = Recorder(make_model(backend, recipe(name, scenario), seed, temperature, max_tokens, url))
                started = time.perf_counter()
                try:
                    ok, named, delegations = await asyncio.wait_for(run_one(scenario, recorder), 600)
                    error = None
                except Exception as exc:  # a failed run is a failure of the scenario, counted and named
                    ok, named, delegations, error = False, False, 0, f"{type(exc).__name__}: {exc}"[:120]
                row = table[(backend, name, scenario)]
                row["runs"] += 1
                row["ok"] += ok
                row["paris"] += named
                row["seconds"] += time.perf_counter() - started
                row["requests"] += len(recorder.log)
                row["delegations"] += delegations
                if error:
                    row["errors"].append(error)
                print(f"  {backend:6} {name:6} {scenario:10} seed {seed:2}: {'ok' if ok else 'FAIL'}"
                      f"{' (' + error + ')' if error else ''}", flush=True)
            print_table(table)  # so far (a long run can be read before it ends)


def print_table(table: dict) -> None:
    print(flush=True)
    print("| backend | recipe | scenario | success | answer names Paris | root's subagent calls/run | requests/run | s/run |")
    print("|---|---|---|---|---|---|---|---|")
    for (backend, name, scenario), row in sorted(table.items()):
        if not row["runs"]:
            continue
        runs = row["runs"] or 1
        paris = f"{row['paris']}/{row['runs']}" if scenario != "recall" else "-"
        print(f"| {backend} | {name} | {scenario} | {row['ok']}/{row['runs']} | {paris} | "
              f"{row['delegations'] / runs:.1f} | {row['requests'] / runs:.1f} | {row['seconds'] / runs:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--temperature", type=float, default=0.3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--backend", choices=("local", "server", "both"), default="both")
    parser.add_argument("--recipes", nargs="+", choices=RECIPES + EXTRA_RECIPES, default=list(RECIPES))
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    args = parser.parse_args()
    chosen = {"recipes": args.recipes, "scenarios": args.scenarios}
    table: dict = defaultdict(lambda: {"runs": 0, "ok": 0, "paris": 0, "seconds": 0.0, "requests": 0, "delegations": 0,
                                        "errors": []})
    if args.backend in ("local", "both"):
        asyncio.run(measure("local", args.seeds, args.temperature, args.max_tokens, None, table, **chosen))
    if args.backend in ("server", "both"):
        from toh_nb.serve.model import start_model_server

        with start_model_server() as server:
            asyncio.run(measure("server", args.seeds, args.temperature, args.max_tokens, server.url, table, **chosen))
    print_table(table)


if __name__ == "__main__":
    main()
